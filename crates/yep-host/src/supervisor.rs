//! One extension's server, lifecycle only: spawned through [`crate::process`] on first use,
//! opened by its dialect, respawned after a crash with exponential backoff between failed
//! starts, stopped gracefully, and stopped when unused for a while if its host says so
//! ([`Extension::stop_if_idle`]). What goes over the wire is the dialect's ([`crate::dialect`]).
//!
//! Every error names the extension; process failures add the exit status, the last stderr
//! lines and the log file's path.

use crate::capability::{
    CommandResult, ConfigOutcome, Events, Granted, HookAnswer, HookFiring, Intercept,
    InterceptOutcome, Offer, PanelInput, RemoteError, ToolCall, ToolResult, TraceEvent,
};
use crate::dialect::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFailure, Streams};
use crate::health::HealthEvent;
use crate::manifest::{Grants, Manifest};
use crate::process::{self, ServerProcess, SpawnSpec, describe_status};
use crate::rpc::{CallError, CloseReason, ConnectionOptions, UpdateSink};
use crate::tool_args::{ArgsError, ToolSchemas};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How to run one extension's server.
#[derive(Clone)]
pub struct ServerSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The package directory; its `bin/` goes first on PATH.
    pub package_dir: PathBuf,
    /// The server's cwd (unless `cwd` is set) and `initialize.workspace_root`.
    pub workspace_root: PathBuf,
    /// A fixed cwd for the server (a zot extension runs in its own directory); `None` is the
    /// workspace.
    pub cwd: Option<PathBuf>,
    /// Where the server keeps its state, when its wire tells it (zot's `data_dir`); outside
    /// the package, so state never looks like tampering and survives an update.
    pub data_dir: Option<PathBuf>,
    /// The language the package says it is written in (zot's `language`), for errors.
    pub language: Option<String>,
    /// For a server with no static manifest (zot), what it was approved to register beyond
    /// tools and commands: the most its dialect honours. `None` when nothing was pinned.
    pub pin: Option<crate::store::zot::ZotPin>,
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
    /// What its approval grants beyond the sandbox's default profile.
    pub sandbox_grants: crate::manifest::SandboxGrants,
    /// The name `yep grant` knows it by, when not `name` (an MCP server's `name` is the stem
    /// of its log).
    pub grant_name: Option<String>,
}

/// A server's last tool call whose failure came with a sandbox denial: kept beside its log
/// (`<log dir>/<name>.denied.json`, owner-only, its arguments at most [`DeniedCall::MAX_ARGS`]
/// bytes), for `yep doctor --sandbox-learn` to make again outside the sandbox. Arguments may
/// be secret: nothing shows them.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeniedCall {
    /// The tool, by the server's own name for it.
    pub tool: String,
    /// Its arguments (`null` when they were too big to keep).
    #[serde(rename = "arguments")]
    pub args: Value,
    /// Its arguments were more than [`DeniedCall::MAX_ARGS`] bytes, so none were kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_big: bool,
}

/// Arguments can be secrets: Debug shows their size only.
impl std::fmt::Debug for DeniedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeniedCall")
            .field("tool", &self.tool)
            .field("args_bytes", &self.args.to_string().len())
            .finish()
    }
}

impl DeniedCall {
    /// The most bytes of arguments kept (and of a file read back).
    pub const MAX_ARGS: usize = 64 * 1024;

    /// Where server `name`'s last denied call is kept.
    pub fn path(log_dir: &std::path::Path, name: &str) -> PathBuf {
        log_dir.join(format!("{name}.denied.json"))
    }

    /// Keep it as server `name`'s last denied call. Best effort: a call never fails for it.
    pub fn keep(mut self, log_dir: &std::path::Path, name: &str) {
        if self.args.to_string().len() > DeniedCall::MAX_ARGS {
            self.args = Value::Null;
            self.too_big = true;
        }
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let path = DeniedCall::path(log_dir, name);
        let mode = crate::store::fsutil::MODE_PRIVATE;
        if let Err(e) = crate::store::fsutil::write_atomic(&path, &body, mode) {
            tracing::debug!("failed to keep the denied call of `{name}`: {e}");
        }
    }

