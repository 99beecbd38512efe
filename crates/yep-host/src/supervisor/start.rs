//! Starting an extension's server: spawned (or opened by its transport), told what its
//! sandbox leaves out, and opened by its dialect; a failed start says why.

use super::error::ExtensionError;
use super::extension::{Extension, Live};
use crate::dialect::{HandshakeError, Hello, Peer, Streams};
use crate::health::HealthEvent;
use crate::process::{self, Containment, ServerProcess, describe_status};
use crate::rpc::{CloseReason, ConnectionOptions};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

impl Extension {
    /// Where its sandbox's refusals go: the health stream, naming it.
    fn denied_sink(&self) -> crate::process::DeniedSink {
        let events = Arc::clone(&self.events);
        let extension = self.spec.name.clone();
        crate::process::DeniedSink(Arc::new(move |denial: yep_sandbox::Denial| {
            events.health(HealthEvent::SandboxDenied {
                extension: extension.clone(),
                target: denial.target,
                grant: denial.grant,
                message: denial.message,
            })
        }))
    }

    /// When a sandboxed server's last words hold a denial, what to say after its exit status:
    /// it ran in the sandbox, what that allowed, and the grant that likely lets it through (or
    /// how to find out).
    pub(super) fn sandbox_note(&self, process: &ServerProcess, tail: &[String]) -> String {
        let denied = tail.iter().any(|l| {
            [
                "Permission denied",
                "permission denied",
                "Operation not permitted",
                "Read-only file system",
                "EACCES",
                "EPERM",
                "EROFS",
            ]
            .iter()
            .any(|d| l.contains(d))
        });
        let Some(contained) = process.sandbox.as_ref().filter(|_| denied) else {
            return String::new();
        };
        self.denials.fetch_add(1, Ordering::Relaxed);
        let workspace = contained.workspace.as_deref();
        let allowed = contained.profile.said(workspace);
        let name = crate::text::escape(self.spec.grant_name.as_ref().unwrap_or(&self.spec.name));
        // `--sandbox-learn` runs YEP and MCP servers (an MCP server by its `yep grant` name,
        // which doctor takes too); a zot extension is told where its denial is written.
        let learnable = self.opts.dialect.sandbox_learnable();
        // A launcher's package yep installed is pinned: no grant writes there.
        let installs = self.spec.log_dir.parent().map(|h| h.join("installs"));
        let in_install = installs.is_some_and(|dir| {
            let dir = dir.to_string_lossy();
            tail.iter().any(|l| l.contains(&*dir))
        });
        let next = match contained.profile.suggest_grant(workspace, tail) {
            _ if in_install => "it wrote inside the package yep installed for it, which stays read-only as approved: give it another place to write (an option or variable of the server's, `yep mcp add --env`) and grant that".to_string(),
            Some(grant) => format!(
                "if the denial is the sandbox's, `yep grant {name} {}` allows it",
                crate::text::escape(&grant)
            ),
            None if learnable => {
                format!("`yep doctor {name} --sandbox-learn` shows what it reaches for beyond that")
            }
            None => "its log says what it was denied; `yep grant` gives it more".to_string(),
        };
        format!(
            "; it ran in the sandbox, which {allowed} (docs/sandbox.md): {next}, and `YEP_SANDBOX=off` runs it without"
        )
    }

    fn spawn_error(&self, error: std::io::Error) -> ExtensionError {
        // A whole command line (`go run .`) names no program: nothing splits it and no shell
        // runs it, so say how it is written. A zot `exec` relative to the package was joined
        // to it: the fix names it as the manifest does.
        let fix = (error.kind() == std::io::ErrorKind::NotFound)
            .then(|| {
                let written = std::path::Path::new(&self.spec.command)
                    .strip_prefix(&self.spec.package_dir)
                    .map_or_else(
                        |_| self.spec.command.clone(),
                        |rel| rel.to_string_lossy().into_owned(),
                    );
                let key = self.opts.dialect.command_key();
                let fix = crate::store::manifest::command_line_fix(key, &written, &self.spec.args)?;
                Some(format!(
                    "it is a whole command line, and a command is one program, run with no shell and never split: put the program alone in `{key}` and the rest in `args`: {fix}"
                ))
            })
            .flatten()
            .or_else(|| self.opts.dialect.spawn_fix().map(String::from));
        ExtensionError::Spawn {
            extension: self.spec.name.clone(),
            command: self.spec.command.clone(),
            error,
            fix,
            log_path: self.spec.log_path(),
        }
    }

