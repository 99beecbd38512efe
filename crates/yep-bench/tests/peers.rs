//! The benchmark's peers build and answer. (This also makes `cargo test --workspace` build the
//! `yep-bench-rmcp` server, which the CLI's MCP test lists through rmcp.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn the_rmcp_server_answers_initialize_and_lists_echo() {
    #[allow(clippy::disallowed_methods)] // the binary under test, on raw stdio
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep-bench-rmcp"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str| writeln!(stdin, "{line}").unwrap();
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"id\":1") && line.contains("serverInfo"),
        "{line}"
    );
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"name\":\"echo\""), "{line}");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}
