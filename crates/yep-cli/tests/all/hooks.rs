//! `yep hook <agent>` fed each agent's hook JSON as the agent feeds it, and
//! `yep hooks config <agent>`. The real agent CLIs driving it are in `agents.rs`.

use crate::common;
use common::{ok, stable, text, yep, yep_in};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A home with the echo example installed and enabled: its pre hook blocks any call whose
/// arguments say `"forbidden": true`, and it has prompt text. Stops its shared host when
/// dropped.
struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
}

impl Home {
    fn with_echo() -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let workspace = tmp.path().join("project");
        std::fs::create_dir_all(&workspace).unwrap();
        let pkg = tmp.path().join("echo-pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
        manifest["yolop"]["capabilityServer"] =
            json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
        std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
        ok(&yep(&home, &["install", pkg.to_str().unwrap(), "--yes"]));
        ok(&yep(&home, &["enable", "echo"]));
        Home {
            _tmp: tmp,
            home,
            workspace,
        }
    }

    /// `yep hook <agent> [extra]` in the project, with `input` on stdin.
    fn hook(&self, agent: &str, extra: &[&str], input: &Value) -> std::process::Output {
        let mut args = vec!["hook", agent];
        args.extend_from_slice(extra);
        yep_in(&self.workspace, &self.home, &args, &input.to_string())
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = yep(&self.home, &["host", "stop"]);
    }
}

/// What the hook command printed, as JSON.
fn answer(out: &std::process::Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_str(&text(&out.stdout))
        .unwrap_or_else(|e| panic!("{e}: {:?}", text(&out.stdout)))
}

#[test]
fn a_yep_pre_hook_blocks_the_agents_own_shell_call_in_each_agents_format() {
    let h = Home::with_echo();
    let claude = |tool_input: Value| {
        json!({"session_id": "s", "cwd": h.workspace, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": tool_input, "tool_use_id": "toolu_1"})
    };
    let reason = "blocked by the echo example: args.forbidden is true";
    let denied = answer(&h.hook("claude", &[], &claude(json!({"forbidden": true}))));
    assert_eq!(
        denied,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": reason}})
    );
    // Codex reads Claude Code's format.
    assert_eq!(
        answer(&h.hook("codex", &[], &claude(json!({"forbidden": true})))),
        denied
    );
    let gemini = json!({"session_id": "s", "cwd": h.workspace, "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command", "tool_input": {"forbidden": true}});
    assert_eq!(
        answer(&h.hook("gemini", &[], &gemini)),
        json!({"decision": "deny", "reason": reason})
    );
    // The small `yep-hook` binary, which the configurations run, answers the same.
    let small = {
        use std::io::Write;
        let mut child = common::Sealed::get()
            .command(env!("CARGO_BIN_EXE_yep-hook"), &h.home)
            .args(["claude"])
            .current_dir(&h.workspace)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let input = claude(json!({"forbidden": true})).to_string();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    assert_eq!(answer(&small), denied);
    // A call the hooks let go: nothing to say, and the agent decides as it would.
    let allowed = h.hook("claude", &[], &claude(json!({"command": "ls"})));
    assert_eq!(allowed.status.code(), Some(0));
    assert_eq!(text(&allowed.stdout), "");
    // The hook ran on the workspace's host, which `yep mcp serve` here would share.
    let status: Value =
        serde_json::from_str(&ok(&yep(&h.home, &["host", "status", "--json"]))).unwrap();
    let root = h.workspace.canonicalize().unwrap();
    assert_eq!(status["workspaces"][0]["root"], json!(root), "{status:#}");
}

#[test]
fn a_session_start_gives_the_model_the_extensions_prompt_text() {
    let h = Home::with_echo();
    let start = json!({"session_id": "s", "cwd": h.workspace,
        "hook_event_name": "SessionStart", "source": "startup"});
    let said = answer(&h.hook("claude", &[], &start));
    assert_eq!(said["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = said["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(
        context.starts_with("<capability id=\"ext:echo\">") && context.contains("echo"),
        "{said:#}"
    );
    let gemini = json!({"hook_event_name": "SessionStart", "source": "startup"});
    let said = answer(&h.hook("gemini", &[], &gemini));
    assert!(
        said["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .is_some_and(|c| c.contains("<capability id=\"ext:echo\">")),
        "{said:#}"
    );
}

/// A home whose shared host cannot be reached: its `run` is a plain file.
fn unreachable_home() -> Home {
    let h = Home::with_echo();
    let _ = std::fs::remove_dir_all(h.home.join("run"));
    std::fs::write(h.home.join("run"), "not a directory").unwrap();
    h
}

#[test]
fn when_yep_cannot_answer_the_call_is_blocked_and_said_why_unless_fail_open() {
    let h = unreachable_home();
    let call = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}});
    let refused = answer(&h.hook("claude", &[], &call));
    assert_eq!(
        refused["hookSpecificOutput"]["permissionDecision"], "deny",
        "{refused:#}"
    );
    let why = refused["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        why.starts_with("yep could not run its hooks, so this is blocked: ")
            && why.contains("--fail-open"),
        "{why}"
    );
    let prompt = json!({"hook_event_name": "BeforeAgent", "prompt": "hi"});
    let refused = answer(&h.hook("gemini", &[], &prompt));
    assert_eq!(refused["decision"], "deny", "{refused:#}");
    // Chosen fail-open: the call goes on, and the user is told (exit 1, stderr).
    let open = h.hook("claude", &["--fail-open"], &call);
    assert_eq!(open.status.code(), Some(1));
    assert_eq!(text(&open.stdout), "");
    assert!(
        text(&open.stderr)
            .starts_with("yep could not run its hooks, so this goes on without them: "),
        "{}",
        text(&open.stderr)
    );
    // What cannot be blocked (a tool that already ran) goes on with the warning.
    let after = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_response": {"stdout": ""}});
    let out = h.hook("claude", &[], &after);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    // Input that is not an agent's: blocked, exit 2 with the reason on stderr.
    let garbled = yep_in(&h.workspace, &h.home, &["hook", "claude"], "not json");
    assert_eq!(garbled.status.code(), Some(2));
    assert!(
        text(&garbled.stderr).contains("the hook input is not JSON"),
        "{}",
        text(&garbled.stderr)
    );
}

#[test]
fn an_event_yep_has_nothing_to_say_to_starts_no_host() {
    let h = Home::with_echo();
    let note = json!({"hook_event_name": "Notification", "message": "waiting"});
    let out = h.hook("claude", &[], &note);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "");
    let status: Value =
        serde_json::from_str(&ok(&yep(&h.home, &["host", "status", "--json"]))).unwrap();
    assert_eq!(status, json!({"running": false}));
}

