//! Newline-delimited framing, shared by both ends of a stdio wire: bytes in, lines out, under a
//! cap, with no I/O of its own. Also the busy-poll window both ends read from `YEP_SPIN_US`.
//!
//! The host's pipe reader, its reader for any other stream and the SDK's stdin reader all split
//! lines with one [`LineBuffer`]; each decides for itself what an oversized line means (the host
//! drops the connection, the SDK skips the line) and whether a `\r` before the `\n` matters.

use std::time::Duration;

/// The environment variable both ends read their busy-poll window from, in microseconds.
pub const SPIN_ENV: &str = "YEP_SPIN_US";

/// The busy-poll window when [`SPIN_ENV`] is unset or not a whole number of microseconds.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// The busy-poll window: `YEP_SPIN_US` microseconds, else [`DEFAULT_SPIN`] (`0` turns it off).
pub fn spin_from_env() -> Duration {
    parse_spin(std::env::var(SPIN_ENV).ok().as_deref())
}

/// The busy-poll window a `YEP_SPIN_US` value asks for; unset or unreadable means the default.
pub fn parse_spin(value: Option<&str>) -> Duration {
    value
        .and_then(|v| v.parse().ok())
        .map_or(DEFAULT_SPIN, Duration::from_micros)
}

/// What a [`LineBuffer`] yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line without its `\n`; a `\r` before it stays. May be empty.
    Line(&'a [u8]),
    /// A line longer than the cap: this many bytes before its `\n` (or before the end of
    /// input). Its bytes were dropped as they came.
    TooLong(usize),
}

/// Bytes read from a stream and not yet handed out as lines.
///
/// Fill it one of two ways: append to [`LineBuffer::buf_mut`] (a read straight into its spare
/// capacity, so a line that fits one read is never copied), or hand it a reader's own buffer
/// with [`LineBuffer::feed`], which takes one line at a time. Take lines with
/// [`LineBuffer::next_frame`], and what is left at the end of input with
/// [`LineBuffer::finish`].
///
/// A line over the cap is not kept: once it is past the cap its bytes are counted and dropped
/// up to its newline, and it comes out as [`Frame::TooLong`]. Through `feed`, no more than `cap`
/// bytes of a line are ever held; through `buf_mut`, no more than `cap` plus one read.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    /// Where the next line starts; everything before it was handed out.
    start: usize,
    /// The bytes from `start` up to here hold no newline.
    scanned: usize,
    cap: usize,
    /// Bytes counted so far of an oversized line being dropped up to its newline.
    dropped: Option<usize>,
}

impl LineBuffer {
    /// An empty buffer that refuses lines longer than `cap` bytes (not counting the `\n`).
    pub fn new(cap: usize) -> LineBuffer {
        LineBuffer {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            cap,
            dropped: None,
        }
    }

