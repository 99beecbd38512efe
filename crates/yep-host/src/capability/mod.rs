//! The host's one capability model. Every wire (YEP today; zot and MCP beside it) is adapted to
//! these types by its dialect, and the runtime speaks nothing else: what a server offers, a
//! tool call with its updates and cancel, a hook firing and its outcome, a command's result,
//! a status, a question and its answer, a trace event.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(crate) use crate::manifest::Grants;
pub use crate::manifest::HookEvent;

tokio::task_local! {
    /// The session of the agent whose event the runtime is running, when that agent is not
    /// the embedder (an agent's own hook, through `yep hook`). A wire that names a session to
    /// its servers (Claude Code's hooks' `session_id`) names this one, so a plugin's
    /// per-session state is per agent session, as in that agent.
    pub(crate) static AGENT_SESSION: String;
}

/// The agent session of the event being run ([`AGENT_SESSION`]), if any.
pub(crate) fn agent_session() -> Option<String> {
    AGENT_SESSION.try_with(Clone::clone).ok()
}

mod result;
pub use result::ToolResult;

/// A boxed future, for answers that come later (a question, a call on a wire).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Receives one call's streamed progress. Runs on the connection's reader: keep it cheap (or
/// take a channel: [`Call::progress_stream`](crate::Call::progress_stream)).
pub type UpdateSink = Arc<dyn Fn(&Progress) + Send + Sync>;

/// One progress update of a running tool call, as far as its wire says: YEP's `tool/update`
/// carries a line of output (`message`); other wires also say how far along the call is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Progress {
    /// A line of output or a status message (may be empty).
    pub message: String,
    /// How far along the call is, in units of `total` when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
}

impl Progress {
    /// A message with no figures.
    pub(crate) fn message(message: impl Into<String>) -> Progress {
        Progress {
            message: message.into(),
            ..Progress::default()
        }
    }
}

/// What a server offers once it has started. The host clamps it to what the manifest
/// approved: an offer can narrow the approval, never widen it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offer {
    /// What the server calls itself (the manifest's name wins).
    pub name: String,
    /// The wire and version it speaks, as shown to people (`YEP 1.0`).
    pub wire: String,
    /// The tools it serves this run.
    pub tools: Vec<OfferedTool>,
    /// Its static system-prompt text, if any.
    pub prompt: Option<String>,
    /// It computes prompt text per turn.
    pub dynamic_prompt: bool,
    /// Slash commands it serves (a wire that does not say leaves this empty).
    pub commands: Vec<OfferedCommand>,
    /// Hook subscriptions it asks for (likewise).
    pub hooks: Vec<HookSubscription>,
    /// What it may push back at the user, as far as the wire says.
    pub grants: Grants,
}

impl Offer {
    /// Whether the server serves `tool` this run.
    pub(crate) fn serves(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.name == tool)
    }
}

/// A tool as a server offers it. A wire that names tools only leaves the rest to the manifest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferedTool {
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<Value>,
    /// It asks to be found through search rather than loaded up front (zot's `deferred`
    /// exposures).
    pub deferred: bool,
    /// The schema of its structured result, when it declares one.
    pub output_schema: Option<Value>,
    /// Hints about what it does (MCP's `annotations`: `readOnlyHint`, `destructiveHint`, …).
    pub annotations: Option<Value>,
}

impl OfferedTool {
    pub fn named(name: impl Into<String>) -> OfferedTool {
        OfferedTool {
            name: name.into(),
            ..OfferedTool::default()
        }
    }
}

/// A slash command as a server offers it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferedCommand {
    pub name: String,
    pub description: String,
}

/// A hook subscription as a server asks for it: `*` is the only wildcard in the glob.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSubscription {
    pub event: HookEvent,
    pub tool_glob: String,
}

/// A hook firing: `pre_tool_use` before a tool runs, `post_tool_use` after.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFiring {
    pub event: HookEvent,
    pub tool: String,
    pub args: Value,
    /// The tool's result, or `{"error": message}` (post hooks only).
    pub result: Option<Value>,
}

/// What a hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// Go ahead, as asked.
    Allow,
    /// Go ahead with these arguments instead.
    Rewrite(Value),
    /// Do not run the tool. `reason` goes to the model; `user_message` to the user.
    Block {
        reason: String,
        user_message: Option<String>,
    },
    /// Ask the user first (a Claude Code hook's `permissionDecision: "ask"`): the host puts
    /// `reason` to them with `allow` and `deny`, and only `allow` lets the call go on.
    Ask { reason: String },
}

