//! What servers push back, under the manifest clamp: the status registry, the sinks an
//! embedder implements, and the question queue.

use crate::capability::{
    Answer, BoxFuture, Events, HostToolCall, HostToolError, LogLevel, PanelUpdate, Question, Status,
};
use crate::health::{Health, HealthEvent};
use serde_json::Value;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The latest status an extension pushed.
pub type StatusEntry = Status;

/// The most tools one `activate_tools` activates (as many as one server may register).
const MAX_ACTIVATED: usize = 256;

/// Questions of one extension waiting behind the open one; one more is answered cancelled
/// at once (so one extension cannot crowd out the others).
pub(crate) const MAX_QUEUED_QUESTIONS: usize = 4;

/// Told whenever an extension's status changes (`None`: cleared, when the extension clears
/// it, is reloaded or is deactivated). Runs on the connection's reader: keep it cheap. A
/// closure `Fn(&str, Option<&Status>)` is one.
pub trait StatusSink: Send + Sync + 'static {
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>);

    /// The active extension panel changed (`None`: closed). The default ignores it.
    fn panel_changed(&self, panel: Option<&super::ActivePanel>) {
        let _ = panel;
    }

    /// An extension submits `text` as the user's next prompt (trimmed, never empty). The
    /// default ignores it.
    fn submit(&self, extension: &str, text: &str) {
        tracing::info!(
            extension,
            "nothing takes submitted prompts; ignoring: {text}"
        );
    }
}

impl<F> StatusSink for F
where
    F: Fn(&str, Option<&StatusEntry>) + Send + Sync + 'static,
{
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>) {
        self(extension, status)
    }
}

/// What the agent decides about the tool calls a server makes on its own (zot's `call_tool`),
/// beyond the hooks every call goes through: its permission policy, and its built-in tools.
pub trait ServerTools: Send + Sync + 'static {
    /// Whether `extension` may run `tool` with `args` now; [`Denied`] refuses it (the server
    /// hears the reason). Asked before the hooks. The default allows.
    fn permit(&self, extension: &str, tool: &str, args: &Value) -> BoxFuture<Result<(), Denied>> {
        let _ = (extension, tool, args);
        Box::pin(async { Ok(()) })
    }

    /// Run the built-in `tool` (one of [`super::HostOptions::builtins`]) with `args`, after the
    /// pre hooks: its result, or why it failed. The default offers none
    /// ([`BuiltinError::NotOffered`]).
    fn run_builtin(&self, tool: &str, args: Value) -> BoxFuture<Result<Value, BuiltinError>> {
        let _ = args;
        let error = BuiltinError::NotOffered {
            tool: tool.to_string(),
        };
        Box::pin(async move { Err(error) })
    }
}

/// The agent's refusal of a server's own tool call ([`ServerTools::permit`]): the server
/// hears `not permitted: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Denied {
    pub reason: String,
}

impl Denied {
    pub fn new(reason: impl Into<String>) -> Denied {
        Denied {
            reason: reason.into(),
        }
    }
}

/// Why one of the agent's built-in tools gave no answer to a server
/// ([`ServerTools::run_builtin`]). Its text is what the server hears, as the tool's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinError {
    /// This agent does not offer `tool` to extensions.
    #[error("built-in tool {tool} is not offered to extensions by this agent")]
    NotOffered { tool: String },
    /// It ran and failed: `message` is its error, as the tool says it.
    #[error("{message}")]
    Failed { message: String },
}

impl BuiltinError {
    /// A failure, in the tool's words.
    pub fn failed(message: impl Into<String>) -> BuiltinError {
        BuiltinError::Failed {
            message: message.into(),
        }
    }
}

