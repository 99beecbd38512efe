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

/// A pipe's capacity once a frame larger than a default pipe (64 KiB) crossed it: a big
/// result then moves in one write and one read, not a write that waits for the reader to drain
/// it piece by piece (a wake-up each, tens of µs on a VM). Only pipes that carried a big frame
/// grow, so the user's pipe-buffer budget (`pipe-user-pages-soft`) is spent on extensions that
/// need it; the default `pipe-max-size` allows it unprivileged.
pub(super) const BIG_PIPE: usize = 1 << 20;

/// A frame longer than this grows the pipe it crossed to [`BIG_PIPE`].
pub(super) const GROW_AT: usize = 64 * 1024;

/// Grow the pipe `fd` to [`BIG_PIPE`], once: `grown` says whether it was tried already. A
/// refusal (a lower `pipe-max-size`, a spent budget) leaves the pipe as it was.
pub(super) fn grow(fd: i32, grown: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    if grown.swap(true, Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: fcntl on a descriptor the caller holds open; a failure changes nothing.
    unsafe {
        libc::fcntl(fd, libc::F_SETPIPE_SZ, BIG_PIPE as libc::c_int);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}

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
    grown: &std::sync::atomic::AtomicBool,
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
                if buf.len() > GROW_AT {
                    grow(fd, grown);
                }
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
    /// Whether the pipe was grown for a big frame ([`grow`]).
    grown: std::sync::atomic::AtomicBool,
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
            grown: std::sync::atomic::AtomicBool::new(false),
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
            match next(&mut state, fd, &self.grown, &mut on_line) {
                Ok(Step::Line(len)) => {
                    lines += 1;
                    bytes += len;
                }
                Ok(Step::WouldBlock) => return Some(Ok(Drained::Empty)),
                Err(reason) => return Some(Err(reason)),
            }
        }
    }

    /// The pipe's descriptor.
    #[cfg(test)]
    pub(super) fn raw_fd(&self) -> i32 {
        self.fd.get_ref().as_raw_fd()
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    /// A pipe: its read end, and a blocking writer on its write end.
    fn pipe() -> (OwnedFd, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: `pipe` fills both descriptors, which we then own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe {
            (
                OwnedFd::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        }
    }

    fn capacity(fd: i32) -> usize {
        // SAFETY: F_GETPIPE_SZ only reads.
        unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) as usize }
    }

    /// Read `expected` lines from `input`, waiting for each to arrive.
    async fn drain(input: &PipeInput, expected: usize) -> Vec<usize> {
        let mut lines = Vec::new();
        while lines.len() < expected {
            let mut ready = input.fd.readable().await.unwrap();
            input
                .try_drain(|line| {
                    lines.push(line.len());
                    Ok(())
                })
                .unwrap()
                .unwrap();
            ready.clear_ready();
        }
        lines
    }

    #[tokio::test]
    async fn a_pipe_grows_once_a_big_frame_crosses_it_and_a_quiet_one_does_not() {
        use std::io::Write;
        let (quiet_fd, mut quiet_writer) = pipe();
        let (busy_fd, mut busy_writer) = pipe();
        let default = capacity(quiet_fd.as_raw_fd());
        let quiet = PipeInput::new(quiet_fd, 4 << 20, Duration::ZERO).unwrap();
        let busy = PipeInput::new(busy_fd, 4 << 20, Duration::ZERO).unwrap();

        quiet_writer.write_all(&[b'x'; 1000]).unwrap();
        quiet_writer.write_all(b"\n").unwrap();
        assert_eq!(drain(&quiet, 1).await, [1000]);
        assert_eq!(capacity(quiet.fd.get_ref().as_raw_fd()), default);

        // Written from a thread: it blocks until the reader drains the first 64 KiB.
        let writer = std::thread::spawn(move || {
            busy_writer.write_all(&vec![b'y'; 200 * 1024]).unwrap();
            busy_writer.write_all(b"\n").unwrap();
            busy_writer
        });
        assert_eq!(drain(&busy, 1).await, [200 * 1024]);
        drop(writer.join().unwrap());
        assert_eq!(capacity(busy.fd.get_ref().as_raw_fd()), BIG_PIPE);
    }
}
