//! Pinning an MCP server's tools as they are now, and how a pinned launcher install is said:
//! shared by `add`, `login` and `trust`, and run for the servers a new package contributes.

use super::workspace;
use crate::output::stdout_line;
use std::io::Write;
use yep_host::runtime::mcp::{
    McpProbeError, McpSource, Pinned, StageOptions, approve_with, sources,
};
use yep_store::Home;
use yep_store::launcher::{Installed, Launched};
use yep_store::mcp::Origin;
use yep_store::text::{escape, escape_controls};

/// `1 tool`, `3 tools`.
pub(super) fn tools_count(n: usize) -> String {
    format!("{n} tool{}", if n == 1 { "" } else { "s" })
}

/// Start `source` once (run from `here`), its launcher's package made ready as `opts` says,
/// list its tools, and pin them as approved.
pub(super) async fn pin_now(
    home: &Home,
    source: &McpSource,
    here: &std::path::Path,
    opts: &StageOptions,
) -> Result<Pinned, McpProbeError> {
    approve_with(
        home,
        source,
        here,
        &yep_host::SupervisorOptions::for_home(home),
        opts,
    )
    .await
}

/// What a launcher's pinned install is, as the consent screen and `yep mcp add` say it: the
/// package, version and hash, where it lives, and where the registry says it was built.
pub(super) fn install_lines(install: &Installed, home: &Home) -> Vec<String> {
    let mut lines = vec![
        format!("installed {}", escape(&install.said())),
        format!(
            "runs offline from {}, not through the launcher",
            escape(&install.path(home).display().to_string())
        ),
    ];
    if let Some(p) = &install.provenance {
        lines.push(format!(
            "provenance: built from {}{}",
            escape(&p.repository),
            p.workflow
                .as_deref()
                .map(|w| format!(" by {}", escape(w)))
                .unwrap_or_default()
        ));
    }
    lines
}

/// What a launcher kept as written reaches, in a line.
pub(super) fn as_written_line(launched: &Launched) -> String {
    let needs = yep_store::launcher::needs(launched);
    format!(
        "runs `{}` as written: it fetches {} at each cold start from {} (through yep's proxy) and writes {}",
        escape(&launched.launcher),
        escape(&launched.spec),
        escape(&needs.net.join(", ")),
        escape(&needs.write.join(", "))
    )
}

/// The hint for a tool list past a cap: approving again cannot help.
pub(super) fn over_cap_hint() -> String {
    use yep_store::mcp::{MAX_APPROVED_TOOLS, MAX_TOOL_BYTES, MAX_TOOL_LIST_BYTES};
    format!(
        "yep approves at most {MAX_APPROVED_TOOLS} tools per server, {} KiB per tool and {} MiB in all (docs/mcp.md); ask the server for fewer tools (many take an option that picks them)",
        MAX_TOOL_BYTES / 1024,
        MAX_TOOL_LIST_BYTES / (1024 * 1024)
    )
}

/// After an install or update: pin the tools of each MCP server the package contributes
/// that has no approval for what it is now (approving the package approved them). A server
/// that cannot be listed yet (a secret not set, say) stays withheld until `yep trust`.
pub async fn pin_contributed(home: &Home, results: &[yep_store::Installed], json: bool) {
    let Ok(here) = workspace() else {
        return;
    };
    let lock = home.lockfile().unwrap_or_default();
    for r in results {
        let Ok(manifest) = home.installed_manifest(&r.name) else {
            continue;
        };
        // A plugin's remote servers are listed, not reached, until the user trusts them: the
        // consent screen said what approving starts, its local (stdio) servers, once each.
        let plugin = lock
            .get(&r.name)
            .is_some_and(|e| e.kind().plugin().is_some());
        let extensions = [(r.name.clone(), manifest)];
        for source in sources(home, &extensions, &here, &mut |_| {}) {
            if !matches!(&source.origin, Origin::Extension(e) if *e == r.name) {
                continue;
            }
            let pin = yep_store::mcp::pin(home, &source.name, &source.origin)
                .ok()
                .flatten();
            if source.unapproved(pin.as_ref()).is_none() {
                continue;
            }
            if plugin && source.server.transport != "stdio" {
                let line = format!(
                    "  MCP server {}: not started (installing a plugin reaches no remote server); `yep trust {}` lists and pins its tools",
                    escape(&source.name),
                    escape(&source.name)
                );
                match json {
                    true => {
                        let _ = writeln!(std::io::stderr(), "{line}");
                    }
                    false => stdout_line(&line),
                }
                continue;
            }
            let opts = StageOptions {
                progress: crate::progress::bars(),
                ..StageOptions::default()
            };
            let line = match pin_now(home, &source, &here, &opts).await {
                Ok(approval) => {
                    let mut line = format!(
                        "  pinned {} of MCP server {}",
                        tools_count(approval.tools.len()),
                        escape(&source.name)
                    );
                    for more in approval.install.iter().flat_map(|i| install_lines(i, home)) {
                        line.push_str(&format!("\n    {more}"));
                    }
                    line
                }
                Err(why) if why.over_cap().is_some() => format!(
                    "  MCP server {}: its tools are not offered: {}",
                    escape(&source.name),
                    escape_controls(&why.to_string()),
                ),
                Err(why) => format!(
                    "  MCP server {}: could not list its tools ({}); none are offered until `yep trust {}`",
                    escape(&source.name),
                    escape_controls(&why.to_string()),
                    escape(&source.name)
                ),
            };
            if json {
                let _ = writeln!(std::io::stderr(), "{line}");
            } else {
                stdout_line(&line);
            }
        }
    }
}
