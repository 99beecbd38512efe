//! MCP servers the user adds to the home (`yep mcp add`), beside the ones extensions
//! contribute and a workspace's `.mcp.json`. Each is a table under `[mcp_servers]` in
//! `settings.toml`; its header values, which carry tokens, live in `connections.toml`
//! (owner-only) under `["mcp:<name>"]`, like other secrets, and never in `settings.toml`.

use crate::config::guard_mode;
use crate::fsutil::{MODE_DEFAULT, MODE_PRIVATE};
use crate::manifest::{McpServer, valid_item_name};
use crate::settings;
use crate::{Home, StoreError};
use std::collections::BTreeMap;
use toml_edit::{Array, Item, Table, value};

/// The `settings.toml` table that holds them.
const TABLE: &str = "mcp_servers";

/// What `list` shows for a header's value: never the value.
pub const HIDDEN: &str = "(secret)";

fn secrets_key(name: &str) -> String {
    format!("mcp:{name}")
}

/// Where a stdio server's environment values are kept in `connections.toml`: they can be
/// tokens, so only their names are in `settings.toml`.
fn env_key(name: &str) -> String {
    format!("mcp-env:{name}")
}

/// The table of `connections.toml` that holds home server `name`'s environment values and
/// their broker bindings ([`crate::broker::bindings_in`]).
pub fn env_table(name: &str) -> String {
    env_key(name)
}

/// The placeholder owner of home server `name`'s brokered environment values
/// ([`crate::broker::placeholder`]).
pub fn broker_owner(name: &str) -> String {
    format!("mcp:{name}")
}

/// Store `value` as environment variable `var` of home server `name` (one it declares).
pub fn set_env(home: &Home, name: &str, var: &str, value_: &str) -> Result<(), StoreError> {
    let declared = list(home)?
        .get(name)
        .is_some_and(|s| s.env.contains_key(var));
    if !declared {
        return Err(invalid(format!(
            "MCP server `{name}` has no environment variable `{}` (`yep mcp add {name} --env {}=…` declares one)",
            crate::text::escape(var),
            crate::text::escape(var)
        )));
    }
    let _lock = home.lock()?;
    let path = home.connections_path();
    guard_mode(&path)?;
    let mut doc = settings::load(&path)?;
    let key = env_key(name);
    if doc.get(&key).and_then(Item::as_table).is_none() {
        doc.insert(&key, Item::Table(Table::new()));
    }
    if let Some(table) = doc.get_mut(&key).and_then(Item::as_table_mut) {
        table.insert(var, value(value_));
    }
    settings::store(&path, &doc, MODE_PRIVATE)
}

/// Why an MCP server could not be added.
fn invalid(message: String) -> StoreError {
    StoreError::McpServer(message)
}

/// Add user-level MCP server `name`: a stdio server (`command`, `args`) or an http one
/// (`url`, `headers`, whose values are stored as secrets). An existing name is refused.
pub fn add(home: &Home, name: &str, server: &McpServer) -> Result<(), StoreError> {
    if !valid_item_name(name) || name.contains("__") {
        return Err(invalid(format!(
            "{:?} is not an MCP server name (A-Z a-z 0-9 _ . -, no `__`)",
            crate::text::escape(name)
        )));
    }
    match server.transport.as_str() {
        "stdio" if server.command.as_deref().is_some_and(|c| !c.is_empty()) => {}
        "http"
            if server
                .url
                .as_deref()
                .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://")) => {}
        "stdio" => return Err(invalid("a stdio MCP server needs a command".into())),
        "http" => {
            return Err(invalid(
                "an http MCP server needs an http:// or https:// url".into(),
            ));
        }
        other => {
            return Err(invalid(format!(
                "{:?} is not an MCP transport (stdio, http)",
                crate::text::escape(other)
            )));
        }
    }
    let _lock = home.lock()?;
    let path = home.settings_path();
    let mut doc = settings::load(&path)?;
    if doc.get(TABLE).is_none() {
        doc.insert(TABLE, Item::Table(Table::new()));
    }
    let Some(servers) = doc.get_mut(TABLE).and_then(Item::as_table_mut) else {
        return Err(StoreError::NotATable {
            path,
            key: TABLE.into(),
        });
    };
    if servers.contains_key(name) {
        return Err(invalid(format!(
            "an MCP server named `{name}` is already configured (`yep mcp remove {name}` first)"
        )));
    }
    let mut entry = Table::new();
    entry.insert("type", value(server.transport.as_str()));
    if let Some(command) = &server.command {
        entry.insert("command", value(command.as_str()));
        let mut args = Array::new();
        for a in &server.args {
            args.push(a.as_str());
        }
        entry.insert("args", value(args));
        if !server.env.is_empty() {
            let mut names = Array::new();
            for k in server.env.keys() {
                names.push(k.as_str());
            }
            entry.insert("env", value(names));
        }
    }
    if let Some(url) = &server.url {
        entry.insert("url", value(url.as_str()));
        let mut names = Array::new();
        for h in server.headers.keys() {
            names.push(h.as_str());
        }
        entry.insert("headers", value(names));
    }
    servers.insert(name, Item::Table(entry));
    // Secrets first: a crash between the two writes leaves an unused secret, never a server
    // whose headers are missing.
    if !server.headers.is_empty() || !server.env.is_empty() {
        let secrets_path = home.connections_path();
        guard_mode(&secrets_path)?;
        let mut secrets = settings::load(&secrets_path)?;
        for (key, values) in [
            (secrets_key(name), &server.headers),
            (env_key(name), &server.env),
        ] {
            if values.is_empty() {
                continue;
            }
            let mut table = Table::new();
            for (k, v) in values {
                table.insert(k, value(v.as_str()));
            }
            secrets.insert(&key, Item::Table(table));
        }
        settings::store(&secrets_path, &secrets, MODE_PRIVATE)?;
    }
    settings::store(&path, &doc, MODE_DEFAULT)
}

