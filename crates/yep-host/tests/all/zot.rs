//! The zot dialect over a real extension process: `tests/zot/ext.py`, written here from the
//! protocol reference, in zot's old generation (registrations before `hello_ack`, no `ready`)
//! and its current one (`tool_cancel`, registrations after the ack, `ready`).

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use yep_host::capability::{Events, HookEvent, HookFiring, HookOutcome, Status, ToolCall};
use yep_host::dialect::zot::Zot;
use yep_host::dialect::{Dialect, Hello, Peer, Streams};
use yep_host::process::{SpawnSpec, spawn};
use yep_host::rpc::ConnectionOptions;

/// The statuses (zot's notes) an extension pushed.
#[derive(Default)]
struct Notes(Mutex<Vec<Option<String>>>);
impl Events for Notes {
    fn status(&self, _: &str, status: Option<Status>) {
        self.0.lock().unwrap().push(status.map(|s| s.text));
    }
}

/// The extension's peer, and its process (stopped when dropped).
type Opened = (Arc<dyn Peer>, yep_host::process::ServerProcess);

async fn open(mode: &str, dir: &std::path::Path, notes: Arc<Notes>) -> Result<Opened, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/zot/ext.py");
    let spawned = spawn(&SpawnSpec {
        program: "python3".into(),
        args: vec![script.into(), mode.into()],
        cwd: dir.to_path_buf(),
        bin_dir: None,
        env: Vec::new(),
        log_path: dir.join("pyzot.log"),
        sandbox: None,
    })
    .unwrap();
    let hello = Hello {
        extension: "pyzot".into(),
        session_id: "s1".into(),
        workspace_root: dir.display().to_string(),
        config: Value::Null,
        grants: Default::default(),
        timeout: Duration::from_secs(10),
        package_dir: "/pkg/pyzot".into(),
        data_dir: "/data/pyzot".into(),
        interactive_ui: false,
        slow_start: None,
    };
    let streams = Streams::Pipe {
        stdout: spawned.stdout,
        stdin: spawned.stdin,
    };
    let peer = Zot::default()
        .open(streams, hello, notes, ConnectionOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok((peer, spawned.process))
}

fn call(tool: &str, args: Value) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        args,
        ..ToolCall::default()
    }
}

