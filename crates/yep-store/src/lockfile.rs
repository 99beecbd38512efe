//! `extensions.lock`: what the user approved, one entry per extension, sorted by name.

use super::fsutil::{MODE_DEFAULT, write_atomic};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where an installed package came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LockSource {
    Git {
        url: String,
        /// The resolved commit.
        rev: String,
        /// The package's directory in the repository, when it is not the root.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subdir: Option<String>,
    },
    Path {
        path: String,
        /// Referenced in place (`--link`), not copied.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        link: bool,
    },
    Crate {
        crate_name: String,
        version: String,
        /// The `.crate` file's SHA-256, as the index gave it.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        checksum: String,
    },
}

impl LockSource {
    /// Whether two sources name the same package origin: the same directory, repository or
    /// crate, whatever the revision or version. A different origin is a different package.
    pub fn same_origin(&self, other: &LockSource) -> bool {
        match (self, other) {
            (LockSource::Path { path: a, .. }, LockSource::Path { path: b, .. }) => a == b,
            (
                LockSource::Git {
                    url: a, subdir: x, ..
                },
                LockSource::Git {
                    url: b, subdir: y, ..
                },
            ) => a.trim_end_matches('/') == b.trim_end_matches('/') && x == y,
            (LockSource::Crate { crate_name: a, .. }, LockSource::Crate { crate_name: b, .. }) => {
                crate_key(a) == crate_key(b)
            }
            _ => false,
        }
    }
}

/// crates.io treats names case-insensitively and `-` and `_` as the same.
fn crate_key(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

impl std::fmt::Display for LockSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // A lock may be corrupt or planted: cut by characters, never inside one.
            LockSource::Git { url, rev, subdir } => {
                write!(f, "git {url}@{}", rev.chars().take(12).collect::<String>())?;
                match subdir {
                    Some(subdir) => write!(f, " ({subdir})"),
                    None => Ok(()),
                }
            }
            LockSource::Path { path, link: true } => write!(f, "link {path}"),
            LockSource::Path { path, .. } => write!(f, "path {path}"),
            LockSource::Crate {
                crate_name,
                version,
                ..
            } => write!(f, "crates.io {crate_name}@{version}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockEntry {
    pub name: String,
    /// What format the package is written in, recorded at every install; a lock written
    /// before yep recorded it has none, and [`LockEntry::kind`] reads it from the pins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::approval::kind::PackageKind>,
    pub source: LockSource,
    pub content_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The manifest as approved (every install records it; older locks may lack it): updates
    /// are diffed against it, the runtime clamps to it, and drift is judged against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_manifest: Option<String>,
    /// A prebuilt server binary placed after hashing, pinned on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<LockBinary>,
    /// A zot extension (`extension.json`): what its first run registered beyond its tools
    /// and commands. Its presence is what says the package speaks zot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zot: Option<crate::zot::ZotPin>,
    /// A Claude Code, Codex or Agent Plugins package: its hooks, commands and the rest of
    /// what was approved beyond its manifest. Its presence is what says the package is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude: Option<crate::claude::ClaudePin>,
}

/// A file added to a package after its content was hashed (the prebuilt server binary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockBinary {
    /// Relative to the package, with `/`.
    pub path: String,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
}

impl LockEntry {
    /// What format the package is written in: as recorded, else as its pins say (a zot pin
    /// makes a zot extension, a plugin pin a plugin of its kind).
    pub fn kind(&self) -> crate::approval::kind::PackageKind {
        use crate::approval::kind::PackageKind;
        self.kind
            .unwrap_or_else(|| match (&self.zot, &self.claude) {
                (Some(_), _) => PackageKind::Zot,
                (None, Some(pin)) => pin.kind.into(),
                (None, None) => PackageKind::Yep,
            })
    }

    /// Referenced in place (`--link`): its files are the author's and change under the home.
    pub fn is_linked(&self) -> bool {
        matches!(self.source, LockSource::Path { link: true, .. })
    }

