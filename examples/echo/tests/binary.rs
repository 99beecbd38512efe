//! The built binary serves a handshake and exits at EOF. (Having an integration test also makes
//! `cargo test --workspace` build `yep-example-echo`, which the host's wire tests spawn.)

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn the_binary_answers_initialize_and_exits_at_eof() {
    #[allow(clippy::disallowed_methods)] // the binary under test, on raw stdio
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep-example-echo"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"id":1,"method":"initialize","params":{{"protocol_version":"1.0"}}}}"#
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let first = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(v["id"], 1);
    assert_eq!(v["result"]["name"], "echo");
}

#[test]
fn the_shipped_manifest_declares_what_the_server_serves() {
    let manifest: serde_json::Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
    let tools: Vec<&str> = manifest["yolop"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["echo", "count", "ask"]);
    assert_eq!(
        manifest["yolop"]["capabilityServer"]["command"],
        "yep-example-echo"
    );
}
