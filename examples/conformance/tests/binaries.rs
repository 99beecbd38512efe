//! Both programs build and start. (These tests also make `cargo test --workspace` build the
//! binaries `crates/yep-cli/tests/all/conformance.rs` runs under the MCP conformance suite.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn the_server_serves_the_simple_text_tool_on_raw_stdio() {
    #[allow(clippy::disallowed_methods)] // the binary under test, on raw stdio
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep-example-conformance"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"id":1,"method":"initialize","params":{{"protocol_version":"1.0"}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"id":2,"method":"tool/call","params":{{"name":"test_simple_text","args":{{}}}}}}"#
    )
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answered = None;
    for line in lines.by_ref() {
        let frame: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if frame["id"] == 2 {
            answered = Some(frame);
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    let frame = answered.expect("an answer to the call");
    assert_eq!(
        frame["result"]["content"][0]["text"], "This is a simple text response for testing.",
        "{frame}"
    );
}

#[test]
fn the_client_without_a_url_says_how_it_is_run() {
    #[allow(clippy::disallowed_methods)] // the binary under test
    let out = Command::new(env!("CARGO_BIN_EXE_yep-conformance-client"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("usage: yep-conformance-client <url>"),
        "{said}"
    );
}
