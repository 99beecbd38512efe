//! The registry task: the one owner of the extension table, which runs the host's changes
//! (activate, deactivate, reload, set_config, set_workspace, refresh) one at a time.

use super::load::{Core, Plan};
use super::table::{Loaded, Table, Unloaded, find};
use super::{HostError, launch, mcp, off_thread};
use crate::capability::ConfigOutcome;
use crate::error::report;
use crate::health::HealthEvent;
use crate::store::{Home, settings};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{mpsc, oneshot, watch};

/// What the registry task is asked to do, one at a time, in the order asked.
pub(super) enum Command {
    Activate(String, oneshot::Sender<Result<(), HostError>>),
    Deactivate(String, oneshot::Sender<Result<(), HostError>>),
    Reload(String, oneshot::Sender<Result<(), HostError>>),
    SetConfig {
        name: String,
        field: String,
        value: Value,
        reply: oneshot::Sender<Result<ConfigOutcome, HostError>>,
    },
    SetWorkspace(PathBuf, oneshot::Sender<Result<(), HostError>>),
    Refresh(oneshot::Sender<Result<(), HostError>>),
    /// A server's tools may have changed (an MCP server started or said so): the table is
    /// built again from what is loaded.
    Rebuild,
    /// Answered once every command before it is done.
    Sync(oneshot::Sender<()>),
    Shutdown(oneshot::Sender<()>),
}

/// The one owner of the extension table. Every change goes through its queue, so activate,
/// deactivate, reload, set_config and set_workspace never interleave, and each starts from
/// the table the one before it left.
pub(super) struct Registry {
    core: Arc<Core>,
    table: watch::Sender<Arc<Table>>,
    /// After shutdown nothing loads again.
    shut: bool,
}

