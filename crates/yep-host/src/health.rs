//! What the host tells the embedder about its extensions' health: servers started, failed,
//! restarted and stopped for want of use, packages that drifted from what was approved, tools refused and hooks that could
//! not run. Each event goes to a stream any number of embedders can follow
//! ([`crate::ExtensionHost::health`]); each problem also to [`crate::ExtensionHost::warnings`].
//! Nothing here depends on a `tracing` subscriber.

use crate::manifest::HookEvent;
use serde::Serialize;
use std::collections::{HashSet, VecDeque};
use std::hash::Hasher;
use std::path::PathBuf;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// Events kept for a stream that subscribes later (the start-up ones, say); older ones are
/// dropped first. Also the most a slow subscriber can fall behind before it misses events.
pub(crate) const HEALTH_BACKLOG: usize = 256;
/// Distinct warnings kept; past this they are counted, not kept.
pub(crate) const MAX_WARNINGS: usize = 256;
/// The longest message kept, in bytes: longer ones (they can quote a server) are cut.
pub(crate) const MAX_MESSAGE: usize = 4096;
/// Distinct warnings remembered (as hashes) to tell a repeat from a new one.
const MAX_SEEN: usize = 65_536;

/// One change in an extension's health. Every problem carries `message`, the sentence
/// [`crate::ExtensionHost::warnings`] keeps for it, which names the extension.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HealthEvent {
    /// A server started and shook hands.
    Started {
        extension: String,
        pid: Option<u32>,
        /// The wire it speaks (`YEP 1.0`).
        wire: String,
    },
    /// A server started again after one ran before: after a crash, a reload or a restart for
    /// config. (A first start that comes after failed ones is `Started`.)
    Restarted {
        extension: String,
        pid: Option<u32>,
        wire: String,
    },
    /// A server could not be spawned, failed its handshake or stopped unasked; or an enabled
    /// package could not be loaded at all. `log` is the server's stderr log, when there is one.
    Failed {
        extension: String,
        message: String,
        log: Option<PathBuf>,
    },
    /// A package's files are no longer what the user approved: a copied package is not run,
    /// a linked one runs under its approved manifest.
    Drifted { extension: String, message: String },
    /// A tool is not offered: the manifest does not approve it, its name is taken, or its
    /// argument schema does not compile.
    RefusedTool {
        extension: String,
        tool: String,
        message: String,
    },
    /// A hook could not run (its server did not start, it failed or it timed out). `blocked`:
    /// its `on_error` blocked the tool call; otherwise the call went ahead without it.
    HookError {
        extension: String,
        tool: String,
        event: HookEvent,
        blocked: bool,
        message: String,
    },
    /// Anything else worth hearing: a renamed tool, a clamped timeout, truncated prompt text,
    /// a dynamic prompt that failed.
    Warning {
        extension: Option<String>,
        message: String,
    },
    /// The sandbox refused what a server reached for: a host name its grants do not name,
    /// asked of the egress proxy. `target` is what it asked for (`host:port`), `grant` the
    /// grant that would allow it (`net:host`, as `yep grant` takes it).
    SandboxDenied {
        extension: String,
        target: String,
        grant: String,
        message: String,
    },
    /// A server was stopped because nothing used it for `after` (the host's idle stop,
    /// [`crate::HostOptions::idle_stop`]). It starts again on next use, as `Restarted`. Not a
    /// problem: never a warning. `after` is written as `after_ms`.
    Idle {
        extension: String,
        #[serde(rename = "after_ms", serialize_with = "as_ms")]
        after: std::time::Duration,
    },
    /// An MCP server did not answer `tools/list` within its deadline at start
    /// ([`crate::HostOptions::mcp_list_deadline`]): the session serves the tools its approval
    /// pinned, and the list is still waited for. Its status says `slow` until it comes.
    Slow { extension: String, message: String },
    /// This stream fell behind and missed `missed` events (they are still in `warnings()`
    /// when they were problems).
    Lagged { missed: u64 },
}

impl HealthEvent {
    /// The extension it is about, when there is one.
    pub fn extension(&self) -> Option<&str> {
        match self {
            HealthEvent::Started { extension, .. }
            | HealthEvent::Restarted { extension, .. }
            | HealthEvent::Failed { extension, .. }
            | HealthEvent::Drifted { extension, .. }
            | HealthEvent::RefusedTool { extension, .. }
            | HealthEvent::HookError { extension, .. }
            | HealthEvent::SandboxDenied { extension, .. }
            | HealthEvent::Slow { extension, .. }
            | HealthEvent::Idle { extension, .. } => Some(extension),
            HealthEvent::Warning { extension, .. } => extension.as_deref(),
            HealthEvent::Lagged { .. } => None,
        }
    }

