//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `scripts/test`, which puts its `conformance` program on `PATH`) against yep: its server
//! scenarios against `yep mcp serve --http` with `examples/conformance` enabled, so each one
//! crosses the whole bridge (MCP client → yep → a YEP server → back). What fails is listed,
//! with the reason, in `conformance/expected-failures.yml`; the suite fails on a listed
//! scenario that passes. Its client scenarios run `yep-conformance-client` (examples/conformance),
//! which connects, approves, calls and answers questions through yep-host's MCP dialect.
//!
//! Two pinned releases run: 0.1.13 (the scenarios of revisions 2025-06-18 and 2025-11-25, on
//! the machine's Node 20) and 0.2.0-alpha.12 for what revision 2026-07-28 requires (on a
//! pinned Node 22: the 0.2 line needs `fs.globSync`), each with its expected failures.

use crate::common;
use common::{ok, text, yep_with_stdin};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A home with `examples/conformance` installed and enabled.
fn conformance_home(tmp: &Path) -> PathBuf {
    let home = tmp.join("home");
    let src = tmp.join("src/conformance");
    std::fs::create_dir_all(&src).unwrap();
    let mut manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/conformance/plugin.json")).unwrap(),
    )
    .unwrap();
    let server = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-example-conformance");
    assert!(
        server.is_file(),
        "{} is missing: run scripts/test",
        server.display()
    );
    manifest["yolop"]["capabilityServer"]["command"] = json!(server);
    std::fs::write(src.join("plugin.json"), manifest.to_string()).unwrap();
    ok(&yep_with_stdin(
        &home,
        &["install", src.to_str().unwrap(), "--yes"],
        "",
    ));
    ok(&yep_with_stdin(&home, &["enable", "conformance"], ""));
    home
}

/// Each scenario's checks as the suite wrote them under `out` (`server-<scenario>-<time>/`,
/// `<scenario>-<time>/` or `auth/<scenario>-<time>/`, each with a `checks.json`): the scenario,
/// and whether every check passed (SUCCESS or INFO).
fn scenarios(out: &Path) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let dirs = std::fs::read_dir(out).unwrap().flatten().chain(
        std::fs::read_dir(out.join("auth"))
            .into_iter()
            .flatten()
            .flatten(),
    );
    for entry in dirs {
        let checks: Vec<Value> = match std::fs::read(entry.path().join("checks.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
            Err(_) => continue,
        };
        let name = entry.file_name().to_string_lossy().to_string();
        // `tools-call-image-2026-12-02T13-17-45-713Z`: the time is the last six parts.
        let parts: Vec<&str> = name.split('-').collect();
        let scenario = parts[..parts.len() - 6].join("-");
        let scenario = match entry.path().parent() == Some(&out.join("auth")) {
            true => format!("auth/{scenario}"),
            false => scenario
                .strip_prefix("server-")
                .unwrap_or(&scenario)
                .to_string(),
        };
        // As the suite counts with a baseline: a warning fails the scenario too.
        let passed = !checks
            .iter()
            .any(|c| matches!(c["status"].as_str(), Some("FAILURE" | "WARNING")));
        found.push((scenario, passed));
    }
    found.sort();
    found
}

/// Which of the suite's pinned releases: 0.1.13 on the machine's Node, which has the
/// scenarios of revisions 2025-06-18 and 2025-11-25, or 0.2.0-alpha.12 on the pinned Node 22,
/// run for what revision 2026-07-28 requires.
#[derive(Clone, Copy, PartialEq)]
enum Suite {
    Y2025,
    Y2026,
}

impl Suite {
    fn baseline(self) -> PathBuf {
        repo().join(match self {
            Suite::Y2025 => "conformance/expected-failures.yml",
            Suite::Y2026 => "conformance/expected-failures-2026-07-28.yml",
        })
    }

