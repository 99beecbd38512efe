//! The `yep` binary run for real, in a sealed temp home.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn yep(home: &Path, args: &[&str]) -> Output {
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    Command::new(env!("CARGO_BIN_EXE_yep"))
        .args(args)
        .env("YEP_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A package whose server is this very `yep` binary serving the echo example.
fn echo_package(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("echo-pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
    manifest["yolop"]["capabilityServer"] =
        json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
    std::fs::write(
        pkg.join("plugin.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    pkg
}

#[test]
fn call_prints_the_result_json_to_stdout() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let out = yep(
        home.path(),
        &["call", pkg.to_str().unwrap(), "echo", r#"{"text":"hi"}"#],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result, json!({"echoed": "hi"}));
    // The server's stderr log lands in the home.
    assert!(home.path().join("logs/echo.log").is_file());
}

#[test]
fn call_refuses_arguments_that_break_the_tool_schema_without_starting_the_server() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let p = pkg.to_str().unwrap();
    for args in [&["call", p, "echo", "{}"][..], &["call", p, "echo"][..]] {
        let out = yep(home.path(), args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            "error: extension `echo`: invalid arguments for tool `echo`: `text` is required\n"
        );
        assert!(out.stdout.is_empty());
    }
    let out = yep(home.path(), &["call", p, "count", r#"{"n":"3"}"#]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(r#"/n: "3" is not of type "integer" (type)"#),
        "{}",
        text(&out.stderr)
    );
    // The server never ran: it would have left its log.
    assert!(!home.path().join("logs/echo.log").exists());
}

#[test]
fn call_streams_progress_to_stderr() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let out = yep(
        home.path(),
        &[
            "call",
            pkg.to_str().unwrap(),
            "count",
            r#"{"n":3,"interval_ms":10}"#,
        ],
    );
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("[progress] 1/3\n[progress] 2/3\n[progress] 3/3"),
        "{stderr}"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"counted": 3})
    );
}

#[test]
fn call_refuses_ui_ask_without_a_terminal_and_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let out = yep(
        home.path(),
        &[
            "call",
            pkg.to_str().unwrap(),
            "ask",
            r#"{"prompt":"name?"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no terminal to answer it"), "{stderr}");
    assert!(
        stderr.contains(
            "error: extension `echo`: `tool/call` failed: the user dismissed the question"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn call_errors_are_clear() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let p = pkg.to_str().unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex_escape(home.path().to_str().unwrap()), "[HOME]");
    settings.bind(|| {
        let undeclared = yep(home.path(), &["call", p, "rm"]);
        assert_eq!(undeclared.status.code(), Some(1));
        insta::assert_snapshot!("undeclared_tool", text(&undeclared.stderr));
        let bad_json = yep(home.path(), &["call", p, "echo", "{nope"]);
        assert_eq!(bad_json.status.code(), Some(1));
        insta::assert_snapshot!("bad_json_args", text(&bad_json.stderr));
        let missing = yep(
            home.path(),
            &[
                "call",
                home.path().join("nowhere").to_str().unwrap(),
                "echo",
            ],
        );
        assert_eq!(missing.status.code(), Some(1));
        insta::assert_snapshot!("missing_manifest", text(&missing.stderr));
    });
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn demo_runs_every_step() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(home.path(), &["demo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut settings = insta::Settings::clone_current();
    // Times in the 8-wide right-aligned column become one 8-wide token, so a step that crosses
    // 10 ms or 100 ms does not change the padding; the rest (`at +12.3 ms`) become `[T]`.
    settings.add_filter(r"\+\d+\.\d ms", "+[T]");
    settings.add_filter(r"(  \d|\ \d\d|\d\d\d+)\.\d ms", "     [T]");
    settings.add_filter(r"\d+\.\d ms", "[T]");
    settings.add_filter(r"pid \d+", "pid [PID]");
    settings.bind(|| insta::assert_snapshot!("demo", stdout));
}

#[test]
fn demo_json_lists_the_steps() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(home.path(), &["demo", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<&str> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "spawn + handshake",
            "tool/call echo",
            "tool/call count",
            "cancel count",
            "hook/fire pre_tool_use",
            "prompt",
            "command/execute ping",
            "ui/ask",
            "shutdown"
        ]
    );
    assert_eq!(doc["steps"][3]["data"]["cancelled"], true);
}

#[test]
fn call_answers_ui_ask_at_a_terminal() {
    // `script` gives the CLI a real pseudo-terminal; the answer is typed into it.
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let inner = format!(
        "YEP_HOME='{}' '{}' call '{}' ask '{{\"prompt\":\"colour?\"}}'",
        home.path().display(),
        env!("CARGO_BIN_EXE_yep"),
        pkg.display()
    );
    #[allow(clippy::disallowed_methods)] // util-linux `script`, to run the CLI on a pty
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs the CLI on a pseudo-terminal");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"blue\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let screen = text(&out.stdout);
    assert!(out.status.success(), "{screen}{}", text(&out.stderr));
    assert!(screen.contains("[ask] echo asks: colour?"), "{screen}");
    assert!(screen.contains(r#""answer": "blue""#), "{screen}");
}

#[test]
fn session_refuses_arguments_that_break_the_tool_schema() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let install = yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"]);
    assert!(install.status.success(), "{}", text(&install.stderr));
    assert!(yep(home.path(), &["enable", "echo"]).status.success());
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep"))
        .args(["session", "--json"])
        .env("YEP_HOME", home.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"call echo {}\ncall echo {\"text\":\"ok\"}\nquit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("extension `echo`: invalid arguments for tool `echo`: `text` is required"),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert!(stdout.contains(r#""echoed":"ok""#), "{stdout}");
}

#[test]
fn session_json_transcript() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let install = yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"]);
    assert!(install.status.success(), "{}", text(&install.stderr));
    assert!(yep(home.path(), &["enable", "echo"]).status.success());
    let script = [
        "tools",
        r#"call echo {"text":"hi"}"#,
        r#"call count {"n":2,"interval_ms":5}"#,
        r#"call ask {"prompt":"colour?"}"#,
        r#"call ask {"prompt":"again?"}"#,
        r#"pre bash {"forbidden":true}"#,
        r#"pre bash {"cmd":"ls"}"#,
        r#"post bash {"cmd":"ls"}"#,
        "prompt",
        "prompt",
        "commands",
        "command echo:ping",
        "command echo:nope",
        "status",
        "call nope {}",
        "call echo {not json",
        "frobnicate",
        "reload echo",
        "disable echo",
        "tools",
        "quit",
    ]
    .join("\n");
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep"))
        .args(["session", "--json", "--answer", "blue"])
        .env("YEP_HOME", home.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in stdout.lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"));
    }
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex_escape(env!("CARGO_BIN_EXE_yep")), "[YEP]");
    settings.bind(|| insta::assert_snapshot!("session_transcript", stdout));
    assert!(
        !std::fs::read_to_string(home.path().join("settings.toml"))
            .unwrap()
            .contains("ext:echo"),
        "disable persists"
    );
}

#[test]
fn session_at_a_terminal_reads_lines_and_shows_results() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    assert!(
        yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    assert!(yep(home.path(), &["enable", "echo"]).status.success());
    let inner = format!(
        "YEP_HOME='{}' '{}' session",
        home.path().display(),
        env!("CARGO_BIN_EXE_yep")
    );
    #[allow(clippy::disallowed_methods)] // util-linux `script`, to run the CLI on a pty
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs the CLI on a pseudo-terminal");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    // The server pushes its status from its own thread once started; like a person, type after
    // it has had a moment, so the next prompt can show it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    stdin
        .write_all(b"call echo {\"text\":\"from a terminal\"}\r")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    stdin.write_all(b"quit\r").unwrap();
    let out = child.wait_with_output().unwrap();
    let screen = text(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("1 extension(s) enabled: echo"), "{screen}");
    assert!(
        screen.contains("[echo: echo ready] yep>"),
        "the status line is in the prompt: {screen}"
    );
    assert!(
        screen.contains("\"echoed\": \"from a terminal\""),
        "{screen}"
    );
    assert!(home.path().join("session_history").is_file());
}

#[test]
fn session_lists_a_contributed_mcp_server_and_its_tools_through_rmcp() {
    let home = tempfile::tempdir().unwrap();
    let rmcp_server =
        std::path::Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-bench-rmcp");
    assert!(
        rmcp_server.is_file(),
        "{} is missing: run `cargo test --workspace`",
        rmcp_server.display()
    );
    let pkg = home.path().join("mcp-pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let manifest =
        json!({"name": "kit", "yolop": {"mcpServers": {"echo": {"command": rmcp_server}}}});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    assert!(
        yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    assert!(yep(home.path(), &["enable", "kit"]).status.success());
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep"))
        .args(["session", "--json"])
        .env("YEP_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"mcp\nmcp list-tools kit__echo\nmcp list-tools nope\nquit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["mcp"]["kit__echo"]["command"], json!(rmcp_server));
    assert_eq!(
        lines[1],
        json!({"mcp_tools": ["echo"]}),
        "{}",
        text(&out.stderr)
    );
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("no MCP server named `nope`")
    );
}

/// Run `inner` under `sh` on a pseudo-terminal (util-linux `script`); what the terminal showed.
fn on_a_pty(inner: &str) -> String {
    #[allow(clippy::disallowed_methods)] // util-linux `script`, to run the CLI on a pty
    let out = Command::new("script")
        .args(["-qec", inner, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs the CLI on a pseudo-terminal");
    text(&out.stdout)
}

#[test]
fn doctor_colours_pass_and_fail_only_on_a_terminal_without_no_color() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    let doctor = format!(
        "YEP_HOME='{}' '{}' doctor '{}'",
        home.path().display(),
        env!("CARGO_BIN_EXE_yep"),
        pkg.display()
    );
    let screen = on_a_pty(&doctor);
    assert!(screen.contains("\x1b[32mpass\x1b[0m  "), "{screen:?}");
    assert!(
        screen.contains("\x1b[32mok\x1b[0m: no failures"),
        "{screen:?}"
    );
    let plain = on_a_pty(&format!("NO_COLOR=1 {doctor}"));
    assert!(
        plain.contains("pass  ") && plain.contains("ok: no failures"),
        "{plain:?}"
    );
    assert!(!plain.contains('\x1b'), "{plain:?}");
    // An empty NO_COLOR does not count (no-color.org): colour stays.
    let empty = on_a_pty(&format!("NO_COLOR= {doctor}"));
    assert!(empty.contains("\x1b[32mpass\x1b[0m"), "{empty:?}");
    let piped = yep(home.path(), &["doctor", pkg.to_str().unwrap()]);
    let stdout = text(&piped.stdout);
    assert!(piped.status.success(), "{stdout}{}", text(&piped.stderr));
    assert!(
        stdout.contains("ok: no failures") && !stdout.contains('\x1b'),
        "{stdout:?}"
    );
}

#[test]
fn completions_print_a_script_naming_the_subcommands() {
    let home = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = yep(home.path(), &["completions", shell]);
        let script = text(&out.stdout);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        for sub in ["install", "enable", "session", "completions"] {
            assert!(script.contains(sub), "{shell} completes `{sub}`:\n{script}");
        }
    }
    let bad = yep(home.path(), &["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}
