//! Section 10, the shared host: `yep mcp serve` sessions in one workspace over five packages
//! (a Rust, a Python and a Node extension, two stdio MCP servers), attached to one warm host
//! against a host per session (`--no-shared`): their processes, their memory, a call, and
//! attaching.

use crate::Report;
use crate::rmcp_bench::RmcpPeer;
use crate::stats::percentiles;
use crate::yep_side::{bare_start, command, interpreter, sibling};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use yep_host::store::Home;
use yep_serve::shared::Purpose;

/// Sessions at once, as an agent's terminals, subagents and worktrees run them.
const SESSIONS: usize = 8;

/// The packages in the home, each with an echo tool that every session calls once: its name
/// as `yep mcp serve` lists it is `echo` or `<package>__echo` (a collision qualifies all but
/// the first).
const PACKAGES: usize = 5;

pub async fn shared(
    r: &mut Report,
    echo: &Path,
    rmcp_server: &Path,
    scratch: &Path,
) -> anyhow::Result<()> {
    let yep = sibling("yep")?;
    let workspace = scratch.join("shared-workspace");
    std::fs::create_dir_all(&workspace)?;
    let workspace = workspace.canonicalize()?;
    let home = shared_home(&yep, echo, rmcp_server, scratch, &workspace)?;
    let bench = Bench {
        yep,
        home: Home { root: home },
        workspace,
        log: scratch.join("shared-sessions.log"),
    };
    // Whatever happens below, the detached host does not outlive the run.
    let _guard = StopOnDrop(&bench);

    // One session, then eight at once, each on a fresh host; then eight hosts of their own.
    bench.stop_host().await?;
    let one = bench.sessions(1, true).await?;
    let one_census = bench.census(&one, true).await?;
    close(one).await;
    bench.stop_host().await?;
    let eight = bench.sessions(SESSIONS, true).await?;
    let shared_census = bench.census(&eight, true).await?;
    close(eight).await;
    let own = bench.sessions(SESSIONS, false).await?;
    let own_census = bench.census(&own, false).await?;
    close(own).await;
    for (name, c) in [
        ("shared_processes_1", &one_census),
        ("shared_processes_8", &shared_census),
        ("per_session_processes_8", &own_census),
    ] {
        r.value(
            name,
            format!(
                "{:>9} processes: {} yep mcp serve, {} host and servers",
                c.processes,
                c.clients,
                c.processes - c.clients
            ),
            json!({ "processes": c.processes, "clients": c.clients,
                    "host_and_servers": c.processes - c.clients }),
        );
    }
    for (name, c) in [
        ("shared_rss_1", &one_census),
        ("shared_rss_8", &shared_census),
        ("per_session_rss_8", &own_census),
    ] {
        let mib = |kib: u64| kib as f64 / 1024.0;
        r.value(
            name,
            format!(
                "{:>9.1} MiB RSS summed ({:.1} MiB of it clients; PSS {:.1} MiB)",
                mib(c.rss_kib),
                mib(c.client_rss_kib),
                mib(c.pss_kib)
            ),
            json!({ "mib": mib(c.rss_kib), "clients_mib": mib(c.client_rss_kib),
                    "pss_mib": mib(c.pss_kib), "processes": c.processes }),
        );
    }

    // The Rust extension's 200 B echo through a session attached to the warm host, against
    // the same call through a session with a host of its own, in alternating rounds.
    r.probe("the shared call")?;
    let attached = bench.session(true).await?;
    let own = bench.session(false).await?;
    let tool = rust_echo(&attached.tool_names().await?);
    let (mut through, mut alone) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        through.extend(attached.rtt_of(&tool, 200, 30, 300).await?);
        alone.extend(own.rtt_of(&tool, 200, 30, 300).await?);
    }
    close(vec![attached, own]).await;
    r.latency("shared_rtt_200", percentiles(through));
    r.latency("per_session_rtt_200", percentiles(alone));

    // Attach plus `tools/list`: from spawning `yep mcp serve` to its tool list, with the
    // host warm, then with none running (stopped before each sample). Beside them, what the
    // spawn alone costs: `yep --version`, from spawn to exit.
    r.probe("the shared attach")?;
    r.latency(
        "yep_bare_start",
        percentiles(bare_start(&bench.yep, &["--version"], 20)?),
    );
    let mut warm = Vec::new();
    for i in 0..23 {
        let (took, peer) = bench.attach_and_list().await?;
        close(vec![peer]).await;
        if i >= 3 {
            warm.push(took);
        }
    }
    r.latency("shared_attach_list_warm", percentiles(warm));
    let (mut cold, mut spawned) = (Vec::new(), 0);
    for _ in 0..15 {
        bench.stop_host().await?;
        let (took, peer) = bench.attach_and_list().await?;
        // What the attach started under the host besides itself: no server needs to run
        // for a tool list.
        let host = bench.host_pid().await?;
        spawned = spawned.max(tree(&[host]).len().saturating_sub(1));
        close(vec![peer]).await;
        cold.push(took);
    }
    r.latency("shared_attach_list_cold", percentiles(cold));
    r.value(
        "shared_attach_cold_spawned",
        format!("{spawned:>9} server processes started by a cold attach and tools/list (most)"),
        json!({ "processes": spawned }),
    );
    bench.stop_host().await?;
    Ok(())
}

