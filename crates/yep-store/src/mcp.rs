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
    if !server.headers.is_empty() {
        let secrets_path = home.connections_path();
        guard_mode(&secrets_path)?;
        let mut secrets = settings::load(&secrets_path)?;
        let mut table = Table::new();
        for (k, v) in &server.headers {
            table.insert(k, value(v.as_str()));
        }
        secrets.insert(&secrets_key(name), Item::Table(table));
        settings::store(&secrets_path, &secrets, MODE_PRIVATE)?;
    }
    settings::store(&path, &doc, MODE_DEFAULT)
}

/// Remove user-level MCP server `name` and its header secrets. Whether it was there.
pub fn remove(home: &Home, name: &str) -> Result<bool, StoreError> {
    let _lock = home.lock()?;
    let path = home.settings_path();
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = settings::load(&path)?;
    let removed = doc
        .get_mut(TABLE)
        .and_then(Item::as_table_mut)
        .and_then(|t| t.remove(name))
        .is_some();
    if removed {
        settings::store(&path, &doc, MODE_DEFAULT)?;
    }
    settings::remove_table(&home.connections_path(), &secrets_key(name))?;
    Ok(removed)
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
    read(home, |server, header| {
        secrets
            .get(&secrets_key(server))
            .and_then(|t| t.get(header))
            .and_then(Item::as_str)
            .map(String::from)
    })
}

fn read(
    home: &Home,
    header_value: impl Fn(&str, &str) -> Option<String>,
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
            .filter_map(|h| header_value(name, &h).map(|v| (h, v)))
            .collect();
        out.insert(
            name.to_string(),
            McpServer {
                transport: get("type").unwrap_or_else(|| "stdio".into()),
                command: get("command"),
                args: strings(entry.get("args")),
                env: BTreeMap::new(),
                url: get("url"),
                headers,
            },
        );
    }
    Ok(out)
}
