//! Skills as MCP's skills extension (SEP-2640) serves them, under capability
//! `io.modelcontextprotocol/skills` at every revision: `skills/list`, `skills/get`,
//! `resources/directory/read`, and each file as a resource. rmcp routes the methods, checks
//! every entry against the SEP's rules and sets the caching fields each revision wants; this
//! says what the entries are.
//!
//! - A skill of extension `<ext>` named `<name>` (its frontmatter's) is
//!   `skill://<ext>/<name>/SKILL.md`; its other files are `skill://<ext>/<name>/<path>`, and its
//!   directories `skill://<ext>/<name>[/<path>]` (no trailing slash).
//! - Each entry lists every file with its size and `sha256:` digest, of the bytes
//!   `resources/read` serves ([`yep_host::runtime::SkillTree`]), within the SEP's limits.
//! - `skill://index.json` is the earlier draft's index (the SEP dropped it for `skills/list`),
//!   kept for the clients that read it.
//! - The URIs before this (`skill://<ext>/<name>`, the `SKILL.md` text) stay readable with
//!   `resources/read` for one more release.

use super::{SKILL_SCHEME, from_json};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListResourcesResult, ListSkillsResult,
    PaginatedRequestParams, ReadResourceDirectoryRequestParams,
};
use serde_json::{Value, json};
use yep_host::runtime::{ExtensionHost, SkillTree};
/// The earlier draft's index of every skill.
pub const INDEX_URI: &str = "skill://index.json";
/// What a directory resource's `mimeType` is.
const DIRECTORY: &str = "inode/directory";
/// Which characters stay as they are in a segment of a skill's URI (RFC 3986's unreserved).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

/// A skill's root: `skill://<ext>/<name>`.
fn root(tree: &SkillTree) -> String {
    format!(
        "{SKILL_SCHEME}{}/{}",
        encode(&tree.skill.extension),
        encode(tree.name())
    )
}

/// The URI of `tree`'s file at `path` (`/`-separated).
fn file_uri(tree: &SkillTree, path: &str) -> String {
    let mut uri = root(tree);
    for segment in path.split('/') {
        uri.push('/');
        uri.push_str(&encode(segment));
    }
    uri
}

/// `uri`'s segments after `skill://`, each percent-decoded: however a client spells a
/// character, the same skill. `None` for another scheme or a segment that is not UTF-8.
fn segments(uri: &str) -> Option<Vec<String>> {
    let rest = uri.strip_prefix(SKILL_SCHEME)?;
    let rest = rest.split(['#', '?']).next().unwrap_or_default();
    rest.split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        })
        .collect()
}

/// A skill's entry, as `skills/list` and `skills/get` carry it, or why the SEP's rules refuse
/// it (a name an Agent Skill may not have: capitals, spaces).
fn entry(tree: &SkillTree) -> Result<Value, String> {
    let resources: Vec<Value> = tree
        .files
        .iter()
        .map(|f| json!({"uri": file_uri(tree, &f.path), "digest": f.digest, "size": f.size}))
        .collect();
    let entry = json!({
        "uri": file_uri(tree, "SKILL.md"),
        "frontmatter": tree.frontmatter,
        "resources": resources,
    });
    let skill: rmcp::model::Skill =
        serde_json::from_value(entry.clone()).map_err(|e| e.to_string())?;
    skill.validate().map_err(|e| e.to_string())?;
    // As the SEP's hosts check it (rmcp does not).
    if !(1..=1024).contains(&skill.frontmatter.description.chars().count()) {
        return Err("its description is not 1 to 1024 characters".into());
    }
    Ok(entry)
}

/// The entries of `trees` the SEP's rules let through; the others are warned of.
fn entries(trees: &[SkillTree]) -> Vec<Value> {
    trees
        .iter()
        .filter_map(|t| match entry(t) {
            Ok(entry) => Some(entry),
            Err(e) => {
                tracing::warn!(
                    "skill `{}` of extension `{}` is not listed over MCP: {e}",
                    yep_host::text::escape(t.name()),
                    t.skill.extension
                );
                None
            }
        })
        .collect()
}

