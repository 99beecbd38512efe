//! A transcript replayed over the peer's output and input: frames read a line at a time, each
//! step sent or expected in turn, and where and why it stopped when the peer did otherwise.

use super::pattern::{Mismatch, matches, substitute};
use super::{Bindings, DEFAULT_TIMEOUT, MAX_FRAME_BYTES, Step, Transcript, preview};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use yep_protocol::framing::{Frame as Line, LineBuffer};

/// Where and why a replay stopped: the peer did not do what the transcript says (or the
/// transcript could not be followed).
#[derive(Debug, thiserror::Error)]
#[error("{at}: {message}")]
pub struct Failure {
    /// The step (`step 5`, or `step 5, frame 2 of 4` within an expect of several) and its
    /// kind.
    pub at: String,
    /// What happened, then the expected pattern(s) and the frame received, a line each.
    pub message: String,
}

/// What went wrong on the peer's streams.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("the peer wrote a {0}-byte line, over the {MAX_FRAME_BYTES}-byte cap")]
    TooLong(usize),
    #[error("the peer wrote a line that is not JSON: {0}")]
    NotJson(String),
    #[error("the peer wrote a line that is not a JSON object: {0}")]
    NotObject(String),
    #[error("failed to read from the peer: {0}")]
    Read(std::io::Error),
    #[error("failed to write to the peer: {0}")]
    Write(std::io::Error),
    #[error("the peer's input is closed already")]
    Closed,
}

/// Frames read from the peer, a line each.
struct Frames<R> {
    reader: R,
    lines: LineBuffer,
    eof: bool,
}

