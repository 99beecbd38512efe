//! zot extensions as packages, through the CLI: `extension.json` installs with the same
//! verbs as a YEP package, its first run's registrations are shown and pinned, it runs in its
//! own directory with its state in a data dir outside the approved files, and a later run
//! that registers more than the pin is held to it until `yep update` asks again.
//!
//! The extension is `tests/zot/todo`, a Python one written here after zot's `todo` example
//! (older generation: registrations before `hello_ack`, no `ready`).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

    /// The CLI with `stdin` as its input and `env` added (the extension inherits it).
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    fn yep_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_yep"))
            .args(args)
            .env("YEP_HOME", self.home())
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// `yep session --json` fed `script`: one JSON value per command.
    fn session(&self, script: &str, env: &[(&str, &str)]) -> Vec<Value> {
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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
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
    assert!(summary.contains("todo-panel 0.1.0"), "{summary}");
    assert!(summary.contains("todo_manage"), "{summary}");
    assert!(
        summary.contains("Installing ran it once"),
        "{summary}"
    );
    assert!(summary.contains("/todo-panel:todo"), "{summary}");
    assert!(summary.contains("intercept tool_call"), "{summary}");
    assert!(summary.contains("events    session_start"), "{summary}");
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
            "command todo-panel:TODO\n",
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
    // A tool error reads as every wire's does: the extension, then the tool's own text.
    assert_eq!(
        replies[2],
        json!({"error": "extension `todo-panel`: `tool_call` failed: no such action"})
    );
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
    assert_eq!(list[0]["tools"], json!(["todo_manage"]), "{list}");

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
    let replies = env.session("tools\ncall todo_purge {}\nquit\n", &widen);
    let tools = replies[0]["tools"].to_string();
    assert!(!tools.contains("todo_purge"), "{tools}");
    assert!(replies[1]["error"].is_string(), "{replies:?}");
    assert!(!std::fs::read_to_string(&state).unwrap().is_empty());

    // `yep update` runs it again, shows the diff and asks: refused without a terminal ...
    let out = env.yep_env(&["update", "todo-panel"], "", &widen);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    for line in [
        "+ tool todo_purge",
        "+ intercept turn_start",
        "+ capability call_tool",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    assert!(!env.lock().contains("turn_start"));
    // ... and with consent the new pin holds.
    ok(&env.yep_env(&["update", "todo-panel", "--yes"], "", &widen));
    assert!(env.lock().contains("\"turn_start\""), "{}", env.lock());
    let replies = env.session("call todo_purge {}\nquit\n", &widen);
    assert_eq!(replies[0]["result"]["content"][0]["text"], "purged");
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