    /// Its `conformance` program, with the Node it runs on first on `PATH`.
    #[allow(clippy::disallowed_methods)] // the suite is the peer under which yep runs
    fn command(self) -> std::process::Command {
        match self {
            Suite::Y2025 => std::process::Command::new("conformance"),
            Suite::Y2026 => {
                let bin = std::env::var_os("YEP_NODE22_BIN")
                    .map(PathBuf::from)
                    .expect("run through scripts/test, which installs Node 22 and the 0.2 suite");
                let mut command = std::process::Command::new(bin.join("conformance"));
                let path = std::env::var_os("PATH").unwrap_or_default();
                let mut dirs = vec![bin];
                dirs.extend(std::env::split_paths(&path));
                command.env("PATH", std::env::join_paths(dirs).unwrap());
                command
            }
        }
    }
}

/// The scenarios `suite`'s expected failures list for `mode`.
fn expected_failures(suite: Suite, mode: &str) -> Vec<String> {
    let text = std::fs::read_to_string(suite.baseline()).unwrap();
    let mut listed = Vec::new();
    let mut in_mode = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('#') && line.ends_with(':') {
            in_mode = line.trim_end_matches(':') == mode;
        } else if in_mode && let Some(name) = line.trim().strip_prefix("- ") {
            listed.push(name.to_string());
        }
    }
    listed.sort();
    listed
}

#[test]
fn the_conformance_suites_server_scenarios_pass_through_yep_mcp_serve_or_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = conformance_home(tmp.path());
    let (server, url, warned) =
        common::serve_http(&home, "127.0.0.1:0", &["--insecure-no-token-for-testing"]);
    assert!(warned.starts_with("WARNING: no bearer token"), "{warned}");
    assert!(!home.join("mcp-serve.token").exists());
    let said = run_suite(Suite::Y2025, &["server", "--url", &url], tmp.path());
    drop(server);
    check_counts(
        Suite::Y2025,
        "server",
        Some(32),
        &tmp.path().join("out"),
        &said,
    );
}

#[test]
fn what_revision_2026_07_28_requires_of_a_server_passes_through_yep_mcp_serve_or_is_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = conformance_home(tmp.path());
    let (server, url, _) =
        common::serve_http(&home, "127.0.0.1:0", &["--insecure-no-token-for-testing"]);
    let args = ["server", "--url", &url, "--requirements", "2026-07-28"];
    let (passed, said) = conformance(Suite::Y2026, &args, &tmp.path().join("out"), tmp.path());
    drop(server);
    assert!(passed, "{said}");
    check_counts(Suite::Y2026, "server", None, &tmp.path().join("out"), &said);
}

#[test]
fn what_revision_2026_07_28_requires_of_a_client_passes_through_yep_hosts_mcp_dialect_or_is_listed()
{
    let tmp = tempfile::tempdir().unwrap();
    let client = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-conformance-client");
    let args = [
        "client",
        "--command",
        client.to_str().unwrap(),
        "--requirements",
        "2026-07-28",
    ];
    let (passed, said) = conformance(Suite::Y2026, &args, &tmp.path().join("out"), tmp.path());
    assert!(passed, "{said}");
    check_counts(Suite::Y2026, "client", None, &tmp.path().join("out"), &said);
}

/// `suite`'s `conformance <args>` with its expected failures, its results under `out`:
/// whether it passed, and what it said.
fn conformance(suite: Suite, args: &[&str], out: &Path, home: &Path) -> (bool, String) {
    let ran = suite
        .command()
        .args(args)
        .arg("--expected-failures")
        .arg(suite.baseline())
        .arg("-o")
        .arg(out)
        .env("HOME", home)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap_or_else(|e| {
            panic!("conformance: {e} (`scripts/test` installs it into target/peers)")
        });
    let said = format!("{}{}", text(&ran.stdout), text(&ran.stderr));
    (ran.status.success(), said)
}

/// `conformance <args> --suite all`, its results under `<tmp>/out`: what it said; it must
/// pass.
fn run_suite(suite: Suite, args: &[&str], tmp: &Path) -> String {
    let mut args = args.to_vec();
    args.extend(["--suite", "all"]);
    let (passed, said) = conformance(suite, &args, &tmp.join("out"), tmp);
    assert!(passed, "{said}");
    said
}

