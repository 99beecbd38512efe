//! The conformance corpus (`conformance/` at the repository root): golden transcripts of the
//! YEP and zot wires in both directions, the small language their expected frames are written
//! in, and their replay over any pair of byte streams. `conformance/run.py` is the same
//! format's language-neutral runner; `yep doctor --conformance` replays the YEP server-side
//! transcripts compiled in here against a package's server. `conformance/README.md` is the
//! format's definition.

mod pattern;
mod replay;

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use yep_host::manifest::{HookEvent, Manifest};
use yep_host::supervisor::{ServerSpec, SupervisorOptions};

use pattern::check_template;
pub use pattern::{Mismatch, check_pattern, json_equal, matches, substitute};
pub use replay::{Failure, replay};

/// The variables bound so far (`$var:NAME`), by name.
pub type Bindings = BTreeMap<String, Value>;

/// The longest line read from the peer: the wire's own cap.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// How long an awaited frame may take, unless the transcript says (`timeout_ms`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The YEP server-side transcripts as committed (name, text): what `yep doctor
/// --conformance` replays, those any server must pass first. A test holds this list to the
/// directory.
pub const YEP_SERVER: &[(&str, &str)] = &[
    (
        "initialize",
        include_str!("../../../../conformance/yep/server/initialize.json"),
    ),
    (
        "unknown-tool",
        include_str!("../../../../conformance/yep/server/unknown-tool.json"),
    ),
    (
        "unknown-method",
        include_str!("../../../../conformance/yep/server/unknown-method.json"),
    ),
    (
        "malformed-line",
        include_str!("../../../../conformance/yep/server/malformed-line.json"),
    ),
    (
        "shutdown",
        include_str!("../../../../conformance/yep/server/shutdown.json"),
    ),
    (
        "stdin-eof",
        include_str!("../../../../conformance/yep/server/stdin-eof.json"),
    ),
    (
        "tool-call",
        include_str!("../../../../conformance/yep/server/tool-call.json"),
    ),
    (
        "progress",
        include_str!("../../../../conformance/yep/server/progress.json"),
    ),
    (
        "cancel",
        include_str!("../../../../conformance/yep/server/cancel.json"),
    ),
    (
        "hook-answers",
        include_str!("../../../../conformance/yep/server/hook-answers.json"),
    ),
    (
        "hook",
        include_str!("../../../../conformance/yep/server/hook.json"),
    ),
    (
        "ui-ask",
        include_str!("../../../../conformance/yep/server/ui-ask.json"),
    ),
    (
        "command",
        include_str!("../../../../conformance/yep/server/command.json"),
    ),
    (
        "dynamic-prompt",
        include_str!("../../../../conformance/yep/server/dynamic-prompt.json"),
    ),
];

/// The YEP server-side transcripts, parsed.
pub fn yep_server() -> Result<Vec<Transcript>, TranscriptError> {
    YEP_SERVER
        .iter()
        .map(|(name, text)| Transcript::parse(name, text))
        .collect()
}

/// The wire a transcript speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Yep,
    Zot,
}

/// Which side of the wire is under test; the runner plays the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A server (an SDK's, a package's): the runner plays the host.
    Server,
    /// A host: the runner plays the server the host spawns.
    Host,
}

/// One golden transcript.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The file's stem.
    pub name: String,
    pub wire: Wire,
    pub peer: Side,
    pub description: String,
    /// What a server's manifest must declare for the transcript to apply to it.
    pub requires: Requires,
    /// Methods (YEP) or types (zot) of frames without an id the peer may send at any point.
    pub allow: Vec<String>,
    /// How long an awaited frame may take, when the transcript says.
    pub timeout: Option<Duration>,
    pub steps: Vec<Step>,
    /// Host-side: the manifest facet the host under test is given for the runner's server.
    pub manifest: Option<Value>,
    /// Host-side: what the host's embedder does, in order, and what comes of it.
    pub actions: Vec<Value>,
}

/// One step of a transcript.
#[derive(Debug, Clone)]
pub enum Step {
    /// A frame to write (its `$var:NAME`s replaced).
    Send(Value),
    /// A line to write as it is: not necessarily a frame.
    SendRaw(String),
    /// Frames the peer must write next, in order or (`unordered`) in any order.
    Expect { frames: Vec<Value>, unordered: bool },
    /// End the peer's input.
    Close,
    /// The peer's output must end.
    ExpectEof,
}

