//! Small facts a session leaves for `yep list`: trace events dropped last time, per extension,
//! and how each server stands.

use super::Home;
use super::fsutil::{MODE_DEFAULT, write_atomic};

fn path(home: &Home, name: &str) -> std::path::PathBuf {
    home.root.join("state").join(format!("{name}.json"))
}

/// Remember how many trace events the last session dropped for `name`.
pub fn record_trace_dropped(home: &Home, name: &str, dropped: u64) {
    let body = serde_json::json!({ "trace_dropped": dropped }).to_string();
    if let Err(e) = write_atomic(&path(home, name), body.as_bytes(), MODE_DEFAULT) {
        tracing::warn!("failed to record trace drops for `{name}`: {e}");
    }
}

/// Trace events the last session dropped for `name`, if one recorded it.
pub fn trace_dropped(home: &Home, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path(home, name)).ok()?;
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()?
        .get("trace_dropped")?
        .as_u64()
}

fn run_path(home: &Home, name: &str) -> std::path::PathBuf {
    home.root.join("state").join(format!("{name}.run.json"))
}

/// Where a server stood when a session last said so.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Run {
    /// It runs, as this process (none for a server reached over HTTP).
    Started {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// Its start or its run failed, saying this.
    Failed { message: String },
    /// The host that runs it (this process, `host_pid`) stopped it because nothing used it
    /// for a while; it starts again on next use.
    Idle {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host_pid: Option<u32>,
    },
}

/// Remember how server `name` (an extension, or `mcp.<server>`) stands. Best effort: a
/// session never fails for want of this note.
pub fn record_run(home: &Home, name: &str, run: &Run) {
    let body = serde_json::to_string(run).unwrap_or_default();
    let path = run_path(home, name);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = write_atomic(&path, body.as_bytes(), MODE_DEFAULT) {
        tracing::debug!("failed to record the state of `{name}`: {e}");
    }
}

/// Server `name` was stopped for good (its session ended, or it was disabled): it is
/// `configured` again, idle or not. A failure stays, for `yep list`.
pub fn clear_run(home: &Home, name: &str) {
    let path = run_path(home, name);
    let stood = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Run>(&text).ok())
        .is_some_and(|run| matches!(run, Run::Started { .. } | Run::Idle { .. }));
    if stood {
        let _ = std::fs::remove_file(path);
    }
}

/// How server `name` stands: `started` (its process is alive), `idle` (its host, still
/// alive, stopped it for want of use and starts it again on next use), `failed` (the last
/// session's start or run failed), else `configured` (not running: never started, or stopped
/// since). With the failure's message, when it failed.
pub fn run_state(home: &Home, name: &str) -> (&'static str, Option<String>) {
    let recorded = std::fs::read_to_string(run_path(home, name))
        .ok()
        .and_then(|text| serde_json::from_str::<Run>(&text).ok());
    match recorded {
        Some(Run::Started { pid }) if pid.is_none_or(alive) => ("started", None),
        Some(Run::Idle { host_pid }) if host_pid.is_none_or(alive) => ("idle", None),
        Some(Run::Failed { message }) => ("failed", Some(message)),
        _ => ("configured", None),
    }
}

/// Whether process `pid` exists (signal 0 checks without sending anything).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        (dir, home)
    }

    #[test]
    fn an_idle_server_reads_idle_while_its_host_lives_and_configured_after() {
        let (_dir, home) = home();
        let me = Some(std::process::id());
        record_run(&home, "x", &Run::Idle { host_pid: me });
        assert_eq!(run_state(&home, "x"), ("idle", None));
        // Its host is gone (no process has pid `i32::MAX`): nothing will start it again.
        let gone = Some(i32::MAX as u32);
        record_run(&home, "x", &Run::Idle { host_pid: gone });
        assert_eq!(run_state(&home, "x"), ("configured", None));
    }

    #[test]
    fn clearing_a_run_forgets_started_and_idle_but_keeps_a_failure() {
        let (_dir, home) = home();
        let me = Some(std::process::id());
        for run in [Run::Started { pid: me }, Run::Idle { host_pid: me }] {
            record_run(&home, "x", &run);
            assert_ne!(run_state(&home, "x").0, "configured");
            clear_run(&home, "x");
            assert_eq!(run_state(&home, "x"), ("configured", None));
        }
        let failed = Run::Failed {
            message: "it broke".into(),
        };
        record_run(&home, "x", &failed);
        clear_run(&home, "x");
        assert_eq!(run_state(&home, "x"), ("failed", Some("it broke".into())));
    }

    #[test]
    fn an_idle_run_is_written_with_its_state_and_host() {
        let run = Run::Idle { host_pid: Some(7) };
        let text = serde_json::to_string(&run).unwrap();
        assert_eq!(text, r#"{"state":"idle","host_pid":7}"#);
        assert_eq!(serde_json::from_str::<Run>(&text).unwrap(), run);
    }
}
