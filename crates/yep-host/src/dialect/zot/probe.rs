//! Running a zot extension once, at install or update, to read what it registers. zot has
//! no static tool list, so this first run is what the user approves and the lock pins.
//!
//! It starts the extension exactly as a session would (its own directory as cwd, the same
//! `hello_ack` fields, stderr to its log), through the supervisor, so a failure reads like
//! any startup error: the extension, what ran, where, its exit status and its log.

use super::{AUTO_READY_IDLE, Registrations, open};
use crate::capability::{Events, NoEvents};
use crate::dialect::{Dialect, HandshakeError, Hello, Peer, PeerFuture, Streams};
use crate::manifest::{CommandDef, Grants, ToolDef};
use crate::rpc::ConnectionOptions;
use crate::store::zot::{self, Probe, ZotManifest};
use crate::store::{Home, ZotRunner};
use crate::supervisor::{Extension, ServerSpec, SupervisorOptions};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a zot extension could not be run once to read what it registers. The store holds it
/// as the source of its `ZotRun` error: downcast to match on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZotProbeError {
    /// Its data directory could not be made.
    #[error("failed to create {}: {source}", path.display())]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The run's own runtime could not be started.
    #[error("failed to start a runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The thread it ran on panicked.
    #[error("the run stopped unexpectedly")]
    Panicked,
    /// It did not start, did not finish its handshake, or ended before the host shut it
    /// down: the extension, its exit status and its log.
    #[error(transparent)]
    Start(Box<crate::supervisor::ExtensionError>),
}

/// Runs zot extensions for the store ([`Probe`]): logs go to the home's, and `hello_ack.cwd`
/// is `workspace`.
pub struct ZotProbe {
    log_dir: PathBuf,
    workspace: PathBuf,
    home: Home,
    /// Sandbox grants beyond what the user already granted it (`yep install --grant`).
    extra: crate::store::grants::SandboxGrants,
}

impl ZotProbe {
    pub fn new(home: &Home, workspace: PathBuf) -> ZotProbe {
        ZotProbe {
            log_dir: home.logs_dir(),
            workspace,
            home: home.clone(),
            extra: Default::default(),
        }
    }

    /// Run it with `extra` granted too, beyond what the lock grants it.
    pub fn granting(mut self, extra: crate::store::grants::SandboxGrants) -> ZotProbe {
        self.extra = extra;
        self
    }

    /// As the store takes it in `InstallOptions::zot` and `UpdateOptions::zot`.
    pub fn runner(self) -> ZotRunner {
        ZotRunner(Arc::new(self))
    }

    async fn run(
        &self,
        manifest: &ZotManifest,
        dir: &Path,
        data_dir: &Path,
    ) -> Result<zot::Registrations, ZotProbeError> {
        std::fs::create_dir_all(data_dir).map_err(|source| ZotProbeError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let Some(mut spec) = dir_spec(manifest, dir, self.workspace.clone(), &self.log_dir) else {
            return Ok(zot::Registrations::default());
        };
        spec.data_dir = Some(data_dir.to_path_buf());
        spec.session_id = "install".into();
        // As a session runs it: with what the user granted it (and is granting now).
        let granted = self
            .home
            .lockfile()
            .map(|l| l.granted(&manifest.name, None))
            .unwrap_or_default();
        spec.sandbox_grants = granted.merged(&self.extra);
        let capture = Arc::new(Capture::default());
        let opts = SupervisorOptions {
            dialect: Arc::clone(&capture) as Arc<dyn Dialect>,
            ..SupervisorOptions::for_home(&self.home)
        };
        let ext = Extension::new(spec, opts, Arc::new(NoEvents));
        let ran = match ext.handshake().await {
            // It runs until the host shuts it down: one that ends as soon as it is ready
            // fails as one that ends before.
            Ok(_) => {
                if let Some(live) = ext.running() {
                    let _ = tokio::time::timeout(AUTO_READY_IDLE, live.peer().closed()).await;
                }
                ext.stop_running().await.map(drop)
            }
            Err(err) => {
                ext.stop().await;
                Err(err)
            }
        };
        ran.map_err(|e| ZotProbeError::Start(Box::new(e)))?;
        Ok(pinned(capture.take().unwrap_or_default()))
    }
}

impl Probe for ZotProbe {
    fn probe(
        &self,
        manifest: &ZotManifest,
        dir: &Path,
        data_dir: &Path,
    ) -> Result<zot::Registrations, zot::ProbeFailure> {
        // The store is synchronous and may be called from inside a runtime: this run gets a
        // thread and a runtime of its own.
        let run = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(ZotProbeError::Runtime)?
                    .block_on(self.run(manifest, dir, data_dir))
            })
            .join()
            .unwrap_or(Err(ZotProbeError::Panicked))
        });
        run.map_err(|e| Box::new(e) as zot::ProbeFailure)
    }
}