/// Remove user-level MCP server `name` and its header secrets. Whether it was there.
pub fn remove(home: &Home, name: &str) -> Result<bool, StoreError> {
    let lock = home.lock()?;
    let path = home.settings_path();
    if !path.exists() {
        return Ok(false);
    }
    let removed = settings::remove_entry(&path, TABLE, name)?;
    settings::remove_table(&home.connections_path(), &secrets_key(name))?;
    settings::remove_table(&home.connections_path(), &env_key(name))?;
    settings::remove_table(&home.connections_path(), &oauth_key(name))?;
    drop(lock);
    // Its approval goes with it: a server added again under the name is asked about again.
    forget(home, name, &Origin::Home)?;
    Ok(removed)
}

fn oauth_key(name: &str) -> String {
    format!("mcp-oauth:{name}")
}

/// Mark user-level MCP server `name` as one that takes an OAuth login (`yep mcp add
/// --oauth`, or a server that answered `401`), or not.
pub fn set_oauth(home: &Home, name: &str, on: bool) -> Result<(), StoreError> {
    let _lock = home.lock()?;
    let path = home.settings_path();
    let mut doc = settings::load(&path)?;
    let Some(entry) = doc
        .get_mut(TABLE)
        .and_then(Item::as_table_mut)
        .and_then(|t| t.get_mut(name))
        .and_then(Item::as_table_mut)
    else {
        return Err(invalid(format!(
            "no MCP server named `{}` was added to this home",
            crate::text::escape(name)
        )));
    };
    match on {
        true => entry.insert("oauth", value(true)),
        false => entry.remove("oauth"),
    };
    settings::store(&path, &doc, MODE_DEFAULT)
}

/// Whether user-level MCP server `name` takes an OAuth login ([`set_oauth`]).
pub fn oauth_wanted(home: &Home, name: &str) -> bool {
    settings::load(&home.settings_path())
        .ok()
        .and_then(|doc| {
            doc.get(TABLE)?
                .get(name)?
                .get("oauth")
                .and_then(Item::as_bool)
        })
        .unwrap_or(false)
}

/// The OAuth credentials kept for MCP server `name` (in `connections.toml`, owner-only, under
/// `["mcp-oauth:<name>"]`): the URL they were got for, and them as JSON. Never used for another
/// URL: a workspace's server of the same name gets none of them.
pub fn oauth_credentials(home: &Home, name: &str) -> Result<Option<(String, String)>, StoreError> {
    let path = home.connections_path();
    guard_mode(&path)?;
    let doc = settings::load(&path)?;
    let Some(table) = doc.get(&oauth_key(name)) else {
        return Ok(None);
    };
    let get = |k: &str| table.get(k).and_then(Item::as_str).map(String::from);
    Ok(get("url").zip(get("credentials")))
}

