//! Servers that sleep when idle (`HostOptions::idle_stop`), over real processes: the fixture
//! extension and `tests/mcp/server.py`, installed into a temp home as `yep install` and
//! `yep mcp add` do. A server nothing used for the idle time is stopped, keeps its tools and
//! status, says so in the state file and the health stream (never as a warning), and starts
//! again on next use; a call in flight is never cut short.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use yep_host::health::{HealthEvent, HealthStream};
use yep_host::runtime::{ServerInfo, ServerState};
use yep_host::store::Home;
use yep_host::{ExtensionHost, HostOptions, Session};

/// The idle stop these tests run with: short, so a test waits about a second for it.
const IDLE: Duration = Duration::from_secs(1);

/// The longest any wait here takes before the test fails.
const BOUND: Duration = Duration::from_secs(10);

struct World {
    dir: tempfile::TempDir,
    home: Home,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().join("home"),
        };
        World { dir, home }
    }

    /// Install and enable fixture `name` serving `tools`, with a status line. (The fixture
    /// also serves `traces`: declared too, so no refusal is told.)
    fn fixture(&self, name: &str, tools: &[&str]) {
        let declared: Vec<Value> = tools
            .iter()
            .chain(&["traces"])
            .map(|t| json!({"name": t, "description": format!("the {t} tool")}))
            .collect();
        install_fixture(
            &self.home,
            &self.dir.path().join("src"),
            name,
            json!({"tools": declared, "status": true}),
            json!({"tools": tools}),
        );
    }

    async fn host(&self) -> ExtensionHost {
        let opts = HostOptions {
            supervisor: quick_opts(),
            idle_stop: Some(IDLE),
            ..HostOptions::default()
        };
        let session = Session {
            id: "s1".into(),
            workspace_root: self.dir.path().to_path_buf(),
        };
        ExtensionHost::start(self.home.clone(), session, opts)
            .await
            .unwrap()
    }
}

/// Poll `cond` every 20 ms until it holds, for at most [`BOUND`].
async fn within_bound(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "{what}: not within {BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether process `pid` is gone, reaped (no `/proc` entry, not even a zombie's).
fn gone(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn server(host: &ExtensionHost, name: &str) -> ServerInfo {
    host.servers()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server `{name}` in {:?}", host.servers()))
}

/// The host's warnings that name `name`.
fn warnings_about(host: &ExtensionHost, name: &str) -> Vec<String> {
    host.warnings()
        .into_iter()
        .filter(|w| w.contains(name))
        .collect()
}

/// Every health event so far.
fn drain(health: &mut HealthStream) -> Vec<HealthEvent> {
    std::iter::from_fn(|| health.try_recv()).collect()
}

/// Whether any of `events` is a problem about `name` (a failure, a warning, a crash).
fn troubled(events: &[HealthEvent], name: &str) -> Vec<HealthEvent> {
    events
        .iter()
        .filter(|e| e.extension() == Some(name) && e.warning().is_some())
        .cloned()
        .collect()
}

#[tokio::test]
async fn an_idle_server_is_stopped_keeps_its_tools_and_status_and_starts_again_on_next_use() {
    let w = World::new();
    w.fixture("sleepy", &["work"]);
    let host = w.host().await;
    let mut health = host.health();

    let answer = host
        .call_tool("work", json!({"status": "indexed"}), None, None)
        .await
        .unwrap();
    assert_eq!(answer["tool"], "work");
    let running = server(&host, "sleepy");
    assert_eq!(running.state, ServerState::Running);
    assert!(running.stops_in.is_some_and(|d| d <= IDLE), "{running:?}");
    let first = running.pid.expect("a running server");
    within_bound("the status", || {
        host.status()
            .get("sleepy")
            .is_some_and(|s| s.text == "indexed")
    })
    .await;

    // Nothing uses it: it is stopped, and its process is gone.
    within_bound("the idle stop", || host.pid("sleepy").is_none()).await;
    within_bound("the process to be reaped", || gone(first)).await;
    let stopped = server(&host, "sleepy");
    assert_eq!(stopped.state, ServerState::Idle, "{stopped:?}");
    assert_eq!((stopped.pid, stopped.stops_in), (None, None));
    let events = drain(&mut health);
    let idle: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            HealthEvent::Idle { extension, after } if extension == "sleepy" => Some(*after),
            _ => None,
        })
        .collect();
    assert_eq!(idle.len(), 1, "{events:?}");
    assert!(idle[0] >= IDLE, "stopped after {:?}", idle[0]);
    assert_eq!(
        yep_host::store::state::run_state(&w.home, "sleepy"),
        ("idle", None)
    );
    // As it was: its tool listed, its status kept, and nothing said about a problem.
    assert!(host.tools().iter().any(|t| t.name == "work"));
    assert_eq!(host.status()["sleepy"].text, "indexed");
    assert_eq!(troubled(&events, "sleepy"), []);
    assert_eq!(warnings_about(&host, "sleepy"), Vec::<String>::new());

    // The next call starts it again, as a restart.
    let again = host
        .call_tool("work", json!({"n": 2}), None, None)
        .await
        .unwrap();
    assert_eq!(again["args"], json!({"n": 2}));
    let second = host.pid("sleepy").expect("running again");
    assert_ne!(second, first);
    let events = drain(&mut health);
    assert!(
        events.iter().any(|e| matches!(e,
            HealthEvent::Restarted { extension, pid, .. } if extension == "sleepy" && *pid == Some(second))),
        "{events:?}"
    );
    assert_eq!(troubled(&events, "sleepy"), []);
    assert_eq!(
        yep_host::store::state::run_state(&w.home, "sleepy"),
        ("started", None)
    );
    assert_eq!(server(&host, "sleepy").state, ServerState::Running);
    host.shutdown().await;
    assert!(host.servers().is_empty());
}

