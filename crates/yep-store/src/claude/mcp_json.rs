//! A plugin's MCP servers (`.mcp.json`, `mcp.json` or an inline `mcpServers`), mapped field by
//! field onto yep's strict [`McpServer`]: what does not fit is a note, never passed through.

use crate::manifest::McpServer;
use crate::text::escape;
use serde_json::Value;
use std::collections::BTreeMap;

/// The servers of an MCP file: wrapped (`{"mcpServers": {…}}`, or Codex's `mcp_servers`) when
/// that key holds an object, else flat, every top-level key a server (`$schema` aside).
pub(crate) fn servers(
    file: &Value,
    from: &str,
    out: &mut BTreeMap<String, McpServer>,
    notes: &mut Vec<String>,
) {
    let map = ["mcpServers", "mcp_servers"]
        .iter()
        .find_map(|k| file.get(*k).filter(|v| v.is_object()))
        .unwrap_or(file);
    let Some(map) = map.as_object() else {
        notes.push(format!("{from}: not an object of MCP servers; left out"));
        return;
    };
    for (name, spec) in map {
        if name == "$schema" {
            continue;
        }
        match server(spec) {
            Ok((server, ignored)) => {
                if !ignored.is_empty() {
                    notes.push(format!(
                        "MCP server {}: {} ignored",
                        escape(name),
                        ignored.join(", ")
                    ));
                }
                out.insert(name.clone(), server);
            }
            Err(why) => notes.push(format!("MCP server {} left out: {why}", escape(name))),
        }
    }
}

/// One server: stdio (`command`, `args`, `env`) or HTTP (`url`, `headers`); the keys it has
/// that yep does not read, escaped.
fn server(spec: &Value) -> Result<(McpServer, Vec<String>), String> {
    let Some(spec) = spec.as_object() else {
        return Err("not an object".into());
    };
    let transport = match spec.get("type").and_then(Value::as_str) {
        None | Some("stdio") => "stdio",
        Some("http" | "streamable-http" | "streamableHttp") => "http",
        Some(other) => {
            return Err(format!(
                "its transport `{}` is one yep does not connect to (stdio and http only)",
                escape(other)
            ));
        }
    };
    let string = |key: &str| -> Result<Option<String>, String> {
        match spec.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` is not a string")),
        }
    };
    let strings = |key: &str| -> Result<Vec<String>, String> {
        match spec.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("`{key}` is not a list of strings")),
            Some(_) => Err(format!("`{key}` is not a list of strings")),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match spec.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("`{key}` is not a map of strings")),
            Some(_) => Err(format!("`{key}` is not a map of strings")),
        }
    };
    let server = McpServer {
        transport: transport.to_string(),
        command: string("command")?,
        args: strings("args")?,
        env: map("env")?,
        url: string("url")?,
        headers: map("headers")?,
    };
    match transport {
        "stdio"
            if server
                .command
                .as_deref()
                .is_none_or(|c| c.trim().is_empty()) =>
        {
            return Err("a stdio server with no `command`".into());
        }
        "http" if server.url.as_deref().is_none_or(|u| u.trim().is_empty()) => {
            return Err("an http server with no `url`".into());
        }
        _ => {}
    }
    let ignored = spec
        .keys()
        .filter(|k| !["type", "command", "args", "env", "url", "headers"].contains(&k.as_str()))
        .map(|k| format!("`{}`", escape(k)))
        .collect();
    Ok((server, ignored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(file: Value) -> (BTreeMap<String, McpServer>, Vec<String>) {
        let (mut out, mut notes) = (BTreeMap::new(), Vec::new());
        servers(&file, ".mcp.json", &mut out, &mut notes);
        (out, notes)
    }

    #[test]
    fn an_mcp_file_is_read_wrapped_or_flat() {
        let (flat, _) = read(json!({"example-server": {"type": "http", "url": "https://x/api"}}));
        assert_eq!(flat["example-server"].transport, "http");
        assert_eq!(flat["example-server"].url.as_deref(), Some("https://x/api"));
        let (wrapped, notes) = read(json!({"mcpServers": {
            "a": {"command": "npx", "args": ["-y", "a"], "env": {"K": "${K}"}, "cwd": "."},
            "b": {"type": "sse", "url": "https://x"},
            "c": {"command": 3}
        }}));
        assert_eq!(wrapped.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(wrapped["a"].args, ["-y", "a"]);
        let notes = notes.join("\n");
        assert!(notes.contains("MCP server a: `cwd` ignored"), "{notes}");
        assert!(
            notes.contains("MCP server b left out: its transport `sse`"),
            "{notes}"
        );
        assert!(
            notes.contains("MCP server c left out: `command` is not a string"),
            "{notes}"
        );
    }
}
