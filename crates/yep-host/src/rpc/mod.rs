//! A multiplexed, wire-neutral connection over any async reader/writer pair.
//!
//! The caller's task writes its request line itself and awaits a oneshot; one reader task
//! resolves that oneshot directly when the response arrives. That keeps a call to one hop each
//! way. Lines sent while another caller writes join that caller's next write
//! ([`Connection::write_line`]), so many calls at once share writes. The dialect's [`Codec`] reads each line: a response, progress for a call
//! (routed by id to the call's update sink; it counts as activity for its timeout), or a
//! notification or request from the server, which go to a [`Handler`]. The codec also writes
//! answers and cancels; the dialect renders its own requests. This module knows no method
//! names and no wire format.
//!
//! Over a child's pipes ([`Connection::start_pipe`]), a caller alone in flight busy-polls the
//! pipe for its answer for a few microseconds before sleeping (see `pipe`).

mod lines;
mod pipe;
/// Used by the shared host (`yep-serve`) on the agent's handed-over output.
pub use pipe::set_nonblocking;

#[doc(hidden)]
pub use lines::split_frames;

use crate::capability::RemoteError;
use crate::framing::{LineBuffer, spin_from_env};
use lines::{ReadLine, read_line_capped};
use serde_json::Value;
pub use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
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
fn log_abuse(label: &str, reason: &CloseReason) {
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

/// How long a call cancelled through its token waits for its cancel to be written before it
/// resolves anyway (a server that stopped reading holds the write up; it goes on alone).
const CANCEL_WRITE_WAIT: Duration = Duration::from_millis(100);

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
pub const DEFAULT_NOISE_RATE: u32 = 10_000;
/// The default for [`ConnectionOptions::noise_burst`].
pub const DEFAULT_NOISE_BURST: u32 = 100_000;
/// The default for [`ConnectionOptions::max_inbound_requests`].
pub const DEFAULT_MAX_INBOUND_REQUESTS: usize = 32;

/// A token bucket over a server's unsolicited lines.
struct NoiseBucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    burst: f64,
}

impl NoiseBucket {
    fn new(rate: u32, burst: u32) -> NoiseBucket {
        NoiseBucket {
            tokens: f64::from(burst),
            last: Instant::now(),
            rate: f64::from(rate),
            burst: f64::from(burst),
        }
    }

    /// Spend `cost`; `false` once the bucket is empty. The clock is read only when the
    /// bucket runs dry, so a quiet server costs no syscall per line.
    fn spend(&mut self, cost: f64) -> bool {
        self.tokens -= cost;
        if self.tokens >= 0.0 {
            return true;
        }
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.rate;
        self.last = now;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.tokens >= 0.0
    }
}

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

type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Lines queued behind a writing role's holder that go out at once, without it: the server
/// starts on them while the rest are made.
const WRITE_BATCH: usize = 16;

/// The lines on their way to the server. One caller at a time writes (it holds the role);
/// lines sent meanwhile queue here and go out with its next write, in the order they came.
#[derive(Default)]
struct Outbox {
    /// Queued lines, each with its newline. Empty whenever nobody holds the role.
    bytes: Vec<u8>,
    /// Someone holds the writing role: it writes what is queued before it lets go.
    writing: bool,
    /// How many lines `bytes` holds.
    lines: usize,
    /// A write failed: the stream is gone, and every later line fails the same way.
    broken: Option<String>,
}

struct Slot {
    tx: oneshot::Sender<Result<Box<RawValue>, CallError>>,
    /// Where this call's progress goes; with one, progress also pushes its timeout out.
    sink: Option<UpdateSink>,
    /// Micros since `Inner::epoch` of the call's start, or (with a sink) of its last progress.
    last_micros: u64,
    /// The call's timeout in micros (0: none); it runs out at `last_micros` plus this
    /// ([`Connection::expire_calls`]).
    timeout_micros: u64,
}

/// A call's deadline while its request is written (a server that stopped reading holds the
/// write up). Its timer is made and armed only when first polled: a write done at once costs
/// no timer. Once the request is out, the connection's watchdog keeps the time.
struct Deadline<'a> {
    at: Option<Instant>,
    timer: std::pin::Pin<&'a mut Option<tokio::time::Sleep>>,
}

impl Deadline<'_> {
    /// Resolves once the deadline passes; never without one.
    fn passed(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            let Some(at) = self.at else {
                return std::task::Poll::Pending;
            };
            if self.timer.is_none() {
                self.timer.set(Some(tokio::time::sleep_until(at)));
            }
            match self.timer.as_mut().as_pin_mut() {
                Some(timer) => timer.poll(cx),
                None => std::task::Poll::Pending,
            }
        })
    }
}

struct Pending {
    slots: HashMap<Id, Slot, foldhash::fast::RandomState>,
    closed: Option<CloseReason>,
    /// When the watchdog next looks at the calls' timeouts (micros since `Inner::epoch`;
    /// `u64::MAX`: when woken).
    watch_at: u64,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            slots: HashMap::default(),
            closed: None,
            watch_at: u64::MAX,
        }
    }
}

/// Times out the calls in flight: one task per connection, not a timer per call (registering
/// and clearing one took about 4% of the host's time per call under load). It sleeps until the
/// earliest deadline it was told of; a call that runs out earlier wakes it. It holds the
/// connection only while it looks, and ends once the connection is closed or gone.
async fn watchdog(conn: WeakConnection, wake: Arc<Notify>, epoch: Instant) {
    loop {
        let at = {
            let Some(conn) = conn.upgrade() else {
                return;
            };
            let pending = conn.lock_pending();
            if pending.closed.is_some() {
                return;
            }
            pending.watch_at
        };
        if at == u64::MAX {
            wake.notified().await;
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep_until(epoch + Duration::from_micros(at)) => {}
            () = wake.notified() => continue,
        }
        let Some(conn) = conn.upgrade() else {
            return;
        };
        conn.expire_calls();
    }
}

