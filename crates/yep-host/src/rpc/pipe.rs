//! Reading a server's stdout pipe two ways: a reader task woken by readiness, and a caller that
//! busy-polls it for a few microseconds right after sending a request.
//!
//! On an idle machine a blocked reader costs a scheduler wake-up (tens of µs on a VM, against a
//! ~1 µs pipe hop) when the answer lands; an echo or a hook decision usually lands within
//! microseconds, so the caller reads its own answer instead.
//!
//! The reader task must then not be woken at all: on two cores a worker thread woken by every
//! answer the caller reads itself takes a core from the caller or the server (one context
//! switch per call). On Linux the reader waits on a private epoll set holding only the pipe,
//! and a spinning caller stops the set watching the pipe while it reads
//! ([`PipeInput::quiet`]). The reader task watches it again when the caller is done
//! ([`PipeInput::rewatch`]), which reports whatever arrived meanwhile, so nothing is left
//! unread.

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
    /// What the reader task waits on: the pipe's private epoll set on Linux, the pipe
    /// elsewhere.
    wake: AsyncFd<OwnedFd>,
    /// The pipe, when `wake` is its epoll set.
    pipe: Option<OwnedFd>,
    state: Mutex<LineBuffer>,
    /// How long a caller busy-polls for its answer.
    pub(super) spin: Duration,
    /// Tells the reader task a spinning caller let go of the buffer (and of the pipe).
    released: Notify,
    /// Whether the epoll set watches the pipe for reading, and how many callers spin on it.
    watching: Mutex<Watching>,
    /// Whether the pipe was grown for a big frame ([`grow`]).
    grown: std::sync::atomic::AtomicBool,
    /// How many lines the last drain that read any handed over: one while calls go one at a
    /// time, more while several are in flight ([`PipeInput::one_at_a_time`]).
    last_drain: std::sync::atomic::AtomicUsize,
}

impl PipeInput {
    /// Take over a pipe's read end (switched to non-blocking) on the current runtime.
    pub(super) fn new(fd: OwnedFd, cap: usize, spin: Duration) -> std::io::Result<PipeInput> {
        set_nonblocking(&fd)?;
        let (waited, pipe) = wait_set(fd)?;
        // SAFETY: an `OwnedFd` stays open and always reports the same descriptor while the
        // `AsyncFd` owns it.
        let wake =
            unsafe { AsyncFd::register_with_interest(waited, tokio::io::Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
        Ok(PipeInput {
            wake,
            pipe,
            state: Mutex::new(LineBuffer::new(cap)),
            spin,
            released: Notify::new(),
            watching: Mutex::new(Watching {
                reading: true,
                spinners: 0,
            }),
            grown: std::sync::atomic::AtomicBool::new(false),
            last_drain: std::sync::atomic::AtomicUsize::new(0),
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
        let fd = self.raw_fd();
        let (mut lines, mut bytes) = (0usize, 0usize);
        let drained = loop {
            if lines >= LINE_BUDGET || bytes >= BYTE_BUDGET {
                break Drained::Budget;
            }
            match next(&mut state, fd, &self.grown, &mut on_line) {
                Ok(Step::Line(len)) => {
                    lines += 1;
                    bytes += len;
                }
                Ok(Step::WouldBlock) => break Drained::Empty,
                Err(reason) => return Some(Err(reason)),
            }
        };
        if lines > 0 {
            self.last_drain
                .store(lines, std::sync::atomic::Ordering::Relaxed);
        }
        Some(Ok(drained))
    }

    /// Whether the server's lines come one at a time: the last drain that read any handed
    /// over one. Under many calls in flight answers arrive together, and a caller alone for
    /// a moment would only spin while the others' next requests wait for its core.
    pub(super) fn one_at_a_time(&self) -> bool {
        self.last_drain.load(std::sync::atomic::Ordering::Relaxed) <= 1
    }

    /// The pipe's descriptor.
    pub(super) fn raw_fd(&self) -> i32 {
        self.pipe
            .as_ref()
            .unwrap_or(self.wake.get_ref())
            .as_raw_fd()
    }

    /// A caller starts reading its own answer: until the guard is dropped, what lands on the
    /// pipe wakes no one (the caller is polling it); an error or a hang-up still does.
    /// Dropping the guard hands the buffer back and tells the reader task, which watches the
    /// pipe again ([`PipeInput::rewatch`]) once no caller spins. The reader runs when the
    /// caller's task next yields (it is woken on the caller's thread), so calls one after
    /// another with no pause between them leave the pipe unwatched and pay no `epoll_ctl`;
    /// the one call in a while pays its two off the wait for its answer, one of them after it.
    pub(super) fn quiet(&self) -> Quiet<'_> {
        if let Some(pipe) = &self.pipe {
            let mut watching = self.lock_watching();
            watching.spinners += 1;
            if watching.reading {
                watch(self.wake.get_ref().as_raw_fd(), pipe.as_raw_fd(), false);
                watching.reading = false;
            }
        }
        Quiet { input: self }
    }

    /// Watch the pipe for reading again, unless a caller spins on it. Watching polls the pipe
    /// at once: data already waiting wakes the reader.
    fn rewatch(&self) {
        if let Some(pipe) = &self.pipe {
            let mut watching = self.lock_watching();
            if watching.spinners == 0 && !watching.reading {
                watch(self.wake.get_ref().as_raw_fd(), pipe.as_raw_fd(), true);
                watching.reading = true;
            }
        }
    }

    fn lock_watching(&self) -> std::sync::MutexGuard<'_, Watching> {
        self.watching.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Empty the epoll set's ready list, so watching the pipe again ([`PipeInput::rewatch`])
    /// reports data already waiting: the set reports a pipe only once until it is collected
    /// here. The reader task calls this on every wake-up, before it reads.
    fn collect(&self) {
        #[cfg(target_os = "linux")]
        if self.pipe.is_some() {
            let mut event = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: the set is open while `self` lives; the one event goes to a local.
            unsafe { libc::epoll_wait(self.wake.get_ref().as_raw_fd(), &mut event, 1, 0) };
        }
    }

    /// The reader task: wait for readiness, drain, repeat, until the stream ends. After each
    /// budget of lines it yields, so a server that writes without pause cannot hold a runtime
    /// thread: other extensions, timers and callers run in between.
    pub(super) async fn run(
        &self,
        mut on_line: impl FnMut(&[u8]) -> Result<(), CloseReason>,
    ) -> CloseReason {
        loop {
            let ready = tokio::select! {
                biased;
                () = self.released.notified() => {
                    self.rewatch();
                    continue;
                }
                ready = self.wake.readable() => ready,
            };
            let mut ready = match ready {
                Ok(ready) => ready,
                Err(err) => return CloseReason::Io(err.to_string()),
            };
            self.collect();
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
                    self.rewatch();
                }
            }
        }
    }
}

/// A caller reading its own answer: while alive, the pipe's epoll set does not watch the pipe
/// for reading ([`PipeInput::quiet`]).
pub(super) struct Quiet<'a> {
    input: &'a PipeInput,
}

