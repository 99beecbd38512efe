//! The agents people use, with yep as their hook runtime: the real Claude Code, Codex and
//! Gemini CLI (pinned in scripts/test, found through `$YEP_AGENTS_BIN`), each configured with
//! exactly what `yep hooks config <agent>` prints and run offline against a scripted model on
//! loopback (tests/fixtures/agents/model.py). The model asks for the agent's own shell and
//! write tools; what ran is read from disk, and what the agent told the model from the
//! model's request log.

use crate::common;
use common::zot::built_zot_example;
use common::{Sealed, ok, text, yep};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest one agent run may take, hooks and all, on a loaded machine.
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// An agent CLI, by yep's name for it (and model.py's for its wire).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Cli {
    Claude,
    Codex,
    Gemini,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    /// The model's call of the agent's own shell tool, running `command`.
    fn shell(self, command: &str) -> Value {
        match self {
            Cli::Claude => {
                json!({"name": "Bash", "args": {"command": command, "description": "run it"}})
            }
            Cli::Codex => json!({"name": "exec_command", "args": {"cmd": command}}),
            Cli::Gemini => json!({"name": "run_shell_command", "args": {"command": command}}),
        }
    }

    /// The model's call of the agent's own tool that writes a whole file. Codex has none: it
    /// edits files with apply_patch.
    fn write(self, path: &Path, content: &str) -> Value {
        let name = match self {
            Cli::Claude => "Write",
            Cli::Gemini => "write_file",
            Cli::Codex => unreachable!("Codex writes files with apply_patch"),
        };
        json!({"name": name, "args": {"file_path": path, "content": content}})
    }
}

/// The directory of the pinned agent CLIs, or a failure that says how to get them.
fn agents_bin() -> PathBuf {
    let dir = std::env::var_os("YEP_AGENTS_BIN").map(PathBuf::from);
    match dir {
        Some(dir) if dir.is_dir() => dir,
        _ => panic!(
            "YEP_AGENTS_BIN does not name the pinned agent CLIs (Claude Code, Codex, Gemini \
             CLI): run the tests through scripts/test, which installs them and sets it"
        ),
    }
}

/// A process of the test's own, killed and reaped when dropped: a failed assertion leaves
/// no agent or model behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// model.py serving one agent run on loopback, stopped when dropped.
struct Model {
    _process: Reaped,
    port: u16,
}

impl Model {
    /// Serve `calls` in `cli`'s wire, logging each request to `log`; held before the first
    /// call until `hold` exists, when given.
    #[allow(clippy::disallowed_methods)] // the scripted model, not yep
    fn start(cli: Cli, log: &Path, calls: &[Value], hold: Option<&Path>) -> Model {
        use std::io::BufRead;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/agents/model.py"
        );
        let mut command = Command::new("python3");
        command
            .args([script, "--wire", cli.name(), "--log"])
            .arg(log);
        for call in calls {
            command.args(["--call", &call.to_string()]);
        }
        if let Some(hold) = hold {
            command.arg("--hold").arg(hold);
        }
        let mut process = Reaped(
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python3 runs the scripted model"),
        );
        let mut line = String::new();
        std::io::BufReader::new(process.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("model.py did not say its port: {line:?}"));
        Model {
            _process: process,
            port,
        }
    }
}

/// Stops the shared host a yep home's hooks started, when the test ends: it would linger
/// for ten minutes.
struct StopsHost(PathBuf);

impl Drop for StopsHost {
    fn drop(&mut self) {
        let _ = yep(&self.0, &["host", "stop"]);
    }
}

/// What one agent run left: what it printed, and every request the model got.
struct Run {
    out: String,
    err: String,
    requests: Vec<Value>,
}

impl Run {
    /// The requests of the agent's own loop (those that offer the model tools), in order.
    fn turns(&self) -> Vec<&Value> {
        self.requests
            .iter()
            .map(|r| &r["body"])
            .filter(|b| b.get("tools").is_some())
            .collect()
    }

