//! The calls in flight: each waits on its slot in the pending table, one watchdog task times
//! them out, and a call abandoned sends the wire's cancel.

use super::{
    CallError, CallOptions, CloseReason, Connection, Id, RawValue, UpdateSink, WeakConnection,
    log_abuse, pipe,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// How long a call cancelled through its token waits for its cancel to be written before it
/// resolves anyway (a server that stopped reading holds the write up; it goes on alone).
const CANCEL_WRITE_WAIT: Duration = Duration::from_millis(100);

pub(super) struct Slot {
    pub(super) tx: oneshot::Sender<Result<Box<RawValue>, CallError>>,
    /// Where this call's progress goes; with one, progress also pushes its timeout out.
    pub(super) sink: Option<UpdateSink>,
    /// Micros since `Inner::epoch` of the call's start, or (with a sink) of its last progress.
    pub(super) last_micros: u64,
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

pub(super) struct Pending {
    pub(super) slots: HashMap<Id, Slot, foldhash::fast::RandomState>,
    pub(super) closed: Option<CloseReason>,
    /// When the watchdog next looks at the calls' timeouts (micros since `Inner::epoch`;
    /// `u64::MAX`: when woken).
    pub(super) watch_at: u64,
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
pub(super) async fn watchdog(conn: WeakConnection, wake: Arc<Notify>, epoch: Instant) {
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

impl Connection {
    pub(super) fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner())
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