    /// The longest line this buffer hands out.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The next line among the bytes held, or `None` when more bytes are needed first.
    pub fn next_frame(&mut self) -> Option<Frame<'_>> {
        if self.scanned > self.buf.len() {
            // `buf_mut`'s caller shortened the buffer: forget what it took away.
            self.start = self.start.min(self.buf.len());
            self.scanned = self.start;
        }
        match memchr::memchr(b'\n', &self.buf[self.scanned..]) {
            Some(i) => {
                let newline = self.scanned + i;
                let start = self.start;
                self.start = newline + 1;
                self.scanned = self.start;
                let len = newline - start;
                match self.dropped.take() {
                    Some(dropped) => Some(Frame::TooLong(dropped.saturating_add(len))),
                    None if len > self.cap => Some(Frame::TooLong(len)),
                    None => Some(Frame::Line(&self.buf[start..newline])),
                }
            }
            None => {
                self.scanned = self.buf.len();
                let held = self.buf.len() - self.start;
                if self.dropped.is_some() || held > self.cap {
                    let dropped = self.dropped.get_or_insert(0);
                    *dropped = dropped.saturating_add(held);
                    self.buf.truncate(self.start);
                    self.scanned = self.start;
                }
                None
            }
        }
    }

    /// The length so far of an oversized line being dropped, as of the last `next_frame` or
    /// `feed`: a reader that gives up on such a line need not read on to its newline.
    pub fn overflowing(&self) -> Option<usize> {
        self.dropped
    }

    /// End of input, once `next_frame` has nothing more: the unfinished last line, if any.
    pub fn finish(&mut self) -> Option<Frame<'_>> {
        let end = self.buf.len();
        let start = self.start.min(end);
        let dropped = self.dropped.take();
        self.start = end;
        self.scanned = end;
        let len = end - start;
        match dropped {
            Some(dropped) => Some(Frame::TooLong(dropped.saturating_add(len))),
            None if len == 0 => None,
            None if len > self.cap => Some(Frame::TooLong(len)),
            None => Some(Frame::Line(&self.buf[start..end])),
        }
    }

    /// The buffer to append at least `additional` more bytes to, with room reserved for them.
    /// Lines handed out are dropped first. Append only: anything else loses bytes.
    pub fn buf_mut(&mut self, additional: usize) -> &mut Vec<u8> {
        self.compact();
        self.buf.reserve(additional);
        &mut self.buf
    }

    /// Take bytes from `input` up to and including its first newline, for a reader that keeps
    /// its own buffer. Returns how many bytes it took and whether they ended a line, which
    /// `next_frame` then returns. Take each line before feeding more.
    pub fn feed(&mut self, input: &[u8]) -> (usize, bool) {
        self.compact();
        let newline = memchr::memchr(b'\n', input);
        let line = &input[..newline.unwrap_or(input.len())];
        let used = newline.map_or(input.len(), |i| i + 1);
        let held = self.buf.len() - self.start;
        let over = match self.dropped {
            Some(dropped) => Some(dropped.saturating_add(line.len())),
            None if held + line.len() > self.cap => Some(held + line.len()),
            None => None,
        };
        match over {
            Some(len) => {
                self.dropped = Some(len);
                self.buf.truncate(self.start);
                self.scanned = self.start;
                if newline.is_some() {
                    self.buf.push(b'\n');
                }
            }
            None => {
                let searched = self.scanned == self.buf.len();
                self.buf.extend_from_slice(&input[..used]);
                if searched && newline.is_some() {
                    // Where that newline is is known: `next_frame` need not search again.
                    self.scanned = self.buf.len() - 1;
                } else if searched {
                    self.scanned = self.buf.len();
                }
            }
        }
        (used, newline.is_some())
    }

    /// Drop the lines handed out, so the buffer holds only what is still to come.
    fn compact(&mut self) {
        if self.start >= self.buf.len() {
            self.buf.clear();
        } else if self.start > 0 {
            self.buf.drain(..self.start);
        }
        self.scanned -= self.start.min(self.scanned);
        self.start = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame from feeding `chunks` one line at a time, as a reader with its own buffer
    /// does, then the end of input.
    fn fed(cap: usize, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, usize>> {
        let mut lines = LineBuffer::new(cap);
        let mut out = Vec::new();
        for chunk in chunks {
            let mut rest = *chunk;
            while !rest.is_empty() {
                let (used, complete) = lines.feed(rest);
                rest = &rest[used..];
                if complete {
                    out.push(owned(
                        lines.next_frame().expect("a fed newline ends a frame"),
                    ));
                }
                assert!(lines.next_frame().is_none(), "one line per newline fed");
            }
        }
        out.extend(lines.finish().map(owned));
        out
    }

    /// Every frame from appending `chunks` to the buffer, as a reader into its spare capacity
    /// does, then the end of input.
    fn appended(cap: usize, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, usize>> {
        let mut lines = LineBuffer::new(cap);
        let mut out = Vec::new();
        for chunk in chunks {
            lines.buf_mut(chunk.len()).extend_from_slice(chunk);
            while let Some(frame) = lines.next_frame() {
                out.push(owned(frame));
            }
        }
        out.extend(lines.finish().map(owned));
        out
    }

    fn owned(frame: Frame<'_>) -> Result<Vec<u8>, usize> {
        match frame {
            Frame::Line(line) => Ok(line.to_vec()),
            Frame::TooLong(len) => Err(len),
        }
    }

    /// Both ways of filling a buffer split `chunks` into `expected`.
    fn splits(cap: usize, chunks: &[&[u8]], expected: &[Result<&[u8], usize>]) {
        let expected: Vec<_> = expected.iter().map(|f| f.map(<[u8]>::to_vec)).collect();
        assert_eq!(fed(cap, chunks), expected, "fed {chunks:?}");
        assert_eq!(appended(cap, chunks), expected, "appended {chunks:?}");
    }

    #[test]
    fn a_line_split_across_chunks_comes_out_whole() {
        splits(
            64,
            &[b"{\"a\":", b"1}", b"\n{\"b\"", b":2}\n"],
            &[Ok(b"{\"a\":1}"), Ok(b"{\"b\":2}")],
        );
        splits(
            64,
            &[b"one\ntw", b"o\nthree\n"],
            &[Ok(b"one"), Ok(b"two"), Ok(b"three")],
        );
    }

    #[test]
    fn a_line_of_exactly_the_cap_is_kept_and_one_byte_more_is_too_long() {
        splits(4, &[b"abcd\n"], &[Ok(b"abcd")]);
        splits(4, &[b"ab", b"cd\n"], &[Ok(b"abcd")]);
        splits(4, &[b"abcde\n"], &[Err(5)]);
        splits(4, &[b"ab", b"c", b"de\n"], &[Err(5)]);
    }

    #[test]
    fn an_oversized_line_is_dropped_to_its_newline_and_the_next_line_reads() {
        let long = vec![b'x'; 100];
        splits(10, &[&long, b"\nshort\n"], &[Err(100), Ok(b"short")]);
        splits(
            10,
            &[&long[..30], &long[30..], b"\n", b"ok\n"],
            &[Err(100), Ok(b"ok")],
        );
        let mut one = long.clone();
        one.extend_from_slice(b"\nshort\n");
        splits(10, &[&one], &[Err(100), Ok(b"short")]);
    }

    #[test]
    fn a_line_over_the_cap_is_not_held() {
        let mut lines = LineBuffer::new(10);
        for _ in 0..100 {
            let (used, complete) = lines.feed(&[b'x'; 7]);
            assert_eq!((used, complete), (7, false));
            assert!(lines.buf.len() <= 10, "held {} bytes", lines.buf.len());
        }
        assert_eq!(lines.overflowing(), Some(700));
        lines.feed(b"\n");
        assert_eq!(lines.next_frame(), Some(Frame::TooLong(700)));
        assert_eq!(lines.overflowing(), None);

        let mut lines = LineBuffer::new(10);
        for _ in 0..100 {
            lines.buf_mut(7).extend_from_slice(&[b'x'; 7]);
            assert_eq!(lines.next_frame(), None);
            assert!(lines.buf.len() <= 10 + 7, "held {} bytes", lines.buf.len());
        }
        assert_eq!(lines.overflowing(), Some(700));
    }

    #[test]
    fn the_last_line_without_a_newline_comes_out_at_the_end() {
        splits(10, &[b"a\nta", b"il"], &[Ok(b"a"), Ok(b"tail")]);
        splits(3, &[b"a\ntail"], &[Ok(b"a"), Err(4)]);
        splits(10, &[b"a\n"], &[Ok(b"a")]);
        let mut lines = LineBuffer::new(10);
        lines.feed(b"tail");
        assert_eq!(lines.finish(), Some(Frame::Line(b"tail")));
        assert_eq!(lines.finish(), None, "the end of input ends once");
    }

    #[test]
    fn empty_lines_are_lines() {
        splits(
            10,
            &[b"\n\na\n", b"\n"],
            &[Ok(b""), Ok(b""), Ok(b"a"), Ok(b"")],
        );
        splits(0, &[b"\n\n"], &[Ok(b""), Ok(b"")]);
        splits(10, &[b""], &[]);
    }

    #[test]
    fn a_carriage_return_stays_in_the_line_and_counts_toward_the_cap() {
        splits(10, &[b"a\r\nb\r", b"\n"], &[Ok(b"a\r"), Ok(b"b\r")]);
        splits(3, &[b"abc\r\n"], &[Err(4)]);
    }

    #[test]
    fn lines_handed_out_are_dropped_before_the_next_read() {
        let mut lines = LineBuffer::new(64);
        lines.buf_mut(16).extend_from_slice(b"one\ntw");
        assert_eq!(lines.next_frame(), Some(Frame::Line(b"one")));
        assert_eq!(lines.next_frame(), None);
        assert_eq!(lines.buf_mut(16).as_slice(), b"tw");
    }

    #[test]
    fn the_spin_window_reads_microseconds_and_defaults_to_50() {
        assert_eq!(parse_spin(None), Duration::from_micros(50));
        assert_eq!(parse_spin(Some("0")), Duration::ZERO);
        assert_eq!(parse_spin(Some("200")), Duration::from_micros(200));
        for garbage in ["", "fast", "-5", "1.5", " 20", "99999999999999999999999"] {
            assert_eq!(parse_spin(Some(garbage)), DEFAULT_SPIN, "{garbage:?}");
        }
    }
}
