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

/// The wire: one line per write, under a lock so concurrent handlers never interleave.
pub(crate) struct Wire {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Wire {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Wire {
            out: Mutex::new(out),
        }
    }

    /// Write one line and flush: the line and its newline in one buffer and one write. A
    /// failed write means the host is gone; the reader sees EOF next, so the error is reported
    /// to stderr and otherwise dropped.
    pub(crate) fn send(&self, line: String) {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let res = out.write_all(&bytes).and_then(|()| out.flush());
        if let Err(err) = res {
            eprintln!("yep-sdk: failed to write to the host: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<'a>(r: &mut impl BufRead, lines: &'a mut LineBuffer) -> Line<'a> {
        read_line_capped(r, lines).expect("reading from memory")
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
