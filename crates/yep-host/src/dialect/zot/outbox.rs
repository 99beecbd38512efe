//! The frames queued for one extension, written in order by one task within bounds; an
//! extension that does not read is disconnected.

use super::{OUTBOX_BYTES, OUTBOX_FRAMES, WRITE_BOUND};
use crate::rpc::{CloseReason, WeakConnection};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The frames queued for one extension, written in order by one task: at most
/// [`OUTBOX_FRAMES`] (plus the one being written) or [`OUTBOX_BYTES`]; past that the
/// extension is disconnected, never silently dropped from. A write that blocks for
/// [`WRITE_BOUND`] disconnects it too.
#[derive(Default)]
pub(super) struct Outbox {
    state: Mutex<OutboxState>,
    wake: Notify,
    idle: Notify,
}

#[derive(Default)]
struct OutboxState {
    queue: std::collections::VecDeque<String>,
    bytes: usize,
    writing: bool,
    /// The writer is gone (the connection closed): nothing more is written, or waited for.
    dead: bool,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `line`, or say why the extension must be disconnected.
    pub(super) fn push(&self, line: String) -> Result<(), CloseReason> {
        let mut state = self.lock();
        if state.dead {
            // Disconnected already: its calls fail on their own.
            return Ok(());
        }
        if state.queue.len() >= OUTBOX_FRAMES || state.bytes + line.len() > OUTBOX_BYTES {
            return Err(CloseReason::Backlogged {
                frames: OUTBOX_FRAMES,
                bytes: OUTBOX_BYTES,
            });
        }
        state.bytes += line.len();
        state.queue.push_back(line);
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// Nothing queued or being written.
    pub(super) fn is_empty(&self) -> bool {
        let state = self.lock();
        state.dead || (state.queue.is_empty() && !state.writing)
    }

    /// Resolves once everything queued has been written.
    pub(super) async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            if self.is_empty() {
                return;
            }
            // The timeout covers a wake that raced the check.
            let _ = tokio::time::timeout(Duration::from_millis(20), idle).await;
        }
    }

    /// The writer: until the connection is gone. Then the queue is dead, so nothing waits on
    /// it.
    pub(super) async fn write(self: Arc<Self>, conn: WeakConnection) {
        self.write_until_closed(&conn).await;
        {
            let mut state = self.lock();
            state.dead = true;
            state.queue.clear();
            state.bytes = 0;
            state.writing = false;
        }
        self.idle.notify_waiters();
    }

    async fn write_until_closed(&self, conn: &WeakConnection) {
        loop {
            let next = {
                let mut state = self.lock();
                let next = state.queue.pop_front();
                if let Some(line) = &next {
                    state.bytes -= line.len();
                }
                state.writing = next.is_some();
                next
            };
            let Some(line) = next else {
                self.idle.notify_waiters();
                // Idle without holding the connection: it goes when its peer does.
                let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
                if conn.upgrade().is_none_or(|c| c.is_closed()) {
                    return;
                }
                continue;
            };
            let Some(live) = conn.upgrade() else { return };
            match tokio::time::timeout(WRITE_BOUND, live.send(line)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    live.close(CloseReason::WriteStalled { after: WRITE_BOUND });
                    return;
                }
            }
        }
    }
}
