//! A tool call you can hold: [`ExtensionHost::call`] and [`ExtensionHost::run_tool`] build a
//! [`Call`] with progress, cancellation and a timeout, and it ends in one [`CallOutcome`] that
//! tells every way a call can end apart.

use super::table::Serves;
use super::{BuiltinError, ExtensionHost, HookNote, HostError, PreDecision};
use crate::audit::{self, Carrier};
use crate::capability::{HostToolError, Progress, ToolResult, UpdateSink};
use crate::supervisor::ExtensionError;
use crate::text::escape;
use serde_json::{Value, json};
use std::future::{Future, IntoFuture};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A call's outcome with what its hooks said for the model beside it ([`Call::report`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct Report {
    pub outcome: CallOutcome,
    /// Text for the model, from the pre hooks then the post hooks, in the order they ran.
    pub context: Vec<HookNote>,
    /// What post hooks found wrong with what the tool did: feedback for the model.
    pub feedback: Vec<HookNote>,
}

impl Report {
    fn of(outcome: CallOutcome) -> Report {
        Report {
            outcome,
            context: Vec::new(),
            feedback: Vec::new(),
        }
    }
}

/// Progress updates a [`ProgressStream`] holds before it drops new ones (and counts them).
pub const PROGRESS_BUFFER: usize = 256;

/// How a tool call ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The tool ran and answered this (a YEP server's answer as the text it wrote, parsed
    /// only when asked: [`ToolResult::value`]).
    Ok(ToolResult),
    /// The extension said no: its server answered the call with an error, or the arguments
    /// break the tool's approved schema. `message` is for the model (unescaped).
    ToolError { extension: String, message: String },
    /// A pre hook said no ([`ExtensionHost::run_tool`] only): which extension, and why.
    /// `reason` is for the model, `user_message` for the user.
    Blocked {
        extension: String,
        reason: String,
        user_message: Option<String>,
    },
    /// The caller cancelled it ([`Call::cancel_on`]); the server was told.
    Cancelled,
    /// It ran past its timeout ([`Call::timeout`], or the extension's request timeout); the
    /// server was told to cancel it.
    TimedOut { after: Duration },
    /// The call could not be made or did not finish: no such tool, a server that does not
    /// start or stopped, a broken wire, the host shut down. `log` is the server's stderr log
    /// when there is one.
    Failed {
        error: HostError,
        log: Option<PathBuf>,
    },
}

impl CallOutcome {
    /// The tool's answer, when it gave one.
    pub fn ok(&self) -> Option<&ToolResult> {
        match self {
            CallOutcome::Ok(value) => Some(value),
            _ => None,
        }
    }

    /// What to tell the model: the answer, or why there is none.
    pub fn for_model(&self) -> Value {
        match self {
            CallOutcome::Ok(value) => value.value().clone(),
            CallOutcome::ToolError { message, .. } => json!({ "error": message }),
            CallOutcome::Blocked { reason, .. } => json!({ "error": reason }),
            other => serde_json::json!({ "error": other.to_string() }),
        }
    }

    /// The outcome as a server that asked for the call hears it
    /// ([`Events::run_tool`](crate::capability::Events::run_tool)).
    pub(crate) fn into_host_tool_result(self) -> Result<Value, HostToolError> {
        match self {
            CallOutcome::Ok(value) => Ok(value.into_value()),
            CallOutcome::ToolError { extension, message } => {
                Err(HostToolError::Tool { extension, message })
            }
            CallOutcome::Blocked {
                extension, reason, ..
            } => Err(HostToolError::Blocked { extension, reason }),
            CallOutcome::Cancelled => Err(HostToolError::Cancelled),
            CallOutcome::TimedOut { after } => Err(HostToolError::TimedOut { after }),
            CallOutcome::Failed { error, log } => Err(HostToolError::Failed {
                error: Box::new(error),
                log,
            }),
        }
    }

