//! Trace forwarding: the host's lifecycle events to every extension that declares `trace`.
//!
//! `emit` never blocks and never awaits a server: each forwarder owns a bounded queue; when it
//! is full the oldest events are dropped and counted. Streaming deltas are not forwarded (the
//! paired started/completed events bound the work). `flush` drains the queues, then asks
//! each server for a barrier so the exporter has handled everything before the session ends.

use super::{ExtensionHost, Loaded};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Events queued per trace extension before the oldest are dropped.
pub(crate) const TRACE_QUEUE: usize = 4096;

pub use crate::capability::TraceEvent;

/// Streaming deltas are dropped: they would swamp an exporter for no span information.
pub(crate) fn is_streaming_delta(event_type: &str) -> bool {
    event_type.ends_with(".delta") || event_type == "tool.progress"
}

/// One extension's forwarder.
pub(crate) struct Forwarder {
    /// Never drop an event (zot's rule): a full queue disconnects the extension instead.
    lossless: bool,
    /// A lossless queue overflowed: the task disconnects the extension.
    overflowed: AtomicBool,
    queue: Mutex<VecDeque<TraceEvent>>,
    wake: Notify,
    /// Events dropped because the queue was full.
    pub(crate) dropped: AtomicU64,
    /// The task is sending (queue may be empty while a send is in flight).
    busy: AtomicBool,
    idle: Notify,
}

impl Forwarder {
    pub(crate) fn new(lossless: bool) -> Arc<Forwarder> {
        Arc::new(Forwarder {
            lossless,
            overflowed: AtomicBool::new(false),
            queue: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            dropped: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            idle: Notify::new(),
        })
    }

    fn push(&self, event: TraceEvent) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= TRACE_QUEUE {
            if self.lossless {
                // Not a silent drop: the extension is disconnected, and told of.
                q.clear();
                self.overflowed.store(true, Ordering::Release);
                drop(q);
                self.wake.notify_one();
                return;
            }
            q.pop_front();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back(event);
        drop(q);
        self.wake.notify_one();
    }

    /// The task: send queued events in order, one notification each.
    pub(crate) async fn run(self: Arc<Self>, loaded: Arc<Loaded>) {
        loop {
            if self.overflowed.swap(false, Ordering::AcqRel) {
                loaded.ext.report(crate::health::HealthEvent::Warning {
                    extension: Some(loaded.name.clone()),
                    message: format!(
                        "extension `{}` fell {TRACE_QUEUE} events behind; disconnected rather than skip any (it starts again on next use)",
                        loaded.name
                    ),
                });
                loaded.ext.stop().await;
            }
            let next = {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                let next = q.pop_front();
                self.busy.store(next.is_some(), Ordering::Release);
                next
            };
            match next {
                Some(event) => {
                    if let Err(err) = loaded.ext.with_peer(|p, _| p.trace(&event)).await {
                        tracing::debug!(extension = %loaded.name, "trace event not delivered: {err}");
                    }
                }
                None => {
                    self.idle.notify_waiters();
                    self.wake.notified().await;
                }
            }
        }
    }

    fn is_drained(&self) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
            && !self.busy.load(Ordering::Acquire)
    }

    async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            if self.is_drained() {
                return;
            }
            // Woken when the task runs dry; the timeout covers a wake that raced this check.
            let _ = tokio::time::timeout(Duration::from_millis(20), idle).await;
        }
    }
}

impl ExtensionHost {
    /// Forward one lifecycle event to every `trace` extension. Never blocks, never awaits.
    pub fn emit(&self, event: TraceEvent) {
        if is_streaming_delta(&event.event_type) {
            return;
        }
        let forwarders = self.forwarders();
        if forwarders.is_empty() {
            return;
        }
        let ts = if event.ts.is_empty() {
            humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
        } else {
            event.ts
        };
        let event = TraceEvent { ts, ..event };
        for f in forwarders {
            f.push(event.clone());
        }
    }

    /// Events dropped per trace extension because its queue was full.
    pub fn trace_dropped(&self) -> std::collections::BTreeMap<String, u64> {
        self.loaded()
            .iter()
            .filter_map(|l| {
                l.forwarder
                    .as_ref()
                    .map(|f| (l.name.clone(), f.dropped.load(Ordering::Relaxed)))
            })
            .collect()
    }

    /// Deliver what is queued, then ask each trace extension's server for a barrier, all
    /// within `timeout`. Records the drop counters for `yep list`.
    pub async fn flush(&self, timeout: Duration) {
        let work = async {
            let mut tasks = tokio::task::JoinSet::new();
            for l in self.loaded().into_iter().filter(|l| l.forwarder.is_some()) {
                tasks.spawn(async move {
                    if let Some(f) = &l.forwarder {
                        f.drained().await;
                    }
                    // A server that never started has nothing to flush.
                    if let Err(err) = l.ext.with_running_peer(|p, t| p.barrier(t)).await {
                        tracing::debug!(extension = %l.name, "trace barrier failed: {err}");
                    }
                });
            }
            while tasks.join_next().await.is_some() {}
        };
        if tokio::time::timeout(timeout, work).await.is_err() {
            tracing::warn!(
                "trace flush did not finish within {} ms",
                timeout.as_millis()
            );
        }
        for (name, dropped) in self.trace_dropped() {
            crate::store::state::record_trace_dropped(&self.core.home, &name, dropped);
        }
    }

    /// Whether any trace extension listens: events are built only then.
    pub(crate) fn tracing(&self) -> bool {
        !self.snapshot().forwarders.is_empty()
    }

    fn forwarders(&self) -> Vec<Arc<Forwarder>> {
        self.snapshot().forwarders.clone()
    }
}

/// A span of the host's own for one tool call: `yep-<pid>-<n>`.
pub(crate) fn call_span() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("yep-{}-{n}", std::process::id())
}

/// A tool call's lifecycle event (`tool.started`, `tool.completed`) in `span`.
pub(crate) fn tool_event(span: &str, event_type: &str, data: serde_json::Value) -> TraceEvent {
    TraceEvent {
        event_type: event_type.into(),
        id: format!("{span}-{event_type}"),
        context: serde_json::json!({ "span_id": span }),
        data,
        ..TraceEvent::default()
    }
}
