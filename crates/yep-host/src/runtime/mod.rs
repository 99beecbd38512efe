//! `ExtensionHost`: what an agent embeds. The user's enabled extensions become tools, hooks
//! around every tool call, prompt text, slash commands, a status line and questions, each held
//! to what the manifest approved (D4): the handshake can only narrow it.

mod agent;
mod call;
mod contrib;
mod events;
mod hooks;
mod host;
mod idle;
mod intercept;
pub mod launch;
mod load;
pub mod mcp;
mod panel;
mod prompt;
mod registry;
mod setup;
mod skill_files;
mod table;
mod tools;
mod trace;

pub use agent::{AgentAnswer, AgentEvent, Verdict};
pub use call::{Call, CallOutcome, PROGRESS_BUFFER, ProgressStream};
pub use contrib::{Agent, Skill};
pub use events::{AskSink, BuiltinError, Denied, DynAskSink, ServerTools, StatusEntry, StatusSink};
pub use hooks::{HookNote, MAX_HOOK_TIMEOUT_MS, PreDecision, UnavailableHook};
pub(crate) use host::WeakHost;
pub use host::{CommandInfo, ExtensionHost};
pub use idle::{ServerInfo, ServerState, duration_setting, idle_stop_setting};
pub use intercept::{MessageDecision, TurnDecision};
pub use mcp::McpSource;
pub use mcp::mcp_list_deadline_setting;
pub(crate) use mcp::{MCP_PREFIX, McpState};
pub use panel::ActivePanel;
pub use setup::setup;
pub use skill_files::{
    Frontmatter, FrontmatterError, SKILL_MAX_BYTES, SKILL_MAX_FILES, SkillFile, SkillTree,
    skill_digest, skill_frontmatter,
};
pub use tools::{SEARCH_TOOLS, ToolDefinition};
pub use trace::TraceEvent;

use crate::store::StoreError;
use crate::supervisor::{ExtensionError, SupervisorOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use table::Loaded;

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
    /// Refuse tool arguments (before the call) and results (after it) that carry what looks
    /// like a credential (`--block-secrets`: AWS access key ids, GitHub, Slack, Google, OpenAI
    /// and Anthropic tokens, PEM private keys; [`crate::audit::find_in_value`]). On as well
    /// when `settings.toml` says `[audit] block_secrets = true`. Off (the default): no scan
    /// at all.
    pub block_secrets: bool,
    /// How long an MCP server's first `tools/list` may take before the session serves the
    /// tools its approval pinned in its place, marks it slow (the health stream's `Slow`,
    /// `mcp_status()`'s `slow`) and waits on for the list in the background. Ten seconds by
    /// default; [`mcp_list_deadline_setting`] reads the user's choice from `settings.toml`.
    /// `None`: a server is waited for as long as its handshake may take, as is one with no
    /// pinned list whatever this says.
    pub mcp_list_deadline: Option<Duration>,
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
            block_secrets: false,
            mcp_list_deadline: Some(mcp::DEFAULT_MCP_LIST_DEADLINE),
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
    /// A command the user switched off (`yep disable <extension> --command <command>`).
    #[error(
        "command `{extension}:{}` is switched off; `yep enable {extension} --command {}` turns it on",
        crate::text::escape(command),
        crate::text::escape(command)
    )]
    CommandOff { extension: String, command: String },
    #[error("extension `{0}` is not enabled in this session")]
    NotLoaded(String),
    #[error(transparent)]
    Extension(Box<ExtensionError>),
    #[error(transparent)]
    Store(Box<StoreError>),
    #[error("the extension host was shut down")]
    ShutDown,
    /// The call's arguments or result carry what looks like a credential, and
    /// [`HostOptions::block_secrets`] refuses it. The text names the shape, never the value.
    #[error("{0}")]
    Secret(crate::audit::SecretFound),
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
            HostError::CommandOff { extension, .. } => Some(extension),
            HostError::Activate { extension, .. } => Some(extension),
            _ => None,
        }
    }
}
