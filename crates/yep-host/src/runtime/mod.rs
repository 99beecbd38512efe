//! `ExtensionHost`: what an agent embeds. The user's enabled extensions become tools, hooks
//! around every tool call, prompt text, slash commands, a status line and questions, each held
//! to what the manifest approved (D4): the handshake can only narrow it.

mod call;
mod contrib;
mod events;
mod hooks;
mod idle;
mod intercept;
pub mod launch;
pub mod mcp;
mod panel;
mod prompt;
mod trace;

pub use call::{Call, CallOutcome, PROGRESS_BUFFER, ProgressStream, Report};
pub use contrib::{Agent, MAX_SKILL_BYTES, Skill, expand};
pub use events::{
    AskSink, BuiltinError, Denied, DynAskSink, MAX_QUEUED_QUESTIONS, ServerTools, StatusEntry,
    StatusSink,
};
pub use hooks::{
    HookNote, MAX_HOOK_TIMEOUT_MS, PostAnswers, PreDecision, UnavailableHook, glob_matches,
    hook_timeout,
};
pub use idle::{
    DEFAULT_IDLE_STOP, IDLE_STOP_KEY, IdleStopError, ServerInfo, ServerState, duration_setting,
    idle_stop_setting,
};
pub use intercept::{
    INTERCEPT_TIMEOUT, LIFECYCLE_TIMEOUT, MAX_SYSTEM_PROMPT_BYTES, MessageDecision, PromptDecision,
    StopDecision, TurnDecision,
};
pub use mcp::{MCP_PREFIX, McpSource, McpState};
pub use panel::{ActivePanel, PANEL_KEYS, PANEL_RENDER_WAIT};
pub use trace::{TRACE_QUEUE, TraceEvent, is_streaming_delta};

use crate::capability::{
    CommandResult, ConfigOutcome, Offer, Question, ToolCall, ToolResult, UpdateSink,
};
use crate::error::report;
use crate::health::{HealthEvent, HealthStream};
use crate::manifest::Manifest;
use crate::store::{Home, StoreError, settings};
use crate::supervisor::{Extension, ExtensionError, SupervisorOptions};
use events::HostEvents;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// At most this many tools per extension are always loaded; the rest are deferred.
pub const NEVER_DEFER_BUDGET: usize = 8;

/// The session the host serves.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    /// The servers' cwd and `initialize.workspace_root`.
    pub workspace_root: PathBuf,
}

/// Embedder choices.
#[derive(Clone)]
pub struct HostOptions {
    /// The agent's own tool names: an extension tool with one of these names is registered as
    /// `<ext>__<tool>`.
    pub builtins: Vec<String>,
    /// How long `ExtensionHost::start` waits for eager servers before returning anyway.
    pub startup_bound: Duration,
    /// How long a dynamic prompt may take.
    pub prompt_timeout: Duration,
    /// Prompt text kept per extension; longer text is truncated with a warning.
    pub prompt_cap: usize,
    /// How long one extension's hook subscriptions may hold one tool call, all of them
    /// together (pre hooks; post hooks likewise in the background). At most, and by default,
    /// [`MAX_HOOK_TIMEOUT_MS`]: a larger value is clamped to it.
    pub hook_budget: Duration,
    pub supervisor: SupervisorOptions,
    pub status_sink: Option<Arc<dyn StatusSink>>,
    /// Where questions go: `Some(Arc::new(my_sink))` for any [`AskSink`]. Without one every
    /// question is answered cancelled.
    pub ask_sink: Option<Arc<dyn DynAskSink>>,
    /// The agent's say over tool calls a server makes on its own (zot's `call_tool`): its
    /// permission policy and its built-in tools. Without one they run extension tools only,
    /// through the hooks.
    pub server_tools: Option<Arc<dyn ServerTools>>,
    /// The agent's tools as Claude Code plugins' hooks know them (`Bash`, `Edit`, `Write`, …),
    /// and their argument names: a hook's matcher, `if` rule and `tool_name` see these. The
    /// default maps the usual lowercase names; see docs/plugins.md.
    pub claude_tool_names: crate::dialect::claude::ToolNames,
    /// Stop a server nothing has used for this long: no call began or ended on it meanwhile,
    /// and none is in flight. Its tools stay listed and its status stays; the next use starts
    /// it again. Servers that run no process (Claude Code plugins, MCP servers over HTTP) are
    /// never stopped. `None` (the default) or zero: never. [`idle_stop_setting`] reads the
    /// user's choice from `settings.toml`.
    pub idle_stop: Option<Duration>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            builtins: Vec::new(),
            startup_bound: Duration::from_secs(5),
            prompt_timeout: Duration::from_secs(2),
            prompt_cap: 16 * 1024,
            hook_budget: Duration::from_millis(MAX_HOOK_TIMEOUT_MS),
            supervisor: SupervisorOptions::default(),
            status_sink: None,
            ask_sink: None,
            server_tools: None,
            claude_tool_names: Default::default(),
            idle_stop: None,
        }
    }
}

