//! Which MCP revision a stdio server is spoken to in.
//!
//! 2026-07-28 has no handshake: a client asks `server/discover` and sends its version with
//! every request. Servers of the revisions before it (2025-11-25, 2025-06-18, most of the
//! field) know only `initialize`. So yep asks `server/discover` first, on the raw lines and
//! under an id of its own (`PROBE_ID`), and reads what comes back:
//! - a result listing 2026-07-28: the server is spoken to in it (`Probed::Modern`);
//! - an error, or a result without it: `initialize` follows on the same pipes (`Probed::Legacy`);
//! - nothing for `PROBE_WAIT`: `initialize` follows too, and the probe's answer, should one
//!   come late, is taken off the stream before rmcp reads it (`Handover`), so the two answers
//!   never cross (`Probed::Silent`);
//! - the end of its stdout: the server left rather than answer an unknown method (older rmcp
//!   servers do). It is started again and spoken to with `initialize` only (`Probed::Ended`).

use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The id of yep's `server/discover` probe: no id rmcp gives its own requests.
pub(crate) const PROBE_ID: &str = "yep-discover";

/// How long a silent server is waited for before `initialize` goes too. A server reading its
/// stdin answers at once (with an error when it knows no `server/discover`); JSON-RPC wants an
/// answer to every request, so only a server that ignores unknown methods costs this.
pub(crate) const PROBE_WAIT: Duration = Duration::from_secs(2);

/// The revision without a handshake.
pub(crate) const MODERN: &str = "2026-07-28";

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probed {
    Modern,
    Legacy,
    Silent,
    Ended,
}

/// The `server/discover` request, as rmcp's `Discover` lifecycle sends it: the version, who
/// asks and what it can do, in `_meta`.
pub(crate) fn probe_line(config: &rmcp::model::ClientConfig) -> String {
    let request = json!({
        "jsonrpc": "2.0",
        "id": PROBE_ID,
        "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": config.client_info,
            "io.modelcontextprotocol/clientCapabilities": config.capabilities,
        }},
    });
    format!("{request}\n")
}

/// Whether `line` answers the probe: its id, or an error without one (a server that could
/// not read the request says so with `"id": null`).
fn answers_probe(line: &[u8]) -> Option<Value> {
    let message: Value = serde_json::from_slice(line).ok()?;
    let ours = message.get("id") == Some(&json!(PROBE_ID));
    let unaddressed = message.get("error").is_some() && message["id"].is_null();
    (ours || unaddressed).then_some(message)
}

/// Whether the probe's `answer` lists 2026-07-28 among the versions the server speaks.
fn lists_modern(answer: &Value) -> bool {
    answer["result"]["supportedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == MODERN))
}

/// Send the probe and read until it is answered, the server is silent for `wait`, or its
/// stdout ends. What was read past the answer (or of a line not yet whole) is given back, to
/// go before the rest of the stream ([`Handover`]). Lines before the answer (a log the server
/// sent ahead of everything) are dropped, as rmcp drops them before `initialize`'s answer.
pub(crate) async fn probe<R, W>(
    reader: &mut R,
    writer: &mut W,
    config: &rmcp::model::ClientConfig,
    wait: Duration,
) -> std::io::Result<(Probed, Vec<u8>)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    writer.write_all(probe_line(config).as_bytes()).await?;
    writer.flush().await?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 8192];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            if let Some(answer) = answers_probe(&line) {
                let probed = match lists_modern(&answer) {
                    true => Probed::Modern,
                    false => Probed::Legacy,
                };
                return Ok((probed, buf));
            }
        }
        match tokio::time::timeout_at(deadline, reader.read(&mut chunk)).await {
            Err(_) => return Ok((Probed::Silent, buf)),
            Ok(Ok(0)) => return Ok((Probed::Ended, buf)),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(e),
        }
    }
}

