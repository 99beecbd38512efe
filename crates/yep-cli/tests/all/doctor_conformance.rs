//! `yep doctor --conformance`: the corpus's YEP server-side transcripts replayed against a
//! package's server, a row each in doctor's human and `--json` output.

use crate::common;

use common::{doctor_check, ok, text, yep_with_stdin};
use serde_json::{Value, json};
use std::path::Path;

/// The rows `--conformance` adds, by name (without the `conformance/` prefix): status and
/// detail.
fn rows(report: &Value) -> Vec<(String, String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let name = c["name"].as_str()?.strip_prefix("conformance/")?;
            Some((
                name.to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["detail"].as_str().unwrap().to_string(),
            ))
        })
        .collect()
}

#[test]
fn doctor_conformance_passes_the_installed_echo_example_on_every_transcript() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let pkg = tmp.path().join("echo");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
    manifest["yolop"]["capabilityServer"] =
        json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    ok(&yep_with_stdin(
        &home,
        &["install", pkg.to_str().unwrap(), "--yes"],
        "",
    ));

    let report: Value = serde_json::from_str(&ok(&yep_with_stdin(
        &home,
        &["doctor", "echo", "--conformance", "--json"],
        "",
    )))
    .unwrap();
    assert_eq!(report["ok"], true, "{report:#}");
    let rows = rows(&report);
    let names: Vec<&str> = rows.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "initialize",
            "unknown-tool",
            "unknown-method",
            "malformed-line",
            "shutdown",
            "stdin-eof",
            "tool-call",
            "progress",
            "cancel",
            "hook-answers",
            "hook",
            "ui-ask",
            "command",
            "dynamic-prompt"
        ]
    );
    for (name, status, detail) in &rows {
        assert_eq!(status, "pass", "{name}: {detail}");
    }
    // Doctor's own rows come first, as without the flag.
    assert_eq!(report["checks"][0]["name"], "spawn");

    // The human report shows the same rows.
    let human = ok(&yep_with_stdin(
        &home,
        &["doctor", "echo", "--conformance"],
        "",
    ));
    assert!(
        human.contains("pass  conformance/ui-ask         the reference ask tool"),
        "{human}"
    );
    assert!(human.ends_with("ok: no failures\n"), "{human}");
    // Without the flag, no replay.
    let plain = ok(&yep_with_stdin(&home, &["doctor", "echo"], ""));
    assert!(!plain.contains("conformance"), "{plain}");
}

/// A server that answers every tool/call with the same result, even for a tool it does not
/// serve.
const SLOPPY_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if isinstance(msg, dict) and msg.get("method") == "exit":
        break
    if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocol_version": "1.0", "name": "sloppy", "capabilities": ["tools"],
                  "capability_params": {"tools": [{"name": "echo"}]}}
    elif method == "tool/call":
        result = {"echoed": "nope"}
    elif method == "shutdown":
        result = {}
    else:
        print(json.dumps({"id": msg["id"], "error": {"code": -32601, "message": "no " + method}}), flush=True)
        continue
    print(json.dumps({"id": msg["id"], "result": result}), flush=True)
"#;

fn sloppy_package(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("server.py"), SLOPPY_SERVER).unwrap();
    let manifest = json!({"name": "sloppy", "version": "0.1.0", "description": "answers anything",
        "yolop": {"capabilityServer": {"command": "python3", "args": [dir.join("server.py")]},
                  "tools": [{"name": "echo"}]}});
    std::fs::write(dir.join("plugin.json"), manifest.to_string()).unwrap();
}

#[test]
fn doctor_conformance_fails_what_a_server_breaks_and_skips_what_its_manifest_does_not_declare() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let pkg = tmp.path().join("sloppy");
    sloppy_package(&pkg);
    let out = yep_with_stdin(
        &home,
        &["doctor", pkg.to_str().unwrap(), "--conformance", "--json"],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let row = |name: &str| doctor_check(&report, &format!("conformance/{name}")).clone();

    assert_eq!(row("initialize")["status"], "pass", "{report:#}");
    assert_eq!(row("malformed-line")["status"], "fail", "{report:#}");
    let unknown = row("unknown-tool");
    assert_eq!(unknown["status"], "fail");
    let detail = unknown["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("step 5 (expect): at $.error: expected {\"code?\":\"$integer\",\"message\":\"$string\"}, got nothing (absent)"),
        "{detail}"
    );
    assert!(
        detail.contains(r#"received: {"id":2,"result":{"echoed":"nope"}}"#),
        "{detail}"
    );
    let echo = row("tool-call")["detail"].as_str().unwrap().to_string();
    assert!(
        echo.contains(r#"at $.result.echoed: expected "hello, conformance", got "nope""#),
        "{echo}"
    );
    assert_eq!(row("shutdown")["status"], "pass");
    assert_eq!(row("stdin-eof")["status"], "pass");
    let progress = row("progress");
    assert_eq!(progress["status"], "skip");
    assert!(
        progress["detail"]
            .as_str()
            .unwrap()
            .starts_with("the manifest does not declare tool `count` (the reference count tool"),
        "{progress}"
    );
    assert_eq!(row("ui-ask")["status"], "skip");
    assert!(
        row("ui-ask")["detail"]
            .as_str()
            .unwrap()
            .contains("tool `ask`, `ui_ask`")
    );

    // The human report says the same, FAIL painted only on a terminal.
    let out = yep_with_stdin(
        &home,
        &["doctor", pkg.to_str().unwrap(), "--conformance"],
        "",
    );
    let human = text(&out.stdout);
    assert!(
        human.contains("FAIL  conformance/tool-call      step 5 (expect)"),
        "{human}"
    );
    assert!(
        human.contains("skip  conformance/progress       the manifest does not declare"),
        "{human}"
    );
    assert!(human.ends_with("failed: see FAIL above\n"), "{human}");
}

#[test]
fn doctor_conformance_of_a_zot_extension_says_the_corpus_replays_yep_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let greeter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zot/greeter");
    let out = yep_with_stdin(
        &home,
        &[
            "doctor",
            greeter.to_str().unwrap(),
            "--conformance",
            "--json",
        ],
        "",
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = doctor_check(&report, "conformance");
    assert_eq!(row["status"], "skip", "{report:#}");
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .starts_with("the corpus replays YEP servers"),
        "{row}"
    );
}

#[test]
fn conformance_and_sandbox_learn_are_not_taken_together() {
    let tmp = tempfile::tempdir().unwrap();
    let out = yep_with_stdin(
        tmp.path(),
        &["doctor", "echo", "--conformance", "--sandbox-learn"],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
