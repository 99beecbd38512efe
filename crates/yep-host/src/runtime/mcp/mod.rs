//! MCP servers in the session, beside the extensions and under the same policy: where they
//! come from (the enabled extensions' `mcpServers`, the home's `yep mcp add`, the workspace's
//! `.mcp.json`), whether they may run (an approval pinned in the lock), and their tools in the
//! host's table as `mcp__<server>__<tool>`, offered from the approved list until the server
//! first starts, and as it last listed them while it is stopped after that (an idle stop, say).
//! A tool that is new or changed since approval is withheld until `yep trust`.

mod approve;
mod entry;
mod launch;
mod sources;
mod stage;

pub(crate) use approve::ask_approval;
pub use approve::{
    APPROVE, McpProbeError, Pinned, Probed, approve, approve_with, candidate, probe, record,
};
pub(crate) use entry::McpState;
pub use entry::shared_servers;
pub(crate) use entry::{McpEntry, entries, learn};
pub use launch::McpLaunchError;
pub(crate) use launch::launch_with;
pub use launch::{Package, launch};
pub use sources::{McpSource, Unapproved, enabled_manifests, host_vars_read, sources};
pub(crate) use sources::{PACKAGE_VARS, package_vars};
pub use stage::{StageOptions, Staged, stage};

use crate::capability::OfferedTool;
use crate::manifest::McpServer;
use crate::store::mcp::{McpTool, Origin};
use serde_json::Value;
use std::time::Duration;

/// How long an MCP server's first `tools/list` may take before a session serves its pinned
/// list in its place, when `settings.toml` does not say (as docker-agent skips such a server).
pub(crate) const DEFAULT_MCP_LIST_DEADLINE: Duration = Duration::from_secs(10);

/// The `settings.toml` key [`mcp_list_deadline_setting`] reads.
pub(crate) const MCP_LIST_DEADLINE_KEY: &str = "mcp_list_deadline";

/// How long `home` lets an MCP server's first `tools/list` take before a session serves the
/// tools its approval pinned: its `mcp_list_deadline` setting (`"10s"`, any [`humantime`]
/// duration), `None` for `"off"` or `"0"` (wait as long as the handshake may take), ten
/// seconds when it has none. For [`crate::HostOptions::mcp_list_deadline`].
pub fn mcp_list_deadline_setting(
    home: &crate::store::Home,
) -> Result<Option<Duration>, super::idle::IdleStopError> {
    super::duration_setting(home, MCP_LIST_DEADLINE_KEY, Some(DEFAULT_MCP_LIST_DEADLINE))
}

/// The prefix of every MCP tool's name in the table; no extension tool may take it.
pub(crate) const MCP_PREFIX: &str = "mcp__";

/// The largest `.mcp.json` read; a bigger one is skipped with a warning.
pub(crate) const MAX_MCP_JSON_BYTES: u64 = 1024 * 1024;

/// The most servers one `.mcp.json` defines; the rest are skipped with a warning.
pub(crate) const MAX_WORKSPACE_SERVERS: usize = 64;

/// How long an MCP server gets to exit after its stdin closes, and again after SIGTERM.
pub(crate) const MCP_GRACE: Duration = Duration::from_secs(2);

/// The stem of MCP server `name`'s log and run state, unique to the server: its log is
/// `<home>/logs/<stem>.log`. `mcp.<name>` for the home's and extensions' (a server name is
/// `A-Z a-z 0-9 _ . -`, a file name as it is; the `.` keeps it apart from every extension's
/// name), and `mcp.<name>@<workspace>` for a workspace's, where `<workspace>` is 12 hex digits
/// of the workspace path's hash: no other server's stem holds an `@`, and the same name in two
/// workspaces is two servers with two logs.
pub fn log_stem(name: &str, origin: &Origin) -> String {
    // Names are checked where they are read; one that is not a name gets a stem that is.
    let name = match crate::store::manifest::valid_item_name(name) {
        true => name.to_string(),
        false => format!(
            "{}={}",
            safe(name),
            &crate::store::hash::sha256_hex(name.as_bytes())[..12]
        ),
    };
    match origin.workspace() {
        Some(root) => format!(
            "mcp.{name}@{}",
            &crate::store::hash::sha256_hex(root.as_bytes())[..12]
        ),
        None => format!("mcp.{name}"),
    }
}

/// `text` with every character but `A-Z a-z 0-9 _ -` as `_`: a tool name every model API
/// takes.
fn safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The table's name for `tool` of MCP server `server`.
pub(crate) fn tool_name(server: &str, tool: &str) -> String {
    format!("{MCP_PREFIX}{}__{}", safe(server), safe(tool))
}

/// The tools a server lists, as a pin records them.
pub(crate) fn pinned_form(tool: &OfferedTool) -> McpTool {
    McpTool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.schema.clone().unwrap_or(Value::Null),
        output_schema: tool.output_schema.clone(),
        annotations: tool.annotations.clone(),
    }
}

/// What runs, as one line: the command and its arguments, or the url.
pub fn command_line(server: &McpServer) -> String {
    match (&server.command, &server.url) {
        (Some(c), _) => std::iter::once(c.as_str())
            .chain(server.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        (None, Some(u)) => u.clone(),
        (None, None) => String::new(),
    }
}