/// Keep `credentials` (JSON) for MCP server `name` at `url`, replacing what was kept.
pub fn set_oauth_credentials(
    home: &Home,
    name: &str,
    url: &str,
    credentials: &str,
) -> Result<(), StoreError> {
    let _lock = home.lock()?;
    let path = home.connections_path();
    guard_mode(&path)?;
    let mut doc = settings::load(&path)?;
    let mut table = Table::new();
    table.insert("url", value(url));
    table.insert("credentials", value(credentials));
    doc.insert(&oauth_key(name), Item::Table(table));
    settings::store(&path, &doc, MODE_PRIVATE)
}

/// Note the challenge MCP server `name` refused a call with for want of scope, beside its
/// credentials, for the next login to ask for what it names. Nothing when no login is kept.
pub fn note_oauth_challenge(home: &Home, name: &str, challenge: &str) -> Result<(), StoreError> {
    let _lock = home.lock()?;
    let path = home.connections_path();
    guard_mode(&path)?;
    let mut doc = settings::load(&path)?;
    let Some(table) = doc.get_mut(&oauth_key(name)).and_then(Item::as_table_mut) else {
        return Ok(());
    };
    table.insert("challenge", value(challenge));
    settings::store(&path, &doc, MODE_PRIVATE)
}

/// The challenge [`note_oauth_challenge`] kept for MCP server `name`.
pub fn oauth_challenge(home: &Home, name: &str) -> Option<String> {
    let doc = settings::load(&home.connections_path()).ok()?;
    doc.get(&oauth_key(name))?
        .get("challenge")?
        .as_str()
        .map(String::from)
}

/// Forget MCP server `name`'s OAuth credentials. Whether there were any.
pub fn clear_oauth_credentials(home: &Home, name: &str) -> Result<bool, StoreError> {
    let _lock = home.lock()?;
    settings::remove_table(&home.connections_path(), &oauth_key(name))
}

/// The user-level MCP servers, headers shown as [`HIDDEN`].
pub fn list(home: &Home) -> Result<BTreeMap<String, McpServer>, StoreError> {
    read(home, |_, _| Some(HIDDEN.to_string()))
}

/// The user-level MCP servers as they are started: header values from the secrets.
pub fn resolved(home: &Home) -> Result<BTreeMap<String, McpServer>, StoreError> {
    let path = home.connections_path();
    guard_mode(&path)?;
    let secrets = settings::load(&path)?;
    read(home, |table, key| {
        secrets
            .get(table)
            .and_then(|t| t.get(key))
            .and_then(Item::as_str)
            .map(String::from)
    })
}

/// The home's servers, each secret (a header's or environment value) as `secret(table, key)`
/// gives it from `connections.toml`.
fn read(
    home: &Home,
    secret: impl Fn(&str, &str) -> Option<String>,
) -> Result<BTreeMap<String, McpServer>, StoreError> {
    let doc = settings::load(&home.settings_path())?;
    let mut out = BTreeMap::new();
    let Some(servers) = doc.get(TABLE).and_then(Item::as_table_like) else {
        return Ok(out);
    };
    let strings = |item: Option<&Item>| -> Vec<String> {
        item.and_then(Item::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (name, entry) in servers.iter() {
        if !valid_item_name(name) {
            continue;
        }
        let get = |k: &str| entry.get(k).and_then(Item::as_str).map(String::from);
        let headers = strings(entry.get("headers"))
            .into_iter()
            .filter_map(|h| secret(&secrets_key(name), &h).map(|v| (h, v)))
            .collect();
        let env = strings(entry.get("env"))
            .into_iter()
            .filter_map(|k| secret(&env_key(name), &k).map(|v| (k, v)))
            .collect();
        out.insert(
            name.to_string(),
            McpServer {
                transport: get("type").unwrap_or_else(|| "stdio".into()),
                command: get("command"),
                args: strings(entry.get("args")),
                env,
                url: get("url"),
                headers,
            },
        );
    }
    Ok(out)
}

/// A tool as an MCP server lists it: what a pin hashes, and what the cache keeps so a session
/// can offer it before the server starts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct McpTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// Its hints (`readOnlyHint`, `destructiveHint`, …): a flipped hint is a change too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

impl McpTool {
    /// SHA-256 (hex) of everything the model or a policy reads of it: description, schemas
    /// and hints, with object keys in order, so a server that reorders keys is not "changed".
    pub fn hash(&self) -> String {
        let value = serde_json::json!({
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
        });
        crate::hash::sha256_hex(canonical(&value).as_bytes())
    }
}

/// The most tools one server's approved list holds.
pub const MAX_APPROVED_TOOLS: usize = 1024;

/// The most bytes one tool takes in an approved list: its name, description, schemas and
/// hints, as the JSON the cache holds.
pub const MAX_TOOL_BYTES: usize = 256 * 1024;

/// The most bytes one server's approved list takes, all its tools as the JSON the cache holds:
/// so the cache a session reads at every start is never larger.
pub const MAX_TOOL_LIST_BYTES: usize = 8 * 1024 * 1024;

/// A tool list past one of the caps on what may be approved. A figure counted while the list
/// was still coming in is a floor (`at least`): reading stops at the cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListCap {
    #[error(
        "it lists at least {count} tools, over the cap of {MAX_APPROVED_TOOLS} tools per server"
    )]
    Tools { count: usize },
    #[error(
        "tool `{}` takes {bytes} bytes (description, schemas and hints as JSON), over the cap of {MAX_TOOL_BYTES} bytes per tool",
        crate::text::escape(tool)
    )]
    Tool { tool: String, bytes: usize },
    #[error(
        "its tools take at least {bytes} bytes as JSON, over the cap of {MAX_TOOL_LIST_BYTES} bytes for one server's tool list"
    )]
    Total { bytes: usize },
}

