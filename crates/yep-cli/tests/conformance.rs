//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `scripts/test`, which puts its `conformance` program on `PATH`) against yep: its server
//! scenarios against `yep mcp serve --http` with `examples/conformance` enabled, so each one
//! crosses the whole bridge (MCP client → yep → a YEP server → back). What fails is listed,
//! with the reason, in `conformance/expected-failures.yml`; the suite fails on a listed
//! scenario that passes.

mod common;
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

/// Each scenario's checks as the suite wrote them under `out` (`<mode>-<scenario>-<time>/
/// checks.json`): the scenario, and whether every check passed (SUCCESS or INFO).
fn scenarios(out: &Path) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        let checks: Vec<Value> = match std::fs::read(entry.path().join("checks.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
            Err(_) => continue,
        };
        let name = entry.file_name().to_string_lossy().to_string();
        // `server-tools-call-image-2026-12-02T13-17-45-713Z`: the time is the last six parts.
        let parts: Vec<&str> = name.split('-').collect();
        let scenario = parts[1..parts.len() - 6].join("-");
        let passed = checks
            .iter()
            .all(|c| matches!(c["status"].as_str(), Some("SUCCESS" | "INFO")));
        found.push((scenario, passed));
    }
    found.sort();
    found
}

/// The scenarios `conformance/expected-failures.yml` lists for `mode`.
fn expected_failures(mode: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("conformance/expected-failures.yml")).unwrap();
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
#[allow(clippy::disallowed_methods)] // the suite is the client under which yep runs
fn the_conformance_suites_server_scenarios_pass_through_yep_mcp_serve_or_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = conformance_home(tmp.path());
    let (server, url, warned) =
        common::serve_http(&home, "127.0.0.1:0", &["--insecure-no-token-for-testing"]);
    assert!(warned.starts_with("WARNING: no bearer token"), "{warned}");
    assert!(!home.join("mcp-serve.token").exists());
    let out = tmp.path().join("out");
    let baseline = repo().join("conformance/expected-failures.yml");
    let ran = std::process::Command::new("conformance")
        .args([
            "server",
            "--url",
            &url,
            "--suite",
            "all",
            "--expected-failures",
        ])
        .arg(&baseline)
        .arg("-o")
        .arg(&out)
        .env("HOME", tmp.path())
        .output()
        .unwrap_or_else(|e| {
            panic!("conformance: {e} (`scripts/test` installs it into target/peers)")
        });
    drop(server);
    let said = format!("{}{}", text(&ran.stdout), text(&ran.stderr));
    assert!(ran.status.success(), "{said}");
    let scenarios = scenarios(&out);
    let expected = expected_failures("server");
    let passed: Vec<&String> = scenarios.iter().filter(|s| s.1).map(|s| &s.0).collect();
    let failed: Vec<&String> = scenarios.iter().filter(|s| !s.1).map(|s| &s.0).collect();
    // The suite ran every scenario, and what failed is exactly what is listed.
    assert_eq!(scenarios.len(), 32, "{scenarios:?}");
    assert_eq!(failed, expected.iter().collect::<Vec<_>>(), "{said}");
    eprintln!(
        "conformance, server: {} passed, {} expected failures, 0 skipped",
        passed.len(),
        failed.len()
    );
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
