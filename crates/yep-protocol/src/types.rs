//! Payload types of every YEP 1.0 method, in both directions.
//!
//! Doc comments here become the descriptions in `schema/yep/v1/schema.json`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

macro_rules! wire {
    ($(#[$meta:meta])* pub struct $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        pub struct $name { $($body)* }
    };
}

// ---------------------------------------------------------------------------
// initialize

wire! {
    /// Host → server `initialize` params. Bidirectional so the server SDK can
    /// parse what the host serializes.
    pub struct InitializeParams {
        #[serde(default)]
        pub protocol_version: String,
        #[serde(default)]
        pub session_id: String,
        #[serde(default)]
        pub workspace_root: String,
        #[serde(default)]
        pub config: Value,
        /// Host feature tokens the server may rely on (`streaming`, `cancel`, …).
        #[serde(default)]
        pub capabilities: Vec<String>,
    }
}

wire! {
    /// Server → host `initialize` result. Lenient: unknown fields ignored,
    /// missing fields defaulted, per the forward-compat rules.
    pub struct InitializeResult {
        #[serde(default)]
        pub protocol_version: String,
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub capabilities: Vec<String>,
        #[serde(default)]
        pub capability_params: CapabilityParams,
    }
}

wire! {
    pub struct CapabilityParams {
        /// The server's static system-prompt text: left out (or `null`) when it has none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub prompt: Option<PromptParams>,
        /// Tool names the server actually serves this run. The definitions
        /// (description/schema/policy) live in the package manifest; the
        /// handshake may only narrow that set (see D4 manifest clamp).
        #[serde(default)]
        pub tools: Vec<ServedTool>,
    }
}

wire! {
    pub struct PromptParams {
        /// Static system-prompt contribution.
        #[serde(default, rename = "static")]
        pub static_text: String,
    }
}

wire! {
    /// A tool the server serves. Beyond `name` (all yolop reads), a server may say what its
    /// code accepts: `yep manifest sync` copies these into `plugin.json` and `yep doctor`
    /// fails when they differ from it. They never widen the manifest: a session uses the
    /// manifest's definitions.
    pub struct ServedTool {
        pub name: String,
        /// What the tool does, from its handler (a docstring, a registration).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub description: Option<String>,
        /// The JSON Schema of its arguments, derived from the handler's types.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub schema: Option<Value>,
        /// The JSON Schema of its result, when the handler declares one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub output_schema: Option<Value>,
    }
}

impl ServedTool {
    /// A tool known by name only (a raw handler).
    pub fn named(name: impl Into<String>) -> Self {
        ServedTool {
            name: name.into(),
            ..ServedTool::default()
        }
    }
}

// ---------------------------------------------------------------------------
// tool/call, tool/update, cancel

wire! {
    pub struct ToolCallParams {
        #[serde(default)]
        pub tool_call_id: String,
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub args: Value,
    }
}

wire! {
    /// Payload of a `tool/update` notification, correlated to its in-flight
    /// `tool/call` by `request_id` (a notification cannot carry the envelope
    /// `id` — that field would classify the line as a response).
    pub struct ToolUpdateParams {
        #[serde(default)]
        pub request_id: u64,
        #[serde(default)]
        pub output: String,
    }
}

wire! {
    /// Host → server `cancel` params: abort the in-flight request with this envelope id.
    /// Best-effort; the cancelled request resolves with error `cancelled`.
    pub struct CancelParams {
        #[serde(default)]
        pub id: u64,
    }
}

wire! {
    /// Server → host `cancel` result: whether a request with that id was in flight.
    /// `false` is benign (it had already finished).
    pub struct CancelResult {
        #[serde(default)]
        pub cancelled: bool,
    }
}

// ---------------------------------------------------------------------------
// hook/fire

wire! {
    /// Host → server `hook/fire` params: a subscribed lifecycle event fired for
    /// one tool call (any tool, not just the extension's own). Owned + bidirectional
    /// so the server SDK parses what the host serializes.
    pub struct HookFireParams {
        /// `pre_tool_use` or `post_tool_use`.
        #[serde(default)]
        pub event: String,
        #[serde(default)]
        pub tool_name: String,
        #[serde(default)]
        pub args: Value,
        /// The tool's result (`post_tool_use` only): its value, or `{"error": message}`.
        /// Omitted for `pre_tool_use`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub result: Option<Value>,
    }
}

wire! {
    /// Server → host `hook/fire` result. Lenient/defaulted: a bare `{}` means
    /// "allow, unchanged".
    pub struct HookDecision {
        /// `true` blocks the tool call (pre_tool_use only).
        #[serde(default)]
        pub block: bool,
        /// Message shown to the model/audit log when blocking.
        #[serde(default)]
        pub reason: String,
        /// Optional user-facing message when blocking.
        #[serde(default)]
        pub user_message: Option<String>,
        /// Replacement arguments for the tool call (pre_tool_use only): the spec's "mutate".
        /// Omitted means the arguments are unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub modified_args: Option<Value>,
    }
}

impl HookDecision {
    /// Allow the tool call unchanged.
    pub fn allow() -> Self {
        Self::default()
    }

    /// Block the tool call with a reason for the model.
    pub fn block(reason: impl Into<String>) -> Self {
        HookDecision {
            block: true,
            reason: reason.into(),
            ..Self::default()
        }
    }

    /// Allow the tool call with rewritten arguments.
    pub fn modify(args: Value) -> Self {
        HookDecision {
            modified_args: Some(args),
            ..Self::default()
        }
    }
}

// ---------------------------------------------------------------------------
// prompt/contribution

wire! {
    /// Server → host `prompt/contribution` result: a dynamic system-prompt
    /// contribution recomputed per turn (only when the manifest declares
    /// `dynamic_prompt`).
    pub struct PromptContribution {
        #[serde(default)]
        pub text: String,
    }
}

// ---------------------------------------------------------------------------
// ui/ask

wire! {
    /// Server → host `ui/ask` params: ask the user a question and wait for a typed
    /// answer. The host prompts interactively (TUI); in headless/ACP hosts with no
    /// prompt surface the request is refused.
    pub struct UiAskParams {
        /// The question shown to the user.
        #[serde(default)]
        pub prompt: String,
        /// Optional placeholder / hint for the input field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub placeholder: Option<String>,
        /// When true, the host masks the typed input and never echoes the answer
        /// (for credentials). The value still returns in `UiAskResult`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub secret: bool,
        /// When non-empty, the host presents a selector over these options instead
        /// of a free-text field; the answer is the chosen option. Extensible: future
        /// input kinds add fields here without breaking older peers (unknown fields
        /// are ignored, missing ones default).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub options: Vec<String>,
    }
}

wire! {
    /// Host → server `ui/ask` result: the user's answer (empty + `cancelled` when
    /// they dismiss the prompt).
    pub struct UiAskResult {
        #[serde(default)]
        pub answer: String,
        #[serde(default)]
        pub cancelled: bool,
        /// Why the host cancelled the question without asking anyone (no UI takes
        /// questions, or a secret it will not ask through a relay). Absent when the user
        /// dismissed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
    }
}

impl UiAskResult {
    pub fn answered(answer: impl Into<String>) -> Self {
        UiAskResult {
            answer: answer.into(),
            cancelled: false,
            reason: None,
        }
    }

    pub fn cancelled() -> Self {
        UiAskResult {
            answer: String::new(),
            cancelled: true,
            reason: None,
        }
    }
}

// ---------------------------------------------------------------------------
// command/execute

wire! {
    /// Host → server `command/execute` params: run a manifest-declared slash
    /// command. `name` is the command's own name (the host strips any `<ext>:`
    /// namespace prefix before sending); `arguments` is the raw text after the
    /// command token.
    pub struct CommandExecuteParams {
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub arguments: String,
    }
}

/// Server → host `command/execute` result: a message the host shows to the
/// user. Lenient/defaulted — a bare `{}` means "succeeded, no message".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandExecuteResult {
    #[serde(default = "default_true")]
    pub success: bool,
    #[serde(default)]
    pub message: String,
}

