//! Bounded line reading and the shared, locked wire writer.

use std::io::{self, BufRead, Read, Write};
use std::sync::Mutex;
use yep_protocol::framing::{Frame, LineBuffer};

/// What one bounded read produced.
pub(crate) enum Line<'a> {
    /// A complete line without its newline or a `\r` before it (may be empty).
    Complete(&'a [u8]),
    /// A line longer than the cap; its bytes were discarded up to the newline.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Read one `\n`-terminated line into `lines`, refusing to hold more than its cap: an oversized
/// line is drained and reported instead of growing memory without bound.
pub(crate) fn read_line_capped<'a>(
    r: &mut impl BufRead,
    lines: &'a mut LineBuffer,
) -> io::Result<Line<'a>> {
    let eof = loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break true;
        }
        let (used, complete) = lines.feed(available);
        r.consume(used);
        if complete {
            break false;
        }
    };
    let frame = if eof {
        lines.finish()
    } else {
        lines.next_frame()
    };
    Ok(match frame {
        // A last line cut off by the end of input is taken as it is.
        Some(Frame::Line(line)) if eof => Line::Complete(line),
        Some(Frame::Line(line)) => Line::Complete(line.strip_suffix(b"\r").unwrap_or(line)),
        Some(Frame::TooLong(len)) => Line::TooLong(len),
        None => Line::Eof,
    })
}

/// Where the serve loop reads from: this process's stdin under `serve`, read with a spin
/// window, or any reader under `serve_on`.
pub(crate) enum Source {
    #[cfg(unix)]
    Stdin(SpinStdin),
    Stream(Box<dyn Read + Send>),
}

impl Source {
    /// Whether the next wait for input may busy-poll first. The reader turns it off while
    /// work runs: a polling reader would take the CPU a running request needs.
    pub(crate) fn set_spin(&mut self, on: bool) {
        match self {
            #[cfg(unix)]
            Source::Stdin(stdin) => stdin.spin_next = on,
            Source::Stream(_) => {}
        }
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            #[cfg(unix)]
            Source::Stdin(stdin) => stdin.read(buf),
            Source::Stream(r) => r.read(buf),
        }
    }
}

/// Standard input, waited on by busy-polling for a short window before sleeping: a blocked
/// reader costs a scheduler wake-up (tens of µs on an idle VM) when the next request lands,
/// and the next request usually lands within microseconds of the last answer.
///
/// A pipe is reopened non-blocking through `/proc/self/fd/0` (a description of its own, so
/// the flag reaches no other process), and then the spin is the `read` itself: the line is
/// taken by the call that sees it. Anything else spins on `poll` and then reads, blocking.
#[cfg(unix)]
pub(crate) struct SpinStdin {
    fd: std::os::fd::OwnedFd,
    nonblocking: bool,
    spin: std::time::Duration,
    spin_next: bool,
    /// The last wait for input was shorter than the spin window (or nothing was waited for).
    came_quickly: bool,
    /// Waits that slept instead of spinning since the last spin.
    slept: u32,
}

/// After this many waits that slept because the one before was long, one spins again.
#[cfg(unix)]
const PROBE_EVERY: u32 = 8;

#[cfg(unix)]
impl SpinStdin {
    pub(crate) fn open(spin: std::time::Duration) -> io::Result<SpinStdin> {
        use std::os::fd::AsFd;
        SpinStdin::reopen(io::stdin().as_fd(), spin)
    }

    /// Read `fd`'s pipe through a description of our own, non-blocking; or `fd` itself.
    fn reopen(fd: std::os::fd::BorrowedFd<'_>, spin: std::time::Duration) -> io::Result<SpinStdin> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut own = SpinStdin {
            fd: fd.try_clone_to_owned()?,
            nonblocking: false,
            spin,
            spin_next: true,
            came_quickly: true,
            slept: 0,
        };
        #[cfg(target_os = "linux")]
        if !spin.is_zero() && is_pipe(fd.as_raw_fd()) {
            let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .expect("no NUL in a number");
            // SAFETY: `open` of a NUL-terminated path; the descriptor it returns is ours.
            let reopened = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            };
            if reopened >= 0 {
                // SAFETY: `reopened` was just opened and is owned by nothing else.
                own.fd = unsafe { OwnedFd::from_raw_fd(reopened) };
                own.nonblocking = true;
            }
        }
        Ok(own)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        // Spinning pays when input comes within the window, as it did last time. When the
        // last wait outlasted it (the host is busy with a batch of answers), a spin now
        // would only take the CPU the host needs, so this wait sleeps, and is timed in turn;
        // every few sleeps one spins anyway, since a sleeper's wake-up alone may outlast the
        // window when the next line was in fact quick.
        let mut spin = self.spin_next && !self.spin.is_zero();
        if spin && !self.came_quickly {
            self.slept += 1;
            spin = self.slept >= PROBE_EVERY;
        }
        if spin {
            self.slept = 0;
        }
        let mut waited: Option<std::time::Instant> = None;
        if spin && !self.nonblocking {
            let now = std::time::Instant::now();
            waited = Some(now);
            let until = now + self.spin;
            while std::time::Instant::now() < until && !poll(fd, 0)? {
                std::hint::spin_loop();
            }
        }
        loop {
            // SAFETY: reading into a buffer we hold exclusively, at most its length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                if let Some(since) = waited {
                    self.came_quickly = since.elapsed() < self.spin;
                }
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    let now = std::time::Instant::now();
                    let since = *waited.get_or_insert(now);
                    if spin && now < since + self.spin {
                        std::hint::spin_loop();
                    } else {
                        poll(fd, -1)?;
                    }
                }
                _ => return Err(err),
            }
        }
    }
}