#[tokio::test]
async fn a_call_running_past_the_idle_stop_is_not_cut_short_nor_counted_idle_when_it_ends() {
    let w = World::new();
    w.fixture("slow", &["work"]);
    let host = w.host().await;
    let mut health = host.health();

    // Three idle stops long: the sweeper sees it busy throughout.
    let call = tokio::spawn({
        let host = host.clone();
        async move {
            host.call_tool("work", json!({"sleep_ms": 3000}), None, None)
                .await
        }
    });
    within_bound("the call to be in flight", || server(&host, "slow").busy).await;
    let busy = server(&host, "slow");
    assert_eq!(busy.stops_in, None, "busy: no stop is due");
    let pid = busy.pid.expect("the call's server");
    // What came before the call (its start with the session, or an idle stop of it on a
    // slow machine) is not this test's.
    drain(&mut health);
    // Answered: a server stopped under it would have failed the call.
    let answer = call.await.unwrap().unwrap();
    let ended = Instant::now();
    assert_eq!(answer["args"]["sleep_ms"], 3000);

    // Idle from the call's end, not its start: stopped about an idle stop later, not at
    // once. Idle time is on the coarse clock, which reads a tick behind (more while a loaded
    // machine delays its tick), so the stop may come that much early: half an idle stop
    // tells "later" from "at once" whatever the clock's lag.
    within_bound("the idle stop", || host.pid("slow").is_none()).await;
    assert!(
        ended.elapsed() >= IDLE / 2,
        "stopped {:?} after the call ended",
        ended.elapsed()
    );
    // The one server, which ran the call, stopped once.
    within_bound("the process to be reaped", || gone(pid)).await;
    let events = drain(&mut health);
    let stops = events
        .iter()
        .filter(|e| matches!(e, HealthEvent::Idle { extension, .. } if extension == "slow"));
    assert_eq!(stops.count(), 1, "{events:?}");
    assert_eq!(troubled(&events, "slow"), []);
    host.shutdown().await;
}

