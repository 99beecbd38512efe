//! `yep-host` driving the real `yep-example-echo` process (and a few misbehaving servers).

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use yep_host::capability::{HookEvent, HookFiring, HookOutcome, RemoteError};
use yep_host::dialect::yep::{codec, request};
use yep_host::rpc::{CallOptions, CloseReason, Connection, ConnectionOptions};
use yep_host::supervisor::ExtensionError;
use yep_host::{Extension, NoEvents, SupervisorOptions};
use yep_protocol::InitializeParams;

#[tokio::test]
async fn handshake_reports_served_tools_and_the_static_prompt() {
    let fx = Fixture::new();
    let recorder = Arc::new(Recorder::default());
    let ext = extension(fx.echo(), Arc::clone(&recorder));
    let init = ext.handshake().await.unwrap();
    assert_eq!(init.name, "echo");
    assert_eq!(init.wire, "YEP 1.0");
    let tools: Vec<_> = init.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["ask", "count", "echo"]);
    assert!(init.prompt.unwrap().contains("echo tool"));
    // The status the server pushes at start reaches the host's events.
    assert!(
        eventually(|| recorder
            .statuses
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.text == "echo ready")))
        .await
    );
    assert_eq!(ext.stop().await.as_deref(), Some("exit code 0"));
}

#[tokio::test]
async fn a_host_speaking_another_major_is_refused_by_the_server() {
    let fx = Fixture::new();
    let spawned = fx.spawn_echo();
    let conn = Connection::start(
        spawned.stdout,
        spawned.stdin,
        Arc::new(NoopHandler),
        codec(),
        ConnectionOptions::default(),
    );
    let params = InitializeParams {
        protocol_version: "2.0".into(),
        ..Default::default()
    };
    let err = request::<_, Value>(
        &conn,
        "initialize",
        Some(&params),
        CallOptions::timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("incompatible"), "{text}");
    // The refusal is an answer, not a crash: the server still serves.
    let params = InitializeParams {
        protocol_version: "1.3".into(),
        ..Default::default()
    };
    request::<_, Value>(
        &conn,
        "initialize",
        Some(&params),
        CallOptions::timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_server_speaking_another_major_is_refused_by_the_host() {
    let fx = Fixture::new();
    let script = r#"
import sys, json
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        print(json.dumps({"id": msg["id"], "result": {"protocol_version": "2.0", "name": "future"}}), flush=True)
"#;
    let ext = extension(
        fx.spec("future", "python3", &["-c", script]),
        Arc::default(),
    );
    let err = ext.handshake().await.unwrap_err().to_string();
    assert!(
        err.contains("extension `future`: handshake failed"),
        "{err}"
    );
    assert!(err.contains("incompatible"), "{err}");
    assert!(err.contains("log: "), "{err}");
}

struct NoopHandler;
impl yep_host::rpc::Handler for NoopHandler {
    fn notification(&self, _: &str, _: Value) {}
    fn request(&self, _: &str, _: Value) -> yep_host::rpc::BoxFuture<Result<Value, RemoteError>> {
        Box::pin(async { Err(RemoteError::new(0, "no")) })
    }
}

#[tokio::test]
async fn sixty_four_concurrent_calls_resolve_even_when_answered_out_of_order() {
    let fx = Fixture::new();
    let ext = Arc::new(extension(fx.echo(), Arc::default()));
    ext.handshake().await.unwrap();
    let finished = Arc::new(Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    for i in 0..64u64 {
        let ext = Arc::clone(&ext);
        let finished = Arc::clone(&finished);
        // Later calls sleep less, so the server answers them first.
        let args = json!({"n": 1, "interval_ms": (64 - i) * 4});
        calls.push(tokio::spawn(async move {
            let result = ext.call_tool("count", args, None, None).await;
            finished.lock().unwrap().push(i);
            result
        }));
    }
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), json!({"counted": 1}));
    }
    let order = finished.lock().unwrap().clone();
    assert_eq!(order.len(), 64);
    assert_ne!(
        order,
        (0..64).collect::<Vec<_>>(),
        "replies should not come back in issue order"
    );
}