/// Answers an extension's questions: show `prompt` (and `placeholder`), mask the input when
/// `secret`, offer `options` as a selector when there are any. Write `ask` as an `async fn`.
/// One question is open at a time; the host queues the others in the order asked (up to
/// `MAX_QUEUED_QUESTIONS` per extension), so `ask` is not called again before its last
/// answer is in, or its future dropped (the asking server went away: take it as dismissed).
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
    questions: Arc<Mutex<Queue>>,
    /// The host a server's own tool calls run through; set once it exists, and weak: the
    /// host owns these events.
    pub(crate) host: std::sync::OnceLock<super::WeakHost>,
    /// Deferred tools a tool result asked to load, as (extension, its name for the tool).
    pub(crate) activated: Mutex<std::collections::BTreeSet<(String, String)>>,
    /// The one active extension panel.
    pub(crate) panel: tokio::sync::watch::Sender<Option<super::ActivePanel>>,
    /// The audit trail the sandbox's denials are recorded in; set at start when it is kept.
    pub(crate) audit: std::sync::OnceLock<crate::audit::AuditLog>,
}

/// The question queue: whether one is open, and who waits, in the order they were asked.
#[derive(Default)]
struct Queue {
    open: bool,
    waiting: VecDeque<(String, oneshot::Sender<Turn>)>,
}

/// The right to have the one open question. Dropping it (answered, or the asking future
/// dropped) hands it to the first waiter still there.
struct Turn(Option<Arc<Mutex<Queue>>>);