#[test]
fn hooks_config_prints_what_each_agent_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    for agent in ["claude", "codex", "gemini"] {
        let out = yep(&home, &["hooks", "config", agent]);
        let config: Value = serde_json::from_str(&ok(&out)).unwrap();
        let hint = text(&out.stderr);
        stable(tmp.path()).bind(|| {
            insta::assert_snapshot!(
                format!("hooks_config_{agent}"),
                format!("{config:#}\n--- stderr\n{hint}")
            );
        });
    }
    let open: Value = serde_json::from_str(&ok(&yep(
        &home,
        &["hooks", "config", "claude", "--fail-open"],
    )))
    .unwrap();
    assert!(
        open["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with(&format!(
                "yep-hook --home {} claude --fail-open",
                home.display()
            )),
        "{open:#}"
    );
}

/// A home with security-guidance (from the Claude Code plugins corpus) installed and enabled,
/// and a project to work in.
fn with_security_guidance(tmp: &std::path::Path) -> (PathBuf, PathBuf) {
    let plugins = common::claude::claude_corpus(tmp).join("plugins");
    let home = tmp.join("home");
    ok(&yep(
        &home,
        &[
            "install",
            plugins.join("security-guidance").to_str().unwrap(),
            "--yes",
        ],
    ));
    ok(&yep(&home, &["enable", "security-guidance"]));
    let project = tmp.join("project");
    std::fs::create_dir_all(&project).unwrap();
    (home, project)
}

