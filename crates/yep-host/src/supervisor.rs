//! One extension's server: spawned on first use, handshaken, respawned after a crash with
//! exponential backoff between failed starts, stopped gracefully.
//!
//! Every error names the extension; process failures add the exit status, the last stderr
//! lines and the log file's path.

use crate::dialect::yep::{EventRouter, Events, HandshakeError, handshake, initialize_params};
use crate::manifest::Manifest;
use crate::process::{self, ServerProcess, SpawnSpec, describe_status};
use crate::rpc::{CallError, CallOptions, CloseReason, Connection, ConnectionOptions, UpdateSink};
use crate::tool_args::{ArgsError, ToolSchemas};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use yep_protocol::methods::{
    COMMAND_EXECUTE, CONFIG_CHANGED, EXIT, HOOK_FIRE, PROMPT_CONTRIBUTION, SHUTDOWN, TOOL_CALL,
    TRACE_EVENT, WORKSPACE_CHANGED,
};
use yep_protocol::{
    CommandExecuteParams, CommandExecuteResult, ConfigChangedParams, ConfigChangedResult,
    ConfigStatus, ErrorCode, ErrorObject, HookDecision, HookFireParams, InitializeResult,
    PromptContribution, ToolCallParams, TraceEventParams, WorkspaceChangedParams,
};

/// How to run one extension's server.
#[derive(Clone)]
pub struct ServerSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The package directory; its `bin/` goes first on PATH.
    pub package_dir: PathBuf,
    /// The server's cwd and `initialize.workspace_root`.
    pub workspace_root: PathBuf,
    pub session_id: String,
    /// `initialize.config` (secrets already stripped).
    pub config: Value,
    /// Extra environment (injected secrets and `env`-mapped config).
    pub env: Vec<(String, String)>,
    /// Where `<name>.log` (the server's stderr) is written.
    pub log_dir: PathBuf,
    /// What the manifest lets the server push back at the user.
    pub grants: Grants,
    /// The manifest's tool argument schemas, compiled: every `tool/call` is checked against
    /// them before it is sent. Empty (the default) checks nothing.
    pub tool_schemas: ToolSchemas,
}

/// Server → host facets the manifest must declare before the host honours them (D4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// `ui_ask`: the server may ask the user questions. Otherwise `ui/ask` is answered
    /// `cancelled`.
    pub ui_ask: bool,
    /// `status`: the server may push `status/changed`. Otherwise the push is only logged.
    pub status: bool,
}

impl Grants {
    /// Everything granted: for tests and tools that run a trusted server directly.
    pub const ALL: Grants = Grants {
        ui_ask: true,
        status: true,
    };

    pub fn from_manifest(manifest: &Manifest) -> Grants {
        Grants {
            ui_ask: manifest.yolop.ui_ask,
            status: manifest.yolop.status,
        }
    }
}

/// Env values can be secrets: Debug shows their names only.
impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("package_dir", &self.package_dir)
            .field("workspace_root", &self.workspace_root)
            .field("session_id", &self.session_id)
            .field("config", &self.config)
            .field("env", &process::redacted_env(&self.env))
            .field("log_dir", &self.log_dir)
            .field("grants", &self.grants)
            .field("tool_schemas", &self.tool_schemas)
            .finish()
    }
}