/// How a zot extension in `dir` is run, as a session would run it (its own directory as cwd,
/// `exec` resolved as zot resolves it; its data dir the store's, set by the caller); `None`
/// for a bundle with nothing to run.
pub(crate) fn dir_spec(
    manifest: &ZotManifest,
    dir: &Path,
    workspace: PathBuf,
    log_dir: &Path,
) -> Option<ServerSpec> {
    let command = manifest.exec_in(dir)?.program();
    Some(ServerSpec {
        name: manifest.name.clone(),
        command,
        args: manifest.args.clone(),
        package_dir: dir.to_path_buf(),
        workspace_root: workspace,
        cwd: Some(dir.to_path_buf()),
        data_dir: None,
        language: Some(manifest.language.clone()),
        session_id: String::new(),
        config: Value::Null,
        env: Vec::new(),
        log_dir: log_dir.to_path_buf(),
        grants: Grants::default(),
        tool_schemas: Default::default(),
        sandbox_grants: Default::default(),
        grant_name: None,
    })
}

/// The zot dialect (of an extension not pinned yet), keeping what the extension registered
/// in its handshake.
#[derive(Default)]
pub(crate) struct Capture {
    zot: super::Zot,
    seen: Arc<Mutex<Option<Registrations>>>,
}

impl Capture {
    /// `zot`, keeping what each handshake registered.
    pub(crate) fn new(zot: super::Zot) -> Capture {
        Capture {
            zot,
            seen: Arc::default(),
        }
    }

    /// What the last handshake registered.
    pub(crate) fn take(&self) -> Option<Registrations> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Dialect for Capture {
    fn name(&self) -> &'static str {
        self.zot.name()
    }

    fn command_key(&self) -> &'static str {
        self.zot.command_key()
    }

    fn sandbox_learnable(&self) -> bool {
        self.zot.sandbox_learnable()
    }

    fn workspace_files(&self) -> Option<&'static str> {
        self.zot.workspace_files()
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        let seen = Arc::clone(&self.seen);
        let pin = self.zot.pin.clone();
        Box::pin(async move {
            let peer = open(streams, hello, pin, events, opts).await?;
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(peer.registrations());
            Ok(peer as Arc<dyn Peer>)
        })
    }
}

/// What a run registered, in the store's terms.
fn pinned(seen: Registrations) -> zot::Registrations {
    let pin = seen.pin();
    zot::Registrations {
        tools: seen
            .tools
            .into_iter()
            .map(|t| ToolDef {
                name: t.name,
                description: t.description.unwrap_or_default(),
                schema: t.schema.unwrap_or_else(|| json!({"type": "object"})),
                // zot's `direct` tools are loaded up front; its deferred ones are searched.
                never_defer: !t.deferred,
                output_schema: t.output_schema,
            })
            .collect(),
        commands: seen
            .commands
            .into_iter()
            .map(|c| CommandDef {
                name: c.name,
                description: c.description,
                args: Vec::new(),
            })
            .collect(),
        pin,
    }
}

/// The probe for `home`, as the store takes it.
pub fn runner(home: &Home, workspace: PathBuf) -> ZotRunner {
    ZotProbe::new(home, workspace).runner()
}
