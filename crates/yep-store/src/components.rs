//! Per-component switches: the hooks, MCP servers and commands of an installed package the
//! user turned off (`yep disable <name> --hook/--server/--command`), as plain data with pure
//! queries. They live in `settings.toml` under `[off."ext:<name>"]`, apart from the enable
//! entry, so they survive a disable, an enable and an update; [`Off::apply`] is the one place
//! that takes them out of what a session runs.

use crate::claude::ClaudePin;
use crate::manifest::{HookEvent, Manifest};
use serde::Serialize;
use std::collections::BTreeSet;

/// The kind of component a switch names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Hook,
    Server,
    Command,
}

impl Component {
    /// Its name as the flag and the settings key say it (`hook`, `server`, `command`).
    pub fn word(self) -> &'static str {
        match self {
            Component::Hook => "hook",
            Component::Server => "server",
            Component::Command => "command",
        }
    }

    /// Its key in `[off."ext:<name>"]`.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Component::Hook => "hooks",
            Component::Server => "servers",
            Component::Command => "commands",
        }
    }
}

/// What of one package is switched off. Empty for a package nothing of which is off (and
/// for a settings file written before switches existed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Off {
    /// `event` (every hook of the event) or `event:matcher` (the hooks of that matcher).
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub hooks: BTreeSet<String>,
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub servers: BTreeSet<String>,
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub commands: BTreeSet<String>,
}

/// The key of a hook of `event` with `matcher`: `event` when it matches every tool.
pub fn hook_key(event: &str, matcher: Option<&str>) -> String {
    match matcher.filter(|m| !m.is_empty() && *m != "*") {
        Some(m) => format!("{event}:{m}"),
        None => event.to_string(),
    }
}

fn yep_event(event: HookEvent) -> &'static str {
    match event {
        HookEvent::PreToolUse => "pre_tool_use",
        HookEvent::PostToolUse => "post_tool_use",
    }
}

impl Off {
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty() && self.servers.is_empty() && self.commands.is_empty()
    }

    pub(crate) fn set_mut(&mut self, kind: Component) -> &mut BTreeSet<String> {
        match kind {
            Component::Hook => &mut self.hooks,
            Component::Server => &mut self.servers,
            Component::Command => &mut self.commands,
        }
    }

    pub fn set(&self, kind: Component) -> &BTreeSet<String> {
        match kind {
            Component::Hook => &self.hooks,
            Component::Server => &self.servers,
            Component::Command => &self.commands,
        }
    }

    /// Whether a hook of `event` with `matcher` is off: its event is, or its exact key.
    pub fn hook_off(&self, event: &str, matcher: Option<&str>) -> bool {
        self.hooks.contains(event) || self.hooks.contains(&hook_key(event, matcher))
    }

    /// `manifest` (and a plugin's `pin`) without what is off: the hooks it would fire, the MCP
    /// servers it would start and the commands it would offer. A YEP package's hooks are its
    /// manifest's; a plugin's are its pin's (its manifest's two tool hooks only say what they
    /// may hold, and fire the pin's).
    pub fn apply(&self, manifest: &mut Manifest, pin: Option<&mut ClaudePin>) {
        if self.is_empty() {
            return;
        }
        let facet = &mut manifest.yolop;
        facet
            .mcp_servers
            .retain(|name, _| !self.servers.contains(name));
        facet.commands.retain(|c| !self.commands.contains(&c.name));
        match pin {
            Some(pin) => {
                pin.hooks
                    .retain(|h| !self.hook_off(&h.event, h.matcher.as_deref()));
                pin.commands.retain(|c| !self.commands.contains(&c.name));
            }
            None => facet
                .hooks
                .retain(|h| !self.hook_off(yep_event(h.event), Some(&h.tool_name_glob))),
        }
    }

    /// One line per switch, as `yep list` and a consent screen say it (`hook PreToolUse:Bash`).
    pub fn lines(&self) -> Vec<String> {
        [Component::Hook, Component::Server, Component::Command]
            .into_iter()
            .flat_map(|kind| {
                self.set(kind)
                    .iter()
                    .map(move |item| format!("{} {}", kind.word(), crate::text::escape(item)))
            })
            .collect()
    }
}

/// What a package declares, by the names a switch takes, each list sorted and without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    pub hooks: Vec<String>,
    pub servers: Vec<String>,
    pub commands: Vec<String>,
}

impl Declared {
    /// What `manifest` (and a plugin's `pin`) declares.
    pub fn of(manifest: &Manifest, pin: Option<&ClaudePin>) -> Declared {
        let mut hooks = BTreeSet::new();
        match pin {
            Some(pin) => {
                for h in &pin.hooks {
                    hooks.insert(h.event.clone());
                    hooks.insert(hook_key(&h.event, h.matcher.as_deref()));
                }
            }
            None => {
                for h in &manifest.yolop.hooks {
                    let event = yep_event(h.event);
                    hooks.insert(event.to_string());
                    hooks.insert(hook_key(event, Some(&h.tool_name_glob)));
                }
            }
        }
        Declared {
            hooks: hooks.into_iter().collect(),
            servers: manifest.yolop.mcp_servers.keys().cloned().collect(),
            commands: manifest
                .yolop
                .commands
                .iter()
                .map(|c| c.name.clone())
                .collect(),
        }
    }

    pub fn list(&self, kind: Component) -> &[String] {
        match kind {
            Component::Hook => &self.hooks,
            Component::Server => &self.servers,
            Component::Command => &self.commands,
        }
    }

    /// Whether it declares `item` of `kind`.
    pub fn has(&self, kind: Component, item: &str) -> bool {
        self.list(kind).iter().any(|d| d == item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude::hooks::CommandHook;

    fn hook(event: &str, matcher: Option<&str>) -> CommandHook {
        CommandHook {
            event: event.into(),
            matcher: matcher.map(String::from),
            command: "true".into(),
            args: Vec::new(),
            timeout_s: None,
            if_rule: None,
            is_async: false,
        }
    }

    #[test]
    fn an_event_turns_off_all_its_hooks_and_an_event_with_a_matcher_only_those() {
        let mut off = Off::default();
        off.hooks.insert("PreToolUse:Bash".into());
        assert!(off.hook_off("PreToolUse", Some("Bash")));
        assert!(!off.hook_off("PreToolUse", Some("Write")));
        assert!(!off.hook_off("PostToolUse", Some("Bash")));
        off.hooks.insert("SessionStart".into());
        assert!(off.hook_off("SessionStart", Some("startup")));
        assert!(off.hook_off("SessionStart", None));
        assert_eq!(hook_key("Stop", Some("*")), "Stop");
        assert_eq!(off.lines(), ["hook PreToolUse:Bash", "hook SessionStart"]);
        let _ = hook("PreToolUse", None);
    }
}
