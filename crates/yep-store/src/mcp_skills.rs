//! The skills an MCP server offered (MCP's skills extension, SEP-2640), pinned with its
//! approval like its tools: each skill's files are kept under the home
//! (`cache/mcp-skills/<server key>/<skill>/…`), and the server's pin holds each skill's
//! [`skill_hash`]. A session serves the copy kept with the approval, never what the server
//! says later: a skill it changed is a new one to approve.

use crate::mcp::{Origin, cache_key};
use crate::{Home, StoreError};
use std::collections::BTreeMap;
use std::path::PathBuf;

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

/// Keep `skills` (each a name and its files, paths relative and plain) as server `name` at
/// `origin`'s approved skills, in place of any kept before ([`crate::snapshot::keep`]). Their
/// hashes, by name, for the pin. A skill whose name is not one path segment is left out.
pub fn keep(
    home: &Home,
    name: &str,
    origin: &Origin,
    skills: &[(String, SkillFiles)],
) -> Result<BTreeMap<String, String>, StoreError> {
    let dir = skills_dir(home, name, origin);
    let mut pinned = BTreeMap::new();
    let mut files = Vec::new();
    for (skill, skill_files) in skills {
        if skill.contains('/') || !crate::snapshot::plain(skill) || pinned.contains_key(skill) {
            continue;
        }
        for (path, bytes) in skill_files {
            files.push((format!("{skill}/{path}"), bytes.clone()));
        }
        pinned.insert(skill.clone(), skill_hash(skill_files));
    }
    match pinned.is_empty() {
        true => {
            let _ = crate::fsutil::remove_tree(&dir);
        }
        false => crate::snapshot::keep(&dir, &files)?,
    }
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