/// What a server's manifest must declare for a transcript to apply to it.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct Requires {
    pub tools: Vec<String>,
    /// Hook events (`pre_tool_use`, `post_tool_use`) it subscribes to.
    pub hooks: Vec<String>,
    pub commands: Vec<String>,
    pub ui_ask: bool,
    pub dynamic_prompt: bool,
}

impl Requires {
    /// What `manifest` lacks of these, one phrase each (``tool `count` ``); empty when the
    /// transcript applies.
    pub fn unmet(&self, manifest: &Manifest) -> Vec<String> {
        let f = &manifest.yolop;
        let mut lacks = Vec::new();
        for tool in &self.tools {
            if manifest.tool(tool).is_none() {
                lacks.push(format!("tool `{tool}`"));
            }
        }
        for hook in &self.hooks {
            let event = match hook.as_str() {
                "pre_tool_use" => Some(HookEvent::PreToolUse),
                "post_tool_use" => Some(HookEvent::PostToolUse),
                _ => None,
            };
            if !f.hooks.iter().any(|h| Some(h.event) == event) {
                lacks.push(format!("a `{hook}` hook"));
            }
        }
        for command in &self.commands {
            if !f.commands.iter().any(|c| &c.name == command) {
                lacks.push(format!("command `{command}`"));
            }
        }
        if self.ui_ask && !f.ui_ask {
            lacks.push("`ui_ask`".into());
        }
        if self.dynamic_prompt && !f.dynamic_prompt {
            lacks.push("`dynamic_prompt`".into());
        }
        lacks
    }
}

/// A transcript that is itself wrong: not the peer's fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TranscriptError(String);

fn invalid(message: impl Into<String>) -> TranscriptError {
    TranscriptError(message.into())
}

impl Transcript {
    /// Parse transcript `name` from its JSON text, checking every step and pattern.
    pub fn parse(name: &str, text: &str) -> Result<Transcript, TranscriptError> {
        let fail = |why: String| invalid(format!("transcript {name}: {why}"));
        let doc: Value = serde_json::from_str(text).map_err(|e| fail(format!("not JSON: {e}")))?;
        let Value::Object(doc) = doc else {
            return Err(fail("a transcript is an object with `steps`".into()));
        };
        let wire = match doc.get("wire").and_then(Value::as_str) {
            Some("yep") => Wire::Yep,
            Some("zot") => Wire::Zot,
            _ => return Err(fail("`wire` must be \"yep\" or \"zot\"".into())),
        };
        let peer = match doc.get("peer").and_then(Value::as_str) {
            Some("server") => Side::Server,
            Some("host") => Side::Host,
            _ => return Err(fail("`peer` must be \"server\" or \"host\"".into())),
        };
        let strings = |key: &str| -> Result<Vec<String>, TranscriptError> {
            match doc.get(key) {
                None => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|_| fail(format!("`{key}` must be an array of strings"))),
            }
        };
        let requires = match doc.get("requires") {
            None => Requires::default(),
            Some(v) => {
                serde_json::from_value(v.clone()).map_err(|e| fail(format!("`requires`: {e}")))?
            }
        };
        let timeout = match doc.get("timeout_ms") {
            None => None,
            Some(v) => {
                Some(Duration::from_millis(v.as_u64().ok_or_else(|| {
                    fail("`timeout_ms` must be a whole number".into())
                })?))
            }
        };
        let Some(Value::Array(raw_steps)) = doc.get("steps") else {
            return Err(fail("a transcript is an object with `steps`".into()));
        };
        let mut steps = Vec::with_capacity(raw_steps.len());
        for (i, step) in raw_steps.iter().enumerate() {
            steps.push(parse_step(step).map_err(|why| fail(format!("step {}: {why}", i + 1)))?);
        }
        let actions = match doc.get("actions") {
            None => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(fail("`actions` must be an array".into())),
        };
        Ok(Transcript {
            name: name.to_string(),
            wire,
            peer,
            description: doc
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            requires,
            allow: strings("allow")?,
            timeout,
            steps,
            manifest: doc.get("manifest").cloned(),
            actions,
        })
    }

    /// Read and parse the transcript at `path`; its name is the file's stem.
    pub fn load(path: &std::path::Path) -> Result<Transcript, TranscriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("failed to read {}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Transcript::parse(&name, &text)
    }
}

const STEP_KINDS: [&str; 5] = ["send", "send_raw", "expect", "close", "expect_eof"];