struct Inner {
    label: String,
    writer: tokio::sync::Mutex<Option<Writer>>,
    /// Lines waiting for the caller that is writing ([`Connection::write_line`]).
    outbox: Mutex<Outbox>,
    pending: Mutex<Pending>,
    next_id: AtomicU64,
    epoch: Instant,
    closed: tokio::sync::watch::Sender<Option<CloseReason>>,
    /// Cancelled on close: reverse-request tasks stop waiting for an answer nobody can send.
    closing: CancellationToken,
    handler: Arc<dyn Handler>,
    codec: Arc<dyn Codec>,
    /// The read side, when it is a pipe a caller may busy-poll.
    pipe: Option<pipe::PipeInput>,
    tap: Option<Tap>,
    noise: Mutex<NoiseBucket>,
    noise_rate: u32,
    /// The first line that was not the wire's ([`stray_preview`]): a log line on stdout, most
    /// likely, which a failed handshake names.
    first_stray: std::sync::OnceLock<String>,
    /// Server requests being answered now, and the cap.
    inbound: AtomicUsize,
    max_inbound: usize,
    /// The server's stdin pipe, grown once a big frame goes to it ([`pipe::grow`]). Only
    /// touched under the writer's lock while the writer (which owns it) is there.
    stdin_pipe: Option<(i32, AtomicBool)>,
    /// Wakes the [`watchdog`]: a call's deadline is earlier than it knew, or the connection
    /// closed or is gone.
    watch_wake: Arc<Notify>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watch_wake.notify_one();
    }
}

/// A live, multiplexed connection to one server. Cheap to clone.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

/// A [`Connection`] that may be gone ([`Connection::downgrade`]).
#[derive(Clone)]
pub struct WeakConnection(std::sync::Weak<Inner>);

impl WeakConnection {
    pub fn upgrade(&self) -> Option<Connection> {
        self.0.upgrade().map(|inner| Connection { inner })
    }
}

