//! `ExtensionHost`: what an agent embeds. The user's enabled extensions become tools, hooks
//! around every tool call, prompt text, slash commands, a status line and questions, each held
//! to what the manifest approved (D4): the handshake can only narrow it.

mod contrib;
mod events;
mod hooks;
pub mod launch;
mod prompt;
mod trace;

pub use contrib::{Skill, expand};
pub use events::{AskSink, StatusEntry, StatusSink};
pub use hooks::{MAX_HOOK_TIMEOUT_MS, PreDecision, glob_matches, hook_timeout};
pub use trace::{TRACE_QUEUE, TraceEvent, is_streaming_delta};

use crate::manifest::Manifest;
use crate::rpc::UpdateSink;
use crate::store::{Home, StoreError, settings};
use crate::supervisor::{Extension, ExtensionError, SupervisorOptions};
use events::HostEvents;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use yep_protocol::CommandExecuteResult;

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
    pub ask_sink: Option<Arc<dyn AskSink>>,
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
        .map_err(|e| {
            HostError::from(StoreError::Invalid(format!(
                "the settings write failed: {e}"
            )))
        })?
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
    sink: Option<&dyn AskSink>,
) -> Result<Vec<String>, HostError> {
    use crate::store::config;
    let missing = config::missing_required(home, manifest)?;
    let Some(sink) = sink else {
        return Ok(missing.into_iter().map(|f| f.name).collect());
    };
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
            let params = yep_protocol::UiAskParams {
                prompt: prompt.clone(),
                secret: f.secret,
                options: config::options(manifest, &f.name),
                ..yep_protocol::UiAskParams::default()
            };
            let answer = sink.ask(name, params).await;
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
    pub(crate) manifest: Manifest,
    pub(crate) ext: Extension,
    /// The pid whose refused (unapproved) tools were already logged.
    warned_pid: Mutex<Option<u32>>,
    prompt: Mutex<prompt::PromptCache>,
    /// The trace forwarder, when the manifest declares `trace`.
    pub(crate) forwarder: Option<Arc<trace::Forwarder>>,
    forwarding: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for ExtensionHost {
    fn drop(&mut self) {
        // Forwarder tasks hold their extension; without this a dropped host would leave them
        // (and their servers) running.
        for l in self.loaded() {
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

#[derive(Default)]
struct Table {
    loaded: Vec<Arc<Loaded>>,
    tools: Vec<ToolDefinition>,
    forwarders: Vec<Arc<trace::Forwarder>>,
}

/// The extension host for one session.
pub struct ExtensionHost {
    home: Home,
    session: Session,
    opts: HostOptions,
    events: Arc<HostEvents>,
    table: RwLock<Table>,
    warnings: Mutex<Vec<String>>,
    /// Serialises activate/deactivate, so each rebuild starts from the one before it.
    lifecycle: tokio::sync::Mutex<()>,
}

impl ExtensionHost {
    /// Load every extension `settings.toml` enables, then start the ones the first turn needs
    /// (prompt, hooks, trace) in parallel, waiting at most `startup_bound`. Malformed packages
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
        let host = ExtensionHost {
            home,
            session,
            opts,
            events,
            table: RwLock::default(),
            warnings: Mutex::default(),
            lifecycle: tokio::sync::Mutex::new(()),
        };
        let enabled = settings::enabled(&host.home.settings_path())
            .map_err(|e| HostError::from(StoreError::Invalid(e)))?;
        let mut loaded = Vec::new();
        for name in enabled {
            match host.load(&name) {
                Ok(l) => loaded.push(Arc::new(l)),
                Err(why) => host.warn(format!(
                    "skipping extension `{name}`: {}",
                    crate::error::report(&why)
                )),
            }
        }
        host.rebuild(loaded);
        host.start_eager(host.loaded()).await;
        Ok(host)
    }

    /// Record a warning once: the same problem met again (each `mcp_servers()`, each
    /// rebuild) is not repeated.
    fn warn(&self, message: String) {
        let mut warnings = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !warnings.contains(&message) {
            tracing::warn!("{message}");
            warnings.push(message);
        }
    }

    /// Problems met while loading: skipped packages, renamed tools, refused tools.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn load(&self, name: &str) -> Result<Loaded, launch::LaunchError> {
        let launch = launch::installed(
            &self.home,
            name,
            self.session.workspace_root.clone(),
            &self.session.id,
            &self.opts.supervisor,
        )?;
        for message in launch.warnings {
            self.warn(message);
        }
        let manifest = launch.manifest;
        let ext = Extension::new(
            launch.spec,
            launch.supervisor,
            Arc::clone(&self.events) as Arc<dyn crate::Events>,
        );
        let forwarder = manifest.yolop.trace.then(trace::Forwarder::new);
        Ok(Loaded {
            name: name.to_string(),
            manifest,
            ext,
            warned_pid: Mutex::new(None),
            prompt: Mutex::default(),
            forwarder,
            forwarding: Mutex::new(None),
        })
    }

    /// Servers with a prompt, hooks or trace start now, in parallel, bounded.
    async fn start_eager(&self, loaded: Vec<Arc<Loaded>>) {
        let eager: Vec<_> = loaded
            .into_iter()
            .filter(|l| {
                let f = &l.manifest.yolop;
                f.capability_server.is_some()
                    && (f.prompt || f.dynamic_prompt || !f.hooks.is_empty() || f.trace)
            })
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for l in eager {
            tasks.spawn(async move {
                if let Err(err) = l.ext.handshake().await {
                    tracing::warn!(extension = %l.name, "eager start failed: {err}");
                }
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

    /// Install a new table: tool names, collisions and never-defer budgets are decided here.
    fn rebuild(&self, loaded: Vec<Arc<Loaded>>) {
        let names: Vec<&str> = loaded.iter().map(|l| l.name.as_str()).collect();
        let mut taken: BTreeSet<String> = self.opts.builtins.iter().cloned().collect();
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        for l in &loaded {
            let mut budget = NEVER_DEFER_BUDGET;
            for (tool, why) in l.ext.spec().tool_schemas.invalid() {
                warnings.push(format!(
                    "extension `{}`: calls to tool `{tool}` are refused: its argument schema is not valid JSON Schema: {why}",
                    l.name
                ));
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
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = Table {
            loaded,
            tools,
            forwarders,
        };
        for message in warnings {
            self.warn(message);
        }
    }

    pub(crate) fn loaded(&self) -> Vec<Arc<Loaded>> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .loaded
            .clone()
    }

    fn find(&self, name: &str) -> Result<Arc<Loaded>, HostError> {
        self.loaded()
            .into_iter()
            .find(|l| l.name == name)
            .ok_or_else(|| HostError::NotLoaded(name.to_string()))
    }

    /// The enabled extensions, in enable order.
    pub fn extensions(&self) -> Vec<String> {
        self.loaded().iter().map(|l| l.name.clone()).collect()
    }

    /// Every tool, with its extension and whether it is always loaded or deferred.
    pub fn tools(&self) -> Vec<ToolDefinition> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .clone()
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

    /// Call a tool by the name `tools()` gives it. Progress goes to `updates`; cancelling (or
    /// dropping the future) sends `cancel` on the wire.
    pub async fn call_tool(
        &self,
        name: &str,
        args: Value,
        updates: Option<UpdateSink>,
        cancel: Option<CancellationToken>,
    ) -> Result<Value, HostError> {
        let (loaded, tool) = {
            let table = self.table.read().unwrap_or_else(|p| p.into_inner());
            let def = table
                .tools
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| HostError::UnknownTool(name.to_string()))?;
            let loaded = table
                .loaded
                .iter()
                .find(|l| l.name == def.extension)
                .cloned()
                .ok_or_else(|| HostError::UnknownTool(name.to_string()))?;
            (loaded, def.tool.clone())
        };
        // Refused before the server is started or sent anything.
        loaded.ext.check_args(&tool, &args)?;
        // The live server's handshake, by reference: no copy on the hot path.
        let live = loaded.ext.live().await?;
        self.refuse_unapproved(&loaded, &live.init);
        if !live
            .init
            .capability_params
            .tools
            .iter()
            .any(|t| t.name == tool)
        {
            return Err(HostError::NotServed {
                extension: loaded.name.clone(),
                tool,
            });
        }
        Ok(loaded
            .ext
            .send_tool_call(&tool, args, updates, cancel)
            .await?)
    }

    /// Log, once per server process, the tools it serves that the manifest does not approve.
    fn refuse_unapproved(&self, loaded: &Loaded, init: &yep_protocol::InitializeResult) {
        let pid = loaded.ext.pid();
        let mut warned = loaded.warned_pid.lock().unwrap_or_else(|p| p.into_inner());
        if *warned == pid {
            return;
        }
        *warned = pid;
        drop(warned);
        for t in &init.capability_params.tools {
            if loaded.manifest.tool(&t.name).is_none() {
                self.warn(format!("extension `{}`: refusing tool `{}`, which the approved manifest does not declare", loaded.name, t.name));
            }
        }
    }

    /// The tools each extension's running server serves, clamped to its manifest.
    pub async fn served_tools(&self, extension: &str) -> Result<Vec<String>, HostError> {
        let loaded = self.find(extension)?;
        let init = loaded.ext.handshake().await?;
        self.refuse_unapproved(&loaded, &init);
        Ok(init
            .capability_params
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

    /// Run `<ext>:<name>` with the raw argument text.
    pub async fn execute_command(
        &self,
        command: &str,
        arguments: &str,
    ) -> Result<CommandExecuteResult, HostError> {
        let unknown = || HostError::UnknownCommand(command.to_string());
        let (ext, name) = command.split_once(':').ok_or_else(unknown)?;
        let loaded = self.find(ext).map_err(|_| unknown())?;
        if !loaded
            .manifest
            .yolop
            .commands
            .iter()
            .any(|c| c.name == name)
        {
            return Err(unknown());
        }
        Ok(loaded.ext.execute_command(name, arguments).await?)
    }

    /// The latest status per extension.
    pub fn status(&self) -> BTreeMap<String, StatusEntry> {
        self.events
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Set one plain config field (validated, persisted) and push it to a running server with
    /// `config/changed`: `ok` keeps the process; `restart-required` (or a server that does not
    /// know the method) respawns it with the new config.
    pub async fn set_config(
        &self,
        name: &str,
        field: &str,
        value: Value,
    ) -> Result<yep_protocol::ConfigStatus, HostError> {
        use crate::store::config;
        let loaded = self.find(name)?;
        let (home, manifest, field) = (
            self.home.clone(),
            loaded.manifest.clone(),
            field.to_string(),
        );
        off_thread(move || config::set_plain(&home, &manifest, &field, value)).await?;
        let (plain, env) = config::server_inputs(&self.home, &loaded.manifest)?;
        loaded.ext.set_inputs(plain.clone(), env);
        if loaded.ext.pid().is_none() {
            return Ok(yep_protocol::ConfigStatus::Ok);
        }
        let status = loaded.ext.config_changed(plain).await?;
        if status == yep_protocol::ConfigStatus::RestartRequired {
            loaded.ext.stop().await;
            loaded.ext.handshake().await?;
        }
        Ok(status)
    }

    /// The running server's pid, if it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.find(name).ok().and_then(|l| l.ext.pid())
    }

    /// Restart one extension's server within the same approved surface.
    pub async fn reload(&self, name: &str) -> Result<(), HostError> {
        let loaded = self.find(name)?;
        loaded.ext.stop().await;
        self.events.clear(name);
        loaded.ext.handshake().await?;
        Ok(())
    }

    /// Write the enable state: it takes the home's file lock, which another `yep` may hold
    /// for a while, so it runs off the async threads.
    async fn persist_enabled(&self, name: &str, on: bool) -> Result<(), HostError> {
        let (home, name) = (self.home.clone(), name.to_string());
        off_thread(move || home.set_enabled(&name, on)).await?;
        Ok(())
    }

    /// Enable an extension for this session from the next turn on, and in settings. Required
    /// config fields nobody set are asked for through the `AskSink` by kind (secret: masked,
    /// `enum`: a selector, else free text). Returns the fields still missing (`setup_incomplete`).
    pub async fn activate(&self, name: &str) -> Result<Vec<String>, HostError> {
        let _one_at_a_time = self.lifecycle.lock().await;
        self.persist_enabled(name, true).await?;
        let manifest = Manifest::load(&self.home.package_dir(name)).map_err(StoreError::from)?;
        let missing = self.setup(name, &manifest).await?;
        if self.find(name).is_ok() {
            return Ok(missing);
        }
        let loaded = Arc::new(self.load(name).map_err(|why| {
            HostError::from(StoreError::Invalid(format!(
                "cannot activate `{name}`: {}",
                crate::error::report(&why)
            )))
        })?);
        let mut all = self.loaded();
        all.push(Arc::clone(&loaded));
        self.rebuild(all);
        self.start_eager(vec![loaded]).await;
        Ok(missing)
    }

    /// Ask for unset required fields; store the answers. Returns what is still unset.
    async fn setup(&self, name: &str, manifest: &Manifest) -> Result<Vec<String>, HostError> {
        setup(&self.home, name, manifest, self.opts.ask_sink.as_deref()).await
    }

    /// Disable an extension for this session from the next turn on, and in settings.
    pub async fn deactivate(&self, name: &str) -> Result<(), HostError> {
        let _one_at_a_time = self.lifecycle.lock().await;
        self.persist_enabled(name, false).await?;
        let Ok(loaded) = self.find(name) else {
            return Ok(());
        };
        let rest: Vec<_> = self
            .loaded()
            .into_iter()
            .filter(|l| l.name != name)
            .collect();
        self.rebuild(rest);
        loaded.stop_forwarding();
        loaded.ext.stop().await;
        self.events.clear(name);
        Ok(())
    }

    /// Stop every server gracefully, in parallel, within `grace` each.
    pub async fn shutdown(&self) {
        let mut tasks = tokio::task::JoinSet::new();
        for l in self.loaded() {
            l.stop_forwarding();
            tasks.spawn(async move {
                l.ext.close().await;
            });
        }
        while tasks.join_next().await.is_some() {}
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
    warnings: &mut Vec<String>,
) -> Option<String> {
    let foreign = loaded.iter().find(|&&other| {
        other != ext
            && tool
                .strip_prefix(other)
                .is_some_and(|rest| rest.starts_with("__"))
    });
    if foreign.is_none() && !taken.contains(tool) {
        taken.insert(tool.to_string());
        return Some(tool.to_string());
    }
    let why = match foreign {
        Some(other) => format!("is in extension `{other}`'s `{other}__` namespace"),
        None => "collides with an existing tool".to_string(),
    };
    let qualified = format!("{ext}__{tool}");
    if taken.insert(qualified.clone()) {
        warnings.push(format!(
            "tool `{tool}` of `{ext}` {why}; registered as `{qualified}`"
        ));
        Some(qualified)
    } else {
        warnings.push(format!(
            "tool `{tool}` of `{ext}` {why}, and `{qualified}` is taken too; refusing it"
        ));
        None
    }
}