fn parse_step(step: &Value) -> Result<Step, TranscriptError> {
    let Value::Object(step) = step else {
        return Err(invalid("a step is an object"));
    };
    let kinds: Vec<&str> = STEP_KINDS
        .iter()
        .copied()
        .filter(|k| step.contains_key(*k))
        .collect();
    let [kind] = kinds[..] else {
        return Err(invalid(format!(
            "must have exactly one of {}",
            STEP_KINDS.join(", ")
        )));
    };
    let body = &step[kind];
    Ok(match kind {
        "send" => {
            if !body.is_object() {
                return Err(invalid("sends a frame (an object)"));
            }
            check_template(body, "$")?;
            Step::Send(body.clone())
        }
        "send_raw" => Step::SendRaw(
            body.as_str()
                .ok_or_else(|| invalid("send_raw takes a string"))?
                .to_string(),
        ),
        "expect" => {
            let frames = match body {
                Value::Array(frames) => frames.clone(),
                frame => vec![frame.clone()],
            };
            for frame in &frames {
                if !frame.is_object() {
                    return Err(invalid("expects a frame (an object)"));
                }
                check_pattern(frame)?;
            }
            let unordered = step
                .get("unordered")
                .is_some_and(|u| u.as_bool() == Some(true));
            Step::Expect { frames, unordered }
        }
        "close" => Step::Close,
        _ => Step::ExpectEof,
    })
}

