//! What one line of the audit trail says: each kind of record and its fields. Every line has
//! `ts`, `kind` and `extension`; nothing here holds a value that passed (an argument, a
//! result, an env or header value), only its shape or its name.

use serde::Serialize;
use serde_json::value::RawValue;

/// Who decided whether a tool call runs, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// It ran as asked.
    #[default]
    Allowed,
    /// It did not run: a hook (named in `by`) or yep itself (`--block-secrets`) refused it.
    Blocked,
    /// A hook asked the user (or, for an agent's own tool, the agent asks them).
    Asked,
    /// It ran with arguments a hook (named in `by`) rewrote.
    Rewritten,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool answered.
    Ok,
    /// The tool (or its server) answered an error.
    Error,
    /// It was refused before it ran, or its result was withheld.
    Blocked,
    /// The caller cancelled it.
    Cancelled,
    /// It ran past its timeout.
    TimedOut,
    /// It could not be made or did not finish (no such tool, a server that stopped).
    Failed,
}

/// One tool call: which, the shape of its arguments, who decided and how it ended.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ToolEntry {
    /// The extension (or MCP server) that serves the tool; empty for the agent's own tools.
    pub extension: String,
    pub tool: String,
    /// The arguments' shape ([`shape`](super::shape)): keys and JSON types, never values.
    pub args: Box<RawValue>,
    pub decision: Decision,
    /// The extensions whose hooks decided (blocked, asked or rewrote), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    pub outcome: Outcome,
    /// From the call's start to its end, hooks included.
    pub duration_us: u64,
    /// The credential `--block-secrets` found, when that is why it was blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<super::SecretFound>,
}

impl ToolEntry {
    /// A call of `tool` (served by `extension`) with arguments of shape `args`, allowed,
    /// decided by no hook, that ended `outcome` after `duration`.
    pub fn new(
        extension: impl Into<String>,
        tool: impl Into<String>,
        args: Box<RawValue>,
        outcome: Outcome,
        duration: std::time::Duration,
    ) -> ToolEntry {
        ToolEntry {
            extension: extension.into(),
            tool: tool.into(),
            args,
            decision: Decision::Allowed,
            by: Vec::new(),
            outcome,
            duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
            secret: None,
        }
    }

    /// Blocked by `--block-secrets`, which found `found`.
    pub fn blocked_for(mut self, found: super::SecretFound) -> ToolEntry {
        if found.carrier == super::Carrier::Arguments {
            self.decision = Decision::Blocked;
        }
        self.outcome = Outcome::Blocked;
        self.secret = Some(found);
        self
    }
}

/// One of the agent's own tools, through `yep hook`: what the hooks decided before it ran
/// (`phase: "pre"`), or how it ended (`phase: "post"`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AgentEntry {
    /// The extension whose hook decided, when one did.
    pub(crate) extension: String,
    pub(crate) tool: String,
    pub(crate) phase: &'static str,
    pub(crate) args: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decision: Option<Decision>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) by: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<Outcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<super::SecretFound>,
}

/// One decision of a package's egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Egress {
    /// The package whose proxy decided (its `yep grant` name).
    pub extension: String,
    pub host: String,
    pub port: u16,
    /// The HTTP method, when the proxy saw one (not for a `CONNECT` tunnel's inner requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The request's path, when the proxy saw one (no query string: it can hold secrets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub allowed: bool,
    /// The grant that let it through or, for a refusal, the one that would have
    /// (`net:api.example.com`, as `yep grant` takes it).
    pub rule: String,
}

impl Egress {
    /// A request to `host:port` by `extension`'s proxy, let through (`allowed`) by `rule`, or
    /// refused with `rule` the grant that would allow it.
    pub fn new(
        extension: impl Into<String>,
        host: impl Into<String>,
        port: u16,
        allowed: bool,
        rule: impl Into<String>,
    ) -> Egress {
        Egress {
            extension: extension.into(),
            host: host.into(),
            port,
            method: None,
            path: None,
            allowed,
            rule: rule.into(),
        }
    }

    /// With the request's method and path (its query string is cut off here).
    pub fn request(mut self, method: impl Into<String>, path: &str) -> Egress {
        self.method = Some(method.into());
        let path = path.split(['?', '#']).next().unwrap_or_default();
        self.path = Some(path.to_string());
        self
    }
}

/// A brokered secret the egress proxy put into a request of `extension`'s to `host`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Injection {
    pub extension: String,
    pub host: String,
    /// The secret's name, never its value.
    pub secret: String,
}

impl Injection {
    /// Secret `secret` (by name) went to `host` in a request of `extension`'s.
    pub fn new(
        extension: impl Into<String>,
        host: impl Into<String>,
        secret: impl Into<String>,
    ) -> Injection {
        Injection {
            extension: extension.into(),
            host: host.into(),
            secret: secret.into(),
        }
    }
}

/// Every kind of line, told apart by `kind`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Record {
    /// A tool call the host ran.
    Tool(ToolEntry),
    /// One of the agent's own tools, through `yep hook`.
    AgentTool(AgentEntry),
    /// The sandbox refused what a server reached for (`HealthEvent::SandboxDenied`).
    SandboxDenied {
        extension: String,
        target: String,
        grant: String,
    },
    Egress(Egress),
    Injection(Injection),
    /// The writer was behind and dropped this many records.
    Dropped {
        extension: String,
        count: u64,
    },
}
