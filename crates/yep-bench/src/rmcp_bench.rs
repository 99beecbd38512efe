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
    /// The server's process id (while it runs).
    pid: Option<u32>,
}

impl RmcpPeer {
    /// Spawn `server args` and complete the MCP handshake with it.
    pub async fn connect(server: &Path, args: &[&str]) -> anyhow::Result<RmcpPeer> {
        #[allow(clippy::disallowed_methods)] // the peer under measurement, spawned the rmcp way
        let mut command = tokio::process::Command::new(server);
        command.args(args);
        RmcpPeer::serve(server, command, None).await
    }

    /// [`RmcpPeer::connect`], the server started in `cwd` (for `yep mcp serve`, its workspace)
    /// with its stderr appended to `log`.
    pub async fn connect_in(
        server: &Path,
        args: &[&str],
        cwd: &Path,
        log: &Path,
    ) -> anyhow::Result<RmcpPeer> {
        #[allow(clippy::disallowed_methods)] // the peer under measurement, spawned the rmcp way
        let mut command = tokio::process::Command::new(server);
        command.args(args).current_dir(cwd);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("open {}", log.display()))?;
        RmcpPeer::serve(server, command, Some(log)).await
    }

    async fn serve(
        server: &Path,
        command: tokio::process::Command,
        stderr: Option<std::fs::File>,
    ) -> anyhow::Result<RmcpPeer> {
        let spawned = match stderr {
            None => TokioChildProcess::new(command),
            Some(log) => TokioChildProcess::builder(command)
                .stderr(log)
                .spawn()
                .map(|(transport, _)| transport),
        };
        let transport = spawned.with_context(|| format!("spawn {}", server.display()))?;
        let pid = transport.id();
        let client = ().serve(transport).await.context("rmcp handshake")?;
        Ok(RmcpPeer { client, pid })
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// One `tools/call` of `echo`; checks the reply is one text item long enough to hold `text`.
    pub async fn call_echo(&self, text: &str) -> anyhow::Result<()> {
        self.call_tool("echo", text).await
    }

    /// One `tools/call` of `tool`, an echo under another name (`mcp__a__echo` through `yep mcp
    /// serve`), with the same check as [`RmcpPeer::call_echo`].
    pub async fn call_tool(&self, tool: &str, text: &str) -> anyhow::Result<()> {
        let mut arguments = JsonObject::new();
        arguments.insert("text".to_owned(), text.into());
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = self.client.peer().call_tool(params).await?;
        if result.is_error == Some(true) {
            let said: Vec<&str> = result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            anyhow::bail!("{tool} returned a tool error: {}", said.join(" "));
        }
        let [content] = result.content.as_slice() else {
            anyhow::bail!("{tool} returned {} content items", result.content.len());
        };
        let reply = content.as_text().context("echo reply is not text")?;
        ensure!(
            reply.text.len() >= text.len() + ECHO_OVERHEAD,
            "{tool} replied {} bytes for {} bytes sent",
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
        self.rtt_of("echo", payload_bytes, warmup, samples).await
    }

    /// [`RmcpPeer::rtt`] of the echo tool `tool`.
    pub async fn rtt_of(
        &self,
        tool: &str,
        payload_bytes: usize,
        warmup: usize,
        samples: usize,
    ) -> anyhow::Result<Vec<Duration>> {
        let text = "x".repeat(payload_bytes);
        for _ in 0..warmup {
            self.call_tool(tool, &text).await?;
        }
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            let start = Instant::now();
            self.call_tool(tool, &text).await?;
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
        Ok(self.tool_names().await?.len())
    }

    /// The names `tools/list` lists.
    pub async fn tool_names(&self) -> anyhow::Result<Vec<String>> {
        let tools = self.client.peer().list_all_tools().await?;
        Ok(tools.into_iter().map(|t| t.name.into_owned()).collect())
    }

    /// Shut the client down: closes the child's stdin and waits for it to exit (killing it
    /// if it lingers).
    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }
}
