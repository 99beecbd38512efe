//! `yep list`: each installed extension with its state, what it contributes, its grants and
//! which of its config fields are set.

use crate::components::Off;
use crate::package::command_resolves;
use crate::summary::config_fields;
use crate::{Home, StoreError, config, settings, state};
use serde::Serialize;

/// One row of `yep list`.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub source: String,
    pub enabled: bool,
    pub content_hash: String,
    /// The package changed on disk since it was approved.
    pub drifted: bool,
    /// How it changed, and what to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    pub server_command: Option<String>,
    pub server_resolves: bool,
    pub tools: Vec<String>,
    pub contributes: Vec<String>,
    /// The LSP servers a Claude Code plugin declares, recorded and not run (yep has no LSP
    /// client).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lsp_servers: Vec<String>,
    /// The marketplace it was installed through, and its entry there (`entry@marketplace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<String>,
    /// What its approval grants beyond the sandbox's default profile (`workspace write`,
    /// `net port 8080`); empty for none.
    pub sandbox: Vec<String>,
    /// It runs something, contained: a server, hooks, MCP servers or a command's inline
    /// shell lines (what the sandbox line is about).
    pub runs: bool,
    pub config: Vec<ConfigStatus>,
    /// What of it the user switched off (`yep disable <name> --hook/--server/--command`).
    #[serde(skip_serializing_if = "Off::is_empty")]
    pub off: Off,
    /// Its MCP servers that run as one process with other extensions' identical ones, each
    /// as `<ext>__<server>` with the others it shares with (filled by the caller, which runs
    /// the host's rule).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<Vec<String>>,
    /// Trace events the last session dropped (trace extensions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_dropped: Option<u64>,
    /// Its server: `configured` (not running), `started`, `idle` (stopped for want of use; it
    /// starts again on next use) or `failed` (see [`state::run_state`]).
    pub state: &'static str,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A config field's state: set or not, never its value.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStatus {
    pub name: String,
    pub secret: bool,
    pub required: bool,
    pub set: bool,
}

impl Home {
    /// Everything installed, for `yep list`.
    pub fn list(&self) -> Result<Vec<Listed>, StoreError> {
        let _lock = self.read_lock()?;
        let lock = self.lockfile()?;
        let enabled = settings::enabled(&self.settings_path())?;
        let offs = |name: &str| settings::off(&self.settings_path(), name).unwrap_or_default();
        Ok(lock
            .extensions
            .iter()
            .map(|entry| {
                let dir = self.package_dir(&entry.name);
                let (run, failure) = state::run_state(self, &entry.name);
                let mut row = Listed {
                    name: entry.name.clone(),
                    version: entry.version.clone(),
                    description: String::new(),
                    source: entry.source.to_string(),
                    enabled: enabled.contains(&entry.name),
                    content_hash: entry.content_hash.clone(),
                    drifted: false,
                    drift: None,
                    server_command: None,
                    server_resolves: false,
                    tools: Vec::new(),
                    contributes: Vec::new(),
                    lsp_servers: entry
                        .claude
                        .as_ref()
                        .map(|pin| pin.lsp_servers.clone())
                        .unwrap_or_default(),
                    marketplace: entry
                        .claude
                        .as_ref()
                        .and_then(|pin| pin.marketplace.as_ref())
                        .map(|m| format!("{}@{}", m.entry, m.name)),
                    sandbox: Vec::new(),
                    runs: false,
                    config: Vec::new(),
                    off: offs(&entry.name),
                    shared: Vec::new(),
                    trace_dropped: state::trace_dropped(self, &entry.name),
                    state: run,
                    failure,
                    error: None,
                };
                match self.package_manifest(entry) {
                    Ok(m) => {
                        row.description = m.description.clone();
                        row.server_command = m
                            .yolop
                            .capability_server
                            .as_ref()
                            .map(|s| s.command.clone());
                        row.server_resolves = row
                            .server_command
                            .as_deref()
                            .is_some_and(|c| command_resolves(c, &dir));
                        row.tools = m.yolop.tools.iter().map(|t| t.name.clone()).collect();
                        // A plugin's hooks as its consent screen counts them (each command
                        // of each matcher), not its events.
                        row.contributes =
                            crate::package::contributions_of(&m, entry.claude.as_ref());
                        row.runs = m.yolop.capability_server.is_some()
                            || !m.yolop.hooks.is_empty()
                            || !m.yolop.mcp_servers.is_empty()
                            || entry.claude.as_ref().is_some_and(|pin| {
                                !pin.hooks.is_empty()
                                    || pin.commands.iter().any(|c| !c.inline.is_empty())
                            });
                        match row.lsp_servers.len() {
                            0 => {}
                            1 => row.contributes.push("1 LSP server (not run)".into()),
                            n => row.contributes.push(format!("{n} LSP servers (not run)")),
                        }
                        // The approved grants and the user's: what a session runs it with.
                        let own = entry
                            .approved()
                            .map_or_else(|| m.sandbox.clone(), |a| a.sandbox);
                        row.sandbox =
                            crate::approval::effective_grants(&lock, &entry.name, None, &own)
                                .lines();
                        row.drift = self.drift_of(entry);
                        row.drifted = row.drift.is_some();
                        let set_secrets = config::secrets(self, &entry.name).unwrap_or_default();
                        let plain = settings::config(&self.settings_path(), &entry.name)
                            .unwrap_or_default();
                        row.config = config_fields(&m)
                            .into_iter()
                            .map(|f| {
                                let set = match f.secret {
                                    true => set_secrets.contains_key(&f.name),
                                    false => plain.get(&f.name).is_some_and(|v| !v.is_null()),
                                };
                                ConfigStatus {
                                    set,
                                    name: f.name,
                                    secret: f.secret,
                                    required: f.required,
                                }
                            })
                            .collect();
                    }
                    Err(e) => row.error = Some(e.to_string()),
                }
                row
            })
            .collect())
    }

    /// An installed package whose files no longer match what was approved: why, and what
    /// to run.
    pub fn drift(&self, name: &str) -> Result<Option<String>, StoreError> {
        let lock = self.lockfile()?;
        let entry = lock.get(name).ok_or_else(|| self.not_installed(name))?;
        Ok(self.drift_of(entry))
    }
}