    /// The warning it is, or `None` for good news.
    pub fn warning(&self) -> Option<&str> {
        match self {
            HealthEvent::Failed { message, .. }
            | HealthEvent::Drifted { message, .. }
            | HealthEvent::RefusedTool { message, .. }
            | HealthEvent::HookError { message, .. }
            | HealthEvent::SandboxDenied { message, .. }
            | HealthEvent::Slow { message, .. }
            | HealthEvent::Warning { message, .. } => Some(message),
            HealthEvent::Started { .. }
            | HealthEvent::Restarted { .. }
            | HealthEvent::Idle { .. }
            | HealthEvent::Lagged { .. } => None,
        }
    }

    /// Every text field cut to [`MAX_MESSAGE`] bytes: each can quote a server.
    fn cap(&mut self) {
        match self {
            HealthEvent::Failed { message, .. }
            | HealthEvent::Drifted { message, .. }
            | HealthEvent::Slow { message, .. }
            | HealthEvent::Warning { message, .. } => cap(message),
            HealthEvent::RefusedTool { tool, message, .. }
            | HealthEvent::HookError { tool, message, .. } => {
                cap(tool);
                cap(message);
            }
            HealthEvent::SandboxDenied {
                target,
                grant,
                message,
                ..
            } => {
                cap(target);
                cap(grant);
                cap(message);
            }
            HealthEvent::Started { wire, .. } | HealthEvent::Restarted { wire, .. } => cap(wire),
            HealthEvent::Idle { .. } | HealthEvent::Lagged { .. } => {}
        }
    }

    /// A standing condition (the same drift, refusal or warning met again on the next
    /// rebuild) is told once; what happens (a start, a failure, a hook error) every time.
    fn is_condition(&self) -> bool {
        matches!(
            self,
            HealthEvent::Drifted { .. }
                | HealthEvent::RefusedTool { .. }
                | HealthEvent::SandboxDenied { .. }
                | HealthEvent::Warning { .. }
        )
    }
}

impl std::fmt::Display for HealthEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HealthEvent::Started {
                extension,
                pid,
                wire,
            }
            | HealthEvent::Restarted {
                extension,
                pid,
                wire,
            } => {
                let verb = match self {
                    HealthEvent::Started { .. } => "started",
                    _ => "restarted",
                };
                // The wire's version string is the server's.
                let wire = crate::text::escape(wire);
                write!(f, "extension `{extension}` {verb} ({wire}")?;
                if let Some(pid) = pid {
                    write!(f, ", pid {pid}")?;
                }
                f.write_str(")")
            }
            HealthEvent::Idle { extension, after } => {
                // Whole seconds past one: idle stops are minutes long, and the rest is noise.
                let after = match after.as_secs() {
                    0 => std::time::Duration::from_millis(after.subsec_millis().into()),
                    secs => std::time::Duration::from_secs(secs),
                };
                write!(
                    f,
                    "extension `{extension}` stopped after {} unused; it starts again on next use",
                    humantime::format_duration(after)
                )
            }
            HealthEvent::Lagged { missed } => {
                write!(f, "missed {missed} health events (the stream fell behind)")
            }
            other => f.write_str(other.warning().unwrap_or_default()),
        }
    }
}

/// A duration as whole milliseconds, as JSON says durations here.
fn as_ms<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A subscription to [`HealthEvent`]s: first the recent ones (up to `HEALTH_BACKLOG`), then
/// each as it happens.
pub struct HealthStream {
    backlog: VecDeque<HealthEvent>,
    live: broadcast::Receiver<HealthEvent>,
}

impl HealthStream {
    /// The next event; `None` once the host is gone.
    pub async fn recv(&mut self) -> Option<HealthEvent> {
        if let Some(event) = self.backlog.pop_front() {
            return Some(event);
        }
        match self.live.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                Some(HealthEvent::Lagged { missed })
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<HealthEvent> {
        if let Some(event) = self.backlog.pop_front() {
            return Some(event);
        }
        match self.live.try_recv() {
            Ok(event) => Some(event),
            Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                Some(HealthEvent::Lagged { missed })
            }
            Err(_) => None,
        }
    }
}

#[derive(Default)]
struct State {
    recent: VecDeque<HealthEvent>,
    warnings: Vec<String>,
    /// Every distinct warning so far, hashed (up to [`MAX_SEEN`]).
    seen: HashSet<u64>,
    /// Distinct warnings past [`MAX_WARNINGS`].
    dropped: usize,
}

/// `message` cut to [`MAX_MESSAGE`] bytes (at a character boundary), saying so.
fn cap(message: &mut String) {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" … (cut)");
    }
}

fn hash(text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(text.as_bytes());
    h.finish()
}

/// The host's record of health: the stream, its backlog, and the warnings.
pub(crate) struct Health {
    tx: broadcast::Sender<HealthEvent>,
    state: Mutex<State>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            tx: broadcast::channel(HEALTH_BACKLOG).0,
            state: Mutex::default(),
        }
    }
}

