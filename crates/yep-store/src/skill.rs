//! A skill's files as MCP's skills extension (SEP-2640) describes them: the `sha256:` digest
//! of a file, the `SKILL.md` frontmatter as JSON, and the SEP's limits. yep serves its
//! skills with these and checks an MCP server's with them.

use serde_json::{Map, Value};
use sha2::Digest;

/// The most files one skill serves (the SEP's `SKILL_LIMITS.files`).
pub const SKILL_MAX_FILES: usize = 512;
/// The most bytes one skill serves, its files together (the SEP's `SKILL_LIMITS.bytes`).
pub const SKILL_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// A `SKILL.md` frontmatter as JSON.
pub type Frontmatter = Map<String, Value>;

/// `sha256:` and the lowercase hex digest of `bytes`, as SEP-2640 spells a file's digest.
pub fn skill_digest(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let hash = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash.iter() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The frontmatter of a `SKILL.md` (the YAML between its first two `---` lines, a BOM and
/// CRLF line ends allowed) as a JSON object, and the markdown after it. `Ok(None)` when the
/// text has no frontmatter; an error when it has one that is not a YAML mapping JSON can hold.
pub fn skill_frontmatter(text: &str) -> Result<Option<(Frontmatter, &str)>, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok(None);
    };
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((yaml_end, body_start)) = end else {
        return Err(FrontmatterError::Unclosed);
    };
    let yaml = &rest[..yaml_end];
    let value: Value = match yaml.trim().is_empty() {
        true => Value::Object(Map::new()),
        false => {
            serde_yaml_ng::from_str(yaml).map_err(|e| FrontmatterError::NotYaml(e.to_string()))?
        }
    };
    match value {
        Value::Object(map) => Ok(Some((map, &rest[body_start..]))),
        Value::Null => Ok(Some((Map::new(), &rest[body_start..]))),
        _ => Err(FrontmatterError::NotMapping),
    }
}

/// Why a `SKILL.md`'s frontmatter cannot be read as JSON.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FrontmatterError {
    #[error("its frontmatter has no closing `---` line")]
    Unclosed,
    #[error("its frontmatter is not YAML that JSON can hold: {0}")]
    NotYaml(String),
    #[error("its frontmatter is not a mapping")]
    NotMapping,
    #[error("its frontmatter's `{0}` is not a string")]
    NotText(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_sha256_in_lowercase_hex() {
        assert_eq!(
            skill_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn frontmatter_is_read_as_yaml_into_json() {
        let text = "\u{feff}---\r\nname: pdf\r\ndescription: \"Fill: forms\"\r\nallowed-tools: [Read, Bash]\r\nversion: 2\r\n---\r\n# Body\r\n";
        let (map, body) = skill_frontmatter(text).unwrap().unwrap();
        assert_eq!(
            Value::Object(map),
            serde_json::json!({"name": "pdf", "description": "Fill: forms",
                "allowed-tools": ["Read", "Bash"], "version": 2})
        );
        assert_eq!(body, "# Body\r\n");
        assert_eq!(skill_frontmatter("# none").unwrap(), None);
        assert!(skill_frontmatter("---\nname: x\n").is_err());
        assert!(skill_frontmatter("---\n- a\n---\n").is_err());
    }
}
