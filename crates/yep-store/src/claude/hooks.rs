//! Claude Code hooks (`hooks/hooks.json`, or a manifest's inline `hooks`): the command hooks
//! yep can run, each with its event, matcher, command, timeout and `if` rule, and a note for
//! every handler it cannot.

use super::rules::PermissionRule;
use crate::text::escape;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest a matcher may be, and what its regex may compile to.
const MAX_MATCHER_LEN: usize = 1024;
const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// The most hooks one plugin may declare; the rest are left out with a note.
pub const MAX_PLUGIN_HOOKS: usize = 64;

/// The events yep fires hooks on (docs/plugins.md has where each lands); a hook on any other
/// (`PermissionRequest`, `PostToolUseFailure`, …) is left out with a note.
pub const RUN_EVENTS: [&str; 9] = [
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SessionStart",
    "SessionEnd",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "Notification",
];

/// Claude Code's default per-hook timeout, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// The longest yep lets a hook outside a tool call (SessionStart, Stop, …) run, in seconds,
/// whatever it asks: the consent screen shows the clamp, so the runtime must keep to it. A
/// tool hook's bound is [`crate::manifest::MAX_HOOK_TIMEOUT_MS`].
pub const MAX_LIFECYCLE_TIMEOUT_S: u64 = 60;

/// One command hook as the lock pins it. A plugin's hooks keep their file order within an
/// event (the order Claude Code merges their answers in); events are in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandHook {
    /// Claude's event name (`PreToolUse`, `SessionStart`, …).
    pub event: String,
    /// As written; absent, empty or `*` matches everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The shell command line (or, with `args`, the program).
    pub command: String,
    /// Exec form: arguments given without a shell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// In seconds, as written (Claude's default, 60 s, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// One permission rule (`Bash(git commit:*)`) the tool call must match too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_rule: Option<String>,
    /// Claude's `async`: it runs in the background and never holds the call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_async: bool,
}

impl CommandHook {
    /// The timeout Claude Code gives it, in seconds.
    pub fn timeout(&self) -> u64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    /// Whether it runs inside a tool call (PreToolUse, PostToolUse), so holds the call.
    pub fn on_tool_call(&self) -> bool {
        matches!(self.event.as_str(), "PreToolUse" | "PostToolUse")
    }

    /// The timeout yep gives it, in seconds: its own, clamped to 30 s for a tool hook and to
    /// [`MAX_LIFECYCLE_TIMEOUT_S`] for any other.
    pub fn effective_timeout(&self) -> u64 {
        let max = if self.on_tool_call() {
            crate::manifest::MAX_HOOK_TIMEOUT_MS / 1000
        } else {
            MAX_LIFECYCLE_TIMEOUT_S
        };
        self.timeout().min(max)
    }

    /// Whether it fires for a call of `tool` (its Bash `command`, for the Bash tool), by
    /// Claude Code's rules: the matcher must match the tool's name; an `if` rule must name the
    /// tool, and for Bash take the command or any simple command in it (a compound line,
    /// [`PermissionRule::takes_any_part`]). A rule on another tool's argument (`Edit(*.ts)`)
    /// is not judged here and lets the hook run, as Claude Code's filter fails open. A hook
    /// with an `if` never fires outside a tool call.
    pub fn fires_for(&self, tool: &str, command: Option<&str>) -> bool {
        if !self.compiled_matcher().is_ok_and(|m| m.matches(tool)) {
            return false;
        }
        let Some(rule) = &self.if_rule else {
            return true;
        };
        if !self.on_tool_call() {
            return false;
        }
        let Some(rule) = PermissionRule::parse(rule) else {
            return true;
        };
        if !rule.names_tool(tool) {
            return false;
        }
        match (tool, command) {
            ("Bash", Some(command)) => rule.takes_any_part(command),
            _ => true,
        }
    }

    /// Its matcher, compiled.
    pub fn compiled_matcher(&self) -> Result<Matcher, MatcherError> {
        Matcher::parse(self.matcher.as_deref().unwrap_or(""))
    }
}

/// Why a matcher cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    #[error("matcher is over {MAX_MATCHER_LEN} characters")]
    TooLong,
    #[error("matcher is not a regular expression yep can compile: {0}")]
    Regex(#[from] regex::Error),
}