impl Health {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn report(&self, mut event: HealthEvent) {
        event.cap();
        let mut state = self.state();
        if let Some(warning) = event.warning() {
            let key = hash(warning);
            let full = state.seen.len() >= MAX_SEEN;
            // Once the record is full a new condition is taken as known: quiet, not re-told.
            let known = state.seen.contains(&key) || (full && event.is_condition());
            if !known && !full {
                state.seen.insert(key);
            }
            if known && event.is_condition() {
                return;
            }
            // A failed start is also the error of the call that met it: not a warning twice.
            if matches!(event, HealthEvent::Failed { .. }) {
                tracing::info!("{warning}");
            } else {
                tracing::warn!("{warning}");
            }
            if !known {
                if state.warnings.len() < MAX_WARNINGS {
                    state.warnings.push(warning.to_string());
                } else {
                    state.dropped += 1;
                }
            }
        } else {
            tracing::info!("{event}");
        }
        if state.recent.len() == HEALTH_BACKLOG {
            state.recent.pop_front();
        }
        state.recent.push_back(event.clone());
        // Sent under the lock, so a subscriber's backlog and its live events neither overlap
        // nor leave a gap.
        let _ = self.tx.send(event);
    }

    pub(crate) fn subscribe(&self) -> HealthStream {
        let state = self.state();
        HealthStream {
            backlog: state.recent.clone(),
            live: self.tx.subscribe(),
        }
    }

    pub(crate) fn warnings(&self) -> Vec<String> {
        let state = self.state();
        let mut out = state.warnings.clone();
        if state.dropped > 0 {
            out.push(format!(
                "{} more warnings were not kept (the first {MAX_WARNINGS} are above)",
                state.dropped
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(message: &str) -> HealthEvent {
        HealthEvent::Warning {
            extension: None,
            message: message.into(),
        }
    }

    fn failed(message: &str) -> HealthEvent {
        HealthEvent::Failed {
            extension: "x".into(),
            message: message.into(),
            log: None,
        }
    }

    #[test]
    fn a_late_subscriber_gets_the_backlog_then_live_events_without_gap_or_repeat() {
        let health = Health::default();
        health.report(warning("one"));
        let mut early = health.subscribe();
        health.report(failed("two"));
        let mut late = health.subscribe();
        health.report(failed("two"));
        let drain = |s: &mut HealthStream| {
            std::iter::from_fn(|| s.try_recv())
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(drain(&mut early), ["one", "two", "two"]);
        assert_eq!(drain(&mut late), ["one", "two", "two"]);
        // Warnings are distinct: the repeated failure is one line.
        assert_eq!(health.warnings(), ["one", "two"]);
    }

    #[test]
    fn a_standing_condition_is_told_once_and_warnings_are_bounded() {
        let health = Health::default();
        let mut stream = health.subscribe();
        health.report(warning("same"));
        health.report(warning("same"));
        assert!(stream.try_recv().is_some());
        assert!(
            stream.try_recv().is_none(),
            "a repeated condition is not re-sent"
        );
        for i in 0..MAX_WARNINGS + 10 {
            health.report(failed(&format!("f{i}")));
        }
        // A warning met again past the bound is not counted again.
        health.report(failed(&format!("f{}", MAX_WARNINGS + 9)));
        health.report(warning("same"));
        let warnings = health.warnings();
        assert_eq!(warnings.len(), MAX_WARNINGS + 1);
        assert!(
            warnings.last().unwrap().starts_with("11 more warnings"),
            "{warnings:?}"
        );
        // The stream fell behind by far more than its capacity: it says so, then goes on.
        assert!(matches!(
            stream.try_recv(),
            Some(HealthEvent::Lagged { .. })
        ));
        assert!(stream.try_recv().is_some());
    }

    #[test]
    fn an_idle_stop_is_told_but_is_no_warning() {
        let health = Health::default();
        let mut stream = health.subscribe();
        let idle = HealthEvent::Idle {
            extension: "x".into(),
            after: std::time::Duration::from_millis(61_250),
        };
        health.report(idle.clone());
        assert_eq!(stream.try_recv(), Some(idle.clone()));
        assert!(health.warnings().is_empty());
        assert_eq!(idle.extension(), Some("x"));
        assert_eq!(
            idle.to_string(),
            "extension `x` stopped after 1m 1s unused; it starts again on next use"
        );
        assert_eq!(
            serde_json::to_value(&idle).unwrap(),
            serde_json::json!({"kind": "idle", "extension": "x", "after_ms": 61250})
        );
    }

    #[test]
    fn a_message_is_cut_to_the_bound() {
        let health = Health::default();
        let mut stream = health.subscribe();
        health.report(failed(&"é".repeat(MAX_MESSAGE)));
        let Some(HealthEvent::Failed { message, .. }) = stream.try_recv() else {
            panic!("no event");
        };
        assert!(message.len() <= MAX_MESSAGE + 16, "{}", message.len());
        assert!(message.ends_with("(cut)"));
        assert_eq!(health.warnings(), [message]);
    }
}
