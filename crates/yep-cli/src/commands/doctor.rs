//! `yep doctor <name|dir> [--json] [--sandbox-learn] [--conformance]`: spawn a server as the
//! runtime does and grade it; with `--sandbox-learn`, also propose the grants it needs; with
//! `--conformance`, also replay the conformance corpus's YEP server-side transcripts.

use super::{PackageKind, Target};
use crate::output::{Colour, stdout_line, stdout_line_painted};
use anyhow::Context;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use yep_host::runtime::launch::{self, LaunchError};
use yep_host::settings::sandbox_mode_or_required;
use yep_host::store::Home;
use yep_host::store::lockfile::LockEntry;
use yep_host::store::source::looks_like_path;
use yep_host::supervisor::DeniedCall;
use yep_host::text::{escape, escape_multiline};
use yep_host::{Manifest, ServerSpec, SupervisorOptions};
use yep_sandbox::learn::Learning;
use yep_tools::doctor::{self, Check, Report, Status};

#[derive(clap::Args)]
pub struct Args {
    /// An installed extension's name, an MCP server's as `yep mcp list` names it, or a
    /// package directory. Without one: the setup around the agents (a Claude Code plugin
    /// enabled both in yep and in Claude Code, whose hooks would run twice).
    target: Option<String>,
    /// Print the report (every check, its status and detail) as JSON.
    #[arg(long)]
    json: bool,
    /// Run it once outside the sandbox, under strace, and propose the grants (as `yep grant`
    /// takes them) for what it touched beyond the default profile.
    #[arg(long)]
    sandbox_learn: bool,
    /// Also replay the YEP server-side transcripts of the conformance corpus that apply to
    /// it (conformance/README.md), a row each: pass, FAIL, or skip with what it lacks.
    #[arg(long, conflicts_with = "sandbox_learn")]
    conformance: bool,
    /// Call this tool once the server is up (with --sandbox-learn: instead of the call its
    /// sandbox last denied).
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The arguments of --tool's call, as a JSON object (default `{}`).
    #[arg(long, value_name = "JSON", requires = "tool")]
    args: Option<String>,
}

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let Some(name) = args.target.clone() else {
        if args.sandbox_learn || args.conformance || args.tool.is_some() {
            anyhow::bail!("--sandbox-learn, --conformance and --tool grade one server: name it");
        }
        let mut report = yep_tools::doctor::agents::setup(home, &cwd)?;
        return print(&mut report, args.json);
    };
    let asked = asked_call(&args)?;
    // An MCP server, by the name `yep mcp list` gives it (an installed extension's name, or a
    // path, wins).
    let server = match looks_like_path(&name) || home.lockfile()?.get(&name).is_some() {
        true => None,
        false => super::mcp::named(home, &name)?,
    };
    if let Some(source) = &server
        && args.conformance
    {
        anyhow::bail!(
            "--conformance replays YEP transcripts; `{}` is an MCP server",
            escape(&source.name)
        );
    }
    if server.is_none() && !looks_like_path(&name) && !Path::new(&name).is_dir() {
        home.lockfile()?
            .get(&name)
            .ok_or_else(|| super::mcp::no_such_server(home, &name))?;
    }
    let learn = match args.sandbox_learn {
        true => Some(Learning::new()?),
        false => None,
    };
    let mut report = match server {
        Some(source) => {
            if learn.is_some() && source.server.transport != "stdio" {
                anyhow::bail!(
                    "--sandbox-learn runs a server's process, and MCP server `{}` is reached over HTTP",
                    escape(&source.name)
                );
            }
            let stem = yep_host::runtime::mcp::log_stem(&source.name, &source.origin);
            let replay = replay(home, &stem, asked, learn.is_some());
            doctor::mcp::run(home, &source, &cwd, learn, replay).await
        }
        None => target(home, &name, &args, cwd, learn, asked).await?,
    };
    print(&mut report, args.json)
}

/// The call `--tool` and `--args` ask for.
fn asked_call(args: &Args) -> anyhow::Result<Option<DeniedCall>> {
    let Some(tool) = &args.tool else {
        return Ok(None);
    };
    let json = args.args.as_deref().unwrap_or("{}");
    let parsed: serde_json::Value =
        serde_json::from_str(json).map_err(|e| anyhow::anyhow!("--args is not JSON: {e}"))?;
    if !parsed.is_object() {
        anyhow::bail!("--args is a JSON object, the tool's arguments");
    }
    Ok(Some(DeniedCall {
        tool: tool.clone(),
        args: parsed,
        too_big: false,
    }))
}

