//! The rmcp peer: an rmcp client driving `yep-bench-rmcp` over a child's stdio.
use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, JsonObject},
    service::RunningService,
    transport::TokioChildProcess,
};

/// Bytes the server adds around the text: `{"echoed":""}`.
const ECHO_OVERHEAD: usize = r#"{"echoed":""}"#.len();

/// Payload of each call in [`RmcpPeer::throughput`].
const THROUGHPUT_PAYLOAD: usize = 200;

/// A connected rmcp client; the handshake is done. Share it as `Arc<RmcpPeer>`.
pub struct RmcpPeer {
    client: RunningService<RoleClient, ()>,
}

impl RmcpPeer {
    /// Spawn `server args` and complete the MCP handshake with it.
    pub async fn connect(server: &Path, args: &[&str]) -> anyhow::Result<RmcpPeer> {
        #[allow(clippy::disallowed_methods)] // the peer under measurement, spawned the rmcp way
        let mut command = tokio::process::Command::new(server);
        command.args(args);
        let transport = TokioChildProcess::new(command)
            .with_context(|| format!("spawn {}", server.display()))?;
        let client = ().serve(transport).await.context("rmcp handshake")?;
        Ok(RmcpPeer { client })
    }

    /// One `tools/call` of `echo`; checks the reply is one text item long enough to hold `text`.
    pub async fn call_echo(&self, text: &str) -> anyhow::Result<()> {
        let mut arguments = JsonObject::new();
        arguments.insert("text".to_owned(), text.into());
        let params = CallToolRequestParams::new("echo").with_arguments(arguments);
        let result = self.client.peer().call_tool(params).await?;
        ensure!(result.is_error != Some(true), "echo returned a tool error");
        let [content] = result.content.as_slice() else {
            anyhow::bail!("echo returned {} content items", result.content.len());
        };
        let reply = content.as_text().context("echo reply is not text")?;
        ensure!(
            reply.text.len() >= text.len() + ECHO_OVERHEAD,
            "echo reply is {} bytes for {} bytes sent",
            reply.text.len(),
            text.len()
        );
        Ok(())
    }

    /// Round trips with one call in flight: `warmup` untimed calls, then `samples` timed ones.
    pub async fn rtt(
        &self,
        payload_bytes: usize,
        warmup: usize,
        samples: usize,
    ) -> anyhow::Result<Vec<Duration>> {
        let text = "x".repeat(payload_bytes);
        for _ in 0..warmup {
            self.call_echo(&text).await?;
        }
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            let start = Instant::now();
            self.call_echo(&text).await?;
            times.push(start.elapsed());
        }
        Ok(times)
    }

    /// Calls per second with `in_flight` concurrent callers sharing this peer.
    pub async fn throughput(
        self: &Arc<Self>,
        in_flight: usize,
        total_calls: usize,
    ) -> anyhow::Result<f64> {
        let issued = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let callers: Vec<_> = (0..in_flight.max(1))
            .map(|_| {
                let peer = Arc::clone(self);
                let issued = Arc::clone(&issued);
                tokio::spawn(async move {
                    let text = "x".repeat(THROUGHPUT_PAYLOAD);
                    while issued.fetch_add(1, Ordering::Relaxed) < total_calls {
                        peer.call_echo(&text).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for caller in callers {
            caller.await.context("caller task")??;
        }
        Ok(total_calls as f64 / start.elapsed().as_secs_f64())
    }

    /// How many tools `tools/list` lists.
    pub async fn count_tools(&self) -> anyhow::Result<usize> {
        Ok(self.client.peer().list_all_tools().await?.len())
    }

    /// Shut the client down: closes the child's stdin and waits for it to exit (killing it
    /// if it lingers).
    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }
}
