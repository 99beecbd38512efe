//! Servers that sleep when idle: the sweeper that stops a server nothing has used for
//! [`HostOptions::idle_stop`](super::HostOptions::idle_stop), what [`ExtensionHost::servers`]
//! says of each server, and the `idle_stop` setting in `settings.toml`.
//!
//! A stopped server keeps its place in the session: its tools stay listed (an MCP server's as
//! it last listed them), its last status stays, and the next use starts it again with the
//! same pins. Only servers that are child processes are stopped; one with no process costs
//! nothing to keep.

use super::{ExtensionHost, WeakHost};
use crate::store::{Home, StoreError};
use crate::supervisor::Extension;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The idle stop when `settings.toml` does not say: ten minutes.
pub(crate) const DEFAULT_IDLE_STOP: Duration = Duration::from_secs(600);

/// The `settings.toml` key [`idle_stop_setting`] reads.
pub(crate) const IDLE_STOP_KEY: &str = "idle_stop";

/// The sweeper looks at least this often (for short idle times, as tests use)…
const SWEEP_MIN: Duration = Duration::from_millis(250);
/// …and at most this long apart (a long idle time is still kept to within this).
const SWEEP_MAX: Duration = Duration::from_secs(30);

/// How `home` wants idle servers stopped: its `idle_stop` setting (`"10m"`, `"90s"`, any
/// [`humantime`] duration), `None` for `"off"` or `"0"` (never), `DEFAULT_IDLE_STOP` when
/// it has none. For [`HostOptions::idle_stop`](super::HostOptions::idle_stop).
pub fn idle_stop_setting(home: &Home) -> Result<Option<Duration>, IdleStopError> {
    duration_setting(home, IDLE_STOP_KEY, Some(DEFAULT_IDLE_STOP))
}

/// A top-level duration of `home`'s `settings.toml` (`key = "10m"`, any [`humantime`]
/// duration): `default` when it has none, `None` for `"off"` or `"0"`. A value that is no
/// duration is an error naming the file and the key.
pub fn duration_setting(
    home: &Home,
    key: &'static str,
    default: Option<Duration>,
) -> Result<Option<Duration>, IdleStopError> {
    let path = home.settings_path();
    let written = crate::store::settings::top_level_text(&path, key)
        .map_err(|e| IdleStopError::Settings(Box::new(e)))?;
    match written {
        None => Ok(default),
        Some(text) => parse_duration(&text).map_err(|error| IdleStopError::Invalid {
            path,
            key,
            value: text,
            error,
        }),
    }
}

/// A duration setting's value: `off` or a zero duration is none.
fn parse_duration(text: &str) -> Result<Option<Duration>, humantime::DurationError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") || text == "0" {
        return Ok(None);
    }
    let d = humantime::parse_duration(text)?;
    Ok((!d.is_zero()).then_some(d))
}

/// Why the `idle_stop` setting (or another [`duration_setting`]) could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdleStopError {
    /// `settings.toml` could not be read or parsed.
    #[error(transparent)]
    Settings(Box<StoreError>),
    /// Its value for `key` is no duration.
    #[error(
        "{}: `{}`: `{}` is not a duration such as \"10m\" or \"90s\", nor \"off\": {}",
        .path.display(),
        .key,
        crate::text::escape(.value),
        // humantime quotes the unit it did not know: the file's text too.
        crate::text::escape(&.error.to_string())
    )]
    Invalid {
        path: PathBuf,
        key: &'static str,
        /// As written (a non-string value as its TOML text).
        value: String,
        error: humantime::DurationError,
    },
}

/// Where one server stands, for `yep host status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ServerState {
    /// Nothing has needed it yet.
    NotStarted,
    /// Its process runs.
    Running,
    /// Stopped because nothing used it for the idle stop; it starts again on next use.
    Idle,
    /// Its last start or run failed (the health stream and `warnings()` say why).
    Failed,
    /// It ran and is not running now, stopped by the host (a reload in progress, say).
    Stopped,
}

