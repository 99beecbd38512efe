//! `yep call <package-dir | installed-name> <tool> [json-args]`: spawn a package's server and
//! call one tool. A directory is a YEP package or a zot extension, told apart as `yep install`
//! tells them.

use super::prompt::TerminalEvents;
use super::{PackageKind, Target};
use crate::output::{eline, hinted, stdout_line, usage};
use anyhow::Context;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use yep_host::audit::{AuditLog, Carrier, Outcome, ToolEntry, find_in_text, find_in_value};
use yep_host::runtime::launch;
use yep_host::{Extension, Manifest, ServerSpec, SupervisorOptions, UpdateSink};
use yep_store::Home;
use yep_store::config;
use yep_store::manifest::MANIFEST_FILE;
use yep_store::text::escape;
use yep_store::zot::{ZOT_MANIFEST_FILE, ZotManifest};

#[derive(clap::Args)]
pub struct Args {
    /// The package directory (holding plugin.json, or a zot extension's extension.json), or the
    /// name of an installed extension.
    package: PathBuf,
    /// The tool to call; it must be declared in the manifest (for a zot extension: registered
    /// when it starts).
    tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(default_value = "{}")]
    args: String,
    /// Fail the call after this many seconds without a result or progress (default: the
    /// extension's `request_timeout_ms` config, else 60).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Refuse the call when its arguments or result carry what looks like a credential (an
    /// AWS key id, a GitHub, Slack, Google, OpenAI or Anthropic token, a PEM private key).
    /// On as well when settings.toml says `[audit] block_secrets = true`.
    #[arg(long)]
    block_secrets: bool,
}

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let target = args.package.to_string_lossy().into_owned();
    let target = super::resolve_target(home, &target)?;
    let installed = matches!(target, Target::Installed(_));
    let Prepared {
        manifest,
        spec,
        mut supervisor,
        manifest_file,
    } = prepare(home, target, cwd)?;
    if spec.command.is_empty() {
        return Err(match manifest {
            Some(_) => no_server(&spec.name),
            None => no_zot_server(&spec.name),
        });
    }
    if let Some(secs) = args.timeout {
        // An explicit --timeout wins over the extension's config.
        supervisor.request_timeout = std::time::Duration::from_secs(secs.clamp(1, 600));
    }
    if let Some(manifest) = &manifest
        && manifest.tool(&args.tool).is_none()
    {
        return Err(not_declared(manifest, &args.tool, &manifest_file));
    }
    let tool_args: Value = serde_json::from_str(&args.args).map_err(|e| {
        usage(
            format!("failed to parse the tool arguments {:?} as JSON", args.args),
            e,
        )
    })?;
    let name = spec.name.clone();
    let said = yep_store::settings::audit(&home.settings_path()).unwrap_or_default();
    let block_secrets = args.block_secrets || said.block_secrets;
    let audit = said.enabled.then(|| AuditLog::open(home.audit_path()));
    supervisor.audit = audit.clone();
    let audited = Audited {
        log: audit,
        extension: name.clone(),
        tool: args.tool.clone(),
        args: yep_host::audit::shape(&tool_args),
        started: Instant::now(),
    };
    if block_secrets && let Some(found) = find_in_value(&tool_args, Carrier::Arguments) {
        let refusal = found.to_string();
        audited.record(Outcome::Blocked, Some(found));
        return Err(anyhow::anyhow!(refusal));
    }
    let ext = Extension::new(spec, supervisor, Arc::new(TerminalEvents::new()));
    if manifest.is_none()
        && let Some(code) = zot_registers(&ext, &args.tool, &name, &manifest_file).await?
    {
        return Ok(code);
    }
    let result = call(&ext, &args.tool, tool_args).await;
    ext.stop().await;
    let found = match &result {
        Ok(value) if block_secrets => find_in_text(&value.json(), Carrier::Result),
        _ => None,
    };
    if let Some(found) = found {
        let refusal = found.to_string();
        audited.record(Outcome::Blocked, Some(found));
        return Err(anyhow::anyhow!(refusal));
    }
    audited.record(outcome(&result), None);
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
            if installed && let Some(manifest) = &manifest {
                for field in config::missing_required(home, manifest).unwrap_or_default() {
                    eline!(
                        "hint: required `{}` is not set: `{}`",
                        field.name,
                        config::set_command(manifest, &field.name)
                    );
                }
            }
            Ok(code)
        }
    }
}

/// What the audit trail keeps of this call: who serves it, the shape of its arguments, when it
/// began.
struct Audited {
    log: Option<AuditLog>,
    extension: String,
    tool: String,
    args: Box<serde_json::value::RawValue>,
    started: Instant,
}

impl Audited {
    /// Record how the call ended (and the credential that blocked it), written before
    /// `yep call` exits.
    fn record(self, how: Outcome, secret: Option<yep_host::audit::SecretFound>) {
        let Some(log) = self.log else {
            return;
        };
        let entry = ToolEntry::new(
            self.extension,
            self.tool,
            self.args,
            how,
            self.started.elapsed(),
        );
        log.tool(match secret {
            Some(found) => entry.blocked_for(found),
            None => entry,
        });
        log.flush(Duration::from_secs(2));
    }
}

