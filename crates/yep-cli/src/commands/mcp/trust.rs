//! `yep trust <name>`: an MCP server's tools as they are now, shown as a diff against the last
//! approval and pinned once approved; a zot extension run again; or the workspace's `.claude`.

use super::pin::{as_written_line, install_lines, over_cap_hint, tools_count};
use super::{here, origin_long, workspace};
use crate::commands::install::Consent;
use crate::output::{hinted, stdout_line};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;
use yep_host::runtime::mcp::{McpSource, StageOptions, Staged, Unapproved, probe, stage};
use yep_store::Home;
use yep_store::approval::{Approval, Decision, Moment, decide};
use yep_store::code::{MAX_CODE_BYTES, MAX_CODE_FILES};
use yep_store::launcher::Installed;
use yep_store::mcp::{McpPin, ToolChange};
use yep_store::text::{escape, escape_controls};

#[derive(clap::Args)]
pub struct TrustArgs {
    /// The MCP server (as `yep mcp list` names it) or zot extension.
    name: String,
    /// Approve without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// With the approval, let it reach more than the sandbox's default profile
    /// (repeatable, as `yep grant` takes them); shown and asked with the rest.
    #[arg(long = "grant", value_name = "GRANT")]
    grants: Vec<String>,
    /// For a server started through a package launcher (`npx -y`, `uvx`): keep the launcher
    /// as written instead of a pinned install (see `yep mcp add --as-written`).
    #[arg(long)]
    as_written: bool,
    /// Resolve and install a launcher's package again (`yep update <server>`).
    #[arg(skip)]
    pub(crate) reinstall: bool,
}

impl TrustArgs {
    /// `yep update <server>`: its launcher's package resolved and installed again, shown and
    /// asked as `yep trust` does.
    pub(crate) fn update(name: &str, yes: bool, json: bool) -> TrustArgs {
        TrustArgs {
            name: name.to_string(),
            yes,
            json,
            grants: Vec::new(),
            as_written: false,
            reinstall: true,
        }
    }
}

/// `yep trust project`: the workspace's own Claude Code config (`.claude/`), shown as a
/// plugin's consent screen shows one with the code its hooks run from the workspace and why
/// it is asked again, and pinned for this workspace once approved.
fn trust_project(args: &TrustArgs, home: &Home) -> anyhow::Result<ExitCode> {
    use yep_store::Approver as _;
    use yep_store::claude::project::Unapproved as Asked;
    let workspace = std::env::current_dir()?;
    let Some(project) = yep_store::claude::project::read(&workspace)? else {
        return Err(hinted(
            "this workspace has no .claude hooks, commands or skills to approve".to_string(),
            &[
                "`yep trust project` approves .claude/settings.json hooks, .claude/commands and .claude/skills",
            ],
        ));
    };
    let pinned = home.project_pin(&workspace)?;
    let Some(why) = project.unapproved(pinned.as_ref()) else {
        report_trust(args, &project.hash, false, "already approved");
        return Ok(ExitCode::SUCCESS);
    };
    let mut summary = yep_store::summary::claude_summary(
        &project.approval.manifest,
        &project.approval.pin,
        &project.approval.notes,
    );
    summary.push_str(&format!(
        "\n  workspace {}",
        escape(&workspace.display().to_string())
    ));
    if !project.code.paths.is_empty() {
        summary.push_str(&format!(
            "\n  code its hooks run from the workspace: {}",
            escape(&project.code.paths.join(", "))
        ));
    }
    if why != Asked::Never {
        summary.push_str(&format!("\n  not approved{}", why.since()));
        // What runs is the files' content: each file that moved, and how.
        if let Some(changes) = home.project_changes(&workspace, &project) {
            summary.push_str(&changed_files(&changes));
        }
    }
    // What its hooks, commands and skills add, in the one approval model's diff.
    let held = |pin: &yep_store::claude::ClaudePin| yep_store::approval::Approval {
        claude: Some(pin.clone()),
        ..yep_store::approval::Approval::of_kind(yep_store::approval::PackageKind::Claude)
    };
    let diff = pinned
        .as_ref()
        .map(|old| yep_store::approval::diff(&held(&old.claude), &held(&project.approval.pin)));
    let mut consent = Consent::new(args.yes);
    if !consent.approve(&summary, diff.as_ref()) {
        return Err(hinted(
            "not approved: the workspace's .claude config does not run".to_string(),
            &["review the summary above and re-run with --yes to approve it"],
        ));
    }
    home.trust_project(&workspace, &project)?;
    report_trust(args, &project.hash, true, "approved");
    Ok(ExitCode::SUCCESS)
}

