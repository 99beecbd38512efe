//! A skill's whole directory, as MCP's skills extension (SEP-2640) hands it out: every file with
//! its size and `sha256:` digest, and the `SKILL.md` frontmatter as JSON. `yep mcp serve`
//! serves these; yep's MCP client checks a server's skills with the same two functions
//! ([`skill_digest`], [`skill_frontmatter`]).
//!
//! What a package's skill directory may hold is bounded: at most [`SKILL_MAX_FILES`] files and
//! [`SKILL_MAX_BYTES`] in all (the SEP's interoperability limits), regular files only (no link
//! is followed, no FIFO opened), dot files left out, and a nested skill (a directory with a
//! `SKILL.md` of its own) is a skill of its own, not files of its parent.

use super::ExtensionHost;
use super::contrib::Skill;
pub use crate::store::skill::{
    Frontmatter, FrontmatterError, SKILL_MAX_BYTES, SKILL_MAX_FILES, skill_digest,
    skill_frontmatter,
};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How deep a skill's directories are walked.
const MAX_DEPTH: usize = 8;

/// One file of a skill.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    /// Its path under the skill's directory, `/`-separated (`SKILL.md`, `references/forms.md`).
    pub path: String,
    pub size: u64,
    /// `sha256:` and 64 lowercase hex digits, of the bytes served.
    pub digest: String,
}

/// One skill with its files, as served.
#[derive(Debug, Clone)]
pub struct SkillTree {
    pub skill: Skill,
    /// The `SKILL.md` frontmatter as JSON, with `name` and `description` always present.
    pub frontmatter: Map<String, Value>,
    /// Every file, `SKILL.md` first.
    pub files: Vec<SkillFile>,
    /// The skill's directory (where `SKILL.md` is).
    dir: PathBuf,
    /// The `SKILL.md` served: the file, or the file with the `name` and `description` the
    /// host gave it written into its frontmatter when it lacked them.
    skill_md: String,
}

impl SkillTree {
    /// Its name, as its frontmatter says.
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The bytes of the file at `path` (as listed in [`SkillTree::files`]), read again and
    /// checked against its listed size and digest: `None` for a file not listed, gone,
    /// swapped or changed since.
    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        let listed = self.files.iter().find(|f| f.path == path)?;
        let bytes = match path {
            "SKILL.md" => self.skill_md.clone().into_bytes(),
            _ => read_file(&self.dir.join(path), listed.size).ok()?,
        };
        (skill_digest(&bytes) == listed.digest).then_some(bytes)
    }
}

/// `text` with `name` and `description` in its frontmatter, as the host knows the skill:
/// unchanged (but for a byte order mark) when the frontmatter has both as strings, else with the missing ones written in
/// (as JSON strings, which YAML reads as they are), and a frontmatter made when it has none.
/// The frontmatter as JSON comes with it.
fn served_skill_md(text: &str, skill: &Skill) -> Result<(String, Frontmatter), FrontmatterError> {
    let (mut frontmatter, has_block) = match skill_frontmatter(text)? {
        Some((map, _)) => (map, true),
        None => (Map::new(), false),
    };
    let mut missing = String::new();
    let description = match skill.description.is_empty() {
        true => described(text, skill),
        false => skill.description.clone(),
    };
    for (key, value) in [("name", &skill.name), ("description", &description)] {
        match frontmatter.get(key) {
            Some(Value::String(_)) => {}
            Some(_) => return Err(FrontmatterError::NotText(key)),
            None => {
                frontmatter.insert(key.into(), Value::String(value.clone()));
                missing.push_str(&format!("{key}: {}\n", Value::String(value.clone())));
            }
        }
    }
    // Served without a byte order mark: a client looks for `---` first.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if missing.is_empty() {
        return Ok((text.to_string(), frontmatter));
    }
    let served = match has_block {
        true => {
            let (first, rest) = text.split_at(text.find('\n').map_or(text.len(), |i| i + 1));
            format!("{first}{missing}{rest}")
        }
        false => format!("---\n{missing}---\n{text}"),
    };
    Ok((served, frontmatter))
}

/// A description for a skill whose frontmatter has none (the SEP wants 1 to 1024
/// characters): the first line of its text that is not a heading, else what it is.
fn described(text: &str, skill: &Skill) -> String {
    let body = match skill_frontmatter(text) {
        Ok(Some((_, body))) => body,
        _ => text,
    };
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && l.chars().any(char::is_alphanumeric));
    match line {
        Some(line) => line.chars().take(1024).collect(),
        None => format!("Skill {} of extension {}", skill.name, skill.extension),
    }
}

/// The bytes of a regular file of at most `cap` bytes, no link followed.
fn read_file(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use crate::store::fsutil::{Links, read_regular};
    read_regular(path, cap, Links::Refuse)
}