impl Connection {
    /// Start a connection over any reader/writer pair: spawns the reader task on the current
    /// tokio runtime.
    pub fn start<R, W>(
        reader: R,
        writer: W,
        handler: Arc<dyn Handler>,
        codec: Arc<dyn Codec>,
        opts: ConnectionOptions,
    ) -> Connection
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let conn = Connection::new(Box::new(writer), handler, codec, &opts, None);
        let reader_conn = conn.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(64 * 1024, reader);
            let reason = reader_conn
                .read_loop(&mut reader, opts.max_frame_bytes)
                .await;
            reader_conn.close(reason);
        });
        conn
    }

    /// Start a connection over a child's stdout and stdin, with busy-polling for answers.
    pub fn start_pipe(
        stdout: tokio::process::ChildStdout,
        stdin: tokio::process::ChildStdin,
        handler: Arc<dyn Handler>,
        codec: Arc<dyn Codec>,
        opts: ConnectionOptions,
    ) -> std::io::Result<Connection> {
        let input = pipe::PipeInput::new(stdout.into_owned_fd()?, opts.max_frame_bytes, opts.spin)?;
        let stdin_fd = std::os::fd::AsRawFd::as_raw_fd(&stdin);
        let pipes = Some((input, stdin_fd));
        let conn = Connection::new(Box::new(stdin), handler, codec, &opts, pipes);
        let reader_conn = conn.clone();
        tokio::spawn(async move {
            let pipe = reader_conn.inner.pipe.as_ref().expect("a pipe connection");
            let reason = pipe.run(|line| reader_conn.dispatch(line)).await;
            log_abuse(&reader_conn.inner.label, &reason);
            reader_conn.close(reason);
        });
        Ok(conn)
    }

    fn new(
        writer: Writer,
        handler: Arc<dyn Handler>,
        codec: Arc<dyn Codec>,
        opts: &ConnectionOptions,
        pipes: Option<(pipe::PipeInput, i32)>,
    ) -> Connection {
        let (pipe, stdin_pipe) = match pipes {
            Some((input, fd)) => (Some(input), Some((fd, AtomicBool::new(false)))),
            None => (None, None),
        };
        let (closed, _) = tokio::sync::watch::channel(None);
        let epoch = Instant::now();
        let watch_wake = Arc::new(Notify::new());
        let conn = Connection {
            inner: Arc::new(Inner {
                label: opts.label.clone(),
                writer: tokio::sync::Mutex::new(Some(writer)),
                outbox: Mutex::new(Outbox::default()),
                pending: Mutex::new(Pending::default()),
                next_id: AtomicU64::new(1),
                epoch,
                closed,
                closing: CancellationToken::new(),
                handler,
                codec,
                pipe,
                tap: opts.tap.clone(),
                noise: Mutex::new(NoiseBucket::new(opts.noise_rate, opts.noise_burst)),
                noise_rate: opts.noise_rate,
                first_stray: std::sync::OnceLock::new(),
                inbound: AtomicUsize::new(0),
                max_inbound: opts.max_inbound_requests.max(1),
                stdin_pipe,
                watch_wake: Arc::clone(&watch_wake),
            }),
        };
        tokio::spawn(watchdog(conn.downgrade(), watch_wake, epoch));
        conn
    }

    /// A handle that does not keep the connection alive (for a handler that writes to it).
    pub fn downgrade(&self) -> WeakConnection {
        WeakConnection(Arc::downgrade(&self.inner))
    }

    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.lock_pending().closed.clone()
    }

    pub fn is_closed(&self) -> bool {
        self.close_reason().is_some()
    }

    /// The first line the server wrote that the codec could not read, escaped and cut short
    /// ([`stray_preview`]); skipped, as every such line is.
    pub fn first_stray_line(&self) -> Option<&str> {
        self.inner.first_stray.get().map(String::as_str)
    }

    /// Resolves when the connection closes, with the reason.
    pub async fn closed(&self) -> CloseReason {
        let mut rx = self.inner.closed.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return CloseReason::Shutdown;
            }
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mark the connection closed and fail every pending call with `reason`.
    pub fn close(&self, reason: CloseReason) {
        let slots = {
            let mut pending = self.lock_pending();
            if pending.closed.is_some() {
                return;
            }
            pending.closed = Some(reason.clone());
            std::mem::take(&mut pending.slots)
        };
        for (_, slot) in slots {
            let _ = slot.tx.send(Err(CallError::Closed(reason.clone())));
        }
        self.inner.watch_wake.notify_one();
        self.inner.closing.cancel();
        self.inner.closed.send_replace(Some(reason));
    }

    /// Close our writing half: the server sees EOF on stdin.
    pub async fn close_write(&self) {
        // Lines already sent or queued go out first: wait for the writing role to be free
        // while holding the writer, so no line is queued behind a writer that is gone.
        let mut first = true;
        loop {
            let mut guard = self.inner.writer.lock().await;
            if !self.lock_outbox().writing {
                if let Some(mut w) = guard.take() {
                    let _ = w.shutdown().await;
                }
                return;
            }
            // The role's holder has not taken the writer yet (it lets other tasks run first).
            drop(guard);
            if std::mem::take(&mut first) {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    fn lock_outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.inner.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write one line, or queue it behind the caller that is writing (it goes out with that
    /// caller's next write). With `batch` (other calls are in flight), a caller that takes the
    /// writing role first lets the runtime's other ready tasks run, so the requests they send
    /// meanwhile share its `write`: under many calls at once, one write and one wake-up of the
    /// server carry many lines.
    ///
    /// If this future is dropped part-way through a write (a timeout, a cancel), the peer may
    /// hold half a line, so the connection is closed rather than reused; dropped before its
    /// write began, it hands what is queued to a task of its own.
    async fn write_line(&self, line: String, batch: bool) -> Result<(), CallError> {
        if let Some(tap) = &self.inner.tap {
            tap(true, line.as_bytes());
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let full = {
            let mut outbox = self.lock_outbox();
            if let Some(err) = &outbox.broken {
                return Err(CallError::Write(err.clone()));
            }
            if outbox.writing {
                outbox.bytes.extend_from_slice(&bytes);
                outbox.lines += 1;
                if outbox.lines < WRITE_BATCH {
                    return Ok(());
                }
                // A full batch goes now, so the server starts on it while the rest are made:
                // unless the role's holder is writing (it takes them), it is letting other
                // tasks run. Taken under the writer's lock, so batches keep their order.
                let Ok(guard) = self.inner.writer.try_lock() else {
                    return Ok(());
                };
                outbox.lines = 0;
                Some((guard, std::mem::take(&mut outbox.bytes)))
            } else {
                outbox.writing = true;
                outbox.bytes = bytes;
                outbox.lines = 1;
                None
            }
        };
        if let Some((mut guard, batch)) = full {
            return self.write_batch(&mut guard, &batch).await;
        }
        let mut role = WritingRole {
            conn: self,
            held: true,
        };
        if batch {
            tokio::task::yield_now().await;
        }
        let res = self.write_queued().await;
        role.held = false;
        res
    }

    /// The writing role: write what is queued, then what was queued meanwhile, until nothing
    /// is, and let go of the role.
    async fn write_queued(&self) -> Result<(), CallError> {
        let mut guard = self.inner.writer.lock().await;
        let mut batch = Vec::new();
        loop {
            {
                let mut outbox = self.lock_outbox();
                // The written batch's buffer takes the next lines' place.
                batch.clear();
                std::mem::swap(&mut batch, &mut outbox.bytes);
                outbox.lines = 0;
                if batch.is_empty() {
                    outbox.writing = false;
                    return Ok(());
                }
            }
            self.write_batch(&mut guard, &batch).await?;
        }
    }

    /// Write `batch` (whole lines) with the writer's lock held.
    async fn write_batch(
        &self,
        writer: &mut Option<Writer>,
        batch: &[u8],
    ) -> Result<(), CallError> {
        let Some(w) = writer.as_mut() else {
            return Err(self.broken("the connection is closed for writing".into()));
        };
        if batch.len() > pipe::GROW_AT
            && let Some((fd, grown)) = &self.inner.stdin_pipe
        {
            // The writer holding this fd is alive: we hold its lock and it is `Some`.
            pipe::grow(*fd, grown);
        }
        let mut torn = TornWrite {
            conn: self,
            armed: true,
        };
        let res = async {
            w.write_all(batch).await?;
            w.flush().await
        }
        .await;
        torn.armed = false;
        res.map_err(|err| self.broken(err.to_string()))
    }

    /// A write failed or cannot happen: every line queued or sent from now on fails the same
    /// way (the answers of those already queued never come; the reader sees the end).
    fn broken(&self, why: String) -> CallError {
        let mut outbox = self.lock_outbox();
        outbox.broken = Some(why.clone());
        outbox.writing = false;
        outbox.bytes = Vec::new();
        outbox.lines = 0;
        CallError::Write(why)
    }

    /// Send a line that expects no answer (a notification, rendered by the dialect).
    pub async fn send(&self, line: String) -> Result<(), CallError> {
        self.write_line(line, false).await
    }

    /// Send a request and wait for its result, as the JSON text the server wrote. `render`
    /// writes the request line for the id it is given; `method` names the request in errors.
    pub async fn call(
        &self,
        method: &str,
        render: impl FnOnce(&Id) -> String,
        opts: CallOptions,
    ) -> Result<Box<RawValue>, CallError> {
        let id = self
            .inner
            .codec
            .id(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, mut rx) = oneshot::channel();
        // One clock read serves the deadline and the start.
        let now = (opts.timeout.is_some() || opts.updates.is_some()).then(Instant::now);
        let timeout_micros = opts.timeout.map_or(0, |t| {
            u64::try_from(t.as_micros()).unwrap_or(u64::MAX).max(1)
        });
        let (alone, wake_watchdog) = {
            let mut pending = self.lock_pending();
            if let Some(reason) = &pending.closed {
                return Err(CallError::Closed(reason.clone()));
            }
            let last_micros = now.map_or(0, |now| {
                now.saturating_duration_since(self.inner.epoch).as_micros() as u64
            });
            pending.slots.insert(
                id.clone(),
                Slot {
                    tx,
                    sink: opts.updates.clone(),
                    last_micros,
                    timeout_micros,
                },
            );
            // Earlier than the watchdog means to look: it must look sooner.
            let due = last_micros.saturating_add(timeout_micros);
            let sooner = timeout_micros != 0 && due < pending.watch_at;
            if sooner {
                pending.watch_at = due;
            }
            (pending.slots.len() == 1, sooner)
        };
        if wake_watchdog {
            self.inner.watch_wake.notify_one();
        }
        // Alone in flight on a pipe, while answers come one at a time, the caller reads its
        // own answer ([`Self::spin_for_answer`]).
        let spin = self
            .inner
            .pipe
            .as_ref()
            .filter(|p| alone && !p.spin.is_zero() && p.one_at_a_time());
        // From here on, leaving early (drop, cancel, timeout) must forget the slot and tell
        // the server, so a late answer is dropped and the server can stop work.
        let mut guard = PendingGuard {
            conn: self,
            id,
            armed: true,
        };
        let mut cancelled = std::pin::pin!(async {
            match &opts.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        });
        let mut deadline = Deadline {
            at: now.zip(opts.timeout).map(|(now, t)| now + t),
            timer: std::pin::pin!(None),
        };
        // A server that stops reading fills the pipe: the write itself must give up in time.
        // A call cancelled already is not sent; a write done at once costs no timer.
        tokio::select! {
            biased;
            () = &mut cancelled => return Err(CallError::Cancelled),
            res = self.write_line(render(&guard.id), !alone) => res?,
            () = deadline.passed() => {
                return Err(CallError::Timeout { method: method.to_string(), after: opts.timeout.unwrap_or_default() });
            }
        }

        // A timeout comes from the watchdog, which does not know the method's name.
        let named = |res: Result<Box<RawValue>, CallError>| match res {
            Err(CallError::Timeout { after, .. }) => Err(CallError::Timeout {
                method: method.to_string(),
                after,
            }),
            res => res,
        };
        if let Some(res) = spin.and_then(|pipe| self.spin_for_answer(pipe, &mut rx)) {
            guard.armed = false;
            return named(res);
        }

        tokio::select! {
            biased;
            res = &mut rx => {
                guard.armed = false;
                named(res.unwrap_or(Err(CallError::Closed(CloseReason::Shutdown))))
            }
            () = &mut cancelled => {
                // Resolved once the wire's cancel is out (within a bound), so whatever the
                // caller sends next cannot overtake it, nor a stop close the pipe before it.
                guard.armed = false;
                if let Some(sent) = self.abandon(guard.id.clone()) {
                    let _ = tokio::time::timeout(CANCEL_WRITE_WAIT, sent).await;
                }
                Err(CallError::Cancelled)
            }
        }
    }

    /// Fail the calls whose time ran out (their progress, with a sink, pushes it out) and
    /// send the wire's cancel for each; note when the watchdog must look next.
    fn expire_calls(&self) {
        let now = self.micros();
        let expired: Vec<(Id, Slot)> = {
            let mut pending = self.lock_pending();
            let mut next = u64::MAX;
            let due: Vec<Id> = pending
                .slots
                .iter()
                .filter(|(_, slot)| slot.timeout_micros != 0)
                .filter_map(|(id, slot)| {
                    let due = slot.last_micros.saturating_add(slot.timeout_micros);
                    if due <= now {
                        return Some(id.clone());
                    }
                    next = next.min(due);
                    None
                })
                .collect();
            pending.watch_at = next;
            due.iter()
                .filter_map(|id| pending.slots.remove_entry(id))
                .collect()
        };
        for (id, slot) in expired {
            let after = Duration::from_micros(slot.timeout_micros);
            let _ = slot.tx.send(Err(CallError::Timeout {
                method: String::new(),
                after,
            }));
            self.send_cancel(id);
        }
    }

    /// Alone in flight on a pipe: read the answer ourselves for up to the spin window instead
    /// of sleeping until the reader task is woken. `None` if it did not come in time. Called
    /// once the request is out: the reader task is kept asleep only from then on, since a
    /// write that blocks needs it (a server may be writing to us meanwhile).
    fn spin_for_answer(
        &self,
        pipe: &pipe::PipeInput,
        rx: &mut oneshot::Receiver<Result<Box<RawValue>, CallError>>,
    ) -> Option<Result<Box<RawValue>, CallError>> {
        // Dropped on the way out: the buffer goes back and the reader wakes for what is left.
        let _spinning = pipe.quiet();
        let until = std::time::Instant::now() + pipe.spin;
        let mut answer = None;
        loop {
            match rx.try_recv() {
                Ok(res) => {
                    answer = Some(res);
                    break;
                }
                Err(oneshot::error::TryRecvError::Closed) => {
                    answer = Some(Err(CallError::Closed(CloseReason::Shutdown)));
                    break;
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= until {
                break;
            }
            if let Some(Err(reason)) = pipe.try_drain(|line| self.dispatch(line)) {
                // Whichever reader sees the end first, it is logged the same way.
                log_abuse(&self.inner.label, &reason);
                self.close(reason);
            }
            std::hint::spin_loop();
        }
        answer
    }

    fn micros(&self) -> u64 {
        self.inner.epoch.elapsed().as_micros() as u64
    }

    /// Forget a pending call and send the wire's cancel for it (its answer is dropped as late).
    /// The send runs on its own task, so a write that blocks never tears a line; its handle
    /// resolves once the cancel is written (or could not be).
    fn abandon(&self, id: Id) -> Option<tokio::task::JoinHandle<()>> {
        let had = self.lock_pending().slots.remove(&id).is_some();
        if !had {
            return None;
        }
        self.send_cancel(id)
    }

    /// Send the wire's cancel for the host's request `id` on a task of its own (see
    /// [`Connection::abandon`]).
    fn send_cancel(&self, id: Id) -> Option<tokio::task::JoinHandle<()>> {
        let conn = self.clone();
        tokio::runtime::Handle::try_current().ok().map(|rt| {
            rt.spawn(async move {
                let fresh = conn
                    .inner
                    .codec
                    .id(conn.inner.next_id.fetch_add(1, Ordering::Relaxed));
                let Some(line) = conn.inner.codec.cancel(&id, fresh) else {
                    return;
                };
                if let Err(err) = conn.write_line(line, false).await {
                    tracing::debug!(extension = %conn.inner.label, "could not send cancel for request {id}: {err}");
                }
            })
        })
    }

    async fn read_loop<R: AsyncBufRead + Unpin>(&self, reader: &mut R, cap: usize) -> CloseReason {
        let mut lines = LineBuffer::new(cap);
        let mut since_yield = 0usize;
        loop {
            match read_line_capped(reader, &mut lines).await {
                Ok(ReadLine::Eof) => return CloseReason::Eof,
                Ok(ReadLine::TooLong(len)) => {
                    tracing::error!(extension = %self.inner.label, "server sent a {len}-byte line over the {cap}-byte frame cap; disconnecting");
                    return CloseReason::FrameTooLarge { len, cap };
                }
                Ok(ReadLine::Line(line)) => {
                    if let Err(reason) = self.dispatch(line) {
                        tracing::error!(extension = %self.inner.label, "{reason}");
                        return reason;
                    }
                }
                Err(err) => return CloseReason::Io(err.to_string()),
            }
            // A reader that always has data never yields on its own.
            since_yield += 1;
            if since_yield >= pipe::LINE_BUDGET {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
    }

    /// Charge one unsolicited line to the server's noise budget.
    fn noise(&self, len: usize) -> Result<(), CloseReason> {
        let cost = 1.0 + (len / 4096) as f64;
        let ok = self
            .inner
            .noise
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .spend(cost);
        if ok {
            Ok(())
        } else {
            Err(CloseReason::Flooded {
                rate: self.inner.noise_rate,
            })
        }
    }

    /// Route one line from the server. Runs on whoever reads: the reader task or a spinning
    /// caller. An error closes the connection: the server broke a bound.
    fn dispatch(&self, line: &[u8]) -> Result<(), CloseReason> {
        if let Some(tap) = &self.inner.tap {
            tap(false, line);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return self.noise(line.len());
        }
        let frame = match self.inner.codec.decode(line) {
            Ok(frame) => frame,
            Err(err) => {
                tracing::warn!(extension = %self.inner.label, "skipping malformed line from the server: {err}: {}", preview(line));
                self.inner.first_stray.get_or_init(|| stray_preview(line));
                return self.noise(line.len());
            }
        };
        match frame {
            Frame::Response { id, result } => {
                let slot = self.lock_pending().slots.remove(&id);
                match slot {
                    Some(slot) => {
                        let _ = slot.tx.send(result.map_err(CallError::Remote));
                    }
                    None => {
                        tracing::debug!(extension = %self.inner.label, "dropping a late or unknown response for id {id}");
                        return self.noise(line.len());
                    }
                }
                Ok(())
            }
            Frame::Progress { id, update } => {
                self.noise(line.len())?;
                let now = self.micros();
                let sink = self.lock_pending().slots.get_mut(&id).map(|slot| {
                    // Only a call that hears its progress has its timeout pushed out by it.
                    if slot.sink.is_some() {
                        slot.last_micros = now;
                    }
                    slot.sink.clone()
                });
                match sink {
                    Some(sink) => {
                        if let Some(sink) = sink {
                            sink(&update);
                        }
                    }
                    None => {
                        tracing::debug!(extension = %self.inner.label, "progress for request {id} nobody awaits: {}", preview(update.message.as_bytes()))
                    }
                }
                Ok(())
            }
            Frame::Notification { method, params } => {
                self.noise(line.len())?;
                self.inner.handler.notification(&method, params);
                Ok(())
            }
            Frame::Request { id, method, params } => {
                self.noise(line.len())?;
                // Each request in flight holds a task until answered; a server that never
                // reads the answers must not grow the host without bound.
                let cap = self.inner.max_inbound;
                let in_flight = self.inner.inbound.fetch_add(1, Ordering::AcqRel);
                let slot = InboundSlot { conn: self.clone() };
                if in_flight >= 2 * cap {
                    return Err(CloseReason::TooManyRequests { cap });
                }
                let fut = if in_flight >= cap {
                    tracing::warn!(extension = %self.inner.label, "refusing {method}: {cap} requests from the server are in flight already");
                    let err = RemoteError::new(
                        0,
                        format!(
                            "too many requests in flight: the host answers at most {cap} at once"
                        ),
                    );
                    Box::pin(async move { Err(err) })
                } else {
                    self.inner.handler.request(&method, params)
                };
                tokio::spawn(async move {
                    let conn = slot.conn.clone();
                    let closing = conn.inner.closing.clone();
                    let answer = tokio::select! {
                        answer = fut => answer,
                        () = closing.cancelled() => return,
                    };
                    let line = conn.inner.codec.answer(&id, answer);
                    let written = tokio::select! {
                        written = conn.write_line(line, false) => written,
                        () = closing.cancelled() => return,
                    };
                    if let Err(err) = written {
                        tracing::debug!(extension = %conn.inner.label, "could not answer {method}: {err}");
                    }
                    drop(slot);
                });
                Ok(())
            }
        }
    }
}

/// One server request being answered; frees its place when the answer is written or dropped.
struct InboundSlot {
    conn: Connection,
}

impl Drop for InboundSlot {
    fn drop(&mut self) {
        self.conn.inner.inbound.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The writing role, held by a caller whose future may be dropped before its write began:
/// the queued lines then go out from a task of their own.
struct WritingRole<'a> {
    conn: &'a Connection,
    held: bool,
}

impl Drop for WritingRole<'_> {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let conn = self.conn.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Err(err) = conn.write_queued().await {
                        tracing::debug!(extension = %conn.inner.label, "could not write queued lines: {err}");
                    }
                });
            }
            Err(_) => {
                conn.broken("the runtime is gone".into());
            }
        }
    }
}

struct TornWrite<'a> {
    conn: &'a Connection,
    armed: bool,
}

impl Drop for TornWrite<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.conn.broken(CloseReason::WriteInterrupted.to_string());
            self.conn.close(CloseReason::WriteInterrupted);
        }
    }
}

