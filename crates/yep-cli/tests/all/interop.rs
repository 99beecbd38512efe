//! Programs other people wrote, run unmodified against the real binary: zot's own example
//! extensions (`../shared/interop/zot`, or `$YEP_ZOT_INTEROP`), each checked for what its
//! README says it does, and the MCP Inspector's CLI against `yep mcp serve`.

use crate::common;
use common::zot::built_zot_corpus;
use common::{ok, text, yep_at};
use serde_json::{Value, json};
use std::path::Path;

/// Each line of a `session --json` run, parsed.
fn session_lines(said: &str) -> Vec<Value> {
    said.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn zots_examples_do_what_their_readmes_say_contained() {
    let tmp = tempfile::tempdir().unwrap();
    let root = built_zot_corpus(tmp.path());
    let examples = root.join("examples/extensions");
    let (home, ws) = (tmp.path().join("home"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let run = |args: &[&str], stdin: &str| {
        yep_at(
            Some(&ws),
            &home,
            args,
            stdin,
            &[("YEP_SANDBOX", "required")],
        )
    };
    // `todo` is `go run .` of a module replaced by the copy, which it must read; scratchpad
    // keeps its notes in the workspace's `.zot/`, which a zot extension may.
    let read_copy = format!("read:{}", root.display());
    for (dir, grants) in [
        ("clock", vec![]),
        ("scratchpad", vec![]),
        ("hello", vec![]),
        ("weather", vec![]),
        ("guard", vec![]),
        ("todo", vec![read_copy.as_str()]),
    ] {
        let path = examples.join(dir);
        let mut args = vec!["install", path.to_str().unwrap(), "--yes"];
        for grant in &grants {
            args.extend(["--grant", grant]);
        }
        ok(&run(&args, ""));
    }
    for name in [
        "clock",
        "scratchpad",
        "hello",
        "weather",
        "guard",
        "todo-panel",
    ] {
        ok(&run(&["enable", name], ""));
    }
    let script = [
        // scratchpad (`npx -y tsx`): commands that keep notes in the workspace, a tool that
        // reads them.
        "command scratchpad:note buy milk",
        "command scratchpad:notes",
        "call read_notes {}",
        "command scratchpad:note",
        // hello: a prompt and a display.
        "command hello:hello yep",
        "command hello:summon",
        // weather: a tool, and its error.
        r#"call weather {"city": "Berlin"}"#,
        r#"call weather {"city": " "}"#,
        // clock (Node): display and prompt.
        "command clock:now",
        "command clock:uptime",
        // guard: refuses `rm -rf`, lets `ls` through.
        r#"pre bash {"command": "rm -rf /tmp/foo"}"#,
        r#"pre bash {"command": "ls /tmp"}"#,
        // todo (`go run .`): its panel, and its keys: add "hi", toggle the first, delete it.
        "command todo-panel:todo",
        "key rune a",
        "key rune h",
        "key rune i",
        "key enter",
        "key up",
        "key rune x",
        "key rune d",
        "key esc",
        r#"call todo_manage {"action": "list"}"#,
        "quit",
    ]
    .join("\n");
    let out = run(&["session", "--json"], &script);
    let said = text(&out.stdout);
    assert!(
        !said.contains("\"warning\""),
        "{said}\n{}",
        text(&out.stderr)
    );
    let l = session_lines(&said);
    assert_eq!(l.len(), 22, "{said}");
    assert_eq!(l[0]["message"], "noted (#1): buy milk", "{said}");
    assert!(l[1]["message"].as_str().unwrap().ends_with("] buy milk"));
    let read = &l[2]["result"]["content"][0]["text"];
    assert!(read.as_str().unwrap().ends_with("] buy milk"), "{said}");
    assert_eq!(l[3]["success"], false, "{said}");
    assert!(
        l[3]["message"]
            .as_str()
            .unwrap()
            .contains("usage is /note <text>")
    );
    let notes = std::fs::read_to_string(ws.join(".zot/scratchpad-notes.jsonl")).unwrap();
    assert!(notes.contains("\"text\":\"buy milk\""), "{notes}");

    assert_eq!(
        l[4]["message"],
        "Greet yep with a short, slightly absurd compliment."
    );
    assert_eq!(
        l[5]["message"],
        "a wisp of incense curls past your terminal."
    );
    let weather = l[6]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        weather.starts_with("Berlin: ") && weather.contains("°C"),
        "{said}"
    );
    assert_eq!(l[7]["error"], "city is required", "{said}");
    assert!(l[8]["message"].as_str().unwrap().starts_with("local: "));
    assert!(l[9]["message"].as_str().unwrap().contains("running for"));

    assert_eq!(l[10]["decision"], "block", "{said}");
    assert_eq!(l[10]["extension"], "guard");
    assert!(
        l[10]["reason"]
            .as_str()
            .unwrap()
            .starts_with("guard refused: ")
    );
    assert_eq!(l[11]["decision"], "allow", "{said}");
    let audit = std::fs::read_to_string(home.join("logs/guard.log")).unwrap();
    assert!(
        audit.contains("[guard] session_start")
            && audit.contains("[guard] BLOCKED bash: rm -rf /tmp/foo"),
        "{audit}"
    );

    assert_eq!(
        l[12]["message"],
        "Todos (0/1 done)\n› □ Build something fun"
    );
    let panel = |i: usize| l[i]["panel"].clone();
    assert_eq!(panel(13)["id"], "todos-main", "{said}");
    assert_eq!(panel(13)["lines"][0], "  Add todo");
    assert_eq!(panel(15)["lines"][2], "  hi▌");
    assert_eq!(
        panel(16)["lines"],
        json!(["  □ Build something fun", "› □ hi"])
    );
    assert_eq!(panel(18)["title"], "Todos (1/2 done)", "{said}");
    assert_eq!(panel(19)["lines"], json!(["› □ hi"]), "{said}");
    assert_eq!(panel(20), Value::Null, "esc closes it: {said}");
    assert_eq!(l[21]["result"]["content"][0]["text"], "[ ] hi", "{said}");
}

/// guard, run as its README says (outside the sandbox, whose private temp dir would take its
/// audit file with it when it ends): it audits each lifecycle event to `$TMPDIR/zot-guard-
/// audit.log`, and the events yep sends it carry the session, the workspace and a sequence
/// number that only grows. The frames are read off a `tee` in front of the built binary.
#[test]
fn guard_audits_the_events_yep_sends_and_each_carries_a_growing_sequence() {
    let tmp = tempfile::tempdir().unwrap();
    let root = built_zot_corpus(tmp.path());
    let guard = root.join("examples/extensions/guard");
    let frames = tmp.path().join("frames.ndjson");
    std::fs::rename(guard.join("guard"), guard.join("guard.bin")).unwrap();
    let tee = format!(
        "#!/bin/sh\ntee -a '{}' | \"$(dirname \"$0\")/guard.bin\"\n",
        frames.display()
    );
    std::fs::write(guard.join("guard"), tee).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(guard.join("guard"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (home, ws, temp) = (
        tmp.path().join("home"),
        tmp.path().join("ws"),
        tmp.path().join("temp"),
    );
    for dir in [&ws, &temp] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let env = [("YEP_SANDBOX", "off"), ("TMPDIR", temp.to_str().unwrap())];
    let run = |args: &[&str], stdin: &str| yep_at(Some(&ws), &home, args, stdin, &env);
    ok(&run(&["install", guard.to_str().unwrap(), "--yes"], ""));
    ok(&run(&["enable", "guard"], ""));
    std::fs::write(&frames, "").unwrap();
    let script = [
        r#"emit turn_start {"step": 2}"#,
        r#"emit tool_call {"tool_id": "call-1", "tool_name": "bash", "tool_args": {"command": "rm -rf /tmp/foo"}}"#,
        r#"pre bash {"command": "rm -rf /tmp/foo"}"#,
        r#"emit turn_end {"stop": "end_turn"}"#,
        "quit",
    ]
    .join("\n");
    let said = ok(&run(&["session", "--json"], &script));
    assert!(said.contains("\"decision\":\"block\""), "{said}");

    let audit = std::fs::read_to_string(temp.join("zot-guard-audit.log")).unwrap();
    for line in [
        "[guard] session_start",
        "[guard] turn_start step=2",
        r#"[guard] tool_call bash args={"command":"rm -rf /tmp/foo"}"#,
        "[guard] BLOCKED bash: rm -rf /tmp/foo",
        "[guard] turn_end stop=end_turn",
    ] {
        assert!(audit.contains(line), "no `{line}` in the audit:\n{audit}");
    }
    let sent: Vec<Value> = std::fs::read_to_string(&frames)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&Value> = sent.iter().filter(|f| f["type"] == "event").collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["session_start", "turn_start", "tool_call", "turn_end"],
        "{sent:#?}"
    );
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    let session = events[0]["session_id"].as_str().unwrap();
    assert!(!session.is_empty());
    for event in &events {
        assert_eq!(event["session_id"], session, "{event}");
        assert_eq!(Path::new(event["cwd"].as_str().unwrap()), ws, "{event}");
    }
}

/// A home with `lazy` (the fixture's tool `t1` and a skill `notes`) and the echo example
/// (tools, and the prompt `echo:ping`), both enabled.
fn inspector_home(tmp: &Path) -> std::path::PathBuf {
    let home = tmp.join("home");
    let bin = |name: &str| Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name(name);
    let lazy = tmp.join("src/lazy");
    std::fs::create_dir_all(lazy.join("skills/notes")).unwrap();
    let manifest = json!({"name": "lazy", "version": "1.0.0", "description": "lazy", "yolop": {
        "capabilityServer": {"command": bin("yep-fixture"), "args": [json!({"name": "lazy", "tools": ["t1"]}).to_string()]},
        "tools": [{"name": "t1", "description": "echoes its arguments"}],
        "skills": true}});
    std::fs::write(lazy.join("plugin.json"), manifest.to_string()).unwrap();
    std::fs::write(
        lazy.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: how to take notes\n---\nWrite them down.\n",
    )
    .unwrap();
    let echo = tmp.join("src/echo");
    std::fs::create_dir_all(&echo).unwrap();
    let mut manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/echo/plugin.json"
        ))
        .unwrap(),
    )
    .unwrap();
    manifest["yolop"]["capabilityServer"]["command"] = json!(bin("yep-example-echo"));
    std::fs::write(echo.join("plugin.json"), manifest.to_string()).unwrap();
    for (name, dir) in [("lazy", &lazy), ("echo", &echo)] {
        ok(&common::yep_with_stdin(
            &home,
            &["install", dir.to_str().unwrap(), "--yes"],
            "",
        ));
        ok(&common::yep_with_stdin(&home, &["enable", name], ""));
    }
    home
}