    /// Everything the model was told in its `n`-th turn, as text.
    fn turn(&self, n: usize) -> String {
        let turns = self.turns();
        let turn = turns.get(n).unwrap_or_else(|| {
            panic!(
                "no turn {n} in {} turns\nstdout: {}\nstderr: {}",
                turns.len(),
                self.out,
                self.err
            )
        });
        turn.to_string()
    }

    /// What the model was told of each of its calls, in order, as its last turn has them:
    /// each tool result's text (or error).
    fn results(&self, cli: Cli) -> Vec<String> {
        let Some(last) = self.turns().last().copied() else {
            return Vec::new();
        };
        let as_text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        };
        let items: Vec<&Value> = match cli {
            Cli::Claude => last["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| &b["content"])
                .collect(),
            Cli::Codex => last["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| &i["output"])
                .collect(),
            Cli::Gemini => last["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["parts"].as_array())
                .flatten()
                .filter_map(|p| p.get("functionResponse"))
                .map(|r| &r["response"])
                .collect(),
        };
        items
            .into_iter()
            .map(|v| match cli {
                // `{"output": …}`, or `{"error": …}` when the tool did not run.
                Cli::Gemini => match (v["error"].as_str(), v["output"].as_str()) {
                    (Some(error), _) => format!("error: {error}"),
                    (None, Some(output)) => output.to_string(),
                    _ => v.to_string(),
                },
                _ => as_text(v),
            })
            .collect()
    }

    /// Everything the agent printed.
    fn said(&self) -> String {
        format!("{}\n{}", self.out, self.err)
    }
}

/// One agent's world: its own HOME (Codex's CODEX_HOME in it) and the workspace it runs in.
struct Agent {
    cli: Cli,
    bin: PathBuf,
    dir: PathBuf,
    home: PathBuf,
    work: PathBuf,
    runs: std::cell::Cell<usize>,
}

impl Agent {
    fn new(cli: Cli, tmp: &Path) -> Agent {
        let bin = agents_bin().join(cli.name());
        assert!(
            bin.exists(),
            "{} is missing: run the tests through scripts/test, which installs it",
            bin.display()
        );
        let dir = tmp.join(cli.name());
        let (home, work) = (dir.join("home"), dir.join("work"));
        for d in [&home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        Agent {
            cli,
            bin,
            work: work.canonicalize().unwrap(),
            home,
            dir,
            runs: Default::default(),
        }
    }

    fn codex_home(&self) -> PathBuf {
        self.home.join(".codex")
    }

    /// Wire the agent's hooks to the yep home `yep_home`: exactly what `yep hooks config`
    /// prints, written where the agent reads it (Gemini CLI's beside the settings that keep
    /// it offline).
    fn configure(&self, yep_home: &Path, fail_open: bool) {
        let mut args = vec!["hooks", "config", self.cli.name()];
        if fail_open {
            args.push("--fail-open");
        }
        let out = yep(yep_home, &args);
        let config: Value = serde_json::from_str(&ok(&out))
            .unwrap_or_else(|e| panic!("yep hooks config printed no JSON ({e})"));
        // Every event runs this build's hook command (the small `yep-hook` beside `yep`) on
        // this home.
        let mut command = format!(
            "{} --home {} {}",
            env!("CARGO_BIN_EXE_yep-hook"),
            yep_home.display(),
            self.cli.name()
        );
        if fail_open {
            command.push_str(" --fail-open");
        }
        let events = config["hooks"].as_object().unwrap();
        assert!(events.len() >= 5, "{config:#}");
        for groups in events.values() {
            assert_eq!(
                groups[0]["hooks"][0]["command"],
                command.as_str(),
                "{config:#}"
            );
        }
        // The hint names the file written here.
        let file = match self.cli {
            Cli::Claude => "`~/.claude/settings.json`",
            Cli::Codex => "`$CODEX_HOME/hooks.json`",
            Cli::Gemini => "`~/.gemini/settings.json`",
        };
        let hint = text(&out.stderr);
        assert!(
            hint.starts_with(&format!("merge this into {file}")),
            "{hint}"
        );
        let (path, settings) = match self.cli {
            Cli::Claude => (self.home.join(".claude/settings.json"), config),
            Cli::Codex => (self.codex_home().join("hooks.json"), config),
            Cli::Gemini => {
                let mut settings = json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"},
                                 "folderTrust": {"enabled": false}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
                });
                settings["hooks"] = config["hooks"].clone();
                (self.home.join(".gemini/settings.json"), settings)
            }
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();
    }

    /// Run the agent once on a prompt, the model making `calls` in turn.
    fn run(&self, calls: &[Value]) -> Run {
        self.run_holding(calls, None)
    }

    /// [`Agent::run`]; with `between`, the model holds its first call until `between` has
    /// run (the session has started by then: its first hooks have answered).
    #[allow(clippy::disallowed_methods)] // the agent CLI, not yep
    fn run_holding(&self, calls: &[Value], between: Option<&dyn Fn()>) -> Run {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let dir = self.dir.join(format!("run-{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (log, hold) = (dir.join("requests.jsonl"), dir.join("hold"));
        let model = Model::start(
            self.cli,
            &log,
            calls,
            between.is_some().then_some(hold.as_path()),
        );
        let url = format!("http://127.0.0.1:{}", model.port);
        // Only what the agent needs: the sealed PATH, TMPDIR and toolchains, its own HOME.
        let mut command = Command::new(&self.bin);
        command.env_clear();
        Sealed::get().seal(&mut command, &self.home);
        command
            .env_remove("YEP_HOME")
            .env("HOME", &self.home)
            .env("TERM", "dumb")
            .current_dir(&self.work);
        let prompt = "do as you are told";
        match self.cli {
            Cli::Claude => {
                command
                    .args(["-p", prompt, "--output-format", "json"])
                    .args(["--allowedTools", "Bash,Write"])
                    .env("ANTHROPIC_BASE_URL", &url)
                    .env("ANTHROPIC_API_KEY", "scripted")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_AUTOUPDATER", "1");
            }
            Cli::Codex => {
                let provider = format!(
                    "model_providers.scripted={{name=\"scripted\",base_url=\"{url}/v1\",wire_api=\"responses\",env_key=\"SCRIPTED_KEY\"}}"
                );
                command
                    .args(["exec", "--skip-git-repo-check"])
                    // Codex's own sandbox and approvals stay out of the way: yep's hooks decide.
                    .arg("--dangerously-bypass-approvals-and-sandbox")
                    // Hooks not reviewed in Codex's `/hooks` would not run.
                    .arg("--dangerously-bypass-hook-trust")
                    .args(["-c", "model_provider=scripted", "-c", &provider])
                    .args(["-m", "scripted-model", prompt])
                    .env("CODEX_HOME", self.codex_home())
                    .env("SCRIPTED_KEY", "scripted");
            }
            Cli::Gemini => {
                // Without --yolo, headless Gemini CLI offers the model no shell or write tool.
                command
                    .args([
                        "-m",
                        "gemini-2.5-flash",
                        "--yolo",
                        "--output-format",
                        "json",
                    ])
                    .args(["-p", prompt])
                    .env("GOOGLE_GEMINI_BASE_URL", &url)
                    .env("GEMINI_API_KEY", "scripted")
                    .env("GEMINI_TELEMETRY_ENABLED", "false")
                    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
            }
        }
        let (out, err) = (dir.join("stdout"), dir.join("stderr"));
        let mut agent = Reaped(
            command
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&out).unwrap())
                .stderr(std::fs::File::create(&err).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", self.bin.display())),
        );
        let deadline = Instant::now() + RUN_LIMIT;
        let mut held = between;
        let status = loop {
            if let Some(status) = agent.0.try_wait().unwrap() {
                break status;
            }
            if let Some(between) = held.filter(|_| hold.with_extension("waiting").exists()) {
                between();
                std::fs::write(&hold, "").unwrap();
                held = None;
            }
            if Instant::now() > deadline {
                panic!(
                    "{} ran past {} s:\n{}",
                    self.cli.name(),
                    RUN_LIMIT.as_secs(),
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        drop(model);
        let run = Run {
            out: std::fs::read_to_string(&out).unwrap_or_default(),
            err: std::fs::read_to_string(&err).unwrap_or_default(),
            requests: std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        };
        assert!(
            status.success(),
            "{} exited {status}\n{}",
            self.cli.name(),
            run.said()
        );
        run
    }
}

/// zot's guard, built once for every test here: its directory, ready to install.
fn guard() -> &'static Path {
    static GUARD: OnceLock<PathBuf> = OnceLock::new();
    GUARD.get_or_init(|| built_zot_example(&Sealed::get().tmp().join("agents-zot"), "guard"))
}

/// A YEP package in Python: its pre hook on `bash` blocks a command with `DANGER` in it and
/// rewrites `echo REWRITE-ME` to `echo REWRITTEN`; its prompt text is the context an agent's
/// session starts with (a YEP hook's decision has no field for context: a package's text for
/// the model is its prompt).
const CAREFUL: &str = r#"#!/usr/bin/env python3
from yep_sdk import Server, block, modify

server = Server("careful", instructions="CAREFUL-CONTEXT: look before you leap")


@server.hook
def hook(params):
    if params.get("event") != "pre_tool_use":
        return None
    args = params.get("args") or {}
    command = args.get("command", "")
    if "DANGER" in command:
        return block("careful refused it: DANGER is not to be run here")
    if "echo REWRITE-ME" in command:
        return modify(dict(args, command=command.replace("echo REWRITE-ME", "echo REWRITTEN")))
    return None


server.serve()
"#;

/// A Claude Code plugin's hooks: on PreToolUse of Bash it denies a command with
/// `PLUGIN-BLOCK` in it and asks the user first about one with `PLUGIN-ASK`; at the first
/// Stop it keeps the agent going.
const PLUGIN_HOOK: &str = r#"import json, sys
event = json.load(sys.stdin)
if event.get("hook_event_name") == "Stop":
    if not event.get("stop_hook_active"):
        print(json.dumps({"decision": "block",
            "reason": "plugin-guard: run the tests before you stop"}))
    sys.exit(0)
command = event.get("tool_input", {}).get("command", "")
for word, decision, reason in [("PLUGIN-BLOCK", "deny", "plugin-guard refused it: PLUGIN-BLOCK"),
                               ("PLUGIN-ASK", "ask", "plugin-guard asks first: PLUGIN-ASK")]:
    if word in command:
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": decision, "permissionDecisionReason": reason}}))
        break
"#;

/// A yep home with the chain an agent's tools meet, in this order: `careful` (a YEP
/// package), zot's `guard`, `plugin-guard` (a Claude Code plugin of our own) and
/// security-guidance from Anthropic's plugins.
fn chain_home(tmp: &Path) -> PathBuf {
    let home = tmp.join("yep");
    let careful = yep_test_support::Package::at(tmp.join("careful"))
        .manifest(&json!({"name": "careful", "version": "1.0.0",
            "description": "blocks DANGER, rewrites REWRITE-ME",
            "yolop": {"capabilityServer": {"command": "bin/careful-server"}, "prompt": true,
                "hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash"}]}}))
        .executable("bin/careful-server", CAREFUL)
        .python_sdk()
        .into_dir();
    let plugin = yep_test_support::Package::at(tmp.join("plugin-guard"))
        .file(
            "hooks/hooks.json",
            &json!({"hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                    "command": "python3 \"${CLAUDE_PLUGIN_ROOT}/hooks/refuse.py\""}]}],
                "Stop": [{"hooks": [{"type": "command",
                    "command": "python3 \"${CLAUDE_PLUGIN_ROOT}/hooks/refuse.py\""}]}]}})
            .to_string(),
        )
        .file("hooks/refuse.py", PLUGIN_HOOK)
        .into_dir();
    let guidance = common::claude::claude_corpus(tmp).join("plugins/security-guidance");
    for (dir, name) in [
        (careful.as_path(), "careful"),
        (guard(), "guard"),
        (plugin.as_path(), "plugin-guard"),
        (guidance.as_path(), "security-guidance"),
    ] {
        ok(&yep(&home, &["install", dir.to_str().unwrap(), "--yes"]));
        ok(&yep(&home, &["enable", name]));
    }
    home
}