    /// The file its manifest is: a zot extension's `extension.json`, a Claude Code or Codex
    /// plugin's `.claude-plugin/plugin.json` or `.codex-plugin/plugin.json` (a Claude Code
    /// plugin with none has its directory layout), else `plugin.json`.
    pub fn manifest_file(&self) -> &'static str {
        use crate::approval::kind::PackageKind;
        let manifest_less = self.claude.as_ref().filter(|pin| pin.manifest_less);
        match self.kind() {
            PackageKind::Zot => crate::zot::ZOT_MANIFEST_FILE,
            PackageKind::Claude => match manifest_less {
                Some(pin) if pin.marketplace.is_some() => "its marketplace entry",
                Some(_) => "its directory layout",
                None => crate::claude::CLAUDE_MANIFEST_FILE,
            },
            PackageKind::Codex => crate::claude::CODEX_MANIFEST_FILE,
            PackageKind::AgentPlugin | PackageKind::Yep | PackageKind::Mcp => {
                crate::manifest::MANIFEST_FILE
            }
        }
    }

    /// The approved manifest, if recorded.
    pub fn approved(&self) -> Option<crate::manifest::Manifest> {
        let text = self.approved_manifest.as_deref()?;
        crate::manifest::Manifest::parse_approval(text, std::path::Path::new("extensions.lock"))
            .ok()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    #[serde(default)]
    pub extensions: Vec<LockEntry>,
    /// The tool lists of approved MCP servers (`[[mcp]]`), one per server and workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<crate::mcp::McpPin>,
    /// What the user granted beyond a package's own manifest (`yep grant`, `yep mcp add
    /// --grant`, `yep trust --grant`), one per extension or MCP server (and workspace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<GrantPin>,
    /// Workspaces' own Claude Code config, approved with `yep trust project` (`[[projects]]`),
    /// one per workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<crate::claude::project::ProjectPin>,
}

/// Sandbox grants the user gave an extension or MCP server (`[[grants]]`): they widen its
/// profile beyond what its manifest asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantPin {
    /// The extension, or the MCP server as `yep mcp list` names it.
    pub name: String,
    /// For a workspace's MCP server, the workspace (a grant there is for that one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub sandbox: crate::grants::SandboxGrants,
}

/// Why the lock could not be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to read {path}: {message}")]
pub struct LockError {
    pub path: String,
    pub message: String,
}

