//! The bridge (`yep mcp serve`) driven by rmcp's client, in process: the host's MCP dialect
//! (rmcp's client) on one end of a pipe, the bridge (rmcp's server) over a real host on the
//! other. Tools listed, a call with progress, a cancel, a hook that blocks and one that
//! rewrites.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

// The host's own test helpers (its fixtures, the binaries cargo built).
#[path = "../../yep-host/tests/all/common/mod.rs"]
mod common;

use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use yep_host::capability::{NoEvents, ToolCall};
use yep_host::dialect::mcp::Mcp;
use yep_host::dialect::{Dialect, Peer, Streams};
use yep_host::rpc::ConnectionOptions;
use yep_host::store::Home;
use yep_host::{ExtensionHost, HostOptions, Session};
use yep_serve::bridge::{Bridge, Clients};

async fn bridged(home: &Home, dir: &std::path::Path) -> (ExtensionHost, Arc<dyn Peer>) {
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.to_path_buf(),
    };
    let opts = HostOptions {
        supervisor: quick_opts(),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home.clone(), session, opts)
        .await
        .unwrap();
    let peer = connect(&host, dir, false).await;
    (host, peer)
}

/// rmcp's client (the host's MCP dialect) connected to a new bridge over `host`.
async fn connect(host: &ExtensionHost, dir: &std::path::Path, deferred: bool) -> Arc<dyn Peer> {
    connect_with(host, dir, deferred, Clients::default(), Arc::new(NoEvents)).await
}

/// [`connect`], the bridge sharing `clients`, the client answering questions through `user`.
/// The two speak 2026-07-28, as yep's client and server do by default.
async fn connect_with(
    host: &ExtensionHost,
    dir: &std::path::Path,
    deferred: bool,
    clients: Clients,
    user: Arc<dyn yep_host::capability::Events>,
) -> Arc<dyn Peer> {
    connect_at(host, dir, deferred, clients, user, Mcp::default()).await
}

/// [`connect_with`], the client being `client`.
async fn connect_at(
    host: &ExtensionHost,
    dir: &std::path::Path,
    deferred: bool,
    clients: Clients,
    user: Arc<dyn yep_host::capability::Events>,
    client: Mcp,
) -> Arc<dyn Peer> {
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let bridge = Bridge::new(host.clone(), clients, deferred).await;
    tokio::spawn(async move {
        use rmcp::ServiceExt;
        if let Ok(running) = bridge.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    let (reader, writer) = tokio::io::split(client_end);
    let streams = Streams::Other {
        reader: Box::new(reader),
        writer: Box::new(writer),
    };
    let hello = hello("yep", dir);
    client
        .open(streams, hello, user, ConnectionOptions::default())
        .await
        .unwrap()
}

/// A long `count` call whose caller cancels it `after` this long.
fn cancelled_after(after: Duration) -> ToolCall {
    let cancel = CancellationToken::new();
    let mut long = call("count", json!({"n": 100_000, "interval_ms": 20}));
    long.cancel = Some(cancel.clone());
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        cancel.cancel();
    });
    long
}

fn call(tool: &str, args: Value) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        args,
        updates: None,
        cancel: None,
        chain: Vec::new(),
    }
}