/// How a call ended, as the audit trail says it.
fn outcome(result: &Result<yep_host::capability::ToolResult, yep_host::ExtensionError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(e) if e.is_cancelled() => Outcome::Cancelled,
        Err(
            yep_host::ExtensionError::Remote { .. }
            | yep_host::ExtensionError::InvalidArguments { .. },
        ) => Outcome::Error,
        Err(yep_host::ExtensionError::Timeout { .. }) => Outcome::TimedOut,
        Err(_) => Outcome::Failed,
    }
}

/// What `yep call` runs: the server, how it is supervised, and the manifest its tools are
/// checked against. `manifest` is `None` for a zot extension's directory: its tools are what
/// it registers when it runs, so they are checked once it started.
struct Prepared {
    manifest: Option<Manifest>,
    spec: ServerSpec,
    supervisor: SupervisorOptions,
    /// The manifest's file, as errors name it.
    manifest_file: PathBuf,
}

/// The server `target` names, ready to start (from `cwd`) as `yep call` starts it.
fn prepare(home: &Home, target: Target, cwd: PathBuf) -> anyhow::Result<Prepared> {
    let session_id = format!("yep-call-{}", std::process::id());
    let supervisor = SupervisorOptions::for_home(home);
    let (manifest, spec, supervisor, manifest_file) = match target {
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
                Some(launch.manifest),
                launch.spec,
                launch.supervisor,
                home.package_dir(&name).join(entry.manifest_file()),
            )
        }
        // A package directory is an author's work in progress: no config, no secrets.
        Target::Dir(dir) => {
            let (package, kind) = super::package_dir(&dir)?;
            match kind {
                PackageKind::Yep => {
                    let manifest = Manifest::load(&dir)?;
                    let mut spec =
                        ServerSpec::from_manifest(&manifest, package, cwd, home.logs_dir())
                            .ok_or_else(|| no_server(&manifest.name))?;
                    spec.session_id = session_id;
                    (Some(manifest), spec, supervisor, dir.join(MANIFEST_FILE))
                }
                PackageKind::Zot => {
                    let extension = ZotManifest::load(&dir)?;
                    let (mut spec, supervisor) =
                        launch::zot_dir(&extension, &package, cwd, &home.logs_dir(), &supervisor)
                            .ok_or_else(|| no_zot_server(&extension.name))?;
                    spec.session_id = session_id;
                    (None, spec, supervisor, dir.join(ZOT_MANIFEST_FILE))
                }
            }
        }
    };
    Ok(Prepared {
        manifest,
        spec,
        supervisor,
        manifest_file,
    })
}

/// The error for a tool the manifest does not declare, with the ones it does.
fn not_declared(manifest: &Manifest, tool: &str, manifest_file: &Path) -> anyhow::Error {
    let declared: Vec<&str> = manifest
        .yolop
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    hinted(
        format!(
            "tool `{}` is not declared by `{}` in {}",
            tool,
            manifest.name,
            manifest_file.display()
        ),
        &[
            &format!("declared tools: {}", listed(&declared)),
            "a server may only serve tools its manifest declares",
        ],
    )
}

/// A zot extension's tools are what it registered by the end of its handshake: `tool` must
/// be one. `Some` exit code when its handshake failed (said already); stopped either way
/// when it does not go on.
async fn zot_registers(
    ext: &Extension,
    tool: &str,
    name: &str,
    manifest_file: &Path,
) -> anyhow::Result<Option<ExitCode>> {
    let offer = match ext.handshake().await {
        Ok(offer) => offer,
        Err(err) => {
            ext.stop().await;
            return Ok(Some(crate::output::fail(&err.into())));
        }
    };
    if !offer.tools.iter().any(|t| t.name == tool) {
        ext.stop().await;
        let registered: Vec<&str> = offer.tools.iter().map(|t| t.name.as_str()).collect();
        return Err(hinted(
            format!(
                "tool `{}` is not registered by zot extension `{name}` ({})",
                tool,
                manifest_file.display()
            ),
            &[
                &format!("registered tools: {}", listed(&registered)),
                "a zot extension's tools are the ones it registers when it starts",
            ],
        ));
    }
    Ok(None)
}

/// Call `tool`, its progress on stderr; Ctrl-C cancels it.
async fn call(
    ext: &Extension,
    tool: &str,
    tool_args: Value,
) -> Result<yep_host::capability::ToolResult, yep_host::ExtensionError> {
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
    ext.call_tool(tool, tool_args, Some(updates), Some(cancel))
        .await
}

fn no_server(name: &str) -> anyhow::Error {
    hinted(
        format!("`{name}` declares no capability server"),
        &["add yolop.capabilityServer.command to plugin.json"],
    )
}

fn no_zot_server(name: &str) -> anyhow::Error {
    hinted(
        format!(
            "zot extension `{name}` has nothing to run: it is a theme-only or skills-only bundle"
        ),
        &["add `exec` to extension.json"],
    )
}

/// Tool names for a hint, each escaped (a zot extension's come from the extension itself).
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    names
        .iter()
        .map(|n| escape(n))
        .collect::<Vec<_>>()
        .join(", ")
}