/// A hook's whole answer: its decision, and text for the model beside it (a Claude Code
/// hook's `additionalContext`). On a post hook, [`HookOutcome::Block`] is feedback for the
/// model on what the tool did (the call already ran).
#[derive(Debug, Clone, PartialEq)]
pub struct HookAnswer {
    pub outcome: HookOutcome,
    pub context: Option<String>,
}

impl From<HookOutcome> for HookAnswer {
    fn from(outcome: HookOutcome) -> HookAnswer {
        HookAnswer {
            outcome,
            context: None,
        }
    }
}

/// One tool call: its arguments, where its streamed output goes and how it is cancelled.
#[derive(Clone, Default)]
pub struct ToolCall {
    pub tool: String,
    pub args: Value,
    pub updates: Option<UpdateSink>,
    /// Firing it cancels the call on the wire; the call resolves as cancelled.
    pub cancel: Option<CancellationToken>,
    /// The tools in this call's chain by the host's names, outermost first, ending with this
    /// one; a call a server's own tool asked for ([`Events::run_tool`]) continues its chain.
    /// Empty for an agent's call of a tool whose host name is its own (a one-tool chain).
    pub chain: Vec<String>,
}

/// A run of one of the host's tools that a server asks for (zot's `call_tool`). It goes
/// through the same hooks as any call.
#[derive(Debug, Clone)]
pub struct HostToolCall {
    pub tool: String,
    pub args: Value,
    /// The tools that led here, outermost first, ending with the asking server's own tool;
    /// empty when it asks outside any tool.
    pub chain: Vec<String>,
    /// Fires when the server cancels, the call it was made from ends, or its deadline passes.
    pub cancel: CancellationToken,
}

/// Why a host tool a server asked for ([`HostToolCall`], through [`Events::run_tool`]) gave no
/// answer. Each variant's text is what the server hears; a tool's own error is its words as
/// it said them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostToolError {
    /// Nothing here runs host tools: an [`Events`] without a tool table, or a host that is
    /// gone.
    #[error("host tool calls are unavailable")]
    Unavailable,
    /// The extension was not approved to run host tools.
    #[error(
        "call_tool was not approved for extension {extension}: it did not ask for it when installed (`yep trust {extension}` asks again)"
    )]
    NotApproved { extension: String },
    /// The agent's policy ([`crate::runtime::ServerTools::permit`]) refused it.
    #[error("not permitted: {reason}")]
    NotPermitted { tool: String, reason: String },
    /// The tool ran and answered an error: `message` is its own words (unescaped, for the
    /// server and its model).
    #[error("{message}")]
    Tool { extension: String, message: String },
    /// A pre hook blocked it.
    #[error("blocked by extension `{extension}`: {}", crate::text::escape(reason))]
    Blocked { extension: String, reason: String },
    /// It was cancelled (the server cancelled, or the call it was made from ended).
    #[error("cancelled")]
    Cancelled,
    /// It ran past its timeout.
    #[error("timed out after {} ms", after.as_millis())]
    TimedOut { after: std::time::Duration },
    /// It could not be made or did not finish: `error` is the host's (a
    /// [`crate::HostError`]), `log` the server's stderr log when it has one.
    #[error("{}", crate::error::failure(&**error, log.as_deref()))]
    Failed {
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
        log: Option<std::path::PathBuf>,
    },
}

/// A panel a server shows: a title, lines and a footer (zot's panels). One is active at a
/// time; a line whose trimmed text starts with `▸ `, `● ` or U+200B is a selected row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Panel {
    pub id: String,
    pub title: String,
    pub lines: Vec<String>,
    pub footer: String,
}

/// The most lines a panel keeps; a render with more shows the first ones.
pub(crate) const MAX_PANEL_LINES: usize = 1000;

impl Panel {
    /// The indexes of its selected rows.
    pub(crate) fn selected(&self) -> Vec<usize> {
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                let l = l.trim_start();
                l.starts_with("▸ ") || l.starts_with("● ") || l.starts_with('\u{200B}')
            })
            .map(|(i, _)| i)
            .collect()
    }
}

/// What a server does with its panel.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelUpdate {
    /// Open it (replacing whatever panel was active).
    Open(Panel),
    /// New content for panel `id`, if it is the active one (an empty title keeps the old).
    Render(Panel),
    /// Close panel `id`, if it is the active one.
    Close { id: String },
}

/// What the user did with a server's panel.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelInput {
    /// A key: `up down left right enter tab backspace delete home end pageup pagedown`,
    /// or `rune` with the character in `text`.
    Key {
        id: String,
        key: String,
        text: Option<String>,
    },
    /// The user closed it (Esc, Ctrl+C).
    Closed { id: String },
}

