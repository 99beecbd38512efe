//! Gemini CLI's hooks: the input's `hook_event_name` (`SessionStart`, `BeforeAgent`,
//! `BeforeTool`, `AfterTool`, `AfterAgent`), `tool_name`, `tool_input`, `tool_response`,
//! `prompt`, `stop_hook_active` and `cwd`; the answer as JSON on stdout: `decision` (`deny`,
//! `ask`) with a `reason`, `hookSpecificOutput`'s `tool_input` (a rewrite) and
//! `additionalContext`, `systemMessage`; exit code 0.

use super::wire::{Config, Input, Reply, cannot_ask, joined, unavailable, written, yep_tool};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use yep_host::runtime::{AgentAnswer, AgentEvent, Verdict};

/// Gemini CLI's tools and yep's names for the same tool. A tool not listed keeps its name.
pub(super) const TOOLS: [(&str, &str); 8] = [
    ("run_shell_command", "bash"),
    ("write_file", "write"),
    ("replace", "edit"),
    ("read_file", "read"),
    ("glob", "glob"),
    ("search_file_content", "grep"),
    ("web_fetch", "webfetch"),
    ("google_web_search", "websearch"),
];

/// The events yep answers, and whether each takes a tool matcher.
const EVENTS: [(&str, bool); 5] = [
    ("SessionStart", false),
    ("BeforeAgent", false),
    ("BeforeTool", true),
    ("AfterTool", true),
    ("AfterAgent", false),
];

/// How long Gemini CLI lets the command run, in milliseconds (its unit).
const TIMEOUT_MS: u64 = 120_000;

/// Gemini CLI's hook input.
pub(super) fn parse(v: &Value) -> Input {
    let name = v["hook_event_name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let tool = v["tool_name"].as_str().map(str::to_string);
    let yep_name = || yep_tool(&TOOLS, tool.as_deref().unwrap_or_default());
    let event = match name.as_str() {
        "SessionStart" => Some(AgentEvent::SessionStart),
        "BeforeAgent" => Some(AgentEvent::PromptSubmit {
            prompt: v["prompt"].as_str().unwrap_or_default().to_string(),
        }),
        "BeforeTool" => Some(AgentEvent::PreTool {
            tool: yep_name(),
            args: v["tool_input"].clone(),
            id: None,
        }),
        "AfterTool" => Some(AgentEvent::PostTool {
            tool: yep_name(),
            args: v["tool_input"].clone(),
            id: None,
            result: v["tool_response"].clone(),
            error: None,
        }),
        "AfterAgent" => Some(AgentEvent::Stop {
            active: v["stop_hook_active"].as_bool().unwrap_or(false),
        }),
        _ => None,
    };
    Input {
        name,
        event,
        cwd: v["cwd"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(PathBuf::from),
        tool,
        session: v["session_id"].as_str().map(str::to_string),
    }
}

/// yep's answer as Gemini CLI reads it.
pub(super) fn answer(input: &Input, a: &AgentAnswer) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    let reason = a.reason.clone().unwrap_or_default();
    let mut context = joined(&[&a.context]);
    match &input.event {
        Some(AgentEvent::PreTool { .. }) => {
            match a.verdict {
                Verdict::Block => {
                    out.insert("decision".into(), "deny".into());
                    out.insert("reason".into(), reason.into());
                }
                // Gemini CLI run with `-p` waits for ever on an `ask`; yep cannot tell it
                // from a session at a terminal, so a question is a refusal that says so.
                Verdict::Ask => {
                    out.insert("decision".into(), "deny".into());
                    out.insert("reason".into(), cannot_ask(a).into());
                }
                Verdict::Go => {}
            }
            if let Some(args) = a.args.as_ref().filter(|_| a.verdict != Verdict::Block) {
                specific.insert("tool_input".into(), args.clone());
            }
        }
        // A `deny` after a tool replaces its output: what the hooks found goes beside it.
        Some(AgentEvent::PostTool { .. }) => context = joined(&[&a.feedback, &a.context]),
        Some(AgentEvent::PromptSubmit { .. } | AgentEvent::Stop { .. })
            if a.verdict == Verdict::Block =>
        {
            out.insert("decision".into(), "deny".into());
            out.insert("reason".into(), reason.into());
        }
        _ => {}
    }
    written(input, out, specific, context, &[unavailable(a)])
}

/// Gemini CLI's settings (`hooks`).
pub(super) fn config(command: &str) -> Config {
    let mut hooks = Map::new();
    for (event, tools) in EVENTS {
        let mut group = Map::new();
        if tools {
            group.insert("matcher".into(), ".*".into());
        }
        group.insert(
            "hooks".into(),
            json!([{ "name": "yep", "type": "command", "command": command, "timeout": TIMEOUT_MS }]),
        );
        hooks.insert(event.into(), json!([group]));
    }
    let text = serde_json::to_string_pretty(&json!({ "hooks": hooks })).unwrap_or_default();
    Config {
        text: text + "\n",
        file: "`~/.gemini/settings.json` (or a project's `.gemini/settings.json`)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yep_host::runtime::HookNote;

    #[test]
    fn gemini_clis_shell_and_file_tools_are_yeps_bash_write_and_edit() {
        let input = parse(&json!({
            "session_id": "s", "cwd": "/w", "hook_event_name": "BeforeTool",
            "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf victim"},
        }));
        assert_eq!(
            input.event,
            Some(AgentEvent::PreTool {
                tool: "bash".into(),
                args: json!({"command": "rm -rf victim"}),
                id: None
            })
        );
        for (theirs, ours) in [("write_file", "write"), ("replace", "edit")] {
            let input = parse(&json!({"hook_event_name": "BeforeTool", "tool_name": theirs}));
            assert!(matches!(&input.event, Some(AgentEvent::PreTool { tool, .. }) if tool == ours));
        }
        let prompt = parse(&json!({"hook_event_name": "BeforeAgent", "prompt": "hi"}));
        assert_eq!(
            prompt.event,
            Some(AgentEvent::PromptSubmit {
                prompt: "hi".into()
            })
        );
        let stop = parse(&json!({"hook_event_name": "AfterAgent", "stop_hook_active": true}));
        assert_eq!(stop.event, Some(AgentEvent::Stop { active: true }));
        assert_eq!(
            parse(&json!({"hook_event_name": "BeforeModel"})).event,
            None
        );
    }

    #[test]
    fn a_block_a_rewrite_and_context_are_gemini_clis_answers() {
        let input = parse(&json!({
            "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
            "tool_input": {"command": "rm -rf victim"},
        }));
        let block = AgentAnswer {
            verdict: Verdict::Block,
            reason: Some("no rm -rf".into()),
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &block).stdout).unwrap();
        assert_eq!(out, json!({"decision": "deny", "reason": "no rm -rf"}));
        let rewrite = AgentAnswer {
            args: Some(json!({"command": "rm -ri victim"})),
            rewritten_by: vec!["safer".into()],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &rewrite).stdout).unwrap();
        assert_eq!(
            out["hookSpecificOutput"]["tool_input"],
            json!({"command": "rm -ri victim"})
        );
        let post = parse(&json!({
            "hook_event_name": "AfterTool", "tool_name": "write_file",
            "tool_input": {"file_path": "a.py", "content": "eval(x)"},
            "tool_response": {"llmContent": "ok"},
        }));
        let warned = AgentAnswer {
            feedback: vec![HookNote {
                extension: "sg".into(),
                text: "eval( is risky".into(),
            }],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&post, &warned).stdout).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "AfterTool",
                "additionalContext": "eval( is risky"}})
        );
    }
}