/// Whether `fd` is a pipe (or FIFO).
#[cfg(target_os = "linux")]
fn is_pipe(fd: i32) -> bool {
    // SAFETY: fstat fills the zeroed struct it is given.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
    }
}

/// Wait up to `timeout_ms` (-1: for ever) for `fd` to have input, or EOF, or an error.
#[cfg(unix)]
fn poll(fd: i32, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut pfd, 1, timeout_ms) } {
        n if n >= 0 => Ok(n > 0),
        _ => {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => Ok(false),
                _ => Err(err),
            }
        }
    }
}

/// The wire: whole lines, never interleaved. Lines sent while another thread is writing are
/// queued and go out with its next write (group commit): under many answers at once, one
/// `write` carries many lines instead of one each. The reader, running quick requests from
/// input it already holds, also [corks](Wire::cork) the wire: their answers queue and go out
/// [`CORK_LINES`] to a write, the rest before it next waits for input.
pub(crate) struct Wire {
    out: Mutex<Box<dyn Write + Send>>,
    queued: Mutex<Queued>,
}

#[derive(Default)]
struct Queued {
    /// Lines waiting for the writing thread or the cork, each with its newline.
    bytes: Vec<u8>,
    /// A thread is writing; it writes what is queued before it stops.
    writing: bool,
    /// Held back until [`Wire::uncork`].
    corked: bool,
    /// Lines held by the cork since its last write.
    held: usize,
}

/// A cork lets this many lines go at once: the host starts on them while the rest are made.
const CORK_LINES: usize = 16;

