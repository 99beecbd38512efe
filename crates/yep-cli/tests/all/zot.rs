//! zot extensions as packages, through the CLI: `extension.json` installs with the same
//! verbs as a YEP package, its first run's registrations are shown and pinned, it runs in its
//! own directory with its state in a data dir outside the approved files, and a later run
//! that registers more than the pin is held to it until `yep trust` (or `yep update`) asks again.
//!
//! The extension is `tests/zot/todo`, a Python one written here after zot's `todo` example
//! (older generation: registrations before `hello_ack`, no `ready`).

use crate::common;
use common::{git, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// A copy of the fixture in a directory named `todo`: the manifest says `todo-panel`.
    fn source(&self) -> PathBuf {
        let dir = self.tmp.path().join("src").join("todo");
        std::fs::create_dir_all(&dir).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zot/todo");
        for file in ["extension.json", "todo.py"] {
            std::fs::copy(fixture.join(file), dir.join(file)).unwrap();
        }
        dir
    }

    fn yep(&self, args: &[&str]) -> Output {
        self.yep_env(args, "", &[])
    }

    /// The CLI with `stdin` as its input and `env` added (the extension inherits it). A
    /// sandboxed extension inherits none of the user's environment, so a fixture steered by
    /// `env` runs unsandboxed; containment has its own tests (tests/sandbox.rs).
    fn yep_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        let mut env = env.to_vec();
        if !env.is_empty() {
            env.push(("YEP_SANDBOX", "off"));
        }
        common::yep_with_env(&self.home(), args, stdin, &env)
    }

    /// `yep session --json` fed `script`: one JSON value per command (warnings apart).
    fn session(&self, script: &str, env: &[(&str, &str)]) -> Vec<Value> {
        self.session_lines(script, env)
            .into_iter()
            .filter(|v| v.get("warning").is_none())
            .collect()
    }

    /// Every line `yep session --json` wrote for `script`, warnings too.
    fn session_lines(&self, script: &str, env: &[(&str, &str)]) -> Vec<Value> {
        let out = self.yep_env(&["session", "--json"], script, env);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
            .collect()
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.home().join("extensions.lock")).unwrap()
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

