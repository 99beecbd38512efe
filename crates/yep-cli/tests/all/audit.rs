//! The audit trail through the real binary: tool calls run by a session are recorded with the
//! shape of their arguments and never their values, `--block-secrets` refuses a token and
//! says so in the trail, the egress proxy's refusals and the sandbox's denials are recorded,
//! and `yep audit` reads a damaged or rotated trail without failing.

use crate::common::{ok, text, yep, yep_at, yep_with_stdin};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The echo example as a package in `dir`, served by this build's `yep`.
fn echo_package(dir: &Path) -> PathBuf {
    let pkg = dir.join("echo-pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
    manifest["yolop"]["capabilityServer"] =
        json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

/// A home in `dir` with the echo example installed and enabled.
pub(crate) fn echo_home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    let pkg = echo_package(dir);
    ok(&yep(&home, &["install", pkg.to_str().unwrap(), "--yes"]));
    ok(&yep(&home, &["enable", "echo"]));
    home
}

/// `yep audit --json` (with `extra`): its records, in order.
fn audit(home: &Path, extra: &[&str]) -> Vec<Value> {
    let out = yep(home, &[&["audit", "--json"], extra].concat());
    ok(&out);
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The records of `kind`.
fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

#[test]
fn a_tool_call_is_recorded_with_its_argument_shape_and_never_its_values() {
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    let out = yep_with_stdin(
        &home,
        &["session", "--json"],
        concat!(
            "run echo {\"text\":\"top-secret-value-4711\"}\n",
            "run echo {\"text\":\"hidden-too\",\"forbidden\":true}\n",
            "call echo {\"text\":\"plain-call-value\"}\n",
            "quit\n"
        ),
    );
    ok(&out);
    let records = audit(&home, &[]);
    let tools = of_kind(&records, "tool");
    assert_eq!(tools.len(), 3, "{records:#?}");
    let first = tools[0];
    assert_eq!(
        (&first["extension"], &first["tool"]),
        (&json!("echo"), &json!("echo"))
    );
    assert_eq!(first["args"], json!({"text": "string"}));
    assert_eq!(
        (&first["decision"], &first["outcome"]),
        (&json!("allowed"), &json!("ok"))
    );
    assert!(first["duration_us"].as_u64().is_some(), "{first}");
    // The echo example's own pre hook blocks `forbidden`: the trail names it.
    let blocked = tools[1];
    assert_eq!(
        blocked["args"],
        json!({"text": "string", "forbidden": "boolean"})
    );
    assert_eq!(
        (&blocked["decision"], &blocked["by"], &blocked["outcome"]),
        (&json!("blocked"), &json!(["echo"]), &json!("blocked"))
    );
    let file = std::fs::read_to_string(home.join("audit.jsonl")).unwrap();
    for value in ["top-secret-value-4711", "hidden-too", "plain-call-value"] {
        assert!(!file.contains(value), "{value} leaked: {file}");
    }
    // The table says the same, and no value either.
    let table = yep(&home, &["audit", "--kind", "tool"]);
    ok(&table);
    let shown = text(&table.stdout);
    assert!(
        shown.contains(r#"echo {"text":"string"} allowed → ok"#),
        "{shown}"
    );
    assert!(shown.contains("blocked → blocked by echo"), "{shown}");
    assert!(!shown.contains("top-secret"), "{shown}");
}

#[test]
fn block_secrets_refuses_a_github_token_and_the_trail_says_which_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    let token = format!("ghp_{}", "aB3d".repeat(9));
    let line = format!("run echo {}\nquit\n", json!({ "text": token }));
    let out = yep_with_stdin(&home, &["session", "--json", "--block-secrets"], &line);
    ok(&out);
    let said = text(&out.stdout);
    assert!(
        said.contains("blocked: the arguments carry what looks like a GitHub token (ghp_…); yep --block-secrets refuses to pass credentials to tools"),
        "{said}{}",
        text(&out.stderr)
    );
    assert!(!said.contains(&token), "{said}");
    // Without the flag (or the setting) the same call runs.
    let out = yep_with_stdin(&home, &["session", "--json"], &line);
    assert!(
        text(&out.stdout).contains(r#""echoed""#),
        "{}",
        text(&out.stdout)
    );
    // `yep call` refuses it too, before its server starts.
    let pkg = echo_package(tmp.path());
    let args = json!({ "text": token }).to_string();
    let call = yep(
        &home,
        &[
            "call",
            pkg.to_str().unwrap(),
            "echo",
            &args,
            "--block-secrets",
        ],
    );
    assert_eq!(call.status.code(), Some(1), "{}", text(&call.stderr));
    assert!(text(&call.stderr).contains("GitHub token (ghp_…)"));
    let records = audit(&home, &["--kind", "tool"]);
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["decision"] == "blocked")
        .collect();
    assert_eq!(refused.len(), 2, "{records:#?}");
    for r in refused {
        assert_eq!(
            r["secret"],
            json!({"shape": "github_token", "in": "arguments"})
        );
        assert_eq!(r["outcome"], "blocked");
    }
    let file = std::fs::read_to_string(home.join("audit.jsonl")).unwrap();
    assert!(!file.contains(&token), "the token reached the trail");
}

#[test]
fn the_setting_turns_the_scan_on_and_the_trail_off() {
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    let settings = home.join("settings.toml");
    let mut text_of = std::fs::read_to_string(&settings).unwrap();
    text_of.push_str("\n[audit]\nenabled = false\nblock_secrets = true\n");
    std::fs::write(&settings, text_of).unwrap();
    let line = format!(
        "run echo {}\nquit\n",
        json!({ "text": "AKIAIOSFODNN7EXAMPLE" })
    );
    let out = yep_with_stdin(&home, &["session", "--json"], &line);
    assert!(
        text(&out.stdout).contains("an AWS access key id (AKIA…)"),
        "{}",
        text(&out.stdout)
    );
    assert!(!home.join("audit.jsonl").exists(), "the trail is off");
    let read = yep(&home, &["audit"]);
    assert_eq!(read.status.code(), Some(1));
    assert!(
        text(&read.stderr).contains("no audit trail at")
            && text(&read.stderr).contains("[audit] enabled = false"),
        "{}",
        text(&read.stderr)
    );
}

#[test]
fn the_reader_skips_garbage_and_a_cut_last_line_and_reads_rotated_files_oldest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // A new home: nothing to show, and no error.
    let nothing = yep(&home, &["audit"]);
    assert_eq!(nothing.status.code(), Some(0));
    assert!(text(&nothing.stdout).is_empty());
    assert!(text(&nothing.stderr).contains("no audit records yet"));
    let record = |ts: &str, ext: &str| {
        json!({"ts": ts, "kind": "sandbox_denied", "extension": ext,
            "target": "x.test:443", "grant": "net:x.test"})
        .to_string()
    };
    std::fs::write(
        home.join("audit.jsonl.2"),
        format!("{}\n", record("2020-01-01T00:00:00.000Z", "oldest")),
    )
    .unwrap();
    std::fs::write(
        home.join("audit.jsonl.1"),
        format!(
            "{}\nnot json at all\n\u{1b}[2J\n",
            record("2020-01-02T00:00:00.000Z", "older")
        ),
    )
    .unwrap();
    std::fs::write(
        home.join("audit.jsonl"),
        format!(
            "{}\n{{\"ts\":\"2020-01-03T00:00:00.000Z\",\"kind\":\"to",
            record("2099-01-03T00:00:00.000Z", "new\u{1b}]0;pwned\u{7}")
        ),
    )
    .unwrap();
    let out = yep(&home, &["audit", "--json"]);
    ok(&out);
    let names: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["extension"].to_string())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].contains("oldest") && names[1].contains("older"));
    assert!(
        text(&out.stderr).contains("skipped 3 lines"),
        "{}",
        text(&out.stderr)
    );
    // Filters: the last one, by extension, by time.
    assert_eq!(audit(&home, &["--limit", "1"]).len(), 1);
    assert_eq!(audit(&home, &["--extension", "older"]).len(), 1);
    assert_eq!(audit(&home, &["--since", "1h"]).len(), 1);
    assert_eq!(audit(&home, &["--since", "2020-01-02T00:00:00Z"]).len(), 2);
    assert_eq!(audit(&home, &["--kind", "egress"]).len(), 0);
    let bad = yep(&home, &["audit", "--since", "yesterday-ish"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    // The table escapes what a record says before a terminal sees it.
    let table = yep(&home, &["audit"]);
    ok(&table);
    let shown = text(&table.stdout);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("refused x.test:443 (grant: net:x.test)"),
        "{shown}"
    );
}

