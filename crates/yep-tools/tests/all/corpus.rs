//! The conformance corpus (`conformance/`) against this host and the servers it ships with:
//! yep-host drives every host-side transcript while `conformance/run.py` plays the scripted
//! server; the zot server-side transcripts run against the extension `docs/zot.md` shows; the
//! Rust runner (`yep_tools::conformance`) replays the YEP server-side ones against the echo
//! example; and both runners fail a transcript the peer does not follow.

use crate::common;

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use yep_host::capability::{Answer, HookEvent, HookFiring, HookOutcome, Progress, Question};
use yep_host::dialect::zot::Zot;
use yep_host::rpc::BoxFuture;
use yep_host::{CancellationToken, Events, Extension, ExtensionError, Manifest, ServerSpec};
use yep_host::{SupervisorOptions, UpdateSink};
use yep_sandbox::Mode;
use yep_tools::conformance::{self, Bindings, Transcript, Wire};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn runner() -> String {
    repo().join("conformance/run.py").display().to_string()
}

/// The transcripts of `conformance/<sub>`, sorted.
fn corpus(sub: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("conformance").join(sub))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts in conformance/{sub}");
    files
}

/// The embedder's side of a session: it answers questions from the action's `answers` and
/// keeps what was asked.
#[derive(Default)]
struct User {
    answers: Mutex<VecDeque<String>>,
    asked: Mutex<Vec<String>>,
}

impl Events for User {
    fn ask(&self, _: &str, question: Question) -> BoxFuture<Answer> {
        self.asked.lock().unwrap().push(question.prompt);
        let answer = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            match answer {
                Some(a) => Answer::answered(a),
                None => Answer::cancelled(),
            }
        })
    }
}

/// The server the host is given: the runner, playing transcript `path`, with its verdict
/// written to `report`.
fn scripted_server(t: &Transcript, path: &Path, dir: &Path, report: &Path) -> ServerSpec {
    let args = vec![
        runner(),
        "host".to_string(),
        path.display().to_string(),
        "--report".to_string(),
        report.display().to_string(),
    ];
    let mut spec = match t.wire {
        Wire::Yep => {
            let mut facet = t.manifest.clone().unwrap_or_else(|| json!({}));
            facet["capabilityServer"] = json!({"command": "python3", "args": args});
            let manifest = json!({
                "name": "conformance",
                "version": "0.1.0",
                "description": "the corpus's scripted server",
                "yolop": facet,
            });
            std::fs::write(dir.join("plugin.json"), manifest.to_string()).unwrap();
            let manifest = Manifest::load(dir).unwrap();
            ServerSpec::from_manifest(&manifest, dir.into(), dir.into(), dir.join("logs")).unwrap()
        }
        Wire::Zot => ServerSpec::new(
            "conformance".into(),
            "python3".into(),
            args,
            dir.into(),
            dir.into(),
            dir.join("logs"),
        ),
    };
    spec.session_id = "conformance".into();
    spec
}

/// What came of a call, normalized as conformance/README.md says.
fn call_outcome(result: Result<yep_host::capability::ToolResult, ExtensionError>) -> Value {
    match result {
        Ok(r) => json!({ "result": r.into_value() }),
        Err(e) if e.is_cancelled() => json!({ "cancelled": true }),
        Err(ExtensionError::Remote { error, .. }) => json!({ "error": error.message }),
        Err(e) => json!({ "failed": e.to_string() }),
    }
}

