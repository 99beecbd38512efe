//! Claude Code, Codex and Agent Plugins packages: which of them a directory holds, and its
//! manifest and parts (commands, skills, agents, hooks, MCP and LSP servers, user config),
//! read leniently as those hosts read them and without running anything.
//!
//! What yep approves from them, and pins, is [`approve`].

pub mod approve;
pub mod frontmatter;
pub mod hooks;
mod mcp_json;
pub mod project;
pub mod readonly;
pub mod rules;
pub mod shell;

pub use approve::{Approval, ApproveError, ClaudePin, MarketplacePin, PinnedAgent, PinnedCommand};
pub use hooks::{CommandHook, Matcher, MatcherError};
pub use rules::PermissionRule;

use crate::approval::kind::PackageKind;
use crate::fsutil::{Links, read_regular_string, stays_inside};
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, ManifestError, McpServer};
use crate::text::escape;
use frontmatter::Frontmatter;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A Claude Code plugin's manifest, inside its package.
pub const CLAUDE_MANIFEST_FILE: &str = ".claude-plugin/plugin.json";
/// A Codex plugin's manifest.
pub const CODEX_MANIFEST_FILE: &str = ".codex-plugin/plugin.json";
/// What an Agent Plugins manifest's `$schema` starts with.
pub const AGENT_PLUGIN_SCHEMA_PREFIX: &str = "https://agent-plugins.org/schemas/";

/// The variables that name a package's own directories, as Claude Code, Codex and Agent
/// Plugins spell them: the first two its package, the last two its data dir. They are paths
/// in the home, never secrets, so they expand anywhere in its MCP servers (argv too).
pub const PACKAGE_DIR_VARS: [&str; 4] = [
    "CLAUDE_PLUGIN_ROOT",
    "PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
    "PLUGIN_DATA",
];

/// The largest command, skill or agent file read.
pub const MAX_PART_BYTES: u64 = 256 * 1024;
/// The most files of one kind read from one directory; the rest are left out with a note.
pub const MAX_PARTS: usize = 256;
/// The most inline (`` !`…` ``) commands read from one command file.
pub const MAX_INLINE: usize = 32;

/// Which host's plugin format a package is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PluginKind {
    /// `.claude-plugin/plugin.json`, or Claude Code's default layout with no manifest.
    Claude,
    /// `.codex-plugin/plugin.json`.
    Codex,
    /// A root `plugin.json` with the agent-plugins.org `$schema` (Agent Plugins 1.0).
    AgentPlugin,
}

impl PluginKind {
    /// What the consent screen calls it.
    pub fn label(self) -> &'static str {
        PackageKind::from(self).label()
    }
}

impl From<PluginKind> for PackageKind {
    fn from(kind: PluginKind) -> PackageKind {
        match kind {
            PluginKind::Claude => PackageKind::Claude,
            PluginKind::Codex => PackageKind::Codex,
            PluginKind::AgentPlugin => PackageKind::AgentPlugin,
        }
    }
}

impl PackageKind {
    /// The plugin format it is, for the three plugin kinds.
    pub fn plugin(self) -> Option<PluginKind> {
        match self {
            PackageKind::Claude => Some(PluginKind::Claude),
            PackageKind::Codex => Some(PluginKind::Codex),
            PackageKind::AgentPlugin => Some(PluginKind::AgentPlugin),
            PackageKind::Yep | PackageKind::Zot | PackageKind::Mcp => None,
        }
    }
}

/// The component directories and files whose presence alone makes a Claude Code plugin.
const LAYOUT: [&str; 6] = [
    "commands",
    "skills",
    "agents",
    "hooks/hooks.json",
    ".mcp.json",
    ".lsp.json",
];

