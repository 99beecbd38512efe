//! Small facts a session leaves for `yep list`: trace events dropped last time, per extension.

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

/// Server `name` was stopped: it is `configured` again. A failure stays, for `yep list`.
pub fn clear_run(home: &Home, name: &str) {
    let path = run_path(home, name);
    let started = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Run>(&text).ok())
        .is_some_and(|run| matches!(run, Run::Started { .. }));
    if started {
        let _ = std::fs::remove_file(path);
    }
}

/// How server `name` stands: `started` (its process is alive), `failed` (the last session's
/// start or run failed), else `configured` (not running: never started, or stopped since).
/// With the failure's message, when it failed.
pub fn run_state(home: &Home, name: &str) -> (&'static str, Option<String>) {
    let recorded = std::fs::read_to_string(run_path(home, name))
        .ok()
        .and_then(|text| serde_json::from_str::<Run>(&text).ok());
    match recorded {
        Some(Run::Started { pid }) if pid.is_none_or(alive) => ("started", None),
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