/// Do one action through `ext`; what came of it.
async fn act(ext: &Extension, user: &User, action: &Value) -> Result<Value, String> {
    let str_of = |key: &str| action[key].as_str().unwrap_or_default().to_string();
    match action["do"].as_str() {
        Some("start") => {
            let offer = ext.handshake().await.map_err(|e| e.to_string())?;
            let tools: Vec<_> = offer.tools.iter().map(|t| t.name.clone()).collect();
            let commands: Vec<_> = offer.commands.iter().map(|c| c.name.clone()).collect();
            Ok(json!({ "tools": tools, "commands": commands }))
        }
        Some("call") => {
            *user.answers.lock().unwrap() = action["answers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(String::from))
                .collect();
            user.asked.lock().unwrap().clear();
            let progress = Arc::new(Mutex::new(Vec::<String>::new()));
            let cancel = CancellationToken::new();
            let after_progress = action["cancel_after"]["progress"].as_u64();
            let sink: UpdateSink = {
                let (progress, cancel) = (Arc::clone(&progress), cancel.clone());
                Arc::new(move |p: &Progress| {
                    let mut seen = progress.lock().unwrap();
                    seen.push(p.message.clone());
                    if after_progress == Some(seen.len() as u64) {
                        cancel.cancel();
                    }
                })
            };
            if let Some(ms) = action["cancel_after"]["ms"].as_u64() {
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    cancel.cancel();
                });
            }
            let result = ext
                .call_tool(
                    &str_of("tool"),
                    action["args"].clone(),
                    Some(sink),
                    Some(cancel),
                )
                .await;
            let mut outcome = call_outcome(result);
            outcome["progress"] = json!(*progress.lock().unwrap());
            outcome["questions"] = json!(*user.asked.lock().unwrap());
            Ok(outcome)
        }
        Some("hook") => {
            let event = match action["event"].as_str() {
                Some("post_tool_use") => HookEvent::PostToolUse,
                _ => HookEvent::PreToolUse,
            };
            let firing = HookFiring {
                event,
                tool: str_of("tool"),
                args: action["args"].clone(),
                result: None,
            };
            let outcome = ext
                .with_peer(|p, _| p.fire_hook(&firing, Duration::from_secs(5)))
                .await
                .map_err(|e| e.to_string())?;
            Ok(match outcome.outcome {
                HookOutcome::Allow => json!({ "block": false }),
                HookOutcome::Rewrite(args) => json!({ "block": false, "args": args }),
                HookOutcome::Block { reason, .. } => json!({ "block": true, "reason": reason }),
                HookOutcome::Ask { reason } => json!({ "block": false, "ask": reason }),
            })
        }
        Some("command") => {
            let said = ext
                .with_peer(|p, t| p.command(&str_of("name"), &str_of("arguments"), t))
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({ "success": said.success, "message": said.message }))
        }
        Some("stop") => {
            ext.stop().await;
            Ok(json!({}))
        }
        other => Err(format!("unknown action {other:?}")),
    }
}

