//! Reading a server's stdout pipe two ways: a reader task woken by readiness, and a caller that
//! busy-polls it for a few microseconds right after sending a request.
//!
//! On an idle machine a blocked reader costs a scheduler wake-up (tens of µs on a VM, against a
//! ~1 µs pipe hop) when the answer lands; an echo or a hook decision usually lands within
//! microseconds, so the caller reads its own answer instead.

use super::CloseReason;
use crate::framing::{Frame, LineBuffer};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// Lines one wake-up of the reader hands over before it yields.
pub(super) const LINE_BUDGET: usize = 256;
/// Bytes one wake-up of the reader hands over before it yields.
pub(super) const BYTE_BUDGET: usize = 1 << 20;

/// How a drain ended: nothing more to read now, or the budget ran out with more waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drained {
    Empty,
    Budget,
}

/// What one step of reading produced: a line handed over (of this many bytes), or the end of
/// the readable data for now.
enum Step {
    Line(usize),
    WouldBlock,
}

/// Hand over the next complete line, reading the pipe when none is buffered. Lines are read
/// straight into the buffer and handed over from it: a line that fits one read is never copied.
fn next(
    lines: &mut LineBuffer,
    fd: i32,
    on_line: &mut impl FnMut(&[u8]) -> Result<(), CloseReason>,
) -> Result<Step, CloseReason> {
    let cap = lines.cap();
    loop {
        match lines.next_frame() {
            Some(Frame::Line(line)) => {
                on_line(line)?;
                return Ok(Step::Line(line.len()));
            }
            Some(Frame::TooLong(len)) => return Err(CloseReason::FrameTooLarge { len, cap }),
            None => {}
        }
        // Past the cap the connection is dropped: no need to read on to the newline.
        if let Some(len) = lines.overflowing() {
            return Err(CloseReason::FrameTooLarge { len, cap });
        }
        let buf = lines.buf_mut(64 * 1024);
        let spare = buf.spare_capacity_mut();
        // SAFETY: reading into this Vec's spare capacity; only the bytes read are exposed.
        let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
        match n {
            0 => return Err(CloseReason::Eof),
            n if n > 0 => {
                // SAFETY: `read` initialised exactly `n` bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n as usize) };
            }
            _ => {
                let err = std::io::Error::last_os_error();
                match err.kind() {
                    std::io::ErrorKind::WouldBlock => return Ok(Step::WouldBlock),
                    std::io::ErrorKind::Interrupted => continue,
                    _ => return Err(CloseReason::Io(err.to_string())),
                }
            }
        }
    }
}

/// The read side of a pipe connection.
pub(super) struct PipeInput {
    fd: AsyncFd<OwnedFd>,
    state: Mutex<LineBuffer>,
    /// How long a caller busy-polls for its answer.
    pub(super) spin: Duration,
    /// Tells the reader task a spinning caller let go of the buffer.
    released: Notify,
}

impl PipeInput {
    /// Take over a pipe's read end (switched to non-blocking) on the current runtime.
    pub(super) fn new(fd: OwnedFd, cap: usize, spin: Duration) -> std::io::Result<PipeInput> {
        set_nonblocking(&fd)?;
        // SAFETY: an `OwnedFd` stays open and always reports the same descriptor while the
        // `AsyncFd` owns it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(PipeInput {
            fd,
            state: Mutex::new(LineBuffer::new(cap)),
            spin,
            released: Notify::new(),
        })
    }

    /// Read and hand over the complete lines available now, without blocking, up to
    /// [`LINE_BUDGET`] lines or [`BYTE_BUDGET`] bytes. `None` when another reader holds the
    /// buffer; `Some(Ok(Drained::Budget))` when more may be waiting; `Some(Err)` when the
    /// stream is over.
    pub(super) fn try_drain(
        &self,
        mut on_line: impl FnMut(&[u8]) -> Result<(), CloseReason>,
    ) -> Option<Result<Drained, CloseReason>> {
        let mut state = self.state.try_lock().ok()?;
        let fd = self.fd.get_ref().as_raw_fd();
        let (mut lines, mut bytes) = (0usize, 0usize);
        loop {
            if lines >= LINE_BUDGET || bytes >= BYTE_BUDGET {
                return Some(Ok(Drained::Budget));
            }
            match next(&mut state, fd, &mut on_line) {
                Ok(Step::Line(len)) => {
                    lines += 1;
                    bytes += len;
                }
                Ok(Step::WouldBlock) => return Some(Ok(Drained::Empty)),
                Err(reason) => return Some(Err(reason)),
            }
        }
    }

    /// A spinning caller is done with the buffer.
    pub(super) fn release(&self) {
        // A stored permit if the reader is not waiting: never a lost wake-up, never a syscall.
        self.released.notify_one();
    }

    /// The reader task: wait for readiness, drain, repeat, until the stream ends. After each
    /// budget of lines it yields, so a server that writes without pause cannot hold a runtime
    /// thread: other extensions, timers and callers run in between.
    pub(super) async fn run(
        &self,
        mut on_line: impl FnMut(&[u8]) -> Result<(), CloseReason>,
    ) -> CloseReason {
        loop {
            let mut ready = match self.fd.readable().await {
                Ok(ready) => ready,
                Err(err) => return CloseReason::Io(err.to_string()),
            };
            match self.try_drain(&mut on_line) {
                Some(Ok(Drained::Empty)) => ready.clear_ready(),
                Some(Ok(Drained::Budget)) => {
                    drop(ready);
                    tokio::task::yield_now().await;
                }
                Some(Err(reason)) => return reason,
                // A caller is reading; it drains what arrived and then lets us know.
                None => {
                    drop(ready);
                    self.released.notified().await;
                }
            }
        }
    }
}

fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags < 0 || libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