/// A point in the agent's turn, beyond a tool call, that a server may intercept (zot's
/// intercepts).
#[derive(Debug, Clone, PartialEq)]
pub enum Intercept {
    /// A turn is about to start (`step` counts the model calls of this prompt).
    TurnStart { step: u64 },
    /// The model said `text`; it is about to be shown.
    AssistantMessage { text: String },
    /// The system prompt is assembled; a server may replace it whole.
    SystemPrompt {
        prompt: String,
        provider: String,
        model: String,
    },
    /// The user submitted `prompt`; it is about to go to the model (Claude Code's
    /// UserPromptSubmit).
    PromptSubmit { prompt: String },
    /// The agent is about to stop answering (`active`: a stop hook already kept it going
    /// once; Claude Code's Stop).
    Stop { active: bool },
}

impl Intercept {
    /// The intercept's name on the zot wire (and in a zot pin).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Intercept::TurnStart { .. } => "turn_start",
            Intercept::AssistantMessage { .. } => "assistant_message",
            Intercept::SystemPrompt { .. } => "before_agent_start",
            Intercept::PromptSubmit { .. } => "user_prompt_submit",
            Intercept::Stop { .. } => "stop",
        }
    }
}

/// What a server decided at an [`Intercept`].
#[derive(Debug, Clone, PartialEq)]
pub enum InterceptOutcome {
    /// Go ahead unchanged.
    Continue,
    /// Stop it: the turn does not start, or the message is hidden.
    Block { reason: String },
    /// Show this text instead (an assistant message).
    ReplaceText(String),
    /// Use this system prompt instead (`""` removes it).
    SystemPrompt(String),
    /// Go ahead, and give the model this text beside it (a submitted prompt).
    Context(String),
}

/// What a slash command answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandResult {
    pub success: bool,
    pub message: String,
}

/// What a server said of new config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigOutcome {
    /// Applied in place: the process stays.
    Applied,
    /// The server needs a restart to apply it.
    RestartRequired,
}

/// How urgent a status is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusLevel {
    #[default]
    Ok,
    Warn,
    Error,
}

/// A status-bar entry an extension pushed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub text: String,
    pub level: StatusLevel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A question for the user: `secret` means mask the input, non-empty `options` a selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Question {
    pub prompt: String,
    pub placeholder: Option<String>,
    pub secret: bool,
    pub options: Vec<String>,
}

/// The user's answer; `cancelled` when they dismissed the question.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub answer: String,
    pub cancelled: bool,
    /// Why the question was cancelled without being asked, told to the extension.
    pub reason: Option<String>,
}

impl Answer {
    pub fn answered(answer: impl Into<String>) -> Answer {
        Answer {
            answer: answer.into(),
            cancelled: false,
            reason: None,
        }
    }

    /// Cancelled without asking anyone, and why (the extension is told).
    pub fn refused(reason: impl Into<String>) -> Answer {
        Answer {
            reason: Some(reason.into()),
            ..Answer::cancelled()
        }
    }

    pub fn cancelled() -> Answer {
        Answer {
            answer: String::new(),
            cancelled: true,
            reason: None,
        }
    }
}

/// How loud a server's log line is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
}

/// One agentic lifecycle event, as forwarded to `trace` extensions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceEvent {
    /// `turn.started`, `reason.completed`, `act.started`, `tool.completed`, `llm.generation`, …
    pub event_type: String,
    /// Stable event id.
    pub id: String,
    /// RFC 3339; filled with the current time when empty.
    pub ts: String,
    /// Correlation ids (`turn_id`, `trace_id`, `span_id`, `parent_span_id`, …), verbatim.
    pub context: Value,
    /// The event's payload, verbatim.
    pub data: Value,
    pub metadata: Value,
}

/// An error a server answered with, whatever its wire.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    /// The wire's error code (JSON-RPC's numbering; 0 when unclassified).
    pub code: i64,
    pub message: String,
    /// The server says trying again may succeed.
    pub retryable: bool,
    pub data: Value,
}

impl RemoteError {
    /// JSON-RPC's "method not found": the server does not know what it was asked.
    pub const METHOD_NOT_FOUND: i64 = -32601;