/// One server process of the session: an extension's (YEP or zot) or an MCP server's. Written
/// as JSON with its durations in milliseconds (`idle_ms`, `stops_in_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    /// The extension's name, or the MCP server's.
    pub name: String,
    /// An MCP server (else an extension).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mcp: bool,
    pub state: ServerState,
    /// Its process, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// A call holds it now: it is not idle, whatever `idle` says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// How long since it was last used (a call began or ended); `None` if it never was.
    #[serde(
        rename = "idle_ms",
        serialize_with = "opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle: Option<Duration>,
    /// How long until the idle stop stops it if nothing uses it meanwhile (zero: at the next
    /// sweep). `None` when there is no idle stop, it does not run, or a call holds it.
    #[serde(
        rename = "stops_in_ms",
        serialize_with = "opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub stops_in: Option<Duration>,
}

fn opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

impl ServerInfo {
    fn of(name: &str, mcp: bool, ext: &Extension, idle_stop: Option<Duration>) -> ServerInfo {
        let pid = ext.pid();
        let running = ext.is_running();
        let state = if running {
            ServerState::Running
        } else if ext.is_idle_stopped() {
            ServerState::Idle
        } else if ext.failures() > 0 {
            ServerState::Failed
        } else if ext.has_started() {
            ServerState::Stopped
        } else {
            ServerState::NotStarted
        };
        let busy = running && ext.in_use();
        let idle = ext.idle_for();
        let stops_in = match (idle_stop, running && !busy) {
            (Some(d), true) => Some(d.saturating_sub(idle.unwrap_or_default())),
            _ => None,
        };
        ServerInfo {
            name: name.to_string(),
            mcp,
            state,
            pid: pid.filter(|_| running),
            busy,
            idle,
            stops_in,
        }
    }
}

impl ExtensionHost {
    /// Every server of this session that runs as a child process, or would once started: the
    /// enabled extensions' (YEP and zot, in enable order), then the approved MCP servers'.
    /// Each with its pid while it runs, whether it runs, sleeps after an idle stop or never
    /// started, how long since it was last used, and how long until the idle stop
    /// ([`super::HostOptions::idle_stop`]) stops it. Claude Code plugins, MCP servers over
    /// HTTP and packages with no server run no process, and are not listed. Empty after
    /// [`ExtensionHost::shutdown`].
    pub fn servers(&self) -> Vec<ServerInfo> {
        let idle_stop = idle_stop(&self.core.opts);
        let table = self.snapshot();
        let extensions = table
            .loaded()
            .filter(|l| l.ext.spawns_process())
            .map(|l| ServerInfo::of(&l.name, false, &l.ext, idle_stop));
        let mcp = table
            .mcp
            .iter()
            .filter(|e| e.blocked.is_none() && e.ext.spawns_process())
            .map(|e| ServerInfo::of(&e.source.name, true, &e.ext, idle_stop));
        extensions.chain(mcp).collect()
    }
}

/// The idle stop the options ask for; zero is none.
pub(crate) fn idle_stop(opts: &super::HostOptions) -> Option<Duration> {
    opts.idle_stop.filter(|d| !d.is_zero())
}

/// How often the sweeper looks for an idle stop of `idle`: a quarter of it, within bounds, so
/// a server is stopped at most that long after it has been idle for `idle`.
fn sweep_every(idle: Duration) -> Duration {
    (idle / 4).clamp(SWEEP_MIN, SWEEP_MAX)
}

/// The sweeper: every [`sweep_every`], stop each server that has been idle for `idle`. It
/// holds the host weakly, and ends with it (dropped or shut down).
pub(crate) async fn sweep(host: WeakHost, idle: Duration) {
    let every = sweep_every(idle);
    loop {
        tokio::time::sleep(every).await;
        // The candidates, then no handle held while they stop: a host dropped meanwhile goes.
        let candidates: Vec<Candidate> = {
            let Some(host) = host.upgrade() else {
                return;
            };
            if host.core.is_shut() {
                return;
            }
            let table = host.snapshot();
            // The extension whose panel is open is in front of the user: not idle.
            let panel = host
                .core
                .events
                .panel
                .borrow()
                .as_ref()
                .map(|p| p.extension.clone());
            let extensions = table
                .loaded()
                .filter(|l| panel.as_deref() != Some(l.name.as_str()))
                .map(|l| Candidate::Extension(Arc::clone(l)));
            let mcp = table.mcp.iter().map(|e| Candidate::Mcp(Arc::clone(e)));
            extensions
                .chain(mcp)
                .filter(|c| c.ext().is_running())
                .filter(|c| c.ext().idle_for().is_some_and(|d| d >= idle))
                .collect()
        };
        if candidates.is_empty() {
            continue;
        }
        // In parallel: one slow goodbye holds up no other server's stop.
        let mut stops = tokio::task::JoinSet::new();
        for c in candidates {
            stops.spawn(async move {
                // Its tools stay listed as it lists them now, whatever the cache holds.
                if let Candidate::Mcp(entry) = &c {
                    entry.note_listed();
                }
                c.ext().stop_if_idle(idle).await;
            });
        }
        while stops.join_next().await.is_some() {}
    }
}

