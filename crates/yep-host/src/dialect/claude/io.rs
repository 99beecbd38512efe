//! A Claude Code command hook's contract, both ways: the JSON it reads on stdin, and what its
//! exit status, stdout and stderr say back. Pure: running the command is
//! [`crate::process::run_to_end`]'s.
//!
//! What a hook says, by how it ended:
//! - exit 0: its stdout, when it starts with `{`, is JSON (`hookSpecificOutput` with
//!   `permissionDecision`, `updatedInput`, `additionalContext`; `decision: "block"` with
//!   `reason`; `continue: false` with `stopReason`; `systemMessage`). Other stdout is context
//!   on the events whose plain output reaches the model (SessionStart, UserPromptSubmit) and
//!   nothing on the others;
//! - exit 2: a block, on the events that can block; the JSON `reason`, else stderr, says why;
//! - any other exit (1, 127 for a missing script, a signal, a timeout): the hook failed. That
//!   is never read as an allow: the caller reports it, and the plugin's failure mode decides.
//!
//! Every text a hook gives is cut to [`TEXT_CAP`] characters.

use serde_json::{Value, json};

/// The most characters of one text a hook gives (a context, a reason, a message), as Claude
/// Code caps them.
pub(crate) const TEXT_CAP: usize = 10_000;

/// The hook events yep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Event {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    SessionStart,
    SessionEnd,
    Stop,
    SubagentStop,
    PreCompact,
    Notification,
}

impl Event {
    /// Its name in `hooks.json` and in `hook_event_name`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::SessionStart => "SessionStart",
            Event::SessionEnd => "SessionEnd",
            Event::Stop => "Stop",
            Event::SubagentStop => "SubagentStop",
            Event::PreCompact => "PreCompact",
            Event::Notification => "Notification",
        }
    }

    /// Whether exit 2 (or a `block`) stops what the event is about.
    pub(crate) fn can_block(self) -> bool {
        matches!(
            self,
            Event::PreToolUse
                | Event::PostToolUse
                | Event::UserPromptSubmit
                | Event::Stop
                | Event::SubagentStop
                | Event::PreCompact
        )
    }

    /// Whether plain stdout on exit 0 reaches the model as context.
    fn plain_stdout_is_context(self) -> bool {
        matches!(self, Event::SessionStart | Event::UserPromptSubmit)
    }
}

/// The session a hook runs in: the common fields of its input.
#[derive(Debug, Clone)]
pub(crate) struct Context<'a> {
    pub session_id: &'a str,
    /// The workspace.
    pub cwd: &'a str,
    /// A file that stands for the transcript (yep keeps none: an empty one).
    pub transcript_path: &'a str,
}