#[tokio::test]
async fn without_an_idle_stop_a_server_runs_on() {
    let w = World::new();
    w.fixture("awake", &["work"]);
    let opts = HostOptions {
        supervisor: quick_opts(),
        ..HostOptions::default()
    };
    let session = Session {
        id: "s1".into(),
        workspace_root: w.dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(w.home.clone(), session, opts)
        .await
        .unwrap();
    host.call_tool("work", json!({}), None, None).await.unwrap();
    let pid = host.pid("awake").unwrap();
    // Twice the idle stop the other tests use (eight of their sweeps).
    tokio::time::sleep(IDLE * 2).await;
    assert_eq!(host.pid("awake"), Some(pid));
    let info = server(&host, "awake");
    assert_eq!(info.state, ServerState::Running);
    assert_eq!(info.stops_in, None, "no idle stop, so none is due");
    // Idle time is read from the coarse clock: a tick behind (a few ms), more while a loaded
    // machine delays its tick, so it may read under the sleep it followed. Idle for more than
    // an idle stop, and never stopped, is what this test is for.
    assert!(info.idle.is_some_and(|d| d >= IDLE), "{info:?}");
    host.shutdown().await;
}

#[cfg(feature = "mcp")]
mod mcp {
    use super::*;
    use yep_host::runtime::mcp::{approve, sources};
    use yep_host::store::manifest::McpServer;

    fn server_py() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/server.py").to_string()
    }

    /// Add and approve stdio server `name` running `server.py`, as `yep mcp add` does.
    async fn add(w: &World, name: &str) {
        let server = McpServer {
            transport: "stdio".into(),
            command: Some("python3".into()),
            args: vec![server_py()],
            env: Default::default(),
            url: None,
            headers: Default::default(),
        };
        yep_host::store::mcp::add(&w.home, name, &server).unwrap();
        let granted = yep_host::store::grants::SandboxGrants {
            read: vec![concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp").to_string()],
            ..Default::default()
        };
        w.home.set_granted(name, None, granted).unwrap();
        let source = sources(&w.home, &[], w.dir.path(), &mut |_| {})
            .into_iter()
            .find(|s| s.name == name)
            .unwrap();
        approve(&w.home, &source, w.dir.path(), &quick_opts())
            .await
            .unwrap();
    }

    fn mcp_state(host: &ExtensionHost, name: &str) -> Value {
        let all = serde_json::to_value(host.mcp_status()).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    }

    fn mcp_tools(host: &ExtensionHost) -> Vec<String> {
        let mut names: Vec<String> = host
            .tools()
            .into_iter()
            .filter(|t| t.mcp)
            .map(|t| t.name)
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn an_idle_mcp_server_is_stopped_and_its_tools_stay_listed() {
        let w = World::new();
        add(&w, "py").await;
        // The tool list its approval cached is lost: the session learns it from the running
        // server only, so it has nothing else to list once the server stops.
        std::fs::remove_dir_all(w.home.root.join("cache/mcp")).unwrap();
        // Another server, whose start rebuilds the table while `py` is stopped.
        add(&w, "two").await;
        let host = w.host().await;
        let mut health = host.health();
        // Its list is learned from its first run.
        within_bound("the listed tools", || {
            mcp_tools(&host).contains(&"mcp__py__echo".to_string())
        })
        .await;
        let listed = mcp_tools(&host);
        let said = host
            .call_tool("mcp__py__echo", json!({"text": "hi"}), None, None)
            .await
            .unwrap();
        assert_eq!(said["content"][0]["text"], "hi");
        let first = server(&host, "py");
        assert!(
            first.mcp && first.state == ServerState::Running,
            "{first:?}"
        );
        let first = first.pid.unwrap();

        within_bound("the idle stop", || {
            server(&host, "py").state == ServerState::Idle
        })
        .await;
        within_bound("the process to be reaped", || gone(first)).await;
        assert_eq!(mcp_state(&host, "py")["state"], "idle");
        assert_eq!(
            yep_host::store::state::run_state(&w.home, "mcp.py"),
            ("idle", None)
        );
        // Another server's start rebuilds the table: `py`'s tools are still listed. (The
        // rebuild is queued before the call returns; the refresh after it waits for it.)
        host.call_tool("mcp__two__echo", json!({"text": "2"}), None, None)
            .await
            .unwrap();
        host.refresh().await.unwrap();
        assert_eq!(mcp_tools(&host), listed);
        let py_tools = mcp_state(&host, "py")["tools"].as_array().unwrap().len();
        assert_eq!(py_tools * 2, listed.len(), "{listed:?}");
        let events = drain(&mut health);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, HealthEvent::Idle { extension, .. } if extension == "mcp.py")),
            "{events:?}"
        );
        assert_eq!(troubled(&events, "mcp.py"), []);
        assert_eq!(warnings_about(&host, "py"), Vec::<String>::new());

        // The next call starts it again.
        let said = host
            .call_tool("mcp__py__echo", json!({"text": "back"}), None, None)
            .await
            .unwrap();
        assert_eq!(said["content"][0]["text"], "back");
        let second = server(&host, "py");
        assert_eq!(second.state, ServerState::Running);
        assert_ne!(second.pid, Some(first));
        assert_eq!(mcp_tools(&host), listed);
        host.shutdown().await;
    }
}