/// A server the sweeper may stop.
enum Candidate {
    Extension(Arc<super::Loaded>),
    Mcp(Arc<super::mcp::McpEntry>),
}

impl Candidate {
    fn ext(&self) -> &Extension {
        match self {
            Candidate::Extension(l) => &l.ext,
            Candidate::Mcp(e) => &e.ext,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home_with(settings: Option<&str>) -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        if let Some(text) = settings {
            std::fs::write(home.settings_path(), text).unwrap();
        }
        (dir, home)
    }

    #[test]
    fn idle_stop_is_ten_minutes_unless_settings_say_otherwise() {
        let (_dir, home) = home_with(None);
        assert_eq!(idle_stop_setting(&home).unwrap(), Some(DEFAULT_IDLE_STOP));
        let (_dir, home) = home_with(Some("sandbox = \"off\"\n"));
        assert_eq!(
            idle_stop_setting(&home).unwrap(),
            Some(Duration::from_secs(600))
        );
    }

    #[test]
    fn idle_stop_reads_durations_and_off() {
        for (written, read) in [
            ("\"90s\"", Some(Duration::from_secs(90))),
            ("\"1h 30m\"", Some(Duration::from_secs(5400))),
            ("\"250ms\"", Some(Duration::from_millis(250))),
            ("\"off\"", None),
            ("\"OFF\"", None),
            ("\"0\"", None),
            ("\"0s\"", None),
            ("0", None),
        ] {
            let (_dir, home) = home_with(Some(&format!("idle_stop = {written}\n")));
            assert_eq!(idle_stop_setting(&home).unwrap(), read, "{written}");
        }
    }

    #[test]
    fn an_idle_stop_that_is_no_duration_names_the_file_and_the_key() {
        for written in ["\"soon\"", "600", "\"10 parsecs\"", "true"] {
            let (_dir, home) = home_with(Some(&format!("idle_stop = {written}\n")));
            let err = idle_stop_setting(&home).unwrap_err();
            let message = err.to_string();
            assert!(
                message.starts_with(&home.settings_path().display().to_string())
                    && message.contains("`idle_stop`")
                    && message.contains("not a duration"),
                "{message}"
            );
            assert!(matches!(err, IdleStopError::Invalid { .. }));
        }
    }

    #[test]
    fn a_hostile_idle_stop_is_escaped_in_its_error() {
        let (_dir, home) = home_with(Some("idle_stop = \"\\u001b[2Jsoon\"\n"));
        let message = idle_stop_setting(&home).unwrap_err().to_string();
        assert!(!message.contains('\u{1b}'), "{message:?}");
    }

    #[test]
    fn unreadable_settings_are_an_error_not_the_default() {
        let (_dir, home) = home_with(Some("idle_stop = \n"));
        assert!(matches!(
            idle_stop_setting(&home),
            Err(IdleStopError::Settings(_))
        ));
    }

    #[test]
    fn the_sweep_runs_four_times_per_idle_stop_within_bounds() {
        assert_eq!(
            sweep_every(Duration::from_secs(1)),
            Duration::from_millis(250)
        );
        assert_eq!(sweep_every(Duration::from_millis(10)), SWEEP_MIN);
        assert_eq!(
            sweep_every(Duration::from_secs(60)),
            Duration::from_secs(15)
        );
        assert_eq!(sweep_every(Duration::from_secs(600)), SWEEP_MAX);
    }
}