/// What the section drives.
#[derive(Clone)]
struct Bench {
    yep: PathBuf,
    home: Home,
    workspace: PathBuf,
    /// Where the sessions' stderr goes (their warnings would cut through the table).
    log: PathBuf,
}

/// Processes and memory of a set of sessions, counted while they are all open.
struct Census {
    /// Every live process: the sessions' `yep mcp serve`, what they started, and the shared
    /// host with what it started.
    processes: usize,
    /// The `yep mcp serve` processes themselves.
    clients: usize,
    /// VmRSS summed over `processes`, in KiB.
    rss_kib: u64,
    /// The clients' part of `rss_kib`.
    client_rss_kib: u64,
    /// The proportional set size summed: pages shared among the processes (a binary's text)
    /// counted once.
    pss_kib: u64,
}

impl Bench {
    /// `yep mcp serve` in the workspace, attached to the shared host or (`shared: false`)
    /// with a host of its own.
    async fn session(&self, shared: bool) -> anyhow::Result<RmcpPeer> {
        let home = self.home.root.display().to_string();
        let mut args = vec!["--home", home.as_str(), "mcp", "serve"];
        if !shared {
            args.push("--no-shared");
        }
        RmcpPeer::connect_in(&self.yep, &args, &self.workspace, &self.log).await
    }

    /// `n` sessions started at once, each calling every package's echo once (so every
    /// server runs).
    async fn sessions(&self, n: usize, shared: bool) -> anyhow::Result<Vec<RmcpPeer>> {
        let mut tasks = Vec::new();
        for _ in 0..n {
            let bench = self.clone();
            tasks.push(tokio::spawn(async move {
                let peer = bench.session(shared).await?;
                let echoes = echo_tools(&peer.tool_names().await?)?;
                for tool in echoes {
                    peer.call_tool(&tool, "hello").await?;
                }
                anyhow::Ok(peer)
            }));
        }
        let mut peers = Vec::new();
        for task in tasks {
            peers.push(task.await??);
        }
        Ok(peers)
    }

    /// Spawn a session and list its tools: how long that took, and the open session.
    async fn attach_and_list(&self) -> anyhow::Result<(Duration, RmcpPeer)> {
        let t = Instant::now();
        let peer = self.session(true).await?;
        let tools = peer.tool_names().await?;
        let took = t.elapsed();
        echo_tools(&tools)?;
        Ok((took, peer))
    }

    /// Count `sessions`' processes and memory; with `shared`, check that each session is a
    /// thin client (it started nothing) and count the shared host's tree with them.
    async fn census(&self, sessions: &[RmcpPeer], shared: bool) -> anyhow::Result<Census> {
        let clients: Vec<u32> = sessions.iter().filter_map(RmcpPeer::pid).collect();
        anyhow::ensure!(
            clients.len() == sessions.len(),
            "a session's yep mcp serve has no process id"
        );
        let mut roots = clients.clone();
        if shared {
            let status = self.status().await?;
            // The client that started the host is its parent until it exits: its tree holds
            // the host's; anything else is a host of its own.
            let host = tree(&[status.pid]);
            for &client in &clients {
                let own = tree(&[client]).into_iter().filter(|p| !host.contains(p));
                anyhow::ensure!(
                    own.count() == 1,
                    "yep mcp serve (pid {client}) started processes of its own: it did not attach to the shared host"
                );
            }
            anyhow::ensure!(
                status.sessions == sessions.len(),
                "the shared host has {} sessions, not {}",
                status.sessions,
                sessions.len()
            );
            roots.push(status.pid);
        }
        let all = tree(&roots);
        let rss = |pid: u32| yep_serve::shared::rss_kib(pid).unwrap_or(0);
        Ok(Census {
            processes: all.len(),
            clients: clients.len(),
            rss_kib: all.iter().map(|&p| rss(p)).sum(),
            client_rss_kib: clients.iter().map(|&p| rss(p)).sum(),
            pss_kib: all.iter().map(|&p| pss_kib(p)).sum(),
        })
    }

    async fn status(&self) -> anyhow::Result<yep_serve::shared::HostStatus> {
        let welcome = yep_serve::shared::control(&self.home, Purpose::Status)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no shared host is running"))?;
        welcome
            .status
            .ok_or_else(|| anyhow::anyhow!("the shared host sent no status"))
    }

    async fn host_pid(&self) -> anyhow::Result<u32> {
        Ok(self.status().await?.pid)
    }