/// Counts a tool list in as it comes, and stops it at the first cap it passes.
#[derive(Debug, Default, Clone)]
pub struct ListBudget {
    tools: usize,
    /// The bytes of the list as JSON so far: `[`, the tools, the commas between them, `]`.
    bytes: usize,
}

impl ListBudget {
    /// Count `tool` in: the cap it passes, if it does.
    pub fn admit(&mut self, tool: &McpTool) -> Result<(), ListCap> {
        let size = json_len(tool);
        if size > MAX_TOOL_BYTES {
            return Err(ListCap::Tool {
                tool: tool.name.clone(),
                bytes: size,
            });
        }
        self.tools += 1;
        if self.tools > MAX_APPROVED_TOOLS {
            return Err(ListCap::Tools { count: self.tools });
        }
        self.bytes += size + if self.tools == 1 { 2 } else { 1 };
        if self.bytes > MAX_TOOL_LIST_BYTES {
            return Err(ListCap::Total { bytes: self.bytes });
        }
        Ok(())
    }
}

/// Whether `tools` may be approved: within [`MAX_APPROVED_TOOLS`], [`MAX_TOOL_BYTES`] per tool
/// and [`MAX_TOOL_LIST_BYTES`] in all.
pub fn check_list(tools: &[McpTool]) -> Result<(), ListCap> {
    let mut budget = ListBudget::default();
    tools.iter().try_for_each(|t| budget.admit(t))
}

/// The length of `value` as compact JSON, counted without building the text.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// JSON text with every object's keys sorted.
fn canonical(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// An approved MCP server's tool list, in the lock: what runs (a hash of its definition) and
/// each tool's name with [`McpTool::hash`]. A tool beyond it, or one whose hash moved, is
/// withheld until `yep trust`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct McpPin {
    pub name: String,
    /// The workspace whose `.mcp.json` defines it; none for the home's and extensions'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// [`spec_hash`] of the definition approved: another command under the name is not it.
    pub spec: String,
    /// For a workspace's server, the hash of the code its command line names inside the
    /// workspace ([`crate::code::WorkspaceCode`]), when it names any: changed code is not what
    /// was approved. A pin written before yep pinned code has none, and approves no code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For a server started through a package launcher (`npx -y`, `uvx`), the package as yep
    /// installed it: the version and hashes approved, and what starts it
    /// ([`crate::launcher`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<crate::launcher::Installed>,
    /// Approved to run its launcher as written (`--as-written`): the launcher fetches at
    /// each cold start, with its registry and cache granted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_written: bool,
    pub tools: BTreeMap<String, String>,
    /// The skills it offered (MCP's skills extension), by name, each with the hash of its
    /// files ([`crate::mcp_skills::skill_hash`]): the copies kept with the approval are what
    /// a session serves ([`crate::mcp_skills`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skills: BTreeMap<String, String>,
}

/// Where an MCP server's definition comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "at", rename_all = "lowercase")]
pub enum Origin {
    /// An enabled extension's manifest (`<ext>__<server>`).
    Extension(String),
    /// `yep mcp add`.
    Home,
    /// A workspace's `.mcp.json`: never started before the user approves it there.
    Workspace(std::path::PathBuf),
}

