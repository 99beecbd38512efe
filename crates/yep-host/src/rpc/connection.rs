//! The connection itself: its shared state, starting it over a reader/writer pair or a
//! child's pipes, and closing it.

use super::pending::{Pending, watchdog};
use super::reader::NoiseBucket;
use super::writer::{Outbox, Writer};
use super::{CallError, CloseReason, Codec, ConnectionOptions, Handler, Tap, log_abuse, pipe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(super) struct Inner {
    pub(super) label: String,
    pub(super) writer: tokio::sync::Mutex<Option<Writer>>,
    /// Lines waiting for the caller that is writing ([`Connection::write_line`]).
    pub(super) outbox: Mutex<Outbox>,
    pub(super) pending: Mutex<Pending>,
    pub(super) next_id: AtomicU64,
    pub(super) epoch: Instant,
    pub(super) closed: tokio::sync::watch::Sender<Option<CloseReason>>,
    /// Cancelled on close: reverse-request tasks stop waiting for an answer nobody can send.
    pub(super) closing: CancellationToken,
    pub(super) handler: Arc<dyn Handler>,
    pub(super) codec: Arc<dyn Codec>,
    /// The read side, when it is a pipe a caller may busy-poll.
    pub(super) pipe: Option<pipe::PipeInput>,
    pub(super) tap: Option<Tap>,
    pub(super) noise: Mutex<NoiseBucket>,
    pub(super) noise_rate: u32,
    /// The first line that was not the wire's ([`stray_preview`](super::stray_preview)): a log
    /// line on stdout, most likely, which a failed handshake names.
    pub(super) first_stray: std::sync::OnceLock<String>,
    /// Server requests being answered now, and the cap.
    pub(super) inbound: AtomicUsize,
    pub(super) max_inbound: usize,
    /// The server's stdin pipe, grown once a big frame goes to it ([`pipe::grow`]). Only
    /// touched under the writer's lock while the writer (which owns it) is there.
    pub(super) stdin_pipe: Option<(i32, AtomicBool)>,
    /// Wakes the [`watchdog`]: a call's deadline is earlier than it knew, or the connection
    /// closed or is gone.
    pub(super) watch_wake: Arc<Notify>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watch_wake.notify_one();
    }
}

/// A live, multiplexed connection to one server. Cheap to clone.
#[derive(Clone)]
pub struct Connection {
    pub(super) inner: Arc<Inner>,
}

/// A [`Connection`] that may be gone ([`Connection::downgrade`]).
#[derive(Clone)]
pub(crate) struct WeakConnection(std::sync::Weak<Inner>);

impl WeakConnection {
    pub(crate) fn upgrade(&self) -> Option<Connection> {
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

    pub(super) fn new(
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
    pub(crate) fn downgrade(&self) -> WeakConnection {
        WeakConnection(Arc::downgrade(&self.inner))
    }

    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.lock_pending().closed.clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.close_reason().is_some()
    }

    /// The first line the server wrote that the codec could not read, escaped and cut short
    /// ([`stray_preview`](super::stray_preview)); skipped, as every such line is.
    pub(crate) fn first_stray_line(&self) -> Option<&str> {
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

    pub(super) fn micros(&self) -> u64 {
        self.inner.epoch.elapsed().as_micros() as u64
    }
}