impl Registry {
    /// The registry of `core`, publishing its tables on `table`; it loads nothing until asked.
    pub(super) fn new(core: Arc<Core>, table: watch::Sender<Arc<Table>>) -> Registry {
        Registry {
            core,
            table,
            shut: false,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        while let Some(command) = commands.recv().await {
            match command {
                Command::Activate(name, reply) => {
                    let _ = reply.send(self.activate(&name).await);
                }
                Command::Deactivate(name, reply) => {
                    let _ = reply.send(self.deactivate(&name).await);
                }
                Command::Reload(name, reply) => {
                    let _ = reply.send(self.reload(&name).await);
                }
                Command::SetConfig {
                    name,
                    field,
                    value,
                    reply,
                } => {
                    let _ = reply.send(self.set_config(&name, field, value).await);
                }
                Command::SetWorkspace(root, reply) => {
                    let _ = reply.send(self.set_workspace(root).await);
                }
                Command::Refresh(reply) => {
                    let _ = reply.send(self.refresh().await);
                }
                Command::Rebuild => self.rebuild(),
                Command::Sync(reply) => {
                    let _ = reply.send(());
                }
                Command::Shutdown(reply) => {
                    self.shutdown().await;
                    let _ = reply.send(());
                }
            }
        }
    }

    fn current(&self) -> Arc<Table> {
        Arc::clone(&self.table.borrow())
    }

    fn find(&self, name: &str) -> Result<Arc<Loaded>, HostError> {
        find(&self.current(), name)
    }

    /// Make the loaded set `wanted` (in this order): load what is new, close what left. An
    /// extension in both keeps its process. Returns the ones that could not load, and why
    /// (each also a warning).
    async fn reconcile(
        &mut self,
        wanted: &[String],
    ) -> Result<Vec<(String, launch::LaunchError)>, HostError> {
        if self.shut {
            return Err(HostError::ShutDown);
        }
        let old = self.current();
        // Loading reads the packages (manifests, the content hash) and the workspace's
        // `.mcp.json`: on a blocking thread, never a runtime worker.
        let (core, from, asked) = (Arc::clone(&self.core), Arc::clone(&old), wanted.to_vec());
        let plan = tokio::task::spawn_blocking(move || core.plan(&asked, &from)).await;
        let Plan {
            next,
            added,
            unloaded,
            failed,
            mcp,
        } = match plan {
            Ok(plan) => plan,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => return Err(HostError::ShutDown),
        };
        // Gone: not in the next table (left, or loaded again with other switches).
        let gone: Vec<_> = old
            .loaded()
            .filter(|l| !next.iter().any(|n| Arc::ptr_eq(n, l)))
            .cloned()
            .collect();
        let names = |list: &[Arc<Loaded>]| list.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        let gone_names =
            |list: &[Arc<Unloaded>]| list.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
        let old_loaded: Vec<Arc<Loaded>> = old.loaded().cloned().collect();
        let old_unloaded: Vec<Arc<Unloaded>> = old.unloaded().cloned().collect();
        let kept = |list: &[Arc<mcp::McpEntry>], e: &Arc<mcp::McpEntry>| {
            list.iter().any(|other| Arc::ptr_eq(other, e))
        };
        let gone_mcp: Vec<_> = old.mcp.iter().filter(|e| !kept(&mcp, e)).cloned().collect();
        // A process shared with a server that stays is not stopped with the one that goes.
        let running: Vec<_> = mcp.iter().map(|k| Arc::clone(&k.ext)).collect();
        let still_runs = |e: &Arc<mcp::McpEntry>| running.iter().any(|k| Arc::ptr_eq(k, &e.ext));
        let new_mcp: Vec<_> = mcp.iter().filter(|e| !kept(&old.mcp, e)).cloned().collect();
        if names(&next) == names(&old_loaded)
            && gone.is_empty()
            && gone_names(&unloaded) == gone_names(&old_unloaded)
            && gone_mcp.is_empty()
            && new_mcp.is_empty()
        {
            // Nothing changed: subscribers are not told of a change that is not one.
            return Ok(failed);
        }
        self.table
            .send_replace(Arc::new(self.core.table(next, unloaded, mcp)));
        // Closed for good: calls in flight fail, and nothing starts them again.
        let mut stops = tokio::task::JoinSet::new();
        for l in gone {
            l.stop_forwarding();
            let (events, home) = (Arc::clone(&self.core.events), self.core.home.clone());
            stops.spawn(async move {
                l.ext.close().await;
                events.clear(&l.name);
                crate::store::state::clear_run(&home, l.ext.name());
            });
        }
        for e in gone_mcp.iter().filter(|e| !still_runs(e)).cloned() {
            let home = self.core.home.clone();
            stops.spawn(async move {
                e.ext.close().await;
                crate::store::state::clear_run(&home, e.ext.name());
            });
        }
        while stops.join_next().await.is_some() {}
        self.core.start_eager(added).await;
        mcp::learn(new_mcp);
        Ok(failed)
    }

    async fn activate(&mut self, name: &str) -> Result<(), HostError> {
        if self.shut {
            return Err(HostError::ShutDown);
        }
        persist_enabled(&self.core.home, name, true).await?;
        if self.find(name).is_ok() {
            return Ok(());
        }
        let mut wanted = self.current().wanted();
        // One kept only for its hooks is tried again, in its place.
        if !wanted.iter().any(|n| n == name) {
            wanted.push(name.to_string());
        }
        // Loading it failed: say why, as a direct request deserves.
        let failed = self.reconcile(&wanted).await?;
        match failed.into_iter().find(|(n, _)| n == name) {
            Some((extension, why)) => Err(HostError::Activate {
                extension,
                source: Box::new(why),
            }),
            None => Ok(()),
        }
    }

    async fn deactivate(&mut self, name: &str) -> Result<(), HostError> {
        if self.shut {
            return Err(HostError::ShutDown);
        }
        persist_enabled(&self.core.home, name, false).await?;
        let wanted: Vec<String> = self
            .current()
            .wanted()
            .into_iter()
            .filter(|n| n != name)
            .collect();
        self.reconcile(&wanted).await.map(drop)
    }

    /// Load what settings enable now and close what they no longer do.
    pub(super) async fn refresh(&mut self) -> Result<(), HostError> {
        let enabled = settings::enabled(&self.core.home.settings_path())?;
        self.reconcile(&enabled).await.map(drop)
    }

    /// The table again from what is loaded now, published only when its tools changed.
    fn rebuild(&mut self) {
        if self.shut {
            return;
        }
        let current = self.current();
        let next = self.core.table(
            current.loaded().cloned().collect(),
            current.unloaded().cloned().collect(),
            current.mcp.clone(),
        );
        if next.tools != current.tools {
            self.table.send_replace(Arc::new(next));
        }
    }

    async fn reload(&mut self, name: &str) -> Result<(), HostError> {
        if self.shut {
            return Err(HostError::ShutDown);
        }
        let loaded = self.find(name)?;
        loaded.ext.stop().await;
        self.core.events.clear(name);
        loaded.ext.handshake().await?;
        Ok(())
    }

    async fn set_config(
        &mut self,
        name: &str,
        field: String,
        value: Value,
    ) -> Result<ConfigOutcome, HostError> {
        use crate::store::config;
        if self.shut {
            return Err(HostError::ShutDown);
        }
        let loaded = self.find(name)?;
        let (home, manifest) = (self.core.home.clone(), loaded.manifest.clone());
        off_thread(move || config::set_plain(&home, &manifest, &field, value)).await?;
        let (plain, env) = config::server_inputs(&self.core.home, &loaded.manifest)?;
        loaded.ext.set_inputs(plain.clone(), env);
        if !loaded.ext.is_running() {
            return Ok(ConfigOutcome::Applied);
        }
        let status = loaded
            .ext
            .with_peer(|p, t| p.config_changed(plain, t))
            .await?;
        if status == ConfigOutcome::RestartRequired {
            loaded.ext.stop().await;
            self.core.events.clear(name);
            loaded.ext.handshake().await?;
        }
        Ok(status)
    }

    async fn set_workspace(&mut self, root: PathBuf) -> Result<(), HostError> {
        if self.shut {
            return Err(HostError::ShutDown);
        }
        *self
            .core
            .workspace_root
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = root.clone();
        let text = root.to_string_lossy().into_owned();
        for l in self.current().loaded() {
            l.ext.set_workspace(root.clone());
            if let Err(err) = l
                .ext
                .with_running_peer(|p, _| p.workspace_changed(&text))
                .await
            {
                self.core.report(HealthEvent::Warning {
                    extension: Some(l.name.clone()),
                    message: format!(
                        "could not tell extension `{}` that the workspace moved: {}",
                        l.name,
                        report(&err)
                    ),
                });
            }
        }
        // Another workspace has other `.mcp.json` servers.
        let wanted = self.current().wanted();
        self.reconcile(&wanted).await.map(drop)
    }

    async fn shutdown(&mut self) {
        if self.shut {
            return;
        }
        self.shut = true;
        self.core.shut.store(true, Ordering::Release);
        let mut tasks = tokio::task::JoinSet::new();
        for l in self.current().loaded().cloned() {
            l.stop_forwarding();
            let (events, home) = (Arc::clone(&self.core.events), self.core.home.clone());
            tasks.spawn(async move {
                l.ext.close().await;
                events.clear(&l.name);
                crate::store::state::clear_run(&home, l.ext.name());
            });
        }
        for e in self.current().mcp.iter().cloned() {
            let home = self.core.home.clone();
            tasks.spawn(async move {
                e.ext.close().await;
                crate::store::state::clear_run(&home, e.ext.name());
            });
        }
        while tasks.join_next().await.is_some() {}
        // Nothing is offered any more: no tools, commands or extensions, and subscribers hear
        // of it.
        self.table.send_replace(Arc::new(Table::default()));
    }
}

/// Write the enable state: it takes the home's file lock, which another `yep` may hold for a
/// while, so it runs off the async threads.
async fn persist_enabled(home: &Home, name: &str, on: bool) -> Result<(), HostError> {
    let (home, name) = (home.clone(), name.to_string());
    off_thread(move || home.set_enabled(&name, on)).await?;
    Ok(())
}