enum Next {
    Frame(Value),
    Eof,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    /// The next frame, or the end of the peer's output; a line that is no JSON object fails.
    async fn next(&mut self) -> Result<Next, StreamError> {
        // A line as owned bytes, or the length of one over the cap.
        fn owned(line: Line<'_>) -> Result<Vec<u8>, usize> {
            match line {
                Line::Line(bytes) => Ok(bytes.to_vec()),
                Line::TooLong(n) => Err(n),
            }
        }
        loop {
            let line = match self.lines.next_frame().map(owned) {
                Some(line) => Some(line),
                None if self.eof => self.lines.finish().map(owned),
                None => None,
            };
            match line {
                Some(Err(n)) => {
                    return Err(StreamError::TooLong(n));
                }
                Some(Ok(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {}
                Some(Ok(bytes)) => {
                    let text = String::from_utf8_lossy(&bytes);
                    return match serde_json::from_str::<Value>(&text) {
                        Ok(frame @ Value::Object(_)) => Ok(Next::Frame(frame)),
                        Ok(_) => Err(StreamError::NotObject(preview(&text))),
                        Err(_) => Err(StreamError::NotJson(preview(&text))),
                    };
                }
                None if self.eof => return Ok(Next::Eof),
                None => {
                    let read = self.reader.read_buf(self.lines.buf_mut(16 * 1024)).await;
                    match read {
                        Ok(0) => self.eof = true,
                        Ok(_) => {}
                        Err(e) => return Err(StreamError::Read(e)),
                    }
                }
            }
        }
    }
}

/// A frame with no id whose method (YEP) or type (zot) `allow` names.
fn skippable(frame: &Value, allow: &[String]) -> bool {
    let kind = frame
        .get("method")
        .or_else(|| frame.get("type"))
        .and_then(Value::as_str);
    frame.get("id").is_none() && kind.is_some_and(|k| allow.iter().any(|a| a == k))
}

/// Replay `t` over the peer's output `reader` and input `writer`, with `vars` bound before
/// the first step. `timeout` overrides the transcript's per-frame wait.
pub async fn replay<R, W>(
    t: &Transcript,
    reader: R,
    writer: W,
    mut vars: Bindings,
    timeout: Option<Duration>,
) -> Result<(), Failure>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let timeout = timeout.or(t.timeout).unwrap_or(DEFAULT_TIMEOUT);
    let mut frames = Frames {
        reader,
        lines: LineBuffer::new(MAX_FRAME_BYTES),
        eof: false,
    };
    let mut writer = Some(writer);
    for (n, step) in t.steps.iter().enumerate() {
        let n = n + 1;
        let fail = |kind: &str, message: String| Failure {
            at: format!("step {n} ({kind})"),
            message,
        };
        match step {
            Step::Send(template) => {
                let frame = substitute(template, &vars).map_err(|e| fail("send", e.0))?;
                write_line(&mut writer, &frame.to_string())
                    .await
                    .map_err(|e| fail("send", e.to_string()))?;
            }
            Step::SendRaw(text) => write_line(&mut writer, text)
                .await
                .map_err(|e| fail("send_raw", e.to_string()))?,
            Step::Close => {
                if let Some(mut w) = writer.take() {
                    let _ = w.shutdown().await;
                }
            }
            Step::ExpectEof => {
                let at = format!("step {n} (expect_eof)");
                expect_eof(&mut frames, timeout, &t.allow, at).await?
            }
            Step::Expect {
                frames: wanted,
                unordered,
            } => {
                expect(
                    &mut frames,
                    wanted,
                    *unordered,
                    &mut vars,
                    timeout,
                    &t.allow,
                    n,
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// An `expect_eof` step (`at`): the end of the peer's output within `timeout`, skipping only
/// the frames `allow` names; else why not.
async fn expect_eof<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
    timeout: Duration,
    allow: &[String],
    at: String,
) -> Result<(), Failure> {
    let fail = |message: String| Failure {
        at: at.clone(),
        message,
    };
    // One deadline for the step: frames it may skip do not push it out.
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let next = tokio::time::timeout_at(deadline, frames.next())
            .await
            .map_err(|_| {
                fail(format!(
                    "the peer's output did not end within {} ms",
                    timeout.as_millis()
                ))
            })?
            .map_err(|e| fail(e.to_string()))?;
        match next {
            Next::Eof => return Ok(()),
            Next::Frame(f) if skippable(&f, allow) => {}
            Next::Frame(f) => {
                return Err(fail(format!(
                    "expected the end of its output, got {}",
                    preview(&f.to_string())
                )));
            }
        }
    }
}

/// Step `n`, an `expect`: each of `wanted` matched by the peer's next frames (in order, or
/// in any order when `unordered`), binding their `$var:NAME`s into `vars`.
async fn expect<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
    wanted: &[Value],
    unordered: bool,
    vars: &mut Bindings,
    timeout: Duration,
    allow: &[String],
    n: usize,
) -> Result<(), Failure> {
    let mut pending: Vec<&Value> = wanted.iter().collect();
    while !pending.is_empty() {
        let at = match wanted.len() {
            1 => format!("step {n} (expect)"),
            len => format!(
                "step {n}, frame {} of {len} (expect)",
                len - pending.len() + 1
            ),
        };
        let candidates = if unordered { pending.len() } else { 1 };
        let expected = || {
            pending[..candidates]
                .iter()
                .map(|p| preview(&p.to_string()))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let fail = |message: String| Failure {
            at: at.clone(),
            message,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = match tokio::time::timeout_at(deadline, frames.next()).await {
                Err(_) => {
                    return Err(fail(format!(
                        "nothing within {} ms; expected {}",
                        timeout.as_millis(),
                        expected()
                    )));
                }
                Ok(next) => next.map_err(|e| fail(e.to_string()))?,
            };
            let frame = match next {
                Next::Eof => {
                    return Err(fail(format!(
                        "the peer's output ended; expected {}",
                        expected()
                    )));
                }
                Next::Frame(frame) => frame,
            };
            let mut misses = Vec::new();
            let mut hit = None;
            for (i, p) in pending[..candidates].iter().enumerate() {
                match matches(p, Some(&frame), vars) {
                    Ok(()) => {
                        hit = Some(i);
                        break;
                    }
                    Err(m) => misses.push((*p, m)),
                }
            }
            if let Some(i) = hit {
                pending.remove(i);
                break;
            }
            if skippable(&frame, allow) {
                continue;
            }
            return Err(fail(mismatch_message(&misses, &frame)));
        }
    }
    Ok(())
}

/// Why `frame` matched none of the candidates: the first miss, then each expected frame
/// (with its miss when there were several) and what was received.
fn mismatch_message(misses: &[(&Value, Mismatch)], frame: &Value) -> String {
    let mut message = misses[0].1.to_string();
    for (p, m) in misses {
        message.push_str(&format!("\n  expected: {}", preview(&p.to_string())));
        if misses.len() > 1 {
            message.push_str(&format!("\n    {m}"));
        }
    }
    message.push_str(&format!("\n  received: {}", preview(&frame.to_string())));
    message
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &mut Option<W>,
    text: &str,
) -> Result<(), StreamError> {
    let Some(w) = writer.as_mut() else {
        return Err(StreamError::Closed);
    };
    let mut line = Vec::with_capacity(text.len() + 1);
    line.extend_from_slice(text.as_bytes());
    line.push(b'\n');
    let written = async {
        w.write_all(&line).await?;
        w.flush().await
    };
    written.await.map_err(StreamError::Write)
}