/// The hostile fixture (`tests/fixtures/hostile/sandbox-escape`) copied to `dir` with `grants`.
fn granted_escape(dir: &Path, grants: Value) -> PathBuf {
    let from =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/sandbox-escape");
    let pkg = dir.join("granted");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    for file in ["server.py", "bin/server"] {
        std::fs::copy(from.join(file), pkg.join(file)).unwrap();
    }
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("plugin.json")).unwrap()).unwrap();
    manifest["sandbox"] = grants;
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

/// `yep args` in workspace `ws` and home `home`, under the required sandbox, `other.test`
/// mapped to loopback for the egress proxy.
fn contained(ws: &Path, home: &Path, args: &[&str], stdin: &str) -> Output {
    yep_at(
        Some(ws),
        home,
        args,
        stdin,
        &[
            ("YEP_SANDBOX", "required"),
            (
                "YEP_EGRESS_HOSTS",
                "granted.test=127.0.0.1,other.test=127.0.0.1",
            ),
        ],
    )
}

#[test]
fn an_egress_refusal_and_the_sandbox_denial_it_raises_are_in_the_trail() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, ws) = (tmp.path().join("home"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let port = 9;
    let pkg = granted_escape(tmp.path(), json!({"net": [format!("granted.test:{port}")]}));
    ok(&contained(
        &ws,
        &home,
        &["install", pkg.to_str().unwrap(), "--yes"],
        "",
    ));
    ok(&contained(&ws, &home, &["enable", "sandbox-escape"], ""));
    let targets =
        json!({ "url_refused": format!("http://other.test:{port}/secret?token=hunter2") });
    let out = contained(
        &ws,
        &home,
        &["session", "--json"],
        &format!("call attempt {}\nquit\n", json!({ "targets": targets })),
    );
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!("net:other.test:{port}")),
        "{said}{}",
        text(&out.stderr)
    );
    let records = audit(&home, &[]);
    let egress = of_kind(&records, "egress");
    assert!(
        egress.iter().any(|e| e["extension"] == "sandbox-escape"
            && e["host"] == "other.test"
            && e["port"] == port
            && e["allowed"] == false
            && e["rule"] == format!("net:other.test:{port}")),
        "{records:#?}"
    );
    let denied = of_kind(&records, "sandbox_denied");
    assert!(
        denied.iter().any(|d| d["extension"] == "sandbox-escape"
            && d["target"] == format!("other.test:{port}")
            && d["grant"] == format!("net:other.test:{port}")),
        "{records:#?}"
    );
    let file = std::fs::read_to_string(home.join("audit.jsonl")).unwrap();
    assert!(!file.contains("hunter2"), "{file}");
    // The call itself is there, with the shape of its nested arguments.
    let tools = of_kind(&records, "tool");
    assert_eq!(
        tools[0]["args"],
        json!({"targets": {"url_refused": "string"}}),
        "{records:#?}"
    );
}

