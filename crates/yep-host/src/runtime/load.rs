//! What the host and its registry task share ([`Core`]), and how it loads: each wanted
//! extension's package, the workspace's own Claude Code config and the MCP servers, into the
//! plan of the next table.

use super::table::{Loaded, Table, Unloaded};
use super::{HostOptions, McpSource, events::HostEvents, launch, mcp, trace};
use crate::error::report;
use crate::health::HealthEvent;
use crate::manifest::Manifest;
use crate::store::Home;
use crate::supervisor::Extension;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the host and its registry task share: fixed for the session but for the workspace.
pub(crate) struct Core {
    pub(super) home: Home,
    pub(super) session_id: String,
    pub(super) workspace_root: Mutex<PathBuf>,
    pub(super) opts: HostOptions,
    pub(super) events: Arc<HostEvents>,
    /// Set by `shutdown`: every call after it fails with
    /// [`HostError::ShutDown`](super::HostError::ShutDown).
    pub(super) shut: AtomicBool,
    /// What the events of an agent that runs its own tools need kept between them.
    pub(super) agent: super::agent::AgentState,
    /// The audit trail every tool call is recorded in; `None` when settings turn it off.
    pub(super) audit: Option<crate::audit::AuditLog>,
    /// Refuse arguments and results that carry credentials: the embedder's
    /// [`HostOptions::block_secrets`] or the home's `[audit] block_secrets`.
    pub(super) block_secrets: bool,
}

impl Core {
    /// Tell the health stream, and `warnings()` when it is a problem. A standing condition
    /// met again (each `mcp_servers()`, each rebuild) is not repeated.
    pub(super) fn report(&self, event: HealthEvent) {
        self.events.health.report(event);
    }

    pub(super) fn warn(&self, message: String) {
        self.report(HealthEvent::Warning {
            extension: None,
            message,
        });
    }

    pub(super) fn is_shut(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }

    /// `name`, which could not be loaded, kept for its hooks (if it has any): the approved
    /// ones in the lock, or else `last_known`, as this session last knew them.
    fn unloaded(
        &self,
        name: &str,
        why: &launch::LaunchError,
        last_known: Option<&Manifest>,
    ) -> Option<Unloaded> {
        let approved = self
            .home
            .lockfile()
            .ok()
            .and_then(|lock| lock.get(name)?.approved());
        let manifest = approved.or_else(|| last_known.cloned())?;
        (!manifest.yolop.hooks.is_empty()).then(|| Unloaded {
            name: name.to_string(),
            manifest,
            reason: report(why),
        })
    }