impl Origin {
    /// The workspace a pin is kept for.
    pub fn workspace(&self) -> Option<String> {
        match self {
            Origin::Workspace(root) => Some(root.display().to_string()),
            _ => None,
        }
    }
}

/// SHA-256 (hex) of what runs: transport, command, args, url, env and header names as written
/// (before `${VAR}` expansion, so secrets are not in it and a new secret value is not a new
/// server), and for a workspace's, the workspace.
pub fn spec_hash(server: &McpServer, origin: &Origin) -> String {
    let value = serde_json::json!({
        "type": server.transport,
        "command": server.command,
        "args": server.args,
        "env": server.env,
        "url": server.url,
        "headers": server.headers.keys().collect::<Vec<_>>(),
        "workspace": origin.workspace(),
    });
    crate::hash::sha256_hex(canonical(&value).as_bytes())
}

/// How a listed tool stands against a pin.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "change", content = "tool", rename_all = "lowercase")]
pub enum ToolChange {
    /// Not in the pin.
    Added(String),
    /// Its description, schema or hints differ from what was approved.
    Changed(String),
    /// Approved, and no longer listed.
    Removed(String),
}

impl std::fmt::Display for ToolChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mark, name, why) = match self {
            ToolChange::Added(n) => ('+', n, "new"),
            ToolChange::Changed(n) => ('~', n, "description, schema or hints changed"),
            ToolChange::Removed(n) => ('-', n, "no longer listed"),
        };
        write!(f, "{mark} tool {} ({why})", crate::text::escape(name))
    }
}

/// What changed from `pin` to `tools` (everything is new without a pin), by tool name.
pub fn diff(pin: Option<&McpPin>, tools: &[McpTool]) -> Vec<ToolChange> {
    let empty = BTreeMap::new();
    let pinned = pin.map_or(&empty, |p| &p.tools);
    changes(pinned, tools.iter().map(|t| (t.name.as_str(), t.hash())))
}

/// What changed from the `pinned` tools (name to hash) to those `listed`, in their order;
/// the removed ones last.
pub fn changes<'a>(
    pinned: &BTreeMap<String, String>,
    listed: impl Iterator<Item = (&'a str, String)>,
) -> Vec<ToolChange> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, hash) in listed {
        seen.insert(name);
        match pinned.get(name) {
            None => out.push(ToolChange::Added(name.to_string())),
            Some(h) if *h != hash => out.push(ToolChange::Changed(name.to_string())),
            Some(_) => {}
        }
    }
    for name in pinned.keys() {
        if !seen.contains(name.as_str()) {
            out.push(ToolChange::Removed(name.clone()));
        }
    }
    out
}

impl McpTool {
    /// Its text as a person reviews it ([`crate::tooltext::tool_lines`]).
    pub fn lines(&self) -> Vec<String> {
        crate::tooltext::tool_lines(
            self.description.as_deref(),
            Some(&self.input_schema),
            self.output_schema.as_ref(),
            self.annotations.as_ref(),
        )
    }
}

/// What a tool that is new or changed says now, against what was approved (`approved`, the
/// cache of the last approval), for each of `changes` (`now` is the list they were read
/// from). A changed tool whose approved text is not cached is shown whole, and says so.
pub fn changed_text(
    changes: &[ToolChange],
    approved: &[McpTool],
    now: &[McpTool],
) -> Vec<crate::tooltext::ToolText> {
    let mut out = Vec::new();
    for change in changes {
        let (name, was) = match change {
            ToolChange::Added(name) => (name, None),
            ToolChange::Changed(name) => (
                name,
                Some(
                    approved
                        .iter()
                        .find(|t| t.name == *name)
                        .map(McpTool::lines),
                ),
            ),
            ToolChange::Removed(_) => continue,
        };
        let Some(tool) = now.iter().find(|t| t.name == *name) else {
            continue;
        };
        let lines = match was {
            Some(None) => std::iter::once(
                "  (the approved text is not kept here; the new text in full:)".to_string(),
            )
            .chain(crate::tooltext::diff(None, &tool.lines()))
            .collect(),
            Some(Some(old)) => crate::tooltext::diff(Some(&old), &tool.lines()),
            None => crate::tooltext::diff(None, &tool.lines()),
        };
        out.push(crate::tooltext::ToolText {
            tool: name.clone(),
            lines,
        });
    }
    out
}

/// The pin of server `name` defined at `origin`, if one is recorded.
pub fn pin(home: &Home, name: &str, origin: &Origin) -> Result<Option<McpPin>, StoreError> {
    Ok(pin_in(&home.lockfile()?, name, origin))
}