impl Drop for Quiet<'_> {
    fn drop(&mut self) {
        if self.input.pipe.is_some() {
            self.input.lock_watching().spinners -= 1;
        }
        // The caller is done with the buffer and the pipe: the reader takes both back. A
        // stored permit if the reader is not waiting: never a lost wake-up, never a syscall.
        self.input.released.notify_one();
    }
}

/// Whether a pipe's epoll set watches it for reading, and how many callers spin on it.
struct Watching {
    reading: bool,
    spinners: usize,
}

/// What the reader task waits on for the pipe `fd`, and the pipe itself if that is a private
/// epoll set holding it (Linux); elsewhere the pipe itself.
fn wait_set(fd: OwnedFd) -> std::io::Result<(OwnedFd, Option<OwnedFd>)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: a new descriptor, owned from here on.
        let set = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if set < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `set` was just created and nothing else owns it.
        let set = unsafe { OwnedFd::from_raw_fd(set) };
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0,
        };
        // SAFETY: both descriptors are open.
        if unsafe {
            libc::epoll_ctl(
                set.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        } < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok((set, Some(fd)))
    }
    #[cfg(not(target_os = "linux"))]
    Ok((fd, None))
}

/// Watch the pipe `fd` in its epoll set `set` for reading (edge-triggered: the reader drains
/// it to empty), or not. Error and hang-up are reported either way. A failure changes nothing:
/// the reader then wakes as it did.
fn watch(set: i32, fd: i32, reading: bool) {
    #[cfg(target_os = "linux")]
    {
        let events = if reading {
            libc::EPOLLIN | libc::EPOLLET
        } else {
            libc::EPOLLET
        };
        let mut event = libc::epoll_event {
            events: events as u32,
            u64: 0,
        };
        // SAFETY: both descriptors are open while their `PipeInput` lives.
        unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_MOD, fd, &mut event) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (set, fd, reading);
}