/// A long text cut for a report: the first 300 characters.
fn preview(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The variables every replay starts with: the workspace and the config the server is
/// given, as `initialize` sends them.
pub fn bindings(spec: &ServerSpec) -> Bindings {
    let mut vars = Bindings::new();
    vars.insert(
        "workspace_root".into(),
        Value::String(spec.workspace_root.to_string_lossy().into_owned()),
    );
    vars.insert("config".into(), spec.config.clone());
    vars
}

/// Replay server-side transcript `t` against a fresh server of `spec`, spawned exactly as
/// the supervisor spawns it under `opts` (its sandbox, env, cwd and log). A failure adds the
/// server's last stderr lines.
pub async fn replay_server(
    t: &Transcript,
    spec: &ServerSpec,
    opts: &SupervisorOptions,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let spawn = spec.spawn_spec(&spec.workspace_root, spec.env.clone(), opts, None);
    let spawned = yep_host::process::spawn(&spawn).map_err(|e| Failure {
        at: "spawn".into(),
        message: format!("cannot spawn `{}`: {}", spec.command, e.source),
    })?;
    let yep_host::process::Spawned {
        process,
        stdin,
        stdout,
    } = spawned;
    let outcome = replay(t, stdout, stdin, bindings(spec), timeout).await;
    // Its input is closed by now (the replay owned it): it exits, or is made to.
    let _ = process
        .terminate_in(Duration::from_secs(1), Duration::from_millis(500))
        .await;
    outcome.map_err(|mut failure| {
        let tail = process.stderr_tail();
        let tail = &tail[tail.len().saturating_sub(5)..];
        if !tail.is_empty() {
            failure.message.push_str("\n  its last stderr lines:");
            for line in tail {
                failure
                    .message
                    .push_str(&format!("\n    {}", preview(line)));
            }
        }
        failure
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncWriteExt;

    fn repo() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn the_matcher_agrees_with_the_shared_cases() {
        let text = std::fs::read_to_string(repo().join("conformance/matching.json")).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let mut wrong = Vec::new();
        for (i, case) in doc["cases"].as_array().unwrap().iter().enumerate() {
            let mut vars: Bindings =
                serde_json::from_value(case.get("bound").cloned().unwrap_or(json!({}))).unwrap();
            let got = match check_pattern(&case["pattern"]) {
                Err(_) => json!("error"),
                Ok(()) => json!(matches(&case["pattern"], Some(&case["value"]), &mut vars).is_ok()),
            };
            let binds_ok = match case.get("binds") {
                Some(binds) if got == json!(true) => json_equal(&json!(vars), binds),
                _ => true,
            };
            if got != case["matches"] || !binds_ok {
                wrong.push(format!(
                    "case {} ({}): got {got}, bindings {vars:?}",
                    i + 1,
                    case["note"]
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_compiled_in_corpus_is_the_directory() {
        let dir = repo().join("conformance/yep/server");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = YEP_SERVER.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "YEP_SERVER must list conformance/yep/server/*.json"
        );
        for t in yep_server().unwrap() {
            assert_eq!((t.wire, t.peer), (Wire::Yep, Side::Server), "{}", t.name);
        }
    }

    #[test]
    fn every_transcript_in_the_corpus_parses() {
        let mut n = 0;
        for sub in ["yep/server", "yep/host", "zot/server", "zot/host"] {
            for entry in std::fs::read_dir(repo().join("conformance").join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let t = Transcript::load(&path).unwrap_or_else(|e| panic!("{e}"));
                let (wire, peer) = sub.split_once('/').unwrap();
                assert_eq!(
                    format!("{:?}", t.wire).to_lowercase(),
                    wire,
                    "{}",
                    path.display()
                );
                assert_eq!(
                    format!("{:?}", t.peer).to_lowercase(),
                    peer,
                    "{}",
                    path.display()
                );
                assert!(
                    !t.description.is_empty(),
                    "{} has no description",
                    path.display()
                );
                n += 1;
            }
        }
        assert!(n >= 30, "only {n} transcripts");
    }

    #[test]
    fn a_send_with_an_unknown_dollar_string_is_refused() {
        let err = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "steps": [{"send": {"id": "$string"}}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("only $var:NAME"), "{err}");
        let err = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "steps": [{"expect": {"id": "$strnig"}}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown matcher"), "{err}");
    }

    #[test]
    fn substitution_fills_bound_variables_and_unescapes() {
        let mut vars = Bindings::new();
        vars.insert("ask".into(), json!(3));
        let sent = substitute(
            &json!({"id": "$var:ask", "text": "$$HOME", "$$ref": [ "$var:ask" ]}),
            &vars,
        )
        .unwrap();
        assert_eq!(sent, json!({"id": 3, "text": "$HOME", "$ref": [3]}));
        assert!(substitute(&json!({"id": "$var:nope"}), &vars).is_err());
    }

    #[tokio::test]
    async fn a_replay_fails_with_the_path_the_expected_frame_and_the_received_one() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "allow": ["log"], "steps": [
                {"send": {"id": 1, "method": "tool/call"}},
                {"expect": {"id": 1, "result": {"echoed": "hello"}}}
            ]}"#,
        )
        .unwrap();
        let peer_out =
            b"{\"method\":\"log\",\"params\":{}}\n{\"id\":1,\"result\":{\"echoed\":\"hi\"}}\n";
        let mut sent = Vec::new();
        let err = replay(&t, &peer_out[..], &mut sent, Bindings::new(), None)
            .await
            .unwrap_err();
        assert_eq!(err.at, "step 2 (expect)");
        assert!(
            err.message
                .starts_with(r#"at $.result.echoed: expected "hello", got "hi""#),
            "{err}"
        );
        assert!(
            err.message
                .contains(r#"received: {"id":1,"result":{"echoed":"hi"}}"#),
            "{err}"
        );
        assert_eq!(sent, b"{\"id\":1,\"method\":\"tool/call\"}\n");
    }

    #[tokio::test]
    async fn unordered_frames_match_in_any_order_and_bind_ids() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "host", "steps": [
                {"expect": [{"id": "$var:a", "method": "a"}, {"id": "$var:b", "method": "b"}], "unordered": true},
                {"send": {"id": "$var:b", "result": {}}},
                {"expect_eof": true}
            ]}"#,
        )
        .unwrap();
        let peer_out = b"{\"id\":7,\"method\":\"b\"}\n\n{\"id\":8,\"method\":\"a\"}\n";
        let mut sent = Vec::new();
        replay(&t, &peer_out[..], &mut sent, Bindings::new(), None)
            .await
            .unwrap();
        assert_eq!(sent, b"{\"id\":7,\"result\":{}}\n");
    }

    #[tokio::test]
    async fn a_peer_that_floods_frames_it_may_skip_still_fails_at_the_timeout() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "allow": ["log"], "steps": [{"expect": {"id": 1}}]}"#,
        )
        .unwrap();
        let (mut flood, out) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            while flood.write_all(b"{\"method\":\"log\"}\n").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let err = replay(
            &t,
            out,
            tokio::io::sink(),
            Bindings::new(),
            Some(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
        assert!(err.message.starts_with("nothing within 100 ms"), "{err}");
    }

    #[tokio::test]
    async fn a_frame_that_never_comes_fails_at_the_timeout() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "zot", "peer": "server", "steps": [{"expect": {"type": "hello"}}]}"#,
        )
        .unwrap();
        let (_keep, quiet) = tokio::io::duplex(64);
        let err = replay(
            &t,
            quiet,
            tokio::io::sink(),
            Bindings::new(),
            Some(Duration::from_millis(50)),
        )
        .await
        .unwrap_err();
        assert!(err.message.starts_with("nothing within 50 ms"), "{err}");
    }
}