/// Why a host operation failed; every variant names what it was about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    #[error("no tool named `{0}` (see tools() and search_tools())")]
    UnknownTool(String),
    #[error(
        "extension `{extension}`: tool `{tool}` is declared in the manifest but not served by its running server"
    )]
    NotServed { extension: String, tool: String },
    #[error("no command named `{0}` (commands are `<extension>:<name>`)")]
    UnknownCommand(String),
    #[error("extension `{0}` is not enabled in this session")]
    NotLoaded(String),
    #[error(transparent)]
    Extension(Box<ExtensionError>),
    #[error(transparent)]
    Store(Box<StoreError>),
    #[error("the extension host was shut down")]
    ShutDown,
    #[error("no extension panel is open")]
    NoPanel,
    /// An MCP server's tool that is not what was approved: it is new (`new`), or its
    /// description, schema or hints changed.
    #[error(
        "MCP server `{}`: tool `{}` {}, so it is withheld since the server's approval; `yep trust {}` shows the change and approves it",
        crate::text::escape(server),
        crate::text::escape(tool),
        if *new { "is new" } else { "changed (description, schema or hints)" },
        crate::text::escape(server)
    )]
    Withheld {
        server: String,
        tool: String,
        new: bool,
    },
    #[error("no MCP server named `{}` in this session", crate::text::escape(.0))]
    UnknownMcpServer(String),
    /// An MCP server that may not start: the sentence says why and how to approve it.
    #[error("{0}")]
    Unapproved(String),
    /// A settings write run off the async threads did not finish (it panicked or was
    /// cancelled).
    #[error("the settings write failed: {0}")]
    SettingsWrite(tokio::task::JoinError),
    /// An enabled extension could not be loaded into the session.
    #[error("cannot activate `{extension}`")]
    Activate {
        extension: String,
        #[source]
        source: Box<launch::LaunchError>,
    },
}

impl From<ExtensionError> for HostError {
    fn from(e: ExtensionError) -> Self {
        HostError::Extension(Box::new(e))
    }
}

/// Run a store write off the async threads: it takes the home's file lock, which another
/// `yep` (an install waiting at its consent prompt, say) may hold for a while.
async fn off_thread<T: Send + 'static>(
    write: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, HostError> {
    tokio::task::spawn_blocking(write)
        .await
        .map_err(HostError::SettingsWrite)?
        .map_err(HostError::from)
}

/// How many times one required field is asked for before it is left unset.
pub const SETUP_ATTEMPTS: usize = 3;

/// Ask through `sink` for each required config field of `name` nobody set, by kind (secret:
/// masked, `enum`: a selector, else free text), and store the answers. An answer its field
/// refuses is asked again, the prompt saying why, up to [`SETUP_ATTEMPTS`] times; a cancelled
/// or empty answer leaves the field unset. Returns the fields still unset (`setup_incomplete`);
/// without a sink, every missing one.
pub async fn setup(
    home: &Home,
    name: &str,
    manifest: &Manifest,
    sink: Option<&dyn DynAskSink>,
) -> Result<Vec<String>, HostError> {
    match sink {
        Some(sink) => setup_asking(home, name, manifest, |q| sink.ask_dyn(name, q)).await,
        None => {
            let missing = crate::store::config::missing_required(home, manifest)?;
            Ok(missing.into_iter().map(|f| f.name).collect())
        }
    }
}

