//! The `yep` binary run for real, in a sealed temp home.

use crate::common;
use crate::common::yep;
use common::{on_a_pty, regex_escape, yep_with_stdin};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;

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
        stderr.contains("error: extension `echo`: `tool/call` failed: no terminal to answer it"),
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
        assert_eq!(bad_json.status.code(), Some(2));
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
    let mut child = common::script(&inner)
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
    let out = yep_with_stdin(
        home.path(),
        &["session", "--json"],
        "call echo {}\ncall echo {\"text\":\"ok\"}\nquit\n",
    );
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
    let out = yep_with_stdin(
        home.path(),
        &["session", "--json", "--answer", "blue"],
        &script,
    );
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
    let mut child = common::script(&inner)
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

/// `yep session` on a real pseudo-terminal (util-linux `script`), over the echo package
/// installed and enabled in `home`. What it prints is collected by a thread, so a test types
/// when a marker has appeared rather than after a guessed delay.
struct PtySession {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    screen: std::sync::Arc<std::sync::Mutex<(String, bool)>>,
}

impl PtySession {
    /// `approve` edits the echo manifest before it is installed.
    fn start(home: &Path, approve: impl FnOnce(&mut Value)) -> PtySession {
        let pkg = echo_package(home);
        let manifest_path = pkg.join("plugin.json");
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
        approve(&mut manifest);
        std::fs::write(&manifest_path, manifest.to_string()).unwrap();
        assert!(
            yep(home, &["install", pkg.to_str().unwrap(), "--yes"])
                .status
                .success()
        );
        assert!(yep(home, &["enable", "echo"]).status.success());
        // `exec`: the shell `script` starts must not stay between the pty and the session, or
        // the Ctrl-C the tests type kills that shell (dash) and `script` reports its death.
        let inner = format!(
            "YEP_HOME='{}' '{}' session",
            home.display(),
            env!("CARGO_BIN_EXE_yep")
        );
        let mut child = common::script(&inner)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("util-linux `script` runs the CLI on a pseudo-terminal");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let screen = std::sync::Arc::new(std::sync::Mutex::new((String::new(), false)));
        let sink = std::sync::Arc::clone(&screen);
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            loop {
                let n = stdout.read(&mut buf).unwrap_or(0);
                let mut screen = sink.lock().unwrap();
                if n == 0 {
                    screen.1 = true;
                    return;
                }
                screen.0.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        PtySession {
            child,
            stdin,
            screen,
        }
    }

    fn screen(&self) -> String {
        self.screen.lock().unwrap().0.clone()
    }

    /// Wait until `marker` has appeared `times` times; fail when the session ended first (or
    /// after a bound that only keeps a broken build from hanging).
    fn wait_for(&self, marker: &str, times: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let (seen, ended) = {
                let screen = self.screen.lock().unwrap();
                (screen.0.matches(marker).count(), screen.1)
            };
            if seen >= times {
                return;
            }
            assert!(
                !ended && std::time::Instant::now() < deadline,
                "{marker:?} did not appear {times} time(s); the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Type at the `nth` prompt, once it is up (the editor reads raw keys from then on).
    fn type_at_prompt(&mut self, nth: usize, keys: &str) {
        self.wait_for("yep> ", nth);
        use std::io::Write;
        self.stdin.write_all(keys.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn type_now(&mut self, keys: &str) {
        use std::io::Write;
        self.stdin.write_all(keys.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Wait for the session to end; its exit status and the whole screen.
    fn finish(&mut self) -> (std::process::ExitStatus, String) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.screen.lock().unwrap().1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the session did not end; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        (self.child.wait().unwrap(), self.screen())
    }
}

impl Drop for PtySession {
    /// A failed test leaves no session behind: closing the pty hangs it up.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ctrl_c_in_a_terminal_session_cancels_the_running_call_on_the_wire_and_the_session_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut pty = PtySession::start(home.path(), |_| {});
    pty.type_at_prompt(1, "call count {\"n\":100,\"interval_ms\":100}\r");
    pty.wait_for("… 2/100", 1);
    pty.type_now("\x03");
    pty.wait_for("cancelled `count`", 1);
    pty.type_at_prompt(2, "call echo {\"text\":\"still here\"}\r");
    pty.wait_for("\"echoed\": \"still here\"", 1);
    pty.type_at_prompt(3, "\x04");
    let (status, screen) = pty.finish();
    assert!(status.success(), "{screen}");
    assert!(!screen.contains("100/100"), "the count ran on: {screen}");
    // The server was told: the echo example logs a cancel it receives to its stderr (the log).
    let log = std::fs::read_to_string(home.path().join("logs/echo.log")).unwrap();
    assert!(log.contains("count: cancelled before"), "{log}");
}

#[test]
fn ctrl_c_while_a_call_waits_for_an_answer_cancels_it_and_the_prompt_gets_the_next_line() {
    let home = tempfile::tempdir().unwrap();
    let mut pty = PtySession::start(home.path(), |_| {});
    pty.type_at_prompt(1, "call ask {\"prompt\":\"colour?\"}\r");
    pty.wait_for("answer (empty line cancels): ", 1);
    pty.type_now("\x03");
    pty.wait_for("cancelled `ask`", 1);
    // The abandoned question must not take this line.
    pty.type_at_prompt(2, "call echo {\"text\":\"for the prompt\"}\r");
    pty.wait_for("\"echoed\": \"for the prompt\"", 1);
    pty.type_at_prompt(3, "\x04");
    let (status, screen) = pty.finish();
    assert!(status.success(), "{screen}");
    assert!(!screen.contains("\"answer\""), "{screen}");
}

#[test]
fn a_terminal_session_speaks_text_errors_prompts_and_what_each_verb_did() {
    let home = tempfile::tempdir().unwrap();
    // Approved without `ask`, which the server still serves: a warning once it is met.
    let mut pty = PtySession::start(home.path(), |manifest| {
        manifest["yolop"]["tools"]
            .as_array_mut()
            .unwrap()
            .retain(|t| t["name"] != "ask")
    });
    pty.type_at_prompt(1, "call nosuch {}\r");
    pty.wait_for(
        "error: no tool named `nosuch`; type `tools` to list them",
        1,
    );
    pty.type_at_prompt(2, "call echo {\"text\":\"hi\"}\r");
    pty.wait_for("warning: extension `echo`: refusing tool `ask`", 1);
    pty.type_at_prompt(3, "prompt\r");
    pty.wait_for("echo dynamic prompt, turn 1", 1);
    pty.type_at_prompt(4, "reload echo\r");
    pty.wait_for("reloaded echo", 1);
    pty.type_at_prompt(5, "command echo:ping\r");
    pty.wait_for("\npong\r\n", 1);
    pty.type_at_prompt(6, "quit\r");
    let (status, screen) = pty.finish();
    assert!(status.success(), "{screen}");
    assert!(!screen.contains("\"error\""), "{screen}");
    assert!(!screen.contains("tools()"), "{screen}");
    assert!(
        screen.contains("<capability id=\"ext:echo\">\r\necho dynamic prompt, turn 1\r\n"),
        "the prompt is text, not a JSON string: {screen}"
    );
    assert!(!screen.contains("\ntrue\r\n"), "{screen}");
    assert!(!screen.contains("\"message\""), "{screen}");
}

#[test]
fn enabling_in_a_terminal_session_names_the_commands_for_what_is_left_to_set_up() {
    let home = tempfile::tempdir().unwrap();
    let mut pty = PtySession::start(home.path(), |manifest| {
        manifest["yolop"]["config_schema"] = json!({
            "type": "object",
            "properties": {
                "units": {"type": "string"},
                "token": {"type": "string", "secret": true, "env": "ECHO_TOKEN"}
            },
            "required": ["units", "token"]
        })
    });
    pty.type_at_prompt(1, "disable echo\r");
    pty.wait_for("disabled echo", 1);
    pty.type_at_prompt(2, "enable echo\r");
    // Each question dismissed with an empty line.
    pty.wait_for("asks: echo.token", 1);
    pty.type_now("\r");
    pty.wait_for("asks: echo.units", 1);
    pty.type_now("\r");
    pty.wait_for(
        "enabled echo; still to set up: token (`yep secret set echo token`), units (`yep config set echo units <value>`)",
        1,
    );
    pty.type_at_prompt(3, "quit\r");
    let (status, screen) = pty.finish();
    assert!(status.success(), "{screen}");
    assert!(!screen.contains("\"ok\""), "{screen}");
}

#[test]
fn ctrl_c_at_a_terminal_session_prompt_clears_the_line_and_ctrl_d_quits() {
    let home = tempfile::tempdir().unwrap();
    let mut pty = PtySession::start(home.path(), |_| {});
    pty.type_at_prompt(1, "call echo {\"text\":\"dropped\"}\x03");
    pty.type_at_prompt(2, "call echo {\"text\":\"kept\"}\r");
    pty.wait_for("\"echoed\": \"kept\"", 1);
    pty.type_at_prompt(3, "\x04");
    let (status, screen) = pty.finish();
    assert!(status.success(), "{screen}");
    assert!(!screen.contains("\"echoed\": \"dropped\""), "{screen}");
}

/// `yep session --json` fed `script`, one JSON value per stdout line.
fn json_session(home: &Path, script: &str) -> Vec<Value> {
    let out = yep_with_stdin(home, &["session", "--json"], script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn session_errors_name_session_commands() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    assert!(
        yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    assert!(yep(home.path(), &["enable", "echo"]).status.success());
    let lines = json_session(
        home.path(),
        "call nosuch {}\ncommand echo:nope\nreload ech\ndisable echo\nreload echo\nfrobnicate\nquit\n",
    );
    assert_eq!(lines[3], json!({"ok": true}), "{lines:?}");
    let errors: Vec<&str> = lines.iter().filter_map(|l| l["error"].as_str()).collect();
    assert_eq!(
        errors,
        [
            "no tool named `nosuch`; type `tools` to list them",
            "no command named `echo:nope` (commands are `<extension>:<name>`, a trusted workspace's own `<name>`); type `commands` to list them",
            "no extension named `ech` is installed; did you mean `echo`?",
            "extension `echo` is not enabled in this session; `enable echo` enables it",
            "unknown command `frobnicate`; type `help` to list the commands",
        ]
    );
}

/// `help` lists one verb a line, each with what it does, and every verb the session answers.
#[test]
fn session_help_is_one_verb_a_line() {
    let home = tempfile::tempdir().unwrap();
    let lines = json_session(home.path(), "help\nquit\n");
    let help = lines[0]["help"].as_str().unwrap();
    let rows: Vec<&str> = help.lines().collect();
    assert!(rows.len() >= 25, "{help}");
    for row in &rows {
        assert!(row.len() <= 100, "a long line: {row}");
        let (verb, said) = row.split_once("  ").unwrap_or((row, ""));
        assert!(
            !said.trim().is_empty(),
            "`{verb}` says nothing of what it does"
        );
    }
    for verb in ["tools", "run <tool> <json>", "mcp status", "quit"] {
        assert!(rows.iter().any(|r| r.starts_with(verb)), "{verb}: {help}");
    }
}

#[test]
fn session_json_reports_warnings_at_start_and_when_they_arise() {
    let home = tempfile::tempdir().unwrap();
    let pkg = echo_package(home.path());
    // Approve a manifest without `ask`, which the echo server still serves: the host refuses
    // it once it meets the running server.
    let manifest_path = pkg.join("plugin.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["yolop"]["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "ask");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    assert!(
        yep(
            home.path(),
            &["install", pkg.to_str().unwrap(), "--yes", "--link"]
        )
        .status
        .success()
    );
    assert!(yep(home.path(), &["enable", "echo"]).status.success());
    // A linked package edited after approval runs clamped to what was approved, with a warning.
    manifest["description"] = json!("edited since approval");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();

    let lines = json_session(home.path(), "call echo {\"text\":\"hi\"}\nquit\n");
    let warning = |l: &Value| l["warning"].as_str().map(str::to_string);
    assert!(
        warning(&lines[0]).is_some_and(|w| w.contains("plugin.json changed since it was approved")),
        "{lines:?}"
    );
    assert_eq!(lines[1], json!({"result": {"echoed": "hi"}}), "{lines:?}");
    assert!(
        warning(&lines[2]).is_some_and(|w| w.contains("refusing tool `ask`")),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 3, "each warning once: {lines:?}");
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
    let out = yep_with_stdin(
        home.path(),
        &["session", "--json"],
        "mcp\nmcp list-tools kit__echo\nmcp list-tools nope\nquit\n",
    );
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
    // Spawned like every other child: its stderr went to a log in the home.
    assert!(
        home.path().join("logs/mcp.kit__echo.log").is_file(),
        "{:?}",
        std::fs::read_dir(home.path().join("logs"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
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

/// Exit 1: the user's input, their home or an extension failed; the hint names the next step.
#[test]
fn a_user_error_exits_1_with_a_hint() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(home.path(), &["call", "nosuch", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: no extension named `nosuch` is installed\n\
         hint: `yep list` shows what is installed; `yep install <dir | name>` installs a package\n"
    );
}

/// Exit 2: the command line is wrong, whether clap or yep finds it.
#[test]
fn a_usage_error_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let unknown = yep(home.path(), &["frobnicate"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    let missing = yep(home.path(), &["call"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    let pkg = echo_package(home.path());
    let not_json = yep(
        home.path(),
        &["call", pkg.to_str().unwrap(), "echo", "{nope"],
    );
    assert_eq!(
        not_json.status.code(),
        Some(2),
        "{}",
        text(&not_json.stderr)
    );
    assert!(
        text(&not_json.stderr)
            .starts_with("error: failed to parse the tool arguments \"{nope\" as JSON"),
        "{}",
        text(&not_json.stderr)
    );
}

/// Exit 255: yep could not do its job through no fault of the input. A failed write to stdout
/// (a full disk) is one, and is never a silent success; a closed pipe still ends quietly.
#[test]
fn an_internal_error_exits_255_and_only_a_closed_pipe_is_quiet() {
    let home = tempfile::tempdir().unwrap();
    for args in [&["list", "--json"][..], &["completions", "bash"][..]] {
        #[allow(clippy::disallowed_methods)] // running the CLI under test
        let out = crate::common::yep_command()
            .args(args)
            .env("YEP_HOME", home.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(255), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            "error: failed to write to stdout\n  caused by: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
    // `yep completions bash | true`: the reader is gone, nothing to report.
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    let mut child = crate::common::yep_command()
        .args(["completions", "bash"])
        .env("YEP_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

/// An error whose message already carries its cause does not print the cause again.
#[test]
fn an_error_chain_prints_each_cause_once() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let out = yep(&file, &["enable", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("File exists").count(), 1, "{stderr}");
    assert!(!stderr.contains("caused by"), "{stderr}");
}

/// A package `name` in `dir` with tool `t`, whose server is the shell script `body`.
fn shell_package(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let pkg = dir.join(name);
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("plugin.json"),
        json!({"name": name, "yolop": {"capabilityServer": {"command": "server"}, "tools": [{"name": "t"}]}}).to_string(),
    )
    .unwrap();
    std::fs::write(pkg.join("bin/server"), format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(
        pkg.join("bin/server"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    pkg
}

/// A server that dies before its handshake: the error says so, and the hint names its log.
#[test]
fn a_crashed_server_hints_at_its_log() {
    let home = tempfile::tempdir().unwrap();
    let pkg = shell_package(home.path(), "crasher", "echo dying >&2\nexit 3\n");
    let out = yep(home.path(), &["call", pkg.to_str().unwrap(), "t"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: extension `crasher`"), "{stderr}");
    assert!(
        stderr.ends_with("hint: `yep logs crasher` shows what the server wrote to stderr\n"),
        "{stderr}"
    );
}

/// The line an `error:` quotes after `lead`, up to its closing `" (`.
fn quoted_after<'a>(stderr: &'a str, lead: &str) -> &'a str {
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error: {stderr}"));
    let quoted = error
        .split_once(lead)
        .unwrap_or_else(|| panic!("no {lead:?} in {error}"))
        .1;
    &quoted[..quoted.find("\" (").unwrap_or_else(|| panic!("{error}"))]
}

/// A server that logs to stdout before its handshake: the error quotes the first such line,
/// escaped and cut short, and says that logs go to stderr.
#[test]
fn output_before_the_handshake_is_quoted_in_the_error() {
    let home = tempfile::tempdir().unwrap();
    let pkg = shell_package(
        home.path(),
        "chatty",
        "printf 'Server \\033[31mstarting\\033[0m on stdio %0200d\\n' 0\necho 'second line'\nexit 0\n",
    );
    let out = yep(home.path(), &["call", pkg.to_str().unwrap(), "t"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    common::assert_nothing_hidden(&stderr);
    let line = quoted_after(
        &stderr,
        "the first line it wrote to stdout that is not a YEP message: \"",
    );
    assert!(
        line.starts_with("Server \\x1b[31mstarting\\x1b[0m on stdio 000"),
        "{line}"
    );
    assert!(
        line.ends_with("0…") && line.chars().count() == 121,
        "{line}"
    );
    assert!(
        stderr.contains("…\" (stdout carries only the protocol: logs must go to stderr)"),
        "{stderr}"
    );
}

#[test]
fn a_session_tells_a_server_that_cannot_start_once_and_names_the_hook_it_could_not_run() {
    let home = tempfile::tempdir().unwrap();
    // `ghost` starts on first use, `guard` at once (it has a hook): neither binary exists.
    let packages = [
        (
            "ghost",
            json!({"capabilityServer": {"command": "no-such-yep-server"},
            "tools": [{"name": "boo", "description": "never served"}]}),
        ),
        (
            "guard",
            json!({"capabilityServer": {"command": "no-such-yep-guard"},
            "hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash"}]}),
        ),
    ];
    for (name, yolop) in packages {
        let pkg = home.path().join(name);
        std::fs::create_dir_all(&pkg).unwrap();
        let manifest =
            json!({"name": name, "version": "1.0.0", "description": "missing", "yolop": yolop});
        std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
        let install = yep(home.path(), &["install", pkg.to_str().unwrap(), "--yes"]);
        assert!(install.status.success(), "{}", text(&install.stderr));
        assert!(yep(home.path(), &["enable", name]).status.success());
    }
    let out = yep_with_stdin(
        home.path(),
        &["session", "--json"],
        "call boo {}\npre bash {}\nquit\n",
    );
    let stdout = text(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let told = |key: &str, needle: &str| {
        lines
            .iter()
            .filter(|l| l[key].as_str().is_some_and(|s| s.starts_with(needle)))
            .count()
    };
    // The eager start that failed is a warning; the call that failed is its error, told once.
    assert_eq!(
        told(
            "warning",
            "extension `guard`: cannot spawn `no-such-yep-guard`"
        ),
        1,
        "{stdout}"
    );
    assert_eq!(
        told(
            "error",
            "extension `ghost`: cannot spawn `no-such-yep-server`"
        ),
        1,
        "{stdout}"
    );
    assert_eq!(
        told(
            "warning",
            "extension `ghost`: cannot spawn `no-such-yep-server`"
        ),
        0,
        "{stdout}"
    );
    // The hook that could not run is named on the decision.
    let decision = lines
        .iter()
        .find(|l| l["decision"].is_string())
        .unwrap_or_else(|| panic!("no decision: {stdout}"));
    assert_eq!(decision["decision"], "allow");
    assert_eq!(
        decision["unavailable_hooks"][0]["extension"], "guard",
        "{stdout}"
    );
}

#[test]
fn the_top_level_help_names_every_kind_yep_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let help = text(&yep(tmp.path(), &["--help"]).stdout);
    let first = help.lines().next().unwrap();
    for kind in [
        "Claude Code, Codex and Agent Plugins packages",
        "YEP and zot extensions, and MCP servers",
    ] {
        assert!(first.contains(kind), "{first}");
    }
    // The second line says how they are contained and reach the agents.
    assert!(help.contains("`yep hooks config <agent>`"), "{help}");
    // `yep new --lang` says what each language writes.
    let new = text(&yep(tmp.path(), &["new", "--help"]).stdout);
    assert!(new.contains("JavaScript for Node 18+"), "{new}");
}

#[test]
fn a_json_session_tells_each_warning_once() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join(".mcp.json"),
        r#"{"mcpServers":{"a b":{"command":"x"}}}"#,
    )
    .unwrap();
    let out = common::yep_in(
        &ws,
        &tmp.path().join("home"),
        &["session", "--json"],
        "quit\n",
    );
    let stdout = text(&out.stdout);
    let said: Vec<&str> = stdout.lines().filter(|l| l.contains("a b")).collect();
    assert_eq!(said.len(), 1, "{stdout}");
    assert!(said[0].starts_with(r#"{"warning":"#), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("a b"), "told again on stderr: {stderr}");
}