#[tokio::test]
async fn every_streamed_update_arrives_before_its_result() {
    let fx = Fixture::new();
    let ext = extension(fx.echo(), Arc::default());
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink_seen = Arc::clone(&seen);
    let sink: yep_host::UpdateSink = Arc::new(move |p: &yep_host::capability::Progress| {
        sink_seen.lock().unwrap().push(p.message.clone())
    });
    let result = ext
        .call_tool(
            "count",
            json!({"n": 5, "interval_ms": 10}),
            Some(sink),
            None,
        )
        .await
        .unwrap();
    assert_eq!(result, json!({"counted": 5}));
    assert_eq!(*seen.lock().unwrap(), ["1/5", "2/5", "3/5", "4/5", "5/5"]);
}

#[tokio::test]
async fn cancelling_mid_count_resolves_cancelled_instead_of_completing() {
    let fx = Fixture::new();
    let ext = Arc::new(extension(fx.echo(), Arc::default()));
    ext.handshake().await.unwrap();
    let token = CancellationToken::new();
    // The first update says the count is under way; it is cancelled then, not after a while.
    let (first_update, under_way) = tokio::sync::oneshot::channel::<()>();
    let first_update = Mutex::new(Some(first_update));
    let sink: yep_host::UpdateSink = Arc::new(move |_: &yep_host::capability::Progress| {
        if let Some(tx) = first_update.lock().unwrap().take() {
            let _ = tx.send(());
        }
    });
    let call = {
        let ext = Arc::clone(&ext);
        let token = token.clone();
        // 100,000 steps of 100 ms: hours if nobody cancels, so a result means cancel failed.
        tokio::spawn(async move {
            ext.call_tool(
                "count",
                json!({"n": 100_000, "interval_ms": 100}),
                Some(sink),
                Some(token),
            )
            .await
        })
    };
    under_way.await.expect("the count streamed no update");
    token.cancel();
    // (How long cancel takes is yep-bench's `cancel_rtt`.)
    let err = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the cancelled call never resolved")
        .unwrap()
        .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    // The connection is still good afterwards.
    assert_eq!(
        ext.call_tool("echo", json!({"text": "after"}), None, None)
            .await
            .unwrap(),
        json!({"echoed": "after"})
    );
}

