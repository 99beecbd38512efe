//! The skills an MCP server offered (MCP's skills extension, SEP-2640), pinned with its
//! approval like its tools: each skill's files are kept under the home
//! (`cache/mcp-skills/<server key>/<skill>/…`), and the server's pin holds each skill's
//! [`skill_hash`]. A session serves the copy kept with the approval, never what the server
//! says later: a skill it changed is a new one to approve.

use crate::mcp::{Origin, cache_key};
use crate::{Home, StoreError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A skill's files: each path under its directory (`/`-separated) and its bytes.
pub type SkillFiles = Vec<(String, Vec<u8>)>;

/// Where server `name` at `origin`'s approved skills are kept.
pub fn skills_dir(home: &Home, name: &str, origin: &Origin) -> PathBuf {
    home.root
        .join("cache")
        .join("mcp-skills")
        .join(cache_key(name, origin))
}

/// A skill's hash: of each file's path and sha256 digest, in order.
pub fn skill_hash(files: &[(String, Vec<u8>)]) -> String {
    let mut listing = String::new();
    for (path, bytes) in files {
        listing.push_str(path);
        listing.push('\0');
        listing.push_str(&crate::hash::sha256_hex(bytes));
        listing.push('\n');
    }
    crate::hash::sha256_hex(listing.as_bytes())
}

/// Whether `name` can be a directory of its own: no separator, no `.` or `..`, no NUL (a
/// name SEP-2640 allows always can).
fn plain(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Keep `skills` (each a name and its files, paths relative and plain) as server `name` at
/// `origin`'s approved skills, in place of any kept before: written whole beside the old
/// copy, then swapped in. Their hashes, by name, for the pin.
pub fn keep(
    home: &Home,
    name: &str,
    origin: &Origin,
    skills: &[(String, SkillFiles)],
) -> Result<BTreeMap<String, String>, StoreError> {
    let dir = skills_dir(home, name, origin);
    let fresh = dir.with_extension(format!("new-{}", std::process::id()));
    let io = |what: &Path| crate::io(format!("failed to write {}", what.display()));
    let _ = std::fs::remove_dir_all(&fresh);
    let mut pinned = BTreeMap::new();
    for (skill, files) in skills {
        if !plain(skill) || pinned.contains_key(skill) {
            continue;
        }
        for (path, bytes) in files {
            if !path.split('/').all(plain) {
                continue;
            }
            let file = fresh.join(skill).join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::write(&file, bytes).map_err(io(&file))?;
        }
        pinned.insert(skill.clone(), skill_hash(files));
    }
    if pinned.is_empty() {
        let _ = std::fs::remove_dir_all(&fresh);
        let _ = crate::fsutil::remove_tree(&dir);
        return Ok(pinned);
    }
    let old = dir.with_extension(format!("old-{}", std::process::id()));
    let _ = std::fs::rename(&dir, &old);
    std::fs::rename(&fresh, &dir).map_err(io(&dir))?;
    let _ = crate::fsutil::remove_tree(&old);
    Ok(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_skills_replace_the_old_copy_and_no_path_leaves_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home {
            root: tmp.path().join("home"),
        };
        let origin = Origin::Home;
        let files = |text: &str| {
            vec![
                ("SKILL.md".to_string(), text.as_bytes().to_vec()),
                ("../escape.md".to_string(), b"no".to_vec()),
            ]
        };
        let first = keep(&home, "s", &origin, &[("notes".into(), files("one"))]).unwrap();
        let dir = skills_dir(&home, "s", &origin);
        assert_eq!(
            std::fs::read_to_string(dir.join("notes/SKILL.md")).unwrap(),
            "one"
        );
        assert!(
            !dir.join("escape.md").exists() && !dir.parent().unwrap().join("escape.md").exists()
        );
        let second = keep(&home, "s", &origin, &[("todo".into(), files("two"))]).unwrap();
        assert!(!dir.join("notes").exists());
        assert_ne!(first.values().next(), second.values().next());
        assert!(
            keep(&home, "s", &origin, &[("..".into(), files("x"))])
                .unwrap()
                .is_empty()
        );
        assert!(!dir.exists());
    }
}
