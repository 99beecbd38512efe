//! [`ExtensionHost`]'s public operations: starting a session, its snapshot and health, calling
//! tools and commands, and the changes it asks its registry task for.

use super::load::Core;
use super::registry::{Command, Registry};
use super::setup::{setup, setup_asking};
use super::table::{Loaded, Serves, Table, find};
use super::{
    HostError, HostOptions, McpState, Session, StatusEntry, events::HostEvents, idle, mcp,
};
use crate::capability::{CommandResult, ConfigOutcome, Offer, ToolCall, ToolResult, UpdateSink};
use crate::health::{HealthEvent, HealthStream};
use crate::store::Home;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// A slash command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandInfo {
    /// `<ext>:<name>`; a trusted workspace's own command by its name alone (`hello`, as
    /// Claude Code names it), which `project:hello` also runs.
    pub name: String,
    pub description: String,
    /// What its argument text is (a Claude Code command's `argument-hint`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
}

/// Dropped with the last handle of a host.
struct LastHandle(watch::Receiver<Arc<Table>>);

/// A handle to the host that does not keep it alive: what a server's own tool calls (zot's
/// `call_tool`) run through, held by the host's events.
pub struct WeakHost {
    pub(super) core: std::sync::Weak<Core>,
    table: watch::Receiver<Arc<Table>>,
    commands: mpsc::WeakUnboundedSender<Command>,
    last: std::sync::Weak<LastHandle>,
}

impl WeakHost {
    /// Ask the registry for a new table, if the host is still there.
    pub(crate) fn rebuild(&self) {
        if let Some(commands) = self.commands.upgrade() {
            let _ = commands.send(Command::Rebuild);
        }
    }

    /// The host, while any handle to it is held.
    pub fn upgrade(&self) -> Option<ExtensionHost> {
        Some(ExtensionHost {
            core: self.core.upgrade()?,
            table: self.table.clone(),
            commands: self.commands.upgrade()?,
            _last: self.last.upgrade()?,
        })
    }
}

impl Drop for LastHandle {
    fn drop(&mut self) {
        // Forwarder tasks hold their extension; without this a dropped host would leave them
        // (and their servers) running.
        for l in self.0.borrow().loaded() {
            l.stop_forwarding();
        }
    }
}

/// The extension host for one session. A cheap handle: clones share one host (its table,
/// servers and registry task), so hand one to each task that needs it. The host goes when
/// the last handle is dropped; [`ExtensionHost::shutdown`] stops it for every handle.
#[derive(Clone)]
pub struct ExtensionHost {
    pub(super) core: Arc<Core>,
    pub(super) table: watch::Receiver<Arc<Table>>,
    commands: mpsc::UnboundedSender<Command>,
    _last: Arc<LastHandle>,
}

impl ExtensionHost {
    /// Load every extension `settings.toml` enables, then start the ones the first turn needs
    /// (prompt, hooks, trace, status) in parallel, waiting at most `startup_bound`. Malformed packages
    /// are skipped with a warning.
    pub async fn start(
        home: Home,
        session: Session,
        mut opts: HostOptions,
    ) -> Result<ExtensionHost, HostError> {
        let events = Arc::new(HostEvents::new(
            opts.status_sink.clone(),
            opts.ask_sink.clone(),
        ));
        // Its secrets, lock and packages (and the audit trail) never reach a server by way of
        // the workspace.
        yep_sandbox::protect(&home.root);
        let said = crate::store::settings::audit(&home.settings_path()).unwrap_or_default();
        let audit = match &opts.supervisor.audit {
            Some(audit) => Some(audit.clone()),
            None => said
                .enabled
                .then(|| crate::audit::AuditLog::open(home.audit_path())),
        };
        opts.supervisor.audit = audit.clone();
        if let Some(audit) = &audit {
            let _ = events.audit.set(audit.clone());
        }
        let block_secrets = opts.block_secrets || said.block_secrets;
        let core = Arc::new(Core {
            audit,
            block_secrets,
            home,
            session_id: session.id,
            workspace_root: Mutex::new(session.workspace_root),
            opts,
            events,
            shut: AtomicBool::new(false),
            agent: Default::default(),
        });
        let (table_tx, table) = watch::channel(Arc::new(Table::default()));
        let (commands, queue) = mpsc::unbounded_channel();
        let mut registry = Registry::new(Arc::clone(&core), table_tx);
        let last = Arc::new(LastHandle(table.clone()));
        // Before any server starts: one may run a host tool as soon as it is up.
        let _ = core.events.host.set(WeakHost {
            core: Arc::downgrade(&core),
            table: table.clone(),
            commands: commands.downgrade(),
            last: Arc::downgrade(&last),
        });
        registry.refresh().await?;
        tokio::spawn(registry.run(queue));
        let host = ExtensionHost {
            core,
            _last: last,
            table,
            commands,
        };
        if host.core.opts.ask_sink.is_some() {
            tokio::spawn(mcp::ask_approval(host.weak()));
        }
        if let Some(after) = idle::idle_stop(&host.core.opts) {
            tokio::spawn(idle::sweep(host.weak(), after));
        }
        Ok(host)
    }