/// A result's caching fields, for the revisions that want them (rmcp leaves them out for
/// the others): a package's files change when it is updated, so nothing is kept.
fn cached(mut result: Value) -> Value {
    result["ttlMs"] = json!(0);
    result["cacheScope"] = json!("private");
    result
}

fn invalid(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

/// The host's skills with their files, read on a blocking thread.
async fn trees(host: &ExtensionHost) -> Result<Vec<SkillTree>, McpError> {
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.skill_trees())
        .await
        .map_err(|e| McpError::internal_error(format!("failed to list skills: {e}"), None))
}

/// The skill `uri` names (by its first two segments) and the rest of its segments, read on a
/// blocking thread.
async fn tree_at(
    host: &ExtensionHost,
    uri: &str,
) -> Result<Option<(SkillTree, Vec<String>)>, McpError> {
    let Some(mut parts) = segments(uri).filter(|p| p.len() >= 2) else {
        return Ok(None);
    };
    let rest = parts.split_off(2);
    let (host, extension, name) = (host.clone(), parts.remove(0), parts.remove(0));
    let tree = tokio::task::spawn_blocking(move || host.skill_tree_of(&extension, &name))
        .await
        .map_err(|e| McpError::internal_error(format!("failed to read a skill: {e}"), None))?;
    Ok(tree.map(|t| (t, rest)))
}

/// `skills/list`: every skill, on one page (an entry is never split; there is no cursor).
pub(super) async fn list(
    host: &ExtensionHost,
    request: Option<PaginatedRequestParams>,
) -> Result<ListSkillsResult, McpError> {
    if request.and_then(|r| r.cursor).is_some() {
        return Err(invalid(
            "unknown cursor: skills/list answers on one page".into(),
        ));
    }
    let skills = entries(&trees(host).await?);
    from_json("skills/list", cached(json!({ "skills": skills })))
}

/// `skills/get`: one skill by its `SKILL.md` URI; -32602 for one that is not a skill here.
pub(super) async fn get(
    host: &ExtensionHost,
    request: GetSkillRequestParams,
) -> Result<GetSkillResult, McpError> {
    let uri = request.uri;
    let unknown = || invalid(format!("no skill at {uri}"));
    let (tree, rest) = tree_at(host, &uri).await?.ok_or_else(unknown)?;
    if rest != ["SKILL.md"] {
        return Err(unknown());
    }
    let mut skill = entry(&tree).map_err(|_| unknown())?;
    // Echoed as asked, however the client spelled it.
    skill["uri"] = json!(uri);
    from_json("skills/get", cached(json!({ "skill": skill })))
}

/// `resources/directory/read`: the direct children of a skill's directory (a file, or a
/// directory with `mimeType: inode/directory`); -32602 for a URI that is no directory here.
pub(super) async fn read_directory(
    host: &ExtensionHost,
    request: ReadResourceDirectoryRequestParams,
) -> Result<ListResourcesResult, McpError> {
    let uri = request.uri;
    if request.cursor.is_some() {
        return Err(invalid(
            "unknown cursor: directories are read on one page".into(),
        ));
    }
    let not_a_directory = || invalid(format!("no directory at {uri}"));
    let (tree, dir) = tree_at(host, &uri).await?.ok_or_else(not_a_directory)?;
    let mut seen = std::collections::BTreeSet::new();
    let mut children = Vec::new();
    for file in &tree.files {
        let parts: Vec<&str> = file.path.split('/').collect();
        if parts.len() <= dir.len() || parts[..dir.len()] != dir[..] {
            continue;
        }
        let name = parts[dir.len()];
        let path = parts[..=dir.len()].join("/");
        if parts.len() > dir.len() + 1 {
            if seen.insert(path.clone()) {
                children.push(json!({
                    "uri": file_uri(&tree, &path), "name": name, "mimeType": DIRECTORY,
                }));
            }
        } else {
            let mut child = json!({"uri": file_uri(&tree, &path), "name": name, "size": file.size});
            // A media type only where the name tells (the bytes are not read to list them).
            if let Some(mime) = known_type(&path) {
                child["mimeType"] = json!(mime);
            }
            children.push(child);
        }
    }
    if children.is_empty() {
        return Err(not_a_directory());
    }
    from_json(
        "resources/directory/read",
        cached(json!({ "resources": children })),
    )
}

