//! One hook, MCP server or command of a plugin switched off alone (`yep disable <plugin>
//! --hook/--server/--command`): it never runs, in `yep session`, `yep hook <agent>` and `yep
//! mcp serve` alike; `yep enable` undoes it; `yep list` and an update's consent screen say
//! what is off, and the choice outlives the update.

use crate::common;

use common::{ok, text, yep, yep_in};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A Claude Code plugin `p` (no manifest) in `tmp/p`: PreToolUse hooks on Bash and on Write,
/// each touching a file named for it in its data dir, a command `tidy`, and with `servers`, the
/// MCP servers `files` (`yep-bench-rmcp`, one `echo` tool) and `noted` (the same, after it
/// writes `noted-started` in its data dir). Installed and enabled in `tmp/home`.
fn plugin_home(tmp: &Path, servers: bool) -> PathBuf {
    let home = tmp.join("home");
    let p = tmp.join("p");
    write_plugin(&p, false);
    if servers {
        use std::os::unix::fs::PermissionsExt;
        let rmcp = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-bench-rmcp");
        std::fs::create_dir_all(p.join("bin")).unwrap();
        std::fs::copy(&rmcp, p.join("bin/yep-bench-rmcp")).unwrap();
        let noted = p.join("bin/noted");
        std::fs::write(
            &noted,
            "#!/bin/sh\ntouch \"$CLAUDE_PLUGIN_DATA/noted-started\"\nexec \"$CLAUDE_PLUGIN_ROOT/bin/yep-bench-rmcp\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&noted, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            p.join(".mcp.json"),
            json!({
                "files": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/yep-bench-rmcp"},
                "noted": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/noted"}
            })
            .to_string(),
        )
        .unwrap();
    }
    ok(&yep(&home, &["install", p.to_str().unwrap(), "--yes"]));
    ok(&yep(&home, &["enable", "p"]));
    // Approving started each server once: what a session does is told apart from that.
    let _ = std::fs::remove_file(home.join("data/p/noted-started"));
    home
}

/// The plugin's files; `post` adds a PostToolUse hook on Bash (an update that asks again).
fn write_plugin(p: &Path, post: bool) {
    std::fs::create_dir_all(p.join("hooks")).unwrap();
    std::fs::create_dir_all(p.join("commands")).unwrap();
    std::fs::write(
        p.join("commands/tidy.md"),
        "---\ndescription: tidy up\n---\nTidy the workspace.\n",
    )
    .unwrap();
    let touch = |file: &str| json!([{"type": "command", "command": format!("touch \"$CLAUDE_PLUGIN_DATA/{file}\"")}]);
    let mut hooks = json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": touch("bash-hook")},
        {"matcher": "Write", "hooks": touch("write-hook")}
    ]}});
    if post {
        hooks["hooks"]["PostToolUse"] = json!([{"matcher": "Bash", "hooks": touch("post-hook")}]);
    }
    std::fs::write(p.join("hooks/hooks.json"), hooks.to_string()).unwrap();
}

/// `yep session --json`'s answers to `input`, warnings apart.
fn session(cwd: &Path, home: &Path, input: &str) -> Vec<Value> {
    crate::claude::session(cwd, home, input).0
}

/// Whether the hook or server that touches `file` in the plugin's data dir ran; the file is
/// removed for the next look.
fn ran(home: &Path, file: &str) -> bool {
    std::fs::remove_file(home.join("data/p").join(file)).is_ok()
}