/// The files under `dir` (relative, `/`-separated, sorted), within the limits: dot files,
/// links, other kinds and nested skills' directories left out. What is over a limit is left
/// out and said in `over`.
fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<(String, PathBuf)>, over: &mut bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
            continue;
        };
        let Ok(kind) = e.file_type() else {
            continue;
        };
        let path = e.path();
        let rel = format!("{prefix}{name}");
        if kind.is_dir() {
            if path.join("SKILL.md").exists() {
                continue;
            }
            if depth >= MAX_DEPTH {
                *over = true;
                continue;
            }
            walk(&path, &format!("{rel}/"), depth + 1, out, over);
        } else if kind.is_file() && rel != "SKILL.md" {
            if out.len() >= SKILL_MAX_FILES {
                *over = true;
                return;
            }
            out.push((rel, path));
        }
    }
}

impl ExtensionHost {
    /// Every skill [`ExtensionHost::skills`] lists, with its files and their digests. A skill
    /// whose frontmatter cannot be read as JSON is left out with a warning; files over the
    /// limits are left out with one. Reads every file: call it off the async workers.
    pub fn skill_trees(&self) -> Vec<SkillTree> {
        self.skills()
            .into_iter()
            .filter_map(|skill| self.skill_tree(skill))
            .collect()
    }

    /// The skill of extension `extension` whose frontmatter names it `name`, with its files.
    pub fn skill_tree_of(&self, extension: &str, name: &str) -> Option<SkillTree> {
        self.skills()
            .into_iter()
            .filter(|s| s.extension == extension)
            .filter_map(|s| self.skill_tree(s))
            .find(|t| t.name() == name)
    }

    fn skill_tree(&self, skill: Skill) -> Option<SkillTree> {
        let warn = |what: String| {
            self.warn(format!(
                "extension `{}`: skill `{}` {what}",
                skill.extension, skill.name
            ))
        };
        let text = match read_file(&skill.path, super::contrib::MAX_SKILL_BYTES) {
            Ok(bytes) => String::from_utf8(bytes).ok()?,
            Err(_) => return None,
        };
        let (skill_md, frontmatter) = match served_skill_md(&text, &skill) {
            Ok(served) => served,
            Err(e) => {
                warn(format!("is not served over MCP: {e}"));
                return None;
            }
        };
        let dir = skill.path.parent()?.to_path_buf();
        let mut files = vec![SkillFile {
            path: "SKILL.md".into(),
            size: skill_md.len() as u64,
            digest: skill_digest(skill_md.as_bytes()),
        }];
        let (mut found, mut over) = (Vec::new(), false);
        walk(&dir, "", 0, &mut found, &mut over);
        let mut total = skill_md.len() as u64;
        for (rel, path) in found {
            if files.len() >= SKILL_MAX_FILES {
                over = true;
                break;
            }
            let Ok(bytes) = read_file(&path, SKILL_MAX_BYTES - total.min(SKILL_MAX_BYTES)) else {
                over = true;
                continue;
            };
            total += bytes.len() as u64;
            files.push(SkillFile {
                path: rel,
                size: bytes.len() as u64,
                digest: skill_digest(&bytes),
            });
        }
        if over {
            warn(format!(
                "has files past the limits ({SKILL_MAX_FILES} files, {} MiB, {MAX_DEPTH} levels, \
                 regular files): those are not served",
                SKILL_MAX_BYTES >> 20
            ));
        }
        Some(SkillTree {
            skill,
            frontmatter,
            files,
            dir,
            skill_md,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, description: &str) -> Skill {
        Skill {
            name: name.into(),
            description: description.into(),
            scope: "ext:x".into(),
            extension: "x".into(),
            path: PathBuf::from("/nowhere/SKILL.md"),
        }
    }

    #[test]
    fn a_missing_name_or_description_is_written_into_what_is_served() {
        let full = "---\nname: a\ndescription: b\n---\nbody";
        let (served, _) = served_skill_md(full, &skill("a", "b")).unwrap();
        assert_eq!(served, full);
        let (served, map) =
            served_skill_md("---\ndescription: d\n---\nbody", &skill("dir: x", "d")).unwrap();
        assert_eq!(served, "---\nname: \"dir: x\"\ndescription: d\n---\nbody");
        let (again, _) = skill_frontmatter(&served).unwrap().unwrap();
        assert_eq!(again, map);
        let (served, _) = served_skill_md("just text", &skill("t", "")).unwrap();
        assert_eq!(
            served,
            "---\nname: \"t\"\ndescription: \"just text\"\n---\njust text"
        );
        let (served, _) = served_skill_md("# Title\n", &skill("t", "")).unwrap();
        assert_eq!(
            served,
            "---\nname: \"t\"\ndescription: \"Skill t of extension x\"\n---\n# Title\n"
        );
        assert!(served_skill_md("---\nname: [1]\n---\n", &skill("t", "")).is_err());
    }
}