/// Which plugin format `dir` holds, or `None` for a YEP package (a root `plugin.json` with a
/// `yolop` object, or one that is neither YEP nor Agent Plugins, which the YEP reader then
/// refuses naming the missing facet), a zot extension, or nothing yep knows.
///
/// In order: a root `plugin.json` with `yolop` stays YEP; `.claude-plugin/plugin.json` is
/// Claude; `.codex-plugin/plugin.json` is Codex; a root `plugin.json` whose `$schema` is
/// agent-plugins.org's is an Agent Plugin; with no manifest at all, a Claude Code component
/// directory (`commands/`, `skills/`, `agents/`, `hooks/hooks.json`, `.mcp.json`, `.lsp.json`)
/// is a manifest-less Claude plugin.
pub fn plugin_kind(dir: &Path) -> Option<PluginKind> {
    let root = dir.join(MANIFEST_FILE);
    let root_manifest = root.exists().then(|| {
        crate::manifest::read_manifest_text(&root)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
    });
    // YEP, or a root manifest that cannot be read: the YEP reader says why.
    if let Some(manifest) = &root_manifest
        && manifest
            .as_ref()
            .is_none_or(|m| m.get("yolop").is_some_and(Value::is_object))
    {
        return None;
    }
    if dir.join(CLAUDE_MANIFEST_FILE).is_file() {
        return Some(PluginKind::Claude);
    }
    if dir.join(CODEX_MANIFEST_FILE).is_file() {
        return Some(PluginKind::Codex);
    }
    if let Some(manifest) = root_manifest {
        let agent_plugin = manifest
            .as_ref()
            .and_then(|m| m.get("$schema"))
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with(AGENT_PLUGIN_SCHEMA_PREFIX));
        return agent_plugin.then_some(PluginKind::AgentPlugin);
    }
    if crate::zot::is_zot_package(dir) || dir.join("Cargo.toml").is_file() {
        return None;
    }
    LAYOUT
        .iter()
        .any(|part| dir.join(part).exists())
        .then_some(PluginKind::Claude)
}

/// What a marketplace entry adds to a plugin's own manifest: its name (which wins, as it is
/// the name users know), and the fields it declares for a `strict: false` plugin
/// (`lspServers`, `commands`, `mcpServers`, …), where the plugin's own manifest wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub fields: Map<String, Value>,
    /// The name of a plugin whose files give none (no manifest, or one without `name`) and
    /// no entry does: its directory's as the user knows it (a git URL's last segment), not
    /// the copy's yep fetched it into.
    pub fallback_name: Option<String>,
}

impl Overrides {
    /// The fields of a marketplace entry that describe the plugin (not its source).
    pub fn from_marketplace_entry(entry: &Value) -> Overrides {
        let fields = entry
            .as_object()
            .map(|e| {
                e.iter()
                    .filter(|(k, _)| READ_KEYS.contains(&k.as_str()) && k.as_str() != "$schema")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Overrides {
            fields,
            fallback_name: None,
        }
    }

    /// Whether it declares parts (commands, servers, …), not only what the plugin is called:
    /// a directory with none of its own is then a plugin of those.
    pub fn describes_parts(&self) -> bool {
        self.fields
            .keys()
            .any(|k| !["$schema", "name", "version", "description", "author"].contains(&k.as_str()))
    }
}

/// The manifest keys yep reads; `author` and `$schema` are read and shown nowhere.
const READ_KEYS: [&str; 13] = [
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "commands",
    "skills",
    "agents",
    "hooks",
    "mcpServers",
    "lspServers",
    "userConfig",
    "extensions",
];

/// One slash command (`commands/<name>.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The file stem.
    pub name: String,
    /// Relative to the package, with `/`.
    pub file: String,
    pub description: String,
    pub argument_hint: Option<String>,
    /// Its `allowed-tools` rules, as written.
    pub allowed_tools: Vec<String>,
    /// The `` !`…` `` commands its body runs when it is invoked, in order.
    pub inline: Vec<String>,
}

/// One skill (`<root>/<name>/SKILL.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its frontmatter `name`, else its directory's.
    pub name: String,
    /// Its directory, relative to the package.
    pub dir: String,
    pub description: String,
}

/// One agent (`agents/<name>.md`): listed, never run by yep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub name: String,
    pub file: String,
    pub description: String,
}

/// One LSP server a plugin declares: recorded, never run by yep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LspServer {
    pub name: String,
    pub command: String,
}

/// One `userConfig` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserOption {
    pub key: String,
    /// `string`, `number`, `boolean`, `directory` or `file`.
    pub kind: String,
    pub description: String,
    /// Kept as a secret (Claude Code's keychain; yep's secrets).
    pub sensitive: bool,
    pub required: bool,
}

/// A Claude Code, Codex or Agent Plugins package as read from its directory.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudePlugin {
    pub kind: PluginKind,
    /// The manifest read (relative to the package), or `None` for a manifest-less plugin.
    pub manifest_file: Option<&'static str>,
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub commands: Vec<Command>,
    /// Where skills were looked for, as written (`skills` by default).
    pub skill_roots: Vec<String>,
    pub skills: Vec<Skill>,
    pub agents: Vec<Agent>,
    pub hooks: Vec<CommandHook>,
    pub mcp_servers: BTreeMap<String, McpServer>,
    pub lsp_servers: Vec<LspServer>,
    pub user_config: Vec<UserOption>,
    /// Manifest keys yep does not read, as written (escape them before they are shown).
    pub ignored: BTreeMap<String, Value>,
    /// What was left out while reading, and why (escaped).
    pub notes: Vec<String>,
}

