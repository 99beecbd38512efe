//! `yep doctor` against good and purpose-built bad servers.

use crate::common;

use common::*;
use serde_json::{Value, json};
use yep_host::Manifest;
use yep_tools::doctor::{self, Report, Status};

/// The mode an embedder gets by default, as doctor runs under it.
const BEST_EFFORT: yep_host::sandbox::Mode = yep_host::sandbox::Mode::BestEffort;

fn manifest(facet: Value) -> Manifest {
    Manifest::parse(
        &json!({"name": "subject", "version": "1.0.0", "yolop": facet}).to_string(),
        "plugin.json".as_ref(),
    )
    .unwrap()
}

fn status(report: &Report, check: &str) -> (Status, String) {
    let c = report
        .checks
        .iter()
        .find(|c| c.name == check)
        .unwrap_or_else(|| panic!("no `{check}` check in {report:?}"));
    (c.status, c.detail.clone())
}

fn fixture(fx: &Fixture, config: Value) -> yep_host::ServerSpec {
    fx.spec("subject", &fixture_bin(), &[&config.to_string()])
}

#[tokio::test]
async fn the_echo_example_passes_every_check() {
    let fx = Fixture::new();
    let m: Manifest = Manifest::parse(yep_example_echo_manifest(), "plugin.json".as_ref()).unwrap();
    let mut spec = fx.echo();
    spec.name = m.name.clone();
    let report = doctor::run(&m, spec, BEST_EFFORT).await;
    assert!(report.ok, "{report:#?}");
    // The sandbox row is graded by the mode this process runs servers under (best-effort here).
    assert!(
        report
            .checks
            .iter()
            .all(|c| c.status == Status::Pass || c.name == "sandbox"),
        "{report:#?}"
    );
    for name in [
        "spawn",
        "handshake",
        "protocol_version",
        "tools",
        "tool_schemas",
        "prompt",
        "hooks",
        "dynamic_prompt",
        "cancel",
        "config_push",
        "stdout",
        "schema",
        "startup",
    ] {
        assert!(
            report.checks.iter().any(|c| c.name == name),
            "missing {name}"
        );
    }
}

fn yep_example_echo_manifest() -> &'static str {
    include_str!("../../../../examples/echo/plugin.json")
}

#[tokio::test]
async fn a_widened_tool_fails_and_an_unserved_one_warns() {
    let fx = Fixture::new();
    let report = doctor::run(
        &manifest(json!({"tools": [{"name": "a"}]})),
        fixture(&fx, json!({"tools": ["a", "extra"]})),
        BEST_EFFORT,
    )
    .await;
    assert!(!report.ok);
    assert_eq!(status(&report, "tools").0, Status::Fail);
    assert!(status(&report, "tools").1.contains("extra"));
    let report = doctor::run(
        &manifest(json!({"tools": [{"name": "a"}, {"name": "b"}]})),
        fixture(&fx, json!({"tools": ["a", "traces"]})),
        BEST_EFFORT,
    )
    .await;
    let (s, d) = status(&report, "tools");
    assert_eq!(s, Status::Fail, "traces is served but undeclared: {d}");
}

#[tokio::test]
async fn a_tool_schema_that_does_not_compile_fails() {
    let fx = Fixture::new();
    let report = doctor::run(
        &manifest(
            json!({"tools": [{"name": "a", "schema": {"type": "no-such-type"}}, {"name": "b"}]}),
        ),
        fixture(&fx, json!({"tools": ["a", "b"]})),
        BEST_EFFORT,
    )
    .await;
    assert!(!report.ok);
    let (s, d) = status(&report, "tool_schemas");
    assert_eq!(s, Status::Fail, "{report:#?}");
    assert!(d.contains("`a`:") && !d.contains("`b`"), "{d}");
}

#[tokio::test]
async fn a_stray_stdout_line_fails_hygiene() {
    let fx = Fixture::new();
    let script = format!("echo 'debug: starting'; exec '{}'", echo_bin());
    let m = Manifest::parse(yep_example_echo_manifest(), "plugin.json".as_ref()).unwrap();
    let report = doctor::run(&m, fx.spec("echo", "sh", &["-c", &script]), BEST_EFFORT).await;
    let (s, d) = status(&report, "stdout");
    assert_eq!(s, Status::Fail);
    assert!(d.contains("debug: starting"), "{d}");
}

