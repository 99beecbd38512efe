//! `yep call <package-dir | installed-name> <tool> [json-args]`: spawn a package's server and
//! call one tool.

use super::Target;
use super::prompt::TerminalEvents;
use crate::output::{eline, hinted, stdout_line, usage};
use anyhow::Context;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use yep_host::runtime::launch;
use yep_host::{Extension, Manifest, ServerSpec, SupervisorOptions, UpdateSink};
use yep_store::Home;
use yep_store::config;
use yep_store::text::escape;

#[derive(clap::Args)]
pub struct Args {
    /// The package directory (holding plugin.json), or the name of an installed extension.
    package: PathBuf,
    /// The tool to call; it must be declared in the manifest.
    tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(default_value = "{}")]
    args: String,
    /// Fail the call after this many seconds without a result or progress (default: the
    /// extension's `request_timeout_ms` config, else 60).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
}

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let session_id = format!("yep-call-{}", std::process::id());
    let supervisor = SupervisorOptions::default();
    let target = args.package.to_string_lossy().into_owned();
    let target = super::resolve_target(home, &target)?;
    let installed = matches!(target, Target::Installed(_));
    let (manifest, spec, mut supervisor, package) = match target {
        // An installed extension runs exactly as a session runs it: from the home, checked
        // against its approval, with its config, secrets, data dir and log.
        Target::Installed(entry) => {
            let name = entry.name.clone();
            if !entry.is_linked()
                && let Some(drift) = home.drift_of(&entry)
            {
                return Err(hinted(
                    format!("refusing to call a tool of a changed package: {drift}"),
                    &[&format!(
                        "`yep update --locked {name}` restores what you approved"
                    )],
                ));
            }
            let launch = launch::installed(home, &name, cwd, &session_id, &supervisor)?;
            for warning in &launch.warnings {
                eline!("warning: {warning}");
            }
            (
                launch.manifest,
                launch.spec,
                launch.supervisor,
                home.package_dir(&name),
            )
        }
        // A package directory is an author's work in progress: no config, no secrets.
        Target::Dir(dir) => {
            let manifest = Manifest::load(&dir)?;
            let package = std::fs::canonicalize(&dir)
                .with_context(|| format!("failed to resolve {}", dir.display()))?;
            let mut spec = ServerSpec::from_manifest(&manifest, package, cwd, home.logs_dir())
                .ok_or_else(|| no_server(&manifest))?;
            spec.session_id = session_id;
            (manifest, spec, supervisor, dir)
        }
    };
    if spec.command.is_empty() {
        return Err(no_server(&manifest));
    }
    if let Some(secs) = args.timeout {
        // An explicit --timeout wins over the extension's config.
        supervisor.request_timeout = std::time::Duration::from_secs(secs.clamp(1, 600));
    }
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
                package.join("plugin.json").display()
            ),
            &[
                &format!("declared tools: {list}"),
                "a server may only serve tools its manifest declares",
            ],
        ));
    }
    let tool_args: Value = serde_json::from_str(&args.args).map_err(|e| {
        usage(
            format!("failed to parse the tool arguments {:?} as JSON", args.args),
            e,
        )
    })?;
    let ext = Extension::new(spec, supervisor, Arc::new(TerminalEvents::new()));

    let updates: UpdateSink =
        Arc::new(|p: &yep_host::capability::Progress| eline!("[progress] {}", escape(&p.message)));
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
            stdout_line(&serde_json::to_string_pretty(value.value())?);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) if err.is_cancelled() => {
            eline!("error: {err}");
            Ok(ExitCode::from(130))
        }
        // Printed with its hints (`yep logs <name>` after a crash) and exit 1; a required
        // field nobody set may be why, so the commands that set them follow.
        Err(err) => {
            let code = crate::output::fail(&err.into());
            if installed {
                for field in config::missing_required(home, &manifest).unwrap_or_default() {
                    eline!(
                        "hint: required `{}` is not set: `{}`",
                        field.name,
                        config::set_command(&manifest, &field.name)
                    );
                }
            }
            Ok(code)
        }
    }
}

fn no_server(manifest: &Manifest) -> anyhow::Error {
    hinted(
        format!("`{}` declares no capability server", manifest.name),
        &["add yolop.capabilityServer.command to plugin.json"],
    )
}