/// Why a plugin could not be read. Every variant names the file or directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaudeError {
    #[error(
        "no Claude Code, Codex or Agent Plugins manifest, nor any Claude Code component directory, in {}",
        dir.display()
    )]
    NotAPlugin { dir: PathBuf },
    #[error(
        "{} has no `yolop` object, so it is not a YEP package, and no agent-plugins.org `$schema`, so it is not an Agent Plugin either (a Claude Code plugin keeps its manifest in .claude-plugin/plugin.json)",
        path.display()
    )]
    NeitherYepNorAgentPlugin { path: PathBuf },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl ClaudePlugin {
    /// Read the plugin in `dir`, of the kind [`plugin_kind`] tells, with what its marketplace
    /// entry adds.
    pub fn load(dir: &Path, overrides: &Overrides) -> Result<ClaudePlugin, ClaudeError> {
        // A marketplace entry that describes a plugin with no files of its own (a
        // `strict: false` entry with `lspServers`) makes it a manifest-less Claude plugin.
        let from_entry = || {
            let described = overrides.describes_parts()
                && !dir.join(MANIFEST_FILE).exists()
                && !crate::zot::is_zot_package(dir);
            described.then_some(PluginKind::Claude)
        };
        let kind = plugin_kind(dir).or_else(from_entry).ok_or_else(|| {
            let root = dir.join(MANIFEST_FILE);
            let yep = crate::manifest::read_manifest_text(&root)
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .is_none_or(|m| m.get("yolop").is_some());
            if root.is_file() && !yep {
                ClaudeError::NeitherYepNorAgentPlugin { path: root }
            } else {
                ClaudeError::NotAPlugin {
                    dir: dir.to_path_buf(),
                }
            }
        })?;
        let manifest_file = match kind {
            PluginKind::Claude => Some(CLAUDE_MANIFEST_FILE).filter(|f| dir.join(f).is_file()),
            PluginKind::Codex => Some(CODEX_MANIFEST_FILE),
            PluginKind::AgentPlugin => Some(MANIFEST_FILE),
        };
        let mut fields = match manifest_file {
            Some(file) => read_object(dir, file)?,
            None => Map::new(),
        };
        if let Some(name) = &overrides.fallback_name {
            fields
                .entry("name")
                .or_insert_with(|| Value::String(name.clone()));
        }
        for (key, value) in &overrides.fields {
            // The marketplace's name is the one users know the plugin by; for the rest the
            // plugin's own manifest wins.
            if key == "name" {
                fields.insert(key.clone(), value.clone());
            } else {
                fields.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        let reader = Reader {
            dir,
            manifest: manifest_file.unwrap_or("the marketplace entry"),
        };
        reader.plugin(kind, manifest_file, fields)
    }
}

/// Reads one package's parts, naming `manifest` in errors about what it says.
struct Reader<'a> {
    dir: &'a Path,
    manifest: &'a str,
}

impl Reader<'_> {
    fn invalid(&self, message: String) -> ClaudeError {
        ClaudeError::Manifest(ManifestError::Invalid {
            path: self.dir.join(self.manifest),
            message,
        })
    }

    fn plugin(
        &self,
        kind: PluginKind,
        manifest_file: Option<&'static str>,
        mut fields: Map<String, Value>,
    ) -> Result<ClaudePlugin, ClaudeError> {
        let text = |fields: &Map<String, Value>, key: &str| match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.invalid(format!("`{key}` is not a string"))),
        };
        let dir_name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = text(&fields, "name")?
            .filter(|n| !n.is_empty())
            .unwrap_or(dir_name);
        let version = text(&fields, "version")?.filter(|v| !v.is_empty());
        let description = text(&fields, "description")?.unwrap_or_default();
        let mut plugin = ClaudePlugin {
            kind,
            manifest_file,
            name,
            version,
            description,
            commands: Vec::new(),
            skill_roots: Vec::new(),
            skills: Vec::new(),
            agents: Vec::new(),
            hooks: Vec::new(),
            mcp_servers: BTreeMap::new(),
            lsp_servers: Vec::new(),
            user_config: Vec::new(),
            ignored: BTreeMap::new(),
            notes: Vec::new(),
        };
        let read_keys: &[&str] = match kind {
            // Agent Plugins 1.0 has fixed locations and no other parts.
            PluginKind::AgentPlugin => &["$schema", "name", "version", "description", "author"],
            _ => &READ_KEYS,
        };
        let keys: Vec<String> = fields.keys().cloned().collect();
        for key in keys {
            if !read_keys.contains(&key.as_str()) {
                let value = fields.remove(&key).unwrap_or_default();
                plugin.ignored.insert(key, value);
            }
        }
        match kind {
            PluginKind::AgentPlugin => {
                self.skills(&mut plugin, &["skills".to_string()], false)?;
                if let Some(file) = self.read_json_if_there("mcp.json")? {
                    mcp_json::servers(
                        &file,
                        "mcp.json",
                        &mut plugin.mcp_servers,
                        &mut plugin.notes,
                    );
                }
            }
            PluginKind::Claude | PluginKind::Codex => self.claude_parts(&mut plugin, &fields)?,
        }
        Ok(plugin)
    }

    fn claude_parts(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        // Commands and agents: the manifest's paths replace the default directory.
        let commands = self.paths(fields, "commands")?;
        let command_paths = commands.unwrap_or_else(|| vec!["commands".into()]);
        for path in &command_paths {
            self.commands(plugin, path)?;
        }
        let agents = self.paths(fields, "agents")?;
        for path in &agents.unwrap_or_else(|| vec!["agents".into()]) {
            self.agents(plugin, path)?;
        }
        self.claude_skills(plugin, fields)?;
        self.claude_hooks(plugin, fields)?;
        self.claude_mcp_servers(plugin, fields)?;
        self.claude_lsp_servers(plugin, fields)?;
        self.user_config(plugin, fields)
    }

    /// Skills: the manifest's paths add to `skills/` (each directory once, however it is
    /// spelled: Codex's docs write `./skills/`).
    fn claude_skills(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        let mut skill_roots = vec!["skills".to_string()];
        let same = |a: &str, b: &str| {
            let norm = |r: &str| r.trim_start_matches("./").trim_end_matches('/').to_string();
            norm(a) == norm(b)
        };
        if let Some(extra) = self.paths(fields, "skills")? {
            for root in extra {
                if !skill_roots.iter().any(|r| same(r, &root)) {
                    skill_roots.push(root);
                }
            }
        }
        let single = fields.get("skills").is_none() && !self.dir.join("skills").exists();
        self.skills(plugin, &skill_roots, single)
    }

    /// Hooks: `hooks/hooks.json` always loads in Claude Code and the manifest's add to it;
    /// in Codex the manifest's replace it.
    fn claude_hooks(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        let codex = plugin.kind == PluginKind::Codex;
        let mut read = hooks::Read::default();
        let manifest_hooks = fields.get("hooks").filter(|v| !v.is_null());
        if !(codex && manifest_hooks.is_some())
            && let Some(file) = self.read_json_if_there("hooks/hooks.json")?
        {
            hooks::read(&file, "hooks/hooks.json", &mut read);
        }
        if let Some(value) = manifest_hooks {
            for (from, value) in self.inline_or_files(value, "hooks")? {
                if from.trim_start_matches("./") == "hooks/hooks.json" && !codex {
                    plugin.notes.push(
                        "the manifest names hooks/hooks.json, which loads anyway; read once".into(),
                    );
                    continue;
                }
                hooks::read(&value, &from, &mut read);
            }
        }
        plugin.notes.extend(read.notes);
        for hook in read.hooks {
            // Codex parses `async` but skips such a hook (developers.openai.com/codex/hooks):
            // what the plugin's author saw run is what runs here.
            if codex && hook.is_async {
                plugin.notes.push(format!(
                    "{}: an async hook left out (Codex skips async hooks)",
                    escape(&hook.event)
                ));
                continue;
            }
            plugin.hooks.push(hook);
        }
        Ok(())
    }

    /// MCP servers: `.mcp.json`, and the manifest's.
    fn claude_mcp_servers(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        if let Some(file) = self.read_json_if_there(".mcp.json")? {
            mcp_json::servers(
                &file,
                ".mcp.json",
                &mut plugin.mcp_servers,
                &mut plugin.notes,
            );
        }
        if let Some(value) = fields.get("mcpServers").filter(|v| !v.is_null()) {
            for (from, value) in self.inline_or_files(value, "mcpServers")? {
                mcp_json::servers(&value, &from, &mut plugin.mcp_servers, &mut plugin.notes);
            }
        }
        Ok(())
    }

    /// LSP servers: recorded, so the user is told yep does not run them.
    fn claude_lsp_servers(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        let mut lsp = Vec::new();
        if let Some(file) = self.read_json_if_there(".lsp.json")? {
            lsp.push(file);
        }
        if let Some(value) = fields.get("lspServers").filter(|v| !v.is_null()) {
            lsp.extend(
                self.inline_or_files(value, "lspServers")?
                    .into_iter()
                    .map(|(_, v)| v),
            );
        }
        for map in lsp.iter().filter_map(Value::as_object) {
            for (name, spec) in map {
                let command = spec
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                plugin.lsp_servers.push(LspServer {
                    name: name.clone(),
                    command: command.to_string(),
                });
            }
        }
        Ok(())
    }

    /// `userConfig`: the options a user sets, each with its type, description, and whether
    /// it is sensitive or required.
    fn user_config(
        &self,
        plugin: &mut ClaudePlugin,
        fields: &Map<String, Value>,
    ) -> Result<(), ClaudeError> {
        if let Some(config) = fields.get("userConfig").filter(|v| !v.is_null()) {
            let Some(config) = config.as_object() else {
                return Err(self.invalid("`userConfig` is not an object".into()));
            };
            for (key, option) in config {
                let get = |k: &str| option.get(k).and_then(Value::as_str).unwrap_or_default();
                let flag = |k: &str| option.get(k).and_then(Value::as_bool).unwrap_or(false);
                plugin.user_config.push(UserOption {
                    key: key.clone(),
                    kind: get("type").to_string(),
                    description: get("description").to_string(),
                    sensitive: flag("sensitive"),
                    required: flag("required"),
                });
            }
        }
        Ok(())
    }

    /// A component field's paths (a string or a list of strings), each checked to stay inside
    /// the package; `None` when the manifest does not have it.
    fn paths(
        &self,
        fields: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<Vec<String>>, ClaudeError> {
        let paths = match fields.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.invalid(format!("`{key}` is not a path or a list of paths")))?,
            Some(_) => {
                return Err(self.invalid(format!("`{key}` is not a path or a list of paths")));
            }
        };
        for path in &paths {
            self.check_inside(key, path)?;
        }
        Ok(Some(paths))
    }

    fn check_inside(&self, key: &str, path: &str) -> Result<(), ClaudeError> {
        if stays_inside(path) {
            return Ok(());
        }
        Err(self.invalid(format!(
            "{key} path \"{}\" must be relative and stay inside the plugin directory",
            escape(path)
        )))
    }

    /// A field that is an inline object, a path to a JSON file, or a list of either: each
    /// object with where it came from.
    fn inline_or_files(
        &self,
        value: &Value,
        key: &str,
    ) -> Result<Vec<(String, Value)>, ClaudeError> {
        let items = match value {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let mut out = Vec::new();
        for item in items {
            match item {
                Value::Object(_) => out.push((format!("the manifest's {key}"), item)),
                Value::String(path) => {
                    self.check_inside(key, &path)?;
                    let file = self.read_json(&path)?;
                    out.push((escape(&path).into_owned(), file));
                }
                _ => {
                    return Err(self.invalid(format!("`{key}` is not an object, a path or a list")));
                }
            }
        }
        Ok(out)
    }

    /// `dir/rel`, refused when a directory on the way to it is a symbolic link: a path that
    /// stays inside as written could otherwise leave through one (the file itself is opened
    /// without following a link).
    fn inside(&self, rel: &str) -> Result<PathBuf, ClaudeError> {
        let mut path = self.dir.to_path_buf();
        let parts: Vec<_> = Path::new(rel).components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            path.push(part);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(self.invalid(format!(
                    "\"{}\" passes through a symbolic link, which yep does not follow in a plugin",
                    escape(rel)
                )));
            }
        }
        Ok(self.dir.join(rel))
    }

    fn read_json(&self, rel: &str) -> Result<Value, ClaudeError> {
        let path = self.inside(rel)?;
        let text =
            read_regular_string(&path, MAX_MANIFEST_BYTES, Links::Refuse).map_err(|error| {
                ManifestError::Read {
                    path: path.clone(),
                    error,
                }
            })?;
        Ok(crate::manifest::parse_checked::<Value>(
            &text,
            &path,
            |_| Ok(()),
        )?)
    }

    fn read_json_if_there(&self, rel: &str) -> Result<Option<Value>, ClaudeError> {
        if std::fs::symlink_metadata(self.dir.join(rel)).is_err() {
            return Ok(None);
        }
        self.read_json(rel).map(Some)
    }

    fn read_part(&self, rel: &str) -> Result<Frontmatter, ClaudeError> {
        let path = self.inside(rel)?;
        let text = read_regular_string(&path, MAX_PART_BYTES, Links::Refuse)
            .map_err(|error| ManifestError::Read { path, error })?;
        Ok(Frontmatter::parse(&text))
    }

    /// The entries of a package directory, sorted, at most [`MAX_PARTS`] (a note says how many
    /// more); none when it is missing or not a real directory (a link is not followed).
    fn entries(&self, rel: &str, notes: &mut Vec<String>) -> Vec<(String, bool)> {
        let Ok(path) = self.inside(rel) else {
            notes.push(format!(
                "{} left out: it passes through a symbolic link",
                escape(rel)
            ));
            return Vec::new();
        };
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Vec::new();
        }
        let Ok(read) = std::fs::read_dir(&path) else {
            return Vec::new();
        };
        let mut entries: Vec<(String, bool)> = read
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let is_dir = e.file_type().ok()?.is_dir();
                Some((name, is_dir))
            })
            .collect();
        entries.sort();
        if entries.len() > MAX_PARTS {
            notes.push(format!(
                "{}: {} entries left out (over {MAX_PARTS})",
                escape(rel),
                entries.len() - MAX_PARTS
            ));
            entries.truncate(MAX_PARTS);
        }
        entries
    }

    fn commands(&self, plugin: &mut ClaudePlugin, path: &str) -> Result<(), ClaudeError> {
        let rel = path.trim_start_matches("./").trim_end_matches('/');
        let files: Vec<String> = if rel.ends_with(".md") {
            vec![rel.to_string()]
        } else {
            let mut files = Vec::new();
            for (name, is_dir) in self.entries(rel, &mut plugin.notes) {
                if is_dir {
                    plugin.notes.push(format!(
                        "commands in {}/{} left out: yep reads no nested command directories yet",
                        escape(rel),
                        escape(&name)
                    ));
                } else if name.ends_with(".md") {
                    files.push(format!("{rel}/{name}"));
                }
            }
            files
        };
        for file in files {
            if std::fs::symlink_metadata(self.dir.join(&file)).is_err() {
                continue;
            }
            let fm = self.read_part(&file)?;
            let name = stem(&file);
            plugin.commands.push(Command {
                name,
                description: fm.scalar("description").unwrap_or_default().to_string(),
                argument_hint: fm.scalar("argument-hint").map(str::to_string),
                allowed_tools: fm.rules("allowed-tools"),
                inline: inline_commands(&fm.body),
                file,
            });
        }
        Ok(())
    }

    fn agents(&self, plugin: &mut ClaudePlugin, path: &str) -> Result<(), ClaudeError> {
        let rel = path.trim_start_matches("./").trim_end_matches('/');
        let files: Vec<String> = if rel.ends_with(".md") {
            vec![rel.to_string()]
        } else {
            self.entries(rel, &mut plugin.notes)
                .into_iter()
                .filter(|(name, is_dir)| !is_dir && name.ends_with(".md"))
                .map(|(name, _)| format!("{rel}/{name}"))
                .collect()
        };
        for file in files {
            if std::fs::symlink_metadata(self.dir.join(&file)).is_err() {
                continue;
            }
            let fm = self.read_part(&file)?;
            plugin.agents.push(Agent {
                name: fm
                    .scalar("name")
                    .map(str::to_string)
                    .unwrap_or_else(|| stem(&file)),
                description: fm.scalar("description").unwrap_or_default().to_string(),
                file,
            });
        }
        Ok(())
    }

    /// Skills under each root: the root's own `SKILL.md`, else each child directory's. With
    /// `single`, a `SKILL.md` at the package root is a skill too (Claude Code's rule when there
    /// is no `skills/` and no `skills` key).
    fn skills(
        &self,
        plugin: &mut ClaudePlugin,
        roots: &[String],
        single: bool,
    ) -> Result<(), ClaudeError> {
        // A root as a package-relative directory, `.` for the package itself.
        let norm = |root: &str| {
            let rel = root.trim_start_matches("./").trim_end_matches('/');
            if rel.is_empty() { "." } else { rel }.to_string()
        };
        let mut dirs: Vec<String> = Vec::new();
        let mut add = |dir: String| {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        };
        for root in roots.iter().map(|r| norm(r)) {
            if root == "." {
                // The package root as a skill root: its own SKILL.md, below.
                continue;
            }
            if self.dir.join(&root).join("SKILL.md").is_file() {
                add(root);
                continue;
            }
            for (name, is_dir) in self.entries(&root, &mut plugin.notes) {
                if is_dir && self.dir.join(&root).join(&name).join("SKILL.md").is_file() {
                    add(format!("{root}/{name}"));
                }
            }
        }
        let root_named = roots.iter().any(|r| norm(r) == ".");
        if (single || root_named) && self.dir.join("SKILL.md").is_file() {
            add(".".into());
        }
        plugin.skill_roots = roots.to_vec();
        for dir in dirs {
            let file = if dir == "." {
                "SKILL.md".to_string()
            } else {
                format!("{dir}/SKILL.md")
            };
            let fm = self.read_part(&file)?;
            let fallback = if dir == "." {
                plugin.name.clone()
            } else {
                stem(&dir)
            };
            let name = fm.scalar("name").map(str::to_string).unwrap_or(fallback);
            let description = fm.scalar("description").unwrap_or_default().to_string();
            // A Claude Code skill is a slash command too (`/<plugin>:<skill>`), as Claude Code
            // invokes one, unless it says users do not invoke it; a command file of the same
            // name, read first, keeps the name.
            if plugin.kind == PluginKind::Claude && fm.scalar("user-invocable") != Some("false") {
                plugin.commands.push(Command {
                    name: name.clone(),
                    description: description.clone(),
                    argument_hint: fm.scalar("argument-hint").map(str::to_string),
                    allowed_tools: fm.rules("allowed-tools"),
                    inline: inline_commands(&fm.body),
                    file: file.clone(),
                });
            }
            plugin.skills.push(Skill {
                name,
                description,
                dir,
            });
        }
        Ok(())
    }
}

