//! The one diff of two approvals: what a candidate adds to, takes from or changes in what was
//! approved, and whether any of it widens (consent is needed again).

use super::{Approval, approved_package};
use crate::mcp::{McpPin, ToolChange};
use crate::summary::{self, ContributionDiff};
use crate::text::escape;

/// How `candidate` differs from `pinned`, in the diff lines a consent screen shows.
pub fn diff(pinned: &Approval, candidate: &Approval) -> ContributionDiff {
    let mut d = match (&pinned.manifest, &candidate.manifest) {
        (Some(old), Some(new)) => summary::diff(old, new),
        _ => ContributionDiff::default(),
    };
    // What only a zot pin holds (intercepts, events, capabilities).
    if let Some(new) = &candidate.zot {
        let (lines, widened) = pinned.zot.clone().unwrap_or_default().diff(new);
        d.lines.extend(lines);
        d.widened |= widened;
    }
    // What only a plugin's pin holds (hook command lines, inline commands, allowed-tools
    // rules).
    if let Some(new) = &candidate.claude {
        let (lines, widened) = match &pinned.claude {
            Some(old) => old.diff(new),
            None => (vec![format!("+ {} parts", new.kind.label())], true),
        };
        d.lines.extend(lines);
        d.widened |= widened;
    }
    if let Some(new) = &candidate.mcp {
        mcp_lines(pinned.mcp.as_ref(), new, &mut d);
    }
    // What the user would grant beyond what it runs with now.
    for line in pinned.effective_grants().widened_by(&candidate.granted) {
        d.lines.push(format!("+ sandbox {}", escape(&line)));
        d.widened = true;
    }
    // Each new grant that lifts a protected workspace path says so.
    d.lines.extend(
        candidate
            .granted
            .without(&pinned.effective_grants())
            .warnings(),
    );
    d
}

/// An MCP server's changes: another definition, other code, another package, or its tools.
fn mcp_lines(old: Option<&McpPin>, new: &McpPin, d: &mut ContributionDiff) {
    let mut widen = |line: &str| {
        d.lines.push(line.to_string());
        d.widened = true;
    };
    if let Some(old) = old {
        if old.spec != new.spec {
            widen("~ its definition (command, arguments, url or environment) changed");
        }
        if old.code != new.code {
            widen("~ the workspace code it runs changed");
        }
        match (approved_package(old), approved_package(new)) {
            (Some(a), Some(b)) if a != b => widen(&format!(
                "~ package {} {} → {}",
                escape(b.1),
                escape(a.2),
                escape(b.2)
            )),
            (None, Some(b)) => widen(&format!("+ package {} {}", escape(b.1), escape(b.2))),
            _ => {}
        }
        if !old.as_written && new.as_written {
            widen("+ runs its launcher as written (fetching at each cold start)");
        }
    }
    let empty = std::collections::BTreeMap::new();
    let before = old.map_or(&empty, |p| &p.tools);
    let listed = new.tools.iter().map(|(n, h)| (n.as_str(), h.clone()));
    for change in crate::mcp::changes(before, listed) {
        let widens = !matches!(change, ToolChange::Removed(_));
        d.lines.push(change.to_string());
        d.widened |= widens;
    }
}
