//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `scripts/test`, which puts its `conformance` program on `PATH`) against yep: its server
//! scenarios against `yep mcp serve --http` with `examples/conformance` enabled, so each one
//! crosses the whole bridge (MCP client → yep → a YEP server → back). What fails is listed,
//! with the reason, in `conformance/expected-failures.yml`; the suite fails on a listed
//! scenario that passes. Its client scenarios run `yep-conformance-client` (examples/conformance),
//! which connects, approves, calls and answers questions through yep-host's MCP dialect.
//!
//! Two pinned releases run, both on a pinned Node 22 (the suite needs `fs.globSync`): 0.1.16,
//! at each of the revisions it has (2025-06-18 and 2025-11-25), and 0.2.0-alpha.12 for what
//! revision 2026-07-28 requires and for the extensions' scenarios (skills, SEP-2640), each with
//! its expected failures.

use crate::common;
use common::{ok, text, yep_with_stdin};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A home with `examples/conformance` (its server and its skills) installed and enabled.
fn conformance_home(tmp: &Path) -> PathBuf {
    let home = tmp.join("home");
    let src = tmp.join("src/conformance");
    std::fs::create_dir_all(&src).unwrap();
    let example = repo().join("examples/conformance");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(example.join("plugin.json")).unwrap())
            .unwrap();
    let server = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-example-conformance");
    assert!(
        server.is_file(),
        "{} is missing: run scripts/test",
        server.display()
    );
    manifest["yolop"]["capabilityServer"]["command"] = json!(server);
    std::fs::write(src.join("plugin.json"), manifest.to_string()).unwrap();
    common::copy_tree(&example.join("skills"), &src.join("skills"));
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

/// Which of the suite's pinned releases: 0.1.16, which has the scenarios of revisions
/// 2025-06-18 and 2025-11-25, or 0.2.0-alpha.12, run for what revision 2026-07-28 requires and
/// for the extensions' scenarios. Both run on the pinned Node 22.
#[derive(Clone, Copy, PartialEq)]
enum Suite {
    Y2025,
    Y2026,
}

/// The revisions the 0.1 suite has scenarios of.
const REVISIONS_2025: [&str; 2] = ["2025-06-18", "2025-11-25"];

impl Suite {
    fn baseline(self) -> PathBuf {
        repo().join(match self {
            Suite::Y2025 => "conformance/expected-failures.yml",
            Suite::Y2026 => "conformance/expected-failures-2026-07-28.yml",
        })
    }

    /// Its `conformance` program, with Node 22 first on `PATH`.
    #[allow(clippy::disallowed_methods)] // the suite is the peer under which yep runs
    fn command(self) -> std::process::Command {
        let dir = |var: &str| {
            std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
                panic!("{var} is unset: run through scripts/test, which installs Node 22 and the suites")
            })
        };
        let node22 = dir("YEP_NODE22_BIN");
        let program = match self {
            Suite::Y2025 => dir("YEP_CONFORMANCE_BIN").join("conformance"),
            Suite::Y2026 => node22.join("conformance"),
        };
        let mut command = std::process::Command::new(program);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![node22];
        dirs.extend(std::env::split_paths(&path));
        command.env("PATH", std::env::join_paths(dirs).unwrap());
        command
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
            // `scenario` or `scenario:check`: a scenario with a check listed fails, and the
            // suite holds its other checks to passing.
            let scenario = name.split_once(':').map_or(name, |(s, _)| s);
            listed.push(scenario.to_string());
        }
    }
    listed.sort();
    listed.dedup();
    listed
}