/// [`setup`], asking through `ask`.
async fn setup_asking<F>(
    home: &Home,
    name: &str,
    manifest: &Manifest,
    ask: impl Fn(Question) -> F,
) -> Result<Vec<String>, HostError>
where
    F: std::future::Future<Output = crate::capability::Answer>,
{
    use crate::store::config;
    let missing = config::missing_required(home, manifest)?;
    let mut still = Vec::new();
    for f in missing {
        let asked = format!(
            "{name}.{}{}",
            f.name,
            config::description(manifest, &f.name)
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
        let mut prompt = asked.clone();
        let mut stored = false;
        for _ in 0..SETUP_ATTEMPTS {
            let question = Question {
                prompt: prompt.clone(),
                secret: f.secret,
                options: config::options(manifest, &f.name),
                ..Question::default()
            };
            let answer = ask(question).await;
            if answer.cancelled || answer.answer.is_empty() {
                break;
            }
            let (home, manifest, field) = (home.clone(), manifest.clone(), f.name.clone());
            if f.secret {
                let secret = config::Secret::new(answer.answer);
                off_thread(move || config::set_secret(&home, &manifest, &field, &secret)).await?;
            } else {
                match config::check_answer(&manifest, &field, &answer.answer) {
                    Ok(value) => {
                        off_thread(move || config::set_plain(&home, &manifest, &field, value))
                            .await?;
                    }
                    Err(why) => {
                        prompt = format!("{asked}: {why}; try again");
                        continue;
                    }
                }
            }
            stored = true;
            break;
        }
        if !stored {
            still.push(f.name);
        }
    }
    Ok(still)
}

impl From<StoreError> for HostError {
    fn from(e: StoreError) -> Self {
        HostError::Store(Box::new(e))
    }
}

impl HostError {
    /// The extension the error is about, when there is one.
    pub fn extension(&self) -> Option<&str> {
        match self {
            HostError::NotServed { extension, .. } => Some(extension),
            HostError::NotLoaded(name) => Some(name),
            HostError::Activate { extension, .. } => Some(extension),
            _ => None,
        }
    }
}

/// A tool the model can see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The name to call it by (`<ext>__<tool>` after a collision).
    pub name: String,
    /// The extension's own name for it.
    pub tool: String,
    pub extension: String,
    pub description: String,
    pub schema: Value,
    /// Always in the model's context.
    pub never_defer: bool,
    /// Found through `search_tools`.
    pub deferred: bool,
    /// The schema of its structured result, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints about what it does (an MCP tool's `annotations`), when it gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// An MCP server's tool: `extension` is the server's name.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mcp: bool,
}

/// The name of the meta-tool [`ToolDefinition::search_tools`] describes and
/// [`ExtensionHost::dispatch_search_tools`] answers. Put it in [`HostOptions::builtins`] when
/// you offer it, so no extension tool takes the name.
pub const SEARCH_TOOLS: &str = "search_tools";

impl ToolDefinition {
    /// The argument schema; an object with no properties when the manifest gave none.
    pub fn parameters(&self) -> Value {
        if self.schema.is_object() {
            self.schema.clone()
        } else {
            serde_json::json!({"type": "object", "properties": {}})
        }
    }

    /// As OpenAI's Chat Completions and Responses APIs take a function tool.
    pub fn to_openai(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            }
        })
    }

    /// As Anthropic's Messages API takes a tool.
    pub fn to_anthropic(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters(),
        })
    }

    /// The `search_tools` meta-tool, for a model that sees only the always-loaded tools: it
    /// finds deferred tools by words of their name and description.
    pub fn search_tools() -> ToolDefinition {
        ToolDefinition {
            name: SEARCH_TOOLS.into(),
            tool: SEARCH_TOOLS.into(),
            extension: String::new(),
            description: "Find more tools: deferred tools whose name or description mentions every word of the query. Call one by the name returned.".into(),
            schema: serde_json::json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "words to look for"}},
                "required": ["query"],
            }),
            never_defer: true,
            deferred: false,
            output_schema: None,
            annotations: None,
            mcp: false,
        }
    }
}

/// A slash command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandInfo {
    /// `<ext>:<name>`.
    pub name: String,
    pub description: String,
}