    /// What the audit trail says of how it ended.
    fn audited(&self) -> audit::Outcome {
        match self {
            CallOutcome::Ok(_) => audit::Outcome::Ok,
            CallOutcome::ToolError { .. } => audit::Outcome::Error,
            CallOutcome::Blocked { .. } => audit::Outcome::Blocked,
            CallOutcome::Cancelled => audit::Outcome::Cancelled,
            CallOutcome::TimedOut { .. } => audit::Outcome::TimedOut,
            CallOutcome::Failed { .. } => audit::Outcome::Failed,
        }
    }

    /// yep's own refusal of a call that carries what looks like a credential.
    fn secret(found: &audit::SecretFound) -> CallOutcome {
        CallOutcome::Blocked {
            extension: String::new(),
            reason: found.to_string(),
            user_message: None,
        }
    }

    fn from_error(error: HostError) -> CallOutcome {
        let HostError::Extension(ext) = &error else {
            return CallOutcome::Failed { error, log: None };
        };
        // The caller's cancel never reaches here (the call is dropped, and `run` says
        // Cancelled): a server that answers "cancelled" unasked said no, like any error.
        match &**ext {
            ExtensionError::Timeout { after, .. } => CallOutcome::TimedOut { after: *after },
            ExtensionError::Remote {
                extension,
                error: remote,
                ..
            } => CallOutcome::ToolError {
                extension: extension.clone(),
                message: remote.message.clone(),
            },
            ExtensionError::InvalidArguments { extension, .. } => CallOutcome::ToolError {
                extension: extension.clone(),
                message: ext.to_string(),
            },
            e => {
                let log = e.log_path().map(PathBuf::from);
                CallOutcome::Failed { error, log }
            }
        }
    }
}

impl std::fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallOutcome::Ok(value) => write!(f, "{value}"),
            // What a server said is escaped: this line may reach a terminal.
            CallOutcome::ToolError { extension, message } => {
                write!(
                    f,
                    "extension `{extension}` answered an error: {}",
                    escape(message)
                )
            }
            // yep's own refusal (`--block-secrets`) says so itself.
            CallOutcome::Blocked {
                extension, reason, ..
            } if extension.is_empty() => f.write_str(&escape(reason)),
            CallOutcome::Blocked {
                extension, reason, ..
            } => write!(f, "blocked by extension `{extension}`: {}", escape(reason)),
            CallOutcome::Cancelled => f.write_str("cancelled"),
            CallOutcome::TimedOut { after } => {
                write!(f, "timed out after {} ms", after.as_millis())
            }
            CallOutcome::Failed { error, log } => {
                f.write_str(&crate::error::failure(error, log.as_deref()))
            }
        }
    }
}

/// Progress of one call, as a channel: receive it on your own task, not the connection's
/// reader. Holds up to [`PROGRESS_BUFFER`] updates; past that new ones are dropped and
/// counted ([`ProgressStream::dropped`]).
pub struct ProgressStream {
    rx: mpsc::Receiver<Progress>,
    dropped: Arc<AtomicU64>,
}

impl ProgressStream {
    /// The next update; `None` once the call has ended and every update was received.
    pub async fn recv(&mut self) -> Option<Progress> {
        self.rx.recv().await
    }

    /// Updates dropped because the stream was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One tool call, built by [`ExtensionHost::call`] or [`ExtensionHost::run_tool`] and run by
/// awaiting it (or by [`Call::report`], which also returns what the hooks said). Owns a handle
/// to the host, so it can be spawned.
#[must_use = "a call does nothing until it is awaited"]
pub struct Call {
    host: ExtensionHost,
    name: String,
    args: Value,
    updates: Option<UpdateSink>,
    cancel: Option<CancellationToken>,
    timeout: Option<Duration>,
    hooks: bool,
    /// The tools whose runs led to this call (a server's own `call_tool`).
    chain: Vec<String>,
    /// A server asked for it: a built-in tool runs through `HostOptions::server_tools`.
    for_server: bool,
    /// The trace span its `tool.started` and `tool.completed` events carry
    /// ([`Call::trace_span`]); one of the host's own when not named.
    span: Option<String>,
}

impl Call {
    /// Each progress update goes to `f`, on the connection's reader: keep it cheap, or use
    /// [`Call::progress_stream`].
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Call {
        let f: UpdateSink = Arc::new(f);
        self.updates = Some(match self.updates.take() {
            None => f,
            Some(before) => Arc::new(move |p: &Progress| {
                before(p);
                f(p);
            }),
        });
        self
    }

