//! yep's hooks inside the agents people use: each agent runs `yep hook <agent>` per hook event,
//! with its hook JSON on stdin. That JSON becomes an [`AgentEvent`] (the agent's tools named as
//! yep's hooks know them), the shared host runs the chain, and its [`AgentAnswer`] becomes the
//! agent's own answer: stdout, stderr and an exit code ([`Reply`]).
//!
//! - [`claude`]: Claude Code's hooks, which Codex reads too (`$CODEX_HOME/hooks.json`);
//! - [`gemini`]: Gemini CLI's;
//! - [`command`]: the hook command itself, which `yep hook` and the `yep-hook` binary run.
//!
//! Each agent's configuration ([`Agent::config`]) wires every event it has to one command.
//! When yep cannot answer, the reply blocks what can be blocked (a tool call, a prompt) and
//! says why, unless the user chose `--fail-open` ([`Agent::failed`]); never a silent allow.

pub mod claude;
pub mod command;
pub mod gemini;

use serde_json::Value;
use std::path::PathBuf;
use yep_host::runtime::{AgentAnswer, AgentEvent};

/// The longest hook input read from the agent: a Write of a large file is in it.
pub const MAX_INPUT: usize = 32 * 1024 * 1024;

/// An agent that runs yep's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`settings.json`'s `hooks`).
    Claude,
    /// Codex (`$CODEX_HOME/hooks.json`, in Claude Code's format).
    Codex,
    /// Gemini CLI (`settings.json`'s `hooks`).
    Gemini,
}

impl Agent {
    /// Every agent, in the order `yep hooks config` lists them.
    pub const ALL: [Agent; 3] = [Agent::Claude, Agent::Codex, Agent::Gemini];

    /// Its name on yep's command line.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The agent named `name` on the command line.
    pub fn named(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// yep's name for this agent's tool `name` (Claude Code's `Bash` and Gemini CLI's
    /// `run_shell_command` are `bash`): what zot's guard and YEP hook subscriptions see.
    pub fn tool(self, name: &str) -> String {
        match self {
            Agent::Claude | Agent::Codex => yep_tool(&CLAUDE_TOOLS, name),
            Agent::Gemini => yep_tool(&gemini::TOOLS, name),
        }
    }

    /// Whether `name` is one of this agent's own tools, by its name or by yep's for it
    /// (`Write` or `write`).
    pub fn owns(self, name: &str) -> bool {
        let table: &[(&str, &str)] = match self {
            Agent::Claude | Agent::Codex => &CLAUDE_TOOLS,
            Agent::Gemini => &gemini::TOOLS,
        };
        table
            .iter()
            .any(|(theirs, ours)| *theirs == name || *ours == name)
    }

    /// Read the agent's hook input.
    pub fn parse(self, input: &[u8]) -> Result<Input, String> {
        let value: Value = serde_json::from_slice(input)
            .map_err(|e| format!("the hook input is not JSON: {e}"))?;
        if !value.is_object() {
            return Err("the hook input is not a JSON object".into());
        }
        Ok(match self {
            Agent::Claude | Agent::Codex => claude::parse(&value),
            Agent::Gemini => gemini::parse(&value),
        })
    }

    /// yep's answer, as the agent reads it.
    pub fn answer(self, input: &Input, answer: &AgentAnswer) -> Reply {
        match self {
            Agent::Claude => claude::answer(input, answer, false),
            Agent::Codex => claude::answer(input, answer, true),
            Agent::Gemini => gemini::answer(input, answer),
        }
    }

    /// The reply when yep could not answer (`why`): what can be blocked is blocked, and said
    /// why, unless `fail_open`; the rest goes on with a warning. `input` is `None` when it
    /// could not be read.
    pub fn failed(self, input: Option<&Input>, why: &str, fail_open: bool) -> Reply {
        let blocks = input.is_some_and(|i| {
            matches!(
                i.event,
                Some(AgentEvent::PreTool { .. } | AgentEvent::PromptSubmit { .. })
            )
        }) || input.is_none();
        let why = yep_host::text::escape(why);
        if blocks && !fail_open {
            let reason = format!(
                "yep could not run its hooks, so this is blocked: {why} (`yep hook {} --fail-open` lets it go on when yep cannot answer)",
                self.name()
            );
            // Unread input: exit code 2 with the reason on stderr blocks whatever can be.
            let Some(input) = input else {
                return Reply {
                    stdout: String::new(),
                    stderr: format!("{reason}\n"),
                    code: 2,
                };
            };
            let refusal = AgentAnswer {
                verdict: yep_host::runtime::Verdict::Block,
                by: Some("yep".into()),
                reason: Some(reason),
                ..AgentAnswer::default()
            };
            return self.answer(input, &refusal);
        }
        Reply {
            stdout: String::new(),
            stderr: format!("yep could not run its hooks, so this goes on without them: {why}\n"),
            code: 1,
        }
    }

    /// The hook configuration this agent reads, wiring each of its events to
    /// `<hook> <agent>`, with `--fail-open` when asked. `hook` is the command line of the hook
    /// command for this home (`yep-hook --home H`, or `yep --home H hook`) and `yep` that of
    /// yep, in shell words. Claude Code's has its `statusLine` too.
    pub fn config(self, hook: &str, yep: &str, fail_open: bool) -> Config {
        let open = if fail_open { " --fail-open" } else { "" };
        let command = format!("{hook} {}{open}", self.name());
        match self {
            Agent::Claude => claude::config(&command, Some(&format!("{yep} statusline"))),
            Agent::Codex => claude::config(&command, None),
            Agent::Gemini => gemini::config(&command),
        }
    }
}

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
const CLAUDE_TOOLS: [(&str, &str); 11] = [
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
fn yep_tool(table: &[(&str, &str)], name: &str) -> String {
    table
        .iter()
        .find(|(theirs, _)| *theirs == name)
        .map_or(name, |(_, ours)| ours)
        .to_string()
}

/// The texts of each of `lists` of notes, in order, one paragraph each.
fn joined(lists: &[&[yep_host::runtime::HookNote]]) -> String {
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
fn written(
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
fn cannot_ask(answer: &AgentAnswer) -> String {
    format!(
        "refused: extension `{}` wants the user's approval first ({}), and this agent takes no question from a hook",
        answer.by.as_deref().unwrap_or("?"),
        answer.reason.as_deref().unwrap_or_default()
    )
}

/// What the user is told of hooks that could not run, escaped; empty when all ran.
fn unavailable(answer: &AgentAnswer) -> String {
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