/// The agent's own tools meet yep's whole chain: a YEP pre hook's block and rewrite, zot's
/// guard, a Claude Code plugin's PreToolUse hook (a block and a question) and Stop hook, the
/// session's context, and (for an agent with a Write tool) security-guidance's warning after
/// it, all in one session.
fn own_tools_meet_yeps_chain(cli: Cli) {
    let tmp = tempfile::tempdir().unwrap();
    let yep_home = chain_home(tmp.path());
    let _host = StopsHost(yep_home.clone());
    let agent = Agent::new(cli, tmp.path());
    agent.configure(&yep_home, false);
    let work = &agent.work;
    std::fs::create_dir_all(work.join("victim")).unwrap();
    std::fs::write(work.join("victim/keep"), "kept\n").unwrap();
    // Codex refuses `rm -rf` itself before any hook runs: the guard gets another of its
    // danger patterns, one Codex lets through.
    let guarded = match cli {
        Cli::Codex => "chmod -R 777 victim && touch guard-ran",
        _ => "rm -rf victim && touch guard-ran",
    };
    let mut calls = vec![
        cli.shell("echo DANGER > danger-ran"),
        cli.shell(guarded),
        cli.shell("echo PLUGIN-BLOCK > plugin-ran"),
        cli.shell("echo REWRITE-ME | tee rewritten"),
        cli.shell("echo PLUGIN-ASK > ask-ran"),
    ];
    // security-guidance watches Edit, Write, MultiEdit and NotebookEdit; Codex writes files
    // with apply_patch, which it does not match, so Codex has no call here for it.
    if cli != Cli::Codex {
        calls.push(cli.write(&work.join("app.py"), "x = eval(input())\n"));
    }
    let run = agent.run(&calls);
    let results = run.results(cli);
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{}", run.said());
    // A turn for each call's result, the final answer's, and one more: the Stop hook's.
    let answered = calls.len();
    assert_eq!(run.turns().len(), answered + 2, "{}", run.said());

    // The session's context: careful's prompt text, in the model's first turn.
    assert!(
        run.turn(0)
            .contains("CAREFUL-CONTEXT: look before you leap"),
        "{}",
        run.turn(0)
    );
    // careful's pre hook blocked the command, and the model got its reason.
    assert!(!work.join("danger-ran").exists());
    assert!(
        results[0].contains("careful refused it: DANGER is not to be run here"),
        "{}",
        results[0]
    );
    // zot's guard refused the command; the model got its reason.
    assert!(work.join("victim/keep").is_file());
    assert!(!work.join("guard-ran").exists());
    assert!(
        results[1].contains("guard refused: command matches the danger pattern"),
        "{}",
        results[1]
    );
    // The Claude Code plugin's hook saw the agent's shell as Bash, and denied it.
    assert!(!work.join("plugin-ran").exists());
    assert!(
        results[2].contains("plugin-guard refused it: PLUGIN-BLOCK"),
        "{}",
        results[2]
    );
    // careful's rewrite ran in place of the original, and the model saw its output.
    assert_eq!(
        std::fs::read_to_string(work.join("rewritten")).unwrap(),
        "REWRITTEN\n"
    );
    assert!(
        results[3].contains("REWRITTEN") && !results[3].contains("REWRITE-ME"),
        "{}",
        results[3]
    );
    // A hook's question: no agent here can put it to a user in a run with no terminal, and
    // none runs the call. Claude Code's print mode refuses it with the hook's reason; yep
    // answers Codex (which would run the call) and Gemini CLI (which would wait for ever) with
    // a refusal that names the extension and why.
    assert!(!work.join("ask-ran").exists());
    let asked = match cli {
        Cli::Claude => "plugin-guard asks first: PLUGIN-ASK".to_string(),
        _ => "refused: extension `plugin-guard` wants the user's approval first (plugin-guard asks first: PLUGIN-ASK)".to_string(),
    };
    assert!(results[4].contains(&asked), "{}", results[4]);
    // The plugin's Stop hook kept the agent going, its reason the model's next prompt.
    let stop = "plugin-guard: run the tests before you stop";
    assert!(run.turn(answered + 1).contains(stop), "{}", run.said());
    assert!(!run.turn(answered).contains(stop));
    if cli == Cli::Codex {
        return;
    }
    // security-guidance's PostToolUse warning on the agent's own Write reached the model in
    // the turn after it, and not before.
    assert_eq!(
        std::fs::read_to_string(work.join("app.py")).unwrap(),
        "x = eval(input())\n"
    );
    let warning = "eval() executes arbitrary code";
    assert!(
        run.turn(answered).contains(warning),
        "{}",
        run.turn(answered)
    );
    assert!(!run.turn(answered - 1).contains(warning));
}

