//! The real `yolop-extension-logfire` 0.2.1, built from crates.io, run under our host: the
//! events it is sent must reach its OTLP endpoint (a loopback receiver here).
//!
//! Needs the network and a few minutes to compile, so it is ignored by default:
//! `cargo test -p yep-example-otlp-trace --test logfire -- --ignored`.

mod common;

use common::receiver;
use serde_json::json;
use std::time::{Duration, Instant};
use yep_host::runtime::TraceEvent;
use yep_host::store::config::{self, Secret};
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{ExtensionHost, HostOptions, Manifest, Session};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs crates.io and minutes of compiling: builds yolop-extension-logfire 0.2.1"]
async fn the_published_logfire_exporter_receives_our_events() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cargo-root");
    #[allow(clippy::disallowed_methods)] // building the published exporter, as its users do
    let built = std::process::Command::new(env!("CARGO"))
        .args([
            "install",
            "--quiet",
            "--locked",
            "yolop-extension-logfire@0.2.1",
            "--root",
        ])
        .arg(&root)
        .status()
        .unwrap();
    assert!(
        built.success(),
        "cargo install yolop-extension-logfire failed"
    );

    let home = Home {
        root: dir.path().join("home"),
    };
    home.install(
        "crates.io:yolop-extension-logfire@0.2.1",
        &InstallOptions::default(),
        &mut AlwaysYes,
    )
    .unwrap();
    // The package ships source; the binary we built goes where the runtime looks first.
    let bin = home.package_dir("logfire").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(
        root.join("bin/yolop-extension-logfire"),
        bin.join("yolop-extension-logfire"),
    )
    .unwrap();
    home.set_enabled("logfire", true).unwrap();
    let (url, got) = receiver();
    let m = Manifest::load(&home.package_dir("logfire")).unwrap();
    config::set_plain(&home, &m, "endpoint", json!(format!("{url}/v1/traces"))).unwrap();
    config::set_secret(&home, &m, "token", &Secret::new("logfire-test-token")).unwrap();

    let session = Session {
        id: "logfire-session".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(home, session, HostOptions::default())
        .await
        .unwrap();
    let ctx = json!({"turn_id": "t1", "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"});
    for (i, kind) in [
        "turn.started",
        "tool.started",
        "tool.completed",
        "turn.completed",
    ]
    .iter()
    .enumerate()
    {
        host.emit(TraceEvent {
            event_type: kind.to_string(),
            id: format!("e{i}"),
            context: ctx.clone(),
            data: json!({"tool_name": "bash"}),
            ..TraceEvent::default()
        });
    }
    host.flush(Duration::from_secs(20)).await;
    host.shutdown().await; // stdin closes: the exporter flushes its batch on the way out
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = got.lock().unwrap().clone();
    assert!(!got.is_empty(), "the exporter sent nothing to its endpoint");
    assert!(
        got.iter()
            .all(|(request, ..)| request.starts_with("POST /v1/traces")),
        "{got:?}"
    );
}