/// The call doctor makes: the one asked for, else, for a learning run, the one server `stem`'s
/// sandbox last denied (said on stderr before it is made: outside the sandbox, it does
/// whatever it does).
fn replay(
    home: &Home,
    stem: &str,
    asked: Option<DeniedCall>,
    learning: bool,
) -> Option<doctor::Replay> {
    if let Some(call) = asked {
        return Some(doctor::Replay {
            call,
            denied: false,
        });
    }
    if !learning {
        return None;
    }
    let call = DeniedCall::last(&home.logs_dir(), stem)?;
    crate::output::stderr_line(&format!(
        "making again the call its sandbox last denied, of `{}` (its arguments as kept in {}), outside the sandbox",
        escape(&call.tool),
        DeniedCall::path(&home.logs_dir(), stem).display()
    ));
    Some(doctor::Replay { call, denied: true })
}

/// An installed extension or a package directory.
async fn target(
    home: &Home,
    name: &str,
    args: &Args,
    cwd: PathBuf,
    learn: Option<Learning>,
    asked: Option<DeniedCall>,
) -> anyhow::Result<Report> {
    Ok(match super::resolve_target(home, name)? {
        Target::Installed(entry) => {
            if entry.zot.is_some() && asked.is_some() {
                return Err(zot_call());
            }
            let replay = match entry.zot {
                Some(_) => None,
                None => replay(home, &entry.name, asked, learn.is_some()),
            };
            installed(home, &entry, cwd, learn, args.conformance, replay).await?
        }
        Target::Dir(dir) => {
            let (package, kind) = super::package_dir(&dir)?;
            match kind {
                PackageKind::Zot if learn.is_some() => return Err(zot_learn()),
                PackageKind::Zot if asked.is_some() => return Err(zot_call()),
                PackageKind::Zot => {
                    let mut report = doctor::zot::run_dir(
                        &package,
                        cwd,
                        &home.logs_dir(),
                        sandbox_mode_or_required(home),
                    )
                    .await?
                    .ok_or_else(|| no_server(name))?;
                    if args.conformance {
                        report.checks.push(zot_conformance());
                    }
                    report
                }
                PackageKind::Yep => {
                    // An author's work in progress: its own manifest, no config, no secrets.
                    let manifest = Manifest::load(&package)?;
                    let spec = ServerSpec::from_manifest(&manifest, package, cwd, home.logs_dir())
                        .ok_or_else(|| no_server(&manifest.name))?;
                    let replay = args.conformance.then(|| spec.clone());
                    let call = asked.map(|call| doctor::Replay {
                        call,
                        denied: false,
                    });
                    let mut report = doctor::run_learning(
                        &manifest,
                        spec,
                        doctor::Against::Package,
                        learn,
                        call,
                        sandbox_mode_or_required(home),
                    )
                    .await;
                    if let Some(spec) = replay {
                        let mode = sandbox_mode_or_required(home);
                        conformance(&mut report, &manifest, &spec, mode).await;
                    }
                    report
                }
            }
        }
    })
}