    pub(super) async fn start(&self) -> Result<Arc<Live>, ExtensionError> {
        let spec = &self.spec;
        let (config, env) = self
            .inputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let workspace = self
            .workspace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (streams, process) = self.open_streams(&workspace, env)?;
        if let Some(contained) = process.as_ref().and_then(|p| p.sandbox.as_ref()) {
            self.tell_sandbox_gaps(contained);
        }
        let pid = process.as_ref().and_then(ServerProcess::pid);
        let hello = self.hello(&workspace, config);
        let conn_opts = ConnectionOptions {
            label: spec.name.clone(),
            max_frame_bytes: self.opts.max_frame_bytes,
            spin: self.opts.spin,
            tap: self.opts.tap.clone(),
            ..ConnectionOptions::default()
        };
        let opened = self
            .opts
            .dialect
            .open(streams, hello, Arc::clone(&self.events), conn_opts)
            .await;
        match opened {
            Ok(peer) => Ok(self.started(peer, process, pid)),
            // A server its dialect wants started again (an MCP server that left rather than
            // answer `server/discover`) is, once: its dialect now knows how to speak to it.
            Err(HandshakeError::RestartWanted) => {
                if let Some(proc_) = &process
                    && proc_.wait_for_exit(Duration::from_secs(1)).await.is_none()
                {
                    let _ = proc_.terminate(Duration::from_millis(100)).await;
                }
                tracing::debug!(extension = %spec.name, wire = self.opts.dialect.name(), "started again, as its first start asked");
                Box::pin(self.start()).await
            }
            Err(error) => Err(self
                .handshake_failed(error, process.as_ref(), &workspace)
                .await),
        }
    }

    /// The server's streams: from the transport, or from the spec's command spawned in
    /// `workspace` with `env` (then its process too).
    #[allow(clippy::result_large_err)] // the same error type as every call here
    fn open_streams(
        &self,
        workspace: &std::path::Path,
        env: Vec<(String, String)>,
    ) -> Result<(Streams, Option<ServerProcess>), ExtensionError> {
        let spec = &self.spec;
        Ok(match &self.opts.transport {
            Some(transport) => (transport.open(spec).map_err(|e| self.spawn_error(e))?, None),
            None => {
                let spawned = process::spawn(&spec.spawn_spec(
                    workspace,
                    env,
                    &self.opts,
                    Some(self.denied_sink()),
                ))
                .map_err(|e| self.spawn_error(e.source))?;
                let streams = Streams::Pipe {
                    stdout: spawned.stdout,
                    stdin: spawned.stdin,
                };
                (streams, Some(spawned.process))
            }
        })
    }

    /// Tell what a spawned server's sandbox leaves out, or keeps from it, on the health
    /// stream.
    fn tell_sandbox_gaps(&self, contained: &Containment) {
        let spec = &self.spec;
        // Never silently less contained than asked: what the kernel left out is told (once a
        // session: the same words for every server).
        if !contained.missing.is_empty() {
            self.events.health(HealthEvent::Warning {
                extension: None,
                message: format!(
                    "sandbox (best-effort): this system cannot enforce {}, so servers run without it; `sandbox = \"required\"` in settings.toml refuses to start them instead",
                    contained.missing.join(", ")
                ),
            });
        }
        // A workspace kept out of the sandbox is told the same way, once.
        if let Some((workspace, why)) = contained.profile.withheld.as_ref() {
            self.events.health(HealthEvent::Warning {
                extension: None,
                message: format!(
                    "sandbox: the workspace {} {why}, so no server may read it; start the agent in a project directory, or grant a server the directory it needs (`yep grant <name> read:<dir>`)",
                    crate::text::escape(&workspace.display().to_string())
                ),
            });
        }
        // A zot extension's `.zot` that could not be opened is told, with why.
        if let Some((dir, why)) = contained.profile.files_withheld.as_ref() {
            let name = crate::text::escape(spec.grant_name.as_ref().unwrap_or(&spec.name));
            let dir = crate::text::escape(&dir.display().to_string()).into_owned();
            self.events.health(HealthEvent::Warning {
                extension: Some(spec.name.clone()),
                message: format!(
                    "sandbox: `{name}` may not keep files in {dir}, which {why}: only a directory of regular files is opened (what a directory or link in it holds, other code may read or run, as zot runs `.zot/extensions/`); `yep grant {name} write:{dir}` lets it write all of it"
                ),
            });
        }
        self.tell_missing_grants();
    }

