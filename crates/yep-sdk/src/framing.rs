//! Bounded line reading and the shared, locked wire writer.

use std::io::{self, BufRead, Write};
use std::sync::Mutex;

/// What one bounded read produced.
pub(crate) enum Line {
    /// A complete line without its newline (may be empty).
    Complete,
    /// A line longer than the cap; its bytes were discarded up to the newline.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Read one `\n`-terminated line into `buf` (cleared first), refusing to hold more than `cap`
/// bytes: an oversized line is drained and reported instead of growing memory without bound.
pub(crate) fn read_line_capped(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if total == 0 {
                Line::Eof
            } else if total > cap {
                Line::TooLong(total)
            } else {
                Line::Complete
            });
        }
        let (chunk, done) = match memchr(available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        total += chunk.len();
        if total <= cap {
            buf.extend_from_slice(chunk);
        } else {
            buf.clear();
        }
        let consumed = done.unwrap_or(available.len());
        r.consume(consumed);
        if done.is_some() {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(if total > cap {
                Line::TooLong(total)
            } else {
                Line::Complete
            });
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
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

    /// Write one line and flush. A failed write means the host is gone; the reader sees EOF
    /// next, so the error is reported to stderr and otherwise dropped.
    pub(crate) fn send(&self, line: &str) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let res = out
            .write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(err) = res {
            eprintln!("yep-sdk: failed to write to the host: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_lines_are_drained_and_the_next_line_reads() {
        let input = format!("{}\nshort\n", "x".repeat(100));
        let mut r = io::BufReader::with_capacity(8, input.as_bytes());
        let mut buf = Vec::new();
        assert!(matches!(
            read_line_capped(&mut r, &mut buf, 10).unwrap(),
            Line::TooLong(100)
        ));
        assert!(matches!(
            read_line_capped(&mut r, &mut buf, 10).unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"short");
        assert!(matches!(
            read_line_capped(&mut r, &mut buf, 10).unwrap(),
            Line::Eof
        ));
    }

    #[test]
    fn a_last_line_without_newline_still_reads() {
        let mut r = io::BufReader::new(&b"tail"[..]);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line_capped(&mut r, &mut buf, 10).unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"tail");
    }
}
