//! What every agent's adapter reads and writes: the input read, the reply written, the
//! configuration printed, the tool-name tables and the answer's common parts.

use serde_json::Value;
use std::path::PathBuf;
use yep_host::runtime::{AgentAnswer, AgentEvent};

/// An agent's hook input, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// The event as the agent names it (`PreToolUse`, `BeforeTool`).
    pub name: String,
    /// What it is in yep's terms; `None` for an event yep has nothing to say to.
    pub event: Option<AgentEvent>,
    /// The agent's working directory, when it says.
    pub cwd: Option<PathBuf>,
    /// The tool as the agent names it.
    pub tool: Option<String>,
    /// The agent's session, as its hooks know it (`session_id`).
    pub session: Option<String>,
}

/// What the hook command writes and how it exits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

/// An agent's hook configuration: the text to put where it reads it, and where that is.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Exactly what the agent reads (JSON).
    pub text: String,
    /// Where it goes, for the hint.
    pub file: &'static str,
}

/// The tool names of Claude Code (which Codex's hooks use too) and yep's for the same tool:
/// what zot's guard and a YEP hook subscription see. A tool not listed keeps its name.
pub(super) const CLAUDE_TOOLS: [(&str, &str); 11] = [
    ("Bash", "bash"),
    ("Write", "write"),
    ("Edit", "edit"),
    ("MultiEdit", "multiedit"),
    ("Read", "read"),
    ("Glob", "glob"),
    ("Grep", "grep"),
    ("WebFetch", "webfetch"),
    ("WebSearch", "websearch"),
    ("NotebookEdit", "notebook_edit"),
    ("TodoWrite", "todo_write"),
];

/// yep's name for the agent's tool `name`, by a table of (agent's, yep's).
pub(super) fn yep_tool(table: &[(&str, &str)], name: &str) -> String {
    table
        .iter()
        .find(|(theirs, _)| *theirs == name)
        .map_or(name, |(_, ours)| ours)
        .to_string()
}

/// The texts of each of `lists` of notes, in order, one paragraph each.
pub(super) fn joined(lists: &[&[yep_host::runtime::HookNote]]) -> String {
    lists
        .iter()
        .flat_map(|notes| notes.iter())
        .map(|n| n.text.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The answer JSON an adapter built, written: `context` for the model and the
/// `hookSpecificOutput` (named for the input's event) in it, what the user is `told` as its
/// `systemMessage`; nothing at all when there is nothing to say.
pub(super) fn written(
    input: &Input,
    mut out: serde_json::Map<String, Value>,
    mut specific: serde_json::Map<String, Value>,
    context: String,
    told: &[String],
) -> Reply {
    if !context.is_empty() && input.event.is_some() {
        specific.insert("additionalContext".into(), context.into());
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), input.name.clone().into());
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    let told: Vec<&str> = told
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if !told.is_empty() {
        out.insert("systemMessage".into(), told.join("\n").into());
    }
    Reply {
        stdout: match out.is_empty() {
            true => String::new(),
            false => format!("{}\n", Value::Object(out)),
        },
        stderr: String::new(),
        code: 0,
    }
}

/// The refusal that stands for a hook's question where the agent cannot ask its user.
pub(super) fn cannot_ask(answer: &AgentAnswer) -> String {
    format!(
        "refused: extension `{}` wants the user's approval first ({}), and this agent takes no question from a hook",
        answer.by.as_deref().unwrap_or("?"),
        answer.reason.as_deref().unwrap_or_default()
    )
}

/// What the user is told of hooks that could not run, escaped; empty when all ran.
pub(super) fn unavailable(answer: &AgentAnswer) -> String {
    answer
        .unavailable
        .iter()
        .map(|u| {
            format!(
                "yep: a hook of `{}` could not run, so it had no say: {}",
                yep_host::text::escape(&u.extension),
                yep_host::text::escape(&u.error)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