#[test]
fn a_zot_extension_installs_runs_in_its_dir_keeps_state_apart_and_is_held_to_its_pin() {
    let env = Env::new();
    let src = env.source();
    let src_arg = src.to_str().unwrap();

    // Install: the first run's registrations are the summary, and the pin.
    let out = env.yep(&["install", src_arg, "--yes", "--json"]);
    let summary = ok(&out);
    common::stable(env.tmp.path()).bind(|| {
        insta::assert_snapshot!("zot_install_summary", summary);
    });
    let installed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(installed[0]["name"], "todo-panel", "{installed}");
    let lock = env.lock();
    assert!(lock.contains("name = \"todo-panel\""), "{lock}");
    assert!(lock.contains("intercepts = [\"tool_call\"]"), "{lock}");
    assert!(lock.contains("events = [\"session_start\"]"), "{lock}");
    ok(&env.yep(&["enable", "todo-panel"]));

    // A session: its tool, its cwd (its own directory), its guard and its command.
    let package = env.home().join("extensions").join("todo-panel");
    let replies = env.session(
        concat!(
            "call todo_manage {\"action\":\"add\",\"title\":\"water the plants\"}\n",
            "call todo_manage {\"action\":\"where\"}\n",
            "call todo_manage {\"action\":\"fail\"}\n",
            "pre bash {\"command\":\"rm -rf /\"}\n",
            "pre bash {\"command\":\"ls\"}\n",
            "command todo-panel:TODO count\n",
            "quit\n"
        ),
        &[],
    );
    assert_eq!(
        replies[0],
        json!({"result": {"content": [{"type": "text", "text": "water the plants"}], "is_error": false, "structured_content": {"count": 1}}})
    );
    let cwd = replies[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        Path::new(cwd).canonicalize().unwrap(),
        package.canonicalize().unwrap()
    );
    // A tool error is the tool's own text, as every wire's is.
    assert_eq!(replies[2], json!({"error": "no such action"}));
    assert_eq!(replies[3]["decision"], "block", "{replies:?}");
    assert_eq!(replies[3]["reason"], "todo-panel refused rm -rf");
    assert_eq!(replies[4]["decision"], "allow", "{replies:?}");
    // Any case finds the command; the extension hears the registered spelling.
    assert_eq!(
        replies[5],
        json!({"success": true, "message": "1 todos (todo)"})
    );

    // Its state is in the data dir, outside the approved files: no drift.
    let state = env
        .home()
        .join("data")
        .join("todo-panel")
        .join("todos.json");
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "[\"water the plants\"]"
    );
    assert!(!package.join("todos.json").exists());
    let list: Value = serde_json::from_slice(&env.yep(&["list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["drifted"], false, "{list}");
    assert_eq!(
        list[0]["tools"],
        json!(["todo_manage", "todo_archive", "todo_pick"]),
        "{list}"
    );

    // An update keeps the state.
    let manifest = src.join("extension.json");
    let bumped = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("0.1.0", "0.1.1");
    std::fs::write(&manifest, bumped).unwrap();
    let out = env.yep(&["update", "todo-panel", "--json"]);
    ok(&out);
    let updated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(updated[0]["outcome"], "updated", "{updated}");
    let replies = env.session("call todo_manage {\"action\":\"list\"}\nquit\n", &[]);
    assert_eq!(
        replies[0]["result"]["content"][0]["text"],
        "water the plants"
    );

    // A run that registers more than the pin: the extra tool is refused, the extra
    // capability too.
    let widen = [("TODO_WIDEN", "1")];
    let lines = env.session_lines("tools\ncall todo_purge {}\nquit\n", &widen);
    // What it registered beyond the pin is withheld, and said so.
    assert_eq!(
        lines[0]["warning"],
        "extension `todo-panel` registered more than was approved (intercept turn_start, capability call_tool); that is withheld (`yep trust todo-panel` asks again)"
    );
    let replies: Vec<Value> = lines
        .into_iter()
        .filter(|v| v.get("warning").is_none())
        .collect();
    let tools = replies[0]["tools"].to_string();
    assert!(!tools.contains("todo_purge"), "{tools}");
    assert!(replies[1]["error"].is_string(), "{replies:?}");
    assert!(!std::fs::read_to_string(&state).unwrap().is_empty());

    // `yep trust` (the verb for MCP servers too) runs it again, shows the diff and asks:
    // refused without a terminal ...
    let out = env.yep_env(&["trust", "todo-panel"], "", &widen);
    assert!(!out.status.success());
    common::stable(env.tmp.path()).bind(|| {
        insta::assert_snapshot!("zot_trust_widened_refused", text(&out.stderr));
    });
    assert!(!env.lock().contains("turn_start"));
    // ... and with consent the new pin holds.
    ok(&env.yep_env(&["trust", "todo-panel", "--yes"], "", &widen));
    assert!(env.lock().contains("\"turn_start\""), "{}", env.lock());
    let replies = env.session("call todo_purge {}\nquit\n", &widen);
    assert_eq!(replies[0]["result"]["content"][0]["text"], "purged");
}

#[test]
fn a_zot_re_pin_shows_a_changed_tools_text_marked_and_asks_first() {
    let env = Env::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/tool-text-invisible/zot");
    let src = env.tmp.path().join("src").join("notes");
    std::fs::create_dir_all(&src).unwrap();
    for file in ["extension.json", "note.py"] {
        std::fs::copy(fixture.join(file), src.join(file)).unwrap();
    }
    ok(&env.yep(&["install", src.to_str().unwrap(), "--yes"]));
    let before = env.lock();
    let hostile = [("NOTES_TURN", "hostile")];
    let out = env.yep_env(&["trust", "notes-zot"], "", &hostile);
    assert!(!out.status.success());
    let said = text(&out.stderr);
    common::assert_nothing_hidden(&said);
    common::stable(env.tmp.path())
        .bind(|| insta::assert_snapshot!("zot_trust_hidden_text_marked", said));
    assert_eq!(env.lock(), before, "re-pinned without asking");
    ok(&env.yep_env(&["trust", "notes-zot", "--yes"], "", &hostile));
    assert_ne!(env.lock(), before);
}

#[test]
fn a_zot_extension_that_fails_its_first_run_is_not_installed_and_the_error_says_where() {
    let env = Env::new();
    let src = env.source();
    std::fs::write(
        src.join("todo.py"),
        "import sys\nprint('booting', flush=True)\nsys.exit(2)\n",
    )
    .unwrap();
    let out = env.yep(&["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    for part in [
        "todo-panel",
        "first frame must be hello",
        "`python3 todo.py`",
        "(python)",
        "log:",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(!env.home().join("extensions").join("todo-panel").exists());
}

#[test]
fn a_zot_name_yep_cannot_use_is_refused_clearly() {
    let env = Env::new();
    let src = env.source();
    std::fs::write(
        src.join("extension.json"),
        r#"{"name": "todo panel", "exec": "python3", "args": ["todo.py"]}"#,
    )
    .unwrap();
    let out = env.yep(&["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("is not one yep can use"), "{err}");
    assert!(err.contains("extension.json"), "{err}");
}

/// A launcher that builds first (`go run .`) is given minutes to say hello, and the user is
/// told why while it waits; any other start keeps the ordinary deadline. The deadline is
/// shortened here (`YEP_ZOT_HELLO_WAIT_MS`) and the `go` is the package's own `bin/go`, which
/// takes longer than that before it runs the extension.
#[test]
fn a_launcher_that_builds_first_is_waited_for_and_said_and_any_other_keeps_the_deadline() {
    let env = Env::new();
    let short = [("YEP_ZOT_HELLO_WAIT_MS", "300")];
    let dir = started_by_go(&env, "#!/bin/sh\nsleep 1\nexec python3 greeter.py\n");
    let out = common::yep_with_env(
        &env.home(),
        &["install", dir.to_str().unwrap(), "--yes"],
        "",
        &short,
    );
    let err = ok(&out);
    assert!(
        err.contains(
            "waiting for greeter's hello: `go run .` builds on its first start (up to 10 min)"
        ),
        "{err}"
    );
    assert!(env.lock().contains("name = \"greeter\""));

    // The same wait before an extension started as it is: past the deadline, it fails.
    std::fs::write(
        dir.join("extension.json"),
        r#"{"name": "slowpoke", "exec": "sh", "args": ["bin/go"]}"#,
    )
    .unwrap();
    let out = common::yep_with_env(
        &env.home(),
        &["install", dir.to_str().unwrap(), "--yes"],
        "",
        &short,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("no hello within 300 ms"), "{err}");
    assert!(!err.contains("waiting for"), "{err}");
}

/// The greeter fixture as a zot extension started by `go run .`, whose `go` is the package's
/// own `bin/go`: `script`.
fn started_by_go(env: &Env, script: &str) -> std::path::PathBuf {
    let dir = env.fixture("greeter");
    std::fs::write(
        dir.join("extension.json"),
        r#"{"name": "greeter", "exec": "go", "args": ["run", "."]}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let go = dir.join("bin/go");
    std::fs::write(&go, script).unwrap();
    let exe = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&go, exe).unwrap();
    dir
}

/// `go run`'s caches are the ones the sandbox lets it write: a `go` launcher sees `GOCACHE`
/// and `GOMODCACHE` (made when missing), so the install-time run fills the caches every later
/// start reuses, and a credential-carrying `GOPROXY` never reaches it. The `go` is the
/// package's own `bin/go`, which writes where the variables point, then runs the extension.
#[test]
fn a_go_launcher_sees_and_may_write_the_caches_go_would_use() {
    let env = Env::new();
    let dir = started_by_go(
        &env,
        concat!(
            "#!/bin/sh\nset -e\n",
            "echo built > \"$GOCACHE/warm\"\necho fetched > \"$GOMODCACHE/warm\"\n",
            "echo \"proxy=$GOPROXY\" >&2\n",
            "exec python3 greeter.py\n"
        ),
    );
    let caches = env.tmp.path().join("caches");
    let (build, modules) = (caches.join("go-build"), caches.join("mod"));
    let out = common::yep_with_env(
        &env.home(),
        &["install", dir.to_str().unwrap(), "--yes"],
        "",
        &[
            ("YEP_SANDBOX", "required"),
            ("GOCACHE", build.to_str().unwrap()),
            ("GOMODCACHE", modules.to_str().unwrap()),
            ("GOPROXY", "https://user:secret@proxy.example"),
        ],
    );
    ok(&out);
    assert_eq!(
        std::fs::read_to_string(build.join("warm")).unwrap(),
        "built\n"
    );
    assert_eq!(
        std::fs::read_to_string(modules.join("warm")).unwrap(),
        "fetched\n"
    );
    let log = std::fs::read_to_string(env.home().join("logs/greeter.log")).unwrap();
    assert!(log.contains("proxy=\n") && !log.contains("secret"), "{log}");
}

/// `"enabled": false` is zot's off switch, and zot never starts such an extension: yep
/// installs it without running it, says so, refuses to enable it, and never starts it; making
/// it true and updating runs it for the first time, asking first as an install does.
#[test]
fn a_zot_extension_its_manifest_turns_off_is_installed_but_never_started() {
    let env = Env::new();
    let dir = env.fixture("greeter");
    let arg = dir.to_str().unwrap();
    let manifest = |enabled: &str| {
        std::fs::write(
            dir.join("extension.json"),
            format!(r#"{{"name": "greeter", "exec": "python3", "args": ["greeter.py"]{enabled}}}"#),
        )
        .unwrap()
    };
    let log = env.home().join("logs/greeter.log");
    manifest(r#", "Enabled": false"#);
    let out = env.yep(&["install", arg, "--yes"]);
    let err = ok(&out);
    assert!(
        !err.contains("installing runs"),
        "not asked to run it: {err}"
    );
    assert!(err.contains("turned off: installing did not"), "{err}");
    assert!(
        err.contains("  off       its extension.json says \"enabled\": false, so zot"),
        "{err}"
    );
    assert!(
        text(&out.stdout).contains("  off: its extension.json says \"enabled\": false"),
        "{}",
        text(&out.stdout)
    );
    assert!(!log.exists(), "it ran");
    let installed: Value =
        serde_json::from_slice(&env.yep(&["update", "greeter", "--json"]).stdout).unwrap();
    assert_eq!(installed[0]["disabled_in_manifest"], true, "{installed}");

    let out = env.yep(&["enable", "greeter"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("`greeter` is off in its extension.json (\"enabled\": false)"),
        "{err}"
    );
    assert!(
        err.contains("hint: set \"enabled\": true in its extension.json"),
        "{err}"
    );

    // Turned on in its manifest, the update is its first run: asked first, as an install.
    manifest("");
    let out = env.yep(&["update", "greeter"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("installing runs `python3 greeter.py`"),
        "{}",
        text(&out.stderr)
    );
    assert!(!log.exists(), "it ran before it was approved");
    ok(&env.yep(&["update", "greeter", "--yes"]));
    assert!(log.exists());
    ok(&env.yep(&["enable", "greeter"]));
    let greet = ["call", "greeter", "greet", r#"{"who": "zot", "times": 1}"#];
    assert!(text(&ok_out(&env.yep(&greet))).contains("hello zot"));

    // Turned off again while enabled: never started, and said.
    manifest(r#", "enabled": false"#);
    let out = env.yep(&["update", "greeter", "--yes"]);
    assert!(
        text(&out.stdout).contains("  off: "),
        "{}",
        text(&out.stdout)
    );
    let out = env.yep(&greet);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("extension `greeter` is off in its extension.json"),
        "{}",
        text(&out.stderr)
    );
    let lines = env.session_lines("quit\n", &[]);
    assert!(
        lines.iter().any(|l| l["warning"].as_str().is_some_and(
            |w| w.contains("skipping extension `greeter`: extension `greeter` is off")
        )),
        "{lines:?}"
    );
}

/// Its output, having checked that it succeeded (else both streams are shown).
fn ok_out(out: &Output) -> Vec<u8> {
    ok(out);
    out.stdout.clone()
}

/// An `exec` that is a whole command line runs nowhere, under zot as under yep (no shell,
/// nothing split): `yep install` refuses it before anything runs, and a start from the
/// directory (`yep call <dir>`) fails; both say how to write it.
#[test]
fn an_exec_that_is_a_whole_command_line_is_refused_with_the_fix() {
    let env = Env::new();
    let src = env.source();
    std::fs::write(
        src.join("extension.json"),
        r#"{"name": "todo-panel", "exec": "python3 todo.py", "language": "python"}"#,
    )
    .unwrap();
    let fix = r#""exec": "python3", "args": ["todo.py"]"#;
    let out = env.yep(&["install", src.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    for part in [
        "extension.json",
        "`exec` is a whole command line (\"python3 todo.py\")",
        "no shell",
        fix,
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        !err.contains("approved (--yes)"),
        "refused before consent: {err}"
    );
    assert!(!env.home().join("extensions.lock").exists());

    let parent = src.parent().unwrap();
    let out = common::yep_in(parent, &env.home(), &["call", "./todo", "todo_manage"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    for part in ["cannot spawn `python3 todo.py`", "whole command line", fix] {
        assert!(err.contains(part), "{part}: {err}");
    }
}

/// Keys zot does not read install as zot installs them, and are said: in the summary (escaped)
/// and in `--json`. Keys zot reads match in any case, as Go's decoder matches them.
#[test]
fn manifest_keys_nothing_reads_are_shown_at_install_and_any_case_is_read() {
    let env = Env::new();
    let src = env.source();
    std::fs::write(
        src.join("extension.json"),
        r#"{"Name": "todo-panel", "EXEC": "python3", "Args": ["todo.py"], "version": null,
            "permissions": ["fs", "net"], "env": {"TOKEN": "x"}, "evil\u001b[2J": 1}"#,
    )
    .unwrap();
    let out = env.yep(&["install", src.to_str().unwrap(), "--yes", "--json"]);
    let summary = ok(&out);
    common::assert_nothing_hidden(&summary);
    assert!(
        summary
            .lines()
            .any(|l| l == "  ignored   env, evil\\x1b[2J, permissions (zot ignores them too)"),
        "{summary}"
    );
    let installed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        installed[0]["ignored"],
        json!(["env", "evil\\x1b[2J", "permissions"]),
        "{installed}"
    );
    assert!(
        installed[0]["summary"]
            .as_str()
            .unwrap()
            .contains("ignored   env"),
        "{installed}"
    );
    // Without such keys, neither says anything.
    let plain = env.fixture("clock");
    let out = env.yep(&["install", plain.to_str().unwrap(), "--yes", "--json"]);
    assert!(!ok(&out).contains("ignored"));
    let installed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(installed[0].get("ignored").is_none(), "{installed}");
}

impl Env {
    /// A fixture from `tests/zot/<name>`, installed.
    fn install_fixture(&self, name: &str) {
        let dir = self.fixture(name);
        ok(&self.yep(&["install", dir.to_str().unwrap(), "--yes"]));
    }

    /// A copy of the fixture `tests/zot/<name>`, in `src/<name>`.
    fn fixture(&self, name: &str) -> PathBuf {
        let dir = self.tmp.path().join("src").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/zot")
            .join(name);
        for entry in std::fs::read_dir(&fixture).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        dir
    }

    /// The echo example (a YEP server: `yep serve-example-echo`), installed.
    fn install_echo(&self) {
        let pkg = self.tmp.path().join("echo-pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
        manifest["yolop"]["capabilityServer"] =
            json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
        std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
        ok(&self.yep(&["install", pkg.to_str().unwrap(), "--yes"]));
    }
}

/// The text of a session reply: a result's first block, or the error.
fn said(reply: &Value) -> String {
    match reply["result"]["content"][0]["text"].as_str() {
        Some(text) => text.to_string(),
        None => reply["error"].as_str().unwrap_or_default().to_string(),
    }
}

#[test]
fn call_tool_runs_host_tools_through_the_hooks_held_to_zots_chain_rules() {
    let env = Env::new();
    env.install_fixture("hops");
    env.install_fixture("todo");
    env.install_echo();
    assert!(env.lock().contains("capabilities = [\"call_tool\"]"));
    for name in ["hops", "todo-panel", "echo"] {
        ok(&env.yep(&["enable", name]));
    }
    let step = |tool: &str| json!({"tool": tool});
    let path = |tools: &[&str]| json!({"path": tools.iter().map(|t| step(t)).collect::<Vec<_>>()});
    let script = [
        // a -> b -> c -> d: four calls in one chain, counting the original.
        format!("call a {}", path(&["b", "c", "d"])),
        // A fifth is refused.
        format!("call a {}", path(&["b", "c", "d", "e"])),
        // A name already in the chain.
        format!("call a {}", path(&["b", "a"])),
        "call orphan {}".to_string(),
        "call stray {}".to_string(),
        // A zot tool calling a YEP tool, and a zot guard's say over it.
        format!(
            "call a {}",
            json!({"path": [{"tool": "echo", "args": {"text": "through the host"}}]})
        ),
        format!(
            "call a {}",
            json!({"path": [{"tool": "echo", "args": {"text": "rm -rf /"}}]})
        ),
        "quit".to_string(),
    ]
    .join("\n");
    let replies = env.session(&format!("{script}\n"), &[]);
    let texts: Vec<String> = replies.iter().map(said).collect();
    assert_eq!(texts[0], "a>b>c>d", "{replies:?}");
    assert!(
        texts[1].contains("a>b>c>d>tool call depth limit reached"),
        "{texts:?}"
    );
    assert!(
        texts[2].contains("a>b>tool call cycle detected"),
        "{texts:?}"
    );
    assert!(
        texts[3].contains("orphan>parent_id is required while an extension tool is active"),
        "{texts:?}"
    );
    assert!(
        texts[4].contains("stray>unknown or expired parent tool call"),
        "{texts:?}"
    );
    assert!(
        texts[5].starts_with("a>") && texts[5].contains("through the host"),
        "{texts:?}"
    );
    assert!(
        texts[6].contains("blocked by extension `todo-panel`: todo-panel refused rm -rf"),
        "{texts:?}"
    );
}

#[test]
fn call_tool_from_an_extension_that_did_not_opt_in_or_was_not_approved_is_refused() {
    let env = Env::new();
    env.install_fixture("hops");
    // Installed without `call_tool` (the hello at install did not ask), then it asks.
    let lock = env.lock().replace("capabilities = [\"call_tool\"]\n", "");
    std::fs::write(env.home().join("extensions.lock"), lock).unwrap();
    ok(&env.yep(&["enable", "hops"]));
    let replies = env.session(
        &format!("call a {}\nquit\n", json!({"path": [{"tool": "b"}]})),
        &[],
    );
    let text = said(&replies[0]);
    assert!(
        text.contains("a>call_tool was not approved for extension hops"),
        "{replies:?}"
    );
}

#[test]
fn a_yep_hook_and_zot_intercepts_compose_in_one_chain_and_events_arrive_in_sequence() {
    let env = Env::new();
    env.install_fixture("redactor");
    env.install_echo();
    env.install_fixture("todo");
    let lock = env.lock();
    assert!(
        lock.contains(
            "intercepts = [\"tool_call\", \"turn_start\", \"assistant_message\", \"before_agent_start\"]"
        ),
        "{lock}"
    );
    // Load order is enable order: the redactor, then echo's hook, then todo-panel's guard.
    for name in ["redactor", "echo", "todo-panel"] {
        ok(&env.yep(&["enable", name]));
    }
    let script = concat!(
        "pre bash {\"command\":\"cat secret\"}\n",
        "pre bash {\"command\":\"rm -rf secret\"}\n",
        "pre bash {\"command\":\"ls\",\"forbidden\":true}\n",
        "turn 1\n",
        "turn 3\n",
        "message the secret is out\n",
        "message forbidden words\n",
        "system-prompt You are yep.\n",
        "quit\n"
    );
    let out = env.yep_env(&["session", "--json"], script, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let transcript = text(&out.stdout);
    insta::assert_snapshot!("zot_session_transcript", transcript);

    // The session told its start and its end, in sequence, to the extension observing them.
    let log = std::fs::read_to_string(env.home().join("data/redactor/events.log")).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(
        (lines[0][0], lines[0][1], lines[0][3]),
        ("1", "session_start", "-")
    );
    assert_eq!(
        (lines[1][0], lines[1][1], lines[1][3]),
        ("2", "session_end", "shutdown")
    );
    assert!(lines[0][2].starts_with("yep-session-"), "{log}");
}

#[test]
fn a_zot_panel_opens_from_a_command_takes_keys_submits_and_closes_on_esc() {
    let env = Env::new();
    env.install_fixture("todo");
    ok(&env.yep(&["enable", "todo-panel"]));
    let script = concat!(
        "call todo_manage {\"action\":\"add\",\"title\":\"a\"}\n",
        "call todo_manage {\"action\":\"add\",\"title\":\"b\"}\n",
        // Its renders while no panel is open change nothing.
        "panel\n",
        "command todo-panel:todo\n",
        "panel\n",
        "key down\n",
        "key rune x\n",
        "key enter\n",
        "key esc\n",
        "key down\n",
        // The owner heard of the close: its note comes before this answer.
        "command todo-panel:todo count\n",
        "status\n",
        "quit\n"
    );
    let out = env.yep_env(&["session", "--json"], script, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    insta::assert_snapshot!("zot_panel_transcript", text(&out.stdout));
}

#[test]
fn exposure_defers_a_tool_until_a_result_activates_it_and_interactive_tools_need_a_user() {
    let env = Env::new();
    env.install_fixture("todo");
    ok(&env.yep(&["enable", "todo-panel"]));
    let replies = env.session(
        concat!(
            "tools\n",
            "call todo_manage {\"action\":\"list\"}\n",
            "tools\n",
            "call todo_pick {}\n",
            "quit\n"
        ),
        &[],
    );
    let deferred = |reply: &Value, name: &str| {
        reply["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {reply}"))["deferred"]
            .clone()
    };
    assert_eq!(deferred(&replies[0], "todo_manage"), false);
    // Its output schema is carried with it.
    let manage = replies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "todo_manage")
        .unwrap();
    assert_eq!(
        manage["output_schema"]["properties"]["count"]["type"],
        "integer"
    );
    assert_eq!(deferred(&replies[0], "todo_archive"), true);
    assert_eq!(deferred(&replies[2], "todo_archive"), false);
    let err = said(&replies[3]);
    assert!(
        err.contains("tool todo_pick is interactive") && err.contains("no interactive UI"),
        "{err}"
    );
}

#[test]
fn a_zot_extension_that_crashes_fails_its_call_naming_itself_and_is_restarted_within_its_pin() {
    let env = Env::new();
    env.install_fixture("hops");
    ok(&env.yep(&["enable", "hops"]));
    let replies = env.session(
        concat!(
            "call die {}\n",
            "call a {\"path\":[{\"tool\":\"b\"}]}\n",
            "quit\n"
        ),
        &[],
    );
    let died = said(&replies[0]);
    assert!(died.contains("extension `hops`"), "{died}");
    assert!(died.contains("log:"), "{died}");
    assert_eq!(said(&replies[1]), "a>b", "{replies:?}");
}

#[test]
fn doctor_grades_a_zot_extension_and_holds_an_installed_one_to_its_pin() {
    let env = Env::new();
    let src = env.source();
    let report = |out: &Output| -> Value {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}\n{}", text(&out.stdout), text(&out.stderr)))
    };
    let status = |report: &Value, check: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == check)
            .unwrap_or_else(|| panic!("no {check} in {report}"))["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // A directory: the old generation passes, with a warning for never saying ready.
    let dir = report(&env.yep(&["doctor", src.to_str().unwrap(), "--json"]));
    assert_eq!(dir["ok"], true, "{dir}");
    for check in ["hello", "ready"] {
        assert_eq!(status(&dir, check), "warn", "{check}: {dir}");
    }
    for check in [
        "registrations",
        "tool_call",
        "command",
        "intercepts",
        "shutdown",
        "stdout",
        "frames",
    ] {
        assert_eq!(status(&dir, check), "pass", "{check}: {dir}");
    }
    // Installed, then run wider than its pin: the pin check fails and says what to run.
    ok(&env.yep(&["install", src.to_str().unwrap(), "--yes"]));
    let pinned = report(&env.yep(&["doctor", "todo-panel", "--json"]));
    assert_eq!(status(&pinned, "pin"), "pass", "{pinned}");
    let out = env.yep_env(
        &["doctor", "todo-panel", "--json"],
        "",
        &[("TODO_WIDEN", "1")],
    );
    assert!(!out.status.success());
    let wide = report(&out);
    assert_eq!(status(&wide, "pin"), "fail", "{wide}");
    let detail = wide.to_string();
    for part in [
        "tool todo_purge",
        "intercept turn_start",
        "capability call_tool",
        "yep trust todo-panel",
    ] {
        assert!(detail.contains(part), "{part}: {detail}");
    }
    // Stray text on stdout is graded as such.
    let script = std::fs::read_to_string(src.join("todo.py")).unwrap();
    std::fs::write(
        src.join("todo.py"),
        script.replace(
            "data_dir = None\n",
            "data_dir = None\nprint('debug: starting', flush=True)\n",
        ),
    )
    .unwrap();
    let noisy = report(&env.yep(&["doctor", src.to_str().unwrap(), "--json"]));
    assert_eq!(status(&noisy, "stdout"), "fail", "{noisy}");
    assert!(noisy.to_string().contains("debug: starting"), "{noisy}");
}

/// `yep doctor --json`'s report, whatever its exit code.
fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}\n{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn doctor_probes_a_zot_tool_with_arguments_its_schema_takes_and_skips_one_it_cannot_build() {
    let env = Env::new();
    env.install_fixture("greeter");
    // Installed, the probe is checked against the approved schema, as a session's call is:
    // `who` and `times` are required, so `{}` would be refused before the extension saw it.
    let installed = report(&env.yep(&["doctor", "greeter", "--json"]));
    assert_eq!(installed["ok"], true, "{installed}");
    let row = common::doctor_check(&installed, "tool_call");
    assert_eq!(row["status"], "pass", "{installed}");
    // It answered without an error: the arguments also passed the extension's own check.
    assert_eq!(row["detail"], "`greet` answered", "{installed}");

    // A required field no simplest value meets: the probe is skipped, saying why, not failed.
    let dir = env.fixture("greeter");
    let dir = dir.to_str().unwrap();
    let out = env.yep_env(&["doctor", dir, "--json"], "", &[("GREETER_ID", "1")]);
    let skipped = report(&out);
    assert!(out.status.success(), "{skipped}");
    let row = common::doctor_check(&skipped, "tool_call");
    assert_eq!(row["status"], "skip", "{skipped}");
    let detail = row["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("`greet` not called: ") && detail.contains("/id: \"\" does not match"),
        "{detail}"
    );
    let shown = text(
        &env.yep_env(&["doctor", dir], "", &[("GREETER_ID", "1")])
            .stdout,
    );
    assert!(
        shown.contains("\nskip  tool_call        `greet` not called"),
        "{shown}"
    );
}

#[test]
fn a_zot_extension_that_ends_during_its_registration_run_fails_install_and_doctor() {
    let env = Env::new();
    let dir = env.fixture("greeter");
    let dir = dir.to_str().unwrap();
    let log = env.home().join("logs").join("greeter.log");
    let log = format!("log: {}", log.display());
    // Before `ready`, and after it but before the host's shutdown.
    for (when, said, row) in [
        ("registering", "it ended before it was ready", "hello"),
        ("ready", "ended before the host shut it down", "shutdown"),
    ] {
        let early = [("GREETER_EXIT", when)];
        let out = env.yep_env(&["install", dir, "--yes"], "", &early);
        assert_eq!(out.status.code(), Some(1), "{when}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        for part in [said, "(exit code 3)", &log, "greeter: giving up"] {
            assert!(err.contains(part), "{when}: {part}: {err}");
        }
        // Nothing of it is installed.
        assert!(!env.home().join("extensions.lock").exists(), "{when}");
        assert!(!env.home().join("extensions/greeter").exists(), "{when}");
        assert!(!env.home().join("data/greeter").exists(), "{when}");

        let out = env.yep_env(&["doctor", dir, "--json"], "", &early);
        assert_eq!(out.status.code(), Some(1), "{when}");
        let graded = report(&out);
        let check = common::doctor_check(&graded, row);
        assert_eq!(check["status"], "fail", "{when}: {graded}");
        let detail = check["detail"].as_str().unwrap();
        for part in [said, "(exit code 3)", &log] {
            assert!(detail.contains(part), "{when}: {part}: {detail}");
        }
    }

    // Installed, it is run again at update: one that ends early changes nothing; doctor of
    // the installed name fails it too.
    ok(&env.yep(&["install", dir, "--yes"]));
    let lock = env.lock();
    let early = [("GREETER_EXIT", "ready")];
    let out = env.yep_env(&["update", "greeter", "--yes"], "", &early);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("ended before the host shut it down"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(env.lock(), lock);
    let graded = report(&env.yep_env(&["doctor", "greeter", "--json"], "", &early));
    assert_eq!(graded["ok"], false, "{graded}");
    assert_eq!(
        common::doctor_check(&graded, "shutdown")["status"],
        "fail",
        "{graded}"
    );
}

/// Output before the hello: the error quotes that first line, escaped and cut short, and
/// says that logs go to stderr.
#[test]
fn output_before_a_zot_hello_is_quoted_in_the_error() {
    let env = Env::new();
    let dir = env.tmp.path().join("src").join("chatty");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("extension.json"),
        r#"{"name": "chatty", "version": "0.1.0", "exec": "sh", "args": ["chatty.sh"]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("chatty.sh"),
        "printf 'booting \\033[2Jchatty %0200d\\n' 0\necho '{\"type\": \"hello\", \"name\": \"chatty\"}'\ncat >/dev/null\n",
    )
    .unwrap();
    let out = env.yep(&["install", dir.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    common::assert_nothing_hidden(&stderr);
    let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap();
    let lead = "the first line it wrote to stdout that is not a zot frame: \"";
    let line = &error[error.find(lead).unwrap_or_else(|| panic!("{error}")) + lead.len()..];
    let line = &line[..line.find("\" (").unwrap()];
    assert!(line.starts_with("booting \\x1b[2Jchatty 000"), "{line}");
    assert!(
        line.ends_with("0…") && line.chars().count() == 121,
        "{line}"
    );
    assert!(
        error.contains("(stdout carries only the protocol: logs must go to stderr)"),
        "{error}"
    );
    assert!(!env.home().join("extensions.lock").exists());
}

#[test]
fn a_node_extension_of_the_old_generation_runs_its_commands_in_their_registered_spelling() {
    let env = Env::new();
    env.install_fixture("clock");
    ok(&env.yep(&["enable", "clock"]));
    let replies = env.session(
        concat!(
            "commands\n",
            "command clock:NOW\n",
            "command clock:uptime what next?\n",
            "tools\n",
            "quit\n"
        ),
        &[],
    );
    let names: Vec<&str> = replies[0]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["clock:now", "clock:uptime"]);
    // Asked in another case, it still hears `now` (it refuses any other spelling itself).
    assert_eq!(replies[1]["success"], true, "{replies:?}");
    assert!(
        replies[1]["message"].as_str().unwrap().contains('T'),
        "{replies:?}"
    );
    assert_eq!(replies[2]["success"], true);
    assert!(
        replies[2]["message"]
            .as_str()
            .unwrap()
            .ends_with("what next?"),
        "{replies:?}"
    );
    assert_eq!(replies[3]["tools"], json!([]));
    // It read the hello_ack: what it logged is in its log.
    let log = std::fs::read_to_string(env.home().join("logs/clock.log")).unwrap();
    assert!(log.contains("connected to zot yep-"), "{log}");
}

#[test]
fn a_zot_extension_installs_from_git_at_a_rev_and_a_skills_bundle_is_never_run() {
    let env = Env::new();
    let repo = env.source();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "v0.1.0"]);
    let rev = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}@{rev}", repo.display());
    ok(&env.yep(&["install", &url, "--yes"]));
    let lock = env.lock();
    assert!(lock.contains(&format!("rev = \"{rev}\"")), "{lock}");
    assert!(lock.contains("[extensions.zot]"), "{lock}");
    assert!(!env.home().join("extensions/todo-panel/.git").exists());

    // A bundle with skills and no `exec` installs without running anything.
    let bundle = env.tmp.path().join("src").join("skills-only");
    std::fs::create_dir_all(bundle.join("skills/review")).unwrap();
    std::fs::write(
        bundle.join("extension.json"),
        r#"{"name": "reviewing", "skills": ["skills/review"]}"#,
    )
    .unwrap();
    std::fs::write(
        bundle.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: review a change\n---\nRead the diff first.\n",
    )
    .unwrap();
    let out = env.yep(&["install", bundle.to_str().unwrap(), "--yes"]);
    let summary = ok(&out);
    assert!(summary.contains("skills"), "{summary}");
    assert!(!summary.contains("server    python3"), "{summary}");
    assert!(
        !env.home().join("logs/reviewing.log").exists(),
        "it was run"
    );
}

#[test]
fn a_first_install_asks_before_it_runs_the_extension_and_refuses_one_that_rewrites_itself() {
    let env = Env::new();
    let src = env.source();
    // No terminal and no --yes: refused before anything runs, saying what would have.
    let out = env.yep(&["install", src.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("`todo-panel` is a zot extension: installing runs `python3 todo.py` in"),
        "{err}"
    );
    assert!(err.contains("`todo-panel` was not run"), "{err}");
    assert!(
        !env.home().join("logs/todo-panel.log").exists(),
        "it ran before consent"
    );
    // A run that writes into its own files cannot be pinned: those bytes are not what was
    // hashed.
    let script = std::fs::read_to_string(src.join("todo.py")).unwrap();
    std::fs::write(
        src.join("todo.py"),
        script.replace(
            "data_dir = None\n",
            "data_dir = None\nopen('stamp.txt', 'w').write('ran')\n",
        ),
    )
    .unwrap();
    // Under the sandbox the OS refuses the write, and says so.
    let out = env.yep(&["install", src.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("Permission denied: 'stamp.txt'") && err.contains("it ran in the sandbox"),
        "{err}"
    );
    assert!(!env.home().join("extensions/todo-panel").exists());
    // Without it, the store sees its files changed.
    let out = env.yep_env(
        &["install", src.to_str().unwrap(), "--yes"],
        "",
        &[("YEP_SANDBOX", "off")],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("it changed its own files when run"), "{err}");
    assert!(!env.home().join("extensions/todo-panel").exists());
    assert!(
        !src.join("stamp.txt").exists(),
        "the source itself was written"
    );
}

#[test]
fn a_tool_renamed_by_a_collision_is_one_name_in_its_chain() {
    let env = Env::new();
    env.install_fixture("hops");
    // A second copy under another name: its tools collide, and are `hops2__a`, …
    let copy = env.tmp.path().join("src").join("hops2");
    std::fs::create_dir_all(&copy).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zot/hops");
    std::fs::copy(fixture.join("hops.py"), copy.join("hops.py")).unwrap();
    let manifest = std::fs::read_to_string(fixture.join("extension.json"))
        .unwrap()
        .replace("\"name\": \"hops\"", "\"name\": \"hops2\"");
    std::fs::write(copy.join("extension.json"), manifest).unwrap();
    ok(&env.yep(&["install", copy.to_str().unwrap(), "--yes"]));
    for name in ["hops", "hops2"] {
        ok(&env.yep(&["enable", name]));
    }
    let replies = env.session(
        &format!(
            "call hops2__a {}\nquit\n",
            json!({"path": [{"tool": "hops2__a"}]})
        ),
        &[],
    );
    assert!(
        said(&replies[0]).contains("a>tool call cycle detected"),
        "{replies:?}"
    );
}

#[test]
fn yep_call_runs_a_tool_of_a_zot_extensions_directory_as_zot_would() {
    let env = Env::new();
    let src = env.source();
    let parent = src.parent().unwrap();
    let call = |args: &[&str]| common::yep_in(parent, &env.home(), args, "");
    // Spelled as a path, as the issue did: `yep call ./todo <tool> <args>`.
    let out = call(&[
        "call",
        "./todo",
        "todo_manage",
        r#"{"action":"add","title":"water the plants"}"#,
    ]);
    ok(&out);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "water the plants"}], "is_error": false, "structured_content": {"count": 1}})
    );
    // As zot runs an extension it was pointed at: in its own directory, which is also its
    // data dir.
    let out = call(&["call", "./todo", "todo_manage", r#"{"action":"where"}"#]);
    ok(&out);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cwd = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        Path::new(cwd).canonicalize().unwrap(),
        src.canonicalize().unwrap()
    );
    assert!(src.join("todos.json").is_file());
    // A tool it does not register is refused, naming the ones it does.
    let out = call(&["call", "./todo", "todo_nothing"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("tool `todo_nothing` is not registered by zot extension `todo-panel`"),
        "{err}"
    );
    assert!(
        err.contains("registered tools: todo_manage, todo_archive, todo_pick"),
        "{err}"
    );
}

#[test]
fn yep_call_and_doctor_of_a_directory_that_is_no_package_say_so() {
    let env = Env::new();
    let dir = env.tmp.path().join("src").join("nothing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "not a package\n").unwrap();
    for verb in [
        &["call", dir.to_str().unwrap(), "t"][..],
        &["doctor", dir.to_str().unwrap()],
    ] {
        let out = env.yep(verb);
        assert_eq!(out.status.code(), Some(1), "{verb:?}");
        let err = text(&out.stderr);
        assert_eq!(
            err,
            format!(
                "error: {} has no plugin.json (nor a zot extension.json, nor a Claude Code, Codex or Agent Plugins plugin)\n",
                dir.display()
            ),
            "{verb:?}"
        );
    }
}

#[test]
fn a_zot_command_is_found_as_install_shows_it_and_in_any_case_over_its_whole_name() {
    let env = Env::new();
    let src = env.source();
    let summary = ok(&env.yep(&["install", src.to_str().unwrap(), "--yes"]));
    assert!(summary.contains("/todo-panel:todo"), "{summary}");
    ok(&env.yep(&["enable", "todo-panel"]));
    let replies = env.session(
        concat!(
            "command /todo-panel:todo count\n",
            "command TODO-PANEL:Todo count\n",
            "command /Todo-Panel:TODO count\n",
            "command todo-panel:todo count\n",
            "command todo-panel:nothing\n",
            "quit\n"
        ),
        &[],
    );
    // Every spelling reaches the command; the extension hears the one it registered.
    for reply in &replies[..4] {
        assert_eq!(
            reply,
            &json!({"success": true, "message": "0 todos (todo)"}),
            "{replies:?}"
        );
    }
    assert!(
        said(&replies[4]).contains("no command named `todo-panel:nothing`"),
        "{replies:?}"
    );
}

#[test]
fn a_zot_tools_structured_content_reaches_an_mcp_client_as_structured_content() {
    use std::io::{BufRead, Write};
    use std::process::Stdio;
    let env = Env::new();
    env.install_fixture("todo");
    ok(&env.yep(&["enable", "todo-panel"]));
    #[allow(clippy::disallowed_methods)] // the CLI under test, as an agent starts it
    let child = crate::common::yep_command()
        .args(["mcp", "serve"])
        .env("YEP_HOME", env.home())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = common::Serving(child);
    let mut stdin = server.0.stdin.take().unwrap();
    let stdout = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(message) = serde_json::from_str(&line) else {
                continue;
            };
            if tx.send(message).is_err() {
                break;
            }
        }
    });
    // The answer to request `id`, past any notification.
    let answer = |id: u64| loop {
        let message = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("yep mcp serve answers");
        if message["id"] == id {
            break message;
        }
    };
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "zot-test", "version": "1"}}}),
    );
    assert!(answer(1).get("result").is_some());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = answer(2);
    let manage = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "todo_manage")
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    // It declares an output schema, so an MCP client expects structured content.
    assert_eq!(
        manage["outputSchema"]["properties"]["count"]["type"],
        "integer"
    );
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "todo_manage", "arguments": {"action": "add", "title": "water the plants"}}}),
    );
    let called = answer(3);
    assert_eq!(
        called["result"],
        json!({
            "content": [{"type": "text", "text": "water the plants"}],
            "isError": false,
            "structuredContent": {"count": 1},
        }),
        "{called}"
    );
}