#[test]
fn a_plugins_post_tool_warning_on_the_agents_own_edits_reaches_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, project) = with_security_guidance(tmp.path());
    let warning = "eval() executes arbitrary code";
    // security-guidance warns once per file and rule in a session: each step writes its own.
    let write = |file: &str| json!({"file_path": file, "content": "x = eval(input())\n"});
    // Claude Code's own Edit, after it ran.
    let edit = json!({"session_id": "s", "cwd": project, "hook_event_name": "PostToolUse",
        "tool_name": "Edit", "tool_input": {"file_path": "edit.py", "old_string": "x = 1",
            "new_string": "x = eval(input())"},
        "tool_response": {"filePath": "edit.py"}});
    let said = answer(&yep_in(
        &project,
        &home,
        &["hook", "claude"],
        &edit.to_string(),
    ));
    assert!(said.to_string().contains(warning), "{said:#}");
    // The plugin warns once per file in a session, and that session is the agent's: the same
    // edit warns again in another agent session, and not again in the first.
    let again = |session: &str| {
        let mut event = edit.clone();
        event["session_id"] = json!(session);
        let out = yep_in(&project, &home, &["hook", "claude"], &event.to_string());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert!(again("another").contains(warning));
    assert!(!again("s").contains(warning));
    // Gemini CLI's write_file is a Write to the plugin.
    let gemini = json!({"hook_event_name": "AfterTool", "tool_name": "write_file",
        "tool_input": write("gemini.py"), "tool_response": {"llmContent": "ok"}});
    let said = answer(&yep_in(
        &project,
        &home,
        &["hook", "gemini"],
        &gemini.to_string(),
    ));
    assert!(
        said["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .is_some_and(|c| c.contains(warning)),
        "{said:#}"
    );
    // `yep session` fires the same hooks for the agent's own tools: `post Write` shows the
    // warning, and `run Write` runs the hooks of a tool no extension serves.
    let script = format!(
        "post Write {}\nrun Write {}\nquit\n",
        write("post.py"),
        write("run.py")
    );
    let out = yep_in(&project, &home, &["session", "--json"], &script);
    let replies: Vec<Value> = ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("warning").is_none())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    for reply in &replies {
        assert!(reply.to_string().contains(warning), "{reply}");
    }
    assert_eq!(
        replies[1]["agent_runs"]["tool"], "Write",
        "{:?}",
        replies[1]
    );
    let _ = yep(&home, &["host", "stop"]);
}

#[test]
fn the_status_line_shows_each_extensions_status_and_never_starts_a_host() {
    let h = Home::with_echo();
    let claude = json!({"session_id": "s", "cwd": h.workspace,
        "workspace": {"current_dir": h.workspace, "project_dir": h.workspace},
        "model": {"id": "m", "display_name": "M"}});
    let line = |json: bool| {
        let args: &[&str] = if json {
            &["statusline", "--json"]
        } else {
            &["statusline"]
        };
        ok(&yep_in(&h.workspace, &h.home, args, &claude.to_string()))
    };
    // No host runs: an empty line, and still none runs.
    assert_eq!(line(false), "\n");
    let status: Value =
        serde_json::from_str(&ok(&yep(&h.home, &["host", "status", "--json"]))).unwrap();
    assert_eq!(status, json!({"running": false}));
    // The agent's session starts its host; the echo example says it is ready.
    let start = json!({"hook_event_name": "SessionStart", "source": "startup"});
    answer(&h.hook("claude", &[], &start));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while line(false) != "echo: echo ready\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the status line never showed the echo example's status: {:?}",
            line(false)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status: Value = serde_json::from_str(&line(true)).unwrap();
    assert_eq!(
        status,
        json!({"echo": {"text": "echo ready", "level": "ok"}})
    );
}

#[test]
fn doctor_says_when_a_plugin_is_on_in_yep_and_in_claude_code_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, project) = with_security_guidance(tmp.path());
    let claude = tmp.path().join("claude-config");
    std::fs::create_dir_all(&claude).unwrap();
    let doctor = |claude_settings: Value| {
        std::fs::write(claude.join("settings.json"), claude_settings.to_string()).unwrap();
        let out = common::yep_at(
            Some(&project),
            &home,
            &["doctor", "--json"],
            "",
            &[("CLAUDE_CONFIG_DIR", claude.to_str().unwrap())],
        );
        let report: Value = serde_json::from_str(&ok(&out)).unwrap();
        report["checks"][0].clone()
    };
    let twice = doctor(json!({"enabledPlugins": {
        "security-guidance@claude-plugins-official": true, "other@x": true}}));
    assert_eq!(twice["status"], "warn", "{twice:#}");
    let detail = twice["detail"].as_str().unwrap();
    assert!(
        detail.contains("security-guidance@claude-plugins-official")
            && detail.contains("its hooks run twice")
            && detail.contains("`yep disable security-guidance`"),
        "{detail}"
    );
    // Off in Claude Code, or a project's local settings turning it off: once.
    let once =
        doctor(json!({"enabledPlugins": {"security-guidance@claude-plugins-official": false}}));
    assert_eq!(once["status"], "pass", "{once:#}");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::write(
        project.join(".claude/settings.local.json"),
        json!({"enabledPlugins": {"security-guidance@claude-plugins-official": false}}).to_string(),
    )
    .unwrap();
    let local =
        doctor(json!({"enabledPlugins": {"security-guidance@claude-plugins-official": true}}));
    assert_eq!(local["status"], "pass", "{local:#}");
}
