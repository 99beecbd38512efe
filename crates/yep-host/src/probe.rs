//! Running a zot extension once, at install or update, to read what it registers. zot has
//! no static tool list, so this first run is what the user approves and the lock pins.
//!
//! It starts the extension exactly as a session would (its own directory as cwd, the same
//! `hello_ack` fields, stderr to its log), through the supervisor, so a failure reads like
//! any startup error: the extension, what ran, where, its exit status and its log.

use crate::capability::NoEvents;
use crate::dialect::Dialect;
use crate::dialect::zot::capture::{Capture, pinned};
use crate::dialect::zot::{AUTO_READY_IDLE, Zot};
use crate::store::zot::{self, Probe, ZotManifest};
use crate::store::{Home, ZotRunner};
use crate::supervisor::{Extension, SupervisorOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a zot extension could not be run once to read what it registers. The store holds it
/// as the source of its `ZotRun` error: downcast to match on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ZotProbeError {
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
        let Some(mut spec) = crate::runtime::launch::zot_dir_spec(
            manifest,
            dir,
            self.workspace.clone(),
            &self.log_dir,
        ) else {
            return Ok(zot::Registrations::default());
        };
        spec.data_dir = Some(data_dir.to_path_buf());
        spec.session_id = "install".into();
        // As a session runs it: with what the user granted it, and is granting now (a zot
        // manifest asks for no grants of its own).
        let lock = self.home.lockfile().unwrap_or_default();
        spec.sandbox_grants =
            crate::store::approval::effective_grants(&lock, &manifest.name, None, &self.extra);
        let capture = Arc::new(Capture::new(Zot::default()));
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

/// The probe for `home`, as the store takes it.
pub fn runner(home: &Home, workspace: PathBuf) -> ZotRunner {
    ZotProbe::new(home, workspace).runner()
}