/// `mcp-inspector --cli` (the MCP Inspector, which `scripts/test` installs pinned) with
/// `args`, its own `HOME` in `tmp`: what it printed, as JSON, or its error.
#[allow(clippy::disallowed_methods)] // the Inspector is the client under which yep runs
fn inspect(tmp: &Path, args: &[&str]) -> Result<Value, String> {
    let out = std::process::Command::new("mcp-inspector")
        .arg("--cli")
        .args(args)
        .env("HOME", tmp)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("mcp-inspector: {e} (`scripts/test` installs it into target/peers)")
        });
    let said = text(&out.stdout);
    match serde_json::from_str::<Value>(&said) {
        Ok(v) if out.status.success() && v.get("error").is_none() => Ok(v),
        _ => Err(format!("{said}{}", text(&out.stderr))),
    }
}

/// What the Inspector is used for first, through `yep mcp serve` reached by `target`: tools,
/// a call, prompts, a prompt, resources and one read.
fn inspector_sees_the_extensions(tmp: &Path, target: &[&str]) {
    let run = |method: &[&str]| {
        let mut args: Vec<&str> = method.to_vec();
        args.extend(target);
        inspect(tmp, &args).unwrap_or_else(|e| panic!("{method:?}: {e}"))
    };
    let names = |v: &Value, list: &str, key: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|t| t[key].as_str().unwrap().to_string())
            .collect()
    };
    let tools = run(&["--method", "tools/list"]);
    assert_eq!(
        names(&tools, "tools", "name"),
        ["t1", "echo", "count", "ask"],
        "{tools}"
    );
    let called = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "text=hi",
    ]);
    assert_eq!(called["structuredContent"]["echoed"], "hi", "{called}");
    assert_eq!(called["isError"], false);
    let prompts = run(&["--method", "prompts/list"]);
    assert_eq!(names(&prompts, "prompts", "name"), ["echo:ping"]);
    let prompt = run(&["--method", "prompts/get", "--prompt-name", "echo:ping"]);
    assert_eq!(prompt["messages"][0]["content"]["text"], "pong", "{prompt}");
    let resources = run(&["--method", "resources/list"]);
    assert_eq!(
        names(&resources, "resources", "uri"),
        ["skill://lazy/notes/SKILL.md", "skill://index.json"]
    );
    let read = run(&[
        "--method",
        "resources/read",
        "--uri",
        "skill://lazy/notes/SKILL.md",
    ]);
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Write them down.")),
        "{read}"
    );
}

