//! Servers that flood (`tests/fixtures/hostile/flooding-server/flood.py`): the host keeps
//! serving everyone else, timeouts fire, and the flooder is disconnected with an error that
//! names it and its log. Every test runs on a single-threaded runtime, where one reader that
//! never yields would stop everything.

use crate::common;

use common::Fixture;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use yep_host::capability::{LogLevel, RemoteError};
use yep_host::dialect::yep::{codec, request};
use yep_host::dialect::{PeerError, PeerFailure};
use yep_host::process::{SpawnSpec, spawn};
use yep_host::rpc::{
    BoxFuture, CallError, CallOptions, CloseReason, Connection, ConnectionOptions, Handler,
};
use yep_host::{Events, Extension, NoEvents, SupervisorOptions};

fn flood_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/flooding-server/flood.py")
        .to_string_lossy()
        .into_owned()
}

/// Takes a few microseconds per notification, as a terminal or a log file does: slower than
/// the flooder writes, so the pipe never runs dry and only the reader's own yielding helps.
struct Slow;
impl Handler for Slow {
    fn notification(&self, _: &str, _: Value) {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_micros(5) {
            std::hint::spin_loop();
        }
    }
    fn request(&self, method: &str, _: Value) -> BoxFuture<Result<Value, RemoteError>> {
        let err = RemoteError::new(RemoteError::METHOD_NOT_FOUND, method);
        Box::pin(async move { Err(err) })
    }
}

/// The flooder started right away, on a connection with the given options.
fn flooding_connection(dir: &Path, mode: &str, opts: ConnectionOptions) -> (Connection, impl Drop) {
    let spawned = spawn(&SpawnSpec {
        program: "python3".into(),
        args: vec![flood_script(), mode.into(), "--now".into()],
        cwd: dir.to_path_buf(),
        bin_dir: None,
        env: Vec::new(),
        log_path: dir.join("flood.log"),
        sandbox: None,
    })
    .unwrap();
    let conn = Connection::start_pipe(spawned.stdout, spawned.stdin, Arc::new(Slow), codec(), opts)
        .unwrap();
    (conn, spawned.process)
}

#[tokio::test(flavor = "current_thread")]
async fn timeouts_and_other_tasks_run_while_a_server_floods_below_the_disconnect_rate() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["notify"] {
        // Limits so high the flooder is never cut off: only the reader's yielding helps.
        let (conn, _process) = flooding_connection(
            dir.path(),
            mode,
            ConnectionOptions {
                label: "flood".into(),
                noise_rate: u32::MAX,
                noise_burst: u32::MAX,
                ..ConnectionOptions::default()
            },
        );
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker_ticks = Arc::clone(&ticks);
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticker_ticks.fetch_add(1, Ordering::Relaxed);
            }
        });
        let started = std::time::Instant::now();
        let res = tokio::time::timeout(
            Duration::from_secs(20),
            request::<(), Value>(
                &conn,
                "tool/call",
                None,
                CallOptions::timeout(Duration::from_millis(300)),
            ),
        )
        .await
        .expect("the call's own timeout fired");
        assert!(
            matches!(
                res,
                Err(PeerError {
                    failure: PeerFailure::Call(CallError::Timeout { .. }),
                    ..
                })
            ),
            "{mode}: {res:?}"
        );
        // A generous bound: a 300 ms timeout that takes seconds means the reader hogged the
        // thread (it took 26 s before readers yielded).
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{mode}: the timeout fired after {:?}",
            started.elapsed()
        );
        assert!(
            ticks.load(Ordering::Relaxed) > 0,
            "{mode}: another task ran meanwhile"
        );
        ticker.abort();
        conn.close(CloseReason::Shutdown);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_sustained_flood_disconnects_the_server() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["garbage", "notify"] {
        let (conn, _process) = flooding_connection(
            dir.path(),
            mode,
            ConnectionOptions {
                label: "flood".into(),
                ..ConnectionOptions::default()
            },
        );
        let reason = tokio::time::timeout(Duration::from_secs(20), conn.closed())
            .await
            .expect("the flooder was cut off");
        assert_eq!(reason, CloseReason::Flooded { rate: 10_000 }, "{mode}");
        assert!(reason.to_string().contains("flooded"), "{reason}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_floods_requests_without_reading_answers_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _process) = flooding_connection(
        dir.path(),
        "requests",
        ConnectionOptions {
            label: "flood".into(),
            max_inbound_requests: 8,
            ..ConnectionOptions::default()
        },
    );
    let reason = tokio::time::timeout(Duration::from_secs(20), conn.closed())
        .await
        .expect("the flooder was cut off");
    assert_eq!(reason, CloseReason::TooManyRequests { cap: 8 });
}

/// Counts `log` notifications.
#[derive(Default)]
struct CountLogs(AtomicUsize);
impl Events for CountLogs {
    fn log(&self, _: &str, _: LogLevel, _: &str) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_flooding_extension_is_cut_off_by_name_and_log_while_another_keeps_serving() {
    let fx = Fixture::new();
    let script = flood_script();
    let logs = Arc::new(CountLogs::default());
    let flood = Extension::new(
        fx.spec("flood", "python3", &[&script, "notify"]),
        SupervisorOptions::default(),
        Arc::clone(&logs) as Arc<dyn Events>,
    );
    let echo = Extension::new(fx.echo(), SupervisorOptions::default(), Arc::new(NoEvents));
    echo.call_tool("echo", json!({"text": "warm"}), None, None)
        .await
        .unwrap();
    let flooding =
        tokio::spawn(async move { flood.call_tool("flood", json!({}), None, None).await });
    while logs.0.load(Ordering::Relaxed) < 1000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for i in 0..20 {
        let out = tokio::time::timeout(
            Duration::from_secs(10),
            echo.call_tool("echo", json!({"text": format!("{i}")}), None, None),
        )
        .await
        .expect("the echo extension answered during the flood")
        .unwrap();
        assert_eq!(out["echoed"], format!("{i}"));
    }
    let err = tokio::time::timeout(Duration::from_secs(20), flooding)
        .await
        .expect("the flooder was cut off")
        .unwrap()
        .unwrap_err()
        .to_string();
    let log: PathBuf = fx.dir.path().join("logs").join("flood.log");
    assert!(
        err.contains("extension `flood`")
            && err.contains("flooded")
            && err.contains(&log.display().to_string()),
        "{err}"
    );
    echo.stop().await;
}