/// Print `report` (as JSON, or a row a line) and answer the exit code.
fn print(report: &mut Report, json: bool) -> anyhow::Result<ExitCode> {
    report.ok = report.checks.iter().all(|c| c.status != Status::Fail);
    if json {
        stdout_line(&serde_json::to_string_pretty(&report)?);
    } else {
        // One column for the names, as wide as the longest (`conformance/hook-answers`), so the
        // details line up; a name past 32 characters takes its own width.
        let width = report
            .checks
            .iter()
            .map(|c| c.name.chars().count())
            .filter(|&n| n <= 32)
            .max()
            .unwrap_or(16)
            .max(16);
        for c in &report.checks {
            let row = format!("  {:<width$} {}", c.name, escape_multiline(&c.detail));
            let (mark, colour) = match c.status {
                Status::Pass => ("pass", Colour::Green),
                Status::Warn => ("WARN", Colour::Yellow),
                Status::Fail => ("FAIL", Colour::Red),
                // Nothing was found either way: not painted.
                Status::Skip => {
                    stdout_line(&format!("skip{row}"));
                    continue;
                }
            };
            stdout_line_painted(mark, colour, &row);
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

/// An installed extension, graded as a session runs it: launched by the one recipe
/// (`launch::installed`), so against its approved manifest, with its config, its secrets as
/// env and its log in the home. A copied package that drifted is refused by a session, so it
/// is reported and not started.
async fn installed(
    home: &Home,
    entry: &LockEntry,
    cwd: PathBuf,
    learn: Option<Learning>,
    replay: bool,
    call: Option<doctor::Replay>,
) -> anyhow::Result<Report> {
    let name = &entry.name;
    // Drift since approval is a finding like any other: a WARN row, not a plain `ok`.
    let drift = home.drift_of(entry).map(|why| Check {
        name: "approval".into(),
        status: Status::Warn,
        detail: if entry.is_linked() {
            format!("{why}; until then a session uses the approved manifest, not this one")
        } else {
            format!(
                "{why}; until then a session refuses it (`yep update --locked {name}` restores what was approved)"
            )
        },
    });
    let launched = launch::installed(
        home,
        name,
        cwd,
        "doctor",
        &SupervisorOptions::for_home(home),
    );
    let mut report = match launched {
        Ok(launch) if launch.spec.command.is_empty() => return Err(no_server(name)),
        Ok(_) if entry.zot.is_some() && learn.is_some() => return Err(zot_learn()),
        Ok(launch) if entry.zot.is_some() => {
            let extension = yep_host::store::zot::ZotManifest::load(&home.package_dir(name))?;
            let mut report = doctor::zot::run(
                &extension,
                launch.spec,
                Some(&launch.manifest),
                entry.zot.clone(),
                launch.supervisor.sandbox,
            )
            .await;
            if replay {
                report.checks.push(zot_conformance());
            }
            report
        }
        Ok(launch) => {
            let on_disk = home.package_manifest(entry).ok();
            let against = doctor::Against::Approved {
                on_disk: on_disk.as_ref(),
            };
            let spec = replay.then(|| launch.spec.clone());
            let mut report = doctor::run_learning(
                &launch.manifest,
                launch.spec,
                against,
                learn,
                call,
                launch.supervisor.sandbox,
            )
            .await;
            if let Some(spec) = spec {
                conformance(
                    &mut report,
                    &launch.manifest,
                    &spec,
                    launch.supervisor.sandbox,
                )
                .await;
            }
            report
        }
        Err(LaunchError::Drifted { .. }) => Report {
            ok: false,
            checks: vec![Check {
                name: "spawn".into(),
                status: Status::Fail,
                detail: "not started: a session refuses a package that changed since approval"
                    .into(),
            }],
            sandbox_learn: None,
        },
        Err(err) => return Err(err.into()),
    };
    if let Some(row) = drift {
        report.checks.insert(0, row);
    }
    Ok(report)
}

/// The corpus's rows, after doctor's own: unless the server did not even start (doctor's
/// rows say why), when every transcript would fail the same way.
async fn conformance(
    report: &mut Report,
    manifest: &Manifest,
    spec: &ServerSpec,
    mode: yep_sandbox::Mode,
) {
    let started = !report
        .checks
        .iter()
        .any(|c| matches!(c.name.as_str(), "spawn" | "handshake") && c.status == Status::Fail);
    if started {
        report
            .checks
            .extend(doctor::conformance(manifest, spec, mode).await);
    } else {
        report.checks.push(Check {
            name: "conformance".into(),
            status: Status::Skip,
            detail: "not replayed: the server did not start (see above)".into(),
        });
    }
}

/// `--conformance` for a zot extension: its corpus holds to one example, not to any package.
fn zot_conformance() -> Check {
    Check {
        name: "conformance".into(),
        status: Status::Skip,
        detail: "the corpus replays YEP servers; its zot server-side transcripts hold to the wordcount example of docs/zot.md (`python3 conformance/run.py server conformance/zot/server -- …` replays them)".into(),
    }
}

fn zot_learn() -> anyhow::Error {
    anyhow::anyhow!("--sandbox-learn runs YEP servers only for now (not zot extensions)")
}

fn zot_call() -> anyhow::Error {
    anyhow::anyhow!(
        "--tool calls a YEP or MCP server's tool; doctor calls each tool a zot extension lists already"
    )
}

fn no_server(name: &str) -> anyhow::Error {
    anyhow::anyhow!("`{name}` declares no capability server: nothing to check")
}
