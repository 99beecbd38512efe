//! What servers push back, under the manifest clamp: the status registry and the one-at-a-time
//! question gate.

use crate::capability::{Answer, BoxFuture, Events, LogLevel, Question, Status};
use crate::health::{Health, HealthEvent};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The latest status an extension pushed.
pub type StatusEntry = Status;

/// Told whenever an extension's status changes (`None`: cleared).
pub trait StatusSink: Send + Sync + 'static {
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>);
}

/// Answers an extension's questions: `secret` means mask the input, non-empty `options`
/// means a selector.
pub trait AskSink: Send + Sync + 'static {
    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer>;
}

/// Shared by every extension's connection: the registry, the sinks, the ask gate.
pub(crate) struct HostEvents {
    pub(crate) status: Mutex<BTreeMap<String, StatusEntry>>,
    pub(crate) status_sink: Option<Arc<dyn StatusSink>>,
    pub(crate) ask_sink: Option<Arc<dyn AskSink>>,
    pub(crate) health: Arc<Health>,
    asking: Arc<AtomicBool>,
}

impl HostEvents {
    pub(crate) fn new(
        status_sink: Option<Arc<dyn StatusSink>>,
        ask_sink: Option<Arc<dyn AskSink>>,
    ) -> Self {
        HostEvents {
            status: Mutex::default(),
            status_sink,
            ask_sink,
            health: Arc::default(),
            asking: Arc::default(),
        }
    }

    pub(crate) fn clear(&self, extension: &str) {
        let removed = self
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(extension)
            .is_some();
        if removed && let Some(sink) = &self.status_sink {
            sink.status_changed(extension, None);
        }
    }
}

/// Frees the ask gate when the answer is in (or the future is dropped).
struct AskGuard(Arc<AtomicBool>);

impl Drop for AskGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Events for HostEvents {
    fn status(&self, extension: &str, entry: Option<Status>) {
        {
            let mut registry = self.status.lock().unwrap_or_else(|p| p.into_inner());
            match &entry {
                Some(e) => registry.insert(extension.to_string(), e.clone()),
                None => registry.remove(extension),
            };
        }
        if let Some(sink) = &self.status_sink {
            sink.status_changed(extension, entry.as_ref());
        }
    }

    fn log(&self, extension: &str, _level: LogLevel, message: &str) {
        tracing::info!(extension, "{message}");
    }

    fn health(&self, event: HealthEvent) {
        self.health.report(event);
    }

    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer> {
        let Some(sink) = &self.ask_sink else {
            tracing::info!(
                extension,
                "no ask sink; answering a question cancelled: {}",
                question.prompt
            );
            return Box::pin(async { Answer::cancelled() });
        };
        if self.asking.swap(true, Ordering::AcqRel) {
            tracing::info!(
                extension,
                "another question is open; answering this one cancelled: {}",
                question.prompt
            );
            return Box::pin(async { Answer::cancelled() });
        }
        let guard = AskGuard(Arc::clone(&self.asking));
        let answer = sink.ask(extension, question);
        Box::pin(async move {
            let result = answer.await;
            drop(guard);
            result
        })
    }
}