    pub(super) fn workspace_root(&self) -> PathBuf {
        self.workspace_root
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn load(&self, name: &str) -> Result<Loaded, launch::LaunchError> {
        let launch = launch::installed_naming(
            &self.home,
            name,
            self.workspace_root(),
            &self.session_id,
            &self.opts.supervisor,
            &self.opts.claude_tool_names,
        )?;
        Ok(self.loaded_from(name, launch, None))
    }

    /// The workspace's own Claude Code config, when approved for it: the one loaded already
    /// (`old`) while it is the same, else a new one. Waiting for approval is told.
    fn load_project(&self, old: &Table) -> Option<Arc<Loaded>> {
        use crate::store::claude::project::PROJECT;
        let workspace = self.workspace_root();
        match launch::project(
            &self.home,
            &workspace,
            &self.session_id,
            &self.opts.supervisor,
            &self.opts.claude_tool_names,
        ) {
            launch::Project::None => None,
            launch::Project::Unapproved(message) => {
                self.report(HealthEvent::Warning {
                    extension: Some(PROJECT.into()),
                    message,
                });
                None
            }
            launch::Project::Approved { launch, hash } => {
                let kept = old.loaded().find(|l| {
                    l.name == PROJECT
                        && l.project_hash.as_deref() == Some(hash.as_str())
                        && l.ext.spec().package_dir == launch.spec.package_dir
                });
                Some(match kept {
                    Some(l) => Arc::clone(l),
                    None => Arc::new(self.loaded_from(PROJECT, *launch, Some(hash))),
                })
            }
        }
    }

    fn loaded_from(
        &self,
        name: &str,
        launch: launch::Launch,
        project_hash: Option<String>,
    ) -> Loaded {
        for event in launch.warnings {
            self.report(event);
        }
        let manifest = launch.manifest;
        let off = launch.off;
        // Its dialect says whether it is owed every event it observes (a pinned zot one).
        let lossless = launch.supervisor.dialect.lossless_traces();
        let ext = Extension::new(
            launch.spec,
            launch.supervisor,
            Arc::clone(&self.events) as Arc<dyn crate::capability::Events>,
        );
        let forwarder = manifest
            .yolop
            .trace
            .then(|| trace::Forwarder::new(lossless));
        Loaded {
            eager: launch.eager,
            name: name.to_string(),
            manifest,
            off,
            ext,
            warned_pid: Mutex::new(None),
            prompt: Mutex::default(),
            forwarder,
            forwarding: Mutex::new(None),
            project_hash,
        }
    }

    /// Servers with a prompt, hooks, trace or a status line start now (a session shows their
    /// status from its first turn), in parallel, bounded; the rest when first needed.
    /// A failed start is reported by the supervisor ([`HealthEvent::Failed`]): the embedder
    /// hears of it in `warnings()` and the health stream, even when it comes after
    /// `startup_bound`.
    pub(super) async fn start_eager(self: &Arc<Self>, loaded: Vec<Arc<Loaded>>) {
        let eager: Vec<_> = loaded
            .into_iter()
            .filter(|l| {
                let f = &l.manifest.yolop;
                f.capability_server.is_some()
                    && (l.eager
                        || f.prompt
                        || f.dynamic_prompt
                        || !f.hooks.is_empty()
                        || f.trace
                        || f.status)
            })
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for l in eager {
            tasks.spawn(async move {
                // A failure is reported where it happens, in the supervisor.
                let _ = l.ext.handshake().await;
            });
        }
        let all = async { while tasks.join_next().await.is_some() {} };
        let timed_out = tokio::time::timeout(self.opts.startup_bound, all)
            .await
            .is_err();
        // Slow starts keep going in the background: dropping the set would abort them.
        tasks.detach_all();
        if timed_out {
            tracing::warn!(
                "some extensions are still starting after {} ms; continuing without waiting",
                self.opts.startup_bound.as_millis()
            );
        }
    }

    /// Every MCP server a session with `loaded` sees, with where it comes from.
    pub(super) fn mcp_sources(&self, loaded: &[Arc<Loaded>]) -> Vec<McpSource> {
        let extensions: Vec<(String, Manifest)> = loaded
            .iter()
            .map(|l| (l.name.clone(), l.manifest.clone()))
            .collect();
        mcp::sources(
            &self.home,
            &extensions,
            &self.workspace_root(),
            &mut |message| self.warn(message),
        )
    }

    /// Load the set `wanted` (in this order) from `old`: kept extensions stay as they are,
    /// new ones are loaded (their packages read and checked), and the MCP servers follow.
    /// Reads files: run it on a blocking thread.
    pub(super) fn plan(&self, wanted: &[String], old: &Table) -> Plan {
        let mut failed = Vec::new();
        let mut unloaded = Vec::new();
        let mut next = Vec::new();
        let mut added = Vec::new();
        // The workspace's own config is decided here, from the workspace, not from settings.
        let project = crate::store::claude::project::PROJECT;
        let settings = self.home.settings_path();
        for name in wanted.iter().filter(|n| *n != project) {
            // A switch the user turned since it loaded loads it again, without what is off.
            let off = crate::store::settings::off(&settings, name).unwrap_or_default();
            match old.loaded().find(|l| &l.name == name && l.off == off) {
                Some(l) => next.push(Arc::clone(l)),
                None => match self.load(name) {
                    Ok(l) => {
                        let l = Arc::new(l);
                        added.push(Arc::clone(&l));
                        next.push(l);
                    }
                    Err(why) => {
                        let message = format!("skipping extension `{name}`: {}", report(&why));
                        // Not in the old table's loaded ones (those are kept above), so what
                        // this session last knew of it is an earlier failed load.
                        let last_known = old.unloaded().find(|u| &u.name == name);
                        let known = self.unloaded(name, &why, last_known.map(|u| &u.manifest));
                        if let Some(u) = known {
                            unloaded.push(Arc::new(u));
                        }
                        let extension = name.clone();
                        self.report(match why {
                            launch::LaunchError::Drifted { .. } => {
                                HealthEvent::Drifted { extension, message }
                            }
                            // Not a failure: its manifest says so.
                            launch::LaunchError::ZotDisabled { .. } => HealthEvent::Warning {
                                extension: Some(extension),
                                message,
                            },
                            _ => HealthEvent::Failed {
                                extension,
                                message,
                                log: None,
                            },
                        });
                        failed.push((name.clone(), why));
                    }
                },
            }
        }
        if let Some(l) = self.load_project(old) {
            if !old.loaded().any(|o| Arc::ptr_eq(o, &l)) {
                added.push(Arc::clone(&l));
            }
            next.push(l);
        }
        let mcp = self.mcp_entries(&next, &old.mcp);
        Plan {
            next,
            added,
            unloaded,
            failed,
            mcp,
        }
    }

    /// The MCP servers a session with `loaded` runs, keeping `old` entries still the same.
    fn mcp_entries(
        &self,
        loaded: &[Arc<Loaded>],
        old: &[Arc<mcp::McpEntry>],
    ) -> Vec<Arc<mcp::McpEntry>> {
        let sources = self.mcp_sources(loaded);
        let events = Arc::clone(&self.events) as Arc<dyn crate::capability::Events>;
        mcp::entries(
            &self.home,
            sources,
            old,
            &self.workspace_root(),
            &self.opts,
            &events,
            &mut |extension, message| self.report(HealthEvent::Warning { extension, message }),
        )
    }
}

/// The table a reconcile moves to, as [`Core::plan`] loads it.
pub(super) struct Plan {
    /// The loaded extensions, in the order wanted: kept ones and `added`.
    pub(super) next: Vec<Arc<Loaded>>,
    pub(super) added: Vec<Arc<Loaded>>,
    pub(super) unloaded: Vec<Arc<Unloaded>>,
    /// The ones that could not load, and why (each also reported).
    pub(super) failed: Vec<(String, launch::LaunchError)>,
    pub(super) mcp: Vec<Arc<mcp::McpEntry>>,
}