/// The suite ran `total` scenarios of `mode` into `out` (when given; the 0.2 suite's count for
/// a revision is its own), and what failed is exactly what the expected failures list.
fn check_counts(suite: Suite, mode: &str, total: Option<usize>, out: &Path, said: &str) {
    let scenarios = scenarios(out);
    let passed: Vec<&String> = scenarios.iter().filter(|s| s.1).map(|s| &s.0).collect();
    let failed: Vec<&String> = scenarios.iter().filter(|s| !s.1).map(|s| &s.0).collect();
    if let Some(total) = total {
        assert_eq!(scenarios.len(), total, "{scenarios:?}");
    }
    assert!(!passed.is_empty(), "{said}");
    let expected = expected_failures(suite, mode);
    assert_eq!(failed, expected.iter().collect::<Vec<_>>(), "{said}");
    eprintln!(
        "conformance, {mode}: {} passed, {} expected failures, 0 skipped",
        passed.len(),
        failed.len()
    );
}

#[test]
#[allow(clippy::disallowed_methods)] // the suite lists its scenarios
fn the_conformance_suites_client_scenarios_pass_through_yep_hosts_mcp_dialect_or_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let client = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-conformance-client");
    assert!(
        client.is_file(),
        "{} is missing: run scripts/test",
        client.display()
    );
    let listed = std::process::Command::new("conformance")
        .args(["list", "--client"])
        .output()
        .unwrap_or_else(|e| {
            panic!("conformance: {e} (`scripts/test` installs it into target/peers)")
        });
    let scenarios: Vec<String> = text(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("  - ").map(String::from))
        .collect();
    // One at a time: run all at once (`--suite all` runs them in parallel), the clients of two
    // cores starve each other and `sse-retry`'s reconnect, which it times, comes late.
    let out = tmp.path().join("out");
    let mut said = String::new();
    for scenario in &scenarios {
        // `sse-retry` times the reconnect against the server's `retry` (450-700 ms): on a
        // loaded machine one late try is not a failure of the client; three are.
        let tries = if scenario == "sse-retry" { 3 } else { 1 };
        let attempt = tmp.path().join("attempt");
        let (mut passed, mut last) = (false, String::new());
        for _ in 0..tries {
            let _ = std::fs::remove_dir_all(&attempt);
            let args = [
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
            ];
            (passed, last) = conformance(Suite::Y2025, &args, &attempt, tmp.path());
            if passed {
                break;
            }
        }
        // A failure not listed, or a listed one that passed (stale), fails the run.
        assert!(passed, "{scenario}: {last}");
        // Its results join the others'.
        for dir in ["", "auth"] {
            let from = attempt.join(dir);
            let Ok(entries) = std::fs::read_dir(&from) else {
                continue;
            };
            std::fs::create_dir_all(out.join(dir)).unwrap();
            for entry in entries
                .flatten()
                .filter(|e| e.path().join("checks.json").is_file())
            {
                std::fs::rename(entry.path(), out.join(dir).join(entry.file_name())).unwrap();
            }
        }
        said.push_str(&last);
    }
    check_counts(Suite::Y2025, "client", Some(23), &out, &said);
}

#[test]
fn serving_without_a_token_is_refused_off_loopback_and_beside_allow_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let open = yep_with_stdin(
        &home,
        &[
            "mcp",
            "serve",
            "--http",
            "0.0.0.0:0",
            "--insecure-no-token-for-testing",
        ],
        "",
    );
    assert_eq!(open.status.code(), Some(1));
    let said = text(&open.stderr);
    assert!(
        said.contains("refusing to serve on 0.0.0.0:0 without a token"),
        "{said}"
    );
    let remote = yep_with_stdin(
        &home,
        &[
            "mcp",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--insecure-no-token-for-testing",
            "--allow-remote",
        ],
        "",
    );
    assert_eq!(remote.status.code(), Some(2), "{}", text(&remote.stderr));
    // Without `--http` there is nothing to serve without a token.
    let stdio = yep_with_stdin(
        &home,
        &["mcp", "serve", "--insecure-no-token-for-testing"],
        "",
    );
    assert_eq!(stdio.status.code(), Some(2), "{}", text(&stdio.stderr));
}