/// The manifest at `dir/rel`, as a JSON object.
fn read_object(dir: &Path, rel: &str) -> Result<Map<String, Value>, ClaudeError> {
    let path = dir.join(rel);
    let text = crate::manifest::read_manifest_text(&path)?;
    let value: Value = crate::manifest::parse_checked(&text, &path, |v: &Value| {
        if v.is_object() {
            Ok(())
        } else {
            Err("expected an object".into())
        }
    })?;
    Ok(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

/// The last path segment without `.md`.
fn stem(path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".md").unwrap_or(last).to_string()
}

/// The `` !`…` `` commands a command body runs when it is invoked, in order, at most
/// [`MAX_INLINE`].
pub fn inline_commands(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("!`") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('`') else { break };
        let command = &after[..end];
        if !command.trim().is_empty() && !command.contains('\n') {
            out.push(command.trim().to_string());
            if out.len() == MAX_INLINE {
                break;
            }
        }
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_commands_are_read_from_a_command_body() {
        assert_eq!(
            inline_commands("- status: !`git status`\n- diff: !`git diff HEAD`\nnot `this`"),
            ["git status", "git diff HEAD"]
        );
        assert!(inline_commands("!`unclosed").is_empty());
        assert!(inline_commands("!``").is_empty());
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_manifest_path_that_leaves_the_package_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for (key, value) in [
            ("commands", "\"../outside\""),
            ("skills", "[\"./ok\", \"/etc\"]"),
            ("hooks", "\"../../hooks.json\""),
            ("mcpServers", "\"a/../../b.json\""),
        ] {
            write(
                tmp.path(),
                CLAUDE_MANIFEST_FILE,
                &format!("{{\"name\": \"p\", \"{key}\": {value}}}"),
            );
            let err = ClaudePlugin::load(tmp.path(), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("must be relative and stay inside the plugin directory"),
                "{key}: {err}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_manifest_path_through_a_symbolic_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        write(&outside, "evil.md", "---\ndescription: from outside\n---\n");
        write(&outside, "hooks.json", "{}");
        let dir = tmp.path().join("p");
        write(
            &dir,
            CLAUDE_MANIFEST_FILE,
            r#"{"name": "p", "commands": "./out/evil.md"}"#,
        );
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        let err = ClaudePlugin::load(&dir, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"out/evil.md\" passes through a symbolic link"),
            "{err}"
        );
        write(
            &dir,
            CLAUDE_MANIFEST_FILE,
            r#"{"name": "p", "hooks": "./out/hooks.json"}"#,
        );
        assert!(ClaudePlugin::load(&dir, &Overrides::default()).is_err());
        // A linked default directory is not listed: nothing in it is read.
        write(&dir, CLAUDE_MANIFEST_FILE, r#"{"name": "p"}"#);
        std::os::unix::fs::symlink(&outside, dir.join("commands")).unwrap();
        let p = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        assert!(p.commands.is_empty());
    }

    #[test]
    fn a_part_over_its_size_cap_is_refused_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), CLAUDE_MANIFEST_FILE, "{\"name\": \"p\"}");
        write(
            tmp.path(),
            "commands/big.md",
            &"x".repeat(MAX_PART_BYTES as usize + 1),
        );
        let err = ClaudePlugin::load(tmp.path(), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("big.md") && err.contains("limit"), "{err}");
    }

    #[test]
    fn skills_are_read_from_skills_the_manifests_roots_and_a_lone_root_skill_md() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("solo");
        write(
            &dir,
            "SKILL.md",
            "---\ndescription: the whole plugin\n---\n",
        );
        write(&dir, "agents/a.md", "a");
        let p = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        let names: Vec<(&str, &str)> = p
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.dir.as_str()))
            .collect();
        assert_eq!(
            names,
            [("solo", ".")],
            "no skills/ and no key: the root SKILL.md"
        );

        write(
            &dir,
            CLAUDE_MANIFEST_FILE,
            r#"{"name": "solo", "skills": ["./skills", "skills/", "./more", "./one"]}"#,
        );
        write(&dir, "skills/a/SKILL.md", "---\nname: alpha\n---\n");
        write(&dir, "skills/not-a-skill/README.md", "x");
        write(&dir, "more/b/SKILL.md", "b");
        write(&dir, "one/SKILL.md", "c");
        let p = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        let names: Vec<(&str, &str)> = p
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.dir.as_str()))
            .collect();
        assert_eq!(
            names,
            [("alpha", "skills/a"), ("b", "more/b"), ("one", "one")],
            "each skill once; the root SKILL.md only when asked for"
        );
        assert_eq!(
            p.skill_roots,
            ["skills", "./more", "./one"],
            "each root once, however it is spelled"
        );
    }

    #[test]
    fn a_codex_manifests_hooks_replace_hooks_json_and_its_async_hooks_are_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("guard");
        let hooks = |command: &str, is_async: bool| {
            serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": command, "async": is_async}
            ]}]}})
            .to_string()
        };
        write(&dir, "hooks/hooks.json", &hooks("default", false));
        write(&dir, "hooks/mine.json", &hooks("mine", false));
        write(&dir, "hooks/later.json", &hooks("later", true));
        write(
            &dir,
            CODEX_MANIFEST_FILE,
            r#"{"name": "guard", "hooks": ["./hooks/mine.json", "./hooks/later.json"]}"#,
        );
        let p = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        assert_eq!(p.kind, PluginKind::Codex);
        let commands: Vec<&str> = p.hooks.iter().map(|h| h.command.as_str()).collect();
        assert_eq!(commands, ["mine"], "{:?}", p.notes);
        assert!(
            p.notes
                .iter()
                .any(|n| n == "PreToolUse: an async hook left out (Codex skips async hooks)"),
            "{:?}",
            p.notes
        );
        // A Claude Code plugin keeps both: hooks/hooks.json always loads, and an async hook
        // runs in the background.
        std::fs::remove_file(dir.join(CODEX_MANIFEST_FILE)).unwrap();
        write(
            &dir,
            CLAUDE_MANIFEST_FILE,
            r#"{"name": "guard", "hooks": ["./hooks/mine.json", "./hooks/later.json"]}"#,
        );
        let p = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        let commands: Vec<&str> = p.hooks.iter().map(|h| h.command.as_str()).collect();
        assert_eq!(commands, ["default", "mine", "later"], "{:?}", p.notes);
    }

    #[test]
    fn a_manifest_less_plugin_is_named_after_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-tools");
        write(
            &dir,
            "commands/hello.md",
            "---\ndescription: hi\n---\nSay hi",
        );
        assert_eq!(plugin_kind(&dir), Some(PluginKind::Claude));
        let plugin = ClaudePlugin::load(&dir, &Overrides::default()).unwrap();
        assert_eq!(plugin.name, "my-tools");
        assert_eq!(plugin.manifest_file, None);
        assert_eq!(plugin.commands[0].name, "hello");
        assert_eq!(plugin.commands[0].description, "hi");
        assert!(
            plugin_kind(tmp.path()).is_none(),
            "an empty directory is no plugin"
        );
    }
}