    /// A handle that does not keep the host alive.
    pub fn weak(&self) -> WeakHost {
        WeakHost {
            core: Arc::downgrade(&self.core),
            table: self.table.clone(),
            commands: self.commands.downgrade(),
            last: Arc::downgrade(&self._last),
        }
    }

    /// Ask the registry task; its answer, or `ShutDown` if the host was shut down or the task
    /// is gone.
    pub(super) async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, HostError> {
        if self.core.is_shut() {
            return Err(HostError::ShutDown);
        }
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(command(reply))
            .map_err(|_| HostError::ShutDown)?;
        answer.await.map_err(|_| HostError::ShutDown)
    }

    pub(super) fn warn(&self, message: String) {
        self.core.warn(message);
    }

    /// The home this host runs from.
    pub fn home(&self) -> &Home {
        &self.core.home
    }

    /// Every problem so far, once each, as a sentence that names the extension: skipped or
    /// drifted packages, servers that failed to start or stopped, renamed and refused tools,
    /// hooks that could not run. The first `MAX_WARNINGS` are kept.
    pub fn warnings(&self) -> Vec<String> {
        self.core.events.health.warnings()
    }

    /// Health events as they happen: started, failed, restarted, drifted, refused tool, hook
    /// error, and the other warnings. A new stream first gets the recent ones (up to
    /// `HEALTH_BACKLOG`), so subscribing after `start` misses nothing of it.
    pub fn health(&self) -> HealthStream {
        self.core.events.health.subscribe()
    }

    /// The current table. Cheap: an `Arc` of an immutable snapshot.
    pub fn snapshot(&self) -> Arc<Table> {
        Arc::clone(&self.table.borrow())
    }