/// A hook matcher, read by Claude Code's rule: `*` or empty matches everything; only letters,
/// digits, `_`, `-`, spaces, `,` and `|` is an exact name or a `|`/`,` list of them; anything
/// else is an unanchored regular expression (`Edit.*` also matches `NotebookEdit`).
#[derive(Debug, Clone)]
pub enum Matcher {
    All,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    pub fn parse(matcher: &str) -> Result<Matcher, MatcherError> {
        if matcher.len() > MAX_MATCHER_LEN {
            return Err(MatcherError::TooLong);
        }
        let trimmed = matcher.trim();
        if trimmed.is_empty() || trimmed == "*" {
            return Ok(Matcher::All);
        }
        let plain = matcher
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | ',' | '|'));
        if plain {
            let names = matcher
                .split(['|', ','])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            return Ok(Matcher::Names(names));
        }
        let regex = regex::RegexBuilder::new(matcher)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()?;
        Ok(Matcher::Regex(regex))
    }

    /// Whether it matches `name` (a tool name, or a SessionStart source).
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|n| n == name),
            Matcher::Regex(regex) => regex.is_match(name),
        }
    }
}

/// The hooks read from one hooks object, and notes for every handler left out.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub hooks: Vec<CommandHook>,
    pub notes: Vec<String>,
}

/// Read a hooks object: `{"hooks": {Event: [{matcher, hooks: [handler…]}]}}` as hooks.json
/// writes it, or the `{Event: […]}` map inside it (a manifest's inline `hooks`). Nothing is
/// refused: what yep cannot run is a note, so the user sees it.
pub(crate) fn read(value: &Value, from: &str, out: &mut Read) {
    let events = match value.get("hooks") {
        Some(inner @ Value::Object(_)) => inner,
        _ => value,
    };
    let Some(events) = events.as_object() else {
        out.notes
            .push(format!("{from}: hooks is not an object; left out"));
        return;
    };
    for (event, groups) in events {
        if event == "description" {
            continue;
        }
        let Some(groups) = groups.as_array() else {
            out.notes.push(format!(
                "{from}: {} is not a list of matcher groups; left out",
                escape(event)
            ));
            continue;
        };
        for group in groups {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_string);
            let on = match &matcher {
                Some(m) if !m.is_empty() && m != "*" => format!(" on {}", escape(m)),
                _ => String::new(),
            };
            if let Some(m) = &matcher
                && let Err(e) = Matcher::parse(m)
            {
                out.notes.push(format!(
                    "{} hooks{on} left out: {}",
                    escape(event),
                    escape(&e.to_string())
                ));
                continue;
            }
            let handlers = group.get("hooks").and_then(Value::as_array);
            for handler in handlers.into_iter().flatten() {
                handle(event, &matcher, &on, handler, out);
            }
        }
    }
}