struct PendingGuard<'a> {
    conn: &'a Connection,
    id: Id,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Dropped, not awaited: the cancel goes out on its own.
            let _ = self.conn.abandon(self.id.clone());
        }
    }
}

/// The most characters of a server's line an error quotes.
pub const STRAY_CHARS: usize = 120;

/// A line a server wrote, as an error quotes it: escaped for a terminal, and cut to
/// [`STRAY_CHARS`] characters (escapes counted) with an ellipsis.
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

fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
    if line.len() > 120 {
        format!("{text}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, duplex};

    #[test]
    fn a_stray_line_is_escaped_and_cut_short() {
        assert_eq!(stray_preview(b"debug: up"), "debug: up");
        let long = format!("\u{1b}[2J{}", "\u{e9}".repeat(200));
        let shown = stray_preview(long.as_bytes());
        assert!(shown.starts_with("\\x1b[2J\u{e9}"), "{shown}");
        assert_eq!(shown.chars().count(), STRAY_CHARS + 1, "{shown}");
        assert!(shown.ends_with('…'));
        let exact = "x".repeat(STRAY_CHARS);
        assert_eq!(stray_preview(exact.as_bytes()), exact);
    }

    struct Silent;
    impl Handler for Silent {
        fn notification(&self, _: &str, _: Value) {}
        fn request(&self, method: &str, _: Value) -> BoxFuture<Result<Value, RemoteError>> {
            let err = RemoteError::new(RemoteError::METHOD_NOT_FOUND, method);
            Box::pin(async move { Err(err) })
        }
    }

    /// A small JSON-RPC-shaped wire of the tests' own, with string ids (`"h1"`), progress as
    /// `{"progress": id, "output": …}` and no cancel: the core needs no more than a codec.
    struct TestWire;
    impl Codec for TestWire {
        fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
            let v: Value = serde_json::from_slice(line).map_err(Malformed::new)?;
            let id = |v: &Value| match v {
                Value::String(s) => Some(Id::Str(s.as_str().into())),
                Value::Number(n) => n.as_u64().map(Id::Num),
                _ => None,
            };
            if let Some(pid) = v.get("progress").and_then(id) {
                let update = Progress::message(v["output"].as_str().unwrap_or_default());
                return Ok(Frame::Progress { id: pid, update });
            }
            match (
                v.get("id").and_then(id),
                v.get("method").and_then(Value::as_str),
            ) {
                (Some(id), Some(method)) => Ok(Frame::Request {
                    id,
                    method: method.to_string(),
                    params: v["params"].clone(),
                }),
                (None, Some(method)) => Ok(Frame::Notification {
                    method: method.to_string(),
                    params: v["params"].clone(),
                }),
                (Some(id), None) => Ok(Frame::Response {
                    id,
                    result: match v.get("error") {
                        Some(e) => Err(RemoteError::new(0, e.to_string())),
                        None => Ok(serde_json::value::to_raw_value(&v["result"]).unwrap()),
                    },
                }),
                (None, None) => Err(Malformed::new("neither an id nor a method")),
            }
        }
        fn id(&self, n: u64) -> Id {
            Id::Str(format!("h{n}").into())
        }
        fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
            let id = match id {
                Id::Num(n) => json!(n),
                Id::Str(s) => json!(&**s),
            };
            match result {
                Ok(v) => json!({"id": id, "result": v}).to_string(),
                Err(e) => json!({"id": id, "error": {"message": e.message}}).to_string(),
            }
        }
        fn cancel(&self, _: &Id, _: Id) -> Option<String> {
            None
        }
    }

    /// A result as a value.
    fn value(raw: &RawValue) -> Value {
        serde_json::from_str(raw.get()).unwrap()
    }

    fn request(method: &'static str, params: Value) -> impl FnOnce(&Id) -> String {
        move |id| {
            let Id::Str(id) = id else { unreachable!() };
            json!({"id": &**id, "method": method, "params": params}).to_string()
        }
    }

    fn start(
        reader: tokio::io::ReadHalf<DuplexStream>,
        writer: tokio::io::WriteHalf<DuplexStream>,
        handler: Arc<dyn Handler>,
        opts: ConnectionOptions,
    ) -> Connection {
        Connection::start(reader, writer, handler, Arc::new(TestWire), opts)
    }

    /// A connection, and the read/write halves of the server's side of its pipe.
    fn pair(
        cap: usize,
    ) -> (
        Connection,
        tokio::io::ReadHalf<DuplexStream>,
        tokio::io::WriteHalf<DuplexStream>,
    ) {
        let (a, b) = duplex(1 << 20);
        let (host_r, host_w) = tokio::io::split(a);
        let opts = ConnectionOptions {
            label: "t".into(),
            max_frame_bytes: cap,
            ..ConnectionOptions::default()
        };
        let conn = start(host_r, host_w, Arc::new(Silent), opts);
        let (server_r, server_w) = tokio::io::split(b);
        (conn, server_r, server_w)
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    #[allow(clippy::disallowed_methods)] // a real child on real pipes
    async fn both_pipes_of_a_child_grow_once_a_big_frame_crosses_them() {
        // Answers each request with its params, as this module's test wire reads them.
        let script = "import json,sys\nfor l in sys.stdin:\n    v=json.loads(l)\n    print(json.dumps({'id':v['id'],'result':v['params']}),flush=True)";
        let mut child = tokio::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let conn = Connection::start_pipe(
            stdout,
            stdin,
            Arc::new(Silent),
            Arc::new(TestWire),
            ConnectionOptions::default(),
        )
        .unwrap();
        let capacity = |fd: i32| unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) } as usize;
        let stdin_fd = conn.inner.stdin_pipe.as_ref().unwrap().0;
        let stdout_fd = conn.inner.pipe.as_ref().unwrap().raw_fd();
        let small = conn
            .call(
                "t",
                request("t", json!({"text": "hi"})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(value(&small)["text"], "hi");
        assert!(capacity(stdin_fd) < pipe::BIG_PIPE && capacity(stdout_fd) < pipe::BIG_PIPE);
        let text = "x".repeat(200 * 1024);
        let big = conn
            .call(
                "t",
                request("t", json!({"text": text})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(value(&big)["text"].as_str().unwrap().len(), text.len());
        assert_eq!(capacity(stdin_fd), pipe::BIG_PIPE);
        assert_eq!(capacity(stdout_fd), pipe::BIG_PIPE);
    }

    /// A writer that counts its writes and passes them on.
    struct CountedWrites {
        inner: tokio::io::WriteHalf<DuplexStream>,
        writes: Arc<AtomicUsize>,
    }

    impl AsyncWrite for CountedWrites {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    #[tokio::test]
    async fn requests_sent_while_others_are_in_flight_share_writes() {
        let (a, b) = duplex(1 << 20);
        let (host_r, host_w) = tokio::io::split(a);
        let writes = Arc::new(AtomicUsize::new(0));
        let writer = CountedWrites {
            inner: host_w,
            writes: Arc::clone(&writes),
        };
        let conn = Connection::start(
            host_r,
            writer,
            Arc::new(Silent),
            Arc::new(TestWire),
            ConnectionOptions::default(),
        );
        let (server_r, mut server_w) = tokio::io::split(b);
        let calls: Vec<_> = (0..48)
            .map(|n| {
                let c = conn.clone();
                tokio::spawn(async move {
                    c.call("t", request("t", json!({"n": n})), CallOptions::default())
                        .await
                })
            })
            .collect();
        let mut lines = BufReader::new(server_r).lines();
        for _ in 0..48 {
            let line = lines.next_line().await.unwrap().unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            let answer = json!({"id": v["id"], "result": v["params"]["n"]});
            server_w
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
        }
        for (n, call) in calls.into_iter().enumerate() {
            assert_eq!(value(&call.await.unwrap().unwrap()), json!(n));
        }
        // The first call, alone, writes at once; the rest queue behind one caller that lets
        // them run first, and each full batch of 16 goes without waiting for it: 1 + 3 here
        // on this one-thread runtime. One write per request would be 48; holding every
        // batch for the role's holder, 2.
        let writes = writes.load(Ordering::SeqCst);
        assert!(
            (3..=6).contains(&writes),
            "48 requests took {writes} writes"
        );
    }

    #[tokio::test]
    async fn a_caller_dropped_before_its_write_leaves_the_queue_to_a_task_and_close_write_waits_for_it()
     {
        let (conn, server_r, _server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
        let mut lines = BufReader::new(server_r).lines();
        // One call in flight, so the next lets other tasks queue behind it first.
        let c = conn.clone();
        let _first = tokio::spawn(async move {
            c.call("t", request("t", json!(1)), CallOptions::default())
                .await
        });
        assert!(
            lines
                .next_line()
                .await
                .unwrap()
                .unwrap()
                .contains("\"params\":1")
        );
        // Polled once and dropped: it took the writing role and let other tasks run first,
        // so its write had not begun.
        tokio::select! {
            biased;
            _ = conn.call("t", request("t", json!(2)), CallOptions::default()) => {
                panic!("a call with no answer resolved")
            }
            () = std::future::ready(()) => {}
        }
        // A line sent now queues behind the role that was handed on.
        conn.send(json!({"method": "note", "params": 3}).to_string())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), conn.close_write())
            .await
            .expect("close_write waits for the queue, which a task writes");
        let second = lines.next_line().await.unwrap().unwrap();
        assert!(second.contains("\"params\":2"), "{second}");
        let third = lines.next_line().await.unwrap().unwrap();
        assert!(third.contains("\"params\":3"), "{third}");
        assert_eq!(
            lines.next_line().await.unwrap(),
            None,
            "EOF after the queue"
        );
        assert!(!conn.is_closed(), "no line was torn");
    }

    #[tokio::test]
    async fn responses_resolve_out_of_order() {
        let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
        let c1 = conn.clone();
        let c2 = conn.clone();
        let first = tokio::spawn(async move {
            c1.call("t", request("t", json!({"n": 1})), CallOptions::default())
                .await
        });
        let second = tokio::spawn(async move {
            c2.call("t", request("t", json!({"n": 2})), CallOptions::default())
                .await
        });
        let mut lines = BufReader::new(server_r).lines();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let line = lines.next_line().await.unwrap().unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            ids.push((
                v["id"].as_str().unwrap().to_string(),
                v["params"]["n"].as_u64().unwrap(),
            ));
        }
        // Answer in reverse order, with a blank and a malformed line in between.
        for (id, n) in ids.iter().rev() {
            server_w
                .write_all(format!("\nnot json\n{{\"id\":\"{id}\",\"result\":{n}}}\n").as_bytes())
                .await
                .unwrap();
        }
        assert_eq!(value(&first.await.unwrap().unwrap()), json!(1));
        assert_eq!(value(&second.await.unwrap().unwrap()), json!(2));
    }

    #[tokio::test]
    async fn an_oversized_line_closes_the_connection_and_fails_pending_calls() {
        let (conn, _server_r, mut server_w) = pair(64);
        let c = conn.clone();
        let call = tokio::spawn(async move {
            c.call("t", request("t", Value::Null), CallOptions::default())
                .await
        });
        server_w
            .write_all(format!("{}\n", "x".repeat(200)).as_bytes())
            .await
            .unwrap();
        let err = call.await.unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                CallError::Closed(CloseReason::FrameTooLarge { len: 200, cap: 64 })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("frame cap"), "{err}");
        assert!(conn.is_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn progress_resets_the_timeout() {
        let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink_seen = Arc::clone(&seen);
        let opts = CallOptions {
            timeout: Some(Duration::from_millis(100)),
            updates: Some(Arc::new(move |p: &crate::capability::Progress| {
                sink_seen.lock().unwrap().push(p.message.clone())
            })),
            cancel: None,
        };
        let c = conn.clone();
        let call = tokio::spawn(async move { c.call("t", request("t", Value::Null), opts).await });
        let mut lines = BufReader::new(server_r).lines();
        let id = serde_json::from_str::<Value>(&lines.next_line().await.unwrap().unwrap()).unwrap()
            ["id"]
            .as_str()
            .unwrap()
            .to_string();
        for i in 0..5 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            server_w
                .write_all(format!("{{\"progress\":\"{id}\",\"output\":\"{i}\"}}\n").as_bytes())
                .await
                .unwrap();
        }
        server_w
            .write_all(format!("{{\"id\":\"{id}\",\"result\":\"done\"}}\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(value(&call.await.unwrap().unwrap()), json!("done"));
        assert_eq!(seen.lock().unwrap().len(), 5);
    }

    /// One watchdog keeps every call's time: a call that runs out sooner than the one it
    /// watches for wakes it, and each call fails at its own deadline, by its method's name.
    #[tokio::test(start_paused = true)]
    async fn each_call_times_out_at_its_own_deadline() {
        let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
        let start = Instant::now();
        let call = |method: &'static str, ms: u64| {
            let c = conn.clone();
            tokio::spawn(async move {
                let res = c
                    .call(
                        method,
                        request(method, Value::Null),
                        CallOptions::timeout(Duration::from_millis(ms)),
                    )
                    .await;
                (res, start.elapsed())
            })
        };
        let mut lines = BufReader::new(server_r).lines();
        let long = call("long", 10_000);
        lines.next_line().await.unwrap().unwrap();
        let short = call("short", 100);
        lines.next_line().await.unwrap().unwrap();
        let answered = call("answered", 100);
        let id = serde_json::from_str::<Value>(&lines.next_line().await.unwrap().unwrap()).unwrap()
            ["id"]
            .clone();
        server_w
            .write_all(format!("{}\n", json!({"id": id, "result": 1})).as_bytes())
            .await
            .unwrap();
        assert_eq!(value(&answered.await.unwrap().0.unwrap()), json!(1));

        let within = |task| tokio::time::timeout(Duration::from_secs(60), task);
        let (res, at) = within(short).await.expect("short never ran out").unwrap();
        match res {
            Err(CallError::Timeout { method, after }) => {
                assert_eq!(
                    (method.as_str(), after),
                    ("short", Duration::from_millis(100))
                );
            }
            other => panic!("short: {other:?}"),
        }
        assert!(
            at >= Duration::from_millis(100) && at < Duration::from_secs(1),
            "short timed out at {at:?}"
        );
        assert!(!long.is_finished(), "the long call ran out early");
        let (res, at) = within(long).await.expect("long never ran out").unwrap();
        assert!(
            matches!(&res, Err(CallError::Timeout { method, .. }) if method == "long"),
            "{res:?}"
        );
        assert!(
            at >= Duration::from_secs(10) && at < Duration::from_secs(11),
            "long timed out at {at:?}"
        );
        assert!(conn.lock_pending().slots.is_empty(), "a slot was left");
    }

    /// Answers no request, ever.
    struct Stuck;
    impl Handler for Stuck {
        fn notification(&self, _: &str, _: Value) {}
        fn request(&self, _: &str, _: Value) -> BoxFuture<Result<Value, RemoteError>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn server_requests_past_the_cap_are_refused_then_the_server_is_cut_off() {
        let (a, b) = duplex(1 << 20);
        let (host_r, host_w) = tokio::io::split(a);
        let opts = ConnectionOptions {
            label: "t".into(),
            max_inbound_requests: 2,
            ..ConnectionOptions::default()
        };
        let conn = start(host_r, host_w, Arc::new(Stuck), opts);
        let (server_r, mut server_w) = tokio::io::split(b);
        let ask = |id: u64| format!("{{\"method\":\"question\",\"id\":{id},\"params\":{{}}}}\n");
        for id in 1..=3 {
            server_w.write_all(ask(id).as_bytes()).await.unwrap();
        }
        // Two are being handled; the third is answered at once with an error.
        let mut lines = BufReader::new(server_r).lines();
        let answer: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], 3, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too many requests in flight"),
            "{answer}"
        );
        assert!(!conn.is_closed());
        // Two handled and two more refusals in flight: the next one is past every bound.
        for id in 4..=6 {
            server_w.write_all(ask(id).as_bytes()).await.unwrap();
        }
        assert_eq!(conn.closed().await, CloseReason::TooManyRequests { cap: 2 });
    }
}