async fn offer_tools_commands_hooks_and_notes(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Notes::default());
    let (peer, _process) = open(mode, dir.path(), Arc::clone(&notes)).await.unwrap();
    let offer = peer.offer();
    assert_eq!(offer.wire, "zot 1");
    let tools: Vec<_> = offer.tools.iter().map(|t| t.name.as_str()).collect();
    // An unknown exposure skips that tool, not the extension.
    assert_eq!(tools, ["shout", "slow", "relay"], "{mode}");
    assert_eq!(offer.tools[0].schema.as_ref().unwrap()["type"], "object");
    // A command that differs only by case conflicts; the first stays.
    let commands: Vec<_> = offer.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(commands, ["Greet"]);

    // A tool call: empty text blocks dropped, structured content kept.
    let out = peer
        .call_tool(
            call("shout", json!({"text": "hi"})),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"content": [{"type": "text", "text": "HI"}], "is_error": false,
               "structured_content": {"n": 1}})
    );
    // Its own call_tool: refused for an extension that did not opt in; for one that did,
    // this host (no runtime behind these events) has no tools to run.
    let refused = peer
        .call_tool(call("relay", json!({})), Duration::from_secs(10))
        .await
        .unwrap_err()
        .to_string();
    let why = match mode {
        "old" => "extension did not opt in to call_tool",
        _ => "host tool calls are unavailable",
    };
    assert!(refused.contains(why), "{mode}: {refused}");
    // A command asked in another case reaches the extension in its registered spelling.
    let said = peer
        .command("greet", " ada ", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(said.success);
    assert_eq!(said.message, "hi ada via Greet");
    // Its tool_call intercept is a pre hook: a block with its reason, or allow.
    let firing = |args: Value| HookFiring {
        event: HookEvent::PreToolUse,
        tool: "bash".into(),
        args,
        result: None,
    };
    let blocked = peer
        .fire_hook(&firing(json!({"cmd": "rm -rf /"})), Duration::from_secs(5))
        .await
        .unwrap()
        .outcome;
    assert_eq!(
        blocked,
        HookOutcome::Block {
            reason: "no rm -rf".into(),
            user_message: None
        }
    );
    let allowed = peer
        .fire_hook(&firing(json!({"cmd": "ls"})), Duration::from_secs(5))
        .await
        .unwrap()
        .outcome;
    assert_eq!(allowed, HookOutcome::Allow);
    // A malformed answer is an error the host reports (it then goes ahead unchanged).
    let garbled = peer
        .fire_hook(&firing(json!({"cmd": "garble"})), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(garbled.to_string().contains("malformed"), "{garbled}");
    // A tool registered long after `ready` is served.
    assert!(!peer.serves("late"));
    peer.command("Greet", "register", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(peer.serves("late"), "{mode}");
    // hello_ack carried the package dir as data_dir; notes are statuses.
    assert!(
        notes
            .0
            .lock()
            .unwrap()
            .contains(&Some("acked /data/pyzot".into()))
    );
    peer.shutdown(Duration::from_secs(2)).await;
    let closed = tokio::time::timeout(Duration::from_secs(10), peer.closed()).await;
    assert!(closed.is_ok(), "the extension did not stop after shutdown");
}

#[tokio::test]
async fn an_old_generation_extension_registers_before_the_ack_and_is_ready_without_saying_so() {
    offer_tools_commands_hooks_and_notes("old").await;
}

#[tokio::test]
async fn a_current_extension_registers_after_the_ack_and_says_ready() {
    offer_tools_commands_hooks_and_notes("new").await;
}

#[tokio::test]
async fn a_cancelled_call_sends_tool_cancel_to_an_extension_that_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Notes::default());
    let (peer, _process) = open("new", dir.path(), Arc::clone(&notes)).await.unwrap();
    let token = CancellationToken::new();
    let slow = ToolCall {
        cancel: Some(token.clone()),
        ..call("slow", json!({}))
    };
    let running = {
        let peer = Arc::clone(&peer);
        tokio::spawn(async move { peer.call_tool(slow, Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    assert!(running.await.unwrap().is_err());
    let told = || {
        notes
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|n| n.as_deref().is_some_and(|t| t.starts_with("cancelled ")))
    };
    let waited = std::time::Instant::now();
    while !told() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "no tool_cancel reached it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    peer.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_first_line_that_is_not_hello_fails_the_handshake_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let Err(err) = open("rude", dir.path(), Arc::default()).await else {
        panic!("a rude extension shook hands");
    };
    assert!(err.contains("first frame must be hello"), "{err}");
    assert!(err.contains("register_tool"), "{err}");
    // A first line that is not JSON at all: the same, saying why.
    let Err(err) = open("garbage", dir.path(), Arc::default()).await else {
        panic!("an extension that printed text shook hands");
    };
    assert!(
        err.contains("first frame must be hello") && err.contains("malformed json frame"),
        "{err}"
    );
}

#[tokio::test]
async fn registrations_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open("flood", dir.path(), Arc::default()).await.unwrap();
    // The cap: 256 tools and 256 commands per extension.
    let max = 256;
    assert_eq!(peer.offer().tools.len(), max);
    assert_eq!(peer.offer().commands.len(), max);
    assert_eq!(
        peer.offer().tools.last().unwrap().name,
        format!("t{}", max - 1)
    );
    peer.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn an_extension_that_exits_before_its_hello_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Far below the 60 s a hello may take: the exit ends the wait.
    let opened = tokio::time::timeout(
        Duration::from_secs(20),
        open("mute", dir.path(), Arc::default()),
    )
    .await
    .expect("the host waited out the hello deadline for an extension that had exited");
    let Err(err) = opened else {
        panic!("a mute extension shook hands");
    };
    assert!(err.contains("closed"), "{err}");
}

fn trace(event_type: &str, data: Value) -> yep_host::capability::TraceEvent {
    yep_host::capability::TraceEvent {
        event_type: event_type.into(),
        id: "e".into(),
        ts: String::new(),
        context: Value::Null,
        data,
        metadata: Value::Null,
    }
}

#[tokio::test]
async fn events_reach_the_extensions_that_observe_them_in_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Notes::default());
    let (peer, _process) = open("new", dir.path(), Arc::clone(&notes)).await.unwrap();
    // Observed: session_start (zot's name) and turn_end (YEP's `turn.completed`); turn_start
    // is not observed, and an unknown name goes nowhere.
    for (kind, data) in [
        ("session_start", json!({})),
        ("turn_start", json!({"step": 1})),
        ("turn.completed", json!({"stop": "end", "sequence": 99})),
        ("no.such", json!({})),
    ] {
        peer.trace(&trace(kind, data)).await.unwrap();
    }
    peer.barrier(Duration::from_secs(5)).await.unwrap();
    let wanted = ["event session_start 1 s1", "event turn_end 2 s1"];
    let waited = std::time::Instant::now();
    loop {
        let seen: Vec<String> = notes.0.lock().unwrap().iter().flatten().cloned().collect();
        let events: Vec<_> = seen.iter().filter(|n| n.starts_with("event ")).collect();
        if events.len() >= 2 {
            assert_eq!(events, wanted);
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(10), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    peer.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn the_turn_intercepts_block_rewrite_and_replace_the_prompt() {
    use yep_host::capability::{Intercept, InterceptOutcome};
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open("old", dir.path(), Arc::default()).await.unwrap();
    let ask = |point: Intercept| {
        let peer = Arc::clone(&peer);
        async move {
            peer.intercept(&point, Duration::from_secs(5))
                .await
                .unwrap()
        }
    };
    assert_eq!(
        ask(Intercept::TurnStart { step: 1 }).await,
        InterceptOutcome::Continue
    );
    assert_eq!(
        ask(Intercept::TurnStart { step: 3 }).await,
        InterceptOutcome::Block {
            reason: "too many steps".into()
        }
    );
    assert_eq!(
        ask(Intercept::AssistantMessage {
            text: "the secret is 42".into()
        })
        .await,
        InterceptOutcome::ReplaceText("the [redacted] is 42".into())
    );
    assert_eq!(
        ask(Intercept::AssistantMessage {
            text: "forbidden words".into()
        })
        .await,
        InterceptOutcome::Block {
            reason: "hidden".into()
        }
    );
    assert_eq!(
        ask(Intercept::SystemPrompt {
            prompt: "You are helpful.".into(),
            provider: "p".into(),
            model: "m1".into(),
        })
        .await,
        InterceptOutcome::SystemPrompt("You are helpful. (m1)".into())
    );
    peer.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn an_extension_that_stops_reading_is_disconnected_when_its_queue_overflows() {
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open("deaf", dir.path(), Arc::default()).await.unwrap();
    // 4 KiB events: a pipe buffer holds a few, the queue 256 more; then it is disconnected.
    let big = json!({"text": "x".repeat(4096)});
    let mut failed = None;
    for i in 0..400 {
        if let Err(e) = peer.trace(&trace("session_start", big.clone())).await {
            failed = Some((i, e.to_string()));
            break;
        }
    }
    let (at, why) = failed.expect("the queue never overflowed");
    assert!(at >= 256, "disconnected after only {at} events");
    assert!(why.contains("over 256 frames"), "{why}");
    let reason = tokio::time::timeout(Duration::from_secs(5), peer.closed())
        .await
        .unwrap();
    assert!(reason.to_string().contains("did not read"), "{reason}");
    // Nothing waits on the dead queue: a call fails at once, not after its 60 s.
    let late = tokio::time::timeout(
        Duration::from_secs(10),
        peer.call_tool(call("shout", json!({})), Duration::from_secs(60)),
    )
    .await
    .expect("a call on a disconnected extension waited on its queue");
    assert!(late.is_err());
}

#[tokio::test]
async fn a_first_line_over_the_frame_cap_fails_the_handshake_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let Err(err) = open("huge", dir.path(), Arc::default()).await else {
        panic!("a 5 MiB hello was taken");
    };
    assert!(err.contains("over the 4194304-byte frame cap"), "{err}");
    // A first line that reads as an answer is not skipped for a later hello.
    let Err(err) = open("answer", dir.path(), Arc::default()).await else {
        panic!("a first line that is a tool_result was skipped");
    };
    assert!(
        err.contains("first frame must be hello") && err.contains("tool_result"),
        "{err}"
    );
}

#[tokio::test]
async fn every_command_action_maps_to_a_command_result_and_an_error_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open("new", dir.path(), Arc::default()).await.unwrap();
    let run = |args: &'static str| {
        let peer = Arc::clone(&peer);
        async move {
            let r = peer
                .command("Greet", args, Duration::from_secs(10))
                .await
                .unwrap();
            (r.success, r.message)
        }
    };
    assert_eq!(run("action prompt").await, (true, "a prompt".into()));
    assert_eq!(run("action tool_prompt").await, (true, "a prompt".into()));
    assert_eq!(run("action insert").await, (true, "an insert".into()));
    assert_eq!(run("action display").await, (true, "a display".into()));
    assert_eq!(run("action open_panel").await, (true, "T\nl1\nl2".into()));
    assert_eq!(run("action noop").await, (true, String::new()));
    assert_eq!(run("action display err").await, (false, "it failed".into()));
    assert_eq!(run("action noop err").await, (false, "it failed".into()));
    assert_eq!(
        run("action dance").await,
        (false, "unknown action dance".into())
    );
    peer.shutdown(Duration::from_secs(2)).await;
}

