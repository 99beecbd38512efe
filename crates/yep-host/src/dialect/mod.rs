//! Wire dialects. Each adapts one wire's frames to the host's capability model
//! ([`crate::capability`]); nothing above this layer knows which wire a server speaks.
//!
//! A [`Dialect`] opens a started server's byte streams and shakes hands, which yields a
//! [`Peer`]: the live server in capability terms. The supervisor starts and stops processes;
//! the runtime calls a `Peer` and never asks which dialect it holds. YEP 1.0 is
//! `yep::Yep`; zot's extension protocol v1 is [`zot::Zot`] (chosen per package by the launch
//! recipe); MCP is `mcp::Mcp` (the default `mcp` feature). Claude Code plugins' command hooks
//! are `claude`'s.

pub(crate) mod claude;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod yep;
pub mod zot;

use crate::capability::{
    CommandResult, ConfigOutcome, Events, Grants, HookAnswer, HookFiring, HookOutcome, Intercept,
    InterceptOutcome, Offer, PanelInput, ToolCall, ToolResult, TraceEvent,
};
use crate::rpc::{CallError, CloseReason, ConnectionOptions};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// A future borrowed from a [`Peer`].
pub type PeerFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A started server's byte streams.
pub enum Streams {
    /// A child's pipes: a lone caller busy-polls them for its answer.
    Pipe {
        stdout: tokio::process::ChildStdout,
        stdin: tokio::process::ChildStdin,
    },
    /// Any other reader and writer (in memory, a socket).
    Other {
        reader: Box<dyn AsyncRead + Send + Unpin>,
        writer: Box<dyn AsyncWrite + Send + Unpin>,
    },
}

impl Streams {
    /// A multiplexed connection over these streams, read with `codec`.
    pub fn connect(
        self,
        handler: Arc<dyn crate::rpc::Handler>,
        codec: Arc<dyn crate::rpc::Codec>,
        opts: ConnectionOptions,
    ) -> std::io::Result<crate::rpc::Connection> {
        use crate::rpc::Connection;
        match self {
            Streams::Pipe { stdout, stdin } => {
                Connection::start_pipe(stdout, stdin, handler, codec, opts)
            }
            Streams::Other { reader, writer } => {
                Ok(Connection::start(reader, writer, handler, codec, opts))
            }
        }
    }
}

/// The wire a server speaks unless its launcher picks another: YEP.
pub(crate) fn default_dialect() -> Arc<dyn Dialect> {
    Arc::new(yep::Yep)
}

/// What the host tells a server as it starts it.
#[derive(Debug, Clone)]
pub struct Hello {
    /// The extension's name (the manifest's).
    pub extension: String,
    pub session_id: String,
    pub workspace_root: String,
    /// The plain config (secrets never).
    pub config: Value,
    /// What the manifest lets the server push back at the user.
    pub grants: Grants,
    /// How long the handshake may take.
    pub timeout: Duration,
    /// The package's own directory (zot's `extension_dir`).
    pub package_dir: String,
    /// Where the server keeps its state (zot's `data_dir`).
    pub data_dir: String,
    /// A user is at an interactive UI: tools that wait on one may run.
    pub interactive_ui: bool,
    /// Its command builds or fetches the program first (`go run .`, `npx -y tsx`), so its
    /// first start may take minutes: a dialect that waits for a first frame waits longer for
    /// it, and says why (zot's `hello`).
    pub slow_start: Option<crate::launcher::SlowStart>,
}

/// One wire.
pub trait Dialect: Send + Sync + 'static {
    /// The wire's name, for logs.
    fn name(&self) -> &'static str;

    /// Whether its post hooks answer (a Claude Code hook's `additionalContext`, or a `block`
    /// that is feedback for the model): a caller that reads answers
    /// ([`crate::runtime::Call::report`]) awaits them. Other wires' post hooks only observe,
    /// and nothing waits for them (the default).
    fn post_hooks_answer(&self) -> bool {
        false
    }

    /// Whether its servers are approved to be asked at the intercept point named `point`
    /// (`Intercept::name`) by what the dialect itself pinned (a Claude Code plugin's hooks);
    /// a zot extension's pin says so for it. None by default.
    fn intercepts(&self, point: &str) -> bool {
        let _ = point;
        false
    }

    /// The manifest key that names a server's program, as a failed spawn's fix spells it
    /// (`command`; zot's `extension.json` says `exec`).
    fn command_key(&self) -> &'static str {
        "command"
    }

    /// What to do about a server whose program could not be spawned, when its command is
    /// not written in a package's manifest; `None` says to install it or fix the manifest.
    fn spawn_fix(&self) -> Option<&'static str> {
        None
    }

    /// Whether the name a server gives itself in its handshake is meant to be its package's,
    /// so that another name is warned about (the default). An MCP server's is its
    /// implementation's.
    fn names_its_package(&self) -> bool {
        true
    }

    /// Whether `yep doctor --sandbox-learn` runs its servers to learn what they need (the
    /// default); a denial of one that it cannot run says where the denial is written instead.
    fn sandbox_learnable(&self) -> bool {
        true
    }

    /// The directory of the workspace (relative to it) whose regular files its servers keep
    /// as their own (zot's `.zot`, as zot's scratchpad does); none by default.
    fn workspace_files(&self) -> Option<&'static str> {
        None
    }

    /// Whether its servers are owed every trace event they observe, none dropped under load
    /// (a pinned zot extension); by default a busy forwarder may drop.
    fn lossless_traces(&self) -> bool {
        false
    }

    /// Connect over a started server's `streams` and shake hands. What the server pushes goes
    /// to `events` (already clamped to the manifest's grants).
    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>>;
}