#[tokio::test]
async fn the_server_resolves_a_wire_cancel_with_the_cancelled_error() {
    // Below the supervisor: send `cancel` ourselves and watch both answers.
    let fx = Fixture::new();
    let ext = extension(fx.echo(), Arc::default());
    let conn_ext = Arc::new(ext);
    conn_ext.handshake().await.unwrap();
    let e2 = Arc::clone(&conn_ext);
    let call = tokio::spawn(async move {
        e2.call_tool("count", json!({"n": 100, "interval_ms": 100}), None, None)
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Ids are per connection: handshake was 1, the call is 2.
    let answer = conn_ext
        .with_peer(|p, t| p.request("cancel", Some(json!({"id": 2})), t))
        .await
        .unwrap();
    assert_eq!(answer, json!({"cancelled": true}));
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(
        err.remote().map(|e| e.message.as_str()),
        Some("cancelled"),
        "{err}"
    );
    let again = conn_ext
        .with_peer(|p, t| p.request("cancel", Some(json!({"id": 2})), t))
        .await
        .unwrap();
    assert_eq!(again, json!({"cancelled": false}));
}

#[tokio::test]
async fn ui_ask_is_answered_by_the_hosts_sink() {
    let fx = Fixture::new();
    let recorder = Arc::new(Recorder::default());
    *recorder.answer.lock().unwrap() = Some("forty-two".into());
    let ext = extension(fx.echo(), Arc::clone(&recorder));
    let result = ext
        .call_tool("ask", json!({"prompt": "meaning?"}), None, None)
        .await
        .unwrap();
    assert_eq!(result, json!({"answer": "forty-two"}));
    assert_eq!(recorder.asked.lock().unwrap()[0].prompt, "meaning?");
}

#[tokio::test]
async fn a_refused_question_fails_the_tool_with_a_clear_message() {
    let fx = Fixture::new();
    let ext = Extension::new(fx.echo(), quick_opts(), Arc::new(NoEvents));
    let err = ext
        .call_tool("ask", json!({"prompt": "?"}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("dismissed"), "{err}");
}

#[tokio::test]
async fn an_unknown_method_is_answered_method_not_found() {
    let fx = Fixture::new();
    let ext = extension(fx.echo(), Arc::default());
    let err = ext
        .with_peer(|p, t| p.request("frobnicate", None, t))
        .await
        .unwrap_err();
    assert_eq!(
        err.remote().map(|e| e.code),
        Some(RemoteError::METHOD_NOT_FOUND),
        "{err}"
    );
}

#[tokio::test]
async fn hook_prompt_and_command_answer() {
    let fx = Fixture::new();
    let ext = extension(fx.echo(), Arc::default());
    let fire = |forbidden| HookFiring {
        event: HookEvent::PreToolUse,
        tool: "bash".into(),
        args: json!({"forbidden": forbidden}),
        result: None,
    };
    let blocked = ext
        .with_peer(|p, _| p.fire_hook(&fire(true), Duration::from_secs(5)))
        .await
        .unwrap()
        .outcome;
    assert!(
        matches!(&blocked, HookOutcome::Block { reason, .. } if reason.contains("forbidden")),
        "{blocked:?}"
    );
    assert_eq!(
        ext.with_peer(|p, _| p.fire_hook(&fire(false), Duration::from_secs(5)))
            .await
            .unwrap()
            .outcome,
        HookOutcome::Allow
    );
    assert_eq!(
        ext.with_peer(|p, t| p.prompt(t)).await.unwrap(),
        "echo dynamic prompt, turn 1"
    );
    let pong = ext
        .with_peer(|p, t| p.command("ping", "", t))
        .await
        .unwrap();
    assert!(pong.success);
    assert_eq!(pong.message, "pong");
}

#[tokio::test]
async fn a_malformed_line_from_the_server_is_skipped() {
    let fx = Fixture::new();
    let echo = echo_bin();
    let script =
        format!("echo 'this is not json'; echo '{{\"no\":\"method or id\"}}'; exec '{echo}'");
    let ext = extension(fx.spec("echo", "sh", &["-c", &script]), Arc::default());
    let result = ext
        .call_tool("echo", json!({"text": "still here"}), None, None)
        .await
        .unwrap();
    assert_eq!(result, json!({"echoed": "still here"}));
}

#[tokio::test]
async fn an_oversized_line_disconnects_the_server_with_a_clear_error() {
    let fx = Fixture::new();
    let opts = SupervisorOptions {
        max_frame_bytes: 1024,
        ..quick_opts()
    };
    let ext = Extension::new(fx.echo(), opts, Arc::new(NoEvents));
    let err = ext
        .call_tool("echo", json!({"text": "x".repeat(4096)}), None, None)
        .await
        .unwrap_err();
    match &err {
        ExtensionError::Exited {
            reason: CloseReason::FrameTooLarge { cap: 1024, .. },
            ..
        } => {}
        other => panic!("expected a frame-cap disconnect, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("extension `echo`") && text.contains("frame cap"),
        "{text}"
    );
    // The next call starts a fresh server.
    assert_eq!(
        ext.call_tool("echo", json!({"text": "small"}), None, None)
            .await
            .unwrap(),
        json!({"echoed": "small"})
    );
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_with_its_log_then_respawns() {
    let fx = Fixture::new();
    let echo = echo_bin();
    let script = format!("echo 'echo booting' >&2; exec '{echo}'");
    let ext = Arc::new(extension(
        fx.spec("echo", "sh", &["-c", &script]),
        Arc::default(),
    ));
    ext.handshake().await.unwrap();
    let first_pid = ext.pid().unwrap();
    let pending = {
        let ext = Arc::clone(&ext);
        tokio::spawn(async move {
            ext.call_tool("count", json!({"n": 100, "interval_ms": 50}), None, None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(first_pid as i32, libc::SIGKILL) };
    let err = pending.await.unwrap().unwrap_err();
    let text = err.to_string();
    let log = ext.log_path();
    assert!(matches!(err, ExtensionError::Exited { .. }), "{text}");
    assert!(text.contains("extension `echo`"), "{text}");
    assert!(text.contains(&log.display().to_string()), "{text}");
    assert!(text.contains("SIGKILL"), "{text}");
    assert!(text.contains("echo booting"), "stderr tail missing: {text}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("echo booting")
    );
    assert_eq!(ext.failures(), 1);
    // The next call respawns (after the backoff) and works.
    assert_eq!(
        ext.call_tool("echo", json!({"text": "back"}), None, None)
            .await
            .unwrap(),
        json!({"echoed": "back"})
    );
    assert_ne!(ext.pid().unwrap(), first_pid);
    assert_eq!(ext.failures(), 0);
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out() {
    let fx = Fixture::new();
    let opts = SupervisorOptions {
        handshake_timeout: Duration::from_millis(300),
        ..quick_opts()
    };
    let ext = Extension::new(fx.spec("mute", "sleep", &["30"]), opts, Arc::new(NoEvents));
    let err = ext.handshake().await.unwrap_err().to_string();
    assert!(err.contains("extension `mute`: handshake failed"), "{err}");
    assert!(err.contains("timed out after 300 ms"), "{err}");
}

#[tokio::test]
async fn failed_starts_back_off_exponentially() {
    let fx = Fixture::new();
    let opts = SupervisorOptions {
        backoff_base: Duration::from_secs(120),
        backoff_max: Duration::from_secs(600),
        request_timeout: Duration::from_secs(1),
        ..quick_opts()
    };
    let ext = Extension::new(
        fx.spec("broken", "sh", &["-c", "echo dying >&2; exit 3"]),
        opts,
        Arc::new(NoEvents),
    );
    let first = ext.handshake().await.unwrap_err().to_string();
    assert!(
        first.contains("exit code 3") && first.contains("dying"),
        "{first}"
    );
    assert_eq!(ext.failures(), 1);
    // The owed delay exceeds the request timeout, so the call fails fast instead of waiting.
    match ext.handshake().await.unwrap_err() {
        ExtensionError::BackingOff {
            failures: 1,
            retry_in,
            ..
        } => assert!(retry_in > Duration::from_secs(100)),
        other => panic!("expected backoff, got {other}"),
    }
}

#[tokio::test]
async fn a_missing_command_is_a_spawn_error_naming_it() {
    let fx = Fixture::new();
    let ext = Extension::new(
        fx.spec("ghost", "no-such-yep-server", &[]),
        quick_opts(),
        Arc::new(NoEvents),
    );
    let err = ext.handshake().await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("extension `ghost`: cannot spawn `no-such-yep-server`: "),
        "{text}"
    );
    // The OS's reason is in the message and not chained again: told once.
    assert!(std::error::Error::source(&err).is_none(), "{err:?}");
    assert_eq!(yep_host::error::report(&err), text);
}

#[tokio::test]
async fn a_failing_tool_names_the_extension() {
    let fx = Fixture::new();
    let ext = extension(fx.echo(), Arc::default());
    let err = ext
        .call_tool("nope", json!({}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "extension `echo`: `tool/call` failed: no such tool: nope"
    );
}

#[tokio::test]
async fn undeclared_ui_ask_and_status_are_refused() {
    let fx = Fixture::new();
    let recorder = Arc::new(Recorder::default());
    *recorder.answer.lock().unwrap() = Some("should never be asked".into());
    let mut spec = fx.echo();
    spec.grants = yep_host::Grants::default();
    let ext = extension(spec, Arc::clone(&recorder));
    let err = ext
        .call_tool("ask", json!({"prompt": "secret?"}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("dismissed"), "{err}");
    assert!(
        recorder.asked.lock().unwrap().is_empty(),
        "an undeclared ui/ask reached the user"
    );
    // The start-up status push was dropped too.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(recorder.statuses.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_server_that_dies_while_a_grandchild_holds_its_stdout_is_noticed() {
    let fx = Fixture::new();
    let pidfile = fx.dir.path().join("escaped.pid");
    // `setsid` puts the sleeper in its own group, so it survives the group kill and keeps the
    // pipe open: no EOF will come. (Where the server has a cgroup of its own, the sleeper dies
    // with it and EOF does come: either way the call must fail at once.)
    let script = format!(
        "setsid sleep 300 & echo $! > '{}'; exec '{}'",
        pidfile.display(),
        echo_bin()
    );
    let ext = Arc::new(extension(
        fx.spec("echo", "sh", &["-c", &script]),
        Arc::default(),
    ));
    ext.handshake().await.unwrap();
    let pending = {
        let ext = Arc::clone(&ext);
        tokio::spawn(async move {
            ext.call_tool("count", json!({"n": 100, "interval_ms": 100}), None, None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // SAFETY: signalling processes this test started.
    unsafe { libc::kill(ext.pid().unwrap() as i32, libc::SIGKILL) };
    let err = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("the call must not wait for its timeout")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err,
            ExtensionError::Exited {
                reason: CloseReason::ProcessExited | CloseReason::Eof,
                ..
            }
        ),
        "{err}"
    );
    let escaped: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(escaped, libc::SIGKILL) };
}

#[tokio::test]
async fn non_utf8_stderr_does_not_stop_the_log() {
    let fx = Fixture::new();
    let script = format!(
        "printf 'bad \\377\\376 bytes\\n' >&2; echo 'after the bad bytes' >&2; exec '{}'",
        echo_bin()
    );
    let ext = extension(fx.spec("echo", "sh", &["-c", &script]), Arc::default());
    ext.handshake().await.unwrap();
    ext.stop().await;
    let log = std::fs::read(ext.log_path()).unwrap();
    assert!(String::from_utf8_lossy(&log).contains("after the bad bytes"));
}

#[tokio::test]
async fn a_server_that_stops_reading_cannot_hang_a_call_or_the_stop() {
    let fx = Fixture::new();
    // Answers initialize, then never reads stdin again.
    let script = r#"
import sys, json, time
msg = json.loads(sys.stdin.readline())
print(json.dumps({"id": msg["id"], "result": {"protocol_version": "1.0", "name": "deaf"}}), flush=True)
time.sleep(300)
"#;
    let opts = SupervisorOptions {
        request_timeout: Duration::from_millis(500),
        grace: Duration::from_millis(200),
        ..quick_opts()
    };
    let ext = Extension::new(
        fx.spec("deaf", "python3", &["-c", script]),
        opts,
        Arc::new(NoEvents),
    );
    ext.handshake().await.unwrap();
    // 4 MiB of arguments cannot fit in the pipe: the write itself must give up.
    let big = json!({"text": "x".repeat(4 << 20)});
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        ext.call_tool("echo", big, None, None),
    )
    .await
    .expect("the call hung")
    .unwrap_err();
    assert!(matches!(err, ExtensionError::Timeout { .. }), "{err}");
    let status = tokio::time::timeout(Duration::from_secs(10), ext.stop())
        .await
        .expect("stop hung");
    assert_eq!(status.as_deref(), Some("signal 15 (SIGTERM)"));
}