#[test]
fn a_switched_off_hook_does_not_fire_while_another_of_the_plugin_does() {
    let tmp = tempfile::tempdir().unwrap();
    let home = plugin_home(tmp.path(), false);
    let off = yep(
        &home,
        &["disable", "p", "--hook", "PreToolUse:Bash", "--json"],
    );
    let said: Value = serde_json::from_str(&ok(&off)).unwrap();
    assert_eq!(said["changed"], true, "{said}");
    assert_eq!(said["off"]["hooks"], json!(["PreToolUse:Bash"]), "{said}");
    let calls = "run Bash {\"command\": \"ls\"}\nrun Write {\"file_path\": \"a\"}\nquit\n";
    session(tmp.path(), &home, calls);
    assert!(!ran(&home, "bash-hook") && ran(&home, "write-hook"));
    // The agent's own calls, through `yep hook claude`: the same.
    let event = |tool: &str, input: Value| {
        json!({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": tmp.path(),
            "tool_name": tool, "tool_input": input})
        .to_string()
    };
    for (tool, input) in [
        ("Bash", json!({"command": "ls"})),
        ("Write", json!({"file_path": "a", "content": ""})),
    ] {
        let out = yep_in(tmp.path(), &home, &["hook", "claude"], &event(tool, input));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    assert!(!ran(&home, "bash-hook") && ran(&home, "write-hook"));
    // Switched on again, it fires.
    ok(&yep(&home, &["enable", "p", "--hook", "PreToolUse:Bash"]));
    session(tmp.path(), &home, calls);
    assert!(ran(&home, "bash-hook") && ran(&home, "write-hook"));
    let settings = std::fs::read_to_string(home.join("settings.toml")).unwrap();
    assert!(!settings.contains("[off"), "{settings}");
}

#[test]
fn a_switched_off_server_does_not_start_and_its_tools_are_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let home = plugin_home(tmp.path(), true);
    ok(&yep(&home, &["disable", "p", "--server", "noted"]));
    let answers = session(
        tmp.path(),
        &home,
        "tools\ncall mcp__p__files__echo {\"text\": \"hi\"}\ncall mcp__p__noted__echo {\"text\": \"hi\"}\nquit\n",
    );
    let tools = answers[0]["tools"].to_string();
    assert!(tools.contains("mcp__p__files__echo"), "{tools}");
    assert!(!tools.contains("noted"), "{tools}");
    assert_eq!(
        answers[1]["result"]["content"][0]["text"], r#"{"echoed":"hi"}"#,
        "{answers:?}"
    );
    assert!(answers[2].get("error").is_some(), "{answers:?}");
    // No process of it ever ran.
    assert!(!ran(&home, "noted-started"));
    // Through `yep mcp serve` neither.
    let listed = common::raw_over_mcp(tmp.path(), &home, &[json!({"method": "tools/list"})]);
    let names = listed[0]["result"]["tools"].to_string();
    assert!(
        names.contains("mcp__p__files__echo") && !names.contains("noted"),
        "{names}"
    );
    assert!(!ran(&home, "noted-started"));
    // On again, it runs.
    ok(&yep(&home, &["enable", "p", "--server", "noted"]));
    let answers = session(
        tmp.path(),
        &home,
        "call mcp__p__noted__echo {\"text\": \"back\"}\nquit\n",
    );
    assert_eq!(
        answers[0]["result"]["content"][0]["text"], r#"{"echoed":"back"}"#,
        "{answers:?}"
    );
    assert!(ran(&home, "noted-started"));
}

#[test]
fn a_switched_off_command_is_not_offered_and_refuses_to_run_and_enable_undoes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = plugin_home(tmp.path(), false);
    ok(&yep(&home, &["disable", "p", "--command", "tidy"]));
    let answers = session(tmp.path(), &home, "commands\ncommand p:tidy\nquit\n");
    assert_eq!(answers[0]["commands"], json!([]), "{answers:?}");
    assert_eq!(
        answers[1]["error"],
        "command `p:tidy` is switched off; `yep enable p --command tidy` turns it on"
    );
    ok(&yep(&home, &["enable", "p", "--command", "tidy"]));
    let answers = session(tmp.path(), &home, "commands\nquit\n");
    assert!(
        answers[0]["commands"].to_string().contains("p:tidy"),
        "{answers:?}"
    );
    // What a plugin does not declare, or a plugin that is not installed, is refused, naming
    // what it does declare.
    let nope = yep(&home, &["disable", "p", "--hook", "Stop:\u{1b}[2J"]);
    assert_eq!(nope.status.code(), Some(1));
    let said = text(&nope.stderr);
    assert!(
        said.contains("`p` declares no hook `Stop:\\x1b[2J`; its hooks: PreToolUse, PreToolUse:Bash, PreToolUse:Write"),
        "{said}"
    );
    let nope = yep(&home, &["disable", "p", "--server", "x"]);
    assert!(
        text(&nope.stderr).contains("`p` declares no server `x`; it declares no server"),
        "{}",
        text(&nope.stderr)
    );
    let nope = yep(&home, &["disable", "q", "--command", "tidy"]);
    assert!(
        text(&nope.stderr).contains("no extension named `q` is installed"),
        "{}",
        text(&nope.stderr)
    );
}