/// Drive the host-side transcript at `path` through yep-host; why it failed, if it did.
async fn drive(path: &Path) -> Result<(), String> {
    let t = Transcript::load(path).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("verdict");
    let spec = scripted_server(&t, path, dir.path(), &report);
    let log = spec.log_path();
    let opts = SupervisorOptions {
        dialect: match t.wire {
            Wire::Yep => SupervisorOptions::default().dialect,
            Wire::Zot => Arc::new(Zot::default()),
        },
        // The runner is the host's helper here, not a package to contain.
        sandbox: Mode::Off,
        request_timeout: Duration::from_secs(10),
        handshake_timeout: Duration::from_secs(10),
        grace: Duration::from_secs(2),
        ..SupervisorOptions::default()
    };
    let user = Arc::new(User::default());
    let ext = Extension::new(spec, opts, Arc::clone(&user) as Arc<dyn Events>);
    let mut failed = None;
    for (i, action) in t.actions.iter().enumerate() {
        let what = format!("action {} ({})", i + 1, action["do"]);
        let outcome =
            match tokio::time::timeout(Duration::from_secs(15), act(&ext, &user, action)).await {
                Err(_) => Err(format!("{what}: nothing came of it within 15 s")),
                Ok(Err(e)) => Err(format!("{what}: {e}")),
                Ok(Ok(outcome)) => match action.get("outcome") {
                    Some(pattern) => {
                        conformance::matches(pattern, Some(&outcome), &mut Bindings::new())
                            .map_err(|m| format!("{what}: {m}\n  outcome: {outcome}"))
                    }
                    None => Ok(()),
                },
            };
        if let Err(e) = outcome {
            failed = Some(e);
            break;
        }
    }
    ext.stop().await;
    let verdict = std::fs::read_to_string(&report).unwrap_or_else(|_| "no verdict".into());
    let failed = match (failed, verdict.starts_with("pass")) {
        (None, true) => return Ok(()),
        (Some(e), _) => e,
        (None, false) => "the runner did not pass it".to_string(),
    };
    Err(format!(
        "{failed}\nrunner: {verdict}\nits log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    ))
}

async fn drive_all(sub: &str) {
    let mut failures = Vec::new();
    for path in corpus(sub) {
        if let Err(e) = drive(&path).await {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yep_host_passes_the_yep_host_corpus() {
    drive_all("yep/host").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yep_host_passes_the_zot_host_corpus() {
    drive_all("zot/host").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_sends_other_arguments_fails_its_transcript() {
    let original = repo().join("conformance/yep/host/tool-call.json");
    let text = std::fs::read_to_string(&original).unwrap();
    let changed = text.replacen(
        r#""args": {"text": "hi"}}}}"#,
        r#""args": {"text": "bye"}}}}"#,
        1,
    );
    assert_ne!(text, changed, "the transcript changed shape");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tool-call.json");
    std::fs::write(&path, changed).unwrap();
    let err = drive(&path).await.unwrap_err();
    assert!(err.contains("runner: FAIL"), "{err}");
    assert!(
        err.contains(r#"at $.params.args.text: expected "bye", got "hi""#),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_runner_passes_the_echo_example_through_the_yep_server_corpus() {
    let fixture = common::Fixture::new();
    let spec = fixture.echo();
    let opts = SupervisorOptions {
        sandbox: Mode::Off,
        ..SupervisorOptions::default()
    };
    let mut failures = Vec::new();
    for t in conformance::yep_server().unwrap() {
        if let Err(e) = conformance::replay_server(&t, &spec, &opts, None).await {
            failures.push(format!("{}: {e}", t.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The corpus's runner, `conformance/run.py server …`, and what it printed.
#[allow(clippy::disallowed_methods)] // the runner spawns the server under test itself
fn run_py_server(args: &[&str], cwd: Option<&Path>) -> (bool, String) {
    let mut command = Command::new("python3");
    command.arg(runner()).arg("server").args(args);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let out = command.output().expect("python3 runs conformance/run.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The fenced block after `<!-- zot-example: FILE -->` in `docs/zot.md`.
fn zot_example(doc: &str, file: &str) -> String {
    let marker = format!("<!-- zot-example: {file} -->");
    let rest = &doc[doc.find(&marker).unwrap() + marker.len()..];
    let body = &rest[rest.find("```").unwrap()..];
    let body = &body[body.find('\n').unwrap() + 1..];
    format!("{}\n", &body[..body.find("\n```").unwrap()])
}

#[test]
fn the_wordcount_extension_of_docs_zot_md_passes_the_zot_server_corpus() {
    let doc = std::fs::read_to_string(repo().join("docs/zot.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wordcount.py"),
        zot_example(&doc, "wordcount.py"),
    )
    .unwrap();
    let transcripts = repo().join("conformance/zot/server");
    let (ok, report) = run_py_server(
        &[
            transcripts.to_str().unwrap(),
            "--cwd",
            dir.path().to_str().unwrap(),
            "--",
            "python3",
            "wordcount.py",
        ],
        None,
    );
    assert!(ok, "{report}");
    let n = corpus("zot/server").len();
    assert!(
        report.contains(&format!("{n} passed, 0 failed")),
        "{report}"
    );
}

#[test]
fn run_py_fails_a_transcript_the_server_does_not_follow_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(repo().join("conformance/yep/server/tool-call.json")).unwrap();
    let wrong = dir.path().join("tool-call.json");
    std::fs::write(
        &wrong,
        text.replace(
            r#"{"echoed": "hello, conformance"}"#,
            r#"{"echoed": "bye"}"#,
        ),
    )
    .unwrap();
    // A frame that never comes fails at the timeout.
    let silent = dir.path().join("silent.json");
    std::fs::write(
        &silent,
        r#"{"wire": "yep", "peer": "server", "description": "d", "steps": [
            {"send": {"id": 1, "method": "initialize", "params": {}}},
            {"expect": {"id": 1, "result": "$object"}},
            {"expect": {"id": 99, "result": "$any"}}
        ]}"#,
    )
    .unwrap();
    let echo = common::echo_bin();
    let (ok, report) = run_py_server(
        &[
            wrong.to_str().unwrap(),
            silent.to_str().unwrap(),
            "--timeout",
            "0.5",
            "--",
            &echo,
        ],
        None,
    );
    assert!(!ok, "{report}");
    assert!(report.contains("0 passed, 2 failed"), "{report}");
    assert!(
        report.contains(
            r#"step 5 (expect): at $.result.echoed: expected "bye", got "hello, conformance""#
        ),
        "{report}"
    );
    assert!(
        report.contains(r#"received: {"id":2,"result":{"echoed":"hello, conformance"}}"#),
        "{report}"
    );
    assert!(
        report.contains(
            r#"step 3 (expect): nothing within 0.5 s; expected {"id":99,"result":"$any"}"#
        ),
        "{report}"
    );
}

#[test]
fn run_py_agrees_with_the_shared_matcher_cases_and_parses_the_corpus() {
    #[allow(clippy::disallowed_methods)] // the runner's own checks
    let run = |args: &[&str]| {
        let out = Command::new("python3")
            .arg(runner())
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    assert!(run(&["selftest"]).contains(", 0 wrong"));
    let conformance = repo().join("conformance");
    let dirs: Vec<String> = ["yep/server", "yep/host", "zot/server", "zot/host"]
        .iter()
        .map(|d| conformance.join(d).display().to_string())
        .collect();
    let mut args = vec!["check"];
    args.extend(dirs.iter().map(String::as_str));
    run(&args);
}