/// One enabled extension in the session.
pub(crate) struct Loaded {
    pub(crate) name: String,
    /// Started with the session whatever it contributes.
    eager: bool,
    pub(crate) manifest: Manifest,
    pub(crate) ext: Extension,
    /// The pid whose refused (unapproved) tools were already logged.
    warned_pid: Mutex<Option<u32>>,
    prompt: Mutex<prompt::PromptCache>,
    /// The trace forwarder, when the manifest declares `trace`.
    pub(crate) forwarder: Option<Arc<trace::Forwarder>>,
    forwarding: Mutex<Option<tokio::task::AbortHandle>>,
    /// The workspace's own Claude Code config: the hash it was approved at.
    project_hash: Option<String>,
}

/// Dropped with the last handle of a host.
struct LastHandle(watch::Receiver<Arc<Table>>);

/// A handle to the host that does not keep it alive: what a server's own tool calls (zot's
/// `call_tool`) run through, held by the host's events.
pub struct WeakHost {
    core: std::sync::Weak<Core>,
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
        for l in self.0.borrow().loaded.iter() {
            l.stop_forwarding();
        }
    }
}

impl Loaded {
    /// Stop the trace forwarder task (it holds this value, so dropping cannot do it).
    fn stop_forwarding(&self) {
        if let Some(task) = self
            .forwarding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

/// The loaded extensions and what they contribute, as one immutable snapshot. The registry
/// task publishes a new one on every change; readers never wait for it.
#[derive(Default)]
pub struct Table {
    loaded: Vec<Arc<Loaded>>,
    /// Enabled packages that could not be loaded but whose approved manifest has hooks.
    unloaded: Vec<Arc<Unloaded>>,
    /// The MCP servers the session sees, approved or not.
    mcp: Vec<Arc<mcp::McpEntry>>,
    tools: Vec<ToolDefinition>,
    forwarders: Vec<Arc<trace::Forwarder>>,
}

/// An enabled package that could not be loaded (its files drifted from what was approved, its
/// config is invalid, …), kept for its approved hooks: a guard that cannot load must not
/// vanish from the decisions it was approved to have a say in.
pub(crate) struct Unloaded {
    pub(crate) name: String,
    /// The approved manifest, from the lock.
    pub(crate) manifest: Manifest,
    /// Why it could not be loaded.
    pub(crate) reason: String,
}

impl Table {
    /// Why `name` is no tool of this table: a tool an MCP server lists but that is withheld
    /// since its approval, or one of a server that is not approved, says so; anything else
    /// is unknown.
    fn unknown_tool(&self, name: &str) -> HostError {
        for entry in &self.mcp {
            let server = &entry.source.name;
            if let Some(why) = &entry.blocked {
                let prefix = mcp::tool_name(server, "");
                if name.starts_with(&prefix) {
                    return HostError::Unapproved(why.clone());
                }
                continue;
            }
            for change in entry.tools().1 {
                use crate::store::mcp::ToolChange;
                let (ToolChange::Added(tool) | ToolChange::Changed(tool)) = change else {
                    continue;
                };
                if mcp::tool_name(server, &tool) == name {
                    return HostError::Withheld {
                        server: server.clone(),
                        new: entry
                            .pin
                            .as_ref()
                            .is_none_or(|p| !p.tools.contains_key(&tool)),
                        tool,
                    };
                }
            }
        }
        HostError::UnknownTool(name.to_string())
    }

    /// The enabled extensions, in enable order.
    pub fn extensions(&self) -> Vec<String> {
        self.loaded.iter().map(|l| l.name.clone()).collect()
    }

    /// Every tool, with its extension and whether it is always loaded or deferred.
    pub fn tools(&self) -> &[ToolDefinition] {
        &self.tools
    }

    /// The enabled extensions this table stands for: the loaded ones, then those kept only
    /// for their hooks.
    fn wanted(&self) -> Vec<String> {
        let gone = self.unloaded.iter().map(|u| u.name.clone());
        self.extensions().into_iter().chain(gone).collect()
    }
}

/// What the host and its registry task share: fixed for the session but for the workspace.
pub(crate) struct Core {
    home: Home,
    session_id: String,
    workspace_root: Mutex<PathBuf>,
    opts: HostOptions,
    events: Arc<HostEvents>,
    /// Set by `shutdown`: every call after it fails with [`HostError::ShutDown`].
    shut: AtomicBool,
}

impl Core {
    /// Tell the health stream, and `warnings()` when it is a problem. A standing condition
    /// met again (each `mcp_servers()`, each rebuild) is not repeated.
    fn report(&self, event: HealthEvent) {
        self.events.health.report(event);
    }

    fn warn(&self, message: String) {
        self.report(HealthEvent::Warning {
            extension: None,
            message,
        });
    }

    fn is_shut(&self) -> bool {
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

    fn workspace_root(&self) -> PathBuf {
        self.workspace_root
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn load(&self, name: &str) -> Result<Loaded, launch::LaunchError> {
        let launch = launch::installed(
            &self.home,
            name,
            self.workspace_root(),
            &self.session_id,
            &self.opts.supervisor,
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
                let kept = old.loaded.iter().find(|l| {
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
        // A pinned (zot) extension is owed every event it observes.
        let lossless = launch.spec.pin.is_some();
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
    async fn start_eager(self: &Arc<Self>, loaded: Vec<Arc<Loaded>>) {
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

    /// A new table: tool names, collisions and never-defer budgets are decided here.
    fn table(
        &self,
        loaded: Vec<Arc<Loaded>>,
        unloaded: Vec<Arc<Unloaded>>,
        mcp: Vec<Arc<mcp::McpEntry>>,
    ) -> Table {
        let names: Vec<&str> = loaded.iter().map(|l| l.name.as_str()).collect();
        let mut taken: BTreeSet<String> = self.opts.builtins.iter().cloned().collect();
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        for l in &loaded {
            let mut budget = NEVER_DEFER_BUDGET;
            for (tool, why) in l.ext.spec().tool_schemas.invalid() {
                warnings.push(HealthEvent::RefusedTool {
                    extension: l.name.clone(),
                    tool: tool.to_string(),
                    message: format!(
                        "extension `{}`: calls to tool `{tool}` are refused: its argument schema is not valid JSON Schema: {why}",
                        l.name
                    ),
                });
            }
            for t in &l.manifest.yolop.tools {
                let Some(name) = tool_name(&names, &mut taken, &l.name, &t.name, &mut warnings)
                else {
                    continue;
                };
                let never_defer = t.never_defer && budget > 0;
                if never_defer {
                    budget -= 1;
                }
                tools.push(ToolDefinition {
                    name,
                    tool: t.name.clone(),
                    extension: l.name.clone(),
                    description: t.description.clone(),
                    schema: t.schema.clone(),
                    never_defer,
                    deferred: !never_defer,
                    output_schema: t.output_schema.clone(),
                    annotations: None,
                    mcp: false,
                });
            }
        }
        // MCP servers' tools, after the extensions' (whose names they cannot take): each
        // approved one as it is now, the rest withheld with a warning.
        for entry in &mcp {
            let server = &entry.source.name;
            let (offered, withheld) = entry.tools();
            if entry.ext.is_running() {
                let said: Vec<String> = withheld.iter().map(ToString::to_string).collect();
                let source = &entry.source;
                crate::store::mcp::note_withheld(&self.home, server, &source.origin, &said);
            }
            for change in withheld {
                warnings.push(HealthEvent::Warning {
                    extension: Some(server.clone()),
                    message: format!(
                        "MCP server `{}`: {change}: withheld until `yep trust {}`",
                        crate::text::escape(server),
                        crate::text::escape(server)
                    ),
                });
            }
            for t in offered {
                let name = mcp::tool_name(server, &t.name);
                if !taken.insert(name.clone()) {
                    warnings.push(HealthEvent::RefusedTool {
                        extension: server.clone(),
                        tool: t.name.clone(),
                        message: format!(
                            "MCP server `{}`: tool `{}` would be `{name}`, which is taken; refusing it",
                            crate::text::escape(server),
                            crate::text::escape(&t.name)
                        ),
                    });
                    continue;
                }
                tools.push(ToolDefinition {
                    name,
                    tool: t.name,
                    extension: server.clone(),
                    description: t.description.unwrap_or_default(),
                    schema: t.input_schema,
                    never_defer: false,
                    deferred: true,
                    output_schema: t.output_schema,
                    annotations: t.annotations,
                    mcp: true,
                });
            }
        }
        let mut forwarders = Vec::new();
        for l in &loaded {
            if let Some(f) = &l.forwarder {
                forwarders.push(Arc::clone(f));
                let mut task = l.forwarding.lock().unwrap_or_else(|p| p.into_inner());
                if task.is_none() {
                    let handle = tokio::spawn(Arc::clone(f).run(Arc::clone(l)));
                    *task = Some(handle.abort_handle());
                }
            }
        }
        for event in warnings {
            self.report(event);
        }
        Table {
            loaded,
            unloaded,
            mcp,
            tools,
            forwarders,
        }
    }

    /// Every MCP server a session with `loaded` sees, with where it comes from.
    fn mcp_sources(&self, loaded: &[Arc<Loaded>]) -> Vec<McpSource> {
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
    fn plan(&self, wanted: &[String], old: &Table) -> Plan {
        let mut failed = Vec::new();
        let mut unloaded = Vec::new();
        let mut next = Vec::new();
        let mut added = Vec::new();
        // The workspace's own config is decided here, from the workspace, not from settings.
        let project = crate::store::claude::project::PROJECT;
        for name in wanted.iter().filter(|n| *n != project) {
            match old.loaded.iter().find(|l| &l.name == name) {
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
                        let last_known = old.unloaded.iter().find(|u| &u.name == name);
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
            if !old.loaded.iter().any(|o| Arc::ptr_eq(o, &l)) {
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
            &self.opts.supervisor,
            &events,
            &mut |extension, message| self.report(HealthEvent::Warning { extension, message }),
        )
    }
}

/// The table a reconcile moves to, as [`Core::plan`] loads it.
struct Plan {
    /// The loaded extensions, in the order wanted: kept ones and `added`.
    next: Vec<Arc<Loaded>>,
    added: Vec<Arc<Loaded>>,
    unloaded: Vec<Arc<Unloaded>>,
    /// The ones that could not load, and why (each also reported).
    failed: Vec<(String, launch::LaunchError)>,
    mcp: Vec<Arc<mcp::McpEntry>>,
}

/// What the registry task is asked to do, one at a time, in the order asked.
enum Command {
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
struct Registry {
    core: Arc<Core>,
    table: watch::Sender<Arc<Table>>,
    /// After shutdown nothing loads again.
    shut: bool,
}

impl Registry {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
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
        let gone: Vec<_> = old
            .loaded
            .iter()
            .filter(|l| !wanted.contains(&l.name))
            .cloned()
            .collect();
        let names = |list: &[Arc<Loaded>]| list.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        let gone_names =
            |list: &[Arc<Unloaded>]| list.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
        let kept = |list: &[Arc<mcp::McpEntry>], e: &Arc<mcp::McpEntry>| {
            list.iter().any(|other| Arc::ptr_eq(other, e))
        };
        let gone_mcp: Vec<_> = old.mcp.iter().filter(|e| !kept(&mcp, e)).cloned().collect();
        let new_mcp: Vec<_> = mcp.iter().filter(|e| !kept(&old.mcp, e)).cloned().collect();
        if names(&next) == names(&old.loaded)
            && gone_names(&unloaded) == gone_names(&old.unloaded)
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
        for e in gone_mcp {
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
    async fn refresh(&mut self) -> Result<(), HostError> {
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
            current.loaded.clone(),
            current.unloaded.clone(),
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
        let status = loaded.ext.config_changed(plain).await?;
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
        for l in &self.current().loaded {
            l.ext.set_workspace(root.clone());
            if let Err(err) = l.ext.workspace_changed(&text).await {
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
        for l in self.current().loaded.iter().cloned() {
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

fn find(table: &Table, name: &str) -> Result<Arc<Loaded>, HostError> {
    table
        .loaded
        .iter()
        .find(|l| l.name == name)
        .cloned()
        .ok_or_else(|| HostError::NotLoaded(name.to_string()))
}

/// Write the enable state: it takes the home's file lock, which another `yep` may hold for a
/// while, so it runs off the async threads.
async fn persist_enabled(home: &Home, name: &str, on: bool) -> Result<(), HostError> {
    let (home, name) = (home.clone(), name.to_string());
    off_thread(move || home.set_enabled(&name, on)).await?;
    Ok(())
}

/// The extension host for one session. A cheap handle: clones share one host (its table,
/// servers and registry task), so hand one to each task that needs it. The host goes when
/// the last handle is dropped; [`ExtensionHost::shutdown`] stops it for every handle.
#[derive(Clone)]
pub struct ExtensionHost {
    core: Arc<Core>,
    table: watch::Receiver<Arc<Table>>,
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
        opts: HostOptions,
    ) -> Result<ExtensionHost, HostError> {
        let events = Arc::new(HostEvents::new(
            opts.status_sink.clone(),
            opts.ask_sink.clone(),
        ));
        let mut opts = opts;
        opts.supervisor.claude_tool_names = opts.claude_tool_names.clone();
        // Its secrets, lock and packages never reach a server by way of the workspace.
        yep_sandbox::protect(&home.root);
        let core = Arc::new(Core {
            home,
            session_id: session.id,
            workspace_root: Mutex::new(session.workspace_root),
            opts,
            events,
            shut: AtomicBool::new(false),
        });
        let (table_tx, table) = watch::channel(Arc::new(Table::default()));
        let (commands, queue) = mpsc::unbounded_channel();
        let mut registry = Registry {
            core: Arc::clone(&core),
            table: table_tx,
            shut: false,
        };
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
    async fn ask<T>(
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

    fn warn(&self, message: String) {
        self.core.warn(message);
    }

    /// The home this host runs from.
    pub fn home(&self) -> &Home {
        &self.core.home
    }

    /// Every problem so far, once each, as a sentence that names the extension: skipped or
    /// drifted packages, servers that failed to start or stopped, renamed and refused tools,
    /// hooks that could not run. The first [`MAX_WARNINGS`](crate::health::MAX_WARNINGS) are
    /// kept.
    pub fn warnings(&self) -> Vec<String> {
        self.core.events.health.warnings()
    }

    /// Health events as they happen: started, failed, restarted, drifted, refused tool, hook
    /// error, and the other warnings. A new stream first gets the recent ones (up to
    /// [`HEALTH_BACKLOG`](crate::health::HEALTH_BACKLOG)), so subscribing after `start`
    /// misses nothing of it.
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
        self.snapshot().loaded.clone()
    }

    fn find(&self, name: &str) -> Result<Arc<Loaded>, HostError> {
        find(&self.snapshot(), name)
    }

    /// The enabled extensions, in enable order.
    pub fn extensions(&self) -> Vec<String> {
        self.snapshot().extensions()
    }

    /// Every tool, with its extension and whether it is always loaded or deferred (a
    /// deferred tool a tool result activated is loaded from then on).
    pub fn tools(&self) -> Vec<ToolDefinition> {
        let mut tools = self.snapshot().tools.clone();
        let activated = self
            .core
            .events
            .activated
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !activated.is_empty() {
            for t in tools.iter_mut().filter(|t| t.deferred) {
                if activated.contains(&(t.extension.clone(), t.tool.clone())) {
                    t.deferred = false;
                }
            }
        }
        tools
    }

    /// Deferred tools whose name or description mentions every word of `query`.
    pub fn search_tools(&self, query: &str) -> Vec<ToolDefinition> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.tools()
            .into_iter()
            .filter(|t| t.deferred)
            .filter(|t| {
                let hay = format!("{} {} {}", t.name, t.extension, t.description).to_lowercase();
                words.iter().all(|w| hay.contains(w.as_str()))
            })
            .collect()
    }

    /// Answer a call of the [`ToolDefinition::search_tools`] meta-tool: `{"tools": [{name,
    /// description, schema}]}` for the deferred tools matching `args.query`.
    pub fn dispatch_search_tools(&self, args: &Value) -> Value {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let found: Vec<Value> = self
            .search_tools(query)
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "description": t.description,
                    "schema": t.parameters(),
                })
            })
            .collect();
        serde_json::json!({ "tools": found })
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
        self.call_tool_in_chain(name, args, updates, cancel, Vec::new())
            .await
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
            let def = table
                .tools
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| table.unknown_tool(name))?;
            let mcp = def
                .mcp
                .then(|| table.mcp.iter().find(|e| e.source.name == def.extension))
                .flatten()
                .cloned();
            match mcp {
                Some(entry) => (Err(entry), def.tool.clone()),
                None => (
                    Ok(table
                        .loaded
                        .iter()
                        .find(|l| l.name == def.extension && !def.mcp)
                        .cloned()
                        .ok_or_else(|| HostError::UnknownTool(name.to_string()))?),
                    def.tool.clone(),
                ),
            }
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
        self.loaded()
            .iter()
            .flat_map(|l| {
                l.manifest.yolop.commands.iter().map(move |c| CommandInfo {
                    name: format!("{}:{}", l.name, c.name),
                    description: c.description.clone(),
                })
            })
            .collect()
    }

    /// Run `<ext>:<name>` (or `/<ext>:<name>`, as install shows it) with the raw argument text.
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
        let (ext, name) = spelled.split_once(':').ok_or_else(unknown)?;
        // Each part exactly, else whatever the case (zot's lookup, over the whole name): the
        // server hears the spelling it registered.
        let table = self.snapshot();
        let loaded = find(&table, ext)
            .ok()
            .or_else(|| {
                table
                    .loaded
                    .iter()
                    .find(|l| l.name.eq_ignore_ascii_case(ext))
                    .cloned()
            })
            .ok_or_else(unknown)?;
        let commands = &loaded.manifest.yolop.commands;
        let registered = commands
            .iter()
            .find(|c| c.name == name)
            .or_else(|| commands.iter().find(|c| c.name.eq_ignore_ascii_case(name)))
            .ok_or_else(unknown)?;
        Ok(loaded
            .ext
            .execute_command(&registered.name, arguments)
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
    }
}

/// The name `tool` of extension `ext` is registered under, or `None` when it is refused; the
/// name is added to `taken`. First come, first served in enable order, after the builtins. The
/// `<ext>__` prefix belongs to the loaded extension `ext`: another extension's tool spelled that
/// way is qualified too, so it cannot take the name a collision gives `ext`'s own tool. A
/// qualified name that is taken as well is refused, so every registered name is unique and a
/// warning never points at a name that calls someone else.
fn tool_name(
    loaded: &[&str],
    taken: &mut BTreeSet<String>,
    ext: &str,
    tool: &str,
    warnings: &mut Vec<HealthEvent>,
) -> Option<String> {
    let foreign = loaded.iter().find(|&&other| {
        other != ext
            && tool
                .strip_prefix(other)
                .is_some_and(|rest| rest.starts_with("__"))
    });
    let mcp = tool.starts_with(MCP_PREFIX);
    if foreign.is_none() && !mcp && !taken.contains(tool) {
        taken.insert(tool.to_string());
        return Some(tool.to_string());
    }
    let why = match foreign {
        Some(other) => format!("is in extension `{other}`'s `{other}__` namespace"),
        None if mcp => format!("is in the MCP servers' `{MCP_PREFIX}` namespace"),
        None => "collides with an existing tool".to_string(),
    };
    let qualified = format!("{ext}__{tool}");
    // An extension named `mcp` would qualify its names into the MCP servers' namespace.
    if !qualified.starts_with(MCP_PREFIX) && taken.insert(qualified.clone()) {
        warnings.push(HealthEvent::Warning {
            extension: Some(ext.to_string()),
            message: format!("tool `{tool}` of `{ext}` {why}; registered as `{qualified}`"),
        });
        Some(qualified)
    } else {
        warnings.push(HealthEvent::RefusedTool {
            extension: ext.to_string(),
            tool: tool.to_string(),
            message: match qualified.starts_with(MCP_PREFIX) {
                true => format!(
                    "tool `{tool}` of `{ext}` {why}, and `{qualified}` is in the MCP servers' `{MCP_PREFIX}` namespace; refusing it"
                ),
                false => format!(
                    "tool `{tool}` of `{ext}` {why}, and `{qualified}` is taken too; refusing it"
                ),
            },
        });
        None
    }
}