fn default_true() -> bool {
    true
}

impl Default for CommandExecuteResult {
    fn default() -> Self {
        CommandExecuteResult {
            success: true,
            message: String::new(),
        }
    }
}

impl CommandExecuteResult {
    pub fn ok(message: impl Into<String>) -> Self {
        CommandExecuteResult {
            success: true,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        CommandExecuteResult {
            success: false,
            message: message.into(),
        }
    }
}

// ---------------------------------------------------------------------------
// config/changed, workspace/changed

wire! {
    /// Host → server `config/changed` params: the new validated config (secrets stripped,
    /// exactly as `initialize.config` would carry it).
    pub struct ConfigChangedParams {
        #[serde(default)]
        pub config: Value,
    }
}

/// How a server takes a config change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ConfigStatus {
    /// Applied in place; keep the process.
    #[default]
    Ok,
    /// The host must respawn the server with the new config.
    RestartRequired,
}

wire! {
    /// Server → host `config/changed` result.
    pub struct ConfigChangedResult {
        #[serde(default)]
        pub status: ConfigStatus,
    }
}

impl ConfigChangedResult {
    /// Read a `config/changed` result leniently: `{"status": …}` or a bare `"ok"` /
    /// `"restart-required"` string. Anything else asks for a restart, the safe reading.
    pub fn from_wire(value: &Value) -> Self {
        let status = match value {
            Value::String(s) => s.as_str(),
            Value::Object(map) => map.get("status").and_then(Value::as_str).unwrap_or("ok"),
            Value::Null => "ok",
            _ => "restart-required",
        };
        let status = match status {
            "ok" => ConfigStatus::Ok,
            _ => ConfigStatus::RestartRequired,
        };
        ConfigChangedResult { status }
    }
}

