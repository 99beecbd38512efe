//! A multiplexed, wire-neutral connection over any async reader/writer pair.
//!
//! The caller's task writes its request line itself and awaits a oneshot; one reader task
//! resolves that oneshot directly when the response arrives. That keeps a call to one hop each
//! way. Lines sent while another caller writes join that caller's next write
//! (`Connection::write_line`), so many calls at once share writes. The dialect's [`Codec`]
//! reads each line: a response, progress for a call (routed by id to the call's update sink;
//! it counts as activity for its timeout), or a notification or request from the server, which
//! go to a [`Handler`]. The codec also writes answers and cancels; the dialect renders its own
//! requests. This module knows no method names and no wire format.
//!
//! Over a child's pipes ([`Connection::start_pipe`]), a caller alone in flight busy-polls the
//! pipe for its answer for a few microseconds before sleeping (see `pipe`).

mod connection;
mod lines;
mod pending;
mod pipe;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

/// Used by the shared host (`yep-serve`) on the agent's handed-over output.
pub use pipe::set_nonblocking;

#[doc(hidden)]
pub(crate) use lines::split_frames;

use crate::capability::RemoteError;
use crate::framing::spin_from_env;
pub use connection::Connection;
pub(crate) use connection::WeakConnection;
use serde_json::Value;
pub use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use crate::capability::{BoxFuture, Progress, UpdateSink};

/// A request id, a number or a string, as the wire carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Num(u64),
    Str(Arc<str>),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A server cut off for abusing the wire is an error in the log; any other end (EOF, a
/// shutdown) is told by the calls it fails.
pub(super) fn log_abuse(label: &str, reason: &CloseReason) {
    if matches!(
        reason,
        CloseReason::FrameTooLarge { .. }
            | CloseReason::Flooded { .. }
            | CloseReason::TooManyRequests { .. }
    ) {
        tracing::error!(extension = %label, "{reason}");
    }
}

/// One line from the server, as a [`Codec`] reads it.
#[derive(Debug)]
pub enum Frame {
    /// The answer to the host's request `id`: its result as the JSON text the server wrote
    /// (taken out of the line once, never parsed here).
    Response {
        id: Id,
        result: Result<Box<RawValue>, RemoteError>,
    },
    /// Progress of the host's request `id`, still running.
    Progress { id: Id, update: Progress },
    /// Anything else the server says unasked.
    Notification { method: String, params: Value },
    /// The server asks the host something; the answer goes back with `id`.
    Request {
        id: Id,
        method: String,
        params: Value,
    },
}

/// Why a codec could not read a line; the line is skipped as malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl Malformed {
    pub fn new(why: impl std::fmt::Display) -> Malformed {
        Malformed(why.to_string())
    }
}

/// A wire's framing rules, given by its dialect: which line is what, and how answers and
/// cancels are written. Runs on the reader: keep it cheap.
pub trait Codec: Send + Sync + 'static {
    /// Read one line (without its newline). An error skips the line as malformed.
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed>;
    /// The id of the host's `n`th request on this connection.
    fn id(&self, n: u64) -> Id {
        Id::Num(n)
    }
    /// The line answering the server's request `id`.
    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String;
    /// The line that cancels the host's request `id`, or `None` when the wire cannot cancel.
    /// `fresh` is an unused id, for a wire whose cancel is itself a request.
    fn cancel(&self, id: &Id, fresh: Id) -> Option<String>;
}

/// The default cap on one incoming line.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// What the server sends besides responses and progress.
pub trait Handler: Send + Sync + 'static {
    /// A notification. Runs on the reader task, in arrival order: keep it cheap.
    fn notification(&self, method: &str, params: Value);
    /// A reverse request. The future runs on its own task, so a slow answer (a human typing)
    /// never stalls the reader.
    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, RemoteError>>;
}

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    #[error("the server closed its stdout")]
    Eof,
    #[error("reading from the server failed: {0}")]
    Io(String),
    #[error("the server sent a {len}-byte line, over the {cap}-byte frame cap; disconnected")]
    FrameTooLarge { len: usize, cap: usize },
    #[error("the server process exited")]
    ProcessExited,
    #[error("a write to the server was interrupted mid-line; the stream is unusable")]
    WriteInterrupted,
    #[error("the host closed the connection")]
    Shutdown,
    #[error(
        "the server flooded the host with unsolicited lines, over {rate} a second sustained; disconnected"
    )]
    Flooded { rate: u32 },
    #[error(
        "the server kept more than {cap} requests to the host in flight without reading the answers; disconnected"
    )]
    TooManyRequests { cap: usize },
    #[error(
        "the server did not read what the host sent: over {frames} frames or {bytes} bytes queued for it; disconnected"
    )]
    Backlogged { frames: usize, bytes: usize },
    #[error("a write to the server blocked for over {} s; disconnected", after.as_secs())]
    WriteStalled { after: Duration },
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The server answered with an error.
    #[error("{0}")]
    Remote(RemoteError),
    /// The caller cancelled; the wire's cancel was sent.
    #[error("cancelled")]
    Cancelled,
    #[error("`{method}` timed out after {} ms", after.as_millis())]
    Timeout { method: String, after: Duration },
    #[error("connection closed: {0}")]
    Closed(CloseReason),
    #[error("failed to write to the server: {0}")]
    Write(String),
}