/// One skill a server offered ([`Peer::skills`]), read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedSkill {
    /// Its frontmatter's `name`.
    pub name: String,
    /// Every file: its path under the skill's directory (`/`-separated, `SKILL.md` first) and
    /// its bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

/// A live, handshaken server, in capability terms.
pub trait Peer: Send + Sync + 'static {
    /// What it offered in the handshake.
    fn offer(&self) -> &Offer;

    /// Whether it serves `tool` now: what it offered, or (a wire that registers at run time)
    /// what it has registered since.
    fn serves(&self, tool: &str) -> bool {
        self.offer().serves(tool)
    }

    /// The tools it serves now: what it offered, or (a wire whose list changes at run time,
    /// as MCP's does) the latest list.
    fn listed(&self) -> Vec<crate::capability::OfferedTool> {
        self.offer().tools.clone()
    }

    /// [`Peer::listed`] as one shared list, without copying it. A wire whose list changes
    /// gives a new `Arc` for each new list, so a caller may keep what it worked out from one
    /// list for as long as [`Arc::ptr_eq`] holds (the default gives a new one every time).
    fn listing(&self) -> Arc<Vec<crate::capability::OfferedTool>> {
        Arc::new(self.listed())
    }

    /// Whether its first list has not come yet: it missed its deadline at start (an MCP
    /// server slow in `tools/list`), so [`Peer::listed`] is not its list, and the host serves
    /// the one its approval pinned meanwhile. Never, by default.
    fn list_pending(&self) -> bool {
        false
    }

    /// Call a tool; updates stream to `call.updates` and reset the timeout; `call.cancel`
    /// (or dropping the future) cancels on the wire.
    fn call_tool(
        &self,
        call: ToolCall,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>>;

    /// A hook firing; a wire without hooks allows (the default).
    fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<HookAnswer, PeerError>> {
        let _ = (firing, timeout);
        Box::pin(async { Ok(HookOutcome::Allow.into()) })
    }

    /// Ask at an [`Intercept`] point; a wire without intercepts goes ahead (the default).
    fn intercept(
        &self,
        point: &Intercept,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<InterceptOutcome, PeerError>> {
        let _ = (point, timeout);
        Box::pin(async { Ok(InterceptOutcome::Continue) })
    }

    /// The user acted on the server's panel; a wire without panels ignores it (the default).
    fn panel_input(&self, input: &PanelInput) -> PeerFuture<'_, Result<(), PeerError>> {
        let _ = input;
        Box::pin(async { Ok(()) })
    }

    /// The prompt text for this turn; a wire without prompt text has none (the default).
    fn prompt(&self, timeout: Duration) -> PeerFuture<'_, Result<String, PeerError>> {
        let _ = timeout;
        Box::pin(async { Ok(String::new()) })
    }

    /// A slash command; a wire without commands answers that it has none (the default).
    fn command(
        &self,
        name: &str,
        arguments: &str,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<CommandResult, PeerError>> {
        let _ = (arguments, timeout);
        let message = format!("this server has no command {name}");
        Box::pin(async move {
            Ok(CommandResult {
                success: false,
                message,
            })
        })
    }

    /// New plain config. A server that cannot take it live answers `RestartRequired` (the
    /// default).
    fn config_changed(
        &self,
        config: Value,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ConfigOutcome, PeerError>> {
        let _ = (config, timeout);
        Box::pin(async { Ok(ConfigOutcome::RestartRequired) })
    }

    /// The workspace moved. Never awaits an answer; a wire that cannot say so tells the next
    /// start (the default).
    fn workspace_changed(&self, root: &str) -> PeerFuture<'_, Result<(), PeerError>> {
        let _ = root;
        Box::pin(async { Ok(()) })
    }

    /// A trace event. Never awaits an answer; a wire without traces drops it (the default).
    fn trace(&self, event: &TraceEvent) -> PeerFuture<'_, Result<(), PeerError>> {
        let _ = event;
        Box::pin(async { Ok(()) })
    }

    /// Resolves once the server has handled everything sent before it (the trace flush); at
    /// once on a wire with nothing to flush (the default).
    fn barrier(&self, timeout: Duration) -> PeerFuture<'_, Result<(), PeerError>> {
        let _ = timeout;
        Box::pin(async { Ok(()) })
    }

    /// The skills it offers (MCP's skills extension, SEP-2640), every file read and checked
    /// against its entry's size and digest (and the `SKILL.md` against its frontmatter), within
    /// the SEP's limits. None on a wire without skills, or from a server that offers none.
    fn skills(&self, timeout: Duration) -> PeerFuture<'_, Result<Vec<FetchedSkill>, PeerError>> {
        let _ = timeout;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Any request by its wire name, for conformance tools like `yep doctor`.
    fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>>;

    /// Ask the server to stop and close our writing half; each step bounded by `grace`.
    fn shutdown(&self, grace: Duration) -> PeerFuture<'_, ()>;

    /// Close the connection; pending calls fail with `reason`.
    fn close(&self, reason: CloseReason);

    /// Why it closed, once it has.
    fn close_reason(&self) -> Option<CloseReason>;

    /// Resolves when the connection closes, with the reason.
    fn closed(&self) -> PeerFuture<'_, CloseReason>;
}