wire! {
    /// Host → server `workspace/changed` notification: the active worktree/root was repointed.
    pub struct WorkspaceChangedParams {
        #[serde(default)]
        pub workspace_root: String,
    }
}

// ---------------------------------------------------------------------------
// trace/event

wire! {
    /// Host → server `trace/event` notification: one agentic-lifecycle event
    /// (turn/reason/act/tool/llm), forwarded observe-only to an extension that
    /// declares the `trace` facet so it can export the run to a tracing backend.
    /// Fire-and-forget: the server never replies, so a slow or crashed exporter
    /// can never stall the agent loop. `context`, `data` and `metadata` are
    /// carried verbatim.
    pub struct TraceEventParams {
        /// Event type, e.g. `turn.started`, `tool.completed`, `llm.generation`.
        #[serde(default)]
        pub event_type: String,
        /// Stable event id from the host's session event log.
        #[serde(default)]
        pub id: String,
        /// RFC 3339 timestamp of the event.
        #[serde(default)]
        pub ts: String,
        /// Session the event belongs to.
        #[serde(default)]
        pub session_id: String,
        /// Correlation ids (turn/exec/trace/span/parent span …) carried verbatim.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        pub context: Value,
        /// Event-type-specific payload, carried verbatim.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        pub data: Value,
        /// Host event metadata, including continuation decisions and budget counters.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        pub metadata: Value,
    }
}

impl TraceEventParams {
    fn context_str(&self, key: &str) -> Option<&str> {
        self.context
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    pub fn trace_id(&self) -> Option<&str> {
        self.context_str("trace_id")
    }

    pub fn span_id(&self) -> Option<&str> {
        self.context_str("span_id")
    }

    pub fn parent_span_id(&self) -> Option<&str> {
        self.context_str("parent_span_id")
    }

    pub fn turn_id(&self) -> Option<&str> {
        self.context_str("turn_id")
    }

    /// The event family: `reason` for `reason.thinking.started`.
    pub fn family(&self) -> &str {
        self.event_type
            .split_once('.')
            .map_or(&self.event_type, |(f, _)| f)
    }

    /// The phase after the family: `thinking.started` for `reason.thinking.started`.
    pub fn phase(&self) -> &str {
        self.event_type.split_once('.').map_or("", |(_, p)| p)
    }
}

// ---------------------------------------------------------------------------
// status/changed, log

/// Severity of a `status/changed` update. Purely presentational; the host may
/// tint the field. Open/defaulted so an unknown level parses as `ok`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum StatusLevel {
    #[default]
    Ok,
    Warn,
    Error,
}