/// Per-call options.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Fail the call after this long without a response (or, with `updates`, without progress).
    pub timeout: Option<Duration>,
    /// Where progress for this call goes. Progress also resets the timeout.
    pub updates: Option<UpdateSink>,
    /// Cancel the call: the wire's cancel is sent and the call resolves [`CallError::Cancelled`].
    pub cancel: Option<CancellationToken>,
}

impl CallOptions {
    pub fn timeout(timeout: Duration) -> Self {
        CallOptions {
            timeout: Some(timeout),
            ..Self::default()
        }
    }
}

/// Sees every line on the wire (`true`: sent by the host), for conformance checks.
pub type Tap = Arc<dyn Fn(bool, &[u8]) + Send + Sync>;

/// Connection tuning.
#[derive(Clone)]
pub struct ConnectionOptions {
    /// Label for logs and errors (the extension name).
    pub label: String,
    /// Longest line accepted from the server.
    pub max_frame_bytes: usize,
    /// How long a lone caller busy-polls a pipe for its answer before sleeping (pipes only).
    pub spin: Duration,
    /// Called with every line read or written (off the hot path unless set).
    pub tap: Option<Tap>,
    /// Unsolicited lines (notifications, requests, garbage, answers nobody awaits; one more per
    /// 4 KiB) a second a server may send, sustained, before it is disconnected. Answers to
    /// the host's own requests are free.
    pub noise_rate: u32,
    /// How far over `noise_rate` a burst may go.
    pub noise_burst: u32,
    /// Requests from the server (`ui/ask`, unknown ones) the host handles at once. Past it
    /// they are refused with an error; past twice it the server is disconnected.
    pub max_inbound_requests: usize,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            label: "extension".into(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            spin: spin_from_env(),
            tap: None,
            noise_rate: DEFAULT_NOISE_RATE,
            noise_burst: DEFAULT_NOISE_BURST,
            max_inbound_requests: DEFAULT_MAX_INBOUND_REQUESTS,
        }
    }
}

/// The default for [`ConnectionOptions::noise_rate`].
pub(crate) const DEFAULT_NOISE_RATE: u32 = 10_000;
/// The default for [`ConnectionOptions::noise_burst`].
pub(crate) const DEFAULT_NOISE_BURST: u32 = 100_000;
/// The default for [`ConnectionOptions::max_inbound_requests`].
pub(crate) const DEFAULT_MAX_INBOUND_REQUESTS: usize = 32;

impl std::fmt::Debug for ConnectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionOptions")
            .field("label", &self.label)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("spin", &self.spin)
            .field("noise_rate", &self.noise_rate)
            .field("noise_burst", &self.noise_burst)
            .field("max_inbound_requests", &self.max_inbound_requests)
            .finish()
    }
}

/// The most characters of a server's line an error quotes.
pub(crate) const STRAY_CHARS: usize = 120;

/// A line a server wrote, as an error quotes it: escaped for a terminal, and cut to
/// `STRAY_CHARS` characters (escapes counted) with an ellipsis.
pub fn stray_preview(line: &[u8]) -> String {
    // Enough bytes for the characters shown, however wide each is.
    let head = &line[..line.len().min(4 * STRAY_CHARS)];
    let mut out = String::new();
    let mut shown = 0;
    for c in String::from_utf8_lossy(head).chars() {
        let mut buf = [0u8; 4];
        let piece = crate::text::escape(c.encode_utf8(&mut buf)).into_owned();
        shown += piece.chars().count();
        if shown > STRAY_CHARS {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
    }
    if head.len() < line.len() {
        out.push('…');
    }
    out
}

pub(super) fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
    if line.len() > 120 {
        format!("{text}…")
    } else {
        text
    }
}
