//! The write side: one caller at a time writes; lines sent meanwhile queue behind it and go
//! out with its next write.

use super::{CallError, CloseReason, Connection, pipe};
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};

pub(super) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Lines queued behind a writing role's holder that go out at once, without it: the server
/// starts on them while the rest are made.
const WRITE_BATCH: usize = 16;

/// The lines on their way to the server. One caller at a time writes (it holds the role);
/// lines sent meanwhile queue here and go out with its next write, in the order they came.
#[derive(Default)]
pub(super) struct Outbox {
    /// Queued lines, each with its newline. Empty whenever nobody holds the role.
    bytes: Vec<u8>,
    /// Someone holds the writing role: it writes what is queued before it lets go.
    writing: bool,
    /// How many lines `bytes` holds.
    lines: usize,
    /// A write failed: the stream is gone, and every later line fails the same way.
    broken: Option<String>,
}

impl Connection {
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

    pub(super) fn lock_outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
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
    pub(super) async fn write_line(&self, line: String, batch: bool) -> Result<(), CallError> {
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
    pub(crate) async fn send(&self, line: String) -> Result<(), CallError> {
        self.write_line(line, false).await
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