#[test]
fn yep_mcp_serve_block_secrets_refuses_a_token_to_an_mcp_client_and_records_it() {
    use std::io::{BufRead, BufReader, Write};
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    let token = format!("ghp_{}", "Zx9".repeat(12));
    let mut child = crate::common::Sealed::get()
        .command(env!("CARGO_BIN_EXE_yep"), &home)
        .args(["mcp", "serve", "--block-secrets"])
        .current_dir(tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": token}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = loop {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if line["id"] == 2 {
            break line;
        }
    };
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let said = answer.to_string();
    assert_eq!(answer["result"]["isError"], true, "{said}");
    assert!(
        said.contains("blocked: the arguments carry what looks like a GitHub token (ghp_…)"),
        "{said}"
    );
    assert!(!said.contains(&token), "{said}");
    let records = audit(&home, &["--kind", "tool"]);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["decision"], "blocked");
    assert_eq!(records[0]["secret"]["shape"], "github_token");
}

/// The records of `kind` once `n` of them are there: the shared host writes its trail on a
/// thread of its own, a moment after it answers.
fn wait_for(home: &Path, kind: &str, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let records = match home.join("audit.jsonl").exists() {
            true => audit(home, &["--kind", kind]),
            false => Vec::new(),
        };
        if records.len() >= n || std::time::Instant::now() > deadline {
            return records;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn an_agents_own_tool_calls_through_yep_hook_are_recorded_with_the_hooks_decision() {
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    let ws = tmp.path().join("project");
    std::fs::create_dir_all(&ws).unwrap();
    let event = |name: &str, input: Value| {
        json!({"session_id": "s", "cwd": ws, "hook_event_name": name, "tool_name": "Bash",
            "tool_input": input, "tool_use_id": "toolu_1", "tool_response": {"stdout": "out-4711"}})
        .to_string()
    };
    let hook = |input: String| yep_at(Some(&ws), &home, &["hook", "claude"], &input, &[]);
    let blocked = hook(event(
        "PreToolUse",
        json!({"command": "cat /very/private/path", "forbidden": true}),
    ));
    assert!(
        text(&blocked.stdout).contains("deny"),
        "{}",
        text(&blocked.stdout)
    );
    ok(&hook(event(
        "PreToolUse",
        json!({"command": "ls -la /another/private"}),
    )));
    ok(&hook(event(
        "PostToolUse",
        json!({"command": "ls -la /another/private"}),
    )));
    let records = wait_for(&home, "agent_tool", 3);
    let _ = yep(&home, &["host", "stop"]);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert_eq!(
        (
            &records[0]["tool"],
            &records[0]["phase"],
            &records[0]["decision"]
        ),
        (&json!("bash"), &json!("pre"), &json!("blocked"))
    );
    assert_eq!(
        (&records[0]["extension"], &records[0]["by"]),
        (&json!("echo"), &json!(["echo"]))
    );
    assert_eq!(
        records[0]["args"],
        json!({"command": "string", "forbidden": "boolean"})
    );
    assert_eq!(records[1]["decision"], "allowed");
    assert_eq!(
        (&records[2]["phase"], &records[2]["outcome"]),
        (&json!("post"), &json!("ok"))
    );
    let file = std::fs::read_to_string(home.join("audit.jsonl")).unwrap();
    for value in ["/very/private/path", "/another/private", "out-4711"] {
        assert!(!file.contains(value), "{value} leaked: {file}");
    }
}

#[test]
fn block_secrets_withholds_a_result_that_carries_a_private_key() {
    let tmp = tempfile::tempdir().unwrap();
    let home = echo_home(tmp.path());
    // The echo example's `ask` answers with what the user said: here, a key's first line.
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjE";
    let out = yep_with_stdin(
        &home,
        &[
            "session",
            "--json",
            "--block-secrets",
            &format!("--answer={key}"),
        ],
        "run ask {\"prompt\":\"paste it\"}\nquit\n",
    );
    ok(&out);
    let said = text(&out.stdout);
    assert!(
        said.contains("blocked: the result carries what looks like a PEM private key"),
        "{said}"
    );
    assert!(!said.contains("b3BlbnNzaC1rZXktdjE"), "{said}");
    let records = audit(&home, &["--kind", "tool"]);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(
        (&records[0]["decision"], &records[0]["outcome"]),
        (&json!("allowed"), &json!("blocked"))
    );
    assert_eq!(
        records[0]["secret"],
        json!({"shape": "private_key", "in": "result"})
    );
}