    /// A granted path that names nothing opens nothing (the sandbox's rules are on what
    /// exists): never silently.
    fn tell_missing_grants(&self) {
        let spec = &self.spec;
        let grants = &spec.sandbox_grants;
        let name = crate::text::escape(spec.grant_name.as_ref().unwrap_or(&spec.name));
        for (kind, written) in grants
            .read
            .iter()
            .map(|p| ("read", p))
            .chain(grants.write.iter().map(|p| ("write", p)))
        {
            let missing = yep_sandbox::grant_path(written)
                .is_some_and(|p| std::fs::symlink_metadata(p).is_err());
            if missing {
                self.events.health(HealthEvent::Warning {
                    extension: Some(spec.name.clone()),
                    message: format!(
                        "sandbox: `{name}` is granted `{kind}:{}`, which names nothing that exists, so it opens nothing; it takes effect at its next start once it exists (`yep grant {name} write:<dir>` makes a missing directory in your home)",
                        crate::text::escape(written)
                    ),
                });
            }
        }
    }

    /// What the host tells the server in its handshake, for a start in `workspace` with
    /// `config`.
    fn hello(&self, workspace: &std::path::Path, config: Value) -> Hello {
        let spec = &self.spec;
        Hello {
            extension: spec.name.clone(),
            session_id: spec.session_id.clone(),
            workspace_root: workspace.to_string_lossy().into_owned(),
            config,
            grants: spec.grants,
            timeout: self.opts.handshake_timeout,
            package_dir: spec.package_dir.to_string_lossy().into_owned(),
            data_dir: spec
                .data_dir
                .as_deref()
                .unwrap_or(&spec.package_dir)
                .to_string_lossy()
                .into_owned(),
            interactive_ui: self.opts.interactive_ui,
            slow_start: crate::launcher::slow_start(&spec.command, &spec.args),
        }
    }

    /// A server that shook hands, live: its process's exit watched, so its connection closes
    /// when it goes.
    fn started(
        &self,
        peer: Arc<dyn Peer>,
        process: Option<ServerProcess>,
        pid: Option<u32>,
    ) -> Arc<Live> {
        let spec = &self.spec;
        let offered = &peer.offer().name;
        if !offered.is_empty() && *offered != spec.name && self.opts.dialect.names_its_package() {
            tracing::warn!(extension = %spec.name, "server calls itself `{offered}`; the manifest name wins");
        }
        tracing::debug!(extension = %spec.name, pid, wire = self.opts.dialect.name(), "started");
        // A server that dies while something else holds its stdout open never sends
        // EOF; its exit closes the connection instead (after a moment, so an answer it
        // wrote just before exiting is still read).
        if let Some(proc_) = &process {
            let exited = proc_.on_exit();
            let watched = Arc::clone(&peer);
            tokio::spawn(async move {
                exited.await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                watched.close(CloseReason::ProcessExited);
            });
        }
        Arc::new(Live {
            peer,
            process,
            pid,
            crash_counted: AtomicBool::new(false),
        })
    }

    /// The error of a start whose handshake failed, with the process's exit status (it is
    /// ended if it still runs), its last stderr lines and its log.
    async fn handshake_failed(
        &self,
        error: HandshakeError,
        process: Option<&ServerProcess>,
        workspace: &std::path::Path,
    ) -> ExtensionError {
        let spec = &self.spec;
        let (status, stderr_tail, log_path) = match process {
            Some(proc_) => {
                // An exit before the handshake is reaped for up to a second.
                let status = match proc_.wait_for_exit(Duration::from_secs(1)).await {
                    Some(status) => describe_status(Some(status)),
                    None => {
                        let _ = proc_.terminate(Duration::from_millis(100)).await;
                        "killed after the failed handshake".to_string()
                    }
                };
                proc_.stderr.drained(Duration::from_millis(500)).await;
                let tail = proc_.stderr.lines();
                let status = status + &self.sandbox_note(proc_, &tail);
                (status, tail, proc_.log_path.clone())
            }
            None => ("not a process".into(), Vec::new(), spec.log_path()),
        };
        ExtensionError::Handshake {
            extension: spec.name.clone(),
            error,
            ran: spec.ran(workspace),
            status,
            stderr_tail,
            log_path,
        }
    }
}