    /// Server `name`'s last denied call, if one was kept and reads as one (the file is input:
    /// bounded, and a tool name that is not one is none).
    pub fn last(log_dir: &std::path::Path, name: &str) -> Option<DeniedCall> {
        use std::io::Read;
        let file = std::fs::File::open(DeniedCall::path(log_dir, name)).ok()?;
        let mut text = Vec::new();
        let limit = (DeniedCall::MAX_ARGS + 4096) as u64;
        file.take(limit + 1).read_to_end(&mut text).ok()?;
        if text.len() as u64 > limit {
            return None;
        }
        let call: DeniedCall = serde_json::from_slice(&text).ok()?;
        let valid = !call.tool.is_empty()
            && call.tool.len() <= 256
            && !call.tool.chars().any(char::is_control);
        valid.then_some(call)
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
            .field("cwd", &self.cwd)
            .field("data_dir", &self.data_dir)
            .field("language", &self.language)
            .field("pin", &self.pin)
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
    /// `command args`, run from `package_dir` in `workspace_root`, logging to `log_dir`: no
    /// config, env, grants or schema checks, which a caller adds as it needs.
    pub fn new(
        name: String,
        command: String,
        args: Vec<String>,
        package_dir: PathBuf,
        workspace_root: PathBuf,
        log_dir: PathBuf,
    ) -> ServerSpec {
        ServerSpec {
            name,
            command,
            args,
            package_dir,
            workspace_root,
            cwd: None,
            data_dir: None,
            language: None,
            pin: None,
            session_id: String::new(),
            config: Value::Null,
            env: Vec::new(),
            log_dir,
            grants: Grants::default(),
            tool_schemas: ToolSchemas::default(),
            sandbox_grants: Default::default(),
            grant_name: None,
        }
    }

    /// The spec a manifest describes, or `None` when it declares no capability server.
    pub fn from_manifest(
        manifest: &Manifest,
        package_dir: PathBuf,
        workspace_root: PathBuf,
        log_dir: PathBuf,
    ) -> Option<ServerSpec> {
        let server = manifest.yolop.capability_server.as_ref()?;
        let name = manifest.name.clone();
        let (command, args) = (server.command.clone(), server.args.clone());
        Some(ServerSpec {
            grants: Grants::from_manifest(manifest),
            tool_schemas: ToolSchemas::from_manifest(manifest),
            sandbox_grants: manifest.sandbox.clone(),
            ..ServerSpec::new(name, command, args, package_dir, workspace_root, log_dir)
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_dir.join(format!("{}.log", self.name))
    }

    /// How the supervisor spawns it in `workspace` with `env`: the one recipe, also for
    /// tools that talk to a server's raw stdio (`yep doctor --conformance`).
    pub fn spawn_spec(
        &self,
        workspace: &std::path::Path,
        env: Vec<(String, String)>,
        opts: &SupervisorOptions,
        on_denied: Option<process::DeniedSink>,
    ) -> SpawnSpec {
        SpawnSpec {
            program: self.command.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone().unwrap_or_else(|| workspace.to_path_buf()),
            bin_dir: Some(self.package_dir.join("bin")),
            env,
            log_path: self.log_path(),
            sandbox: Some(crate::process::Sandboxed {
                mode: opts.sandbox,
                package_dir: Some(self.package_dir.clone()),
                data_dir: self.data_dir.clone(),
                workspace: Some(workspace.to_path_buf()),
                // A zot extension (the one kind that says its language) keeps files of its
                // own in the workspace's `.zot`, as zot's scratchpad does.
                files: self
                    .language
                    .is_some()
                    .then(|| workspace.join(yep_sandbox::ZOT_FILES)),
                grants: self.sandbox_grants.clone(),
                name: self.grant_name.clone().unwrap_or_else(|| self.name.clone()),
                on_denied,
                tell_refused_hosts: false,
                learn: opts.learn.clone(),
            }),
        }
    }

    /// What runs and where, as startup errors say it: `` `cmd args` in DIR (language) ``.
    pub fn ran(&self, workspace: &std::path::Path) -> String {
        let line = std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let dir = self.cwd.as_deref().unwrap_or(workspace);
        let mut out = format!(
            "`{}` in {}",
            crate::text::escape(&line),
            crate::text::escape(&dir.display().to_string())
        );
        if let Some(language) = self.language.as_deref().filter(|l| !l.is_empty()) {
            out.push_str(&format!(" ({})", crate::text::escape(language)));
        }
        out
    }
}

/// Byte streams to a server that is not a child process (in memory, a socket): for embedders
/// and tests. The supervisor asks it instead of spawning the spec's command.
pub trait Transport: Send + Sync + 'static {
    fn open(&self, spec: &ServerSpec) -> std::io::Result<Streams>;
}

/// Supervision tuning.
#[derive(Clone)]
pub struct SupervisorOptions {
    /// The wire the server speaks.
    pub dialect: Arc<dyn Dialect>,
    /// Where the server's streams come from; `None` spawns the spec's command.
    pub transport: Option<Arc<dyn Transport>>,
    /// Per-request timeout (`request_timeout_ms`); tool progress resets it.
    pub request_timeout: Duration,
    /// How long `initialize` may take.
    pub handshake_timeout: Duration,
    /// Longest line accepted from the server.
    pub max_frame_bytes: usize,
    /// How long a stopping server gets to exit before SIGTERM.
    pub grace: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub term_wait: Duration,
    /// First delay after a failed start or crash; doubles per failure up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long a lone call busy-polls for its answer before sleeping (`YEP_SPIN_US`).
    pub spin: Duration,
    /// Sees every line on the wire (for `yep doctor`).
    pub tap: Option<crate::rpc::Tap>,
    /// A user is at an interactive UI (panels, questions): tools that wait on one may run.
    pub interactive_ui: bool,
    /// The OS sandbox a spawned server runs in ([`yep_sandbox`]).
    pub sandbox: yep_sandbox::Mode,
    /// Run it outside the sandbox under `strace`, to learn what it needs
    /// ([`yep_sandbox::learn`]; `yep doctor --sandbox-learn`).
    pub learn: Option<Arc<yep_sandbox::learn::Learning>>,
    /// The agent's tools as Claude Code's hooks know them (set from
    /// [`crate::runtime::HostOptions::claude_tool_names`]).
    pub claude_tool_names: crate::dialect::claude::ToolNames,
}

impl SupervisorOptions {
    /// The defaults, with the sandbox mode `home` asks for
    /// ([`crate::settings::sandbox_mode_or_required`]).
    pub fn for_home(home: &crate::store::Home) -> SupervisorOptions {
        SupervisorOptions {
            sandbox: crate::settings::sandbox_mode_or_required(home),
            ..SupervisorOptions::default()
        }
    }
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            dialect: Arc::new(crate::dialect::yep::Yep),
            transport: None,
            request_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            max_frame_bytes: crate::rpc::DEFAULT_MAX_FRAME_BYTES,
            // Longer than the SDK's own one-second drain at EOF, so a well-behaved server
            // always finishes before it is signalled.
            grace: Duration::from_secs(3),
            term_wait: Duration::from_secs(3),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            spin: yep_protocol::framing::spin_from_env(),
            tap: None,
            interactive_ui: false,
            sandbox: crate::settings::UNSET_MODE,
            learn: None,
            claude_tool_names: Default::default(),
        }
    }
}