    pub fn new(code: i64, message: impl Into<String>) -> RemoteError {
        RemoteError {
            code,
            message: message.into(),
            retryable: false,
            data: Value::Null,
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.message == "cancelled"
    }

    pub fn is_method_not_found(&self) -> bool {
        self.code == Self::METHOD_NOT_FOUND
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What servers push to the host, in capability terms. Every method has a default, so
/// implement what you show.
pub trait Events: Send + Sync + 'static {
    /// A status-bar entry (`None` clears it).
    fn status(&self, extension: &str, status: Option<Status>) {
        match status {
            Some(s) => tracing::info!(extension, level = ?s.level, "status: {}", s.text),
            None => tracing::info!(extension, "status cleared"),
        }
    }

    /// A log line from the server.
    fn log(&self, extension: &str, level: LogLevel, message: &str) {
        match level {
            LogLevel::Error => tracing::error!(extension, "{message}"),
            LogLevel::Warn => tracing::warn!(extension, "{message}"),
            LogLevel::Debug => tracing::debug!(extension, "{message}"),
            LogLevel::Info => tracing::info!(extension, "{message}"),
        }
    }

    /// A server started, failed or restarted (the supervisor tells this; the host adds what it
    /// sees itself). A failure is also the error of the call that met it: the default only
    /// logs it at debug level.
    fn health(&self, event: crate::health::HealthEvent) {
        tracing::debug!("{event}");
    }

    /// A server opened, rendered or closed its panel. Without a panel surface, ignored (the
    /// default).
    fn panel(&self, extension: &str, update: PanelUpdate) {
        tracing::debug!(extension, "no panel surface; ignoring {update:?}");
    }

    /// A server asks to submit `text` as the user's next prompt. Without an embedder to take
    /// it, ignored (the default).
    fn submit(&self, extension: &str, text: &str) {
        tracing::info!(
            extension,
            "nothing takes submitted prompts; ignoring: {text}"
        );
    }

    /// A tool result asks for deferred tools of `extension` to be loaded from now on (zot's
    /// `activate_tools`). Ignored without a tool table (the default).
    fn activate_tools(&self, extension: &str, tools: &[String]) {
        let _ = (extension, tools);
    }

    /// Run one of the host's tools for `extension` ([`HostToolCall`]): its result, or why it
    /// did not run or failed. Without a host to run it, refused (the default:
    /// [`HostToolError::Unavailable`]).
    fn run_tool(
        &self,
        extension: &str,
        call: HostToolCall,
    ) -> BoxFuture<Result<Value, HostToolError>> {
        let _ = (extension, call);
        Box::pin(async { Err(HostToolError::Unavailable) })
    }

    /// A server's tool list changed while it runs (MCP's `notifications/tools/list_changed`):
    /// [`Peer::listed`](crate::dialect::Peer::listed) has the new one. Ignored without a tool
    /// table (the default).
    fn tools_changed(&self, extension: &str) {
        let _ = extension;
    }

    /// A question for the user. Without a prompt surface, answer cancelled (the default).
    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer> {
        tracing::info!(
            extension,
            "no prompt surface; refusing a question: {}",
            question.prompt
        );
        Box::pin(async { Answer::cancelled() })
    }
}

/// Events that go to the log only, and questions that are refused.
pub struct NoEvents;
impl Events for NoEvents {}

/// [`Events`] held to what a manifest grants: a status push from a server without `status`
/// is only logged, a question from one without `ui_ask` is answered cancelled. Every dialect's
/// events pass through this, so no wire can widen the grants.
pub(crate) struct Granted {
    pub(crate) grants: Grants,
    pub(crate) inner: Arc<dyn Events>,
}

impl Events for Granted {
    fn status(&self, extension: &str, status: Option<Status>) {
        if self.grants.status {
            self.inner.status(extension, status);
        } else {
            tracing::info!(
                extension,
                "ignoring a status push (the manifest does not declare `status`): {}",
                status.map(|s| s.text).unwrap_or_default()
            );
        }
    }

    fn log(&self, extension: &str, level: LogLevel, message: &str) {
        self.inner.log(extension, level, message);
    }

    fn health(&self, event: crate::health::HealthEvent) {
        self.inner.health(event);
    }

    fn panel(&self, extension: &str, update: PanelUpdate) {
        self.inner.panel(extension, update);
    }

    fn activate_tools(&self, extension: &str, tools: &[String]) {
        self.inner.activate_tools(extension, tools);
    }

    fn submit(&self, extension: &str, text: &str) {
        self.inner.submit(extension, text);
    }

    fn tools_changed(&self, extension: &str) {
        self.inner.tools_changed(extension);
    }

    fn run_tool(
        &self,
        extension: &str,
        call: HostToolCall,
    ) -> BoxFuture<Result<Value, HostToolError>> {
        if self.grants.call_tools {
            return self.inner.run_tool(extension, call);
        }
        let why = HostToolError::NotApproved {
            extension: extension.to_string(),
        };
        tracing::warn!(extension, "refusing to run `{}`: {why}", call.tool);
        Box::pin(async move { Err(why) })
    }

    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer> {
        if self.grants.ui_ask {
            return self.inner.ask(extension, question);
        }
        tracing::warn!(
            extension,
            "refusing a question (the manifest does not declare `ui_ask`): {}",
            question.prompt
        );
        Box::pin(async { Answer::cancelled() })
    }
}
