//! The exporter under the real host: lifecycle events in, OTLP/HTTP JSON out to a loopback
//! receiver, with the secret token as a bearer header.

mod common;

use common::receiver;
use serde_json::{Value, json};
use std::time::Duration;
use yep_host::runtime::TraceEvent;
use yep_host::store::config::{self, Secret};
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{ExtensionHost, HostOptions, Manifest, Session};

fn event(event_type: &str, id: &str, context: Value, data: Value) -> TraceEvent {
    TraceEvent {
        event_type: event_type.into(),
        id: id.into(),
        context,
        data,
        ..TraceEvent::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_events_become_otlp_spans_with_the_secret_as_a_bearer_token() {
    let (url, got) = receiver();
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(include_str!("../plugin.json")).unwrap();
    manifest["yolop"]["capabilityServer"]["command"] = json!(env!("CARGO_BIN_EXE_yep-otlp-trace"));
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    home.install(
        pkg.to_str().unwrap(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )
    .unwrap();
    home.set_enabled("otlp-trace", true).unwrap();
    // Its collector is the user's to choose, and the user grants it (`yep grant otlp-trace
    // net:127.0.0.1:PORT`): the sandbox lets it reach nothing else.
    let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
    let net = yep_host::store::grants::SandboxGrants::parse(&format!("net:127.0.0.1:{port}"));
    home.set_granted("otlp-trace", None, net.unwrap()).unwrap();
    let m = Manifest::load(&home.package_dir("otlp-trace")).unwrap();
    config::set_plain(&home, &m, "endpoint", json!(url)).unwrap();
    config::set_plain(&home, &m, "service_name", json!("agent-under-test")).unwrap();
    config::set_secret(&home, &m, "token", &Secret::new("tok-otlp")).unwrap();

    let session = Session {
        id: "sess-1".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(home, session, HostOptions::default())
        .await
        .unwrap();
    let turn = json!({"turn_id": "t1"});
    host.emit(event("turn.started", "e1", turn.clone(), json!({})));
    host.emit(event(
        "tool.started",
        "e2",
        json!({"turn_id": "t1", "span_id": "s-tool", "parent_span_id": "t1"}),
        json!({"tool_name": "bash"}),
    ));
    host.emit(event(
        "tool.progress",
        "e3",
        json!({"span_id": "s-tool"}),
        json!({"output": "dropped"}),
    ));
    host.emit(event(
        "tool.completed",
        "e4",
        json!({"turn_id": "t1", "span_id": "s-tool"}),
        json!({"tool_name": "bash"}),
    ));
    host.emit(event("turn.completed", "e5", turn, json!({})));
    host.flush(Duration::from_secs(10)).await;
    host.shutdown().await;

    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one export per closed span: {got:?}");
    for (request, headers, _) in &got {
        assert_eq!(request, "POST /v1/traces HTTP/1.1");
        assert!(
            headers.iter().any(|h| h == "authorization: Bearer tok-otlp"
                || h.eq_ignore_ascii_case("authorization: bearer tok-otlp")),
            "{headers:?}"
        );
    }
    let span = |i: usize| got[i].2["resourceSpans"][0]["scopeSpans"][0]["spans"][0].clone();
    let (tool, turn) = (span(0), span(1));
    assert_eq!(tool["name"], "tool bash");
    assert_eq!(turn["name"], "turn");
    assert_eq!(tool["traceId"], turn["traceId"], "one trace per turn");
    assert_eq!(tool["traceId"].as_str().unwrap().len(), 32);
    assert_eq!(
        got[0].2["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
        "agent-under-test"
    );
}
