//! `yep mcp list`: every MCP server a session here sees (the home's, the enabled extensions',
//! the workspace's), with its state, login, package, sandbox and approval.

use super::{here, origin_text};
use crate::output::stdout_line;
use serde::Serialize;
use std::path::PathBuf;
use yep_host::runtime::mcp::{McpSource, command_line, log_stem};
use yep_host::settings::sandbox_mode_or_required;
use yep_store::Home;
use yep_store::manifest::McpServer;
use yep_store::mcp::Origin;
use yep_store::text::{escape, escape_controls};

/// One row of `yep mcp list`.
#[derive(Serialize)]
struct Row {
    name: String,
    /// `home`, `extension <name>`, or `workspace`.
    source: String,
    #[serde(flatten)]
    server: McpServer,
    /// `approved`, or why it does not start.
    approval: String,
    /// `configured` (not running), `started`, `idle` (stopped for want of use by a host that
    /// starts it again on next use) or `failed`, as the last session left it.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    /// Tools the last session withheld as new or changed since approval.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    withheld: Vec<String>,
    /// Its log (a stdio server's stderr), one per server.
    log: PathBuf,
    /// A stdio server's sandbox grants beyond the default profile (what `yep grant` gave
    /// it); none for a server reached over HTTP, which yep does not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<Vec<String>>,
    /// An HTTP server's OAuth login: `logged in`, or `needs login` (never the tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    login: Option<&'static str>,
    /// The package yep installed for its launcher (`npx -y`, `uvx`), as pinned, and whether
    /// its files still match.
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// Its launcher runs as written (`--as-written`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    as_written: bool,
}

/// An HTTP server's OAuth login as `list` shows it: `logged in` when one is kept for its URL,
/// `needs login` when it takes one and none is kept, nothing otherwise.
fn login_state(home: &Home, source: &McpSource) -> Option<&'static str> {
    let url = source
        .server
        .url
        .as_deref()
        .filter(|_| source.server.transport == "http")?;
    if yep_host::dialect::mcp::credentials::Credentials::new(home, &source.name, url).logged_in() {
        Some("logged in")
    } else if source.origin == Origin::Home && yep_store::mcp::oauth_wanted(home, &source.name) {
        Some("needs login")
    } else {
        None
    }
}

/// `yep mcp list`: the servers a session here sees, by name.
pub(super) fn list(home: &Home, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let lock = home.lockfile()?;
    for s in here(home)? {
        rows.push(row(home, &lock, s));
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    if json {
        stdout_line(&serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        stdout_line("no MCP servers; add one: yep mcp add <name> -- <command> [args…]");
    } else {
        for r in &rows {
            print_row(home, r);
        }
    }
    Ok(())
}

/// One server's row, as the lockfile and its last run leave it.
fn row(home: &Home, lock: &yep_store::lockfile::Lockfile, s: McpSource) -> Row {
    let pin = yep_store::mcp::pin_in(lock, &s.name, &s.origin);
    let stem = log_stem(&s.name, &s.origin);
    let (state, failure) = yep_store::state::run_state(home, &stem);
    let login = login_state(home, &s);
    let package = pin.as_ref().and_then(|p| p.install.as_ref()).map(|i| {
        let mut said = i.said();
        if let Err(e) = i.verify(home, &s.name) {
            said.push_str(&format!(": {e}"));
        }
        said
    });
    Row {
        package,
        as_written: pin.as_ref().is_some_and(|p| p.as_written),
        login,
        sandbox: match s.server.transport.as_str() {
            // An MCP server has no grants of its own: the user's are all it has.
            "stdio" => Some(
                yep_store::approval::effective_grants(
                    lock,
                    &s.name,
                    s.origin.workspace().as_deref(),
                    &Default::default(),
                )
                .lines(),
            ),
            _ => None,
        },
        log: home.log_path(&stem),
        withheld: yep_store::mcp::withheld(home, &s.name, &s.origin),
        state,
        failure,
        approval: s
            .unapproved(pin.as_ref())
            .unwrap_or_else(|| "approved".into()),
        name: s.name,
        source: origin_text(&s.origin),
        server: s.shown,
    }
}

/// One row as text: its command line, then a line for each thing worth saying.
fn print_row(home: &Home, r: &Row) {
    stdout_line(&format!(
        "{}  [{}, {}]  {}  ({})",
        escape(&r.name),
        escape(&r.server.transport),
        r.state,
        escape(&command_line(&r.server)),
        escape(&r.source)
    ));
    if let Some(login) = r.login {
        let next = match login {
            "needs login" => format!(" (`yep mcp login {}`)", escape(&r.name)),
            _ => String::new(),
        };
        stdout_line(&format!("  login: {login}{next}"));
    }
    if let Some(failure) = &r.failure {
        stdout_line(&format!("  last failure: {}", escape(failure)));
    }
    if let Some(package) = &r.package {
        stdout_line(&format!("  package: {}", escape_controls(package)));
    }
    if r.as_written {
        stdout_line("  package: fetched by its launcher at each cold start (as written)");
    }
    stdout_line(&format!("  log: {}", escape(&r.log.display().to_string())));
    if let Some(grants) = &r.sandbox {
        stdout_line(&format!(
            "  sandbox: {}",
            crate::commands::grant::profile_text(grants, sandbox_mode_or_required(home))
        ));
    }
    for change in &r.withheld {
        stdout_line(&format!(
            "  withheld: {} (`yep trust {}` shows and approves it)",
            escape_controls(change),
            escape(&r.name)
        ));
    }
    if r.approval != "approved" {
        stdout_line(&format!("  {}", escape_controls(&r.approval)));
    }
}