/// Why an extension call failed. Every variant names the extension.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    #[error(
        "extension `{extension}`: cannot spawn `{}`: {error} ({}); log: {}",
        crate::text::escape(command),
        fix.as_deref().unwrap_or("install it, or fix the manifest's command"),
        log_path.display()
    )]
    Spawn {
        extension: String,
        command: String,
        /// Printed in the message, so not chained as a source (a cause is told once).
        error: std::io::Error,
        /// How to write the command when it is a whole command line (`go run .`) that names
        /// no program (escaped).
        fix: Option<String>,
        log_path: PathBuf,
    },
    #[error(
        "extension `{extension}`: handshake failed: {error} (ran {ran}){}",
        report(Some(status), stderr_tail, log_path)
    )]
    Handshake {
        extension: String,
        /// Printed in the message, so not chained as a source (a cause is told once).
        error: HandshakeError,
        /// What ran, where, and in which language when the package says.
        ran: String,
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
    /// It ended on its own while the host expected it to run until shut down (doctor, a zot
    /// extension's registration run).
    #[error(
        "extension `{extension}` ended before the host shut it down: {reason} ({status}){}",
        report(None, stderr_tail, log_path)
    )]
    EndedEarly {
        extension: String,
        reason: CloseReason,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    #[error("extension `{extension}`: `{method}` failed: {}", crate::text::escape(&error.message))]
    Remote {
        extension: String,
        method: String,
        error: RemoteError,
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
        "extension `{extension}`: `{method}` answered a malformed result ({}): {}",
        crate::text::escape(message),
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
    #[error("extension `{extension}`: the host shut this extension down")]
    ShutDown { extension: String },
}

impl ExtensionError {
    /// Whether this is the cancelled outcome of a call the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ExtensionError::Cancelled { .. })
            || matches!(self, ExtensionError::Remote { error, .. } if error.is_cancelled())
    }

    /// The extension it is about.
    pub fn extension(&self) -> &str {
        match self {
            ExtensionError::Spawn { extension, .. }
            | ExtensionError::Handshake { extension, .. }
            | ExtensionError::Exited { extension, .. }
            | ExtensionError::EndedEarly { extension, .. }
            | ExtensionError::Remote { extension, .. }
            | ExtensionError::Timeout { extension, .. }
            | ExtensionError::Cancelled { extension, .. }
            | ExtensionError::BackingOff { extension, .. }
            | ExtensionError::Malformed { extension, .. }
            | ExtensionError::InvalidArguments { extension, .. }
            | ExtensionError::InvalidSchema { extension, .. }
            | ExtensionError::Write { extension, .. }
            | ExtensionError::ShutDown { extension } => extension,
        }
    }

    /// The server's stderr log, when the error is about a process that ran.
    pub fn log_path(&self) -> Option<&std::path::Path> {
        match self {
            ExtensionError::Handshake { log_path, .. }
            | ExtensionError::Exited { log_path, .. }
            | ExtensionError::EndedEarly { log_path, .. }
            | ExtensionError::Spawn { log_path, .. } => Some(log_path),
            _ => None,
        }
    }

    /// The server's own error, when it answered with one.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            ExtensionError::Remote { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Nanoseconds on a clock that only moves forward, for when a server was last used: Linux's
/// coarse monotonic clock, which the vDSO reads without the timestamp counter (a tick's
/// resolution, a few ms, is plenty for idle stops of seconds or minutes, and two reads per
/// call of the precise clock were ~2% of a host's CPU under many calls at once); elsewhere,
/// or should that read fail, the time since `born`.
fn use_clock(born: Instant) -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill; the clock id is a constant
        // every Linux since 2.6.32 has.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
            return (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64);
        }
    }
    u64::try_from(born.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The delay before the next start after `failures` consecutive failures: `base`, doubling
/// per failure, capped at `max`.
pub fn backoff_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    base.saturating_mul(1u32 << (failures - 1).min(16)).min(max)
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

/// A started server: its peer (the dialect's view of it) and its process, if it is one.
pub struct Live {
    peer: Arc<dyn Peer>,
    process: Option<ServerProcess>,
    pid: Option<u32>,
    crash_counted: AtomicBool,
}

impl Live {
    /// What the server offered in its handshake.
    pub fn offer(&self) -> &Offer {
        self.peer.offer()
    }

    /// Whether it serves `tool` now (a tool registered after the handshake counts).
    pub fn serves(&self, tool: &str) -> bool {
        self.peer.serves(tool)
    }

    /// The dialect's live server, for conformance tools that look past the capability model.
    pub fn peer(&self) -> &Arc<dyn Peer> {
        &self.peer
    }

    fn is_closed(&self) -> bool {
        self.peer.close_reason().is_some()
    }
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
    /// Servers started so far: the next start after the first is a restart.
    starts: AtomicU32,
    last_failure: Mutex<Option<Instant>>,
    /// `initialize.config` and the injected env for the next start (config can change live).
    inputs: Mutex<(Value, Vec<(String, String)>)>,
    /// The cwd and workspace root for the next start (the workspace can move).
    workspace: Mutex<PathBuf>,
    /// Closed for good (the host shut down or deactivated it): nothing may start it again.
    closed: AtomicBool,
    /// What `last_used` counts from where there is no coarse clock ([`use_clock`]).
    born: Instant,
    /// When it was last used, on [`use_clock`] (at least 1); 0 for never. A use is
    /// [`Extension::live`] handing out the server, and a call on it finishing.
    last_used: AtomicU64,
    /// Its last server was stopped for want of use ([`Extension::stop_if_idle`]) and none has
    /// started since.
    idle_stopped: AtomicBool,
    /// Failures told as the sandbox's likely doing ([`Extension::sandbox_note`]) so far: a
    /// tool call whose failure adds one is kept as its last denied call ([`DeniedCall`]).
    denials: AtomicU64,
}

impl Extension {
    /// Tell the host's health stream something about this extension.
    pub(crate) fn report(&self, event: HealthEvent) {
        self.events.health(event);
    }

    /// `events` get what the server pushes, held to the spec's grants.
    pub fn new(spec: ServerSpec, opts: SupervisorOptions, events: Arc<dyn Events>) -> Extension {
        let inputs = Mutex::new((spec.config.clone(), spec.env.clone()));
        let events = Arc::new(Granted {
            grants: spec.grants,
            inner: events,
        });
        Extension {
            closed: AtomicBool::new(false),
            inputs,
            workspace: Mutex::new(spec.workspace_root.clone()),
            spec,
            opts,
            events,
            current: Mutex::new(None),
            starting: tokio::sync::Mutex::new(()),
            failures: AtomicU32::new(0),
            starts: AtomicU32::new(0),
            last_failure: Mutex::new(None),
            born: Instant::now(),
            last_used: AtomicU64::new(0),
            idle_stopped: AtomicBool::new(false),
            denials: AtomicU64::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Whether it was approved to be asked at the intercept point named `point`: its pin
    /// (zot) or its dialect's own (a Claude Code plugin's hooks) says so.
    pub fn intercepts(&self, point: &str) -> bool {
        self.spec
            .pin
            .as_ref()
            .is_some_and(|pin| pin.intercepts(point))
            || self.opts.dialect.intercepts(point)
    }

    /// Whether its post hooks answer ([`Dialect::post_hooks_answer`]).
    pub fn post_hooks_answer(&self) -> bool {
        self.opts.dialect.post_hooks_answer()
    }

    pub fn log_path(&self) -> PathBuf {
        self.spec.log_path()
    }

    /// The running server's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.live_now().and_then(|l| l.pid)
    }

    /// Whether a server is running now.
    pub fn is_running(&self) -> bool {
        self.live_now().is_some()
    }

    /// The live server, if one runs now; never starts one.
    pub fn running(&self) -> Option<Arc<Live>> {
        self.live_now()
    }

    /// How many starts or runs failed in a row.
    pub fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Whether a server of it ever started (the next start is a restart).
    pub fn has_started(&self) -> bool {
        self.starts.load(Ordering::Relaxed) > 0
    }

    /// Whether its server runs as a child process of the host: not when a transport supplies
    /// its streams (a Claude Code plugin's dialect, an MCP server over HTTP, an embedder's own),
    /// nor for a package that declares no server.
    pub fn spawns_process(&self) -> bool {
        self.opts.transport.is_none() && !self.spec.command.is_empty()
    }

    /// How long since it was last used (the server handed out by [`Extension::live`], or a
    /// call on it finished); `None` if it never was.
    pub fn idle_for(&self) -> Option<Duration> {
        match self.last_used.load(Ordering::Relaxed) {
            0 => None,
            at => Some(Duration::from_nanos(
                use_clock(self.born).saturating_sub(at),
            )),
        }
    }

    /// Whether a call holds its running server now: one in flight, or about to be sent.
    pub fn in_use(&self) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        // Every call holds an `Arc<Live>` from `live()` until it settles; the slot holds one.
        current.as_ref().is_some_and(|l| Arc::strong_count(l) > 1)
    }

    /// Whether its last server was stopped by [`Extension::stop_if_idle`], and none started
    /// since.
    pub fn is_idle_stopped(&self) -> bool {
        self.idle_stopped.load(Ordering::Relaxed) && !self.is_running()
    }

    /// Note a use now: twice per call, so on the coarse clock.
    fn touch(&self) {
        self.last_used
            .store(use_clock(self.born).max(1), Ordering::Relaxed);
    }

    fn live_now(&self) -> Option<Arc<Live>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.as_ref().filter(|l| !l.is_closed()).cloned()
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

    fn shut_down(&self) -> ExtensionError {
        ExtensionError::ShutDown {
            extension: self.spec.name.clone(),
        }
    }

    /// Stop the server and refuse to start it again (the session is over, or the extension
    /// was deactivated). A start in progress is not waited for: it sees the flag and discards
    /// its server itself. Calls in flight fail.
    pub async fn close(&self) -> Option<String> {
        self.closed.store(true, Ordering::Release);
        let _start = self.starting.try_lock().ok()?;
        self.stop_current().await
    }

    /// Whether [`Extension::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The live server, started (with its handshake) if none runs.
    pub async fn live(&self) -> Result<Arc<Live>, ExtensionError> {
        if self.is_closed() {
            return Err(self.shut_down());
        }
        if let Some(live) = self.live_now() {
            self.touch();
            return Ok(live);
        }
        let _start = self.starting.lock().await;
        if let Some(live) = self.live_now() {
            self.touch();
            return Ok(live);
        }
        if self.is_closed() {
            return Err(self.shut_down());
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
            Ok(live) => {
                self.touch();
                self.idle_stopped.store(false, Ordering::Relaxed);
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&live));
                if self.is_closed() {
                    // Closed while this start ran: the new server goes straight away.
                    self.stop_current().await;
                    return Err(self.shut_down());
                }
                let (extension, pid) = (self.spec.name.clone(), live.pid);
                let wire = live.offer().wire.clone();
                self.events
                    .health(match self.starts.fetch_add(1, Ordering::Relaxed) {
                        0 => HealthEvent::Started {
                            extension,
                            pid,
                            wire,
                        },
                        _ => HealthEvent::Restarted {
                            extension,
                            pid,
                            wire,
                        },
                    });
                Ok(live)
            }
            Err(err) => {
                // Failed to start again: what it is now is failed, not asleep.
                self.idle_stopped.store(false, Ordering::Relaxed);
                self.note_failure();
                self.events.health(HealthEvent::Failed {
                    extension: self.spec.name.clone(),
                    message: crate::error::report(&err),
                    log: err.log_path().map(PathBuf::from),
                });
                Err(err)
            }
        }
    }

    /// What the server offers, starting it if needed.
    pub async fn handshake(&self) -> Result<Offer, ExtensionError> {
        Ok(self.live().await?.offer().clone())
    }

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
    fn sandbox_note(&self, process: &ServerProcess, tail: &[String]) -> String {
        let denied = tail.iter().any(|l| {
            [
                "Permission denied",
                "permission denied",
                "Operation not permitted",
                "EACCES",
                "EPERM",
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
        // which doctor takes too); a zot extension (which says its language) is told where
        // its denial is written.
        let learnable = self.spec.language.is_none();
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
                let key = match self.opts.dialect.name() {
                    "zot" => "exec",
                    _ => "command",
                };
                let fix = crate::store::manifest::command_line_fix(key, &written, &self.spec.args)?;
                Some(format!(
                    "it is a whole command line, and a command is one program, run with no shell and never split: put the program alone in `{key}` and the rest in `args`: {fix}"
                ))
            })
            .flatten();
        ExtensionError::Spawn {
            extension: self.spec.name.clone(),
            command: self.spec.command.clone(),
            error,
            fix,
            log_path: self.spec.log_path(),
        }
    }

    async fn start(&self) -> Result<Arc<Live>, ExtensionError> {
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
        let (streams, process) = match &self.opts.transport {
            Some(transport) => (transport.open(spec).map_err(|e| self.spawn_error(e))?, None),
            None => {
                let spawned = process::spawn(&spec.spawn_spec(
                    &workspace,
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
        };
        // Never silently less contained than asked: what the kernel left out is told (once a
        // session: the same words for every server).
        if let Some(missing) = process
            .as_ref()
            .and_then(|p| p.sandbox.as_ref())
            .map(|c| &c.missing)
            .filter(|m| !m.is_empty())
        {
            self.events.health(HealthEvent::Warning {
                extension: None,
                message: format!(
                    "sandbox (best-effort): this system cannot enforce {}, so servers run without it; `sandbox = \"required\"` in settings.toml refuses to start them instead",
                    missing.join(", ")
                ),
            });
        }
        // A workspace kept out of the sandbox is told the same way, once.
        if let Some((workspace, why)) = process
            .as_ref()
            .and_then(|p| p.sandbox.as_ref())
            .and_then(|c| c.profile.withheld.as_ref())
        {
            self.events.health(HealthEvent::Warning {
                extension: None,
                message: format!(
                    "sandbox: the workspace {} {why}, so no server may read it; start the agent in a project directory, or grant a server the directory it needs (`yep grant <name> read:<dir>`)",
                    crate::text::escape(&workspace.display().to_string())
                ),
            });
        }
        // A zot extension's `.zot` that could not be opened is told, with why.
        if let Some((dir, why)) = process
            .as_ref()
            .and_then(|p| p.sandbox.as_ref())
            .and_then(|c| c.profile.files_withheld.as_ref())
        {
            let name = crate::text::escape(spec.grant_name.as_ref().unwrap_or(&spec.name));
            let dir = crate::text::escape(&dir.display().to_string()).into_owned();
            self.events.health(HealthEvent::Warning {
                extension: Some(spec.name.clone()),
                message: format!(
                    "sandbox: `{name}` may not keep files in {dir}, which {why}: only a directory of regular files is opened (what a directory or link in it holds, other code may read or run, as zot runs `.zot/extensions/`); `yep grant {name} write:{dir}` lets it write all of it"
                ),
            });
        }
        // A granted path that names nothing opens nothing (the sandbox's rules are on what
        // exists): never silently.
        if process.as_ref().is_some_and(|p| p.sandbox.is_some()) {
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
        let pid = process.as_ref().and_then(ServerProcess::pid);
        let hello = Hello {
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
            pin: spec.pin.clone(),
            interactive_ui: self.opts.interactive_ui,
            slow_start: crate::launcher::slow_start(&spec.command, &spec.args),
        };
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
            Ok(peer) => {
                let offered = &peer.offer().name;
                // An MCP server's name is its implementation's, never a package's.
                let mcp = self.opts.dialect.name().starts_with("mcp");
                if !offered.is_empty() && *offered != spec.name && !mcp {
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
                Ok(Arc::new(Live {
                    peer,
                    process,
                    pid,
                    crash_counted: AtomicBool::new(false),
                }))
            }
            // An MCP server that left rather than answer `server/discover` is started again,
            // once: its dialect now speaks to it with `initialize` only.
            Err(HandshakeError::EndedOnProbe) => {
                if let Some(proc_) = &process
                    && proc_.wait_for_exit(Duration::from_secs(1)).await.is_none()
                {
                    let _ = proc_.terminate(Duration::from_millis(100)).await;
                }
                tracing::debug!(extension = %spec.name, "ended on server/discover; started again for initialize");
                Box::pin(self.start()).await
            }
            Err(error) => {
                let (status, stderr_tail, log_path) = match &process {
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
                Err(ExtensionError::Handshake {
                    extension: spec.name.clone(),
                    error,
                    ran: spec.ran(&workspace),
                    status,
                    stderr_tail,
                    log_path,
                })
            }
        }
    }

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
    async fn last_words(&self, live: &Live) -> (String, Vec<String>, PathBuf) {
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

    /// Send any request by its wire name with the default timeout and return the raw result:
    /// for tools like `yep doctor` that probe a server beyond the capability model.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Value, ExtensionError> {
        let live = self.live().await?;
        let res = live
            .peer
            .request(method, params.cloned(), self.opts.request_timeout)
            .await;
        self.settle(&live, res).await
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

    /// Fire a hook with its own timeout, clamped to the host maximum
    /// ([`crate::runtime::MAX_HOOK_TIMEOUT_MS`]).
    pub async fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> Result<HookAnswer, ExtensionError> {
        let timeout = timeout.min(Duration::from_millis(crate::runtime::MAX_HOOK_TIMEOUT_MS));
        let live = self.live().await?;
        let res = live.peer.fire_hook(firing, timeout).await;
        self.settle(&live, res).await
    }

    /// Tell a running server what the user did with its panel (nothing when none runs).
    pub async fn panel_input(&self, input: &PanelInput) -> Result<(), ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(());
        };
        let res = live.peer.panel_input(input).await;
        self.settle(&live, res).await
    }

    /// Ask the server at an intercept point, starting it if needed.
    pub async fn intercept(
        &self,
        point: &Intercept,
        timeout: Duration,
    ) -> Result<InterceptOutcome, ExtensionError> {
        let live = self.live().await?;
        let res = live.peer.intercept(point, timeout).await;
        self.settle(&live, res).await
    }

    /// The dynamic prompt text, giving up after `timeout`.
    pub async fn prompt_within(&self, timeout: Duration) -> Result<String, ExtensionError> {
        let live = self.live().await?;
        let res = live.peer.prompt(timeout).await;
        self.settle(&live, res).await
    }

    /// The dynamic prompt text.
    pub async fn prompt(&self) -> Result<String, ExtensionError> {
        self.prompt_within(self.opts.request_timeout).await
    }

    /// Run a slash command.
    pub async fn execute_command(
        &self,
        name: &str,
        arguments: &str,
    ) -> Result<CommandResult, ExtensionError> {
        let live = self.live().await?;
        let res = live
            .peer
            .command(name, arguments, self.opts.request_timeout)
            .await;
        self.settle(&live, res).await
    }

    /// Run in `root` from the next start on.
    pub fn set_workspace(&self, root: PathBuf) {
        *self.workspace.lock().unwrap_or_else(|p| p.into_inner()) = root;
    }

    /// Use this config and env from the next start on.
    pub fn set_inputs(&self, config: Value, env: Vec<(String, String)>) {
        *self.inputs.lock().unwrap_or_else(|p| p.into_inner()) = (config, env);
    }

    /// Push new config to the (started) server.
    pub async fn config_changed(&self, config: Value) -> Result<ConfigOutcome, ExtensionError> {
        let live = self.live().await?;
        let res = live
            .peer
            .config_changed(config, self.opts.request_timeout)
            .await;
        self.settle(&live, res).await
    }

    /// Tell a running server the workspace moved. Nothing is sent when none runs.
    pub async fn workspace_changed(&self, root: &str) -> Result<(), ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(());
        };
        let res = live.peer.workspace_changed(root).await;
        self.settle(&live, res).await
    }

    /// Forward a trace event, starting the server if it is not running.
    pub async fn trace_event_started(&self, event: &TraceEvent) -> Result<(), ExtensionError> {
        let live = self.live().await?;
        let res = live.peer.trace(event).await;
        self.settle(&live, res).await
    }

    /// Forward a trace event to a running server (never awaited by the server).
    pub async fn trace_event(&self, event: &TraceEvent) -> Result<(), ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(());
        };
        let res = live.peer.trace(event).await;
        self.settle(&live, res).await
    }

    /// Once a running server has handled everything sent before (the trace flush). Nothing
    /// is sent when none runs.
    pub async fn barrier(&self) -> Result<(), ExtensionError> {
        let Some(live) = self.live_now() else {
            return Ok(());
        };
        let res = live.peer.barrier(self.opts.request_timeout).await;
        self.settle(&live, res).await
    }

    /// Graceful stop: the dialect's goodbye (`shutdown`, `exit`, stdin closed in YEP), grace,
    /// SIGTERM, grace, SIGKILL, reap. Every step is bounded, so a server that stopped reading
    /// cannot hold it up. Returns the exit status, if a server was running. A later call
    /// starts a fresh server.
    pub async fn stop(&self) -> Option<String> {
        // Wait out a start in progress, so it cannot install a server after we return.
        let _start = self.starting.lock().await;
        self.stop_current().await
    }

    /// [`Extension::stop`], for a caller that expects the server to run until it is stopped
    /// (doctor, a zot extension's registration run): one that ended on its own first is an
    /// [`ExtensionError::EndedEarly`], with its exit status, last stderr lines and log.
    #[allow(clippy::result_large_err)] // the same error type as every call here
    pub async fn stop_running(&self) -> Result<Option<String>, ExtensionError> {
        let _start = self.starting.lock().await;
        let current = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let ended = match current {
            Some(live) => match live.peer.close_reason() {
                Some(reason) if reason != CloseReason::Shutdown => {
                    let (status, stderr_tail, log_path) = self.last_words(&live).await;
                    Some(ExtensionError::EndedEarly {
                        extension: self.spec.name.clone(),
                        reason,
                        status,
                        stderr_tail,
                        log_path,
                    })
                }
                _ => None,
            },
            None => None,
        };
        let status = self.stop_current().await;
        match ended {
            Some(err) => Err(err),
            None => Ok(status),
        }
    }

    /// Stop the running server if it is a child process that nothing has used for `idle` and
    /// no call holds: gracefully, as [`Extension::stop`] does, without counting a failure or
    /// closing the extension, so the next use starts it again (as `Restarted`). A start in
    /// progress is never waited for: it is a use. Tells [`HealthEvent::Idle`] once the
    /// process is gone, and returns whether it stopped one.
    pub async fn stop_if_idle(&self, idle: Duration) -> bool {
        if self.is_closed() {
            return false;
        }
        let Ok(_start) = self.starting.try_lock() else {
            return false;
        };
        // Decided and taken under the slot's lock: a call that gets the server (through
        // `live_now`, under the same lock) either holds it before, and is seen, or finds none
        // after and waits on `starting` for a new one.
        let (live, after) = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            let Some(live) = current.as_ref() else {
                return false;
            };
            // A server that ended on its own is the crash path's; one with no process costs
            // nothing to keep.
            if live.is_closed() || live.process.is_none() || Arc::strong_count(live) > 1 {
                return false;
            }
            let after = self.idle_for().unwrap_or(Duration::ZERO);
            if after < idle {
                return false;
            }
            match current.take() {
                Some(live) => (live, after),
                None => return false,
            }
        };
        self.idle_stopped.store(true, Ordering::Relaxed);
        let status = self.stop_live(live).await;
        tracing::debug!(extension = %self.spec.name, status, "stopped after {} ms unused", after.as_millis());
        // Closed meanwhile: it is no longer idle but gone, as its closer records.
        if !self.is_closed() {
            self.events.health(HealthEvent::Idle {
                extension: self.spec.name.clone(),
                after,
            });
        }
        true
    }

    async fn stop_current(&self) -> Option<String> {
        let live = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(self.stop_live(live).await)
    }

    /// Stop `live`, already taken from the slot: the graceful ladder, then its last words.
    async fn stop_live(&self, live: Arc<Live>) -> String {
        // Calls cut short by this stop are not crashes.
        live.crash_counted.store(true, Ordering::Relaxed);
        let grace = self.opts.grace;
        live.peer.shutdown(grace).await;
        let status = match &live.process {
            Some(proc_) => proc_.terminate_in(grace, self.opts.term_wait).await,
            None => None,
        };
        live.peer.close(CloseReason::Shutdown);
        // Its last words are in the log by the time a stop returns.
        if let Some(proc_) = &live.process {
            proc_.stderr.drained(Duration::from_millis(500)).await;
        }
        describe_status(status)
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