impl<'de> Deserialize<'de> for StatusLevel {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        // Open vocabulary: an unknown or non-string level reads as `ok`.
        let value = Value::deserialize(de)?;
        Ok(match value.as_str() {
            Some("warn") => StatusLevel::Warn,
            Some("error") => StatusLevel::Error,
            _ => StatusLevel::Ok,
        })
    }
}

wire! {
    /// Server → host `status/changed` params: a short capability status the host
    /// surfaces in its status bar (and, longer-form, in `yep list`). Sent at will as a
    /// notification. An empty `status` clears the field.
    pub struct StatusChangedParams {
        /// Short text for the status bar. Empty clears the extension's field.
        #[serde(default)]
        pub status: String,
        #[serde(default)]
        pub level: StatusLevel,
        /// Optional long form for `/extensions list`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub detail: Option<String>,
    }
}

wire! {
    /// Server → host `log` notification: a log line for the host's tracing layer.
    pub struct LogParams {
        #[serde(default)]
        pub message: String,
        /// `error`, `warn`, `info` (the default when absent), `debug` or `trace`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub level: Option<String>,
    }
}

wire! {
    /// The empty object: `shutdown`'s result, and the params of bare methods.
    pub struct Empty {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_objects_parse_to_yolop_defaults() {
        let cmd: CommandExecuteResult = serde_json::from_value(json!({})).unwrap();
        assert!(cmd.success, "command success defaults to true");
        let hook: HookDecision = serde_json::from_value(json!({})).unwrap();
        assert_eq!(hook, HookDecision::allow());
        let status: StatusChangedParams = serde_json::from_value(json!({"level": "loud"})).unwrap();
        assert_eq!(status.level, StatusLevel::Ok);
        let init: InitializeResult = serde_json::from_value(json!({"extra": 1})).unwrap();
        assert!(init.capability_params.prompt.is_none());
        // No prompt is no member (the corpus's `prompt?`), and a `null` one reads as none.
        let sent = serde_json::to_value(&init).unwrap();
        assert!(sent["capability_params"].get("prompt").is_none(), "{sent}");
        let null: InitializeResult =
            serde_json::from_value(json!({"capability_params": {"prompt": null}})).unwrap();
        assert!(null.capability_params.prompt.is_none());
    }

    #[test]
    fn optional_fields_are_omitted_like_yolop() {
        let ask = serde_json::to_value(UiAskParams {
            prompt: "name?".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(ask, json!({"prompt": "name?"}));
        let trace = serde_json::to_value(TraceEventParams::default()).unwrap();
        assert_eq!(
            trace,
            json!({"event_type": "", "id": "", "ts": "", "session_id": ""})
        );
        let hook = serde_json::to_value(HookDecision::block("no")).unwrap();
        assert_eq!(
            hook,
            json!({"block": true, "reason": "no", "user_message": null})
        );
    }

    #[test]
    fn modified_args_round_trips() {
        let d = HookDecision::modify(json!({"path": "/safe"}));
        let back: HookDecision = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(back.modified_args, Some(json!({"path": "/safe"})));
        assert!(!back.block);
    }

    #[test]
    fn config_changed_result_reads_strings_and_objects() {
        let read = |v: Value| ConfigChangedResult::from_wire(&v).status;
        assert_eq!(read(json!("ok")), ConfigStatus::Ok);
        assert_eq!(read(json!({"status": "ok"})), ConfigStatus::Ok);
        assert_eq!(
            read(json!("restart-required")),
            ConfigStatus::RestartRequired
        );
        assert_eq!(
            read(json!({"status": "restart-required"})),
            ConfigStatus::RestartRequired
        );
        assert_eq!(read(json!(7)), ConfigStatus::RestartRequired);
    }

    #[test]
    fn trace_helpers_split_the_event_type() {
        let ev = TraceEventParams {
            event_type: "reason.thinking.started".into(),
            context: json!({"span_id": "s1", "parent_span_id": ""}),
            ..Default::default()
        };
        assert_eq!(ev.family(), "reason");
        assert_eq!(ev.phase(), "thinking.started");
        assert_eq!(ev.span_id(), Some("s1"));
        assert_eq!(ev.parent_span_id(), None);
    }
}