/// The server's stdout after the probe: first what the probe read past its answer, then the
/// rest. After a silent probe it also takes the probe's answer out, should it come late, so
/// rmcp sees only the answer to its `initialize`.
pub(crate) struct Handover<R> {
    inner: R,
    /// Bytes to give before reading on.
    out: Vec<u8>,
    given: usize,
    /// While the probe's answer may still come: the line being read.
    line: Vec<u8>,
    skip: bool,
    /// Set when the probe's late answer lists 2026-07-28 ([`Handover::noting_late_modern`]).
    late_modern: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl<R> Handover<R> {
    pub(crate) fn new(inner: R, probed: Probed, leftover: Vec<u8>) -> Handover<R> {
        let skip = probed == Probed::Silent;
        let (out, line) = match skip {
            true => (Vec::new(), leftover),
            false => (leftover, Vec::new()),
        };
        Handover {
            inner,
            out,
            given: 0,
            line,
            skip,
            late_modern: None,
        }
    }

    /// Set `flag` if the probe's answer, taken out late, lists 2026-07-28: a server too slow
    /// to answer in time that speaks only that revision refuses the `initialize` sent meanwhile.
    pub(crate) fn noting_late_modern(
        mut self,
        flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Handover<R> {
        self.late_modern = Some(flag);
        self
    }

    /// Whole lines off `line` into `out`, but for the probe's answer, which ends the skipping.
    fn sift(&mut self) {
        while self.skip {
            let Some(end) = self.line.iter().position(|b| *b == b'\n') else {
                return;
            };
            let line: Vec<u8> = self.line.drain(..=end).collect();
            match answers_probe(&line) {
                Some(answer) => {
                    if lists_modern(&answer)
                        && let Some(flag) = &self.late_modern
                    {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    self.skip = false;
                }
                None => self.out.extend_from_slice(&line),
            }
        }
        self.out.append(&mut self.line);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Handover<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if this.given < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.given);
                buf.put_slice(&this.out[this.given..this.given + n]);
                this.given += n;
                if this.given == this.out.len() {
                    this.out.clear();
                    this.given = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if !this.skip {
                return std::pin::Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            let mut chunk = [0u8; 8192];
            let mut read = tokio::io::ReadBuf::new(&mut chunk);
            match std::pin::Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // The end: what is left of a line goes as it is, then the end.
                    this.skip = false;
                    this.out.append(&mut this.line);
                    if this.out.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Ready(Ok(())) => {
                    this.line.extend_from_slice(read.filled());
                    this.sift();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("yep", "0"),
        )
    }

    async fn probed(answer: &'static [u8], wait: Duration) -> (Probed, Vec<u8>, String) {
        let (mut ours, theirs) = tokio::io::duplex(1 << 16);
        let (mut their_read, mut their_write) = tokio::io::split(theirs);
        their_write.write_all(answer).await.unwrap();
        their_write.shutdown().await.unwrap();
        let (mut reader, mut writer) = tokio::io::split(&mut ours);
        let (probed, rest) = probe(&mut reader, &mut writer, &config(), wait)
            .await
            .unwrap();
        let mut sent = vec![0u8; 4096];
        let n = their_read.read(&mut sent).await.unwrap();
        (
            probed,
            rest,
            String::from_utf8_lossy(&sent[..n]).into_owned(),
        )
    }

    #[tokio::test]
    async fn the_probe_tells_the_revisions_apart_and_keeps_what_follows_its_answer() {
        let modern = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n{\"jsonrpc\":\"2.0\",\"id\":\"yep-discover\",\"result\":{\"supportedVersions\":[\"2026-07-28\"]}}\n{\"next\":1}\n{\"part";
        let (p, rest, sent) = probed(modern, PROBE_WAIT).await;
        assert_eq!(p, Probed::Modern);
        assert_eq!(rest, b"{\"next\":1}\n{\"part");
        let sent: Value = serde_json::from_str(sent.trim()).unwrap();
        assert_eq!(sent["method"], "server/discover");
        assert_eq!(
            sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            MODERN
        );
        let legacy = b"{\"jsonrpc\":\"2.0\",\"id\":\"yep-discover\",\"error\":{\"code\":-32601,\"message\":\"no\"}}\n";
        assert_eq!(probed(legacy, PROBE_WAIT).await.0, Probed::Legacy);
        let unread =
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"no\"}}\n";
        assert_eq!(probed(unread, PROBE_WAIT).await.0, Probed::Legacy);
        let older = b"{\"jsonrpc\":\"2.0\",\"id\":\"yep-discover\",\"result\":{\"supportedVersions\":[\"2025-11-25\"]}}\n";
        assert_eq!(probed(older, PROBE_WAIT).await.0, Probed::Legacy);
        assert_eq!(probed(b"", PROBE_WAIT).await.0, Probed::Ended);
    }

    /// What rmcp reads after a probe nobody answered in time, the server then writing
    /// `chunks`; `flag` notes a late answer listing 2026-07-28.
    async fn handed_after_silence(
        chunks: &[&[u8]],
        flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> String {
        let (mut ours, theirs) = tokio::io::duplex(1 << 16);
        let (_their_read, mut their_write) = tokio::io::split(theirs);
        let (mut reader, mut writer) = tokio::io::split(&mut ours);
        let wait = Duration::from_millis(20);
        let (p, rest) = probe(&mut reader, &mut writer, &config(), wait)
            .await
            .unwrap();
        assert_eq!(p, Probed::Silent);
        for chunk in chunks {
            their_write.write_all(chunk).await.unwrap();
        }
        their_write.shutdown().await.unwrap();
        let mut handed = Handover::new(reader, p, rest);
        if let Some(flag) = flag {
            handed = handed.noting_late_modern(flag);
        }
        let mut all = String::new();
        handed.read_to_string(&mut all).await.unwrap();
        all
    }

    #[tokio::test]
    async fn a_silent_probe_hands_over_without_its_late_answer() {
        // The late answer comes in pieces, after a log line and before initialize's answer.
        let all = handed_after_silence(
            &[
                b"{\"log\":1}\n{\"jsonrpc\":\"2.0\",\"id\":\"yep-dis",
                b"cover\",\"error\":{\"code\":-32601}}\n{\"id\":0,\"result\":{}}\n{\"id\":\"yep-discover\"}\n",
            ],
            None,
        )
        .await;
        // Only the first answer to the probe is taken out.
        assert_eq!(
            all,
            "{\"log\":1}\n{\"id\":0,\"result\":{}}\n{\"id\":\"yep-discover\"}\n"
        );
    }

    #[tokio::test]
    async fn a_late_answer_listing_2026_07_28_is_noted_and_an_error_is_not() {
        for (late, modern) in [
            (
                r#"{"jsonrpc":"2.0","id":"yep-discover","result":{"supportedVersions":["2026-07-28"]}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"yep-discover","error":{"code":-32601}}"#,
                false,
            ),
        ] {
            let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let written = format!("{late}\n{{\"id\":0}}\n");
            let all = handed_after_silence(&[written.as_bytes()], Some(flag.clone())).await;
            assert_eq!(all, "{\"id\":0}\n");
            assert_eq!(
                flag.load(std::sync::atomic::Ordering::SeqCst),
                modern,
                "{late}"
            );
        }
    }
}
