//! `yep mcp add | remove | list`: MCP servers the user adds to the home, and every MCP server
//! a session here would see (the user's, the enabled extensions', the workspace's).

use crate::output::stdout_line;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use yep_store::Home;
use yep_store::manifest::McpServer;
use yep_store::text::escape;

#[derive(clap::Subcommand)]
pub enum McpCommand {
    /// Add an MCP server to the home: `yep mcp add <name> -- <command> [args…]`, or
    /// `yep mcp add <name> --url <url> [--header K=V]…` (header values are stored as secrets).
    Add {
        /// The server's name (A-Z a-z 0-9 _ . -, no `__`).
        name: String,
        /// A streamable HTTP server at this URL (instead of a command).
        #[arg(long)]
        url: Option<String>,
        /// An HTTP header, `K=V`; its value is kept in connections.toml (owner-only).
        #[arg(long = "header", value_name = "K=V")]
        headers: Vec<String>,
        /// Print what was added as JSON.
        #[arg(long)]
        json: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Remove an MCP server added with `yep mcp add` (and its header secrets).
    Remove {
        /// The name it was added under.
        name: String,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every MCP server a session here sees: the home's, the enabled extensions'
    /// (`<ext>__<server>`) and this workspace's `.mcp.json`. Header values are never shown.
    List {
        /// Print every server as JSON (header values never shown).
        #[arg(long)]
        json: bool,
    },
}

/// One row of `yep mcp list`.
#[derive(Serialize)]
struct Row {
    name: String,
    /// `home`, `extension <name>`, or `workspace`.
    source: String,
    #[serde(flatten)]
    server: McpServer,
}

pub fn run(cmd: McpCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::Add {
            name,
            url,
            headers,
            json,
            command,
        } => {
            let mut parsed = BTreeMap::new();
            for h in &headers {
                let (k, v) = h
                    .split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .ok_or_else(|| anyhow::anyhow!("--header {h:?} is not K=V"))?;
                parsed.insert(k.trim().to_string(), v.to_string());
            }
            let server = match (url, command.split_first()) {
                (Some(_), Some(_)) => anyhow::bail!("give a --url or a command after --, not both"),
                (None, None) => anyhow::bail!(
                    "give a command after -- (`yep mcp add {name} -- <command> [args…]`) or a --url"
                ),
                (Some(url), None) => McpServer {
                    transport: "http".into(),
                    command: None,
                    args: Vec::new(),
                    env: BTreeMap::new(),
                    url: Some(url),
                    headers: parsed,
                },
                (None, Some((program, args))) => {
                    if !parsed.is_empty() {
                        anyhow::bail!("--header is for an http server (--url)");
                    }
                    McpServer {
                        transport: "stdio".into(),
                        command: Some(program.clone()),
                        args: args.to_vec(),
                        env: BTreeMap::new(),
                        url: None,
                        headers: BTreeMap::new(),
                    }
                }
            };
            yep_store::mcp::add(home, &name, &server)?;
            if json {
                stdout_line(&serde_json::json!({ "added": name }).to_string());
            } else {
                stdout_line(&format!("added MCP server {}", escape(&name)));
            }
        }
        McpCommand::Remove { name, json } => {
            if !yep_store::mcp::remove(home, &name)? {
                anyhow::bail!(
                    "no MCP server named `{}` was added to this home",
                    escape(&name)
                );
            }
            if json {
                stdout_line(&serde_json::json!({ "removed": name }).to_string());
            } else {
                stdout_line(&format!("removed MCP server {}", escape(&name)));
            }
        }
        McpCommand::List { json } => {
            let rows = rows(home)?;
            if json {
                stdout_line(&serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                stdout_line("no MCP servers; add one: yep mcp add <name> -- <command> [args…]");
            } else {
                for r in &rows {
                    let what = match (&r.server.command, &r.server.url) {
                        (Some(c), _) => std::iter::once(c.as_str())
                            .chain(r.server.args.iter().map(String::as_str))
                            .collect::<Vec<_>>()
                            .join(" "),
                        (None, Some(u)) => u.clone(),
                        (None, None) => String::new(),
                    };
                    stdout_line(&format!(
                        "{}  [{}]  {}  ({})",
                        escape(&r.name),
                        escape(&r.server.transport),
                        escape(&what),
                        escape(&r.source)
                    ));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The home's servers, then the enabled extensions', then the workspace's, which override by
/// name (as a session sees them).
fn rows(home: &Home) -> anyhow::Result<Vec<Row>> {
    let mut out: BTreeMap<String, Row> = BTreeMap::new();
    for (name, server) in yep_store::mcp::list(home)? {
        out.insert(
            name.clone(),
            Row {
                name,
                source: "home".into(),
                server,
            },
        );
    }
    let lock = home.lockfile()?;
    let enabled = yep_store::settings::enabled(&home.settings_path())?;
    for entry in lock.extensions.iter().filter(|e| enabled.contains(&e.name)) {
        let Ok(manifest) = home.package_manifest(entry) else {
            continue;
        };
        for (server, spec) in manifest.yolop.mcp_servers {
            let name = format!("{}__{server}", entry.name);
            out.insert(
                name.clone(),
                Row {
                    name,
                    source: format!("extension {}", entry.name),
                    server: spec,
                },
            );
        }
    }
    let workspace = std::env::current_dir()?.join(".mcp.json");
    if let Ok(text) = std::fs::read_to_string(&workspace)
        && let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text)
    {
        for (name, spec) in doc["mcpServers"].as_object().into_iter().flatten() {
            if let Ok(mut server) = serde_json::from_value::<McpServer>(spec.clone()) {
                // A workspace file often holds tokens as they are: never shown.
                for v in server.headers.values_mut().chain(server.env.values_mut()) {
                    *v = yep_store::mcp::HIDDEN.into();
                }
                out.insert(
                    name.clone(),
                    Row {
                        name: name.clone(),
                        source: "workspace".into(),
                        server,
                    },
                );
            }
        }
    }
    Ok(out.into_values().collect())
}