    /// Stop the shared host as `yep host stop` does, and wait until its process is gone
    /// (its servers stop before it exits).
    async fn stop_host(&self) -> anyhow::Result<()> {
        let Some(welcome) = yep_serve::shared::control(&self.home, Purpose::Stop).await? else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while alive(welcome.pid) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the shared host (pid {}) did not exit within 20 s of being stopped",
                welcome.pid
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

/// Stops the shared host when the section ends, however it ends (a run killed outright leaves
/// it to its `host_linger`).
struct StopOnDrop<'a>(&'a Bench);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = command(&self.0.yep)
            .arg("--home")
            .arg(&self.0.home.root)
            .args(["host", "stop"])
            .stdout(std::process::Stdio::null())
            .status();
    }
}

async fn close(peers: Vec<RmcpPeer>) {
    for peer in peers {
        peer.close().await;
    }
}

/// The echo tools of the five packages among `tools`.
fn echo_tools(tools: &[String]) -> anyhow::Result<Vec<String>> {
    let echoes: Vec<String> = tools
        .iter()
        .filter(|t| *t == "echo" || t.ends_with("__echo"))
        .cloned()
        .collect();
    anyhow::ensure!(
        echoes.len() == PACKAGES,
        "yep mcp serve lists {} echo tools, not {PACKAGES}: {echoes:?}",
        echoes.len()
    );
    Ok(echoes)
}

/// The Rust extension's echo: `echo`, unless another package took that name first.
fn rust_echo(tools: &[String]) -> String {
    match tools.iter().any(|t| t == "rust__echo") {
        true => "rust__echo".into(),
        false => "echo".into(),
    }
}

/// A home of five packages, for sessions in `workspace`: the Rust, Python and Node SDKs' echo
/// servers as extensions (tools only: nothing starts them with a session), and the rmcp echo
/// server added twice, as `a` and `b`.
fn shared_home(
    yep: &Path,
    echo: &Path,
    rmcp_server: &Path,
    scratch: &Path,
    workspace: &Path,
) -> anyhow::Result<PathBuf> {
    let home = scratch.join("shared-home");
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk");
    let python = interpreter("python3", &["-c", "import sys; print(sys.executable)"])?;
    let node = interpreter("node", &["-e", "console.log(process.execPath)"])?;
    let script = |path: &str| -> anyhow::Result<String> {
        Ok(sdk.join(path).canonicalize()?.display().to_string())
    };
    // The SDKs' examples import their SDK from beside them: the packages ask to read it,
    // as a sandboxed server must.
    let servers = [
        ("rust", echo.to_path_buf(), vec![], None),
        (
            "python",
            python,
            vec![script("python/examples/echo_server.py")?],
            Some(script("python")?),
        ),
        (
            "node",
            node,
            vec![script("typescript/examples/echo-server.js")?],
            Some(script("typescript")?),
        ),
    ];
    let yep_here = |args: &[&str]| -> anyhow::Result<()> {
        let out = command(yep)
            .arg("--home")
            .arg(&home)
            .args(args)
            .current_dir(workspace)
            .stdin(std::process::Stdio::null())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "yep {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    for (name, command, args, sdk) in servers {
        let tools = json!([{"name": "echo", "description": "echo",
            "schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]);
        let mut manifest = json!({"name": name, "version": "1.0.0", "description": "bench",
            "yolop": {"capabilityServer": {"command": command, "args": args}, "tools": tools}});
        if let Some(sdk) = sdk {
            manifest["sandbox"] = json!({ "read": [sdk] });
        }
        let dir = scratch.join("shared-src").join(name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("plugin.json"), manifest.to_string())?;
        yep_here(&["install", &dir.display().to_string(), "--yes"])?;
        yep_here(&["enable", name])?;
    }
    let rmcp = rmcp_server.display().to_string();
    for name in ["a", "b"] {
        yep_here(&["mcp", "add", name, "--", &rmcp])?;
    }
    // A host left behind by a run killed outright exits a minute after its last session.
    let settings = home.join("settings.toml");
    let text = std::fs::read_to_string(&settings).unwrap_or_default();
    std::fs::write(&settings, format!("host_linger = \"60s\"\n{text}"))?;
    Ok(home)
}

/// The live processes under `roots`, the roots included (a zombie is not live).
fn tree(roots: &[u32]) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut live = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Some((state, ppid)) = stat(pid) else {
            continue;
        };
        if state != 'Z' {
            live.insert(pid);
        }
        children.entry(ppid).or_default().push(pid);
    }
    let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::new());
    let mut todo: Vec<u32> = roots.to_vec();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if live.contains(&pid) {
            out.push(pid);
        }
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    out
}

/// The state and parent of process `pid`, from `/proc/<pid>/stat` (its name, in parentheses,
/// may hold anything).
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// The proportional set size of `pid`, in KiB (`Pss` in `/proc/<pid>/smaps_rollup`).
fn pss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