impl Wire {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Wire {
            out: Mutex::new(out),
            queued: Mutex::new(Queued::default()),
        }
    }

    /// Send one line: written now (the line and its newline in one write), or, while another
    /// thread writes or the wire is corked, queued for the next write. A failed write means
    /// the host is gone; the reader sees EOF next, so the error is reported to stderr and
    /// otherwise dropped.
    pub(crate) fn send(&self, line: String) {
        let mut batch = line.into_bytes();
        batch.push(b'\n');
        {
            let mut queued = lock(&self.queued);
            if queued.writing {
                queued.bytes.extend_from_slice(&batch);
                return;
            }
            if queued.corked {
                queued.bytes.extend_from_slice(&batch);
                queued.held += 1;
                if queued.held < CORK_LINES {
                    return;
                }
                queued.held = 0;
                batch = std::mem::take(&mut queued.bytes);
            }
            queued.writing = true;
        }
        self.write_out(batch);
    }

    /// Hold lines back until [`Wire::uncork`]. Only the reader corks, and only while it runs
    /// requests from input it holds; it uncorks before anything that may wait (reading the
    /// pipe, a slow request, the end), so a held line waits for quick work only.
    pub(crate) fn cork(&self) {
        lock(&self.queued).corked = true;
    }

    /// Write what the cork held back, unless another thread is writing (it takes them).
    pub(crate) fn uncork(&self) {
        let batch = {
            let mut queued = lock(&self.queued);
            if !queued.corked {
                return;
            }
            queued.corked = false;
            queued.held = 0;
            if queued.writing || queued.bytes.is_empty() {
                return;
            }
            queued.writing = true;
            std::mem::take(&mut queued.bytes)
        };
        self.write_out(batch);
    }

    /// The writing thread: write `batch`, then whatever was queued meanwhile, until nothing is.
    fn write_out(&self, mut batch: Vec<u8>) {
        // `writing` is given back however this thread leaves, even by a panic: otherwise
        // every later line would queue behind a writer that is gone, and `drain` would wait
        // for it forever.
        let writer = Writing(&self.queued);
        loop {
            let res = {
                let mut out = lock(&self.out);
                out.write_all(&batch).and_then(|()| out.flush())
            };
            if let Err(err) = res {
                note(format_args!("yep-sdk: failed to write to the host: {err}"));
            }
            let mut queued = lock(&self.queued);
            if queued.bytes.is_empty() {
                queued.writing = false;
                drop(queued);
                std::mem::forget(writer);
                return;
            }
            // The written batch's buffer takes the next lines' place: no allocation per batch.
            batch.clear();
            std::mem::swap(&mut batch, &mut queued.bytes);
        }
    }

    /// Wait until every line sent so far is written (the server is about to exit), for at
    /// most [`DRAIN_WAIT`]: a host that stopped reading cannot hold the exit up.
    pub(crate) fn drain(&self) {
        self.uncork();
        let deadline = std::time::Instant::now() + DRAIN_WAIT;
        while std::time::Instant::now() < deadline {
            {
                let queued = lock(&self.queued);
                if !queued.writing && queued.bytes.is_empty() {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

/// The longest [`Wire::drain`] waits for the last lines to go out.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Gives `writing` back when the writing thread leaves [`Wire::send`] other than by its end.
struct Writing<'a>(&'a Mutex<Queued>);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        lock(self.0).writing = false;
    }
}

/// Say something on stderr. Never panics: when the host has gone, stderr is often a pipe
/// nobody reads any more, and `eprintln!` would panic on the failed write.
pub(crate) fn note(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{args}");
}

/// A lock, taken even when a thread panicked holding it (the data is plain: no invariant
/// spans a panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<'a>(r: &mut impl BufRead, lines: &'a mut LineBuffer) -> Line<'a> {
        read_line_capped(r, lines).expect("reading from memory")
    }

    /// A slow output that keeps each write apart.
    #[derive(Clone, Default)]
    struct Writes(std::sync::Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(std::time::Duration::from_micros(200));
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// An output whose write panics, as `eprintln!` did on a host's closed stderr.
    struct Panics;

    impl Write for Panics {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            panic!("the host is gone");
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_writer_that_panics_does_not_leave_the_wire_waiting_for_it() {
        let wire = Wire::new(Box::new(Panics));
        let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wire.send("{}".into());
        }));
        assert!(sent.is_err());
        assert!(
            !lock(&wire.queued).writing,
            "the writing flag outlived its thread"
        );
        let started = std::time::Instant::now();
        wire.drain();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_corked_wire_holds_lines_and_lets_them_go_a_batch_at_a_time_and_at_uncork() {
        let writes = Writes::default();
        let wire = Wire::new(Box::new(writes.clone()));
        wire.cork();
        for i in 0..CORK_LINES - 1 {
            wire.send(format!("{i}"));
        }
        assert!(writes.0.lock().unwrap().is_empty(), "held while corked");
        wire.send("full".into());
        assert_eq!(
            writes.0.lock().unwrap().len(),
            1,
            "a full batch goes at once"
        );
        wire.send("a".into());
        wire.send("b".into());
        assert_eq!(writes.0.lock().unwrap().len(), 1);
        wire.uncork();
        let writes = writes.0.lock().unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[1], b"a\nb\n");
        let lines: Vec<u8> = writes.concat();
        assert_eq!(
            String::from_utf8(lines).unwrap().lines().count(),
            CORK_LINES + 2
        );
        drop(writes);
        // Uncorked, a line goes at once.
        wire.send("c".into());
    }

    #[test]
    fn lines_sent_at_once_go_out_whole_and_in_fewer_writes() {
        let writes = Writes::default();
        let wire = std::sync::Arc::new(Wire::new(Box::new(writes.clone())));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let wire = std::sync::Arc::clone(&wire);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        wire.send(format!("{{\"t\":{t},\"i\":{i}}}"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        wire.drain();
        let writes = writes.0.lock().unwrap();
        let all: Vec<u8> = writes.concat();
        let lines: Vec<&str> = std::str::from_utf8(&all).unwrap().lines().collect();
        assert_eq!(lines.len(), 8 * 200);
        // Each thread's lines whole and in its order.
        for t in 0..8 {
            let mine: Vec<&str> = lines
                .iter()
                .filter(|l| l.starts_with(&format!("{{\"t\":{t},")))
                .copied()
                .collect();
            let expected: Vec<String> = (0..200)
                .map(|i| format!("{{\"t\":{t},\"i\":{i}}}"))
                .collect();
            assert_eq!(mine, expected);
        }
        // Every write ends a line, and most carried several.
        assert!(writes.iter().all(|w| w.ends_with(b"\n")));
        assert!(
            writes.len() < lines.len() / 2,
            "{} writes for {} lines",
            writes.len(),
            lines.len()
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stdin_is_reopened_non_blocking_on_its_own_and_reads_lines_sent_late() {
        use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: `pipe` fills both descriptors, which we then own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let flags = |fd: i32| unsafe { libc::fcntl(fd, libc::F_GETFL) };
        let spin = std::time::Duration::from_micros(50);
        let stdin = SpinStdin::reopen(read_end.as_fd(), spin).unwrap();
        assert!(stdin.nonblocking);
        assert_ne!(flags(stdin.fd.as_raw_fd()) & libc::O_NONBLOCK, 0);
        // The description the parent handed us stays as it was.
        assert_eq!(flags(read_end.as_raw_fd()) & libc::O_NONBLOCK, 0);
        drop(read_end);

        let writer = std::thread::spawn(move || {
            let mut w = std::fs::File::from(write_end);
            w.write_all(b"first\n").unwrap();
            // Past the spin window: the reader must be sleeping in `poll`, not spinning.
            std::thread::sleep(std::time::Duration::from_millis(30));
            w.write_all(b"second\n").unwrap();
        });
        let mut r = io::BufReader::new(Source::Stdin(stdin));
        let mut lines = LineBuffer::new(64);
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"first")));
        r.get_mut().set_spin(false);
        assert!(matches!(
            read(&mut r, &mut lines),
            Line::Complete(b"second")
        ));
        writer.join().unwrap();
        assert!(matches!(read(&mut r, &mut lines), Line::Eof));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn after_a_wait_longer_than_the_window_stdin_sleeps_and_spins_again_every_few_waits() {
        use std::os::fd::AsFd;
        let (read_end, mut write_end) = std::io::pipe().unwrap();
        let window = std::time::Duration::from_millis(100);
        let mut stdin = SpinStdin::reopen(read_end.as_fd(), window).unwrap();
        drop(read_end);
        let mut buf = [0u8; 16];
        let late = |mut w: std::io::PipeWriter, after: std::time::Duration| {
            std::thread::spawn(move || {
                std::thread::sleep(after);
                w.write_all(b"x").unwrap();
                w
            })
        };
        // A line that comes past the window: the next waits sleep.
        let writer = late(write_end, 3 * window);
        assert_eq!(stdin.read(&mut buf).unwrap(), 1);
        write_end = writer.join().unwrap();
        assert!(!stdin.came_quickly);
        // Lines already there cost no wait and change nothing; each counts as a wait that
        // did not spin, and the eighth spins again.
        for slept in 1..PROBE_EVERY {
            write_end.write_all(b"y").unwrap();
            assert_eq!(stdin.read(&mut buf).unwrap(), 1);
            assert_eq!(stdin.slept, slept);
            assert!(!stdin.came_quickly);
        }
        let writer = late(write_end, std::time::Duration::from_millis(1));
        assert_eq!(stdin.read(&mut buf).unwrap(), 1);
        assert_eq!(stdin.slept, 0, "the probe spun");
        assert!(
            stdin.came_quickly,
            "a line within the window brings spinning back"
        );
        drop(writer.join().unwrap());
        assert_eq!(stdin.read(&mut buf).unwrap(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn without_a_spin_window_stdin_is_read_as_it_is() {
        use std::os::fd::AsFd;
        let stdin = SpinStdin::reopen(io::stdin().as_fd(), std::time::Duration::ZERO).unwrap();
        assert!(!stdin.nonblocking);
    }

    #[test]
    fn oversized_lines_are_drained_and_the_next_line_reads() {
        let input = format!("{}\nshort\n", "x".repeat(100));
        let mut r = io::BufReader::with_capacity(8, input.as_bytes());
        let mut lines = LineBuffer::new(10);
        assert!(matches!(read(&mut r, &mut lines), Line::TooLong(100)));
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"short")));
        assert!(matches!(read(&mut r, &mut lines), Line::Eof));
    }

    #[test]
    fn a_last_line_without_newline_still_reads() {
        let mut r = io::BufReader::new(&b"tail"[..]);
        let mut lines = LineBuffer::new(10);
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"tail")));
        assert!(matches!(read(&mut r, &mut lines), Line::Eof));
    }

    #[test]
    fn a_carriage_return_before_the_newline_is_dropped_but_counts_toward_the_cap() {
        let input = b"{}\r\n\r\nabc\r\nab\r\n";
        let mut r = io::BufReader::with_capacity(3, &input[..]);
        let mut lines = LineBuffer::new(3);
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"{}")));
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"")));
        assert!(matches!(read(&mut r, &mut lines), Line::TooLong(4)));
        assert!(matches!(read(&mut r, &mut lines), Line::Complete(b"ab")));
        assert!(matches!(read(&mut r, &mut lines), Line::Eof));
    }
}
