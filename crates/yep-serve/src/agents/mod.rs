//! yep's hooks inside the agents people use: each agent runs `yep hook <agent>` per hook event,
//! with its hook JSON on stdin. That JSON becomes an [`AgentEvent`] (the agent's tools named as
//! yep's hooks know them), the shared host runs the chain, and its [`AgentAnswer`] becomes the
//! agent's own answer: stdout, stderr and an exit code ([`Reply`]).
//!
//! - [`claude`]: Claude Code's hooks, which Codex reads too (`$CODEX_HOME/hooks.json`);
//! - [`gemini`]: Gemini CLI's;
//! - [`command`]: the hook command itself, which `yep hook` and the `yep-hook` binary run;
//! - `wire.rs`: what every adapter reads and writes.
//!
//! Each agent's configuration ([`Agent::config`]) wires every event it has to one command.
//! When yep cannot answer, the reply blocks what can be blocked (a tool call, a prompt) and
//! says why, unless the user chose `--fail-open` ([`Agent::failed`]); never a silent allow.

pub mod claude;
pub mod command;
pub mod gemini;
mod wire;

use wire::{CLAUDE_TOOLS, yep_tool};
pub use wire::{Config, Input, Reply};

use serde_json::Value;
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