/// The most lines of diff shown for one file, and for all.
const DIFF_LINES_PER_FILE: usize = 40;
const DIFF_LINES: usize = 200;

/// `changes` as consent-screen lines: each file added, removed or changed, a text file's lines
/// that changed (with context), each escaped, at most [`DIFF_LINES_PER_FILE`] a file and
/// [`DIFF_LINES`] in all.
fn changed_files(changes: &[yep_store::snapshot::Change]) -> String {
    use yep_store::snapshot::Change;
    let mut out = String::from("\n  files changed since the approval:");
    if changes.is_empty() {
        out.push_str(" (none)");
    }
    let mut shown = 0;
    for change in changes {
        let (sign, path, lines) = match change {
            Change::Added(path) => ("+", path, None),
            Change::Removed(path) => ("-", path, None),
            Change::Changed(path, lines) => ("~", path, Some(lines)),
        };
        out.push_str(&format!("\n    {sign} {}", escape(path)));
        match lines {
            Some(None) => out.push_str(" (not text)"),
            Some(Some(lines)) => {
                let room = DIFF_LINES_PER_FILE.min(DIFF_LINES.saturating_sub(shown));
                for line in lines.iter().take(room) {
                    out.push_str(&format!("\n        {}", escape(line)));
                }
                shown += lines.len().min(room);
                if lines.len() > room {
                    out.push_str(&format!("\n        … {} more lines", lines.len() - room));
                }
            }
            None => {}
        }
    }
    out
}

fn report_trust(args: &TrustArgs, hash: &str, changed: bool, said: &str) {
    if args.json {
        stdout_line(
            &serde_json::json!({"name": args.name, "approved": true, "changed": changed, "hash": hash})
                .to_string(),
        );
    } else {
        stdout_line(&format!(
            "{said}: the workspace's .claude config ({hash}) runs as `{}`",
            args.name
        ));
    }
}

/// What `yep trust` did.
#[derive(Serialize)]
struct Trusted {
    name: String,
    kind: &'static str,
    /// Where the server it means is defined: `home, <settings.toml>`, `extension <name>` or
    /// `workspace, <its .mcp.json>`.
    source: String,
    /// What moved since the last approval (`+ tool x (new)`).
    changes: Vec<String>,
    /// The definition itself (command, url, env) changed, or was never approved.
    definition_changed: bool,
    /// Why it was not approved as it is now (`never approved`, the code it runs changed, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// What its approval pins of the code it runs from the workspace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    code: Vec<String>,
    /// What each new or changed tool says, as a diff against what was approved (hidden
    /// characters marked, `<U+202E>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    text: Vec<yep_store::tooltext::ToolText>,
    approved: bool,
    tools: Vec<String>,
    /// A launcher's package that moved: `pkg: 1.0.0 → 1.1.0 (hashes)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// The package installed for its launcher, as approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<Installed>,
}

/// `yep trust <name>`: an MCP server's tools as they are now (shown as a diff against the
/// last approval), or a zot extension's registrations (run again, as `yep update` does).
pub async fn trust(args: TrustArgs, home: &Home) -> anyhow::Result<ExitCode> {
    if args.name == yep_store::claude::project::PROJECT {
        return trust_project(&args, home);
    }
    let source = here(home)?.into_iter().find(|s| s.name == args.name);
    // A workspace's `.mcp.json` cannot take this verb from an installed zot extension.
    let zot = home
        .lockfile()?
        .get(&args.name)
        .is_some_and(|e| e.kind().speaks_zot());
    let workspace_named = source
        .as_ref()
        .is_none_or(|s| matches!(s.origin, yep_store::mcp::Origin::Workspace(_)));
    // Grants named with the approval are asked for first: its run to list tools has them.
    let mut consent = Consent::new(args.yes);
    if !args.grants.is_empty() && (source.is_some() || zot) {
        crate::commands::grant::grant_with_consent(home, &args.name, &args.grants, &mut consent)?;
    }
    if zot && workspace_named {
        let update = crate::commands::install::UpdateArgs::only(&args.name, args.yes, args.json);
        return crate::commands::install::update(update, home).await;
    }
    let Some(source) = source else {
        return Err(hinted(
            format!(
                "no MCP server or zot extension named `{}` here",
                escape(&args.name)
            ),
            &["`yep mcp list` shows the MCP servers a session in this directory sees"],
        ));
    };
    trust_server(&args, home, &source, &mut consent).await
}

