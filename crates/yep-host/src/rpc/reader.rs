//! The read side: one reader task (or a spinning caller) routes each line the server writes,
//! and charges what the server says unasked to its noise budget.

use super::lines::{ReadLine, read_line_capped};
use super::{CallError, CloseReason, Connection, Frame, pipe, preview, stray_preview};
use crate::capability::RemoteError;
use crate::framing::LineBuffer;
use std::sync::atomic::Ordering;
use tokio::io::AsyncBufRead;
use tokio::time::Instant;

/// A token bucket over a server's unsolicited lines.
pub(super) struct NoiseBucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    burst: f64,
}

impl NoiseBucket {
    pub(super) fn new(rate: u32, burst: u32) -> NoiseBucket {
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

impl Connection {
    pub(super) async fn read_loop<R: AsyncBufRead + Unpin>(
        &self,
        reader: &mut R,
        cap: usize,
    ) -> CloseReason {
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
    pub(super) fn dispatch(&self, line: &[u8]) -> Result<(), CloseReason> {
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
