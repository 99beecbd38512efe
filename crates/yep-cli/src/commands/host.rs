//! `yep host status | stop | serve`: the one warm host every `yep mcp serve` of this home
//! attaches to (docs/architecture.md, "The shared host").

use crate::output::stdout_line;
use std::process::ExitCode;
use std::time::Duration;
use yep_serve::shared::{HostConfig, HostStatus, Purpose};
use yep_store::Home;
use yep_store::text::escape;

#[derive(clap::Subcommand)]
pub enum HostCommand {
    /// Show the shared host: its sessions, each workspace's server processes, their memory
    /// and idle timers.
    Status {
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the shared host: its servers stop and attached sessions lose it (their next
    /// request starts a new one).
    Stop {
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the shared host in the foreground: what `yep mcp serve` starts when none runs.
    /// Prints `ready <pid>` once it listens.
    Serve,
}

/// How a client starts this home's shared host when none runs: `yep --home <home> host
/// serve`, detached (it is meant to outlive the session that started it, and is reaped by
/// init once that is gone).
pub(crate) fn starter(home: &Home) -> std::io::Result<Box<yep_serve::shared::Starter>> {
    Ok(yep_serve::shared::starter(std::env::current_exe()?, home))
}

/// How long the host stays up with no session attached (`host_linger` in settings.toml).
pub const DEFAULT_LINGER: Duration = Duration::from_secs(600);

/// `host_linger = "10m"` in settings.toml, else [`DEFAULT_LINGER`]. Never off: a host that
/// no session uses goes.
fn linger(home: &Home) -> anyhow::Result<Duration> {
    yep_host::runtime::duration_setting(home, "host_linger", Some(DEFAULT_LINGER))?.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: `host_linger` cannot be off or zero: the host goes once no session has used it that long",
            home.settings_path().display()
        )
    })
}

pub async fn run(cmd: HostCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        HostCommand::Serve => serve(home).await,
        HostCommand::Status { json } => {
            let Some(welcome) = yep_serve::shared::control(home, Purpose::Status).await? else {
                match json {
                    true => stdout_line(&serde_json::json!({ "running": false }).to_string()),
                    false => stdout_line("no shared host is running for this home"),
                }
                return Ok(ExitCode::SUCCESS);
            };
            if let Some(error) = welcome.error {
                anyhow::bail!(
                    "the shared host (pid {}, yep {}) would not say: {}",
                    welcome.pid,
                    escape(&welcome.version),
                    escape(&error)
                );
            }
            let status = welcome
                .status
                .ok_or_else(|| anyhow::anyhow!("the shared host sent no status"))?;
            match json {
                true => {
                    let mut doc = serde_json::to_value(&status)?;
                    doc["running"] = true.into();
                    stdout_line(&serde_json::to_string_pretty(&doc)?);
                }
                false => show(&status),
            }
            Ok(ExitCode::SUCCESS)
        }
        HostCommand::Stop { json } => {
            let stopped = yep_serve::shared::control(home, Purpose::Stop).await?;
            if let Some(error) = stopped.as_ref().and_then(|w| w.error.as_ref()) {
                anyhow::bail!("the shared host would not stop: {}", escape(error));
            }
            let pid = stopped.as_ref().map(|w| w.pid);
            match (json, pid) {
                (true, _) => stdout_line(&serde_json::json!({ "stopped": pid }).to_string()),
                (false, Some(pid)) => stdout_line(&format!("stopped the shared host (pid {pid})")),
                (false, None) => stdout_line("no shared host is running for this home"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `yep host serve`: listen, say `ready <pid>`, serve until told to stop or left alone.
async fn serve(home: &Home) -> anyhow::Result<ExitCode> {
    let config = HostConfig {
        idle_stop: yep_host::runtime::idle_stop_setting(home)?,
        linger: linger(home)?,
    };
    let ready = |pid: u32| say_ready(pid);
    match yep_serve::shared::serve(home.clone(), config, ready).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(yep_serve::shared::host::ServeError::AlreadyRunning(pid)) => {
            say_ready(pid);
            crate::output::stderr_line(&format!(
                "a shared host of this version already serves this home (pid {pid})"
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
    }
}

/// Tell the client that started this host that it listens, then let go of stdout: nothing
/// else is ever written there, and the client may be gone.
fn say_ready(pid: u32) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready {pid}");
    let _ = out.flush();
    drop(out);
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto this process's stdout descriptor, from one this function owns.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
}

fn secs(s: u64) -> String {
    humantime::format_duration(Duration::from_secs(s)).to_string()
}

fn kib(k: Option<u64>) -> String {
    k.map_or_else(|| "?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

fn show(status: &HostStatus) {
    stdout_line(&format!(
        "shared host: yep {}, pid {}, up {}, {} RSS",
        escape(&status.version),
        status.pid,
        secs(status.uptime_secs),
        kib(status.rss_kib)
    ));
    let exits = status
        .exits_in_secs
        .map(|s| format!("; exits in {} unless one attaches", secs(s)))
        .unwrap_or_default();
    stdout_line(&format!("sessions: {}{exits}", status.sessions));
    stdout_line(&format!(
        "idle stop: {}",
        status
            .idle_stop_secs
            .map_or_else(|| "off".into(), |s| format!("after {}", secs(s)))
    ));
    if status.workspaces.is_empty() {
        stdout_line("no workspace attached yet");
    }
    for w in &status.workspaces {
        stdout_line(&format!(
            "{}  ({} session{})",
            escape(&w.root.display().to_string()),
            w.sessions,
            if w.sessions == 1 { "" } else { "s" }
        ));
        let processes = w.servers.iter().filter(|s| s.pid.is_some()).count();
        stdout_line(&format!("  processes: {processes}"));
        for s in &w.servers {
            let mut line = format!("  {}  [{}]", escape(&s.name), escape(&s.state));
            if let Some(pid) = s.pid {
                line += &format!("  pid {pid}, {}", kib(s.rss_kib));
            }
            if let Some(idle) = s.idle_secs {
                line += &format!(", unused for {}", secs(idle));
            }
            if let Some(stops) = s.stops_in_secs {
                line += &format!(", stops in {}", secs(stops));
            }
            stdout_line(&line);
        }
    }
}
