//! The soak test of `yep mcp serve --http`, alone in its binary so nothing else loads the
//! machine: 2,000 idle connections, slowloris headers and 5,000 session opens at once, under
//! the usual open-file limit of 1024, while a well-behaved client keeps calling a tool. The
//! server stays up, the client's p99 stays under 50 ms, and the server's memory stays
//! bounded.

use crate::common;

use common::http::McpSession;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
#[allow(clippy::disallowed_methods)] // the attacker runs while the client calls
fn the_http_server_serves_a_client_through_connection_slowloris_and_session_floods() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fixture_home(tmp.path());
    let (mut server, url, _) = serve_http_limited(&home, "127.0.0.1:0", &[], Some(1024));
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let token = std::fs::read_to_string(home.join("mcp-serve.token")).unwrap();
    let token = token.trim().to_string();
    let pid = server.0.id();

    // The client, warmed up: the extension is running before the attack.
    let mut client = McpSession::open(addr, &token).unwrap();
    let mut call = |n: u64| -> Duration {
        let started = Instant::now();
        let reply = client
            .call("tools/call", json!({"name": "t1", "arguments": {"n": n}}))
            .unwrap_or_else(|status| panic!("call {n} failed: HTTP {status}"));
        assert_eq!(
            reply["result"]["structuredContent"]["args"]["n"], n,
            "{reply}"
        );
        started.elapsed()
    };
    for n in 0..50 {
        call(n);
    }
    let rss_before = rss_kib(pid);

    let attacker = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/hostile/http-flood/attacker.py"
        ))
        .args([&addr.ip().to_string(), &addr.port().to_string(), &token])
        .args(["2000", "200", "5000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut attacker = Serving(attacker);
    let mut latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut n = 100;
    while attacker.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the attack did not end in time");
        latencies.push(call(n));
        n += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut report = String::new();
    use std::io::Read;
    attacker
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut report)
        .unwrap();
    let counts: Value = serde_json::from_str(report.trim()).unwrap();
    let rss_after = rss_kib(pid);

    assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
    // The attack happened: far more connections than the cap, and every session opened.
    assert!(counts["idle"].as_u64().unwrap() >= 1000, "{counts}");
    assert!(counts["sessions"].as_u64().unwrap() >= 4000, "{counts}");
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    eprintln!(
        "soak: {} calls, p50 {:?}, p99 {p99:?}, max {:?}; rss {rss_before} KiB -> {rss_after} KiB; attack {counts}",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies.last().unwrap()
    );
    assert!(latencies.len() >= 100, "only {} calls", latencies.len());
    assert!(p99 < Duration::from_millis(50), "p99 {p99:?}");
    assert!(
        rss_after < rss_before + 100 * 1024,
        "rss grew from {rss_before} KiB to {rss_after} KiB"
    );
    // And it still serves a new client.
    let mut late = McpSession::open(addr, &token).unwrap();
    let listed = late.call("tools/list", json!({})).unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "t1", "{listed}");
}
