//! Claude Code's hooks, which Codex reads too: the input's `hook_event_name`, `tool_name`,
//! `tool_input`, `tool_response`, `prompt`, `stop_hook_active` and `cwd`; the answer as JSON
//! on stdout (`hookSpecificOutput`'s `permissionDecision`, `updatedInput` and
//! `additionalContext`, `decision: "block"` with a `reason`, `systemMessage`), exit code 0.

use super::wire::{
    CLAUDE_TOOLS, Config, Input, Reply, cannot_ask, joined, unavailable, written, yep_tool,
};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use yep_host::runtime::{AgentAnswer, AgentEvent, Verdict};

/// The events yep answers, and whether each takes a tool matcher.
const EVENTS: [(&str, bool); 5] = [
    ("SessionStart", false),
    ("UserPromptSubmit", false),
    ("PreToolUse", true),
    ("PostToolUse", true),
    ("Stop", false),
];

/// How long the agent lets the command run, in seconds: the chain's hooks have their own
/// budgets (at most 30 s per extension), and several extensions may each take theirs.
const TIMEOUT_S: u64 = 120;

/// Claude Code's (or Codex's) hook input.
pub(super) fn parse(v: &Value) -> Input {
    let name = str_of(v, "hook_event_name");
    let tool = v["tool_name"].as_str().map(str::to_string);
    let yep_name = || yep_tool(&CLAUDE_TOOLS, tool.as_deref().unwrap_or_default());
    let id = || v["tool_use_id"].as_str().map(str::to_string);
    let event = match name.as_str() {
        "SessionStart" => Some(AgentEvent::SessionStart),
        "UserPromptSubmit" => Some(AgentEvent::PromptSubmit {
            prompt: str_of(v, "prompt"),
        }),
        "PreToolUse" => Some(AgentEvent::PreTool {
            tool: yep_name(),
            args: v["tool_input"].clone(),
            id: id(),
        }),
        "PostToolUse" => Some(AgentEvent::PostTool {
            tool: yep_name(),
            args: v["tool_input"].clone(),
            id: id(),
            result: v["tool_response"].clone(),
            error: None,
        }),
        "Stop" => Some(AgentEvent::Stop {
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

fn str_of(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// yep's answer as Claude Code reads it, or Codex (`codex`), which differs in three ways
/// (checked against Codex 0.169.0):
/// - it takes `updatedInput` only beside `permissionDecision: "allow"`;
/// - it ignores `ask` and runs the call, so a question is a refusal that says so;
/// - a block after a tool ran replaces the tool's output, so what the hooks found goes
///   beside the output, as context.
pub(super) fn answer(input: &Input, a: &AgentAnswer, codex: bool) -> Reply {
    let mut out = Map::new();
    let mut specific = Map::new();
    let reason = a.reason.clone().unwrap_or_default();
    match &input.event {
        Some(AgentEvent::PreTool { .. }) => {
            match a.verdict {
                Verdict::Block => {
                    specific.insert("permissionDecision".into(), "deny".into());
                    specific.insert("permissionDecisionReason".into(), reason.into());
                }
                Verdict::Ask if codex => {
                    specific.insert("permissionDecision".into(), "deny".into());
                    specific.insert("permissionDecisionReason".into(), cannot_ask(a).into());
                }
                Verdict::Ask => {
                    specific.insert("permissionDecision".into(), "ask".into());
                    specific.insert("permissionDecisionReason".into(), reason.into());
                }
                Verdict::Go => {}
            }
            if let Some(args) = a.args.as_ref().filter(|_| a.verdict != Verdict::Block) {
                specific.insert("updatedInput".into(), args.clone());
                if codex && a.verdict == Verdict::Go {
                    specific.insert("permissionDecision".into(), "allow".into());
                }
            }
        }
        Some(AgentEvent::PostTool { .. }) if codex => {}
        Some(AgentEvent::PostTool { .. }) if !a.feedback.is_empty() => {
            out.insert("decision".into(), "block".into());
            out.insert("reason".into(), joined(&[&a.feedback]).into());
        }
        Some(AgentEvent::PromptSubmit { .. } | AgentEvent::Stop { .. })
            if a.verdict == Verdict::Block =>
        {
            out.insert("decision".into(), "block".into());
            out.insert("reason".into(), reason.into());
        }
        _ => {}
    }
    let context = match codex && matches!(input.event, Some(AgentEvent::PostTool { .. })) {
        true => joined(&[&a.feedback, &a.context]),
        false => joined(&[&a.context]),
    };
    let message = a.user_message.as_deref().map(yep_host::text::escape);
    let told = [message.unwrap_or_default().into_owned(), unavailable(a)];
    written(input, out, specific, context, &told)
}

/// Claude Code's settings (`hooks`, and `statusLine` running `statusline`), or Codex's
/// `hooks.json` (the same shape, and no status line).
pub(super) fn config(command: &str, statusline: Option<&str>) -> Config {
    let codex = statusline.is_none();
    let mut hooks = Map::new();
    for (event, tools) in EVENTS {
        let mut group = Map::new();
        if tools {
            group.insert("matcher".into(), "*".into());
        }
        group.insert(
            "hooks".into(),
            json!([{ "type": "command", "command": command, "timeout": TIMEOUT_S }]),
        );
        hooks.insert(event.into(), json!([group]));
    }
    let mut settings = json!({ "hooks": hooks });
    if let Some(statusline) = statusline {
        settings["statusLine"] = json!({ "type": "command", "command": statusline });
    }
    let text = serde_json::to_string_pretty(&settings).unwrap_or_default();
    Config {
        text: text + "\n",
        file: match codex {
            true => "`$CODEX_HOME/hooks.json` (by default `~/.codex/hooks.json`)",
            false => "`~/.claude/settings.json` (or a project's `.claude/settings.json`)",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yep_host::runtime::HookNote;

    fn pre(tool: &str, input: Value) -> Input {
        parse(&json!({
            "session_id": "s", "transcript_path": "/t", "cwd": "/work/ws",
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
            "tool_use_id": "toolu_1", "permission_mode": "default",
        }))
    }

    fn note(text: &str) -> HookNote {
        HookNote {
            extension: "x".into(),
            text: text.into(),
        }
    }

    #[test]
    fn the_agents_tools_get_the_names_yeps_hooks_know() {
        let input = pre("Bash", json!({"command": "rm -rf victim"}));
        assert_eq!(input.cwd, Some(PathBuf::from("/work/ws")));
        assert_eq!(input.tool.as_deref(), Some("Bash"));
        assert_eq!(
            input.event,
            Some(AgentEvent::PreTool {
                tool: "bash".into(),
                args: json!({"command": "rm -rf victim"}),
                id: Some("toolu_1".into()),
            })
        );
        let write = pre("Write", json!({"file_path": "/w/a.py", "content": "x"}));
        assert!(matches!(write.event, Some(AgentEvent::PreTool { tool, .. }) if tool == "write"));
        let mcp = pre("mcp__yep__echo", json!({}));
        assert!(
            matches!(mcp.event, Some(AgentEvent::PreTool { tool, .. }) if tool == "mcp__yep__echo")
        );
    }

    #[test]
    fn a_block_an_ask_and_a_rewrite_are_claude_codes_permission_decisions() {
        let input = pre("Bash", json!({"command": "rm -rf victim"}));
        let block = AgentAnswer {
            verdict: Verdict::Block,
            by: Some("guard".into()),
            reason: Some("no rm -rf".into()),
            ..AgentAnswer::default()
        };
        let reply = answer(&input, &block, false);
        assert_eq!(reply.code, 0);
        let out: Value = serde_json::from_str(&reply.stdout).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "no rm -rf"}})
        );
        let ask = AgentAnswer {
            verdict: Verdict::Ask,
            reason: Some("sure?".into()),
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &ask, false).stdout).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
        let rewrite = AgentAnswer {
            args: Some(json!({"command": "rm -ri victim"})),
            rewritten_by: vec!["safer".into()],
            context: vec![note("rewrote rm -rf")],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &rewrite, false).stdout).unwrap();
        assert_eq!(
            out["hookSpecificOutput"]["updatedInput"],
            json!({"command": "rm -ri victim"})
        );
        assert_eq!(
            out["hookSpecificOutput"]["additionalContext"],
            "rewrote rm -rf"
        );
        // Nothing to say: nothing on stdout, and the call goes on as Claude Code decides.
        assert_eq!(
            answer(&input, &AgentAnswer::default(), false),
            Reply::default()
        );
    }

    #[test]
    fn post_tool_feedback_prompt_text_and_a_stop_reach_the_model() {
        let post = parse(&json!({
            "hook_event_name": "PostToolUse", "tool_name": "Write",
            "tool_input": {"file_path": "/w/a.py", "content": "eval(x)"},
            "tool_response": {"filePath": "/w/a.py", "success": true},
        }));
        assert_eq!(
            post.event,
            Some(AgentEvent::PostTool {
                tool: "write".into(),
                args: json!({"file_path": "/w/a.py", "content": "eval(x)"}),
                id: None,
                result: json!({"filePath": "/w/a.py", "success": true}),
                error: None,
            })
        );
        let warned = AgentAnswer {
            feedback: vec![note("eval( is a security risk")],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&post, &warned, false).stdout).unwrap();
        assert_eq!(
            out,
            json!({"decision": "block", "reason": "eval( is a security risk"})
        );
        let start = parse(&json!({"hook_event_name": "SessionStart", "source": "startup"}));
        let text = AgentAnswer {
            context: vec![note("<capability id=\"ext:a\">\nbe brief\n</capability>")],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&start, &text, false).stdout).unwrap();
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
        assert!(
            out["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap()
                .contains("be brief")
        );
        let stop = parse(&json!({"hook_event_name": "Stop", "stop_hook_active": true}));
        assert_eq!(stop.event, Some(AgentEvent::Stop { active: true }));
        let go_on = AgentAnswer {
            verdict: Verdict::Block,
            reason: Some("run the tests first".into()),
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&stop, &go_on, false).stdout).unwrap();
        assert_eq!(
            out,
            json!({"decision": "block", "reason": "run the tests first"})
        );
        // An event yep has nothing to say to.
        let other = parse(&json!({"hook_event_name": "Notification", "message": "hi"}));
        assert_eq!(other.event, None);
        assert_eq!(answer(&other, &text, false), Reply::default());
    }

    #[test]
    fn codex_gets_a_rewrite_with_allow_a_question_as_a_refusal_and_feedback_as_context() {
        let input = pre("Bash", json!({"command": "rm -rf victim"}));
        let rewrite = AgentAnswer {
            args: Some(json!({"command": "rm -ri victim"})),
            rewritten_by: vec!["safer".into()],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &rewrite, true).stdout).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(
            out["hookSpecificOutput"]["updatedInput"],
            json!({"command": "rm -ri victim"})
        );
        let ask = AgentAnswer {
            verdict: Verdict::Ask,
            by: Some("careful".into()),
            reason: Some("sure?".into()),
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&input, &ask, true).stdout).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
        let why = out["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap();
        assert!(why.contains("careful") && why.contains("sure?"), "{why}");
        let post = parse(&json!({
            "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "ls"}, "tool_response": "a\nb\n",
        }));
        let warned = AgentAnswer {
            feedback: vec![note("careful with that")],
            ..AgentAnswer::default()
        };
        let out: Value = serde_json::from_str(&answer(&post, &warned, true).stdout).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                "additionalContext": "careful with that"}})
        );
    }

    #[test]
    fn the_configuration_wires_every_event_to_the_one_command() {
        let config = config("/usr/bin/yep hook claude", Some("/usr/bin/yep statusline"));
        let v: Value = serde_json::from_str(&config.text).unwrap();
        for (event, tools) in EVENTS {
            let group = &v["hooks"][event][0];
            assert_eq!(group["hooks"][0]["command"], "/usr/bin/yep hook claude");
            assert_eq!(group["hooks"][0]["type"], "command");
            assert_eq!(group.get("matcher").is_some(), tools, "{event}");
        }
        assert_eq!(v["statusLine"]["command"], "/usr/bin/yep statusline");
    }
}
