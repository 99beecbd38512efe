//! `yep doctor <name|dir> [--json]`: spawn a server as the runtime does and grade it.

use super::Target;
use crate::output::{Colour, stdout_line, stdout_line_painted};
use std::process::ExitCode;
use yep_host::doctor::{self, Check, Status};
use yep_host::{Manifest, ServerSpec};
use yep_store::text::escape_multiline;
use yep_store::{Home, config};

#[derive(clap::Args)]
pub struct Args {
    /// An installed extension's name, or a package directory.
    target: String,
    /// Print the report (every check, its status and detail) as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let (installed, package) = match super::resolve_target(home, &args.target)? {
        Target::Installed(entry) => (Some(entry), home.package_dir(&args.target)),
        Target::Dir(dir) => (
            None,
            std::fs::canonicalize(&dir).map_err(|e| {
                anyhow::anyhow!(
                    "{} is neither an installed extension nor a package directory: {e}",
                    args.target
                )
            })?,
        ),
    };
    // Drift since approval is a finding like any other: a WARN row, not a plain `ok`.
    let drift = installed.as_ref().and_then(|e| {
        let why = home.drift_of(e)?;
        Some(if e.is_linked() {
            format!("{why}; until then a session uses the approved manifest, not this one")
        } else {
            format!(
                "{why}; until then a session refuses it (`yep update --locked {}` restores what was approved)",
                e.name
            )
        })
    });
    let manifest = Manifest::load(&package)?;
    let cwd = std::env::current_dir()?;
    let mut spec =
        ServerSpec::from_manifest(&manifest, package, cwd, home.logs_dir()).ok_or_else(|| {
            anyhow::anyhow!(
                "`{}` declares no capability server: nothing to check",
                manifest.name
            )
        })?;
    if installed.is_some() {
        // As the runtime spawns it: its config, and its secrets as env.
        let (plain, env) = config::server_inputs(home, &manifest)?;
        spec.config = plain;
        spec.env = env;
    }
    let mut report = doctor::run(&manifest, spec).await;
    if let Some(detail) = drift {
        report.checks.insert(
            0,
            Check {
                name: "approval".into(),
                status: Status::Warn,
                detail,
            },
        );
    }
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&report)?);
    } else {
        for c in &report.checks {
            let (mark, colour) = match c.status {
                Status::Pass => ("pass", Colour::Green),
                Status::Warn => ("WARN", Colour::Yellow),
                Status::Fail => ("FAIL", Colour::Red),
            };
            stdout_line_painted(
                mark,
                colour,
                &format!("  {:<16} {}", c.name, escape_multiline(&c.detail)),
            );
        }
        let warnings = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Warn)
            .count();
        match (report.ok, warnings) {
            (false, _) => stdout_line_painted("failed", Colour::Red, ": see FAIL above"),
            (true, 0) => stdout_line_painted("ok", Colour::Green, ": no failures"),
            (true, 1) => stdout_line_painted(
                "ok",
                Colour::Green,
                ": no failures, 1 warning (see WARN above)",
            ),
            (true, n) => stdout_line_painted(
                "ok",
                Colour::Green,
                &format!(": no failures, {n} warnings (see WARN above)"),
            ),
        }
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