/// What an event is about: the fields of its input past the common ones.
#[derive(Debug, Clone)]
pub(crate) enum About<'a> {
    /// PreToolUse: the tool, by its Claude Code name, its input, and the call's id.
    Tool {
        name: &'a str,
        input: &'a Value,
        id: &'a str,
    },
    /// PostToolUse: as `Tool`, with what the tool answered.
    ToolDone {
        name: &'a str,
        input: &'a Value,
        id: &'a str,
        response: &'a Value,
    },
    /// UserPromptSubmit.
    Prompt(&'a str),
    /// SessionStart: `startup`, `resume`, `clear` or `compact`.
    Start(&'a str),
    /// SessionEnd: why it ends.
    End(&'a str),
    /// Stop and SubagentStop: whether a stop hook keeps the agent going already.
    Stop { active: bool },
    /// PreCompact: `manual` or `auto`.
    Compact(&'a str),
    /// Notification: its text.
    Notice(&'a str),
}

/// The JSON a hook of `event` reads on stdin.
pub(crate) fn input(event: Event, context: &Context<'_>, about: &About<'_>) -> Value {
    let mut input = json!({
        "session_id": context.session_id,
        "transcript_path": context.transcript_path,
        "cwd": context.cwd,
        "permission_mode": "default",
        "hook_event_name": event.name(),
    });
    let extra = match about {
        About::Tool { name, input, id } => {
            json!({"tool_name": name, "tool_input": input, "tool_use_id": id})
        }
        About::ToolDone {
            name,
            input,
            id,
            response,
        } => json!({
            "tool_name": name, "tool_input": input, "tool_use_id": id, "tool_response": response,
        }),
        About::Prompt(prompt) => json!({ "prompt": prompt }),
        About::Start(source) => json!({ "source": source }),
        About::End(reason) => json!({ "reason": reason }),
        About::Stop { active } => json!({ "stop_hook_active": active }),
        About::Compact(trigger) => json!({ "trigger": trigger, "custom_instructions": "" }),
        About::Notice(message) => json!({ "message": message }),
    };
    if let (Some(input), Value::Object(extra)) = (input.as_object_mut(), extra) {
        input.extend(extra);
    }
    input
}

/// A PreToolUse hook's decision on the call, weakest first (the strongest of several wins).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Permission {
    Allow,
    /// The user is to be asked.
    Ask,
    Deny,
}

/// What one hook said.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Said {
    /// PreToolUse's decision.
    pub permission: Option<Permission>,
    /// Why, for the model on a deny, for the user on an allow or ask.
    pub reason: Option<String>,
    /// A block on an event that can block (exit 2, `decision: "block"`): why.
    pub block: Option<String>,
    /// PreToolUse: the input to call the tool with instead (the whole of it).
    pub updated_input: Option<Value>,
    /// Text for the model.
    pub context: Option<String>,
    /// A warning for the user.
    pub system_message: Option<String>,
    /// `continue: false`: the agent stops, and the user is told this.
    pub stop: Option<String>,
    /// The hook said it runs on in the background (`{"async": true}` first): nothing it
    /// says decides anything.
    pub background: bool,
}

/// Why a hook's answer is no answer: it failed, and that is never an allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Failed {
    #[error("it ran past its timeout")]
    TimedOut,
    #[error("its command was not found (exit 127){}", tail_of(.0))]
    NotFound(Vec<String>),
    #[error("it exited with {status}{}", tail_of(.tail))]
    Exit { status: String, tail: Vec<String> },
}

fn tail_of(tail: &[String]) -> String {
    match tail.last() {
        Some(line) => format!(": {}", cut(line)),
        None => String::new(),
    }
}

/// `text` cut to [`TEXT_CAP`] characters, saying so.
fn cut(text: &str) -> String {
    match text.char_indices().nth(TEXT_CAP) {
        Some((at, _)) => format!("{}… (cut at {TEXT_CAP} characters)", &text[..at]),
        None => text.to_string(),
    }
}

/// What a hook of `event` said, from how it ended: its exit `code` (`None`: killed at its
/// timeout, or by a signal: `signal`), its stdout, and its last lines of stderr.
pub(crate) fn read(
    event: Event,
    code: Option<i32>,
    signal: Option<String>,
    stdout: &[u8],
    stderr_tail: &[String],
) -> Result<Said, Failed> {
    let stdout = String::from_utf8_lossy(stdout);
    // `{"async": true}` first: it ran on in the background, and decides nothing; its answer
    // is the first JSON object line after (as Claude Code reads it once it has exited), and
    // what that tells the user or the model still counts.
    let first = stdout.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if serde_json::from_str::<Value>(first).is_ok_and(|v| v["async"] == true) {
        let answer = stdout
            .lines()
            .skip_while(|l| *l != first)
            .skip(1)
            .find(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.is_object()))
            .unwrap_or("");
        let said = read(event, code, signal, answer.as_bytes(), stderr_tail)?;
        return Ok(Said {
            context: said.context,
            system_message: said.system_message,
            background: true,
            ..Said::default()
        });
    }
    let trimmed = stdout.trim();
    let json = trimmed
        .starts_with('{')
        .then(|| serde_json::from_str::<Value>(trimmed).ok())
        .flatten()
        .filter(Value::is_object);
    match code {
        Some(0) => Ok(match json {
            Some(json) => from_json(event, &json),
            None => Said {
                context: (event.plain_stdout_is_context() && !trimmed.is_empty())
                    .then(|| cut(trimmed)),
                ..Said::default()
            },
        }),
        Some(2) => {
            let mut said = json
                .as_ref()
                .map(|j| from_json(event, j))
                .unwrap_or_default();
            let why = said
                .block
                .clone()
                .or_else(|| said.reason.clone())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| cut(&stderr_tail.join("\n")));
            if event == Event::PreToolUse {
                said.permission = Some(Permission::Deny);
                said.reason = Some(why);
                said.updated_input = None;
            } else if event.can_block() {
                said.block = Some(why);
            } else {
                // Shown to the user only.
                said.system_message = Some(why);
            }
            Ok(said)
        }
        Some(127) => Err(Failed::NotFound(stderr_tail.to_vec())),
        Some(code) => match json {
            // Valid JSON decides alone, whatever the exit.
            Some(json) => Ok(from_json(event, &json)),
            None => Err(Failed::Exit {
                status: format!("status {code}"),
                tail: stderr_tail.to_vec(),
            }),
        },
        None => match signal {
            Some(signal) => Err(Failed::Exit {
                status: signal,
                tail: stderr_tail.to_vec(),
            }),
            None => Err(Failed::TimedOut),
        },
    }
}