fn handle(event: &str, matcher: &Option<String>, on: &str, handler: &Value, out: &mut Read) {
    let mut event_on = format!("{}{on}", escape(event));
    if let Some(rule) = handler.get("if").and_then(Value::as_str) {
        event_on.push_str(&format!(" if {}", escape(rule)));
    }
    if !RUN_EVENTS.contains(&event) {
        out.notes.push(format!(
            "{event_on}: a hook left out (yep does not fire {} hooks)",
            escape(event)
        ));
        return;
    }
    let kind = handler.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "command" {
        out.notes.push(format!(
            "{event_on}: a `{}` hook left out (yep runs only command hooks)",
            escape(kind)
        ));
        return;
    }
    if handler.get("asyncRewake").and_then(Value::as_bool) == Some(true) {
        out.notes.push(format!(
            "{event_on}: a hook left out (asyncRewake: yep cannot wake the model later)"
        ));
        return;
    }
    let Some(command) = handler
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
    else {
        out.notes
            .push(format!("{event_on}: a hook with no command left out"));
        return;
    };
    let if_rule = handler
        .get("if")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(rule) = &if_rule
        && PermissionRule::parse(rule).is_none()
    {
        out.notes.push(format!(
            "{event_on}: a hook left out (its `if` \"{}\" is not a permission rule)",
            escape(rule)
        ));
        return;
    }
    if out.hooks.len() >= MAX_PLUGIN_HOOKS {
        out.notes.push(format!(
            "{event_on}: a hook left out (over {MAX_PLUGIN_HOOKS} hooks in one plugin)"
        ));
        return;
    }
    let args = handler
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    // Claude's timeout is in seconds, a number; a fraction rounds up, nonsense is the default.
    let timeout_s = handler
        .get("timeout")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| t.ceil().min(86_400.0) as u64);
    out.hooks.push(CommandHook {
        event: event.to_string(),
        matcher: matcher.clone(),
        command: command.to_string(),
        args,
        timeout_s,
        if_rule,
        is_async: handler.get("async").and_then(Value::as_bool) == Some(true),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_are_names_or_regexes_and_star_or_empty_match_every_tool() {
        for all in ["", "*", "  "] {
            let m = Matcher::parse(all).unwrap();
            assert!(matches!(m, Matcher::All), "{all:?}");
            assert!(m.matches("Bash") && m.matches("mcp__x__y"));
        }
        let list = Matcher::parse("Edit|Write|MultiEdit|NotebookEdit").unwrap();
        assert!(matches!(list, Matcher::Names(_)));
        assert!(list.matches("Write") && list.matches("NotebookEdit"));
        assert!(!list.matches("Bash") && !list.matches("Edi"));
        let commas = Matcher::parse("Read, Grep").unwrap();
        assert!(commas.matches("Grep") && !commas.matches("Read, Grep"));
        // An exact name is exact: `mcp__memory` names no tool of that server.
        let exact = Matcher::parse("mcp__memory").unwrap();
        assert!(!exact.matches("mcp__memory__create"));
        // Anything else is an unanchored regex.
        let regex = Matcher::parse("Edit.*").unwrap();
        assert!(matches!(regex, Matcher::Regex(_)));
        assert!(regex.matches("Edit") && regex.matches("NotebookEdit"));
        assert!(!regex.matches("Write"));
        let anchored = Matcher::parse("^mcp__memory__.*$").unwrap();
        assert!(anchored.matches("mcp__memory__create") && !anchored.matches("x_mcp__memory"));
        assert!(matches!(
            Matcher::parse("(unclosed"),
            Err(MatcherError::Regex(_))
        ));
        assert!(matches!(
            Matcher::parse(&"a".repeat(2000)),
            Err(MatcherError::TooLong)
        ));
        // A regex whose compiled form is over the size limit is refused, not built.
        assert!(Matcher::parse(".{1000}{1000}").is_err());
    }

    #[test]
    fn a_hook_fires_when_its_matcher_and_its_if_rule_both_match() {
        let hook = |event: &str, matcher: Option<&str>, if_rule: Option<&str>| CommandHook {
            event: event.into(),
            matcher: matcher.map(str::to_string),
            command: "h".into(),
            args: Vec::new(),
            timeout_s: None,
            if_rule: if_rule.map(str::to_string),
            is_async: false,
        };
        let commit = hook("PostToolUse", Some("Bash"), Some("Bash(git commit:*)"));
        assert!(commit.fires_for("Bash", Some("git commit -m x")));
        assert!(!commit.fires_for("Bash", Some("git push")));
        assert!(!commit.fires_for("Write", None));
        let edits = hook("PreToolUse", Some("Edit|Write"), Some("Edit(*.ts)"));
        assert!(
            edits.fires_for("Edit", None),
            "a path rule is not judged here"
        );
        assert!(
            !edits.fires_for("Write", None),
            "the rule names another tool"
        );
        assert!(hook("PreToolUse", None, None).fires_for("Anything", None));
        assert!(!hook("SessionStart", None, Some("Bash")).fires_for("startup", None));
    }

    #[test]
    fn hooks_json_is_read_with_its_events_matchers_and_left_out_handlers() {
        let json = serde_json::json!({
            "description": "d",
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "check.sh", "timeout": 5, "if": "Bash(git push:*)"},
                    {"type": "prompt", "prompt": "x"}
                ]}],
                "Stop": [{"hooks": [{"type": "command", "command": "s", "asyncRewake": true}]}],
                "PostToolUse": [{"matcher": "(bad", "hooks": [{"type": "command", "command": "x"}]}],
                "SessionStart": [{"hooks": [{"type": "command", "command": "start", "async": true, "timeout": 1.5}]}],
                "PermissionRequest": [{"hooks": [{"type": "command", "command": "approve-all"}]}]
            }
        });
        let mut read = Read::default();
        super::read(&json, "hooks/hooks.json", &mut read);
        assert_eq!(read.hooks.len(), 2, "{:?}", read.hooks);
        let pre = read.hooks.iter().find(|h| h.event == "PreToolUse").unwrap();
        assert_eq!(pre.matcher.as_deref(), Some("Bash"));
        assert_eq!(
            (pre.timeout_s, pre.if_rule.as_deref()),
            (Some(5), Some("Bash(git push:*)"))
        );
        let start = read
            .hooks
            .iter()
            .find(|h| h.event == "SessionStart")
            .unwrap();
        assert!(start.is_async);
        assert_eq!(start.timeout(), 2);
        let notes = read.notes.join("\n");
        assert!(notes.contains("a `prompt` hook left out"), "{notes}");
        assert!(
            notes.contains("Stop: a hook left out (asyncRewake"),
            "{notes}"
        );
        assert!(
            notes.contains("PostToolUse hooks on (bad left out"),
            "{notes}"
        );
        assert!(
            notes.contains(
                "PermissionRequest: a hook left out (yep does not fire PermissionRequest hooks)"
            ),
            "{notes}"
        );
    }
}
