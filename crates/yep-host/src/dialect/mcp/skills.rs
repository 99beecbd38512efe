//! The skills an MCP server offers (SEP-2640), read as a host should: every entry checked
//! against the SEP's rules (rmcp's), every file read and checked against its entry's size and
//! digest, the `SKILL.md` against the entry's frontmatter, and all of it within the SEP's
//! limits. An entry that fails a check is left out, with a warning; a file path that would
//! leave the skill's directory fails its skill.

use crate::dialect::{FetchedSkill, PeerError};
use crate::store::skill::{FrontmatterError, SKILL_MAX_BYTES, SKILL_MAX_FILES, skill_frontmatter};
use rmcp::model::{ReadResourceRequestParams, ResourceContents, SkillResources};
use rmcp::service::{Peer as RmcpPeer, RoleClient};
use serde_json::Value;
use std::time::Duration;

/// Why one of a server's skills is left out.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("its entry breaks the SEP's rules: {0}")]
    Invalid(#[from] rmcp::model::SkillValidationError),
    #[error("its files are \"dynamic\": nothing to pin")]
    Dynamic,
    #[error("it has more than {SKILL_MAX_FILES} files")]
    TooMany,
    #[error("its files are over {} MiB", SKILL_MAX_BYTES >> 20)]
    TooLarge,
    #[error(
        "the server's skills are over {} MiB together: the rest are left out",
        MAX_TOTAL_BYTES >> 20
    )]
    PastTheServersBudget,
    #[error("{0} is not a file under the skill's directory")]
    Outside(String),
    #[error("reading {uri} failed: {why}")]
    Read { uri: String, why: String },
    #[error("{0} had no contents")]
    Empty(String),
    #[error(transparent)]
    Integrity(#[from] rmcp::model::SkillIntegrityError),
    #[error("its SKILL.md is not UTF-8 text")]
    NotText,
    #[error("its SKILL.md: {0}")]
    Frontmatter(#[from] FrontmatterError),
    #[error("its SKILL.md has no frontmatter, or not the one skills/list gave")]
    OtherFrontmatter,
    #[error("it lists no SKILL.md")]
    NoSkillMd,
}

/// The most skills one server has read.
const MAX_SKILLS: usize = 256;

/// The most bytes of skills one server has read, all its skills together: each is held in
/// memory until it is kept, and a server that lists many large ones must not exhaust it.
const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;

/// `peer`'s skills, each read whole, all of it within `timeout`. A server that does not
/// declare the extension has none.
pub(super) async fn fetch(
    peer: &RmcpPeer<RoleClient>,
    extension: &str,
    timeout: Duration,
) -> Result<Vec<FetchedSkill>, PeerError> {
    let offers = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.supports_skills());
    if !offers {
        return Ok(Vec::new());
    }
    let failed = |what: String| super::failed("skills/list", what);
    let work = async {
        let listed = peer
            .list_all_skills()
            .await
            .map_err(|e| failed(format!("skills/list failed: {e}")))?;
        let mut skills = Vec::new();
        let mut budget = MAX_TOTAL_BYTES;
        for skill in listed.into_iter().take(MAX_SKILLS) {
            let name = skill.name().to_string();
            match read_skill(peer, &skill, &mut budget).await {
                Ok(files) => skills.push(FetchedSkill { name, files }),
                Err(why) => tracing::warn!(
                    "MCP server `{extension}`: skill `{}` is left out: {why}",
                    crate::text::escape(&name)
                ),
            }
        }
        Ok(skills)
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        failed(format!(
            "its skills were not read within {} ms",
            timeout.as_millis()
        ))
    })?
}

/// Every file of `skill`, checked, as (path under the skill's directory, bytes).
async fn read_skill(
    peer: &RmcpPeer<RoleClient>,
    skill: &rmcp::model::Skill,
    budget: &mut u64,
) -> Result<Vec<(String, Vec<u8>)>, Refused> {
    skill.validate()?;
    let SkillResources::Files(entries) = &skill.resources else {
        return Err(Refused::Dynamic);
    };
    if entries.len() > SKILL_MAX_FILES {
        return Err(Refused::TooMany);
    }
    // What it says it holds, before any of it is read (each file is held to its size).
    let declared = entries
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.size));
    if declared > SKILL_MAX_BYTES {
        return Err(Refused::TooLarge);
    }
    if declared > *budget {
        return Err(Refused::PastTheServersBudget);
    }
    *budget -= declared;
    let root = skill.uri.strip_suffix("SKILL.md").unwrap_or(&skill.uri);
    let mut files = Vec::new();
    for entry in entries {
        let path = relative(root, &entry.uri).ok_or_else(|| Refused::Outside(entry.uri.clone()))?;
        let read = peer
            .read_resource(ReadResourceRequestParams::new(entry.uri.clone()))
            .await
            .map_err(|e| Refused::Read {
                uri: entry.uri.clone(),
                why: e.to_string(),
            })?;
        let bytes = match read.contents.into_iter().next() {
            Some(ResourceContents::TextResourceContents { text, .. }) => text.into_bytes(),
            Some(ResourceContents::BlobResourceContents { blob, .. }) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| Refused::Read {
                        uri: entry.uri.clone(),
                        why: format!("not base64: {e}"),
                    })?
            }
            _ => return Err(Refused::Empty(entry.uri.clone())),
        };
        entry.verify(&bytes)?;
        if path == "SKILL.md" {
            check_frontmatter(&bytes, skill)?;
        }
        files.push((path, bytes));
    }
    // `SKILL.md` first, as yep keeps a skill's files.
    files.sort_by_key(|(path, _)| path != "SKILL.md");
    if files.first().is_none_or(|(path, _)| path != "SKILL.md") {
        return Err(Refused::NoSkillMd);
    }
    Ok(files)
}

/// The `SKILL.md`'s frontmatter is the entry's, field by field.
fn check_frontmatter(bytes: &[u8], skill: &rmcp::model::Skill) -> Result<(), Refused> {
    let text = std::str::from_utf8(bytes).map_err(|_| Refused::NotText)?;
    let (read, _) = skill_frontmatter(text)?.ok_or(Refused::OtherFrontmatter)?;
    let listed = serde_json::to_value(&skill.frontmatter).unwrap_or_default();
    match Value::Object(read) == listed {
        true => Ok(()),
        false => Err(Refused::OtherFrontmatter),
    }
}

/// `uri`'s path under `root` (which ends in `/`), percent-decoded, when it is a plain relative
/// path: no empty, `.` or `..` segment, no backslash, no NUL.
fn relative(root: &str, uri: &str) -> Option<String> {
    let rest = uri.strip_prefix(root)?;
    let mut segments = Vec::new();
    for raw in rest.split('/') {
        let segment = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .ok()?
            .into_owned();
        let plain = !segment.is_empty()
            && segment != "."
            && segment != ".."
            && !segment.contains(['/', '\\', '\0']);
        if !plain {
            return None;
        }
        segments.push(segment);
    }
    Some(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_path_stays_under_its_skill() {
        let root = "skill://notes/";
        assert_eq!(
            relative(root, "skill://notes/SKILL.md").unwrap(),
            "SKILL.md"
        );
        assert_eq!(
            relative(root, "skill://notes/a%20b/c.md").unwrap(),
            "a b/c.md"
        );
        for bad in [
            "skill://notes/../x",
            "skill://notes/%2E%2E/x",
            "skill://notes/a//b",
            "skill://notes/a%2Fb",
            "skill://other/x",
            "skill://notes/",
        ] {
            assert_eq!(relative(root, bad), None, "{bad}");
        }
    }
}