/// What a hook's JSON says.
fn from_json(event: Event, json: &Value) -> Said {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(cut);
    let specific = &json["hookSpecificOutput"];
    let mut said = Said {
        context: text(&specific["additionalContext"]),
        system_message: text(&json["systemMessage"]),
        stop: (json["continue"] == false).then(|| text(&json["stopReason"]).unwrap_or_default()),
        ..Said::default()
    };
    let decision = json["decision"].as_str();
    let reason = text(&json["reason"]);
    if event == Event::PreToolUse {
        let permission = match (specific["permissionDecision"].as_str(), decision) {
            (Some("allow"), _) | (None, Some("approve")) => Some(Permission::Allow),
            (Some("deny"), _) | (None, Some("block")) => Some(Permission::Deny),
            (Some("ask"), _) => Some(Permission::Ask),
            _ => None,
        };
        said.reason = text(&specific["permissionDecisionReason"]).or(reason);
        said.updated_input = specific
            .get("updatedInput")
            .filter(|v| v.is_object())
            .cloned()
            .filter(|_| permission != Some(Permission::Deny));
        said.permission = permission;
    } else if decision == Some("block") && event.can_block() {
        said.block = Some(reason.unwrap_or_default());
    }
    said
}

/// What the hooks of one event said together, as Claude Code merges them: deny beats ask
/// beats allow, the first `updatedInput` (in the order given) is what runs, every context
/// and message is kept, and the first block and stop stand.
pub(crate) fn merge(all: Vec<Said>) -> Said {
    let mut merged = Said::default();
    let mut contexts = Vec::new();
    let mut messages = Vec::new();
    for said in all {
        if said.background {
            // It decides nothing; what it tells is kept.
            contexts.extend(said.context);
            messages.extend(said.system_message);
            continue;
        }
        if said.permission > merged.permission {
            merged.permission = said.permission.clone();
            merged.reason = said.reason.clone();
        }
        if merged.updated_input.is_none() {
            merged.updated_input = said.updated_input;
        }
        merged.block = merged.block.or(said.block);
        merged.stop = merged.stop.or(said.stop);
        contexts.extend(said.context);
        messages.extend(said.system_message);
    }
    if merged.permission == Some(Permission::Deny) {
        merged.updated_input = None;
    }
    merged.context = (!contexts.is_empty()).then(|| contexts.join("\n\n"));
    merged.system_message = (!messages.is_empty()).then(|| messages.join("\n"));
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(event: Event, code: i32, stdout: &str, stderr: &[&str]) -> Result<Said, Failed> {
        let tail: Vec<String> = stderr.iter().map(|s| s.to_string()).collect();
        read(event, Some(code), None, stdout.as_bytes(), &tail)
    }

    #[test]
    fn the_input_has_the_common_fields_and_the_events_own() {
        let context = Context {
            session_id: "s1",
            cwd: "/ws",
            transcript_path: "/data/transcript.jsonl",
        };
        let args = json!({"command": "ls"});
        let pre = input(
            Event::PreToolUse,
            &context,
            &About::Tool {
                name: "Bash",
                input: &args,
                id: "call-1",
            },
        );
        assert_eq!(
            pre,
            json!({"session_id": "s1", "transcript_path": "/data/transcript.jsonl", "cwd": "/ws",
                "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "tool_use_id": "call-1"})
        );
        let start = input(Event::SessionStart, &context, &About::Start("startup"));
        assert_eq!(start["source"], "startup");
        assert_eq!(start["hook_event_name"], "SessionStart");
        let stop = input(Event::Stop, &context, &About::Stop { active: true });
        assert_eq!(stop["stop_hook_active"], true);
    }

    #[test]
    fn exit_2_blocks_with_stderr_unless_the_json_gives_a_reason() {
        let said = ran(Event::PreToolUse, 2, "", &["no rm -rf here"]).unwrap();
        assert_eq!(said.permission, Some(Permission::Deny));
        assert_eq!(said.reason.as_deref(), Some("no rm -rf here"));
        // Exit 2 blocks even when the JSON says allow; its reason wins over stderr.
        let said = ran(
            Event::Stop,
            2,
            r#"{"decision": "block", "reason": "review first"}"#,
            &["ignored"],
        )
        .unwrap();
        assert_eq!(said.block.as_deref(), Some("review first"));
        let said = ran(
            Event::PreToolUse,
            2,
            r#"{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"x": 1}}}"#,
            &["denied"],
        )
        .unwrap();
        assert_eq!(said.permission, Some(Permission::Deny));
        assert_eq!(said.updated_input, None);
        // SessionStart cannot block: the user is told.
        let said = ran(Event::SessionStart, 2, "", &["no network"]).unwrap();
        assert_eq!(
            (said.block, said.system_message.as_deref()),
            (None, Some("no network"))
        );
    }

    #[test]
    fn json_on_exit_0_decides_and_plain_stdout_is_context_only_where_claude_code_says() {
        let said = ran(
            Event::PreToolUse,
            0,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                "permissionDecisionReason": "touches prod", "additionalContext": "careful"}}"#,
            &[],
        )
        .unwrap();
        assert_eq!(said.permission, Some(Permission::Ask));
        assert_eq!(said.reason.as_deref(), Some("touches prod"));
        assert_eq!(said.context.as_deref(), Some("careful"));
        let said = ran(
            Event::PreToolUse,
            0,
            r#"{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls -a"}}}"#,
            &[],
        )
        .unwrap();
        assert_eq!(said.updated_input, Some(json!({"command": "ls -a"})));
        let said = ran(
            Event::PostToolUse,
            0,
            r#"{"decision": "block", "reason": "it added eval("}"#,
            &[],
        )
        .unwrap();
        assert_eq!(said.block.as_deref(), Some("it added eval("));
        assert_eq!(
            ran(Event::SessionStart, 0, "be brief\n", &[])
                .unwrap()
                .context
                .as_deref(),
            Some("be brief")
        );
        assert_eq!(
            ran(Event::PreToolUse, 0, "be brief\n", &[]).unwrap(),
            Said::default()
        );
        let said = ran(
            Event::UserPromptSubmit,
            0,
            r#"{"continue": false, "stopReason": "out of budget", "systemMessage": "hm"}"#,
            &[],
        )
        .unwrap();
        assert_eq!(said.stop.as_deref(), Some("out of budget"));
        assert_eq!(said.system_message.as_deref(), Some("hm"));
    }

    #[test]
    fn a_crash_a_missing_script_or_a_timeout_is_a_failure_never_an_allow() {
        assert_eq!(
            ran(
                Event::PreToolUse,
                1,
                "not json",
                &["Traceback", "KeyError: x"]
            ),
            Err(Failed::Exit {
                status: "status 1".into(),
                tail: vec!["Traceback".into(), "KeyError: x".into()]
            })
        );
        let missing = ran(
            Event::PreToolUse,
            127,
            "",
            &["sh: 1: ./guard.sh: not found"],
        );
        assert_eq!(
            missing.unwrap_err().to_string(),
            "its command was not found (exit 127): sh: 1: ./guard.sh: not found"
        );
        assert_eq!(
            read(Event::PreToolUse, None, None, b"", &[]),
            Err(Failed::TimedOut)
        );
        let killed = read(
            Event::PreToolUse,
            None,
            Some("signal 9 (SIGKILL)".into()),
            b"",
            &[],
        );
        assert!(matches!(killed, Err(Failed::Exit { .. })), "{killed:?}");
        // Valid JSON decides alone whatever the exit.
        let said = ran(
            Event::PreToolUse,
            1,
            r#"{"hookSpecificOutput": {"permissionDecision": "deny"}}"#,
            &[],
        )
        .unwrap();
        assert_eq!(said.permission, Some(Permission::Deny));
    }

    #[test]
    fn an_async_first_line_decides_nothing_and_long_text_is_cut() {
        let said = ran(
            Event::SessionStart,
            0,
            "{\"async\": true, \"asyncTimeout\": 180000}\n{\"hookSpecificOutput\": {\"additionalContext\": \"x\"}}\n",
            &[],
        )
        .unwrap();
        assert!(said.background);
        // Its answer is the JSON line after: it tells, and decides nothing.
        assert_eq!(said.context.as_deref(), Some("x"));
        let said = ran(
            Event::SessionStart,
            0,
            "{\"async\": true}\nbuilding\n{\"systemMessage\": \"the reviewer is unavailable\", \"decision\": \"block\"}\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            (said.system_message.as_deref(), said.block),
            (Some("the reviewer is unavailable"), None)
        );
        let failed = ran(
            Event::SessionStart,
            1,
            "{\"async\": true}\n",
            &["Traceback"],
        );
        assert!(matches!(failed, Err(Failed::Exit { .. })), "{failed:?}");
        let long = "é".repeat(TEXT_CAP + 5);
        let said = ran(Event::SessionStart, 0, &long, &[]).unwrap();
        let context = said.context.unwrap();
        assert!(
            context.ends_with("(cut at 10000 characters)"),
            "{}",
            &context[context.len() - 40..]
        );
        assert_eq!(context.chars().filter(|c| *c == 'é').count(), TEXT_CAP);
    }

    #[test]
    fn merged_deny_beats_ask_beats_allow_and_the_first_rewrite_runs() {
        let allow = |input: Value| Said {
            permission: Some(Permission::Allow),
            updated_input: Some(input),
            context: Some("a".into()),
            ..Said::default()
        };
        let ask = Said {
            permission: Some(Permission::Ask),
            reason: Some("sure?".into()),
            context: Some("b".into()),
            ..Said::default()
        };
        let merged = merge(vec![
            allow(json!({"n": 1})),
            ask.clone(),
            allow(json!({"n": 2})),
        ]);
        assert_eq!(merged.permission, Some(Permission::Ask));
        assert_eq!(merged.reason.as_deref(), Some("sure?"));
        assert_eq!(merged.updated_input, Some(json!({"n": 1})));
        assert_eq!(merged.context.as_deref(), Some("a\n\nb\n\na"));
        let deny = Said {
            permission: Some(Permission::Deny),
            reason: Some("no".into()),
            ..Said::default()
        };
        let background = Said {
            permission: Some(Permission::Allow),
            context: Some("later".into()),
            background: true,
            ..Said::default()
        };
        let merged = merge(vec![allow(json!({"n": 1})), deny, ask, background]);
        assert_eq!(merged.context.as_deref(), Some("a\n\nb\n\nlater"));
        assert_eq!(merged.permission, Some(Permission::Deny));
        assert_eq!(merged.reason.as_deref(), Some("no"));
        assert_eq!(merged.updated_input, None);
        assert_eq!(merge(Vec::new()), Said::default());
    }
}