    /// Every change to the table from now on, as it is published (a new tool list after an
    /// activate, say). The receiver holds the latest snapshot; each change marks it changed.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Table>> {
        let mut changes = self.table.clone();
        // A new subscriber has seen the current table: only what comes next is a change.
        changes.borrow_and_update();
        changes
    }

    pub(crate) fn loaded(&self) -> Vec<Arc<Loaded>> {
        self.snapshot().loaded().cloned().collect()
    }

    pub(super) fn find(&self, name: &str) -> Result<Arc<Loaded>, HostError> {
        find(&self.snapshot(), name)
    }

    /// The enabled extensions, in enable order.
    pub fn extensions(&self) -> Vec<String> {
        self.snapshot().extensions()
    }

    /// Call a tool by the name `tools()` gives it. Progress goes to `updates`; cancelling (or
    /// dropping the future) cancels on the wire.
    pub async fn call_tool(
        &self,
        name: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<ToolResult, HostError> {
        self.call_tool_audited(name, args, updates, cancel).await
    }

    /// [`ExtensionHost::call_tool`] for a call a server's own tool asked for: `chain` is the
    /// tools that led to it.
    pub(crate) async fn call_tool_in_chain(
        &self,
        name: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
        chain: Vec<String>,
    ) -> Result<ToolResult, HostError> {
        if self.core.is_shut() {
            return Err(HostError::ShutDown);
        }
        let (loaded, tool) = {
            let table = self.table.borrow();
            let route = table.route(name)?;
            let to = match &route.to {
                Serves::Extension(loaded) => Ok(Arc::clone(loaded)),
                Serves::Mcp(entry) => Err(Arc::clone(entry)),
            };
            (to, route.tool.clone())
        };
        let mut call = ToolCall {
            tool,
            args,
            updates,
            cancel,
            chain,
        };
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(entry) => return self.call_mcp(&entry, call).await,
        };
        // Refused before the server is started or sent anything.
        loaded.ext.check_args(&call.tool, &call.args)?;
        // The live server's offer, by reference: no copy on the hot path.
        let live = loaded.ext.live().await?;
        self.refuse_unapproved(&loaded, live.offer());
        if !live.serves(&call.tool) {
            return Err(HostError::NotServed {
                extension: loaded.name.clone(),
                tool: call.tool,
            });
        }
        // The chain names tools as the host does (a collision's `<ext>__<tool>` too). An
        // agent's call of a tool by its own name leaves it empty (no allocation on the hot
        // path): the dialect that keeps chains starts one with that name.
        if !call.chain.is_empty() || name != call.tool {
            call.chain.push(name.to_string());
        }
        Ok(loaded.ext.send_tool_call(&live, call).await?)
    }

    /// A call of MCP server `entry`'s `tool`, started if need be, and held to its pin: a tool
    /// the running server changed since approval is withheld.
    async fn call_mcp(
        &self,
        entry: &mcp::McpEntry,
        call: ToolCall,
    ) -> Result<ToolResult, HostError> {
        let live = entry.ext.live().await?;
        if !entry.approves(live.peer().as_ref(), &call.tool) {
            // The table the start asked for is in place before the caller hears of it, so
            // the tools it lists next are the ones it may call.
            let _ = self.ask(Command::Sync).await;
            return Err(HostError::Withheld {
                server: entry.source.name.clone(),
                new: entry
                    .pin
                    .as_ref()
                    .is_none_or(|p| !p.tools.contains_key(&call.tool)),
                tool: call.tool,
            });
        }
        Ok(entry.ext.send_tool_call(&live, call).await?)
    }

    /// The tools MCP server `server` lists now, whether approved or not, through the session's
    /// own client (started if need be). One that is not approved is never started.
    pub async fn mcp_list_tools(
        &self,
        server: &str,
    ) -> Result<Vec<crate::store::mcp::McpTool>, HostError> {
        let entry = self
            .snapshot()
            .mcp
            .iter()
            .find(|e| e.source.name == server)
            .cloned()
            .ok_or_else(|| HostError::UnknownMcpServer(server.to_string()))?;
        if let Some(why) = &entry.blocked {
            return Err(HostError::Unapproved(why.clone()));
        }
        let live = entry.ext.live().await?;
        Ok(live.peer().listed().iter().map(mcp::pinned_form).collect())
    }

    /// Where each MCP server this session sees stands: approved or not, started, failed, its
    /// tools and what is withheld.
    pub fn mcp_status(&self) -> Vec<McpState> {
        self.snapshot().mcp.iter().map(|e| e.state()).collect()
    }

    /// Log, once per server process, the tools it serves that the manifest does not approve.
    fn refuse_unapproved(&self, loaded: &Loaded, offer: &Offer) {
        let pid = loaded.ext.pid();
        let mut warned = loaded.warned_pid.lock().unwrap_or_else(|p| p.into_inner());
        if *warned == pid {
            return;
        }
        *warned = pid;
        drop(warned);
        for t in &offer.tools {
            if loaded.manifest.tool(&t.name).is_none() {
                self.core.report(HealthEvent::RefusedTool {
                    extension: loaded.name.clone(),
                    tool: t.name.clone(),
                    message: format!("extension `{}`: refusing tool `{}`, which the approved manifest does not declare", loaded.name, crate::text::escape(&t.name)),
                });
            }
        }
    }

    /// The tools each extension's running server serves, clamped to its manifest.
    pub async fn served_tools(&self, extension: &str) -> Result<Vec<String>, HostError> {
        if self.core.is_shut() {
            return Err(HostError::ShutDown);
        }
        let loaded = self.find(extension)?;
        let offer = loaded.ext.handshake().await?;
        self.refuse_unapproved(&loaded, &offer);
        Ok(offer
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| loaded.manifest.tool(n).is_some())
            .collect())
    }

    /// Every slash command, as `<ext>:<name>`.
    pub fn commands(&self) -> Vec<CommandInfo> {
        use crate::store::claude::project::PROJECT;
        let mut commands: Vec<CommandInfo> = self
            .loaded()
            .iter()
            .flat_map(|l| {
                l.manifest.yolop.commands.iter().map(move |c| {
                    let hint: Vec<String> = c
                        .args
                        .iter()
                        .map(|a| match a.description.is_empty() {
                            true => format!("<{}>", a.name),
                            false => a.description.clone(),
                        })
                        .collect();
                    CommandInfo {
                        name: format!("{}:{}", l.name, c.name),
                        description: c.description.clone(),
                        argument_hint: (!hint.is_empty()).then(|| hint.join(" ")),
                    }
                })
            })
            .collect();
        // The workspace's own commands go by the name Claude Code gives them, `/hello`, where
        // no other command is listed by that name (none is: the others all hold a `:`).
        let full: Vec<String> = commands.iter().map(|c| c.name.clone()).collect();
        for c in &mut commands {
            if let Some(bare) = c
                .name
                .strip_prefix(PROJECT)
                .and_then(|n| n.strip_prefix(':'))
                && !full.iter().any(|n| n == bare)
            {
                c.name = bare.to_string();
            }
        }
        commands
    }

    /// Run `<ext>:<name>` (or `/<ext>:<name>`, as install shows it) with the raw argument text;
    /// a name with no extension (`hello`, `/hello`) is the trusted workspace's own command, as
    /// Claude Code names it.
    pub async fn execute_command(
        &self,
        command: &str,
        arguments: &str,
    ) -> Result<CommandResult, HostError> {
        if self.core.is_shut() {
            return Err(HostError::ShutDown);
        }
        let unknown = || HostError::UnknownCommand(command.to_string());
        let spelled = command.strip_prefix('/').unwrap_or(command);
        let (ext, name) = spelled
            .split_once(':')
            .unwrap_or((crate::store::claude::project::PROJECT, spelled));
        // Each part exactly, else whatever the case (zot's lookup, over the whole name): the
        // server hears the spelling it registered.
        let table = self.snapshot();
        let loaded = find(&table, ext)
            .ok()
            .or_else(|| {
                table
                    .loaded()
                    .find(|l| l.name.eq_ignore_ascii_case(ext))
                    .cloned()
            })
            .ok_or_else(unknown)?;
        if let Some(off) = loaded
            .off
            .commands
            .iter()
            .find(|c| c.eq_ignore_ascii_case(name))
        {
            return Err(HostError::CommandOff {
                extension: loaded.name.clone(),
                command: off.clone(),
            });
        }
        let commands = &loaded.manifest.yolop.commands;
        let registered = commands
            .iter()
            .find(|c| c.name == name)
            .or_else(|| commands.iter().find(|c| c.name.eq_ignore_ascii_case(name)))
            .ok_or_else(unknown)?;
        Ok(loaded
            .ext
            .with_peer(|p, t| p.command(&registered.name, arguments, t))
            .await?)
    }

    /// The latest status per extension.
    pub fn status(&self) -> BTreeMap<String, StatusEntry> {
        self.core
            .events
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Set one plain config field (validated, persisted) and push it to a running server:
    /// `Applied` keeps the process; `RestartRequired` (or a server that cannot take config
    /// live) respawns it with the new config. Serialised with activate, deactivate and reload.
    pub async fn set_config(
        &self,
        name: &str,
        field: &str,
        value: Value,
    ) -> Result<ConfigOutcome, HostError> {
        let (name, field) = (name.to_string(), field.to_string());
        self.ask(|reply| Command::SetConfig {
            name,
            field,
            value,
            reply,
        })
        .await?
    }

    /// The running server's pid, if it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.find(name).ok().and_then(|l| l.ext.pid())
    }

    /// Restart one extension's server within the same approved surface.
    pub async fn reload(&self, name: &str) -> Result<(), HostError> {
        let name = name.to_string();
        self.ask(|reply| Command::Reload(name, reply)).await?
    }

    /// Enable an extension for this session from the next turn on, and in settings. Required
    /// config fields nobody set are asked for through the `AskSink` by kind (secret: masked,
    /// `enum`: a selector, else free text). Returns the fields still missing (`setup_incomplete`).
    pub async fn activate(&self, name: &str) -> Result<Vec<String>, HostError> {
        if self.core.is_shut() {
            return Err(HostError::ShutDown);
        }
        let manifest = self.core.home.installed_manifest(name)?;
        // Asked before the registry is, so a person typing holds up no other change; in line
        // with the servers' questions, so the sink still has one open at a time.
        let events = &self.core.events;
        let missing = match &self.core.opts.ask_sink {
            Some(_) => {
                let ask = |q| crate::capability::Events::ask(&**events, name, q);
                setup_asking(&self.core.home, name, &manifest, ask).await?
            }
            None => setup(&self.core.home, name, &manifest, None).await?,
        };
        let name = name.to_string();
        self.ask(|reply| Command::Activate(name, reply)).await??;
        Ok(missing)
    }

    /// Disable an extension for this session, and in settings. Its server is closed for good:
    /// calls in flight fail, and none starts again.
    pub async fn deactivate(&self, name: &str) -> Result<(), HostError> {
        let name = name.to_string();
        self.ask(|reply| Command::Deactivate(name, reply)).await?
    }

    /// Load what `settings.toml` enables now and close what it no longer does (another `yep`
    /// changed it). Extensions in both keep their processes.
    pub async fn refresh(&self) -> Result<(), HostError> {
        self.ask(Command::Refresh).await?
    }

    /// The workspace moved: running servers are told, servers started from now on run there,
    /// and its `.mcp.json` servers replace the old one's (asked about, with a question sink).
    pub async fn set_workspace(&self, root: PathBuf) -> Result<(), HostError> {
        self.ask(|reply| Command::SetWorkspace(root, reply))
            .await??;
        // The new workspace's `.mcp.json` servers are asked about as a session start's are.
        if self.core.opts.ask_sink.is_some() {
            tokio::spawn(mcp::ask_approval(self.weak()));
        }
        Ok(())
    }

    /// Stop every server gracefully, in parallel, within `grace` each. It is terminal, for
    /// every clone of the handle: nothing starts again, the table is empty (no tools,
    /// commands or extensions), and every call after it fails with [`HostError::ShutDown`]
    /// (a pre-hook decision is a block saying so, the prompt is empty). A second call does
    /// nothing.
    pub async fn shutdown(&self) {
        // Not `ask`, which refuses once the flag is set: a second caller waits until the
        // first shutdown has stopped every server (the registry runs one command at a time).
        let (reply, done) = oneshot::channel();
        if self.commands.send(Command::Shutdown(reply)).is_ok() {
            let _ = done.await;
        }
        // What was recorded is on disk before a short-lived process exits.
        if let Some(audit) = self.core.audit.clone() {
            let flushed = tokio::task::spawn_blocking(move || audit.flush(AUDIT_FLUSH));
            let _ = flushed.await;
        }
    }
}

/// The longest shutdown waits for the audit trail's writer.
const AUDIT_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);
