//! Protocol metadata: the method vocabulary with directions and the capability tokens.
//! `meta_json()` is written to `schema/yep/v1/meta.json`; SDKs check their surface against it.

use crate::methods::*;
use crate::version::PROTOCOL_VERSION;
use serde_json::{Value, json};

/// Who sends a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → server.
    Host,
    /// Server → host.
    Server,
}

/// Whether a method expects a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
}

pub struct MethodInfo {
    pub name: &'static str,
    pub direction: Direction,
    pub kind: Kind,
    pub description: &'static str,
}

const fn m(
    name: &'static str,
    direction: Direction,
    kind: Kind,
    description: &'static str,
) -> MethodInfo {
    MethodInfo {
        name,
        direction,
        kind,
        description,
    }
}

use Direction::{Host, Server};
use Kind::{Notification, Request};

/// Every YEP 1.0 method. yolop's twelve come first, in its order; ours follow.
pub const METHODS: &[MethodInfo] = &[
    m(
        INITIALIZE,
        Host,
        Request,
        "Handshake: negotiate version, pass config; server replies with contributions.",
    ),
    m(
        INITIALIZED,
        Host,
        Notification,
        "Notification: handshake complete.",
    ),
    m(
        TOOL_CALL,
        Host,
        Request,
        "Invoke a tool the server declared.",
    ),
    m(
        TOOL_UPDATE,
        Server,
        Notification,
        "Notification: streamed progress for an in-flight tool/call (correlated by request_id).",
    ),
    m(
        STATUS_CHANGED,
        Server,
        Notification,
        "Notification: a short capability status the host surfaces in its status bar (empty status clears it).",
    ),
    m(
        HOOK_FIRE,
        Host,
        Request,
        "Fire a subscribed lifecycle hook (pre_tool_use/post_tool_use).",
    ),
    m(
        PROMPT_CONTRIBUTION,
        Host,
        Request,
        "Request a fresh dynamic system-prompt contribution.",
    ),
    m(
        COMMAND_EXECUTE,
        Host,
        Request,
        "Run a manifest-declared slash command; the result message is shown to the user.",
    ),
    m(
        UI_ASK,
        Server,
        Request,
        "Ask the user a question and wait for a typed answer.",
    ),
    m(
        CONFIG_CHANGED,
        Host,
        Request,
        "Push new validated config; the server answers ok or restart-required.",
    ),
    m(
        TRACE_EVENT,
        Host,
        Notification,
        "Notification: forward one agentic-lifecycle event (turn/reason/act/tool/llm) to an extension that declares `trace`, for export to a tracing backend.",
    ),
    m(SHUTDOWN, Host, Request, "Request a graceful stop."),
    m(
        CANCEL,
        Host,
        Request,
        "Abort an in-flight request by id; the aborted request resolves with error `cancelled`.",
    ),
    m(
        WORKSPACE_CHANGED,
        Host,
        Notification,
        "Notification: the active workspace root was repointed.",
    ),
    m(
        LOG,
        Server,
        Notification,
        "Notification: a log line for the host's tracing layer.",
    ),
    m(
        EXIT,
        Host,
        Notification,
        "Notification: exit now (after shutdown).",
    ),
];

/// The capability-token vocabulary (open: unknown tokens are carried, never refused).
pub const CAPABILITIES: &[&str] = &[
    "tools",
    "streaming",
    "prompt",
    "dynamic_prompt",
    "hooks",
    "mcp_servers",
    "status",
    "commands",
    "ui_ask",
    "trace",
    "cancel",
];

/// The oldest version a peer may speak to us.
pub const MIN_VERSION: &str = "1.0";

/// Look a method up by name.
pub fn method(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().find(|m| m.name == name)
}

/// The document written to `schema/yep/v1/meta.json`.
pub fn meta_json() -> Value {
    let methods: Vec<Value> = METHODS
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "direction": match m.direction { Host => "host", Server => "server" },
                "kind": match m.kind { Request => "request", Notification => "notification" },
                "description": m.description,
            })
        })
        .collect();
    json!({
        "version": PROTOCOL_VERSION,
        "min_version": MIN_VERSION,
        "methods": methods,
        "capabilities": CAPABILITIES,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_listed_once() {
        let mut names: Vec<_> = METHODS.iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 16);
        assert_eq!(
            method("ui/ask").map(|m| m.direction),
            Some(Direction::Server)
        );
    }
}