impl Lockfile {
    /// Read the lock; a missing file is an empty lock, a corrupt one an error (never silently
    /// empty: the next write would forget every approval).
    pub fn load(path: &Path) -> Result<Lockfile, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lockfile::default()),
            Err(e) => {
                return Err(LockError {
                    path: path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        let lock: Lockfile = toml::from_str(&text).map_err(|e| LockError {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        // Names become paths (`extensions/<name>`, `state/<name>.verified`): a planted
        // `../../x` must never reach one.
        if let Some(bad) = lock
            .extensions
            .iter()
            .find(|e| !crate::manifest::valid_name(&e.name))
        {
            return Err(LockError {
                path: path.display().to_string(),
                message: format!(
                    "entry {} is not an extension name (A-Z a-z 0-9 _ -); the lock is refused",
                    crate::text::escape(&format!("{:?}", bad.name))
                ),
            });
        }
        // A hand-edited grant is held to the rules `yep grant` applies.
        if let Some((pin, why)) = lock
            .grants
            .iter()
            .find_map(|g| g.sandbox.validate().err().map(|why| (g, why)))
        {
            return Err(LockError {
                path: path.display().to_string(),
                message: format!(
                    "the grants of {} are refused: {why}",
                    crate::text::escape(&pin.name)
                ),
            });
        }
        Ok(lock)
    }

    /// What the user granted `name` (in `workspace`, for a workspace's MCP server).
    pub fn granted(&self, name: &str, workspace: Option<&str>) -> crate::grants::SandboxGrants {
        self.grants
            .iter()
            .find(|g| g.name == name && g.workspace.as_deref() == workspace)
            .map(|g| g.sandbox.clone())
            .unwrap_or_default()
    }

    /// Set what the user granted `name` (none removes the entry).
    pub fn set_granted(
        &mut self,
        name: &str,
        workspace: Option<&str>,
        sandbox: crate::grants::SandboxGrants,
    ) {
        self.grants
            .retain(|g| !(g.name == name && g.workspace.as_deref() == workspace));
        if !sandbox.is_empty() {
            self.grants.push(GrantPin {
                name: name.to_string(),
                workspace: workspace.map(String::from),
                sandbox,
            });
        }
    }

    pub fn get(&self, name: &str) -> Option<&LockEntry> {
        self.extensions.iter().find(|e| e.name == name)
    }

    pub fn upsert(&mut self, entry: LockEntry) {
        self.extensions.retain(|e| e.name != entry.name);
        self.extensions.push(entry);
        self.extensions.sort_by(|a, b| a.name.cmp(&b.name));
    }

    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.extensions.len();
        self.extensions.retain(|e| e.name != name);
        before != self.extensions.len()
    }

    /// The file's bytes, deterministic for the same entries.
    pub fn render(&self) -> String {
        let mut sorted = self.clone();
        sorted.extensions.sort_by(|a, b| a.name.cmp(&b.name));
        sorted
            .mcp
            .sort_by(|a, b| (&a.name, &a.workspace).cmp(&(&b.name, &b.workspace)));
        sorted
            .grants
            .sort_by(|a, b| (&a.name, &a.workspace).cmp(&(&b.name, &b.workspace)));
        let body = toml::to_string(&sorted).unwrap_or_default();
        format!("# Written by yep: what was approved. Do not edit by hand.\n{body}")
    }

    /// Write atomically, and only when the content changed.
    pub fn save(&self, path: &Path) -> std::io::Result<bool> {
        write_atomic(path, self.render().as_bytes(), MODE_DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_sorted_with_tagged_sources() {
        let mut lock = Lockfile::default();
        lock.upsert(LockEntry {
            kind: None,
            name: "zeta".into(),
            source: LockSource::Crate {
                crate_name: "yep-extension-zeta".into(),
                version: "1.0.0".into(),
                checksum: "ab".into(),
            },
            content_hash: "sha256:00".into(),
            version: Some("1.0.0".into()),
            approved_manifest: None,
            binary: None,
            zot: None,
            claude: None,
        });
        lock.upsert(LockEntry {
            kind: None,
            name: "alpha".into(),
            source: LockSource::Git {
                url: "file:///r".into(),
                rev: "deadbeef".into(),
                subdir: None,
            },
            content_hash: "sha256:11".into(),
            version: None,
            approved_manifest: None,
            binary: None,
            // A zot extension's pin, and one with nothing in it: both come back as they were.
            zot: Some(crate::zot::ZotPin {
                intercepts: vec!["tool_call".into()],
                events: vec!["session_start".into(), "turn_end".into()],
                capabilities: vec!["call_tool".into()],
                interactive: vec!["pick".into()],
            }),
            claude: None,
        });
        lock.upsert(LockEntry {
            kind: None,
            name: "beta".into(),
            source: LockSource::Path {
                path: "/p".into(),
                link: false,
            },
            content_hash: "sha256:22".into(),
            version: None,
            approved_manifest: None,
            binary: None,
            zot: Some(crate::zot::ZotPin::default()),
            claude: None,
        });
        let text = lock.render();
        assert!(
            text.find("name = \"alpha\"").unwrap() < text.find("name = \"zeta\"").unwrap(),
            "{text}"
        );
        assert!(text.contains("type = \"crate\""), "{text}");
        let back: Lockfile = toml::from_str(&text).unwrap();
        assert_eq!(back, lock);
    }

    #[test]
    fn a_non_ascii_git_rev_displays_without_panicking() {
        let source = LockSource::Git {
            url: "file:///r".into(),
            rev: "ééééééééééééé".into(),
            subdir: None,
        };
        assert_eq!(source.to_string(), "git file:///r@éééééééééééé");
    }

    #[test]
    fn an_entry_whose_name_is_not_an_extension_name_refuses_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extensions.lock");
        let entry = |name: &str| {
            format!(
                "[[extensions]]\nname = {}\ncontent_hash = \"sha256:00\"\n[extensions.source]\ntype = \"path\"\npath = \"/p\"\n",
                toml::Value::String(name.into())
            )
        };
        std::fs::write(&path, entry("ok-name_1")).unwrap();
        assert_eq!(Lockfile::load(&path).unwrap().extensions.len(), 1);
        for bad in ["../../v3", "", "a/b", ".", "x\u{1b}[2J"] {
            std::fs::write(&path, entry(bad)).unwrap();
            let err = Lockfile::load(&path).unwrap_err().to_string();
            assert!(
                err.contains("extensions.lock") && err.contains("is not an extension name"),
                "{bad:?}: {err}"
            );
            assert!(!err.contains('\u{1b}'), "{err}");
        }
    }

    #[test]
    fn a_corrupt_lock_is_an_error_not_an_empty_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extensions.lock");
        std::fs::write(&path, "[[extensions]\nname=").unwrap();
        assert!(Lockfile::load(&path).is_err());
        assert_eq!(
            Lockfile::load(&dir.path().join("missing")).unwrap(),
            Lockfile::default()
        );
    }

    #[test]
    fn grants_round_trip_and_a_hand_edited_bad_one_refuses_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extensions.lock");
        let mut lock = Lockfile::default();
        let grant = crate::grants::SandboxGrants::parse("write:/var/tmp/x").unwrap();
        lock.set_granted("fs", None, grant.clone());
        lock.set_granted("notes", Some("/ws"), grant.clone());
        lock.save(&path).unwrap();
        let read = Lockfile::load(&path).unwrap();
        assert_eq!(read.granted("fs", None), grant);
        assert_eq!(read.granted("notes", Some("/ws")), grant);
        assert!(read.granted("notes", None).is_empty());
        // A grant no `yep grant` would write (a path that climbs out) refuses the whole lock.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("/var/tmp/x", "/var/../root")).unwrap();
        let err = Lockfile::load(&path).unwrap_err().to_string();
        assert!(err.contains("the grants of fs are refused"), "{err}");
        // Setting none removes the entry.
        let mut lock = read;
        lock.set_granted("fs", None, Default::default());
        assert_eq!(lock.grants.len(), 1);
    }

    #[test]
    fn a_claude_pin_round_trips_and_a_lock_without_one_reads_unchanged() {
        let pin = crate::claude::ClaudePin {
            kind: crate::claude::PluginKind::Claude,
            manifest_less: false,
            hooks: vec![crate::claude::CommandHook {
                event: "PostToolUse".into(),
                matcher: Some("Edit|Write".into()),
                command: "bash \"${CLAUDE_PLUGIN_ROOT}/h.sh\"".into(),
                args: Vec::new(),
                timeout_s: Some(180),
                if_rule: Some("Bash(git commit:*)".into()),
                is_async: false,
            }],
            commands: vec![crate::claude::PinnedCommand {
                name: "commit".into(),
                file: "commands/commit.md".into(),
                allowed_tools: vec!["Bash(git status:*)".into()],
                inline: vec!["git status".into()],
            }],
            skill_roots: vec!["skills".into()],
            skills: vec!["review".into()],
            agents: Vec::new(),
            lsp_servers: vec!["rust-analyzer".into()],
            ignored: vec!["homepage".into()],
            // What a marketplace entry adds may hold a null, which TOML cannot.
            marketplace: Some(crate::claude::MarketplacePin::new(
                "official",
                "cc",
                &crate::claude::Overrides {
                    fields: serde_json::json!({"lspServers": {"rust-analyzer": {"command": "rust-analyzer"}}, "hooks": null})
                        .as_object()
                        .unwrap()
                        .clone(),
                    fallback_name: None,
                },
            )),
        };
        let entry = |claude| LockEntry {
            kind: None,
            name: "cc".into(),
            source: LockSource::Path {
                path: "/p".into(),
                link: false,
            },
            content_hash: "sha256:33".into(),
            version: None,
            approved_manifest: None,
            binary: None,
            zot: None,
            claude,
        };
        let mut lock = Lockfile::default();
        lock.upsert(entry(Some(pin.clone())));
        let text = lock.render();
        let read: Lockfile = toml::from_str(&text).unwrap();
        assert_eq!(read.extensions[0].claude.as_ref(), Some(&pin), "{text}");
        let added = pin.marketplace.as_ref().unwrap().overrides();
        assert!(added.fields["hooks"].is_null() && added.fields.contains_key("lspServers"));
        assert_eq!(
            read.extensions[0].manifest_file(),
            ".claude-plugin/plugin.json"
        );
        // Without a pin nothing about Claude is written, and such a lock reads as before.
        let mut plain = Lockfile::default();
        plain.upsert(entry(None));
        let text = plain.render();
        assert!(!text.contains("claude"), "{text}");
        let read: Lockfile = toml::from_str(&text).unwrap();
        assert_eq!(read.extensions[0].claude, None);
        assert_eq!(read.extensions[0].manifest_file(), "plugin.json");
    }
}
