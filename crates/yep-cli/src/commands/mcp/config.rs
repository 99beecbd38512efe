//! `yep mcp config <agent>`: the snippet that adds `yep mcp serve` to an agent's MCP config,
//! in the format that agent reads.

use yep_store::Home;

/// An agent `yep mcp config` writes a snippet for.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
    Cursor,
    Goose,
    Gemini,
}

/// The config snippet that runs `yep mcp serve` from `agent`, with this home, and where it
/// goes (for stderr: the snippet alone is what stdout holds, ready to parse or paste).
pub(super) fn config_snippet(agent: Agent, home: &Home) -> anyhow::Result<(String, String)> {
    let yep = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(String::from))
        .unwrap_or_else(|| "yep".into());
    let home_dir = home.root.display().to_string();
    let args = ["--home", home_dir.as_str(), "mcp", "serve"];
    let entry = serde_json::json!({"command": yep, "args": args});
    let doc = serde_json::json!({"mcpServers": {"yep": entry}});
    Ok(match agent {
        Agent::Claude => (
            serde_json::to_string_pretty(&doc)?,
            format!(
                "merge this into a project's `.mcp.json` (or `~/.claude.json`), or add the entry alone: claude mcp add-json yep '{}'",
                serde_json::to_string(&entry)?.replace('\'', "'\\''")
            ),
        ),
        Agent::Cursor => (
            serde_json::to_string_pretty(&doc)?,
            "merge this into `~/.cursor/mcp.json` (or `.cursor/mcp.json` in a project)".into(),
        ),
        Agent::Gemini => (
            serde_json::to_string_pretty(&doc)?,
            "merge this into `~/.gemini/settings.json`".into(),
        ),
        Agent::Codex => {
            let quoted: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            (
                format!(
                    "[mcp_servers.yep]\ncommand = {}\nargs = [{}]",
                    toml_string(&yep),
                    quoted.join(", ")
                ),
                "add this to `~/.codex/config.toml`".into(),
            )
        }
        Agent::Goose => {
            let quoted: Vec<String> = args
                .iter()
                .map(|a| format!("      - {}", toml_string(a)))
                .collect();
            (
                format!(
                    "extensions:\n  yep:\n    type: stdio\n    name: yep\n    enabled: true\n    cmd: {}\n    args:\n{}",
                    toml_string(&yep),
                    quoted.join("\n")
                ),
                "merge this into `~/.config/goose/config.yaml`".into(),
            )
        }
    })
}

/// `text` as a double-quoted string, escaped as TOML and YAML both read it.
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}