#[test]
fn the_conformance_suites_server_scenarios_pass_through_yep_mcp_serve_at_each_revision_or_are_listed()
 {
    let tmp = tempfile::tempdir().unwrap();
    let home = conformance_home(tmp.path());
    let (server, url, warned) =
        common::serve_http(&home, "127.0.0.1:0", &["--insecure-no-token-for-testing"]);
    assert!(warned.starts_with("WARNING: no bearer token"), "{warned}");
    assert!(!home.join("mcp-serve.token").exists());
    for (revision, total) in REVISIONS_2025.into_iter().zip([26, 32]) {
        let out = tmp.path().join(format!("out-{revision}"));
        let args = ["server", "--url", &url, "--spec-version", revision];
        let said = run_suite(Suite::Y2025, &args, &out, tmp.path());
        check_counts(Suite::Y2025, "server", Some(total), &out, &said);
    }
    drop(server);
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
    // The per-request log level: a status reaches no client that did not ask for logs.
    assert_eq!(
        check_status(
            &tmp.path().join("out"),
            "server-stateless",
            "sep-2575-server-no-log-without-loglevel"
        ),
        "SUCCESS"
    );
}

/// The status of check `id` of `scenario` as the suite wrote it under `out`.
fn check_status(out: &Path, scenario: &str, id: &str) -> String {
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with(&format!("server-{scenario}-")) {
            continue;
        }
        let checks: Vec<Value> =
            serde_json::from_slice(&std::fs::read(entry.path().join("checks.json")).unwrap())
                .unwrap();
        if let Some(check) = checks.iter().find(|c| c["id"] == id) {
            return check["status"].as_str().unwrap_or_default().to_string();
        }
    }
    panic!("no check {id} of {scenario} under {}", out.display())
}

/// The scenarios of the 0.2 suite that must pass whole, not in any expected-failures list: the
/// skills extension's (SEP-2640; the suite's "pending" ones, run by name) and DNS rebinding.
const MUST_PASS: [&str; 4] = [
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
    "dns-rebinding-protection",
];