    /// Progress as a channel as well: the call, and the stream its updates arrive on.
    pub fn progress_stream(self) -> (Call, ProgressStream) {
        let (tx, rx) = mpsc::channel(PROGRESS_BUFFER);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&dropped);
        let call = self.on_progress(move |p| {
            if tx.try_send(p.clone()).is_err() {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        (call, ProgressStream { rx, dropped })
    }

    /// Cancel the call when `token` fires: the server is told (YEP: `cancel`) and the call
    /// ends [`CallOutcome::Cancelled`] at once.
    pub fn cancel_on(mut self, token: CancellationToken) -> Call {
        self.cancel = Some(token);
        self
    }

    /// End the call [`CallOutcome::TimedOut`] after `after`, telling the server to cancel it.
    /// Covers the tool call itself (and starting its server), not the pre hooks, which have
    /// their own budget.
    pub fn timeout(mut self, after: Duration) -> Call {
        self.timeout = Some(after);
        self
    }

    /// The tools whose runs led to this call, outermost first (a server asked for it).
    pub(crate) fn chain(mut self, chain: Vec<String>) -> Call {
        self.chain = chain;
        self
    }

    /// Name the trace span of its `tool.started` and `tool.completed` events (a bridge names
    /// its calls' spans after itself); by default the host names one per call.
    pub fn trace_span(mut self, span: impl Into<String>) -> Call {
        self.span = Some(span.into());
        self
    }

    /// A server asked for this call: the agent's built-in tools run through its
    /// [`ServerTools`](super::ServerTools).
    pub(crate) fn for_server(mut self) -> Call {
        self.for_server = true;
        self
    }

    /// Run it.
    pub(crate) async fn run(self) -> CallOutcome {
        self.run_reporting(false).await.outcome
    }

    /// Run it, and hear what the hooks said for the model beside their decisions: the pre
    /// hooks' context, and the answers of post hooks that answer (a Claude Code hook's
    /// `additionalContext`, or its `block` after the call, which is feedback), awaited within
    /// their budget. Give the model these with the outcome.
    pub async fn report(self) -> Report {
        self.run_reporting(true).await
    }

    async fn run_reporting(self, answers: bool) -> Report {
        if self.host.core.is_shut() {
            return Report::of(CallOutcome::Failed {
                error: HostError::ShutDown,
                log: None,
            });
        }
        let cancel = self.cancel.clone();
        let cancelled = async {
            match &cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        // The arguments the tool was sent, once the pre hooks let it run (with hooks only),
        // what the pre hooks said beside their decision, and who decided.
        let sent: Mutex<Option<Value>> = Mutex::default();
        let pre_context: Mutex<Vec<HookNote>> = Mutex::default();
        let decided: Mutex<Decided> = Mutex::default();
        let (host, name, hooks) = (self.host.clone(), self.name.clone(), self.hooks);
        // The audit trail keeps the arguments' shape (bounded work), taken before they move.
        let audited = host
            .core
            .audit
            .as_ref()
            .map(|_| (Instant::now(), audit::shape(&self.args)));
        // Every caller's tool use reaches the trace extensions, whoever made the call.
        let span = host
            .tracing()
            .then(|| self.span.clone().unwrap_or_else(super::trace::call_span));
        if let Some(span) = &span {
            host.emit(super::trace::tool_event(
                span,
                "tool.started",
                json!({ "tool": name }),
            ));
        }
        // The caller's cancel holds through the pre hooks too, and a token that already fired
        // wins before anything is sent. Dropping the call cancels it on the wire.
        let outcome = tokio::select! {
            biased;
            () = cancelled => CallOutcome::Cancelled,
            outcome = self.hooks_and_call(&sent, &pre_context, &decided) => outcome,
        };
        let mut decided = decided.into_inner().unwrap_or_else(|p| p.into_inner());
        let outcome = match outcome {
            CallOutcome::Ok(result) if host.core.block_secrets => {
                match audit::find_in_text(&result.json(), Carrier::Result) {
                    Some(found) => {
                        let withheld = CallOutcome::secret(&found);
                        decided.secret = Some(found);
                        withheld
                    }
                    None => CallOutcome::Ok(result),
                }
            }
            outcome => outcome,
        };
        let sent = sent.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut report = Report::of(outcome);
        report.context = pre_context.into_inner().unwrap_or_else(|p| p.into_inner());
        if hooks && let Some(args) = sent {
            let result = match &report.outcome {
                CallOutcome::Ok(value) => Ok(value),
                other => Err(other.to_string()),
            };
            let result = result.as_ref().map_err(String::as_str).copied();
            if answers {
                let post = host.post_tool_use_answered(&name, &args, result).await;
                report.context.extend(post.context);
                report.feedback = post.feedback;
            } else {
                host.post_tool_use(&name, &args, result);
            }
        }
        if let Some(span) = &span {
            let ok = matches!(report.outcome, CallOutcome::Ok(_));
            host.emit(super::trace::tool_event(
                span,
                "tool.completed",
                json!({ "tool": name, "ok": ok }),
            ));
        }
        if let (Some(audit), Some((started, args))) = (&host.core.audit, audited) {
            let entry = audit::ToolEntry::new(
                host.serving(&name),
                name,
                args,
                report.outcome.audited(),
                started.elapsed(),
            );
            audit.tool(decided.into_entry(entry));
        }
        report
    }

    /// The pre hooks (when asked for), then the call within its timeout. With
    /// `--block-secrets`, arguments that carry a credential are refused before any hook or
    /// tool sees them, and again once a hook rewrote them.
    async fn hooks_and_call(
        self,
        sent: &Mutex<Option<Value>>,
        pre_context: &Mutex<Vec<HookNote>>,
        decided: &Mutex<Decided>,
    ) -> CallOutcome {
        let Call {
            host,
            name,
            args,
            updates,
            timeout,
            hooks,
            chain,
            for_server,
            ..
        } = self;
        let decide =
            |f: &dyn Fn(&mut Decided)| f(&mut decided.lock().unwrap_or_else(|p| p.into_inner()));
        let scan = |args: &Value| {
            let found = audit::find_in_value(args, Carrier::Arguments)?;
            let refused = CallOutcome::secret(&found);
            decide(&|d| d.secret = Some(found.clone()));
            Some(refused)
        };
        if host.core.block_secrets
            && let Some(refused) = scan(&args)
        {
            return refused;
        }
        let args = match hooks {
            false => args,
            true => match host.pre_tool_use(&name, args).await {
                PreDecision::Allow {
                    args,
                    context,
                    rewritten_by,
                    ..
                } => {
                    *pre_context.lock().unwrap_or_else(|p| p.into_inner()) = context;
                    if rewritten_by.is_empty() {
                        args
                    } else {
                        decide(&|d| d.rewritten(&rewritten_by));
                        if host.core.block_secrets
                            && let Some(refused) = scan(&args)
                        {
                            return refused;
                        }
                        args
                    }
                }
                PreDecision::Block {
                    extension,
                    reason,
                    user_message,
                } => {
                    decide(&|d| d.blocked_by(&extension));
                    return CallOutcome::Blocked {
                        extension,
                        reason,
                        user_message,
                    };
                }
            },
        };
        if hooks && host.wants_post_tool_use(&name) {
            // For the post hooks (a call no post hook sees needs no copy).
            *sent.lock().unwrap_or_else(|p| p.into_inner()) = Some(args.clone());
        }
        if for_server && host.core.opts.builtins.contains(&name) {
            return host.run_builtin(&name, args, timeout).await;
        }
        let call = host.call_tool_in_chain(&name, args, updates, None, chain);
        let result = match timeout {
            Some(after) => match tokio::time::timeout(after, call).await {
                Ok(result) => result,
                Err(_) => return CallOutcome::TimedOut { after },
            },
            None => call.await,
        };
        match result {
            Ok(value) => CallOutcome::Ok(value),
            Err(error) => host.failed(error),
        }
    }
}

/// How a call that failed with `error` ended, as the audit trail says it.
fn audited_error(error: &HostError) -> audit::Outcome {
    match error {
        HostError::Secret(_) => audit::Outcome::Blocked,
        HostError::Extension(e) if e.is_cancelled() => audit::Outcome::Cancelled,
        HostError::Extension(e) => match **e {
            ExtensionError::Remote { .. } | ExtensionError::InvalidArguments { .. } => {
                audit::Outcome::Error
            }
            ExtensionError::Timeout { .. } => audit::Outcome::TimedOut,
            _ => audit::Outcome::Failed,
        },
        _ => audit::Outcome::Failed,
    }
}

/// Who decided a call, for the audit trail: a hook that blocked or rewrote it, or a credential
/// `--block-secrets` found.
#[derive(Default)]
struct Decided {
    decision: audit::Decision,
    by: Vec<String>,
    secret: Option<audit::SecretFound>,
}

impl Decided {
    fn rewritten(&mut self, by: &[String]) {
        self.decision = audit::Decision::Rewritten;
        self.by = by.to_vec();
    }

    fn blocked_by(&mut self, extension: &str) {
        self.decision = audit::Decision::Blocked;
        self.by = vec![extension.to_string()];
    }

    /// `entry` as this says it was decided.
    fn into_entry(self, entry: audit::ToolEntry) -> audit::ToolEntry {
        let mut entry = match self.secret {
            Some(found) => entry.blocked_for(found),
            None => entry,
        };
        if entry.decision == audit::Decision::Allowed {
            entry.decision = self.decision;
        }
        entry.by = self.by;
        entry
    }
}

impl IntoFuture for Call {
    type Output = CallOutcome;
    type IntoFuture = Pin<Box<dyn Future<Output = CallOutcome> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl ExtensionHost {
    /// A built-in tool a server asked for, run by the agent's [`ServerTools`](super::ServerTools)
    /// (refused without one).
    async fn run_builtin(&self, name: &str, args: Value, timeout: Option<Duration>) -> CallOutcome {
        let builtin = |error: BuiltinError| CallOutcome::ToolError {
            extension: String::new(),
            message: error.to_string(),
        };
        let Some(tools) = self.core.opts.server_tools.clone() else {
            return builtin(BuiltinError::NotOffered {
                tool: name.to_string(),
            });
        };
        let run = tools.run_builtin(name, args);
        let result = match timeout {
            Some(after) => match tokio::time::timeout(after, run).await {
                Ok(result) => result,
                Err(_) => return CallOutcome::TimedOut { after },
            },
            None => run.await,
        };
        match result {
            Ok(value) => CallOutcome::Ok(ToolResult::from_value(value)),
            Err(error) => builtin(error),
        }
    }

    /// [`ExtensionHost::call_tool`]: the call, its arguments and result held to
    /// `--block-secrets`, recorded in the audit trail.
    pub(super) async fn call_tool_audited(
        &self,
        name: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<ToolResult, HostError> {
        let audited = self
            .core
            .audit
            .as_ref()
            .map(|_| (Instant::now(), audit::shape(&args)));
        let result = self.call_tool_scanned(name, args, updates, cancel).await;
        if let (Some(log), Some((started, args))) = (&self.core.audit, audited) {
            let how = match &result {
                Ok(_) => audit::Outcome::Ok,
                Err(error) => audited_error(error),
            };
            let entry =
                audit::ToolEntry::new(self.serving(name), name, args, how, started.elapsed());
            log.tool(match &result {
                Err(HostError::Secret(found)) => entry.blocked_for(found.clone()),
                _ => entry,
            });
        }
        result
    }

    /// The call, refused when its arguments or its result carry a credential (with
    /// `--block-secrets` only).
    async fn call_tool_scanned(
        &self,
        name: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<ToolResult, HostError> {
        let scan = self.core.block_secrets;
        if scan && let Some(found) = audit::find_in_value(&args, Carrier::Arguments) {
            return Err(HostError::Secret(found));
        }
        let result = self
            .call_tool_in_chain(name, args, updates, cancel, Vec::new())
            .await?;
        match scan {
            true => match audit::find_in_text(&result.json(), Carrier::Result) {
                Some(found) => Err(HostError::Secret(found)),
                None => Ok(result),
            },
            false => Ok(result),
        }
    }

    /// The extension (or MCP server) that serves tool `name`; empty when none does.
    fn serving(&self, name: &str) -> String {
        match self.table.borrow().route(name).map(|route| &route.to) {
            Ok(Serves::Extension(loaded)) => loaded.name.clone(),
            Ok(Serves::Mcp(entry)) => entry.source.name.clone(),
            Err(_) => String::new(),
        }
    }

    /// The outcome of a call that failed with `error`. A failure names the server's log
    /// whenever it has something in it.
    fn failed(&self, error: HostError) -> CallOutcome {
        match CallOutcome::from_error(error) {
            CallOutcome::Failed { error, log: None } => {
                let log = match &error {
                    HostError::Extension(e) => self
                        .find(e.extension())
                        .ok()
                        .map(|l| l.ext.log_path())
                        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.len() > 0)),
                    _ => None,
                };
                CallOutcome::Failed { error, log }
            }
            outcome => outcome,
        }
    }

    /// Call a tool by the name `tools()` gives it, without hooks: set progress, cancellation
    /// and a timeout on the [`Call`], then await it.
    ///
    /// ```no_run
    /// # async fn f(host: yep_host::ExtensionHost) {
    /// use std::time::Duration;
    /// let outcome = host
    ///     .call("count", serde_json::json!({"n": 3}))
    ///     .on_progress(|p| println!("{}", p.message))
    ///     .timeout(Duration::from_secs(30))
    ///     .await;
    /// # }
    /// ```
    pub fn call(&self, name: &str, args: Value) -> Call {
        Call {
            host: self.clone(),
            name: name.to_string(),
            args,
            updates: None,
            cancel: None,
            timeout: None,
            hooks: false,
            chain: Vec::new(),
            for_server: false,
            span: None,
        }
    }

    /// The whole of one model tool call: the pre hooks (a block ends it
    /// [`CallOutcome::Blocked`]; a rewrite is what runs), the call, then the post hooks with
    /// its outcome (an error for a call that failed, whatever the reason) once the pre hooks
    /// let it go ahead. Hooks that could not run are on the health stream and in `warnings()`.
    pub fn run_tool(&self, name: &str, args: Value) -> Call {
        Call {
            hooks: true,
            chain: Vec::new(),
            ..self.call(name, args)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_answers_cancelled_unasked_said_no() {
        let said = HostError::from(ExtensionError::Remote {
            extension: "x".into(),
            method: "call".into(),
            error: crate::capability::RemoteError::new(0, "cancelled"),
        });
        match CallOutcome::from_error(said) {
            CallOutcome::ToolError { extension, message } => {
                assert_eq!((extension.as_str(), message.as_str()), ("x", "cancelled"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_a_server_said_is_escaped_for_a_terminal_and_kept_verbatim_for_the_model() {
        let hostile = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}";
        for outcome in [
            CallOutcome::ToolError {
                extension: "x".into(),
                message: hostile.into(),
            },
            CallOutcome::Blocked {
                extension: "x".into(),
                reason: hostile.into(),
                user_message: None,
            },
        ] {
            let shown = outcome.to_string();
            assert!(
                !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
                "{shown:?}"
            );
            assert_eq!(outcome.for_model()["error"], hostile);
        }
        let decision = PreDecision::Block {
            extension: "x".into(),
            reason: hostile.into(),
            user_message: None,
        };
        assert!(!decision.to_string().contains('\u{1b}'));
    }
}
