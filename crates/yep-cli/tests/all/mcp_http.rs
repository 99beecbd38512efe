//! `yep mcp serve --http` as a long-running server, against clients that misbehave: idle
//! connections past the open-file limit, past the connection cap, half-sent headers, idle
//! keep-alive connections and a flood of sessions. Each runs the real binary on loopback.

use crate::common;

use common::http::{McpSession, closed_within};
use common::*;
use serde_json::json;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// The address and token of the server at `url` on `home`.
fn target(home: &Path, url: &str) -> (SocketAddr, String) {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let token = std::fs::read_to_string(home.join("mcp-serve.token")).unwrap();
    (addr, token.trim().to_string())
}

/// Run the hostile fixture `script` (under `tests/fixtures/hostile/`) with `args`, and its
/// first line of output, waited for up to 20 s (killed when the first is dropped).
#[allow(clippy::disallowed_methods)] // it runs while the test goes on
fn hostile(script: &str, args: &[&str]) -> (Serving, String) {
    use std::io::BufRead;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(script);
    let mut child = Serving(
        std::process::Command::new("python3")
            .arg(path)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{script} said nothing in 20 s"));
    (child, line.trim().to_string())
}

/// A session that calls `t1`, retried while the server sheds load.
fn works(addr: SocketAddr, token: &str) -> McpSession {
    served(
        addr,
        token,
        "tools/call",
        json!({"name": "t1", "arguments": {"n": 1}}),
    )
}

/// A session that was answered `method`, retried while the server sheds load.
fn served(addr: SocketAddr, token: &str, method: &str, params: serde_json::Value) -> McpSession {
    let mut last = String::new();
    for _ in 0..50 {
        match McpSession::open(addr, token) {
            Ok(mut session) => match session.call(method, params.clone()) {
                Ok(reply) => {
                    assert!(reply["result"].is_object(), "{reply}");
                    assert_ne!(reply["result"]["isError"], true, "{reply}");
                    return session;
                }
                Err(status) => last = format!("{method}: HTTP {status}"),
            },
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server never served a well-behaved client: {last}");
}

/// Idle connections past the open-file limit used to end the server (accept failed with
/// EMFILE and `serve_http` returned it). Now it backs off, closes an idle connection that
/// never sent an authorized request, and keeps serving.
#[test]
fn running_out_of_file_descriptors_never_ends_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    // A cap above what the descriptors allow, so accept itself fails.
    let (mut server, url, _) = serve_http_limited(
        &home,
        "127.0.0.1:0",
        &["--max-connections", "1000"],
        Some(128),
    );
    let (addr, token) = target(&home, &url);
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(idle.len() > 150, "only {} connections", idle.len());
    std::thread::sleep(Duration::from_millis(300));
    // (Its extension may not start while the descriptors are gone; the listing needs none.)
    let mut session = served(addr, &token, "tools/list", json!({}));
    assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
    let listed = session.call("tools/list", json!({})).unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "t1", "{listed}");
    // Once the flood ends, everything works again.
    drop(idle);
    works(addr, &token);
}

/// At the connection cap, a new connection takes the slot of the oldest one that never sent
/// an authorized request; a client that did keeps its connection.
#[test]
fn past_the_connection_cap_idle_connections_make_room_and_clients_keep_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    let (mut server, url, _) = serve_http(&home, "127.0.0.1:0", &["--max-connections", "8"]);
    let (addr, token) = target(&home, &url);
    let mut first = works(addr, &token);
    let mut idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // The oldest idle ones were closed to make room.
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(5)),
        "the oldest idle connection is still open past the cap"
    );
    // A new client is served, and the first keeps its connection.
    works(addr, &token);
    let listed = first.call("tools/list", json!({})).unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "t1", "{listed}");
    assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
}

/// A header that never finishes (slowloris), and a keep-alive connection left idle after a
/// request, are closed after the header timeout. Both stayed open without limit.
#[test]
fn a_half_sent_header_and_an_idle_keep_alive_connection_are_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    let (_server, url, _) = serve_http(&home, "127.0.0.1:0", &["--header-timeout", "1s"]);
    let (addr, token) = target(&home, &url);
    let (mut slow, said) = hostile(
        "http-slowloris/slowloris.py",
        &[&addr.ip().to_string(), &addr.port().to_string()],
    );
    let mut session = works(addr, &token);
    assert!(said.starts_with("closed after"), "{said}");
    assert!(slow.0.wait().unwrap().success());
    assert!(
        closed_within(&mut session.stream, Duration::from_secs(10)),
        "an idle keep-alive connection is still open"
    );
}

/// Sessions past the cap evict the idle session least worth keeping (one that never made a
/// request), never one in use: 5,000 unclosed sessions each lived 300 s before.
#[test]
fn sessions_past_the_cap_evict_unused_ones_and_keep_the_one_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    let (_server, url, _) = serve_http(&home, "127.0.0.1:0", &["--max-sessions", "4"]);
    let (addr, token) = target(&home, &url);
    let mut used = works(addr, &token);
    let opened: Vec<McpSession> = (0..10)
        .map(|_| McpSession::open(addr, &token).unwrap())
        .collect();
    // The session in use was kept; the first unused ones were closed.
    let listed = used.call("tools/list", json!({})).unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "t1", "{listed}");
    let mut oldest = opened.into_iter().next().unwrap();
    assert_eq!(oldest.call("tools/list", json!({})), Err(404));
}

/// A JSON-RPC batch (MCP took batches out at 2025-06-18) is refused whole, on HTTP with `400`
/// and a JSON-RPC `-32600` that says why, on stdio with `-32600`; neither runs a message of
/// it, and each goes on serving.
#[test]
fn a_json_rpc_batch_is_refused_whole_and_the_server_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    let (_server, url, _) = serve_http(&home, "127.0.0.1:0", &[]);
    let (addr, token) = target(&home, &url);
    let mut session = McpSession::open(addr, &token).unwrap();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t1", "arguments": {"n": 1}}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
    ]);
    let refused = session.post(&batch).unwrap();
    assert_eq!(refused.status, 400);
    let said = refused.messages();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["error"]["code"], -32600, "{said:?}");
    assert!(
        said[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON-RPC batches are not accepted"),
        "{said:?}"
    );
    // The session goes on.
    let listed = session.call("tools/list", json!({})).unwrap();
    assert!(listed["result"]["tools"].is_array(), "{listed}");

    // On stdio: the batch is answered -32600 and nothing of it runs; the next message is
    // answered.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let input = format!(
        "{init}\n{}\n{batch}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    );
    let out = yep_with_stdin(&home, &["mcp", "serve"], &input);
    let answers: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&serde_json::Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(null), &json!(9)], "{answers:?}");
    assert_eq!(answers[1]["error"]["code"], -32600, "{answers:?}");
}
