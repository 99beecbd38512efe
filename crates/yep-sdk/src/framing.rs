//! Bounded line reading and the shared, locked wire writer.

use std::io::{self, BufRead, Write};
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

/// The wire: whole lines, never interleaved. Lines sent while another thread is writing are
/// queued and go out with its next write (group commit): under many answers at once, one
/// `write` carries many lines instead of one each.
pub(crate) struct Wire {
    out: Mutex<Box<dyn Write + Send>>,
    queued: Mutex<Queued>,
}

#[derive(Default)]
struct Queued {
    /// Lines waiting for the writing thread, each with its newline.
    bytes: Vec<u8>,
    /// A thread is writing; it writes what is queued before it stops.
    writing: bool,
}

impl Wire {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Wire {
            out: Mutex::new(out),
            queued: Mutex::new(Queued::default()),
        }
    }

    /// Send one line: written now (the line and its newline in one write), or, while another
    /// thread writes, queued for its next write. A failed write means the host is gone; the
    /// reader sees EOF next, so the error is reported to stderr and otherwise dropped.
    pub(crate) fn send(&self, line: String) {
        let mut batch = line.into_bytes();
        batch.push(b'\n');
        {
            let mut queued = lock(&self.queued);
            if queued.writing {
                queued.bytes.extend_from_slice(&batch);
                return;
            }
            queued.writing = true;
        }
        loop {
            let res = {
                let mut out = lock(&self.out);
                out.write_all(&batch).and_then(|()| out.flush())
            };
            if let Err(err) = res {
                eprintln!("yep-sdk: failed to write to the host: {err}");
            }
            let mut queued = lock(&self.queued);
            if queued.bytes.is_empty() {
                queued.writing = false;
                return;
            }
            // The written batch's buffer takes the next lines' place: no allocation per batch.
            batch.clear();
            std::mem::swap(&mut batch, &mut queued.bytes);
        }
    }

    /// Wait until every line sent so far is written (the server is about to exit).
    pub(crate) fn drain(&self) {
        loop {
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
