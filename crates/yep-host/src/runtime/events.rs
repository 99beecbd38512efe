//! What servers push back, under the manifest clamp: the status registry, the sinks an
//! embedder implements, and the question queue.

use crate::capability::{Answer, BoxFuture, Events, LogLevel, Question, Status};
use crate::health::{Health, HealthEvent};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The latest status an extension pushed.
pub type StatusEntry = Status;

/// Questions waiting behind the open one; one more is answered cancelled at once.
pub const MAX_QUEUED_QUESTIONS: usize = 8;

/// Told whenever an extension's status changes (`None`: cleared, when the extension clears
/// it, is reloaded or is deactivated). Runs on the connection's reader: keep it cheap. A
/// closure `Fn(&str, Option<&Status>)` is one.
pub trait StatusSink: Send + Sync + 'static {
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>);
}

impl<F> StatusSink for F
where
    F: Fn(&str, Option<&StatusEntry>) + Send + Sync + 'static,
{
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>) {
        self(extension, status)
    }
}

/// Answers an extension's questions: show `prompt` (and `placeholder`), mask the input when
/// `secret`, offer `options` as a selector when there are any. Write `ask` as an `async fn`.
/// One question is open at a time; the host queues the others in order (up to
/// [`MAX_QUEUED_QUESTIONS`]), so `ask` is never called again before its last answer is in.
pub trait AskSink: Send + Sync + 'static {
    /// The user's answer, or [`Answer::cancelled`] when they dismiss it (the default).
    fn ask(&self, extension: &str, question: Question) -> impl Future<Output = Answer> + Send {
        let _ = (extension, question);
        async { Answer::cancelled() }
    }
}

/// The form of [`AskSink`] the host holds (`Arc<dyn DynAskSink>`). Every `AskSink` is one:
/// implement `AskSink`, never this.
pub trait DynAskSink: Send + Sync + 'static {
    fn ask_dyn<'a>(
        &'a self,
        extension: &'a str,
        question: Question,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;
}

impl<T: AskSink> DynAskSink for T {
    fn ask_dyn<'a>(
        &'a self,
        extension: &'a str,
        question: Question,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(self.ask(extension, question))
    }
}

/// Shared by every extension's connection: the registry, the sinks, the question queue.
pub(crate) struct HostEvents {
    pub(crate) status: Mutex<BTreeMap<String, StatusEntry>>,
    pub(crate) status_sink: Option<Arc<dyn StatusSink>>,
    pub(crate) ask_sink: Option<Arc<dyn DynAskSink>>,
    pub(crate) health: Arc<Health>,
    /// One permit: the open question. Waiters are served in the order they came.
    open: Arc<Semaphore>,
    /// Questions open or waiting.
    queued: Arc<AtomicUsize>,
}

impl HostEvents {
    pub(crate) fn new(
        status_sink: Option<Arc<dyn StatusSink>>,
        ask_sink: Option<Arc<dyn DynAskSink>>,
    ) -> Self {
        HostEvents {
            status: Mutex::default(),
            status_sink,
            ask_sink,
            health: Arc::default(),
            open: Arc::new(Semaphore::new(1)),
            queued: Arc::default(),
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

/// Counts a question out of the queue when it is answered (or its future is dropped).
struct Queued(Arc<AtomicUsize>);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
        let Some(sink) = self.ask_sink.clone() else {
            tracing::info!(
                extension,
                "no ask sink; answering a question cancelled: {}",
                question.prompt
            );
            return Box::pin(async { Answer::cancelled() });
        };
        if self.queued.fetch_add(1, Ordering::AcqRel) > MAX_QUEUED_QUESTIONS {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            tracing::info!(
                extension,
                "{MAX_QUEUED_QUESTIONS} questions are already waiting; answering this one cancelled: {}",
                question.prompt
            );
            return Box::pin(async { Answer::cancelled() });
        }
        let queued = Queued(Arc::clone(&self.queued));
        let open = Arc::clone(&self.open);
        let extension = extension.to_string();
        Box::pin(async move {
            let _queued = queued;
            // The semaphore is never closed, so the permit always comes.
            let Ok(_open) = open.acquire_owned().await else {
                return Answer::cancelled();
            };
            sink.ask_dyn(&extension, question).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Never answers: every question it gets stays open.
    struct Silent;
    impl AskSink for Silent {
        async fn ask(&self, _: &str, _: Question) -> Answer {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn questions_past_the_queue_bound_are_answered_cancelled_and_the_bound_frees_up() {
        let events = HostEvents::new(None, Some(Arc::new(Silent)));
        let question = || Question {
            prompt: "?".into(),
            ..Question::default()
        };
        // One open and the queue full: counted when asked, before anything is polled.
        let held: Vec<_> = (0..=MAX_QUEUED_QUESTIONS)
            .map(|_| events.ask("x", question()))
            .collect();
        let over = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            events.ask("x", question()),
        );
        assert_eq!(
            over.await.ok(),
            Some(Answer::cancelled()),
            "refused at once"
        );
        drop(held);
        // Dropped questions leave the queue: the next one waits for its answer again.
        let next = events.ask("x", question());
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), next)
                .await
                .is_err()
        );
    }
}