impl ServerSpec {
    /// The spec a manifest describes, or `None` when it declares no capability server.
    pub fn from_manifest(
        manifest: &Manifest,
        package_dir: PathBuf,
        workspace_root: PathBuf,
        log_dir: PathBuf,
    ) -> Option<ServerSpec> {
        let server = manifest.yolop.capability_server.as_ref()?;
        Some(ServerSpec {
            name: manifest.name.clone(),
            command: server.command.clone(),
            args: server.args.clone(),
            package_dir,
            workspace_root,
            session_id: String::new(),
            config: Value::Null,
            env: Vec::new(),
            log_dir,
            grants: Grants::from_manifest(manifest),
            tool_schemas: ToolSchemas::from_manifest(manifest),
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_dir.join(format!("{}.log", self.name))
    }
}

/// Supervision tuning.
#[derive(Clone)]
pub struct SupervisorOptions {
    /// Per-request timeout (`request_timeout_ms`); tool progress resets it.
    pub request_timeout: Duration,
    /// How long `initialize` may take.
    pub handshake_timeout: Duration,
    /// Longest line accepted from the server.
    pub max_frame_bytes: usize,
    /// Each graceful-stop stage waits this long before escalating.
    pub grace: Duration,
    /// First delay after a failed start or crash; doubles per failure up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long a lone call busy-polls for its answer before sleeping (`YEP_SPIN_US`).
    pub spin: Duration,
    /// Sees every line on the wire (for `yep doctor`).
    pub tap: Option<crate::rpc::Tap>,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            request_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            max_frame_bytes: crate::rpc::DEFAULT_MAX_FRAME_BYTES,
            // Longer than the SDK's own one-second drain at EOF, so a well-behaved server
            // always finishes before it is signalled.
            grace: Duration::from_secs(3),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            spin: yep_protocol::framing::spin_from_env(),
            tap: None,
        }
    }
}

/// Why an extension call failed. Every variant names the extension.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    #[error(
        "extension `{extension}`: cannot spawn `{command}`: {source} (install it, or fix capabilityServer.command)"
    )]
    Spawn {
        extension: String,
        command: String,
        source: std::io::Error,
    },
    #[error(
        "extension `{extension}`: handshake failed: {source}{}",
        report(Some(status), stderr_tail, log_path)
    )]
    Handshake {
        extension: String,
        source: HandshakeError,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    #[error(
        "extension `{extension}` server stopped during `{method}`: {reason} ({status}){}",
        report(None, stderr_tail, log_path)
    )]
    Exited {
        extension: String,
        method: String,
        reason: CloseReason,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    #[error("extension `{extension}`: `{method}` failed: {}", crate::text::escape(&error.message))]
    Remote {
        extension: String,
        method: String,
        error: ErrorObject,
    },
    #[error("extension `{extension}`: `{method}` timed out after {} ms", after.as_millis())]
    Timeout {
        extension: String,
        method: String,
        after: Duration,
    },
    #[error("extension `{extension}`: `{method}` cancelled")]
    Cancelled { extension: String, method: String },
    #[error("extension `{extension}`: not restarting yet after {failures} failed starts; retry in {} ms", retry_in.as_millis())]
    BackingOff {
        extension: String,
        failures: u32,
        retry_in: Duration,
    },
    #[error(
        "extension `{extension}`: `{method}` answered a malformed result ({message}): {}",
        crate::text::escape(preview)
    )]
    Malformed {
        extension: String,
        method: String,
        message: String,
        preview: String,
    },
    #[error("extension `{extension}`: invalid arguments for tool `{tool}`: {}", problems.join("; "))]
    InvalidArguments {
        extension: String,
        tool: String,
        /// One per problem, each naming the field and the rule (already escaped).
        problems: Vec<String>,
    },
    #[error(
        "extension `{extension}`: refusing tool `{tool}`: its argument schema in plugin.json is not valid JSON Schema: {message}"
    )]
    InvalidSchema {
        extension: String,
        tool: String,
        message: String,
    },
    #[error("extension `{extension}`: failed to write `{method}`: {message}")]
    Write {
        extension: String,
        method: String,
        message: String,
    },
}