/// The resources `resources/list` shows: each skill's `SKILL.md` and the index.
pub(super) async fn resources(host: &ExtensionHost) -> Result<Vec<Value>, McpError> {
    let mut out: Vec<Value> = trees(host)
        .await?
        .iter()
        .map(|t| {
            json!({
                "uri": file_uri(t, "SKILL.md"),
                "name": t.name(),
                "description": t.frontmatter.get("description").cloned().unwrap_or_default(),
                "mimeType": "text/markdown",
            })
        })
        .collect();
    out.push(json!({
        "uri": INDEX_URI,
        "name": "index.json",
        "description": "Every skill, with the digest of its SKILL.md (the skills extension's earlier index)",
        "mimeType": "application/json",
    }));
    Ok(out)
}

/// `resources/read` of a skill's file, the index, or a skill by its URI before SEP-2640:
/// the resource's contents, or `None` when `uri` is none of those.
pub(super) async fn read(host: &ExtensionHost, uri: &str) -> Result<Option<Value>, McpError> {
    if uri == INDEX_URI {
        let skills: Vec<Value> = trees(host)
            .await?
            .iter()
            .map(|t| {
                json!({
                    "name": t.name(),
                    "type": "skill-md",
                    "description": t.frontmatter.get("description").cloned().unwrap_or_default(),
                    "url": file_uri(t, "SKILL.md"),
                    "digest": t.files[0].digest,
                })
            })
            .collect();
        let index = json!({
            "$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json",
            "skills": skills,
        });
        return Ok(Some(
            json!({"uri": uri, "mimeType": "application/json", "text": index.to_string()}),
        ));
    }
    let Some((tree, rest)) = tree_at(host, uri).await? else {
        return Ok(None);
    };
    // `skill://<ext>/<name>`: the SKILL.md, as before SEP-2640.
    let path = match rest.is_empty() {
        true => "SKILL.md".to_string(),
        false => rest.join("/"),
    };
    let read = {
        let (tree, path) = (tree.clone(), path.clone());
        tokio::task::spawn_blocking(move || tree.read(&path))
            .await
            .map_err(|e| McpError::internal_error(format!("failed to read a skill: {e}"), None))?
    };
    let Some(bytes) = read else {
        return Ok(None);
    };
    let mime = mime_type(&path, std::str::from_utf8(&bytes).is_ok());
    Ok(Some(match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": uri, "mimeType": mime, "text": text}),
        Err(e) => {
            use base64::Engine;
            let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
            json!({"uri": uri, "mimeType": mime, "blob": blob})
        }
    }))
}

/// A file's media type, by its extension; text or bytes otherwise.
fn mime_type(path: &str, text: bool) -> &'static str {
    match known_type(path) {
        Some(mime) => mime,
        None if text => "text/plain",
        None => "application/octet-stream",
    }
}

/// The media type a file's extension tells.
fn known_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    Some(match extension.as_deref()? {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "py" => "text/x-python",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "sh" => "text/x-shellscript",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_is_read_however_its_segments_are_encoded() {
        assert_eq!(
            segments("skill://x/pdf%2Dforms/ref%20s/a.md#top").unwrap(),
            ["x", "pdf-forms", "ref s", "a.md"]
        );
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("pdf-forms_1.0~"), "pdf-forms_1.0~");
        assert!(segments("file:///etc/passwd").is_none());
    }

    #[test]
    fn a_files_media_type_is_by_its_extension() {
        assert_eq!(mime_type("SKILL.md", true), "text/markdown");
        assert_eq!(mime_type("scripts/fill.PY", true), "text/x-python");
        assert_eq!(mime_type("LICENSE", true), "text/plain");
        assert_eq!(mime_type("blob", false), "application/octet-stream");
    }
}