/// The agent's say over a server's own tool calls: refuses `d`, runs its built-in `read_file`.
struct Policy;
impl yep_host::runtime::ServerTools for Policy {
    fn permit(
        &self,
        _extension: &str,
        tool: &str,
        _args: &Value,
    ) -> yep_host::capability::BoxFuture<Result<(), yep_host::runtime::Denied>> {
        let refused = (tool == "d").then(|| yep_host::runtime::Denied::new("d is off limits"));
        Box::pin(async move { refused.map_or(Ok(()), Err) })
    }

    fn run_builtin(
        &self,
        tool: &str,
        _args: Value,
    ) -> yep_host::capability::BoxFuture<Result<Value, yep_host::runtime::BuiltinError>> {
        let said = format!("{tool}: the file's text");
        Box::pin(async move { Ok(json!({"content": [{"type": "text", "text": said}]})) })
    }
}

#[tokio::test]
async fn call_tool_runs_the_agents_built_in_tools_and_asks_its_permission_first() {
    use yep_host::store::{AlwaysYes, Home, InstallOptions};
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    // The `hops` fixture of the CLI's tests: its tools call whatever their path names.
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../yep-cli/tests/zot/hops");
    let pkg = dir.path().join("hops");
    std::fs::create_dir_all(&pkg).unwrap();
    for file in ["extension.json", "hops.py"] {
        std::fs::copy(fixture.join(file), pkg.join(file)).unwrap();
    }
    let opts = InstallOptions {
        zot: Some(yep_host::probe::runner(&home, dir.path().to_path_buf())),
        ..InstallOptions::default()
    };
    home.install(pkg.to_str().unwrap(), &opts, &mut AlwaysYes)
        .unwrap();
    home.set_enabled("hops", true).unwrap();
    let session = yep_host::Session {
        id: "s".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = yep_host::ExtensionHost::start(
        home,
        session,
        yep_host::HostOptions {
            builtins: vec!["read_file".into()],
            server_tools: Some(Arc::new(Policy)),
            ..yep_host::HostOptions::default()
        },
    )
    .await
    .unwrap();
    let text = |v: yep_host::capability::ToolResult| {
        v["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let builtin = host
        .call_tool(
            "a",
            json!({"path": [{"tool": "read_file", "args": {}}]}),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(text(builtin), "a>read_file: the file's text");
    let refused = host
        .call_tool("a", json!({"path": [{"tool": "d"}]}), None, None)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("a>not permitted: d is off limits"),
        "{refused}"
    );
    host.shutdown().await;
}
