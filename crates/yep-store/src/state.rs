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