#[tokio::test]
async fn rmcps_client_lists_calls_cancels_and_meets_the_hooks_through_the_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let src = dir.path().join("src");
    install_fixture(
        &home,
        &src,
        "lazy",
        json!({"tools": [{"name": "t1", "description": "echoes"}, {"name": "slow", "description": "sleeps"}]}),
        json!({"tools": ["t1", "slow"]}),
    );
    install_fixture(
        &home,
        &src,
        "guard",
        json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "t1"}]}),
        json!({"block_on": "forbidden", "rewrite": "-ok"}),
    );
    install_manifest(&home, &src, echo_manifest());
    // An exporter: it counts the trace events it gets.
    install_fixture(
        &home,
        &src,
        "exporter",
        json!({"trace": true, "tools": [{"name": "traces", "description": "counts"}]}),
        json!({"tools": ["traces"]}),
    );
    let (host, peer) = bridged(&home, dir.path()).await;

    let mut names: Vec<String> = peer.listed().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["ask", "count", "echo", "slow", "t1", "traces"]);

    // Progress, as `notifications/progress`.
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&steps);
    let mut counted = call("count", json!({"n": 3, "interval_ms": 5}));
    counted.updates = Some(Arc::new(move |p| seen.lock().unwrap().push(p.progress)));
    let result = peer
        .call_tool(counted, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(result["structuredContent"], json!({"counted": 3}));
    assert_eq!(steps.lock().unwrap().len(), 3);

    // A cancel reaches the extension's call, and the bridge goes on.
    let cancel = CancellationToken::new();
    let mut slow = call("slow", json!({"sleep_ms": 60_000}));
    slow.cancel = Some(cancel.clone());
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        later.cancel();
    });
    let started = std::time::Instant::now();
    let cancelled = peer.call_tool(slow, Duration::from_secs(60)).await;
    assert!(cancelled.is_err());
    assert!(started.elapsed() < Duration::from_secs(30));

    // The hooks: a block is a tool error with the reason, a rewrite is what runs.
    let blocked = peer
        .call_tool(
            call("t1", json!({"path": "/forbidden"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        blocked.contains("blocked by extension `guard`") && blocked.contains("guard refuses"),
        "{blocked}"
    );
    let rewritten = peer
        .call_tool(
            call("t1", json!({"path": "notes"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(
        rewritten["structuredContent"],
        json!({"tool": "t1", "args": {"path": "notes-ok"}})
    );
    // Every call through the bridge reached the exporter: started and completed.
    host.flush(Duration::from_secs(5)).await;
    let traced = peer
        .call_tool(call("traces", json!({})), Duration::from_secs(20))
        .await
        .unwrap();
    let seen = &traced["structuredContent"];
    assert!(seen["count"].as_u64().unwrap() >= 8, "{seen}");
    assert!(
        seen["first"]
            .as_str()
            .unwrap()
            .starts_with("yep-mcp-serve-"),
        "{seen}"
    );

    // `--deferred`: the always-loaded tools and `search_tools`.
    let deferred = connect(&host, dir.path(), true).await;
    let mut names: Vec<String> = deferred.listed().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["echo", "search_tools"]);
    let found = deferred
        .call_tool(
            call("search_tools", json!({"query": "count"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(found["structuredContent"]["tools"][0]["name"], "count");
    host.shutdown().await;
}

/// A client's user: answers every question `eu`, and keeps them.
#[derive(Default)]
struct User(Mutex<Vec<String>>);
impl yep_host::capability::Events for User {
    fn ask(
        &self,
        _: &str,
        question: yep_host::capability::Question,
    ) -> yep_host::rpc::BoxFuture<yep_host::capability::Answer> {
        self.0.lock().unwrap().push(question.prompt);
        Box::pin(async { yep_host::capability::Answer::answered("eu") })
    }
}

#[tokio::test]
async fn a_secret_is_never_asked_through_the_client_and_a_plain_question_is() {
    use yep_serve::bridge::AskClients;
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let facet = json!({
        "tools": [{"name": "config", "description": "its config"}],
        "config_schema": {
            "type": "object",
            "properties": {
                "token": {"type": "string", "secret": true},
                "region": {"type": "string", "enum": ["eu", "us"]}
            },
            "required": ["token", "region"]
        }
    });
    install_fixture(
        &home,
        &dir.path().join("src"),
        "conf",
        facet,
        json!({"tools": ["config"]}),
    );
    home.set_enabled("conf", false).unwrap();
    let clients = Clients::default();
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let opts = HostOptions {
        supervisor: quick_opts(),
        ask_sink: Some(Arc::new(AskClients(clients.clone()))),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home.clone(), session, opts)
        .await
        .unwrap();
    let user = Arc::new(User::default());
    // A question outside any call goes out only to a client with a session: one that shook
    // hands (2025-11-25). A 2026-07-28 client can be asked only in a call's answer.
    let handshake_only = Mcp {
        handshake_only: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        ..Mcp::default()
    };
    let client = connect_at(
        &host,
        dir.path(),
        false,
        clients,
        user.clone(),
        handshake_only,
    )
    .await;
    assert_eq!(client.offer().wire, "MCP 2025-11-25");
    // Setup asks for both required fields: the plain one through the client, the secret
    // one never (it is left unset, to `yep secret set`).
    let missing = host.activate("conf").await.unwrap();
    assert_eq!(missing, ["token"]);
    let asked = user.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("conf.region"), "{asked:?}");
    host.shutdown().await;
}

/// rmcp's client that notes `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Watching(Arc<tokio::sync::Notify>);
impl rmcp::ClientHandler for Watching {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.notify_one();
    }
}

#[tokio::test]
async fn rmcps_client_gets_prompts_resources_and_list_changed_through_the_bridge() {
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let src = dir.path().join("src");
    install_manifest(&home, &src, echo_manifest());
    // A package with a skill, installed but enabled only later.
    let skilled = src.join("skilled");
    std::fs::create_dir_all(skilled.join("skills/notes")).unwrap();
    std::fs::write(
        skilled.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: notes\n---\nWrite them down.\n",
    )
    .unwrap();
    install_fixture(
        &home,
        &src,
        "skilled",
        json!({"skills": true, "tools": [{"name": "t9", "description": "t9"}]}),
        json!({"tools": ["t9"]}),
    );
    home.set_enabled("skilled", false).unwrap();
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(home.clone(), session, HostOptions::default())
        .await
        .unwrap();
    let bridge = Bridge::new(host.clone(), Clients::default(), false).await;
    let forward = yep_serve::bridge::forward_changes(&bridge);
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = bridge.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    let watching = Watching::default();
    let client = watching.clone().serve(client_end).await.unwrap();
    let peer = client.peer().clone();

    let prompts = peer.list_all_prompts().await.unwrap();
    let names: Vec<String> = prompts.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["echo:ping"]);
    let mut args = serde_json::Map::new();
    args.insert("arguments".into(), json!("x"));
    let got = peer
        .get_prompt(
            serde_json::from_value(json!({"name": "echo:ping", "arguments": args})).unwrap(),
        )
        .await
        .unwrap();
    assert!(serde_json::to_string(&got).unwrap().contains("pong"));

    // Enabled elsewhere: the client hears of it, and the skill is a resource.
    host.activate("skilled").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), watching.0.notified())
        .await
        .expect("tools/list_changed");
    let resources = peer.list_all_resources().await.unwrap();
    let uris: Vec<String> = resources.iter().map(|r| r.uri.to_string()).collect();
    assert_eq!(
        uris,
        ["skill://skilled/notes/SKILL.md", "skill://index.json"]
    );
    // Read at its SEP-2640 URI, and at the one before it (kept for one release).
    for uri in ["skill://skilled/notes/SKILL.md", "skill://skilled/notes"] {
        let read = peer
            .read_resource(serde_json::from_value(json!({ "uri": uri })).unwrap())
            .await
            .unwrap();
        assert!(
            serde_json::to_string(&read)
                .unwrap()
                .contains("Write them down."),
            "{uri}"
        );
    }
    let tools = peer.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "t9"));
    forward.abort();
    host.shutdown().await;
}

/// The echo example's host in `dir`, its questions going to the bridge's clients.
async fn asking_echo_host(dir: &std::path::Path) -> (Home, ExtensionHost, Clients) {
    let clients = Clients::default();
    let opts = HostOptions {
        supervisor: quick_opts(),
        ask_sink: Some(Arc::new(yep_serve::bridge::AskClients(clients.clone()))),
        ..HostOptions::default()
    };
    let (home, host) = echo_host(dir, opts).await;
    (home, host, clients)
}

#[tokio::test]
async fn each_clients_questions_and_cancels_stay_its_own() {
    use rmcp::ServiceExt;
    use yep_serve::bridge::NO_ELICITATION_CALLER;
    let dir = tempfile::tempdir().unwrap();
    let (_home, host, clients) = asking_echo_host(dir.path()).await;
    // `a` takes questions; `b`, rmcp's bare client, declares no elicitation and connects last.
    let user = Arc::new(User::default());
    let a = connect_with(&host, dir.path(), false, clients.clone(), user.clone()).await;
    // Its questions ride its calls' answers, and it answers them in the next call.
    assert_eq!(a.offer().wire, "MCP 2026-07-28");
    let bridge = Bridge::new(host.clone(), clients, false).await;
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = bridge.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    let b = ().serve(client_end).await.unwrap();
    let b_call = |name: &str, args: Value| {
        let params = serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
        let peer = b.peer().clone();
        async move { serde_json::to_value(peer.call_tool(params).await.unwrap()).unwrap() }
    };

    // A question during `a`'s call goes to `a`'s user.
    let answered = a
        .call_tool(
            call("ask", json!({"prompt": "region?"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(answered["structuredContent"], json!({"answer": "eu"}));
    // One during `b`'s call is never put to `a`: it is cancelled and the extension told why.
    let refused = b_call("ask", json!({"prompt": "colour?"})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["content"][0]["text"], NO_ELICITATION_CALLER);
    let asked = user.0.lock().unwrap().clone();
    assert!(
        asked.len() == 1 && asked[0].starts_with("echo: region?"),
        "{asked:?}"
    );

    // `a` cancels its long call; `b`'s, running beside it, finishes.
    let long = cancelled_after(Duration::from_millis(200));
    let (cancelled, finished) = tokio::join!(
        a.call_tool(long, Duration::from_secs(60)),
        b_call("count", json!({"n": 20, "interval_ms": 25})),
    );
    assert!(cancelled.is_err());
    assert_eq!(
        finished["structuredContent"],
        json!({"counted": 20}),
        "{finished}"
    );
    host.shutdown().await;
}

/// rmcp's client (the host's MCP dialect over streamable HTTP) at `url`, sending `token`.
async fn connect_http(
    url: &str,
    token: &str,
    dir: &std::path::Path,
    user: Arc<dyn yep_host::capability::Events>,
) -> Result<Arc<dyn Peer>, yep_host::dialect::HandshakeError> {
    use yep_host::dialect::mcp::McpHttp;
    let dialect = McpHttp {
        url: url.into(),
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        shown: url.into(),
        host_home: None,
        login: None,
        handshake_only: Default::default(),
        list_deadline: None,
    };
    let streams = Streams::Other {
        reader: Box::new(tokio::io::empty()),
        writer: Box::new(tokio::io::sink()),
    };
    let mut hello = hello("yep", dir);
    hello.timeout = Duration::from_secs(10);
    dialect
        .open(streams, hello, user, ConnectionOptions::default())
        .await
}

#[tokio::test]
async fn rmcps_http_client_shares_one_host_with_another_and_a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (home, host, clients) = asking_echo_host(dir.path()).await;
    let bridge = Bridge::new(host.clone(), clients, false).await;
    let (token, made) = yep_serve::bridge::bearer_token(&home).unwrap();
    assert!(made && token.len() >= 32);
    assert_eq!(
        yep_serve::bridge::bearer_token(&home).unwrap(),
        (token.clone(), false)
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let serving = tokio::spawn(yep_serve::bridge::serve_http(
        bridge,
        listener,
        token.clone(),
        false,
        stop.clone(),
    ));

    let wrong = connect_http(&url, "not-the-token", dir.path(), Arc::new(NoEvents)).await;
    assert!(wrong.is_err(), "a wrong token is refused");
    let first_user = Arc::new(User::default());
    let first = connect_http(&url, &token, dir.path(), first_user.clone())
        .await
        .unwrap();
    let second_user = Arc::new(User::default());
    let second = connect_http(&url, &token, dir.path(), second_user.clone())
        .await
        .unwrap();
    let mut names: Vec<String> = first.listed().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["ask", "count", "echo"]);

    // Progress over HTTP, on the second client, while the first's long call is cancelled.
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&steps);
    let mut counted = call("count", json!({"n": 3, "interval_ms": 100}));
    counted.updates = Some(Arc::new(move |p| seen.lock().unwrap().push(p.progress)));
    let long = cancelled_after(Duration::from_millis(150));
    let (cancelled, finished) = tokio::join!(
        first.call_tool(long, Duration::from_secs(60)),
        second.call_tool(counted, Duration::from_secs(20)),
    );
    assert!(cancelled.is_err());
    assert_eq!(
        finished.unwrap()["structuredContent"],
        json!({"counted": 3})
    );
    assert_eq!(steps.lock().unwrap().len(), 3);
    // The first still answers, and its question goes to its own user (the second connected
    // later and takes questions too).
    let answered = first
        .call_tool(
            call("ask", json!({"prompt": "region?"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(answered["structuredContent"], json!({"answer": "eu"}));
    assert_eq!(first_user.0.lock().unwrap().len(), 1);
    assert!(second_user.0.lock().unwrap().is_empty());

    stop.cancel();
    serving.await.unwrap();
    host.shutdown().await;
}

/// A host in `dir` with the fixture `asker` installed, its questions going to `clients`.
async fn asker_host(dir: &std::path::Path, clients: &Clients) -> ExtensionHost {
    let home = Home {
        root: dir.join("home"),
    };
    let facet = json!({
        "tools": [{"name": "slow", "description": "sleeps, then may ask"}],
        "ui_ask": true,
    });
    install_fixture(
        &home,
        &dir.join("src"),
        "asker",
        facet,
        json!({"tools": ["slow"]}),
    );
    let opts = HostOptions {
        supervisor: quick_opts(),
        ask_sink: Some(Arc::new(yep_serve::bridge::AskClients(clients.clone()))),
        ..HostOptions::default()
    };
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.to_path_buf(),
    };
    ExtensionHost::start(home, session, opts).await.unwrap()
}

/// Client B's answer never decides client A's call: a YEP `ui/ask` names no call, so while
/// two clients call the extension that asks, the question goes to neither (it was put to
/// B, the latest caller).
#[tokio::test]
async fn a_question_while_two_clients_call_its_extension_is_put_to_neither() {
    let dir = tempfile::tempdir().unwrap();
    let clients = Clients::default();
    let host = asker_host(dir.path(), &clients).await;
    let (a_user, b_user) = (Arc::new(User::default()), Arc::new(User::default()));
    let a = connect_with(&host, dir.path(), false, clients.clone(), a_user.clone()).await;
    let b = connect_with(&host, dir.path(), false, clients.clone(), b_user.clone()).await;

    // A's call sleeps, then asks; B calls the same extension meanwhile, and is still in it.
    let asking = call(
        "slow",
        json!({"sleep_ms": 500, "ask": "delete the branch?"}),
    );
    let b_call = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        b.call_tool(
            call("slow", json!({"sleep_ms": 1500})),
            Duration::from_secs(20),
        )
        .await
    };
    let (a_result, b_result) = tokio::join!(a.call_tool(asking, Duration::from_secs(20)), b_call);
    let a_result = a_result.unwrap();
    b_result.unwrap();
    assert!(
        b_user.0.lock().unwrap().is_empty(),
        "B was asked A's question"
    );
    assert!(a_user.0.lock().unwrap().is_empty(), "a guess was made");
    assert_ne!(a_result["structuredContent"]["answer"], "eu", "{a_result}");

    // With A the only caller, the same question is A's.
    let alone = a
        .call_tool(
            call("slow", json!({"ask": "region?"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(alone["structuredContent"]["answer"], "eu", "{alone}");
    assert_eq!(a_user.0.lock().unwrap().len(), 1);
    assert!(b_user.0.lock().unwrap().is_empty());
    host.shutdown().await;
}

/// 300,000 status updates of 1 KiB each, to a client that stopped reading, cost one pending
/// entry per extension and one task per client (it was a task per update, and memory
/// without bound); when it reads again, the latest status comes first thing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_flood_to_a_client_that_does_not_read_is_coalesced() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use yep_host::runtime::StatusSink;
    use yep_serve::bridge::StatusToClients;
    let dir = tempfile::tempdir().unwrap();
    let opts = HostOptions {
        supervisor: quick_opts(),
        ..HostOptions::default()
    };
    let (_home, host) = echo_host(dir.path(), opts).await;
    let clients = Clients::default();
    let bridge = Bridge::new(host.clone(), clients.clone(), false).await;
    let (server_end, client_end) = tokio::io::duplex(4096);
    tokio::spawn(async move {
        use rmcp::ServiceExt;
        if let Ok(running) = bridge.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    // The handshake by hand; then the client reads nothing.
    let (reader, mut writer) = tokio::io::split(client_end);
    let mut reader = tokio::io::BufReader::new(reader);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "sleeper", "version": "1"}}});
    writer
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    assert!(line.contains("\"result\""), "{line}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    writer
        .write_all(format!("{initialized}\n").as_bytes())
        .await
        .unwrap();
    assert!(eventually(|| clients.len() == 1).await);

    let sink = StatusToClients(clients.clone());
    let status = |text: String| yep_host::capability::Status {
        text,
        level: yep_host::capability::StatusLevel::Ok,
        detail: None,
    };
    let kib = "x".repeat(1024);
    let tasks_before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    for i in 0..300_000 {
        let extension = ["a", "b"][i % 2];
        sink.status_changed(extension, Some(&status(format!("{i} {kib}"))));
    }
    sink.status_changed("a", Some(&status("the last word".into())));
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert!(
        tasks <= tasks_before + 2,
        "{tasks} tasks alive after the flood ({tasks_before} before)"
    );

    // Reading again: the latest status arrives within a few messages, not after 300,000.
    let mut read = 0;
    loop {
        line.clear();
        let n = tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
            .await
            .expect("the latest status arrives")
            .unwrap();
        assert!(n > 0, "the connection closed");
        read += 1;
        if line.contains("the last word") {
            break;
        }
        assert!(read < 20, "{read} messages before the latest status");
    }
    host.shutdown().await;
}

/// `from` copied to `to`, files and directories.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Make a named pipe at `path`.
fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// The hostile fixture `skill-fifo`: once the session has it, its `skills/x/SKILL.md` is a
/// FIFO. Reading it on a runtime worker held that worker until a writer came (never): a few
/// `resources/list` and `resources/read` calls held both workers of a 2-CPU machine, and then
/// no client's `tools/list` was ever answered.
///
/// The bridge runs on a runtime of its own with two workers; the client and the clock that
/// decides the test are on the test's runtime, so a stalled bridge fails the test instead of
/// stopping its clock too.
#[test]
fn a_skill_turned_into_a_fifo_stalls_no_client_and_is_skipped_with_a_warning() {
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/skill-fifo");
    let src = dir.path().join("skill-fifo");
    copy_dir(&fixture, &src);
    home.install(
        src.to_str().unwrap(),
        &yep_host::store::InstallOptions::default(),
        &mut yep_host::store::AlwaysYes,
    )
    .unwrap();
    home.set_enabled("skill-fifo", true).unwrap();

    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = server.block_on(async {
        let host = ExtensionHost::start(home.clone(), session, HostOptions::default())
            .await
            .unwrap();
        let bridge = Bridge::new(host.clone(), Clients::default(), false).await;
        tokio::spawn(async move {
            if let Ok(running) = bridge.serve(server_end).await {
                let _ = running.waiting().await;
            }
        });
        host
    });
    // The session has it: now it swaps its own skill for a pipe nobody writes to.
    let skill = home.package_dir("skill-fifo").join("skills/x/SKILL.md");
    std::fs::remove_file(&skill).unwrap();
    mkfifo(&skill);

    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bound = Duration::from_secs(10);
    let (tools, listed, read) = client.block_on(async {
        // Held to the end: dropping the running client closes its transport.
        let running = ().serve(client_end).await.unwrap();
        let peer = running.peer().clone();
        let mut readers = tokio::task::JoinSet::new();
        for _ in 0..2 {
            let p = peer.clone();
            readers.spawn(async move { Ok(p.list_all_resources().await) });
            let p = peer.clone();
            readers.spawn(async move {
                let uri = json!({"uri": "skill://skill-fifo/x"});
                Err(p.read_resource(serde_json::from_value(uri).unwrap()).await)
            });
        }
        // Give the reads a head start, so that they hold the workers if they can.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let tools = tokio::time::timeout(bound, peer.list_all_tools()).await;
        let mut listed = Vec::new();
        let mut read = Vec::new();
        let all = async {
            while let Some(done) = readers.join_next().await {
                match done.unwrap() {
                    Ok(list) => listed.push(list),
                    Err(one) => read.push(one),
                }
            }
        };
        let finished = tokio::time::timeout(bound, all).await.is_ok();
        drop(running);
        (tools, finished.then_some(listed), finished.then_some(read))
    });
    let warnings = host.warnings();
    // Whatever happened, nothing here waits on the stuck threads.
    server.shutdown_background();

    let tools = tools.expect("tools/list was never answered: the bridge's workers are held");
    assert!(tools.is_ok(), "{tools:?}");
    let listed = listed.expect("resources/list was never answered");
    for list in listed {
        let uris: Vec<String> = list.unwrap().iter().map(|r| r.uri.to_string()).collect();
        assert_eq!(
            uris,
            ["skill://skill-fifo/notes/SKILL.md", "skill://index.json"],
            "the FIFO is skipped"
        );
    }
    for one in read.expect("resources/read was never answered") {
        let err = one
            .expect_err("a FIFO skill has no text to read")
            .to_string();
        assert!(
            err.contains("no skill file at skill://skill-fifo/x"),
            "{err}"
        );
    }
    assert!(
        warnings.iter().any(|w| w.contains("extension `skill-fifo`")
            && w.contains("x/SKILL.md")
            && w.contains("named pipe (FIFO)")),
        "{warnings:?}"
    );
}