/// [`pin`], in a lock already read.
pub fn pin_in(lock: &crate::lockfile::Lockfile, name: &str, origin: &Origin) -> Option<McpPin> {
    let workspace = origin.workspace();
    lock.mcp
        .iter()
        .find(|p| p.name == name && p.workspace == workspace)
        .cloned()
}

/// The cache of an approved server's tools, under a name no server name can steer.
fn cache_path(home: &Home, name: &str, origin: &Origin) -> std::path::PathBuf {
    home.root
        .join("cache")
        .join("mcp")
        .join(format!("{}.json", cache_key(name, origin)))
}

/// Server `name` at `origin` as a file name no server name can steer.
pub(crate) fn cache_key(name: &str, origin: &Origin) -> String {
    let key = format!("{name}\0{}", origin.workspace().unwrap_or_default());
    crate::hash::sha256_hex(key.as_bytes())
}

/// What an approval of an MCP server covers besides its tools.
#[derive(Debug, Clone, Copy)]
pub struct Approved<'a> {
    /// Its definition ([`spec_hash`]).
    pub spec: &'a McpServer,
    /// The hash of the code it runs from the workspace, when it runs any.
    pub code: Option<&'a str>,
    /// The package yep installed for its launcher.
    pub install: Option<&'a crate::launcher::Installed>,
    /// Its launcher runs as written.
    pub as_written: bool,
}

impl<'a> Approved<'a> {
    /// The pin of server `name` at `origin` approved so with `tools`: what the lock holds.
    pub fn pin(&self, name: &str, origin: &Origin, tools: &[McpTool]) -> McpPin {
        McpPin {
            name: name.to_string(),
            workspace: origin.workspace(),
            spec: spec_hash(self.spec, origin),
            code: self.code.map(String::from),
            install: self.install.cloned(),
            as_written: self.as_written,
            tools: tools.iter().map(|t| (t.name.clone(), t.hash())).collect(),
            skills: BTreeMap::new(),
        }
    }

    /// An approval of `spec` running `code`, with no launcher install.
    pub fn of(spec: &'a McpServer, code: Option<&'a str>) -> Approved<'a> {
        Approved {
            spec,
            code,
            install: None,
            as_written: false,
        }
    }
}

/// Approve server `name` as defined (`spec`, running `code` from the workspace) at `origin`
/// with `tools`: the pin goes in the lock, the tools in the cache a lazy session offers them
/// from. A list past the caps ([`check_list`]) is refused, and nothing is written.
pub fn record(
    home: &Home,
    name: &str,
    origin: &Origin,
    approved: Approved<'_>,
    tools: &[McpTool],
    skills: BTreeMap<String, String>,
) -> Result<McpPin, StoreError> {
    check_list(tools).map_err(|cap| StoreError::McpToolList {
        server: name.to_string(),
        cap,
    })?;
    let pin = McpPin {
        skills,
        ..approved.pin(name, origin, tools)
    };
    let _lock = home.lock()?;
    // The cache first: a crash between the two leaves a cache no pin vouches for, never a pin
    // without its tools.
    let cache = cache_path(home, name, origin);
    // Compact, as the caps count it: never larger than `MAX_TOOL_LIST_BYTES`.
    let bytes = serde_json::to_vec(tools).unwrap_or_default();
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir)
            .map_err(crate::io(format!("failed to create {}", dir.display())))?;
    }
    crate::fsutil::write_atomic(&cache, &bytes, MODE_DEFAULT)
        .map_err(crate::io(format!("failed to write {}", cache.display())))?;
    let mut lock = home.lockfile()?;
    lock.mcp
        .retain(|p| !(p.name == pin.name && p.workspace == pin.workspace));
    lock.mcp.push(pin.clone());
    lock.save(&home.lock_path()).map_err(crate::io(format!(
        "failed to write {}",
        home.lock_path().display()
    )))?;
    // What was withheld is approved now.
    let _ = std::fs::remove_file(withheld_path(home, name, origin));
    Ok(pin)
}

/// Where a session notes the tools of server `name` at `origin` it withheld, for `yep mcp
/// list`.
fn withheld_path(home: &Home, name: &str, origin: &Origin) -> std::path::PathBuf {
    let mut path = cache_path(home, name, origin);
    path.set_extension("withheld.json");
    path
}

