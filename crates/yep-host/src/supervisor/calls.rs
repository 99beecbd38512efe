//! Calls on an extension's server, each settled the same way: a failure names the extension,
//! and a server gone away says its exit status and last words.

use super::denied::DeniedCall;
use super::error::ExtensionError;
use super::extension::{Extension, Live};
use crate::capability::{ToolCall, ToolResult};
use crate::dialect::{Peer, PeerError, PeerFailure, PeerFuture};
use crate::health::HealthEvent;
use crate::process::describe_status;
use crate::rpc::{CallError, CloseReason, UpdateSink};
use crate::tool_args::ArgsError;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl Extension {
    /// Turn a call failure into the error the caller sees; a closed connection means the
    /// process is gone (or is made to be), and counts as one failure.
    async fn call_failed(&self, live: &Live, err: PeerError) -> ExtensionError {
        let extension = self.spec.name.clone();
        let method = err.method;
        let err = match err.failure {
            PeerFailure::Call(err) => err,
            PeerFailure::Malformed { message, preview } => {
                return ExtensionError::Malformed {
                    extension,
                    method,
                    message,
                    preview,
                };
            }
        };
        match err {
            CallError::Remote(mut error) => {
                // A denial it answers with (`EACCES: permission denied, open '/x'`) may be the
                // sandbox's: said so, with the grant that lets it through.
                if let Some(process) = &live.process {
                    let note = self.sandbox_note(process, std::slice::from_ref(&error.message));
                    if let Some(note) = note.strip_prefix("; ") {
                        error.message = format!("{} ({note})", error.message);
                    }
                }
                ExtensionError::Remote {
                    extension,
                    method,
                    error,
                }
            }
            CallError::Cancelled => ExtensionError::Cancelled { extension, method },
            CallError::Timeout { after, .. } => ExtensionError::Timeout {
                extension,
                method,
                after,
            },
            CallError::Write(message) => {
                // A broken pipe usually means the server died; the reader says so shortly.
                let closed =
                    tokio::time::timeout(Duration::from_millis(500), live.peer.closed()).await;
                if closed.is_err() {
                    return ExtensionError::Write {
                        extension,
                        method,
                        message,
                    };
                }
                self.exited(live, method).await
            }
            CallError::Closed(_) => self.exited(live, method).await,
        }
    }

    /// The error for a call whose server went away, with its exit status and last words. The
    /// first such error per process counts as one failure (unless the host stopped it).
    async fn exited(&self, live: &Live, method: String) -> ExtensionError {
        let extension = self.spec.name.clone();
        let reason = live.peer.closed().await;
        if self.is_closed() && reason == CloseReason::Shutdown {
            return self.shut_down();
        }
        let (status, stderr_tail, log_path) = self.last_words(live).await;
        let err = ExtensionError::Exited {
            extension,
            method,
            reason,
            status,
            stderr_tail,
            log_path,
        };
        if !live.crash_counted.swap(true, Ordering::Relaxed) {
            self.note_failure();
            self.events.health(HealthEvent::Failed {
                extension: self.spec.name.clone(),
                message: err.to_string(),
                log: err.log_path().map(PathBuf::from),
            });
        }
        err
    }

    /// The exit status, last stderr lines and log of a server whose connection closed.
    pub(super) async fn last_words(&self, live: &Live) -> (String, Vec<String>, PathBuf) {
        match &live.process {
            Some(proc_) => {
                let status = match proc_.wait_for_exit(Duration::from_secs(1)).await {
                    Some(status) => Some(status),
                    // Still running (e.g. it broke the frame cap): it is of no use now.
                    None => proc_.terminate(Duration::from_millis(100)).await,
                };
                proc_.stderr.drained(Duration::from_millis(500)).await;
                let tail = proc_.stderr.lines();
                (
                    describe_status(status) + &self.sandbox_note(proc_, &tail),
                    tail,
                    proc_.log_path.clone(),
                )
            }
            None => ("not a process".into(), Vec::new(), self.spec.log_path()),
        }
    }

    /// Note a call's outcome: a success clears the failure count. Either way the call was a
    /// use: a long call ends with the server just used, not idle since it began.
    async fn settle<T>(&self, live: &Live, res: Result<T, PeerError>) -> Result<T, ExtensionError> {
        self.touch();
        match res {
            Ok(v) => {
                if self.failures.load(Ordering::Relaxed) != 0 {
                    self.failures.store(0, Ordering::Relaxed);
                }
                Ok(v)
            }
            Err(err) => Err(self.call_failed(live, err).await),
        }
    }

    /// Ask the live server (started if none runs) with `ask`, given its [`Peer`] and the
    /// per-request timeout, and settle the answer as every call here is: a failure names the
    /// extension, and a server gone away says its exit status and last words. A [`Peer`]
    /// method returns its future boxed already, so `ask` adds no allocation of its own.
    pub async fn with_peer<T>(
        &self,
        ask: impl for<'p> FnOnce(&'p dyn Peer, Duration) -> PeerFuture<'p, Result<T, PeerError>>,
    ) -> Result<T, ExtensionError> {
        let live = self.live().await?;
        let res = ask(live.peer.as_ref(), self.opts.request_timeout).await;
        self.settle(&live, res).await
    }

    /// [`Extension::with_peer`] on the server that runs now; `None` when none does (nothing
    /// is started, nothing sent).
    pub(crate) async fn with_running_peer<T>(
        &self,
        ask: impl for<'p> FnOnce(&'p dyn Peer, Duration) -> PeerFuture<'p, Result<T, PeerError>>,
    ) -> Result<Option<T>, ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(None);
        };
        let res = ask(live.peer.as_ref(), self.opts.request_timeout).await;
        self.settle(&live, res).await.map(Some)
    }

    /// Whether `args` satisfy `tool`'s declared schema
    /// ([`ServerSpec::tool_schemas`](super::ServerSpec::tool_schemas)).
    // The same error type as every call here; the `Ok` path, the hot one, moves nothing.
    #[allow(clippy::result_large_err)]
    pub fn check_args(&self, tool: &str, args: &Value) -> Result<(), ExtensionError> {
        self.spec
            .tool_schemas
            .check(tool, args)
            .map_err(|e| match e {
                ArgsError::Invalid(problems) => ExtensionError::InvalidArguments {
                    extension: self.spec.name.clone(),
                    tool: tool.to_string(),
                    problems,
                },
                ArgsError::BadSchema(message) => ExtensionError::InvalidSchema {
                    extension: self.spec.name.clone(),
                    tool: tool.to_string(),
                    message,
                },
            })
    }

    /// Call a tool. Arguments that break its declared schema are refused here, before the
    /// server is started or sent anything. Progress goes to `updates` and resets the timeout;
    /// firing `cancel` cancels on the wire and resolves the call as cancelled. Dropping the
    /// future does too.
    pub async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<ToolResult, ExtensionError> {
        self.check_args(tool, &args)?;
        let live = self.live().await?;
        self.send_tool_call(
            &live,
            ToolCall {
                tool: tool.to_string(),
                args,
                updates,
                cancel,
                chain: Vec::new(),
            },
        )
        .await
    }

    /// A tool call on `live`, for a caller that already ran [`Extension::check_args`].
    pub(crate) async fn send_tool_call(
        &self,
        live: &Live,
        call: ToolCall,
    ) -> Result<ToolResult, ExtensionError> {
        // Kept, should its failure be a denial, for `yep doctor --sandbox-learn` to replay.
        let sandboxed = live.process.as_ref().is_some_and(|p| p.sandbox.is_some());
        let kept = sandboxed.then(|| (call.tool.clone(), call.args.clone()));
        let denials = self.denials.load(Ordering::Relaxed);
        let res = live.peer.call_tool(call, self.opts.request_timeout).await;
        let res = self.settle(live, res).await;
        if let (Err(_), Some((tool, args))) = (&res, kept)
            && self.denials.load(Ordering::Relaxed) != denials
        {
            let call = DeniedCall {
                tool,
                args,
                too_big: false,
            };
            call.keep(&self.spec.log_dir, &self.spec.name);
        }
        res
    }

    /// Run in `root` from the next start on.
    pub(crate) fn set_workspace(&self, root: PathBuf) {
        *self.workspace.lock().unwrap_or_else(|p| p.into_inner()) = root;
    }

    /// Use this config and env from the next start on.
    pub(crate) fn set_inputs(&self, config: Value, env: Vec<(String, String)>) {
        *self.inputs.lock().unwrap_or_else(|p| p.into_inner()) = (config, env);
    }
}