#[test]
fn the_mcp_inspector_cli_lists_calls_gets_and_reads_through_yep_mcp_serve_over_stdio() {
    let tmp = tempfile::tempdir().unwrap();
    let home = inspector_home(tmp.path());
    // The Inspector passes a server only the environment it names.
    let home_env = format!("YEP_HOME={}", home.display());
    let yep = env!("CARGO_BIN_EXE_yep");
    inspector_sees_the_extensions(tmp.path(), &["-e", &home_env, "--", yep, "mcp", "serve"]);
}

#[test]
fn the_mcp_inspector_cli_works_over_http_with_the_bearer_token_and_not_without() {
    let tmp = tempfile::tempdir().unwrap();
    let home = inspector_home(tmp.path());
    let (server, url, _) = common::serve_http(&home, "127.0.0.1:0", &[]);
    let token = std::fs::read_to_string(home.join("mcp-serve.token")).unwrap();
    let bearer = format!("Authorization: Bearer {}", token.trim());
    // Options, not the positional URL, which a variadic `--tool-arg` before it would take.
    let target = [
        "--server-url",
        url.as_str(),
        "--transport",
        "http",
        "--header",
        &bearer,
    ];
    inspector_sees_the_extensions(tmp.path(), &target);
    let wrong = [
        "--method",
        "tools/list",
        "--server-url",
        &url,
        "--transport",
        "http",
        "--header",
        "Authorization: Bearer not-the-token",
    ];
    let refused = inspect(tmp.path(), &wrong).unwrap_err();
    // Refused at the door: the Inspector takes the 401 for a server that wants a login.
    assert!(
        refused.contains("auth") && !refused.contains("\"t1\""),
        "{refused}"
    );
    drop(server);
}