#[test]
fn a_switched_off_hook_stays_off_across_an_update_and_the_consent_screen_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let home = plugin_home(tmp.path(), true);
    ok(&yep(&home, &["disable", "p", "--hook", "PreToolUse:Bash"]));
    ok(&yep(&home, &["disable", "p", "--server", "noted"]));
    ok(&yep(&home, &["disable", "p", "--command", "tidy"]));
    let listed = yep(&home, &["list"]);
    common::stable(tmp.path()).bind(|| insta::assert_snapshot!("list_with_off", ok(&listed)));
    // The update asks again (a new hook), and its screen says what stays off.
    write_plugin(&tmp.path().join("p"), true);
    let updated = yep(&home, &["update", "p", "--yes"]);
    let screen = text(&updated.stderr) + &text(&updated.stdout);
    assert_eq!(updated.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("off       hook PreToolUse:Bash: switched off by you, and stays off (`yep enable p --hook PreToolUse:Bash` turns it on)"),
        "{screen}"
    );
    assert!(screen.contains("off       server noted"), "{screen}");
    let _ = std::fs::remove_file(home.join("data/p/noted-started"));
    let answers = session(
        tmp.path(),
        &home,
        "commands\nrun Bash {\"command\": \"ls\"}\nquit\n",
    );
    assert_eq!(answers[0]["commands"], json!([]), "{answers:?}");
    assert!(!ran(&home, "bash-hook") && ran(&home, "post-hook"));
    assert!(!ran(&home, "noted-started"));
    let json: Value = serde_json::from_str(&ok(&yep(&home, &["list", "--json"]))).unwrap();
    assert_eq!(
        json[0]["off"],
        json!({"hooks": ["PreToolUse:Bash"], "servers": ["noted"], "commands": ["tidy"]})
    );
}

#[test]
fn identical_servers_of_two_plugins_run_as_one_process_and_yep_list_names_both() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // One server outside both plugins, which notes each start.
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let rmcp = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-bench-rmcp");
    std::fs::copy(&rmcp, bin.join("yep-bench-rmcp")).unwrap();
    let serve = bin.join("serve");
    std::fs::write(
        &serve,
        format!(
            "#!/bin/sh\necho $$ >> \"$CLAUDE_PLUGIN_DATA/started\"\nexec \"{}\"\n",
            bin.join("yep-bench-rmcp").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Each start, in the data dir it runs with (the sandbox lets it write there only).
    let starts = |home: &Path| -> Vec<(String, usize)> {
        let mut seen = Vec::new();
        for dir in std::fs::read_dir(home.join("data")).unwrap() {
            let dir = dir.unwrap().path();
            if let Ok(text) = std::fs::read_to_string(dir.join("started")) {
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                seen.push((name, text.lines().count()));
                std::fs::remove_file(dir.join("started")).unwrap();
            }
        }
        seen
    };
    for name in ["p", "q"] {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(".mcp.json"),
            json!({"srv": {"command": serve}}).to_string(),
        )
        .unwrap();
        ok(&yep(&home, &["install", dir.to_str().unwrap(), "--yes"]));
        ok(&yep(&home, &["enable", name]));
    }
    let listed = ok(&yep_in(tmp.path(), &home, &["list"], ""));
    assert!(
        listed.contains("MCP server p__srv runs as one process with q__srv")
            && listed.contains("MCP server q__srv runs as one process with p__srv"),
        "{listed}"
    );
    let json: Value = serde_json::from_str(&ok(&yep(&home, &["list", "--json"]))).unwrap();
    assert_eq!(json[0]["shared"], json!([["p__srv", "q__srv"]]), "{json}");
    // Approving started each once; a session starts one for both.
    assert_eq!(starts(&home).len(), 2);
    let answers = session(
        tmp.path(),
        &home,
        "tools\ncall mcp__p__srv__echo {\"text\": \"p\"}\ncall mcp__q__srv__echo {\"text\": \"q\"}\nquit\n",
    );
    let tools = answers[0]["tools"].to_string();
    assert!(
        tools.contains("mcp__p__srv__echo") && tools.contains("mcp__q__srv__echo"),
        "{tools}"
    );
    assert_eq!(
        answers[1]["result"]["content"][0]["text"],
        r#"{"echoed":"p"}"#
    );
    assert_eq!(
        answers[2]["result"]["content"][0]["text"],
        r#"{"echoed":"q"}"#
    );
    // One start, in a data dir of its own: neither plugin's.
    let started = starts(&home);
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(
        started[0].0.starts_with("mcp.shared.") && started[0].1 == 1,
        "{started:?}"
    );
    // A grant for one of them alone makes them two.
    ok(&yep(
        &home,
        &["grant", "p__srv", "net:example.com", "--yes"],
    ));
    let listed = ok(&yep_in(tmp.path(), &home, &["list"], ""));
    assert!(!listed.contains("runs as one process"), "{listed}");
}
