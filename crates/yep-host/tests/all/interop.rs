//! Interop both ways with yolop: `yep-host` drives a server built on the published
//! `yolop-yep` 0.5 SDK, and our echo server answers lines exactly as yolop's host sends them.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;
use yep_host::capability::{ConfigOutcome, HookEvent, HookFiring, HookOutcome};

#[tokio::test]
async fn yep_host_drives_a_yolop_yep_server() {
    let fx = Fixture::new();
    let ext = extension(
        fx.spec("yolop-fixture", &yolop_fixture_bin(), &[]),
        Arc::default(),
    );

    let init = ext.handshake().await.unwrap();
    assert_eq!(init.name, "yolop-fixture");
    assert_eq!(
        init.prompt.unwrap(),
        "Static prompt from a yolop-yep server."
    );
    let tools: Vec<_> = init.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["echo", "fail", "slow"]);

    let result = ext
        .call_tool("echo", json!({"text": "from yep"}), None, None)
        .await
        .unwrap();
    assert_eq!(result, json!({"echoed": "from yep"}));
    let err = ext
        .call_tool("fail", json!({}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("fixture failure"), "{err}");

    let fire = HookFiring {
        event: HookEvent::PreToolUse,
        tool: "bash".into(),
        args: json!({"forbidden": true}),
        result: None,
    };
    let decision = ext
        .with_peer(|p, _| p.fire_hook(&fire, Duration::from_secs(5)))
        .await
        .unwrap()
        .outcome;
    assert_eq!(
        decision,
        HookOutcome::Block {
            reason: "blocked by the yolop fixture".into(),
            user_message: None
        }
    );

    assert_eq!(
        ext.with_peer(|p, t| p.prompt(t)).await.unwrap(),
        "dynamic prompt from a yolop-yep server"
    );

    // yolop's SDK answers -32601 to what it lacks; the host reads that sensibly.
    assert_eq!(
        ext.with_peer(|p, t| p.config_changed(json!({"a": 1}), t))
            .await
            .unwrap(),
        ConfigOutcome::RestartRequired
    );
    let err = ext
        .with_peer(|p, t| p.command("ping", "", t))
        .await
        .unwrap_err();
    assert_eq!(err.remote().map(|e| e.code), Some(-32601), "{err}");

    // A cancel it does not understand (-32601) still resolves our call as cancelled, and its
    // late result is dropped.
    let token = CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let err = ext
        .call_tool("slow", json!({}), None, Some(token))
        .await
        .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(
        ext.call_tool("echo", json!({"text": "still"}), None, None)
            .await
            .unwrap(),
        json!({"echoed": "still"})
    );

    // yolop's SDK keeps running after `shutdown` until EOF; the graceful stop closes stdin.
    assert_eq!(ext.stop().await.as_deref(), Some("exit code 0"));
}

/// Lines exactly as yolop's host writes them: no `jsonrpc`, `tool_call_id` = the tool name,
/// `session_id` = "", params omitted when null.
#[tokio::test]
async fn the_echo_server_answers_yolop_host_lines() {
    let fx = Fixture::new();
    let spawned = fx.spawn_echo();
    let mut stdin = spawned.stdin;
    let mut lines = BufReader::new(spawned.stdout).lines();
    let root = fx.dir.path().display().to_string();
    let sent = [
        format!(r#"{{"id":1,"method":"initialize","params":{{"protocol_version":"1.0","session_id":"","workspace_root":"{root}","config":null,"capabilities":["cancel","streaming"]}}}}"#),
        r#"{"method":"initialized"}"#.to_string(),
        r#"{"id":2,"method":"tool/call","params":{"tool_call_id":"echo","name":"echo","args":{"text":"hi"}}}"#.to_string(),
        r#"{"id":3,"method":"hook/fire","params":{"event":"pre_tool_use","tool_name":"bash","args":{"forbidden":true}}}"#.to_string(),
        r#"{"id":4,"method":"prompt/contribution"}"#.to_string(),
        r#"{"id":5,"method":"command/execute","params":{"name":"ping","arguments":""}}"#.to_string(),
        r#"{"method":"trace/event","params":{"event_type":"turn.started","id":"e1","ts":"2026-11-30T00:00:00Z","session_id":""}}"#.to_string(),
        r#"{"id":6,"method":"shutdown"}"#.to_string(),
    ];
    for line in &sent {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();

    let mut by_id = std::collections::BTreeMap::new();
    let mut notifications = Vec::new();
    while by_id.len() < 6 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(v.get("jsonrpc").is_none(), "we never emit jsonrpc: {line}");
        match v.get("id").and_then(Value::as_u64) {
            Some(id) => {
                by_id.insert(id, v);
            }
            None => notifications.push(v),
        }
    }
    let init = &by_id[&1]["result"];
    assert_eq!(init["protocol_version"], "1.0");
    assert_eq!(init["name"], "echo");
    assert_eq!(
        init["capability_params"]["tools"],
        json!([{"name": "ask"}, {"name": "count"}, {"name": "echo"}])
    );
    assert_eq!(by_id[&2], json!({"id": 2, "result": {"echoed": "hi"}}));
    assert_eq!(by_id[&3]["result"]["block"], true);
    assert_eq!(by_id[&4]["result"]["text"], "echo dynamic prompt, turn 1");
    assert_eq!(
        by_id[&5]["result"],
        json!({"success": true, "message": "pong"})
    );
    assert_eq!(by_id[&6], json!({"id": 6, "result": {}}));
    // Every notification it sent is one yolop's host understands.
    for n in &notifications {
        let method = n["method"].as_str().unwrap();
        assert!(
            ["status/changed", "tool/update", "log"].contains(&method),
            "{n}"
        );
    }

    // EOF on stdin: the server exits cleanly.
    drop(stdin);
    let proc_ = spawned.process;
    let status = proc_.wait_for_exit(Duration::from_secs(10)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}