impl ExtensionError {
    /// Whether this is the cancelled outcome of a call the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ExtensionError::Cancelled { .. })
            || matches!(self, ExtensionError::Remote { error, .. } if error.is_cancelled())
    }

    /// The server's own error object, when it answered with one.
    pub fn remote(&self) -> Option<&ErrorObject> {
        match self {
            ExtensionError::Remote { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The delay before the next start after `failures` consecutive failures: `base`, doubling
/// per failure, capped at `max`.
pub fn backoff_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    base.saturating_mul(1u32 << (failures - 1).min(16)).min(max)
}

/// The first 200 characters of a JSON value, for error messages.
fn preview(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

fn report(status: Option<&String>, tail: &[String], log_path: &std::path::Path) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if let Some(status) = status {
        let _ = write!(out, " ({status})");
    }
    let _ = write!(out, "; log: {}", log_path.display());
    if !tail.is_empty() {
        out.push_str("\nlast stderr lines:");
        for line in tail {
            let _ = write!(out, "\n  {}", crate::text::escape(line));
        }
    }
    out
}

/// A started server: its connection, process and handshake.
pub struct Live {
    conn: Connection,
    process: ServerProcess,
    pid: Option<u32>,
    pub init: InitializeResult,
    crash_counted: AtomicBool,
}

/// One extension's server under supervision.
pub struct Extension {
    spec: ServerSpec,
    opts: SupervisorOptions,
    events: Arc<dyn Events>,
    current: Mutex<Option<Arc<Live>>>,
    /// Serialises starts so concurrent first calls share one spawn.
    starting: tokio::sync::Mutex<()>,
    failures: AtomicU32,
    last_failure: Mutex<Option<Instant>>,
    next_call: AtomicU64,
    /// `initialize.config` and the injected env for the next start (config can change live).
    inputs: Mutex<(Value, Vec<(String, String)>)>,
    /// Closed for good (the host shut down): nothing may start it again.
    closed: AtomicBool,
}

impl Extension {
    pub fn new(spec: ServerSpec, opts: SupervisorOptions, events: Arc<dyn Events>) -> Extension {
        let inputs = Mutex::new((spec.config.clone(), spec.env.clone()));
        Extension {
            closed: AtomicBool::new(false),
            inputs,
            spec,
            opts,
            events,
            current: Mutex::new(None),
            starting: tokio::sync::Mutex::new(()),
            failures: AtomicU32::new(0),
            last_failure: Mutex::new(None),
            next_call: AtomicU64::new(1),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    pub fn log_path(&self) -> PathBuf {
        self.spec.log_path()
    }

    /// The running server's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.live_now().and_then(|l| l.pid)
    }

    /// How many starts or runs failed in a row.
    pub fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    fn live_now(&self) -> Option<Arc<Live>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.as_ref().filter(|l| !l.conn.is_closed()).cloned()
    }

    /// The delay owed before the next start, given the failures so far.
    fn backoff(&self) -> Option<Duration> {
        let failures = self.failures();
        let last = (*self.last_failure.lock().unwrap_or_else(|p| p.into_inner()))?;
        if failures == 0 {
            return None;
        }
        backoff_delay(self.opts.backoff_base, self.opts.backoff_max, failures)
            .checked_sub(last.elapsed())
    }

    fn note_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Stop the server and refuse to start it again (the session is over). A start in
    /// progress is not waited for: it sees the flag and discards its server itself.
    pub async fn close(&self) -> Option<String> {
        self.closed.store(true, Ordering::Release);
        let _start = self.starting.try_lock().ok()?;
        self.stop_current().await
    }

    /// The live server, started (with its handshake) if none runs.
    pub async fn live(&self) -> Result<Arc<Live>, ExtensionError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ExtensionError::Write {
                extension: self.spec.name.clone(),
                method: "start".into(),
                message: "the host shut this extension down".into(),
            });
        }
        if let Some(live) = self.live_now() {
            return Ok(live);
        }
        let _start = self.starting.lock().await;
        if let Some(live) = self.live_now() {
            return Ok(live);
        }
        if let Some(wait) = self.backoff() {
            if wait > self.opts.request_timeout {
                return Err(ExtensionError::BackingOff {
                    extension: self.spec.name.clone(),
                    failures: self.failures(),
                    retry_in: wait,
                });
            }
            tracing::info!(extension = %self.spec.name, "waiting {} ms before restarting after {} failures", wait.as_millis(), self.failures());
            tokio::time::sleep(wait).await;
        }
        match self.start().await {
            Ok(live) if self.closed.load(Ordering::Acquire) => {
                // Closed while this start ran: the new server goes straight away.
                live.crash_counted.store(true, Ordering::Relaxed);
                live.conn.close(CloseReason::Shutdown);
                Err(ExtensionError::Write {
                    extension: self.spec.name.clone(),
                    method: "start".into(),
                    message: "the host shut this extension down".into(),
                })
            }
            Ok(live) => {
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&live));
                Ok(live)
            }
            Err(err) => {
                self.note_failure();
                Err(err)
            }
        }
    }

    /// The handshake result, starting the server if needed.
    pub async fn handshake(&self) -> Result<InitializeResult, ExtensionError> {
        Ok(self.live().await?.init.clone())
    }

    async fn start(&self) -> Result<Arc<Live>, ExtensionError> {
        let spec = &self.spec;
        let spawn_spec = SpawnSpec {
            program: spec.command.clone(),
            args: spec.args.clone(),
            cwd: spec.workspace_root.clone(),
            bin_dir: Some(spec.package_dir.join("bin")),
            env: self
                .inputs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .1
                .clone(),
            log_path: spec.log_path(),
        };
        let spawned = process::spawn(&spawn_spec).map_err(|e| ExtensionError::Spawn {
            extension: spec.name.clone(),
            command: spec.command.clone(),
            source: e.source,
        })?;
        let proc_ = spawned.process;
        let pid = proc_.pid();
        let router = Arc::new(EventRouter {
            extension: spec.name.clone(),
            events: Arc::clone(&self.events),
            grants: spec.grants,
        });
        let conn = Connection::start_pipe(
            spawned.stdout,
            spawned.stdin,
            router,
            ConnectionOptions {
                label: spec.name.clone(),
                max_frame_bytes: self.opts.max_frame_bytes,
                spin: self.opts.spin,
                tap: self.opts.tap.clone(),
                ..ConnectionOptions::default()
            },
        )
        .map_err(|source| ExtensionError::Spawn {
            extension: spec.name.clone(),
            command: spec.command.clone(),
            source,
        })?;
        let params = initialize_params(
            &spec.session_id,
            &spec.workspace_root.to_string_lossy(),
            self.inputs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .clone(),
            spec.grants,
        );
        match handshake(&conn, &params, self.opts.handshake_timeout).await {
            Ok(init) => {
                if !init.name.is_empty() && init.name != spec.name {
                    tracing::warn!(extension = %spec.name, "server calls itself `{}`; the manifest name wins", init.name);
                }
                tracing::debug!(extension = %spec.name, pid, "started");
                // A server that dies while something else holds its stdout open never sends
                // EOF; its exit closes the connection instead (after a moment, so an answer it
                // wrote just before exiting is still read).
                let exited = proc_.on_exit();
                let watched = conn.clone();
                tokio::spawn(async move {
                    exited.await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    watched.close(CloseReason::ProcessExited);
                });
                Ok(Arc::new(Live {
                    conn,
                    process: proc_,
                    pid,
                    init,
                    crash_counted: AtomicBool::new(false),
                }))
            }
            Err(source) => {
                conn.close(CloseReason::Shutdown);
                let status = match proc_.wait_for_exit(Duration::from_millis(200)).await {
                    Some(status) => describe_status(Some(status)),
                    None => {
                        let _ = proc_.terminate(Duration::from_millis(100)).await;
                        "killed after the failed handshake".to_string()
                    }
                };
                proc_.stderr.drained(Duration::from_millis(500)).await;
                Err(ExtensionError::Handshake {
                    extension: spec.name.clone(),
                    source,
                    status,
                    stderr_tail: proc_.stderr.lines(),
                    log_path: proc_.log_path.clone(),
                })
            }
        }
    }

    /// Turn a call failure into the error the caller sees; a closed connection means the
    /// process is gone (or is made to be), and counts as one failure.
    async fn call_failed(&self, live: &Live, method: &str, err: CallError) -> ExtensionError {
        let extension = self.spec.name.clone();
        match err {
            CallError::Remote(error) => ExtensionError::Remote {
                extension,
                method: method.into(),
                error,
            },
            CallError::Cancelled => ExtensionError::Cancelled {
                extension,
                method: method.into(),
            },
            CallError::Timeout { after, .. } => ExtensionError::Timeout {
                extension,
                method: method.into(),
                after,
            },
            CallError::Write(message) => {
                // A broken pipe usually means the server died; the reader says so shortly.
                let closed =
                    tokio::time::timeout(Duration::from_millis(500), live.conn.closed()).await;
                if closed.is_err() {
                    return ExtensionError::Write {
                        extension,
                        method: method.into(),
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
    async fn exited(&self, live: &Live, method: &str) -> ExtensionError {
        let extension = self.spec.name.clone();
        let reason = live.conn.closed().await;
        let proc_ = &live.process;
        let status = match proc_.wait_for_exit(Duration::from_secs(1)).await {
            Some(status) => Some(status),
            // Still running (e.g. it broke the frame cap): it is of no use now.
            None => proc_.terminate(Duration::from_millis(100)).await,
        };
        proc_.stderr.drained(Duration::from_millis(500)).await;
        if !live.crash_counted.swap(true, Ordering::Relaxed) {
            self.note_failure();
            tracing::warn!(
                extension,
                "server stopped: {reason} ({})",
                describe_status(status)
            );
        }
        ExtensionError::Exited {
            extension,
            method: method.into(),
            reason,
            status: describe_status(status),
            stderr_tail: proc_.stderr.lines(),
            log_path: proc_.log_path.clone(),
        }
    }

    /// Send a request to the (started) server and decode its result.
    async fn request<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: Option<&P>,
        opts: CallOptions,
    ) -> Result<R, ExtensionError> {
        let live = self.live().await?;
        match live.conn.call(method, params, opts).await {
            Ok(value) => {
                if self.failures.load(Ordering::Relaxed) != 0 {
                    self.failures.store(0, Ordering::Relaxed);
                }
                R::deserialize(&value).map_err(|e| ExtensionError::Malformed {
                    extension: self.spec.name.clone(),
                    method: method.into(),
                    message: e.to_string(),
                    preview: preview(&value),
                })
            }
            Err(err) => Err(self.call_failed(&live, method, err).await),
        }
    }

    fn timeout(&self) -> CallOptions {
        CallOptions::timeout(self.opts.request_timeout)
    }

    /// Send any request with the default timeout and return the raw result: for tools like
    /// `yep doctor` that probe a server beyond the typed calls.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Value, ExtensionError> {
        self.request(method, params, self.timeout()).await
    }

    /// Whether `args` satisfy `tool`'s declared schema ([`ServerSpec::tool_schemas`]).
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
    /// firing `cancel` sends `cancel` on the wire and resolves the call as cancelled.
    /// Dropping the future does too.
    pub async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<Value, ExtensionError> {
        self.check_args(tool, &args)?;
        self.send_tool_call(tool, args, updates, cancel).await
    }

    /// [`Extension::call_tool`] for a caller that already ran [`Extension::check_args`].
    pub(crate) async fn send_tool_call(
        &self,
        tool: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<Value, ExtensionError> {
        let params = ToolCallParams {
            tool_call_id: format!(
                "{}-{}",
                self.spec.name,
                self.next_call.fetch_add(1, Ordering::Relaxed)
            ),
            name: tool.to_string(),
            args,
        };
        let opts = CallOptions {
            timeout: Some(self.opts.request_timeout),
            updates: Some(updates.unwrap_or_else(|| Arc::new(|_: &str| {}))),
            cancel,
        };
        self.request(TOOL_CALL, Some(&params), opts).await
    }

    /// Fire a hook with its own timeout, clamped to the host maximum
    /// ([`crate::runtime::MAX_HOOK_TIMEOUT_MS`]).
    pub async fn fire_hook(
        &self,
        params: &HookFireParams,
        timeout: Duration,
    ) -> Result<HookDecision, ExtensionError> {
        let timeout = timeout.min(Duration::from_millis(crate::runtime::MAX_HOOK_TIMEOUT_MS));
        self.request(HOOK_FIRE, Some(params), CallOptions::timeout(timeout))
            .await
    }

    /// Ask for the dynamic prompt contribution, giving up after `timeout`.
    pub async fn prompt_contribution_within(
        &self,
        timeout: Duration,
    ) -> Result<PromptContribution, ExtensionError> {
        self.request::<(), _>(PROMPT_CONTRIBUTION, None, CallOptions::timeout(timeout))
            .await
    }

    /// Ask for the dynamic prompt contribution.
    pub async fn prompt_contribution(&self) -> Result<PromptContribution, ExtensionError> {
        self.request::<(), _>(PROMPT_CONTRIBUTION, None, self.timeout())
            .await
    }

    /// Run a slash command.
    pub async fn execute_command(
        &self,
        name: &str,
        arguments: &str,
    ) -> Result<CommandExecuteResult, ExtensionError> {
        let params = CommandExecuteParams {
            name: name.into(),
            arguments: arguments.into(),
        };
        self.request(COMMAND_EXECUTE, Some(&params), self.timeout())
            .await
    }

    /// Use this config and env from the next start on.
    pub fn set_inputs(&self, config: Value, env: Vec<(String, String)>) {
        *self.inputs.lock().unwrap_or_else(|p| p.into_inner()) = (config, env);
    }

    /// Push new config. A server that does not know `config/changed` (-32601) needs a restart.
    pub async fn config_changed(&self, config: Value) -> Result<ConfigStatus, ExtensionError> {
        let params = ConfigChangedParams { config };
        match self
            .request::<_, Value>(CONFIG_CHANGED, Some(&params), self.timeout())
            .await
        {
            Ok(v) => Ok(ConfigChangedResult::from_wire(&v).status),
            Err(ExtensionError::Remote { error, .. })
                if error.code == ErrorCode::METHOD_NOT_FOUND =>
            {
                Ok(ConfigStatus::RestartRequired)
            }
            Err(err) => Err(err),
        }
    }

    /// Tell a running server the workspace moved. Nothing is sent when none runs.
    pub async fn workspace_changed(&self, root: &str) -> Result<(), ExtensionError> {
        self.notify_live(
            WORKSPACE_CHANGED,
            &WorkspaceChangedParams {
                workspace_root: root.into(),
            },
        )
        .await
    }

    /// Forward a trace event, starting the server if it is not running.
    pub async fn trace_event_started(
        &self,
        event: &TraceEventParams,
    ) -> Result<(), ExtensionError> {
        let live = self.live().await?;
        live.conn
            .notify(TRACE_EVENT, Some(event))
            .await
            .map_err(|e| ExtensionError::Write {
                extension: self.spec.name.clone(),
                method: TRACE_EVENT.into(),
                message: e.to_string(),
            })
    }

    /// Forward a trace event to a running server (never awaited by the server).
    pub async fn trace_event(&self, event: &TraceEventParams) -> Result<(), ExtensionError> {
        self.notify_live(TRACE_EVENT, event).await
    }

    async fn notify_live<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(());
        };
        live.conn
            .notify(method, Some(params))
            .await
            .map_err(|e| ExtensionError::Write {
                extension: self.spec.name.clone(),
                method: method.into(),
                message: e.to_string(),
            })
    }

    /// Graceful stop: `shutdown`, `exit`, close stdin, grace, SIGTERM, grace, SIGKILL, reap.
    /// Every step is bounded, so a server that stopped reading cannot hold it up. Returns the
    /// exit status, if a server was running. A later call starts a fresh server.
    pub async fn stop(&self) -> Option<String> {
        // Wait out a start in progress, so it cannot install a server after we return.
        let _start = self.starting.lock().await;
        self.stop_current().await
    }

    async fn stop_current(&self) -> Option<String> {
        let live = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        // Calls cut short by this stop are not crashes.
        live.crash_counted.store(true, Ordering::Relaxed);
        let grace = self.opts.grace;
        if !live.conn.is_closed() {
            let _ = live
                .conn
                .call::<()>(SHUTDOWN, None, CallOptions::timeout(grace))
                .await;
            let _ = tokio::time::timeout(grace, live.conn.notify::<()>(EXIT, None)).await;
        }
        let _ = tokio::time::timeout(grace, live.conn.close_write()).await;
        let status = live.process.terminate(grace).await;
        live.conn.close(CloseReason::Shutdown);
        // Its last words are in the log by the time a stop returns.
        live.process
            .stderr
            .drained(Duration::from_millis(500))
            .await;
        Some(describe_status(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_failure_up_to_the_cap() {
        let (base, max) = (Duration::from_millis(250), Duration::from_secs(30));
        let delays: Vec<_> = (0..10)
            .map(|n| backoff_delay(base, max, n).as_millis())
            .collect();
        assert_eq!(
            delays,
            [0, 250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        assert_eq!(backoff_delay(base, max, 400), max);
    }
}