pub fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
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
            let mut ready = input.wake.readable().await.unwrap();
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
        assert_eq!(capacity(quiet.raw_fd()), default);

        // Written from a thread: it blocks until the reader drains the first 64 KiB.
        let writer = std::thread::spawn(move || {
            busy_writer.write_all(&vec![b'y'; 200 * 1024]).unwrap();
            busy_writer.write_all(b"\n").unwrap();
            busy_writer
        });
        assert_eq!(drain(&busy, 1).await, [200 * 1024]);
        drop(writer.join().unwrap());
        assert_eq!(capacity(busy.raw_fd()), BIG_PIPE);
    }

    /// Callers spin only while answers come one at a time: a drain that handed over several
    /// lines stops it until a drain hands over one again; a drain that read nothing changes
    /// nothing.
    #[tokio::test]
    async fn lines_that_come_together_stop_callers_spinning_until_one_comes_alone() {
        use std::io::Write;
        let (fd, mut writer) = pipe();
        let input = PipeInput::new(fd, 1 << 20, Duration::from_micros(50)).unwrap();
        let ignore = |_: &[u8]| Ok(());
        writer.write_all(b"a\n").unwrap();
        assert_eq!(drain(&input, 1).await, [1]);
        assert!(input.one_at_a_time());
        writer.write_all(b"bb\ncc\ndd\n").unwrap();
        assert_eq!(drain(&input, 3).await, [2, 2, 2]);
        assert!(!input.one_at_a_time(), "three lines came in one drain");
        assert!(matches!(input.try_drain(ignore), Some(Ok(Drained::Empty))));
        assert!(!input.one_at_a_time(), "an empty drain is no sign");
        writer.write_all(b"e\n").unwrap();
        assert_eq!(drain(&input, 1).await, [1]);
        assert!(input.one_at_a_time());
    }

    /// A reader task on `input` that sends each line it reads.
    fn reading(
        input: &std::sync::Arc<PipeInput>,
    ) -> (
        tokio::task::JoinHandle<CloseReason>,
        tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let input = std::sync::Arc::clone(input);
        let reader = tokio::spawn(async move {
            input
                .run(|line| {
                    let _ = tx.send(line.to_vec());
                    Ok(())
                })
                .await
        });
        (reader, rx)
    }

    /// While a caller reads for itself the reader task is not woken, and once the caller is
    /// done whatever it left is read, and what comes later too (the reader watches the pipe
    /// again): also after earlier wake-ups (a set that reports the pipe only once until
    /// collected would otherwise stay silent), and whether the caller was a task on the
    /// reader's runtime (the reader is woken on its thread) or not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_pipe_wakes_no_reader_and_hands_over_what_is_left_once_done() {
        use std::io::Write;
        let (fd, mut writer) = pipe();
        let input = std::sync::Arc::new(PipeInput::new(fd, 1 << 20, Duration::ZERO).unwrap());
        let (reader, mut rx) = reading(&input);
        let wait = Duration::from_secs(5);
        for round in 0..4u8 {
            writer.write_all(&[b'a' + round, b'\n']).unwrap();
            let woke = tokio::time::timeout(wait, rx.recv()).await.unwrap();
            assert_eq!(woke.unwrap(), [b'a' + round]);
            // The reader reads on to an empty pipe before it sleeps again: wait until it has
            // let go of the buffer.
            while input.state.try_lock().is_err() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }

            // Even rounds spin on a thread outside the runtime's workers (as a `block_on`
            // caller does); odd ones in a task, whose end wakes the reader on its own thread.
            let (spinning, go) = (
                tokio::sync::oneshot::channel(),
                tokio::sync::oneshot::channel(),
            );
            let caller = {
                let input = std::sync::Arc::clone(&input);
                let (started, done): (_, tokio::sync::oneshot::Receiver<()>) = (spinning.0, go.1);
                async move {
                    let quiet = input.quiet();
                    let _ = started.send(());
                    let _ = done.await;
                    drop(quiet);
                }
            };
            let caller = if round % 2 == 0 {
                let here = tokio::runtime::Handle::current();
                std::thread::spawn(move || here.block_on(caller));
                None
            } else {
                Some(tokio::spawn(caller))
            };
            spinning.1.await.unwrap();
            writer.write_all(&[b'A' + round, b'\n']).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(rx.try_recv().is_err(), "round {round}: the reader woke");
            go.0.send(()).unwrap();
            if let Some(caller) = caller {
                caller.await.unwrap();
            }
            let left = tokio::time::timeout(wait, rx.recv()).await.unwrap();
            assert_eq!(left.unwrap(), [b'A' + round], "round {round}");
        }
        drop(writer);
        assert!(matches!(reader.await.unwrap(), CloseReason::Eof));
    }

    /// Two callers spinning at once: the pipe is watched again only when both are done.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pipe_is_watched_again_once_the_last_spinning_caller_is_done() {
        use std::io::Write;
        let (fd, mut writer) = pipe();
        let input = std::sync::Arc::new(PipeInput::new(fd, 1 << 20, Duration::ZERO).unwrap());
        let (reader, mut rx) = reading(&input);
        let (first, second) = (input.quiet(), input.quiet());
        drop(first);
        writer.write_all(b"late\n").unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            rx.try_recv().is_err(),
            "the reader woke while a caller spun"
        );
        drop(second);
        let left = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(left.unwrap().unwrap(), b"late");
        drop(writer);
        assert!(matches!(reader.await.unwrap(), CloseReason::Eof));
    }
}