#[tokio::test]
async fn a_schema_invalid_payload_fails() {
    let fx = Fixture::new();
    // Answers hook/fire with `block` as a string: the schema says boolean.
    let script = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m: continue
    if m["method"] == "initialize":
        r = {"protocol_version": "1.0", "name": "subject", "capabilities": ["tools"], "capability_params": {"tools": []}}
    elif m["method"] == "hook/fire":
        r = {"block": "yes", "reason": 7}
    elif m["method"] == "cancel":
        r = {"cancelled": False}
    else:
        r = {}
    print(json.dumps({"id": m["id"], "result": r}), flush=True)
"#;
    let m = manifest(json!({"hooks": [{"event": "pre_tool_use"}]}));
    let report = doctor::run(
        &m,
        fx.spec("subject", "python3", &["-c", script]),
        BEST_EFFORT,
    )
    .await;
    let (s, d) = status(&report, "schema");
    assert_eq!(s, Status::Fail, "{report:#?}");
    assert!(d.contains("hook/fire result"), "{d}");
}

#[tokio::test]
async fn a_hook_slower_than_its_timeout_fails() {
    let fx = Fixture::new();
    let m = manifest(
        json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash", "timeout_ms": 100}]}),
    );
    let report = doctor::run(
        &m,
        fixture(&fx, json!({"hook_sleep_ms": 1000})),
        BEST_EFFORT,
    )
    .await;
    let (s, d) = status(&report, "hooks");
    assert_eq!(s, Status::Fail);
    assert!(d.contains("timed out"), "{d}");
}

#[tokio::test]
async fn a_wrong_major_fails_the_handshake() {
    let fx = Fixture::new();
    let script = r#"
import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"id": m["id"], "result": {"protocol_version": "2.0", "name": "subject"}}), flush=True)
"#;
    let report = doctor::run(
        &manifest(json!({"tools": [{"name": "a"}]})),
        fx.spec("subject", "python3", &["-c", script]),
        BEST_EFFORT,
    )
    .await;
    assert!(!report.ok);
    let (s, d) = status(&report, "handshake");
    assert_eq!(s, Status::Fail);
    assert!(d.contains("incompatible"), "{d}");
}

#[tokio::test]
async fn a_yolop_yep_server_passes_with_a_warning_for_cancel() {
    let fx = Fixture::new();
    let m = manifest(
        json!({"tools": [{"name": "echo"}, {"name": "fail"}, {"name": "slow"}], "prompt": true, "dynamic_prompt": true, "hooks": [{"event": "pre_tool_use"}]}),
    );
    let report = doctor::run(
        &m,
        fx.spec("subject", &yolop_fixture_bin(), &[]),
        BEST_EFFORT,
    )
    .await;
    assert!(report.ok, "{report:#?}");
    assert_eq!(status(&report, "cancel").0, Status::Warn);
    assert_eq!(status(&report, "config_push").0, Status::Warn);
    assert_eq!(status(&report, "schema").0, Status::Pass);
    assert_eq!(
        status(&report, "name").0,
        Status::Warn,
        "it calls itself yolop-fixture"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_is_graded_with_bounded_memory() {
    let fx = Fixture::new();
    let flood = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/doctor-flood/flood.py");
    let config = json!({"tools": ["a"]}).to_string();
    let spec = fx.spec(
        "subject",
        "python3",
        &[flood.to_str().unwrap(), &fixture_bin(), &config],
    );
    let report = doctor::run(
        &manifest(json!({"tools": [{"name": "a"}]})),
        spec,
        BEST_EFFORT,
    )
    .await;
    let (stdout, detail) = status(&report, "stdout");
    assert_eq!(stdout, Status::Warn, "{detail}");
    let kept = format!("only the first {} were kept", doctor::KEEP_LINES);
    assert!(detail.contains(&kept), "{detail}");
    let total: u64 = detail.split(' ').next().unwrap().parse().unwrap();
    assert!(total > 50_000, "{detail}");
    assert_eq!(status(&report, "handshake").0, Status::Pass, "{report:#?}");
}