/// When the hook command cannot reach or start a shared host (the yep home's `run` is a
/// plain file, so there is no socket), a session is refused at its prompt, and a tool call
/// is refused with yep's reason for the model; `yep hooks config --fail-open` lets both go on.
fn refused_when_yep_cannot_answer_unless_fail_open(cli: Cli) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = Agent::new(cli, tmp.path());
    let work = &agent.work;
    let unusable = |home: &Path| {
        let _ = std::fs::remove_dir_all(home.join("run"));
        std::fs::create_dir_all(home).unwrap();
        std::fs::write(home.join("run"), "not a directory\n").unwrap();
    };
    let blocked = "yep could not run its hooks, so this is blocked";

    // yep down from the start: the prompt never reaches the model.
    let down = tmp.path().join("down");
    unusable(&down);
    agent.configure(&down, false);
    let run = agent.run(&[cli.shell("touch down-ran")]);
    assert!(run.turns().is_empty(), "{:#?}", run.requests);
    assert!(!work.join("down-ran").exists());
    // What the user is shown of it: Claude Code's result and Gemini CLI's warnings carry
    // yep's reason; Codex says only that its hook blocked the prompt.
    match cli {
        Cli::Codex => assert!(
            run.err.contains("hook: UserPromptSubmit Blocked"),
            "{}",
            run.said()
        ),
        _ => assert!(run.out.contains(blocked), "{}", run.said()),
    }

    // yep answered the session's start, then its home became unusable before the first call.
    let home = tmp.path().join("yep");
    let _host = StopsHost(home.clone());
    agent.configure(&home, false);
    let broken = || {
        ok(&yep(&home, &["host", "stop"]));
        unusable(&home);
    };
    let run = agent.run_holding(&[cli.shell("touch closed-ran")], Some(&broken));
    assert!(!work.join("closed-ran").exists());
    let results = run.results(cli);
    assert_eq!(results.len(), 1, "{}", run.said());
    assert!(
        results[0].contains(blocked)
            && results[0].contains(&format!("`yep hook {} --fail-open`", cli.name())),
        "{}",
        results[0]
    );

    // --fail-open: the same call runs, the host still unreachable.
    agent.configure(&home, true);
    let run = agent.run(&[cli.shell("touch open-ran && echo OPEN-RAN")]);
    assert!(work.join("open-ran").is_file(), "{}", run.said());
    let results = run.results(cli);
    assert!(
        results.len() == 1 && results[0].contains("OPEN-RAN"),
        "{results:?}"
    );
}

#[test]
fn claude_codes_own_tools_meet_yeps_chain() {
    own_tools_meet_yeps_chain(Cli::Claude);
}

#[test]
fn codexs_own_tools_meet_yeps_chain() {
    own_tools_meet_yeps_chain(Cli::Codex);
}

#[test]
fn gemini_clis_own_tools_meet_yeps_chain() {
    own_tools_meet_yeps_chain(Cli::Gemini);
}

#[test]
fn claude_code_is_refused_when_yep_cannot_answer_unless_fail_open() {
    refused_when_yep_cannot_answer_unless_fail_open(Cli::Claude);
}

#[test]
fn codex_is_refused_when_yep_cannot_answer_unless_fail_open() {
    refused_when_yep_cannot_answer_unless_fail_open(Cli::Codex);
}

#[test]
fn gemini_cli_is_refused_when_yep_cannot_answer_unless_fail_open() {
    refused_when_yep_cannot_answer_unless_fail_open(Cli::Gemini);
}