impl Drop for Turn {
    fn drop(&mut self) {
        let Some(queue) = self.0.take() else {
            return;
        };
        loop {
            let next = {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                match q.waiting.pop_front() {
                    Some((_, next)) => next,
                    None => {
                        q.open = false;
                        return;
                    }
                }
            };
            // Sent without the lock held: a turn dropped inside `send` hands itself on.
            // The line stays open meanwhile, so a question asked now queues behind.
            match next.send(Turn(Some(Arc::clone(&queue)))) {
                Ok(()) => return,
                // That waiter is gone: take the turn back (empty, so its drop does nothing).
                Err(mut back) => back.0 = None,
            }
        }
    }
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
            questions: Arc::default(),
            host: std::sync::OnceLock::new(),
            panel: tokio::sync::watch::Sender::new(None),
            activated: Mutex::default(),
            audit: std::sync::OnceLock::new(),
        }
    }

    /// Leave a server's start, failure or idle stop where `yep list` reads it.
    fn record_run(&self, event: &HealthEvent) {
        use crate::store::state::{Run, record_run};
        let (extension, run) = match event {
            HealthEvent::Started { extension, pid, .. }
            | HealthEvent::Restarted { extension, pid, .. } => {
                (extension, Run::Started { pid: *pid })
            }
            // Idle while this host lives: it is the one that starts it again.
            HealthEvent::Idle { extension, .. } => (
                extension,
                Run::Idle {
                    host_pid: Some(std::process::id()),
                },
            ),
            HealthEvent::Failed {
                extension, message, ..
            } => (
                extension,
                Run::Failed {
                    message: message.clone(),
                },
            ),
            _ => return,
        };
        if let Some(core) = self.host.get().and_then(|h| h.core.upgrade()) {
            record_run(&core.home, extension, &run);
        }
    }

    /// A turn now, or a place in line (in the order asked), or `None` when `extension`
    /// already has [`MAX_QUEUED_QUESTIONS`] waiting.
    fn queue(&self, extension: &str) -> Option<Result<Turn, oneshot::Receiver<Turn>>> {
        let mut q = self.questions.lock().unwrap_or_else(|p| p.into_inner());
        if !q.open {
            q.open = true;
            return Some(Ok(Turn(Some(Arc::clone(&self.questions)))));
        }
        q.waiting.retain(|(_, tx)| !tx.is_closed());
        let waiting = q.waiting.iter().filter(|(e, _)| e == extension).count();
        if waiting >= MAX_QUEUED_QUESTIONS {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        q.waiting.push_back((extension.to_string(), tx));
        Some(Err(rx))
    }

    /// Change the active panel with `change` (which says whether it did). The embedder hears
    /// of a change (outside the panel's lock); an extension whose panel another one replaced
    /// hears that its panel closed.
    pub(crate) fn update_panel(
        &self,
        change: impl FnOnce(&mut Option<super::ActivePanel>) -> bool,
    ) {
        let before = self.panel.borrow().clone();
        if !self.panel.send_if_modified(change) {
            return;
        }
        let now = self.panel.borrow().clone();
        if let Some(sink) = &self.status_sink {
            sink.panel_changed(now.as_ref());
        }
        let Some(old) = before else { return };
        let replaced = now.is_some_and(|p| p.extension != old.extension);
        if replaced && let Some(host) = self.host.get().and_then(super::WeakHost::upgrade) {
            let closed = crate::capability::PanelInput::Closed { id: old.panel.id };
            tokio::spawn(async move {
                if let Ok(owner) = host.find(&old.extension) {
                    let _ = owner
                        .ext
                        .with_running_peer(|p, _| p.panel_input(&closed))
                        .await;
                }
            });
        }
    }

    /// Close `extension`'s panel, if it has the active one.
    pub(crate) fn close_panel_of(&self, extension: &str) {
        self.update_panel(|p| p.take_if(|p| p.extension == extension).is_some());
    }

    pub(crate) fn clear(&self, extension: &str) {
        // Its panel goes with it.
        self.close_panel_of(extension);
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
        // A server that failed or stopped takes its panel with it: a restarted one knows
        // nothing of it.
        if let HealthEvent::Failed { extension, .. } = &event {
            self.close_panel_of(extension);
        }
        if let (Some(audit), HealthEvent::SandboxDenied { .. }) = (self.audit.get(), &event) {
            audit.sandbox_denied(&event);
        }
        self.record_run(&event);
        self.health.report(event);
    }

    fn panel(&self, extension: &str, update: PanelUpdate) {
        self.update_panel(|active| super::panel::apply(active, extension, update));
    }

    fn tools_changed(&self, _extension: &str) {
        if let Some(host) = self.host.get() {
            host.rebuild();
        }
    }

    fn activate_tools(&self, extension: &str, tools: &[String]) {
        let mut activated = self.activated.lock().unwrap_or_else(|p| p.into_inner());
        for tool in tools.iter().take(MAX_ACTIVATED) {
            activated.insert((extension.to_string(), tool.clone()));
        }
    }

    fn submit(&self, extension: &str, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match &self.status_sink {
            Some(sink) => sink.submit(extension, text),
            None => tracing::info!(
                extension,
                "nothing takes submitted prompts; ignoring: {text}"
            ),
        }
    }

    fn run_tool(
        &self,
        extension: &str,
        call: HostToolCall,
    ) -> BoxFuture<Result<Value, HostToolError>> {
        let Some(host) = self.host.get().and_then(super::WeakHost::upgrade) else {
            return Box::pin(async { Err(HostToolError::Unavailable) });
        };
        tracing::debug!(extension, tool = %call.tool, "a server runs a host tool");
        let extension = extension.to_string();
        Box::pin(async move {
            // The agent's permission first, as for a call it makes itself.
            if let Some(policy) = host.core.opts.server_tools.clone() {
                policy
                    .permit(&extension, &call.tool, &call.args)
                    .await
                    .map_err(|denied| HostToolError::NotPermitted {
                        tool: call.tool.clone(),
                        reason: denied.reason,
                    })?;
            }
            // A tool's error is its own words, as the tool said them.
            host.run_tool(&call.tool, call.args)
                .chain(call.chain)
                .cancel_on(call.cancel)
                .for_server()
                .await
                .into_host_tool_result()
        })
    }

    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer> {
        let Some(sink) = self.ask_sink.clone() else {
            tracing::info!(
                extension,
                "no ask sink; answering a question cancelled: {}",
                question.prompt
            );
            return Box::pin(async { Answer::refused("this host takes no questions") });
        };
        let Some(place) = self.queue(extension) else {
            tracing::info!(
                extension,
                "{MAX_QUEUED_QUESTIONS} of its questions are already waiting; answering this one cancelled: {}",
                question.prompt
            );
            return Box::pin(async {
                Answer::refused(format!(
                    "{MAX_QUEUED_QUESTIONS} of this extension's questions are already waiting"
                ))
            });
        };
        let extension = extension.to_string();
        Box::pin(async move {
            let _turn = match place {
                Ok(turn) => turn,
                Err(waiting) => match waiting.await {
                    Ok(turn) => turn,
                    Err(_) => return Answer::cancelled(),
                },
            };
            sink.ask_dyn(&extension, question).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    fn question(prompt: &str) -> Question {
        Question {
            prompt: prompt.into(),
            ..Question::default()
        }
    }

    /// Answers "answer me" at once, and never anything else.
    struct Silent;
    impl AskSink for Silent {
        async fn ask(&self, _: &str, q: Question) -> Answer {
            if q.prompt == "answer me" {
                return Answer::answered("yes");
            }
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_turn_dropped_before_it_is_used_passes_to_the_next_in_line() {
        let events = HostEvents::new(None, Some(Arc::new(Silent)));
        let open = events.ask("x", question("?"));
        let handed = events.ask("y", question("?"));
        let last = events.ask("z", question("answer me"));
        // The open one goes: its turn is sent to `handed`, which is dropped without ever
        // being polled, so the turn waits in its channel and must pass on from there.
        drop(open);
        drop(handed);
        let answer = timeout(Duration::from_secs(5), last).await;
        assert_eq!(
            answer.ok(),
            Some(Answer::answered("yes")),
            "the turn was lost"
        );
    }

    #[tokio::test]
    async fn questions_past_the_queue_bound_are_answered_cancelled_and_the_bound_frees_up() {
        let events = HostEvents::new(None, Some(Arc::new(Silent)));
        // One open and the extension's line full: placed when asked, before any is polled.
        let held: Vec<_> = (0..=MAX_QUEUED_QUESTIONS)
            .map(|_| events.ask("x", question("?")))
            .collect();
        let over = timeout(Duration::from_secs(5), events.ask("x", question("?")));
        let over = over.await.expect("refused at once");
        assert!(over.cancelled);
        assert!(
            over.reason.unwrap().contains("already waiting"),
            "the extension is told why"
        );
        // Another extension still gets in line.
        let other = events.ask("y", question("?"));
        assert!(timeout(Duration::from_millis(50), other).await.is_err());
        drop(held);
        // Dropped questions leave the line: the next one is asked, and answered.
        let next = timeout(
            Duration::from_secs(5),
            events.ask("x", question("answer me")),
        );
        assert_eq!(next.await.ok(), Some(Answer::answered("yes")));
    }

    /// Records each prompt as it is asked, and answers it with itself.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);
    struct Records(Arc<Recorded>);
    impl AskSink for Records {
        async fn ask(&self, _: &str, question: Question) -> Answer {
            self.0.0.lock().unwrap().push(question.prompt.clone());
            tokio::task::yield_now().await;
            Answer::answered(question.prompt)
        }
    }

    #[tokio::test]
    async fn questions_are_asked_in_the_order_they_came_whoever_polls_first() {
        let recorded = Arc::new(Recorded::default());
        let events = HostEvents::new(None, Some(Arc::new(Records(Arc::clone(&recorded)))));
        let ask = |p: &str| events.ask("x", question(p));
        let (one, two, gone, three) = (ask("one"), ask("two"), ask("gone"), ask("three"));
        drop(gone); // asked, then given up: it leaves the line
        // Polled in reverse: the line, not the poll order, decides.
        let (three, two, one) = tokio::join!(three, two, one);
        assert_eq!(
            [one.answer, two.answer, three.answer],
            ["one", "two", "three"]
        );
        assert_eq!(*recorded.0.lock().unwrap(), ["one", "two", "three"]);
    }
}