/// Note what a session withheld of server `name` (`+ tool x (new)`, …); an empty list clears
/// the note. Best effort: a session never fails for want of it.
pub fn note_withheld(home: &Home, name: &str, origin: &Origin, changes: &[String]) {
    let path = withheld_path(home, name, origin);
    if changes.is_empty() {
        let _ = std::fs::remove_file(&path);
        return;
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let body = serde_json::to_vec(changes).unwrap_or_default();
    // A rebuild that withholds the same again writes nothing.
    if std::fs::read(&path).is_ok_and(|old| old == body) {
        return;
    }
    let _ = crate::fsutil::write_atomic(&path, &body, MODE_DEFAULT);
}

/// What the last session withheld of server `name`, as it said it.
pub fn withheld(home: &Home, name: &str, origin: &Origin) -> Vec<String> {
    std::fs::read(withheld_path(home, name, origin))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Forget the pin (and cache) of server `name` at `origin`.
pub fn forget(home: &Home, name: &str, origin: &Origin) -> Result<(), StoreError> {
    let workspace = origin.workspace();
    let _lock = home.lock()?;
    let mut lock = home.lockfile()?;
    let before = (lock.mcp.len(), lock.grants.len());
    let installs: Vec<String> = lock
        .mcp
        .iter()
        .filter(|p| p.name == name && p.workspace == workspace)
        .filter_map(|p| p.install.as_ref().map(|i| i.dir.clone()))
        .collect();
    lock.mcp
        .retain(|p| !(p.name == name && p.workspace == workspace));
    // What the user granted it goes too: a server added again under the name starts bare.
    lock.set_granted(name, workspace.as_deref(), Default::default());
    if (lock.mcp.len(), lock.grants.len()) != before {
        lock.save(&home.lock_path()).map_err(crate::io(format!(
            "failed to write {}",
            home.lock_path().display()
        )))?;
    }
    let _ = std::fs::remove_file(cache_path(home, name, origin));
    // The package its launcher was installed as goes with its approval.
    for dir in installs
        .iter()
        .filter(|d| d.starts_with("installs/") && crate::fsutil::stays_inside(d))
    {
        let path = home.root.join(dir);
        let _ = crate::fsutil::remove_tree(&path);
        if let Some(parent) = path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

/// The approved tools of a pinned server as cached at approval: only those whose hash the pin
/// vouches for (a cache edited since is not believed). Empty when there is no cache, or when
/// it is longer than an approved list can be (planted, or written before the caps).
pub fn cached(home: &Home, origin: &Origin, pin: &McpPin) -> Vec<McpTool> {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(cache_path(home, &pin.name, origin)) else {
        return Vec::new();
    };
    let mut bytes = Vec::new();
    let cap = MAX_TOOL_LIST_BYTES as u64;
    if file.take(cap + 1).read_to_end(&mut bytes).is_err() || bytes.len() as u64 > cap {
        return Vec::new();
    }
    let tools: Vec<McpTool> = serde_json::from_slice(&bytes).unwrap_or_default();
    tools
        .into_iter()
        .filter(|t| pin.tools.get(&t.name) == Some(&t.hash()))
        .collect()
}

#[cfg(test)]
mod pin_tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> McpTool {
        McpTool {
            name: name.into(),
            description: Some(description.into()),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            output_schema: None,
            annotations: None,
        }
    }

    #[test]
    fn a_hash_ignores_key_order_and_sees_every_change() {
        let a = tool("t", "d");
        let mut reordered = a.clone();
        reordered.input_schema = json!({"properties": {"a": {"type": "string"}}, "type": "object"});
        assert_eq!(a.hash(), reordered.hash());
        let mut hinted = a.clone();
        hinted.annotations = Some(json!({"readOnlyHint": true}));
        assert_ne!(a.hash(), hinted.hash());
        assert_ne!(a.hash(), tool("t", "d2").hash());
    }

    #[test]
    fn a_list_past_any_cap_is_refused_naming_the_cap_and_never_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home {
            root: tmp.path().to_path_buf(),
        };
        let spec = McpServer {
            transport: "stdio".into(),
            command: Some("srv".into()),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
        };
        let refused = |tools: &[McpTool]| {
            let err = record(
                &home,
                "big",
                &Origin::Home,
                Approved::of(&spec, None),
                tools,
                Default::default(),
            )
            .unwrap_err();
            assert!(
                crate::lockfile::Lockfile::load(&home.lock_path())
                    .map(|l| l.mcp.is_empty())
                    .unwrap_or(true)
            );
            assert!(!home.root.join("cache").exists(), "a cache was written");
            err.to_string()
        };
        // One tool over its own cap.
        let fat = tool("fat", &"d".repeat(MAX_TOOL_BYTES));
        let said = refused(&[tool("a", "x"), fat]);
        assert!(
            said.contains("tool `fat` takes")
                && said.contains(&format!("over the cap of {MAX_TOOL_BYTES} bytes per tool")),
            "{said}"
        );
        // Too many tools.
        let many: Vec<McpTool> = (0..=MAX_APPROVED_TOOLS)
            .map(|i| tool(&format!("t{i}"), "x"))
            .collect();
        let said = refused(&many);
        assert!(
            said.contains(&format!(
                "it lists at least {} tools, over the cap of {MAX_APPROVED_TOOLS} tools per server",
                MAX_APPROVED_TOOLS + 1
            )),
            "{said}"
        );
        // Each tool within its cap, all of them past the list's.
        let each = MAX_TOOL_BYTES - 1024;
        let heavy: Vec<McpTool> = (0..MAX_TOOL_LIST_BYTES / each + 1)
            .map(|i| tool(&format!("t{i}"), &"d".repeat(each)))
            .collect();
        let said = refused(&heavy);
        assert!(
            said.contains(&format!(
                "over the cap of {MAX_TOOL_LIST_BYTES} bytes for one server's tool list"
            )),
            "{said}"
        );
        // Right at the caps is approved, and its cache is the list's size as counted.
        let fits: Vec<McpTool> = heavy[..MAX_TOOL_LIST_BYTES / each - 1].to_vec();
        assert_eq!(check_list(&fits), Ok(()));
        let pin = record(
            &home,
            "big",
            &Origin::Home,
            Approved::of(&spec, None),
            &fits,
            Default::default(),
        )
        .unwrap();
        let cache = cache_path(&home, "big", &Origin::Home);
        let size = std::fs::metadata(&cache).unwrap().len() as usize;
        assert!(size <= MAX_TOOL_LIST_BYTES, "{size}");
        assert_eq!(size, serde_json::to_vec(&fits).unwrap().len());
        assert_eq!(cached(&home, &Origin::Home, &pin).len(), fits.len());
        // A cache longer than any approved list (planted, or left by an older yep) is not read.
        // (Valid JSON of the same tools, padded with white space.)
        let mut planted = serde_json::to_vec(&fits).unwrap();
        planted.pop();
        planted.extend_from_slice(&vec![b' '; MAX_TOOL_LIST_BYTES]);
        planted.extend_from_slice(b"]");
        let parsed: Vec<McpTool> = serde_json::from_slice(&planted).unwrap();
        assert_eq!(parsed.len(), fits.len());
        std::fs::write(&cache, &planted).unwrap();
        assert!(cached(&home, &Origin::Home, &pin).is_empty());
    }

    #[test]
    fn a_pin_records_tools_and_the_diff_names_what_moved() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home {
            root: tmp.path().to_path_buf(),
        };
        let spec = McpServer {
            transport: "stdio".into(),
            command: Some("srv".into()),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
        };
        let ws = Origin::Workspace("/w".into());
        let pin = record(
            &home,
            "s",
            &ws,
            Approved::of(&spec, None),
            &[tool("a", "x"), tool("b", "y")],
            Default::default(),
        )
        .unwrap();
        assert_eq!(super::pin(&home, "s", &ws).unwrap(), Some(pin.clone()));
        assert_eq!(super::pin(&home, "s", &Origin::Home).unwrap(), None);
        assert_eq!(cached(&home, &ws, &pin).len(), 2);
        let now = [tool("a", "x (changed)"), tool("c", "z")];
        assert_eq!(
            diff(Some(&pin), &now),
            [
                ToolChange::Changed("a".into()),
                ToolChange::Added("c".into()),
                ToolChange::Removed("b".into())
            ]
        );
        // Another command under the name, or elsewhere, is another server.
        let other = McpServer {
            command: Some("evil".into()),
            ..spec.clone()
        };
        assert_ne!(spec_hash(&spec, &ws), spec_hash(&other, &ws));
        assert_ne!(
            spec_hash(&spec, &ws),
            spec_hash(&spec, &Origin::Workspace("/v".into()))
        );
        forget(&home, "s", &ws).unwrap();
        assert_eq!(super::pin(&home, "s", &ws).unwrap(), None);
    }
}
