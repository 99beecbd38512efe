//! The MCP dialect over a real server process: `tests/mcp/server.py`, an MCP server written
//! here from the specification (protocol 2025-06-18, stdio), driven through rmcp's client.

#![cfg(feature = "mcp")]

use crate::common;

use common::hello;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use yep_host::capability::{Answer, BoxFuture, Events, Progress, Question, ToolCall};
use yep_host::dialect::mcp::Mcp;
use yep_host::dialect::{Dialect, Peer, Streams};
use yep_host::process::{SpawnSpec, spawn};
use yep_host::rpc::ConnectionOptions;

/// Answers every question `blue`, and keeps the prompts.
#[derive(Default)]
struct User(Mutex<Vec<String>>);
impl Events for User {
    fn ask(&self, _: &str, question: Question) -> BoxFuture<Answer> {
        self.0.lock().unwrap().push(question.prompt);
        Box::pin(async { Answer::answered("blue") })
    }
}

type Opened = (Arc<dyn Peer>, yep_host::process::ServerProcess);

async fn open(dir: &std::path::Path, events: Arc<dyn Events>) -> Opened {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/server.py");
    let spawned = spawn(&SpawnSpec {
        program: "python3".into(),
        args: vec![script.into()],
        cwd: dir.to_path_buf(),
        bin_dir: None,
        env: Vec::new(),
        log_path: dir.join("pymcp.log"),
        sandbox: None,
    })
    .unwrap();
    let hello = hello("pymcp", dir);
    let streams = Streams::Pipe {
        stdout: spawned.stdout,
        stdin: spawned.stdin,
    };
    let peer = Mcp::default()
        .open(streams, hello, events, ConnectionOptions::default())
        .await
        .unwrap();
    (peer, spawned.process)
}

fn call(tool: &str, args: Value) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        args,
        ..ToolCall::default()
    }
}

#[tokio::test]
async fn tools_are_listed_and_called_with_errors_structured_content_and_questions() {
    let dir = tempfile::tempdir().unwrap();
    let user = Arc::new(User::default());
    let (peer, _process) = open(dir.path(), Arc::clone(&user) as Arc<dyn Events>).await;
    let offer = peer.offer();
    // It knows no `server/discover`: spoken to with `initialize`, in its revision.
    assert_eq!(offer.wire, "MCP 2025-06-18");
    assert_eq!(offer.name, "pymcp");
    let names: Vec<&str> = offer.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "fail",
            "structured",
            "slow",
            "ask",
            "huge",
            "args",
            "crash",
            "flood",
            "lists",
            "rug"
        ]
    );
    let structured = &offer.tools[2];
    assert_eq!(
        structured.output_schema.as_ref().unwrap()["properties"]["n"]["type"],
        "integer"
    );
    let t = Duration::from_secs(10);
    let echoed = peer
        .call_tool(call("echo", json!({"text": "hi"})), t)
        .await
        .unwrap();
    assert_eq!(echoed["content"][0]["text"], "hi");
    let failed = peer
        .call_tool(call("fail", json!({})), t)
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("it failed"), "{failed}");
    let out = peer
        .call_tool(call("structured", json!({})), t)
        .await
        .unwrap();
    assert_eq!(out["structuredContent"], json!({"n": 1}));
    // The server's question reaches the host's questions; the answer goes back.
    let asked = peer.call_tool(call("ask", json!({})), t).await.unwrap();
    assert_eq!(asked["content"][0]["text"], "accept: blue");
    assert_eq!(
        user.0.lock().unwrap().as_slice(),
        ["favourite colour? (colour)"]
    );
    peer.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn progress_becomes_updates_and_a_cancel_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open(dir.path(), Arc::new(User::default())).await;
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink_seen = Arc::clone(&seen);
    let cancel = CancellationToken::new();
    let slow = ToolCall {
        updates: Some(Arc::new(move |p: &Progress| {
            sink_seen.lock().unwrap().push(p.clone())
        })),
        cancel: Some(cancel.clone()),
        ..call("slow", json!({}))
    };
    let running = {
        let peer = Arc::clone(&peer);
        tokio::spawn(async move { peer.call_tool(slow, Duration::from_secs(30)).await })
    };
    let waited = std::time::Instant::now();
    while seen.lock().unwrap().len() < 3 {
        assert!(waited.elapsed() < Duration::from_secs(10), "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last = seen.lock().unwrap()[2].clone();
    assert_eq!(
        (last.message.as_str(), last.progress, last.total),
        ("step 3", Some(3.0), Some(3.0))
    );
    cancel.cancel();
    let err = running.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("cancelled"), "{err}");
    // The server heard the cancel.
    let t = Duration::from_secs(10);
    let waited = std::time::Instant::now();
    loop {
        let status = peer
            .call_tool(call("echo", json!({"text": "status"})), t)
            .await
            .unwrap();
        if !status["content"][0]["text"].as_str().unwrap().is_empty() {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "no cancel reached it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    peer.shutdown(Duration::from_secs(2)).await;
    let closed = tokio::time::timeout(Duration::from_secs(10), peer.closed()).await;
    assert!(closed.is_ok(), "the client did not end after shutdown");
}

#[tokio::test]
async fn a_line_over_the_frame_cap_ends_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (peer, _process) = open(dir.path(), Arc::new(User::default())).await;
    let err = peer
        .call_tool(call("huge", json!({})), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(!err.to_string().is_empty());
    let closed = tokio::time::timeout(Duration::from_secs(10), peer.closed()).await;
    assert!(closed.is_ok(), "the connection outlived a 5 MiB line");
}
