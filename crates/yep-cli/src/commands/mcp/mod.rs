//! `yep mcp add | remove | list`: MCP servers the user adds to the home, and every MCP server
//! a session here would see (the user's, the enabled extensions', the workspace's).

mod add;
mod config;
mod list;
mod login;
mod pin;
mod serve;
mod trust;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use yep_host::runtime::mcp::{McpSource, enabled_manifests, sources};
use yep_store::Home;
use yep_store::mcp::Origin;
use yep_store::text::{escape, escape_controls};

pub use config::Agent;
pub use pin::pin_contributed;
pub use trust::{TrustArgs, trust};

#[derive(clap::Subcommand)]
pub enum McpCommand {
    /// Add an MCP server to the home: `yep mcp add <name> -- <command> [args…]`, or
    /// `yep mcp add <name> --url <url> [--header K=V]…` (header values are stored as secrets).
    Add(add::AddArgs),
    /// Log in to an MCP server over HTTP with OAuth: its authorization page opens in the
    /// browser (`$BROWSER`, else the system's opener; the URL is printed too), the answer
    /// comes back to a loopback address, and the tokens are kept in connections.toml
    /// (owner-only). Again, it asks for what the server's last refusal named (a step-up).
    Login {
        /// The server's name, as `yep mcp list` shows it.
        name: String,
        /// A scope to ask for beyond what the server suggests (repeatable).
        #[arg(long = "scope", value_name = "SCOPE")]
        scopes: Vec<String>,
        /// A client registered beforehand with the authorization server (else yep registers
        /// itself where the server allows it).
        #[arg(long, value_name = "ID")]
        client_id: Option<String>,
        /// How long to wait for the page's answer.
        #[arg(long, value_name = "TIME", default_value = "5m", value_parser = humantime::parse_duration)]
        wait: std::time::Duration,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget an MCP server's OAuth login (its tokens, kept in connections.toml).
    Logout {
        /// The server's name.
        name: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
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
    /// Serve every enabled extension and approved MCP server as one MCP server on stdio, for
    /// any agent that speaks MCP: the same tools, hooks and pins as a yep session.
    Serve(serve::ServeArgs),
    /// Print the snippet that adds `yep mcp serve` to an agent's MCP config: only the config
    /// on stdout (JSON, TOML or YAML, as that agent reads it), where it goes on stderr.
    Config {
        /// The agent whose config format to print.
        #[arg(value_enum)]
        agent: Agent,
    },
}

impl McpCommand {
    /// Whether this is a stdio `yep mcp serve` that attaches to the home's shared host.
    pub fn attaches(&self) -> bool {
        matches!(self, McpCommand::Serve(serve) if serve.http.is_none() && !serve.no_shared && !serve.block_secrets)
    }
}

/// Where `yep` runs: the workspace whose `.mcp.json` it reads.
fn workspace() -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    std::env::current_dir().context("failed to read the current directory")
}

/// Every MCP server a session here sees, warnings on stderr.
pub(crate) fn here(home: &Home) -> anyhow::Result<Vec<McpSource>> {
    let extensions = enabled_manifests(home)?;
    let mut warn = |message: String| {
        let _ = writeln!(std::io::stderr(), "warning: {}", escape_controls(&message));
    };
    Ok(sources(home, &extensions, &workspace()?, &mut warn))
}

/// The MCP server a session here sees by the name `yep mcp list` gives it, if any.
pub(crate) fn named(home: &Home, name: &str) -> anyhow::Result<Option<McpSource>> {
    Ok(here(home)?.into_iter().find(|s| s.name == name))
}

/// The error for a name that is neither an installed extension nor an MCP server here.
pub(crate) fn no_such_server(home: &Home, name: &str) -> anyhow::Error {
    // The installed name that is close, if any: `; did you mean `weather`?`.
    let close = match home.not_installed(name) {
        yep_store::StoreError::NotInstalled(_, close) => close,
        _ => String::new(),
    };
    crate::output::hinted(
        format!(
            "no extension or MCP server named `{}` here{close}",
            escape(name)
        ),
        &[
            "`yep list` shows installed extensions, `yep mcp list` the MCP servers a session in this directory sees",
        ],
    )
}

fn origin_text(origin: &Origin) -> String {
    match origin {
        Origin::Extension(ext) => format!("extension {ext}"),
        Origin::Home => "home".into(),
        Origin::Workspace(_) => "workspace".into(),
    }
}

/// Where a server is defined, as `yep trust` names the one it means: the extension, the
/// home's settings, or the workspace's `.mcp.json` file.
fn origin_long(origin: &Origin, home: &Home) -> String {
    match origin {
        Origin::Extension(ext) => format!("extension {ext}"),
        Origin::Home => format!("home, {}", home.settings_path().display()),
        Origin::Workspace(root) => format!("workspace, {}", root.join(".mcp.json").display()),
    }
}

pub async fn run(cmd: McpCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::Add(args) => add::add(args, home).await?,
        McpCommand::Login {
            name,
            scopes,
            client_id,
            wait,
            json,
        } => return login::login(home, &name, scopes, client_id, wait, json).await,
        McpCommand::Logout { name, json } => login::logout(home, &name, json)?,
        McpCommand::Remove { name, json } => add::remove(home, &name, json)?,
        McpCommand::Serve(args) => return serve::run(args, home).await,
        McpCommand::Config { agent } => {
            let (snippet, hint) = config::config_snippet(agent, home)?;
            crate::output::stdout_line(&snippet);
            crate::output::stderr_line(&hint);
        }
        McpCommand::List { json } => list::list(home, json)?,
    }
    Ok(ExitCode::SUCCESS)
}
