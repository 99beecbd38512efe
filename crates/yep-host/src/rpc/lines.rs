//! Reading capped lines from any async reader (a connection that is not a child's pipe), and
//! [`split_frames`]: the same reading over a byte slice, for the fuzzer.

use crate::framing::{Frame, LineBuffer};
use std::future::Future;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What one read produced.
pub(super) enum ReadLine<'a> {
    /// A line without its newline (may be empty).
    Line(&'a [u8]),
    /// A line ran past the cap after this many bytes: the connection is dropped.
    TooLong(usize),
    /// End of input.
    Eof,
}

/// Read one line into `lines`, never holding more than its cap of it. A line past the cap ends
/// the read at once: the connection is dropped, so the rest is not worth reading.
pub(super) async fn read_line_capped<'a, R: AsyncBufRead + Unpin>(
    r: &mut R,
    lines: &'a mut LineBuffer,
) -> std::io::Result<ReadLine<'a>> {
    let eof = loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            break true;
        }
        let (used, complete) = lines.feed(available);
        r.consume(used);
        if let Some(len) = lines.overflowing() {
            return Ok(ReadLine::TooLong(len));
        }
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
        Some(Frame::Line(line)) => ReadLine::Line(line),
        Some(Frame::TooLong(len)) => ReadLine::TooLong(len),
        None => ReadLine::Eof,
    })
}

/// Split `bytes` into frames exactly as a connection's reader does: `Ok(line)` per line (without
/// its newline), then `Err(len)` and nothing more if a line runs past `cap`. For fuzzing.
#[doc(hidden)]
pub(crate) fn split_frames(bytes: &[u8], cap: usize) -> Vec<Result<Vec<u8>, usize>> {
    let mut reader = bytes;
    let mut frames = Vec::new();
    let mut lines = LineBuffer::new(cap);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        // A byte slice never blocks: polling until ready needs no runtime.
        let mut read = std::pin::pin!(read_line_capped(&mut reader, &mut lines));
        let line = loop {
            if let std::task::Poll::Ready(line) = read.as_mut().poll(&mut cx) {
                break line;
            }
        };
        match line {
            Ok(ReadLine::Line(line)) => frames.push(Ok(line.to_vec())),
            Ok(ReadLine::TooLong(len)) => {
                frames.push(Err(len));
                return frames;
            }
            Ok(ReadLine::Eof) | Err(_) => return frames,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8], cap: usize) -> Vec<Result<String, usize>> {
        let text = |line: Vec<u8>| String::from_utf8(line).expect("utf-8 test lines");
        split_frames(bytes, cap)
            .into_iter()
            .map(|f| f.map(text))
            .collect()
    }

    fn ok(line: &str) -> Result<String, usize> {
        Ok(line.to_string())
    }

    #[test]
    fn lines_come_out_as_sent_with_a_carriage_return_kept() {
        assert_eq!(
            frames(b"{}\n\n{\"a\":1}\r\ntail", 64),
            [ok("{}"), ok(""), ok("{\"a\":1}\r"), ok("tail")]
        );
    }

    #[test]
    fn reading_stops_at_the_first_line_past_the_cap() {
        assert_eq!(frames(b"abcd\nabcde\nok\n", 4), [ok("abcd"), Err(5)]);
        // No newline in sight: the line's length so far.
        assert_eq!(frames(b"ok\nabcdefgh", 4), [ok("ok"), Err(8)]);
    }
}