/// `yep trust <server>`: run it (asked first unless what runs was approved), list its tools,
/// and pin them once what changed since the last approval is shown and approved.
async fn trust_server(
    args: &TrustArgs,
    home: &Home,
    source: &McpSource,
    consent: &mut Consent,
) -> anyhow::Result<ExitCode> {
    let pin = yep_store::mcp::pin(home, &source.name, &source.origin)?;
    let blocked = source.blocked(pin.as_ref());
    let definition_changed = blocked.is_some();
    // Code that cannot be pinned cannot be approved: nothing is run.
    if let Some(Unapproved::Unpinnable(_)) = &blocked {
        return Err(hinted(
            format!(
                "not approved: {}",
                escape_controls(&source.unapproved(pin.as_ref()).unwrap_or_default())
            ),
            &[&format!(
                "yep pins at most {MAX_CODE_FILES} files and {} MiB of the code a workspace's server runs (docs/mcp.md)",
                MAX_CODE_BYTES / (1024 * 1024)
            )],
        ));
    }
    ask_to_run(home, source, blocked.as_ref(), consent)?;
    // A launcher's package: the approved install, or one made now (`yep update`: always).
    let opts = StageOptions {
        as_written: args.as_written.then_some(true),
        reinstall: args.reinstall,
        progress: crate::progress::bars(),
    };
    let staged = stage(home, source, &opts).await.map_err(|e| {
        anyhow::anyhow!(
            "MCP server {}: {}",
            escape(&source.name),
            escape_controls(&e.to_string())
        )
    })?;
    let probed = match list_tools(home, source, &workspace()?, &staged).await {
        Ok(probed) => probed,
        Err(why) => {
            staged.discard(home);
            return Err(why);
        }
    };
    let tools = &probed.tools;
    let skills_moved = probed.skills_moved(pin.as_ref());
    let changes: Vec<ToolChange> = yep_store::mcp::diff(pin.as_ref(), tools);
    let package = package_moved(pin.as_ref(), &staged);
    let mut outcome = Trusted {
        name: source.name.clone(),
        kind: "mcp",
        source: origin_long(&source.origin, home),
        changes: changes.iter().map(ToString::to_string).collect(),
        definition_changed,
        reason: blocked.as_ref().map(Unapproved::reason),
        code: match &source.code {
            Some(Ok(code)) => code.paths.clone(),
            _ => Vec::new(),
        },
        text: yep_store::mcp::changed_text(
            &changes,
            &pin.as_ref()
                .map(|p| yep_store::mcp::cached(home, &source.origin, p))
                .unwrap_or_default(),
            tools,
        ),
        approved: false,
        tools: tools.iter().map(|t| t.name.clone()).collect(),
        package: package.clone(),
        install: staged.install.clone(),
    };
    let pinned = pin.clone().map(Approval::of_mcp);
    let candidate = yep_host::runtime::mcp::candidate(source, &staged, tools);
    // What runs now was approved (`blocked` also says so for what a pin cannot show: one
    // from before yep installed launchers' packages).
    if matches!(
        decide(pinned.as_ref(), &candidate, Moment::Trust),
        Decision::Run
    ) && !definition_changed
        && !skills_moved
    {
        return unchanged(args, home, source, &staged, &probed, outcome);
    }
    if skills_moved {
        let names: Vec<String> = probed
            .skills
            .iter()
            .map(|s| escape(&s.name).into_owned())
            .collect();
        eprintln!(
            "  skills (SEP-2640) other than approved; it offers now: {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    let approved = show_changes(home, source, &staged, &changes, &outcome, consent);
    if !approved {
        staged.discard(home);
        return Err(refused(consent, &source.name, "the changes"));
    }
    yep_host::runtime::mcp::record(home, source, &staged, &probed).map_err(|e| match e {
        yep_store::StoreError::McpToolList { .. } => hinted(e.to_string(), &[&over_cap_hint()]),
        other => other.into(),
    })?;
    outcome.approved = true;
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&outcome)?);
    } else {
        stdout_line(&format!(
            "approved MCP server {}: {} pinned",
            escape(&source.name),
            tools_count(tools.len())
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The error for an approval refused, or not asked for want of a terminal.
fn refused(consent: &Consent, name: &str, what: &str) -> anyhow::Error {
    let hint = if consent.asked {
        format!("no terminal to ask at: review {what} above and re-run with --yes to approve")
    } else {
        "nothing was approved".to_string()
    };
    hinted(
        format!("not approved: MCP server `{}`", escape(name)),
        &[&hint],
    )
}

/// Say which server is meant; listing its tools runs it: asked first, unless what runs is
/// what was approved.
fn ask_to_run(
    home: &Home,
    source: &McpSource,
    blocked: Option<&Unapproved>,
    consent: &mut Consent,
) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "MCP server {} ({}): {}",
        escape(&source.name),
        escape(&origin_long(&source.origin, home)),
        source.described()
    );
    if let Some(why) = blocked {
        let _ = writeln!(err, "  {}", why.reason());
        if !consent.ask(&mut err, "run it to list its tools?") {
            return Err(refused(consent, &source.name, "what it runs"));
        }
    }
    Ok(())
}

/// The server's tools as it lists them now, run from `here` with its staged package; a list
/// past the caps is said so.
async fn list_tools(
    home: &Home,
    source: &McpSource,
    here: &std::path::Path,
    staged: &Staged,
) -> anyhow::Result<yep_host::runtime::mcp::Probed> {
    probe(
        home,
        source,
        here,
        &yep_host::SupervisorOptions::for_home(home),
        staged.package(),
    )
    .await
    .map_err(|why| match why.over_cap() {
        Some(_) => hinted(
            format!("not approved: {}", escape_controls(&why.to_string())),
            &[&over_cap_hint()],
        ),
        None => anyhow::anyhow!("{why}"),
    })
}

/// A launcher's package that moved since the approval: `pkg: 1.0.0 → 1.1.0 (hashes)`, or
/// installed where it ran as written.
fn package_moved(pin: Option<&McpPin>, staged: &Staged) -> Option<String> {
    let before = pin.and_then(|p| p.install.as_ref());
    match (before, &staged.install) {
        (Some(old), Some(new))
            if (&old.version, &old.integrity) != (&new.version, &new.integrity) =>
        {
            Some(format!(
                "{}: {} → {} ({} → {})",
                new.package, old.version, new.version, old.integrity, new.integrity
            ))
        }
        (None, Some(new)) if pin.is_some() => {
            Some(format!("{} {} installed", new.package, new.version))
        }
        _ => None,
    }
}

/// Nothing to approve: the same package installed again (its files had changed, or
/// `yep update` found nothing newer) is pinned where it is now.
fn unchanged(
    args: &TrustArgs,
    home: &Home,
    source: &McpSource,
    staged: &Staged,
    probed: &yep_host::runtime::mcp::Probed,
    mut outcome: Trusted,
) -> anyhow::Result<ExitCode> {
    if staged.fresh {
        yep_host::runtime::mcp::record(home, source, staged, probed)?;
    }
    outcome.approved = true;
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&outcome)?);
    } else {
        let still = match (&staged.install, source.launched()) {
            (Some(install), Some(launched)) => format!(
                " ({} {} is what `{}` resolves to)",
                escape(&install.package),
                escape(&install.version),
                escape(&launched.spec)
            ),
            _ => String::new(),
        };
        stdout_line(&format!(
            "MCP server {}: nothing changed since it was approved{still}",
            escape(&source.name)
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// What changed since the approval, on stderr (the package, each tool and what it says),
/// and whether the user approves it.
fn show_changes(
    home: &Home,
    source: &McpSource,
    staged: &Staged,
    changes: &[ToolChange],
    outcome: &Trusted,
    consent: &mut Consent,
) -> bool {
    let mut err = std::io::stderr().lock();
    if let Some(install) = &staged.install {
        for line in install_lines(install, home) {
            let _ = writeln!(err, "  {line}");
        }
    }
    if let Some(moved) = &outcome.package {
        let _ = writeln!(err, "  package: {}", escape(moved));
    }
    if let (true, Some(launched)) = (staged.as_written, source.launched()) {
        let _ = writeln!(err, "  {}", as_written_line(&launched));
    }
    for (change, said) in changes.iter().zip(&outcome.changes) {
        let _ = writeln!(err, "  {said}");
        let name = match change {
            ToolChange::Added(n) | ToolChange::Changed(n) | ToolChange::Removed(n) => n,
        };
        for text in outcome.text.iter().filter(|t| t.tool == *name) {
            for line in &text.lines {
                // Marked already; escaped once more, as everything a server says is.
                let _ = writeln!(err, "      {}", escape_controls(line));
            }
        }
    }
    consent.ask(&mut err, "approve these tools?")
}