#[test]
fn the_skills_and_dns_rebinding_scenarios_pass_through_yep_mcp_serve_at_2026_07_28_and_2025_11_25()
{
    let tmp = tempfile::tempdir().unwrap();
    let home = conformance_home(tmp.path());
    let (server, url, _) =
        common::serve_http(&home, "127.0.0.1:0", &["--insecure-no-token-for-testing"]);
    for scenario in MUST_PASS {
        // At 2026-07-28, and on the older wire (`--force`: an extension's scenarios run at
        // the newest revision unless forced).
        for revision in [None, Some("2025-11-25")] {
            let out = tmp
                .path()
                .join(format!("{scenario}-{}", revision.unwrap_or("2026-07-28")));
            let mut args = vec!["server", "--url", &url, "--scenario", scenario];
            if let Some(revision) = revision {
                args.extend(["--spec-version", revision, "--force"]);
            }
            let (passed, said) = conformance(Suite::Y2026, &args, &out, tmp.path());
            assert!(passed, "{scenario} at {revision:?}: {said}");
            assert_eq!(
                scenarios(&out),
                [(scenario.to_string(), true)],
                "{scenario} at {revision:?}: {said}"
            );
        }
    }
    drop(server);
    for scenario in MUST_PASS {
        assert!(
            !expected_failures(Suite::Y2026, "server").contains(&scenario.to_string()),
            "{scenario} is listed as failing"
        );
    }
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

/// `conformance <args> --suite all`, its results under `out`: what it said; it must pass.
fn run_suite(suite: Suite, args: &[&str], out: &Path, tmp: &Path) -> String {
    let mut args = args.to_vec();
    args.extend(["--suite", "all"]);
    let (passed, said) = conformance(suite, &args, out, tmp);
    assert!(passed, "{said}");
    said
}

/// The suite ran `total` scenarios of `mode` into `out` (when given; the 0.2 suite's count for
/// a revision is its own), and what failed is exactly what the expected failures list.
fn check_counts(suite: Suite, mode: &str, total: Option<usize>, out: &Path, said: &str) {
    let scenarios = scenarios(out);
    let passed: Vec<&String> = scenarios.iter().filter(|s| s.1).map(|s| &s.0).collect();
    let mut failed: Vec<&String> = scenarios.iter().filter(|s| !s.1).map(|s| &s.0).collect();
    // A scenario run at two revisions is one name.
    failed.dedup();
    if let Some(total) = total {
        assert_eq!(scenarios.len(), total, "{scenarios:?}");
    }
    assert!(!passed.is_empty(), "{said}");
    // What the list names that ran (a run at one revision has not every scenario).
    let ran: Vec<&String> = scenarios.iter().map(|s| &s.0).collect();
    let expected: Vec<String> = expected_failures(suite, mode)
        .into_iter()
        .filter(|e| ran.contains(&e))
        .collect();
    assert_eq!(failed, expected.iter().collect::<Vec<_>>(), "{said}");
    eprintln!(
        "conformance, {mode}: {} passed, {} expected failures, 0 skipped",
        passed.len(),
        failed.len()
    );
}

/// The client scenarios `conformance list` names, at `revision` (cumulative), or all.
fn client_scenarios(revision: Option<&str>) -> Vec<String> {
    let mut args = vec!["list", "--client"];
    args.extend(
        revision
            .map(|r| ["--spec-version", r])
            .into_iter()
            .flatten(),
    );
    let listed = Suite::Y2025
        .command()
        .args(&args)
        .output()
        .unwrap_or_else(|e| {
            panic!("conformance: {e} (`scripts/test` installs it into target/peers)")
        });
    // `  - initialize [2025-06-18,2025-11-25]`: the name, without its revisions.
    text(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .map(|l| l.split(" [").next().unwrap_or(l).to_string())
        .collect()
}

#[test]
fn the_conformance_suites_client_scenarios_pass_through_yep_hosts_mcp_dialect_at_each_revision_or_are_listed()
 {
    let tmp = tempfile::tempdir().unwrap();
    let client = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-conformance-client");
    assert!(
        client.is_file(),
        "{} is missing: run scripts/test",
        client.display()
    );
    // Each scenario at each revision that has it; the rest (drafts, extensions, an older
    // revision's) once, as the suite runs them.
    let mut runs: Vec<(String, Option<&str>)> = Vec::new();
    for revision in REVISIONS_2025 {
        runs.extend(
            client_scenarios(Some(revision))
                .into_iter()
                .map(|s| (s, Some(revision))),
        );
    }
    let dated = client_scenarios(Some(REVISIONS_2025[1]));
    runs.extend(
        client_scenarios(None)
            .into_iter()
            .filter(|s| !dated.contains(s))
            .map(|s| (s, None)),
    );
    // One at a time: run all at once (`--suite all` runs them in parallel), the clients of two
    // cores starve each other and `sse-retry`'s reconnect, which it times, comes late.
    let out = tmp.path().join("out");
    let mut said = String::new();
    for (scenario, revision) in &runs {
        // `sse-retry` times the reconnect against the server's `retry` (450-700 ms): on a
        // loaded machine one late try is not a failure of the client; three are.
        let tries = if scenario == "sse-retry" { 3 } else { 1 };
        let attempt = tmp.path().join("attempt");
        let (mut passed, mut last) = (false, String::new());
        for _ in 0..tries {
            let _ = std::fs::remove_dir_all(&attempt);
            let mut args = vec![
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
            ];
            args.extend(
                revision
                    .map(|r| ["--spec-version", r])
                    .into_iter()
                    .flatten(),
            );
            (passed, last) = conformance(Suite::Y2025, &args, &attempt, tmp.path());
            if passed {
                break;
            }
        }
        // A failure not listed, or a listed one that passed (stale), fails the run.
        assert!(passed, "{scenario} at {revision:?}: {last}");
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
                // Named for its scenario and the millisecond it ran: a run at another
                // revision is another name.
                std::fs::rename(entry.path(), out.join(dir).join(entry.file_name())).unwrap();
            }
        }
        said.push_str(&last);
    }
    check_counts(Suite::Y2025, "client", Some(runs.len()), &out, &said);
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