/// The official TypeScript client (`tests/mcp/ts_revisions.mjs`) at `revision`, against
/// `yep mcp serve` reached as `target`: its report.
fn ts_client(revision: &str, target: &[&str]) -> Value {
    let mut args = vec![revision];
    args.extend(target);
    common::node_report("ts_revisions.mjs", &args)
}

#[test]
fn yep_mcp_serve_speaks_each_mcp_revision_to_the_official_typescript_client() {
    let tmp = tempfile::tempdir().unwrap();
    let home = inspector_home(tmp.path());
    let yep = env!("CARGO_BIN_EXE_yep");
    let (server, url, _) = common::serve_http(&home, "127.0.0.1:0", &[]);
    let token = std::fs::read_to_string(home.join("mcp-serve.token")).unwrap();
    let stdio = ["stdio", yep, home.to_str().unwrap()];
    let http = ["http", url.as_str(), token.trim()];
    let mut orders = Vec::new();
    for revision in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        for target in [&stdio, &http] {
            let report = ts_client(revision, target);
            let about = format!("{revision} over {}: {report}", target[0]);
            assert!(report.get("error").is_none(), "{about}");
            assert_eq!(report["negotiated"], revision, "{about}");
            assert_eq!(report["call"], json!({"echoed": "hi"}), "{about}");
            assert_eq!(report["prompts"], json!(["echo:ping"]), "{about}");
            assert_eq!(
                report["resources"],
                json!(["skill://lazy/notes/SKILL.md", "skill://index.json"]),
                "{about}"
            );
            // The same tools in the same order: listed twice, and at every revision.
            assert_eq!(report["tools"], report["tools_again"], "{about}");
            orders.push(report["tools"].clone());
        }
    }
    assert!(orders.windows(2).all(|w| w[0] == w[1]), "{orders:?}");
    assert_eq!(orders[0], json!(["t1", "echo", "count", "ask"]));
    drop(server);
}