/// Why a call on a [`Peer`] failed.
#[derive(Debug, thiserror::Error)]
#[error("`{method}`: {failure}")]
pub struct PeerError {
    /// The wire's name for what was asked.
    pub method: String,
    pub failure: PeerFailure,
}

/// What went wrong with a call on a [`Peer`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerFailure {
    #[error(transparent)]
    Call(CallError),
    /// The answer came but does not say what the wire says it must.
    #[error(
        "answered a malformed result ({}): {}",
        crate::text::escape(message),
        crate::text::escape(preview)
    )]
    Malformed { message: String, preview: String },
}

impl PeerError {
    pub fn call(method: &str, error: CallError) -> PeerError {
        PeerError {
            method: method.to_string(),
            failure: PeerFailure::Call(error),
        }
    }

    /// `value` did not decode as the wire's answer to `method`.
    pub(crate) fn malformed(
        method: &str,
        message: impl std::fmt::Display,
        value: &Value,
    ) -> PeerError {
        PeerError::malformed_text(method, message, &value.to_string())
    }

    /// `text` (JSON, as the server wrote it) did not decode as the wire's answer to `method`.
    pub fn malformed_text(method: &str, message: impl std::fmt::Display, text: &str) -> PeerError {
        let preview = match text.char_indices().nth(200) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_string(),
        };
        PeerError {
            method: method.to_string(),
            failure: PeerFailure::Malformed {
                message: message.to_string(),
                preview,
            },
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the server speaks {wire} {version:?}, incompatible with this host ({ours})")]
    Incompatible {
        wire: &'static str,
        version: String,
        ours: String,
    },
    #[error("the handshake answer is malformed: {0}")]
    Malformed(String),
    /// The handshake failed after the server wrote a line that is not the wire's to stdout
    /// (`line`, the first, escaped and cut short): a log line, most likely. `expected` is what
    /// a line should be ("a YEP message").
    #[error(
        "{error}; the first line it wrote to stdout that is not {expected}: \"{line}\" (stdout carries only the protocol: logs must go to stderr)"
    )]
    StrayOutput {
        expected: &'static str,
        line: String,
        /// Printed in the message, so not chained as a source (a cause is told once).
        error: Box<HandshakeError>,
    },
    /// The server went away after its hello and before it was ready (a zot extension during
    /// its registrations).
    #[error("it ended before it was ready: {0}")]
    NotReady(CloseReason),
    /// What the server offers is past a cap on what may be approved (an MCP server's tool
    /// list): refused, not cut.
    #[error("its tool list is refused: {0}")]
    OfferPastCap(crate::store::mcp::ListCap),
    /// Printed in the message, so not chained as a source (a cause is told once).
    #[error("the connection could not start: {0}")]
    Io(std::io::Error),
    /// The server refused to go on without a login (an authorization challenge, as remote
    /// MCP servers make): the text says so, and how to log in. Said as a connection that
    /// could not start.
    #[error("the connection could not start: {0}")]
    LoginWanted(String),
    /// The server must be started again, once, to be spoken to as its first start showed
    /// (the dialect remembers how): an MCP server that ended on `server/discover` instead of
    /// answering it (older MCP servers take an unknown first request for an error) is spoken
    /// to with `initialize` only; one that answered the probe too late and refused the
    /// `initialize` sent meanwhile is asked `server/discover` alone.
    #[error("it ended on `server/discover`, which MCP servers before 2026-07-28 may not know")]
    RestartWanted,
    /// The server is this host itself, served back (an MCP server that is `yep mcp serve`, by
    /// the `yep/serve` capability in its `initialize`): a session has its tools already.
    #[error(
        "skipped: it is yep itself (`yep mcp serve`), and a session has everything that serves already"
    )]
    IsThisHost,
}

impl From<std::io::Error> for HandshakeError {
    fn from(error: std::io::Error) -> HandshakeError {
        HandshakeError::Io(error)
    }
}
