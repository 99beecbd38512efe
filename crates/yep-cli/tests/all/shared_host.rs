//! The shared host: every stdio `yep mcp serve` of a home attaches to one warm host, with a
//! real `yep` binary, real server processes (the echo example, rmcp's server) and real MCP
//! sessions over pipes.

use crate::common;

use common::{ok, text, yep_in, yep_with_stdin};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin(name: &str) -> String {
    let path = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo test --workspace`",
        path.display()
    );
    path.to_str().unwrap().to_string()
}

/// A home with the echo example enabled and rmcp's example server added, and `settings`
/// appended to its settings.toml.
fn home_with(tmp: &Path, settings: &str) -> PathBuf {
    let home = tmp.join("home");
    let dir = tmp.join("src/echo");
    std::fs::create_dir_all(&dir).unwrap();
    let mut echo: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/echo/plugin.json"
        ))
        .unwrap(),
    )
    .unwrap();
    echo["yolop"]["capabilityServer"]["command"] = json!(bin("yep-example-echo"));
    std::fs::write(dir.join("plugin.json"), echo.to_string()).unwrap();
    ok(&yep_with_stdin(
        &home,
        &["install", dir.to_str().unwrap(), "--yes"],
        "",
    ));
    ok(&yep_with_stdin(&home, &["enable", "echo"], ""));
    ok(&yep_with_stdin(
        &home,
        &["mcp", "add", "files", "--", &bin("yep-bench-rmcp")],
        "",
    ));
    if !settings.is_empty() {
        let path = home.join("settings.toml");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        // Top-level keys go before the first table.
        text = format!("{settings}\n{text}");
        std::fs::write(path, text).unwrap();
    }
    home
}

/// One MCP session: `yep mcp serve` on pipes, its lines read on a thread.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// Lines that were not the answer waited for: requests and notifications.
    seen: Vec<Value>,
    next: u64,
}

impl Session {
    /// Start `yep mcp serve` in `cwd`, and shake hands (taking questions when `elicit`).
    #[allow(clippy::disallowed_methods)] // the CLI under test
    fn start(home: &Path, cwd: &Path, env: &[(&str, &str)], elicit: bool) -> Session {
        let mut child = crate::common::yep_command()
            .args(["mcp", "serve"])
            .current_dir(cwd)
            .env("YEP_HOME", home)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON from yep mcp serve ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let mut session = Session {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            next: 1,
        };
        let capabilities = match elicit {
            true => json!({"elicitation": {}}),
            false => json!({}),
        };
        let init = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "shared-host-test", "version": "1"}}),
        );
        let answer = session.wait(init, Duration::from_secs(30));
        assert!(answer.get("result").is_some(), "{answer}");
        session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer to request `id`, keeping what else came in `seen` (where an answer that
    /// came while another was awaited is found first).
    fn wait(&mut self, id: u64, within: Duration) -> Value {
        let answers = |line: &Value| line["id"] == json!(id) && line.get("method").is_none();
        if let Some(at) = self.seen.iter().position(answers) {
            return self.seen.remove(at);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no answer to request {id} within {within:?}; saw {:?}",
                    self.seen
                )
            });
            if answers(&line) {
                return line;
            }
            self.seen.push(line);
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        let id = self.request("tools/call", json!({"name": tool, "arguments": args}));
        self.wait(id, Duration::from_secs(30))
    }

    fn tools(&mut self) -> Vec<String> {
        let id = self.request("tools/list", json!({}));
        let answer = self.wait(id, Duration::from_secs(30));
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Close stdin (the agent goes) and wait for the client to exit; its stderr. The agent's
    /// end of stdout then reads to its end: the host, which wrote to it directly, let go of
    /// it, and no server it started holds it.
    fn close(mut self) -> String {
        use std::io::Read;
        drop(self.stdin.take());
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            err.read_to_string(&mut stderr).unwrap();
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{stderr}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("the session's stdout is still open 5 s after it ended")
                }
            }
        }
        stderr
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status(home: &Path) -> Value {
    let out = yep_with_stdin(home, &["host", "status", "--json"], "");
    serde_json::from_str(&ok(&out)).unwrap()
}

/// The running servers of workspace `root` in `status`: name → pid.
fn pids(status: &Value, root: &Path) -> Vec<(String, u64)> {
    let root = root.canonicalize().unwrap();
    let w = status["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| Path::new(w["root"].as_str().unwrap()) == root)
        .unwrap_or_else(|| panic!("no workspace {} in {status}", root.display()));
    w["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| Some((s["name"].as_str()?.to_string(), s["pid"].as_u64()?)))
        .collect()
}

/// The `yep host serve` processes of `home` running now.
fn hosts_of(home: &Path) -> Vec<u32> {
    let home = home.to_str().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.windows(2).any(|w| w == ["host", "serve"]) && args.iter().any(|a| a == home) {
            found.push(pid);
        }
    }
    found
}

fn alive(pid: u64) -> bool {
    yep_test_support::procs::running(pid as i64)
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn echoed(answer: &Value) -> String {
    answer["result"]["structuredContent"]["echoed"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string()
}

#[test]
fn eight_sessions_started_at_once_share_one_host_and_one_process_per_package() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let start = std::sync::Arc::new(std::sync::Barrier::new(8));
    let sessions: Vec<Session> = (0..8)
        .map(|i| {
            let (home, ws, start) = (home.clone(), ws.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut s = Session::start(&home, &ws, &[], false);
                let said = format!("session {i}");
                assert_eq!(echoed(&s.call("echo", json!({"text": said}))), said);
                let files = s.call("mcp__files__echo", json!({"text": said}));
                assert!(files.to_string().contains(&said), "{files}");
                s
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(hosts_of(&home).len(), 1, "one host for eight sessions");
    let now = status(&home);
    assert_eq!(now["sessions"], 8, "{now}");
    assert_eq!(now["workspaces"].as_array().unwrap().len(), 1, "{now}");
    let running = pids(&now, &ws);
    let names: Vec<&str> = running.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["echo", "mcp.files"],
        "one process per package: {now}"
    );
    for s in sessions {
        s.close();
    }
    wait_until("the sessions leave", Duration::from_secs(5), || {
        status(&home)["sessions"] == 0
    });
    // The servers stay warm for the next session.
    assert_eq!(pids(&status(&home), &ws), running);
}

#[test]
fn two_workspaces_get_their_own_processes_and_a_workspace_server_stays_in_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for ws in [&a, &b] {
        std::fs::create_dir_all(ws).unwrap();
    }
    let mcp_json = json!({"mcpServers": {"local": {"command": bin("yep-bench-rmcp")}}});
    std::fs::write(a.join(".mcp.json"), mcp_json.to_string()).unwrap();
    ok(&yep_in(&a, &home, &["trust", "local", "--yes"], ""));
    let mut in_a = Session::start(&home, &a, &[], false);
    let mut in_b = Session::start(&home, &b, &[], false);
    let (tools_a, tools_b) = (in_a.tools(), in_b.tools());
    assert!(
        tools_a.iter().any(|t| t.starts_with("mcp__local__")),
        "{tools_a:?}"
    );
    assert!(
        !tools_b.iter().any(|t| t.starts_with("mcp__local__")),
        "{tools_b:?}"
    );
    let reached = in_b.call("mcp__local__echo", json!({"text": "x"}));
    assert!(
        reached.get("error").is_some() || reached["result"]["isError"] == true,
        "workspace b reached a's server: {reached}"
    );
    assert!(
        in_a.call("mcp__local__echo", json!({"text": "x"}))
            .to_string()
            .contains('x')
    );
    echoed(&in_a.call("echo", json!({"text": "a"})));
    echoed(&in_b.call("echo", json!({"text": "b"})));
    let now = status(&home);
    let echo_of = |ws: &Path| {
        pids(&now, ws)
            .into_iter()
            .find(|(n, _)| n == "echo")
            .unwrap()
            .1
    };
    assert_ne!(echo_of(&a), echo_of(&b), "{now}");
    assert_eq!(hosts_of(&home).len(), 1);
    in_a.close();
    in_b.close();
}

#[test]
fn a_question_during_session_as_call_reaches_a_only() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut a = Session::start(&home, &ws, &[], true);
    let mut b = Session::start(&home, &ws, &[], true);
    let call = a.request(
        "tools/call",
        json!({"name": "ask", "arguments": {"prompt": "which colour?"}}),
    );
    // A is asked: it answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let asked = loop {
        let line = a
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("session a was never asked");
        if line["method"] == "elicitation/create" {
            break line;
        }
        a.seen.push(line);
    };
    assert!(asked.to_string().contains("which colour?"), "{asked}");
    a.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "action": "accept", "content": {"answer": "green"}}}));
    let answer = a.wait(call, Duration::from_secs(30));
    assert!(answer.to_string().contains("green"), "{answer}");
    // B, attached to the same host and taking questions, saw none of it.
    let id = b.request("ping", json!({}));
    b.wait(id, Duration::from_secs(10));
    assert!(
        !b.seen.iter().any(|l| l["method"] == "elicitation/create"),
        "{:?}",
        b.seen
    );
    a.close();
    b.close();
}

#[test]
fn a_host_killed_mid_call_fails_the_call_at_once_and_the_next_call_starts_a_new_host() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = Session::start(&home, &ws, &[], false);
    echoed(&s.call("echo", json!({"text": "before"})));
    let before = status(&home);
    let host = before["pid"].as_u64().unwrap();
    let echo = pids(&before, &ws)
        .into_iter()
        .find(|(n, _)| n == "echo")
        .unwrap()
        .1;
    // A call that takes 20 s, killed 0.5 s in.
    let call = s.request(
        "tools/call",
        json!({"name": "count", "arguments": {"n": 200, "interval_ms": 100}}),
    );
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    // SAFETY: a signal to the host this test started (through its session).
    assert_eq!(unsafe { libc::kill(host as i32, libc::SIGKILL) }, 0);
    let failed = s.wait(call, Duration::from_secs(5));
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(1), "failed after {took:?}");
    let said = failed["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{failed}"));
    assert!(
        said.contains("shared host stopped during this request")
            && said.contains("the next request starts a new one"),
        "{said}"
    );
    // The log it points at says what became of the host: it started, and was lost mid-call.
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap();
    assert!(
        said.contains(&home.join("logs/host.log").display().to_string()),
        "{said}"
    );
    assert!(log.contains(&format!("(pid {host}) serving")), "{log}");
    assert!(
        log.contains("the shared host closed its connection with 1 request(s) unanswered")
            && log.contains("killed (SIGKILL, the OOM killer) or crashed"),
        "{log}"
    );
    // The dead host's server sees its stdin close and exits (its stderr is gone too).
    wait_until(
        "the orphaned echo server exits",
        Duration::from_secs(10),
        || !alive(echo),
    );
    // The next call works, on a new host, in the same session.
    assert_eq!(echoed(&s.call("echo", json!({"text": "after"}))), "after");
    let new = status(&home)["pid"].as_u64().unwrap();
    assert_ne!(new, host);
    assert_eq!(hosts_of(&home), [new as u32]);
    // A host stopped by a signal says so.
    // SAFETY: a signal to the host this test started (through its session).
    assert_eq!(unsafe { libc::kill(new as i32, libc::SIGTERM) }, 0);
    wait_until("the host stops on SIGTERM", Duration::from_secs(10), || {
        !alive(new)
    });
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap();
    assert!(
        log.contains("stopping: SIGTERM received") && log.contains(&format!("(pid {new}) stopped")),
        "{log}"
    );
    // The requests the dead host had answered (it wrote those answers to the agent itself,
    // and told the client) got no second answer: the client's errors, sent at once, came
    // before the next call's answer.
    let again: Vec<&Value> = s.seen.iter().filter(|l| l.get("id").is_some()).collect();
    assert!(again.is_empty(), "answered twice: {again:?}");
    s.close();
}

/// Install the Python and TypeScript SDKs' example servers in `home` as `py` and `js`.
fn add_sdk_servers(home: &Path, src: &Path) {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk")
        .canonicalize()
        .unwrap();
    let servers = [
        (
            "py",
            "python3",
            sdk.join("python/examples/echo_server.py"),
            sdk.join("python"),
        ),
        (
            "js",
            "node",
            sdk.join("typescript/examples/echo-server.js"),
            sdk.join("typescript"),
        ),
    ];
    for (name, program, script, lib) in servers {
        let tools = json!([
            {"name": "echo", "description": "echo",
             "schema": {"type": "object", "properties": {"text": {"type": "string"}}}},
            {"name": "count", "description": "count",
             "schema": {"type": "object", "properties": {
                 "n": {"type": "integer"}, "interval_ms": {"type": "integer"}}}}
        ]);
        let manifest = json!({"name": name, "version": "1.0.0", "description": "an SDK example",
            "yolop": {"capabilityServer": {"command": program, "args": [script]}, "tools": tools},
            "sandbox": {"read": [lib]}});
        let dir = src.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plugin.json"), manifest.to_string()).unwrap();
        ok(&yep_with_stdin(
            home,
            &["install", dir.to_str().unwrap(), "--yes"],
            "",
        ));
        ok(&yep_with_stdin(home, &["enable", name], ""));
    }
}

/// The Python and TypeScript SDKs, like the Rust one: a server whose shared host is killed
/// while it works sees its stdin close and exits, though its stderr is gone too (a note to a
/// dead stderr must neither crash it into a loop nor keep it alive).
#[test]
fn python_and_node_servers_of_a_killed_host_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    add_sdk_servers(&home, &tmp.path().join("src"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = Session::start(&home, &ws, &[], false);
    let tools = s.tools();
    let named = |server: &str, tool: &str| {
        tools
            .iter()
            .find(|t| t.contains(server) && t.ends_with(tool))
            .unwrap_or_else(|| panic!("no {server} {tool} in {tools:?}"))
            .clone()
    };
    for server in ["py", "js"] {
        let tool = named(server, "echo");
        assert_eq!(echoed(&s.call(&tool, json!({"text": server}))), server);
    }
    let before = status(&home);
    let host = before["pid"].as_u64().unwrap();
    let servers: Vec<(String, u64)> = pids(&before, &ws)
        .into_iter()
        .filter(|(n, _)| n == "py" || n == "js")
        .collect();
    assert_eq!(servers.len(), 2, "{before}");
    // Both busy when the host dies: a call each that would take 20 s.
    let calls: Vec<u64> = ["py", "js"]
        .iter()
        .map(|server| {
            s.request(
                "tools/call",
                json!({"name": named(server, "count"), "arguments": {"n": 200, "interval_ms": 100}}),
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a signal to the host this test started (through its session).
    assert_eq!(unsafe { libc::kill(host as i32, libc::SIGKILL) }, 0);
    for call in calls {
        let failed = s.wait(call, Duration::from_secs(5));
        assert!(failed["error"].is_object(), "{failed}");
    }
    for (name, pid) in servers {
        wait_until(
            &format!("the orphaned {name} server exits"),
            Duration::from_secs(10),
            || !alive(pid),
        );
    }
    s.close();
}

#[test]
fn an_idle_server_is_stopped_shown_idle_and_started_again_and_an_unused_host_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "idle_stop = \"1s\"\nhost_linger = \"2s\"");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = Session::start(&home, &ws, &[], false);
    echoed(&s.call("echo", json!({"text": "one"})));
    let first = pids(&status(&home), &ws)
        .into_iter()
        .find(|(n, _)| n == "echo")
        .unwrap()
        .1;
    wait_until(
        "the idle echo server stops",
        Duration::from_secs(10),
        || !alive(first),
    );
    let now = status(&home);
    let echo = now["workspaces"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(echo["state"], "idle", "{now}");
    let listed = ok(&yep_with_stdin(&home, &["list", "--json"], ""));
    assert!(listed.contains("\"idle\""), "{listed}");
    // Still listed while it sleeps, and started again by the next call.
    assert!(s.tools().contains(&"echo".to_string()));
    assert_eq!(echoed(&s.call("echo", json!({"text": "two"}))), "two");
    let second = pids(&status(&home), &ws)
        .into_iter()
        .find(|(n, _)| n == "echo")
        .unwrap()
        .1;
    assert_ne!(first, second);
    let host = hosts_of(&home);
    assert_eq!(host.len(), 1);
    s.close();
    // With no session attached for `host_linger`, the host exits, and its servers with it.
    wait_until("the host exits", Duration::from_secs(15), || {
        !alive(u64::from(host[0])) && !alive(second)
    });
    assert!(!home.join("run/host.sock").exists());
    // The next session starts a new one.
    let mut again = Session::start(&home, &ws, &[], false);
    assert_eq!(
        echoed(&again.call("echo", json!({"text": "three"}))),
        "three"
    );
    again.close();
}

#[test]
fn a_host_of_another_version_is_not_used_and_exits_when_its_last_session_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut old = Session::start(
        &home,
        &ws,
        &[("YEP_SHARED_HOST_VERSION", "0.0.1-old")],
        false,
    );
    echoed(&old.call("echo", json!({"text": "old"})));
    let old_hosts = hosts_of(&home);
    assert_eq!(old_hosts.len(), 1);
    // This build's session does not attach to it: it starts its own host in its place.
    let mut new = Session::start(&home, &ws, &[], false);
    echoed(&new.call("echo", json!({"text": "new"})));
    let now = status(&home);
    assert_eq!(now["version"], env!("CARGO_PKG_VERSION"), "{now}");
    let new_host = now["pid"].as_u64().unwrap() as u32;
    assert_ne!(new_host, old_hosts[0]);
    assert_eq!(hosts_of(&home).len(), 2);
    // The old session keeps its host until it leaves; then that host exits.
    echoed(&old.call("echo", json!({"text": "still"})));
    old.close();
    wait_until("the old host exits", Duration::from_secs(10), || {
        !alive(u64::from(old_hosts[0]))
    });
    assert_eq!(hosts_of(&home), [new_host]);
    echoed(&new.call("echo", json!({"text": "on"})));
    new.close();
}

#[test]
fn the_socket_and_its_directory_are_owner_only_and_another_uid_is_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let s = Session::start(&home, &ws, &[], false);
    let dir = home.join("run");
    let sock = dir.join("host.sock");
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(std::fs::metadata(&sock).unwrap().uid(), unsafe {
        libc::geteuid()
    });

    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root to connect as another uid (CI runs as root)");
    }
    // Another uid that gets past the modes (its file-system uid stays root, as a process
    // that kept a way in would): the host reads its credentials and hangs up unanswered.
    let hello = json!({"yep_shared_host": 1, "version": env!("CARGO_PKG_VERSION"),
        "purpose": "status"});
    let probe = format!(
        r#"
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
os.setresgid(65534, 65534, 0)
os.setresuid(65534, 65534, 0)
libc.setfsuid(0)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({sock:?})
try:
    s.sendall({hello:?}.encode() + b"\n")
except (BrokenPipeError, ConnectionResetError):
    pass
s.settimeout(10)
data = b""
while True:
    try:
        chunk = s.recv(4096)
    except ConnectionResetError:
        break
    if not chunk:
        break
    data += chunk
print("uid", os.geteuid(), "answer", repr(data))
"#,
        sock = sock.to_str().unwrap(),
        hello = hello.to_string(),
    );
    #[allow(clippy::disallowed_methods)] // python as the other user
    let out = Command::new("python3")
        .args(["-c", &probe])
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert_eq!(said.trim(), "uid 65534 answer b''", "{}", text(&out.stderr));
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap();
    assert!(
        log.contains("refused a connection: the peer runs as uid 65534"),
        "{log}"
    );
    // The same user is answered.
    assert_eq!(status(&home)["sessions"], 1);
    s.close();

    // A run directory someone else owns is refused, and the session is served on its own.
    ok(&yep_with_stdin(&home, &["host", "stop"], ""));
    wait_until("the host stops", Duration::from_secs(10), || {
        hosts_of(&home).is_empty()
    });
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let mut own = Session::start(&home, &ws, &[], false);
    echoed(&own.call("echo", json!({"text": "alone"})));
    let said = own.close();
    assert!(
        said.contains("owned by uid 65534")
            && said.contains("serving this session with a host of its own"),
        "{said}"
    );
    assert!(hosts_of(&home).is_empty());
}

#[test]
fn no_shared_serves_the_session_with_a_host_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    #[allow(clippy::disallowed_methods)] // the CLI under test
    let mut child = crate::common::yep_command()
        .args(["mcp", "serve", "--no-shared"])
        .current_dir(&ws)
        .env("YEP_HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
    )
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"result\""), "{line}");
    assert!(
        hosts_of(&home).is_empty(),
        "--no-shared started a shared host"
    );
    assert!(!home.join("run/host.sock").exists());
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// The lines of a session that initializes, calls echo with `text`, and pings.
fn scripted(text: &str) -> String {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": text}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

/// The answers among `out`'s lines, by id.
fn answers(out: &str) -> Vec<Value> {
    let mut lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .filter(|l: &Value| l.get("id").is_some() && l.get("method").is_none())
        .collect();
    lines.sort_by_key(|l| l["id"].as_u64());
    lines
}

#[test]
fn a_session_on_sockets_or_writing_to_a_file_is_served_as_one_on_pipes() {
    use std::os::unix::net::UnixStream;
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    #[allow(clippy::disallowed_methods)] // the CLI under test
    let yep = |stdin: Stdio, stdout: Stdio| {
        crate::common::yep_command()
            .args(["mcp", "serve"])
            .current_dir(&ws)
            .env("YEP_HOME", &home)
            .env_remove("RUST_LOG")
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Sockets each way, as Node's child_process gives: the output is handed to the host.
    let (mut agent_in, child_in) = UnixStream::pair().unwrap();
    let (agent_out, child_out) = UnixStream::pair().unwrap();
    let mut child = yep(
        Stdio::from(std::os::fd::OwnedFd::from(child_in)),
        Stdio::from(std::os::fd::OwnedFd::from(child_out)),
    );
    agent_in
        .write_all(scripted("on a socket").as_bytes())
        .unwrap();
    let mut reader = BufReader::new(agent_out.try_clone().unwrap());
    let mut out = String::new();
    while answers(&out).len() < 3 {
        let mut line = String::new();
        assert_ne!(
            reader.read_line(&mut line).unwrap(),
            0,
            "ended early: {out}"
        );
        out.push_str(&line);
    }
    let got = answers(&out);
    assert_eq!(echoed(&got[1]), "on a socket");
    assert!(got[2].get("result").is_some(), "{out}");
    drop(agent_in);
    assert!(child.wait().unwrap().success());
    // Nobody holds the agent's end open once the session is over.
    agent_out
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest)
        .expect("the socket reads to its end once the session is over");

    // A file: nothing the host can write to, so the client passes the host's lines itself.
    let file = tmp.path().join("out.jsonl");
    let mut child = yep(
        Stdio::piped(),
        Stdio::from(std::fs::File::create(&file).unwrap()),
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(scripted("to a file").as_bytes()).unwrap();
    wait_until("three answers in the file", Duration::from_secs(30), || {
        answers(&std::fs::read_to_string(&file).unwrap()).len() == 3
    });
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let got = answers(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(echoed(&got[1]), "to a file");
}

#[test]
fn a_client_that_hands_over_something_else_is_hung_up_on_and_the_host_serves_on() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = Session::start(&home, &ws, &[], false);
    let sock = home.join("run/host.sock");
    let key = std::fs::read_to_string(home.join("run/host.key")).unwrap();
    let hello = json!({"yep_shared_host": 1, "version": env!("CARGO_PKG_VERSION"),
        "key": key, "purpose": "session", "workspace": ws, "hand_off": true});
    let host = status(&home)["pid"].as_u64().unwrap();
    let open_fds = || {
        std::fs::read_dir(format!("/proc/{host}/fd"))
            .unwrap()
            .count()
    };
    let before = open_fds();
    // Each client says it hands its output over, then sends a file's descriptor, a byte
    // with none, or a pipe's read end: each is hung up on once welcomed. Then 200 that send
    // three descriptors on the one byte: none of them stays open in the host.
    let probe = format!(
        r#"
import json, os, socket
def attach(send):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({sock:?})
    s.sendall({hello:?}.encode() + b"\n")
    s.settimeout(10)
    welcome = b""
    while not welcome.endswith(b"\n"):
        welcome += s.recv(1)
    assert "error" not in json.loads(welcome), welcome
    send(s)
    rest = s.recv(4096)
    print("hung up" if rest == b"" else "answered " + repr(rest))
with open({file:?}, "w") as f:
    attach(lambda s: socket.send_fds(s, [b"F"], [f.fileno()]))
attach(lambda s: s.sendall(b"F"))
r, w = os.pipe()
attach(lambda s: socket.send_fds(s, [b"F"], [r]))
for _ in range(200):
    attach(lambda s: socket.send_fds(s, [b"F"], [w, w, w]))
"#,
        sock = sock.to_str().unwrap(),
        hello = hello.to_string(),
        file = tmp.path().join("not-a-pipe").to_str().unwrap(),
    );
    #[allow(clippy::disallowed_methods)] // a client written by hand
    let out = Command::new("python3")
        .args(["-c", &probe])
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert_eq!(said.lines().collect::<Vec<_>>(), ["hung up"; 203]);
    // What each connection held is closed once it is hung up on.
    wait_until(
        "the host closes what it was handed",
        Duration::from_secs(10),
        || open_fds() <= before + 8,
    );
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap();
    for why in [
        "not a pipe or a socket",
        "expected one descriptor on one byte, got 0",
        "expected one descriptor on one byte, got 3",
        "not open for writing",
    ] {
        assert!(log.contains(why), "{why}: {log}");
    }
    // The host and the session attached before are as they were.
    assert_eq!(echoed(&s.call("echo", json!({"text": "still"}))), "still");
    assert_eq!(status(&home)["sessions"], 1);
    s.close();
}

/// A sandboxed server the host started reaches for the host's own socket, as the yep home it
/// can name (from `$YEP_DATA_DIR`) tells it: it cannot read the attach key, so the host
/// neither attaches it (at `/`, whose sandbox would read everything) nor stops for it.
#[test]
fn a_server_the_host_started_can_neither_attach_nor_stop_the_host_through_its_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let escape =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/sandbox-escape");
    ok(&yep_with_stdin(
        &home,
        &["install", escape.to_str().unwrap(), "--yes"],
        "",
    ));
    ok(&yep_with_stdin(&home, &["enable", "sandbox-escape"], ""));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = Session::start(&home, &ws, &[("YEP_SANDBOX", "required")], false);
    let host = status(&home)["pid"].as_u64().unwrap();
    let tool = s
        .tools()
        .into_iter()
        .find(|t| t.contains("attempt"))
        .expect("the escape's tool is listed");
    let targets = json!({
        "host_socket": home.join("run/host.sock"),
        "host_key": home.join("run/host.key"),
    });
    let answer = s.call(&tool, json!({"targets": targets}));
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["read host_key"], "denied: EACCES", "{answer}");
    for attack in ["attach shared host at /", "stop shared host"] {
        let said = result[attack]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        assert!(
            said.starts_with("refused: ") && said.contains("attach key"),
            "{attack}: {said}"
        );
    }
    // The host is the one it was, with this session alone, and serves on.
    assert!(alive(host));
    let now = status(&home);
    assert_eq!(now["pid"], host);
    assert_eq!(now["sessions"], 1, "{now}");
    assert_eq!(
        now["workspaces"].as_array().unwrap().len(),
        1,
        "no workspace at /: {now}"
    );
    assert_eq!(echoed(&s.call("echo", json!({"text": "still"}))), "still");
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap();
    assert!(
        log.contains("refused a connection without the attach key"),
        "{log}"
    );
    s.close();
}

/// An agent started in the home directory (or at the root) is served by a host of its own,
/// never the shared one, which refuses such a workspace outright.
#[test]
fn a_session_in_the_home_directory_is_served_by_a_host_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let user = tmp.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let mut s = Session::start(&home, &user, &[("HOME", user.to_str().unwrap())], false);
    assert_eq!(echoed(&s.call("echo", json!({"text": "alone"}))), "alone");
    let said = s.close();
    assert!(
        said.contains("is your home directory: a shared host never serves it")
            && said.contains("serving this session with a host of its own"),
        "{said}"
    );
    assert!(hosts_of(&home).is_empty());
    // Asked directly, with the key, the shared host refuses it too.
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut other = Session::start(&home, &ws, &[], false);
    drop(other.tools());
    let key = std::fs::read_to_string(home.join("run/host.key")).unwrap();
    let hello = json!({"yep_shared_host": 1, "version": env!("CARGO_PKG_VERSION"),
        "key": key, "purpose": "session", "workspace": "/"});
    let mut stream = std::os::unix::net::UnixStream::connect(home.join("run/host.sock")).unwrap();
    writeln!(stream, "{hello}").unwrap();
    let mut welcome = String::new();
    BufReader::new(stream).read_line(&mut welcome).unwrap();
    assert!(
        welcome.contains("is the root of the filesystem: a shared host never serves it"),
        "{welcome}"
    );
    other.close();
}

#[test]
fn a_session_on_another_path_is_served_with_its_own_and_the_first_one_s_failure_does_not_stick() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_with(tmp.path(), "");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // A server named by a bare command that only a directory the second shell put on PATH
    // holds (a tool installed after the first session started).
    let tools = tmp.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let server = tools.join("yep-path-only-server");
    if std::fs::hard_link(bin("yep-bench-rmcp"), &server).is_err() {
        std::fs::copy(bin("yep-bench-rmcp"), &server).unwrap();
    }
    let old_path = std::env::var("PATH").unwrap();
    let new_path = format!("{}:{old_path}", tools.display());
    ok(&common::yep_with_env(
        &home,
        &["mcp", "add", "late", "--", "yep-path-only-server"],
        "",
        &[("PATH", &new_path)],
    ));
    let mut first = Session::start(&home, &ws, &[("PATH", &old_path)], false);
    let failed = first.call("mcp__late__echo", json!({"text": "x"}));
    assert!(
        failed.get("error").is_some() || failed["result"]["isError"] == true,
        "the first session found a server its PATH lacks: {failed}"
    );
    echoed(&first.call("echo", json!({"text": "a"})));
    // The second session's call works with no `yep host stop` between.
    let mut second = Session::start(&home, &ws, &[("PATH", &new_path)], false);
    let reached = second.call("mcp__late__echo", json!({"text": "from the new shell"}));
    assert!(
        reached.get("result").is_some() && reached["result"]["isError"] != true,
        "{reached}"
    );
    assert!(
        reached.to_string().contains("from the new shell"),
        "{reached}"
    );
    echoed(&second.call("echo", json!({"text": "b"})));
    // The first session still shares the host it started; the second was not served by it.
    assert_eq!(hosts_of(&home).len(), 1);
    assert_eq!(status(&home)["sessions"], 1, "{}", status(&home));
    let said = second.close();
    assert!(said.contains("another environment (PATH)"), "{said}");
    first.close();
    let log = std::fs::read_to_string(home.join("logs/host.log")).unwrap_or_default();
    assert!(log.contains("another environment (PATH)"), "{log}");
}
