//! `yep call <package-dir | installed-name> <tool> [json-args]`: spawn a package's server and
//! call one tool.

use super::Target;
use super::prompt::TerminalEvents;
use crate::output::{eline, hinted, stdout_line};
use anyhow::Context;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use yep_host::store::Home;
use yep_host::text::escape;
use yep_host::{Extension, Manifest, ServerSpec, SupervisorOptions, UpdateSink};

#[derive(clap::Args)]
pub struct Args {
    /// The package directory (holding plugin.json), or the name of an installed extension.
    package: PathBuf,
    /// The tool to call; it must be declared in the manifest.
    tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(default_value = "{}")]
    args: String,
    /// Fail the call after this many seconds without a result or progress.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    timeout: u64,
}

pub async fn run(mut args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    // An installed extension runs from the home; its bytes are checked against the approval.
    // As a session would: a copied package that drifted is refused, a linked one is clamped to
    // the manifest that was approved.
    let mut installed = None;
    let mut approved = None;
    let target = args.package.to_string_lossy().into_owned();
    if let Target::Installed(entry) = super::resolve_target(home, &target)? {
        let name = &entry.name;
        if let Some(drift) = home.drift_of(&entry) {
            if !entry.is_linked() {
                return Err(hinted(
                    format!("refusing to call a tool of a changed package: {drift}"),
                    &[&format!(
                        "`yep update --locked {name}` restores what you approved"
                    )],
                ));
            }
            eline!("warning: {drift}");
        }
        approved = entry.approved();
        args.package = home.package_dir(name);
        installed = Some(entry.name);
    }
    let manifest = match approved {
        Some(m) => m,
        None => Manifest::load(&args.package)?,
    };
    if manifest.tool(&args.tool).is_none() {
        let declared: Vec<_> = manifest
            .yolop
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let list = if declared.is_empty() {
            "none".to_string()
        } else {
            declared.join(", ")
        };
        return Err(hinted(
            format!(
                "tool `{}` is not declared by `{}` in {}",
                args.tool,
                manifest.name,
                args.package.join("plugin.json").display()
            ),
            &[
                &format!("declared tools: {list}"),
                "a server may only serve tools its manifest declares",
            ],
        ));
    }
    let tool_args: Value = serde_json::from_str(&args.args)
        .with_context(|| format!("failed to parse the tool arguments {:?} as JSON", args.args))?;
    let package = std::fs::canonicalize(&args.package)
        .with_context(|| format!("failed to resolve {}", args.package.display()))?;
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let mut spec =
        ServerSpec::from_manifest(&manifest, package, cwd, home.logs_dir()).ok_or_else(|| {
            hinted(
                format!("`{}` declares no capability server", manifest.name),
                &["add yolop.capabilityServer.command to plugin.json"],
            )
        })?;
    spec.session_id = format!("yep-call-{}", std::process::id());
    if let Some(name) = &installed {
        // Its writes go to its data dir, never into the approved package.
        spec.env
            .extend(yep_host::store::config::data_env(home, name)?);
    }
    let opts = SupervisorOptions {
        request_timeout: std::time::Duration::from_secs(args.timeout.clamp(1, 600)),
        ..SupervisorOptions::default()
    };
    let ext = Extension::new(spec, opts, Arc::new(TerminalEvents::new()));

    let updates: UpdateSink = Arc::new(|line: &str| eline!("[progress] {}", escape(line)));
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eline!("[cancel] interrupted; cancelling the call");
            on_interrupt.cancel();
        }
    });
    let result = ext
        .call_tool(&args.tool, tool_args, Some(updates), Some(cancel))
        .await;
    ext.stop().await;
    match result {
        Ok(value) => {
            stdout_line(&serde_json::to_string_pretty(&value)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) if err.is_cancelled() => {
            eline!("error: {err}");
            Ok(ExitCode::from(130))
        }
        Err(err) => {
            eline!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}
