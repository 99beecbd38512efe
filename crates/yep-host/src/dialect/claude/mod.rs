//! Claude Code plugins (and Codex and Agent Plugins packages, which share their shape): no
//! server, but command hooks, each a short-lived process run contained
//! ([`crate::process::run_to_end`]), with Claude Code's contract on stdin and stdout ([`io`]),
//! and slash commands expanded as Claude Code expands them ([`command`]).
//!
//! [`ClaudeCode`] is the dialect, over a transport that gives it nothing to read
//! (`supervisor::NoStreams`): the supervisor "starts" a plugin as it starts any server, so hooks, budgets,
//! `on_error`, health events and ordering are the runtime's, unchanged. The peer runs only
//! what the lock pinned ([`ClaudePin`]): each hook's command line and each command's inline
//! commands, never what the files say now.

pub(crate) mod command;
pub(crate) mod io;
mod names;

pub(crate) use names::ToolNames;

use crate::capability::{
    CommandResult, Events, HookAnswer, HookEvent, HookFiring, HookOutcome, Intercept,
    InterceptOutcome, Offer, RemoteError, ToolCall, ToolResult, TraceEvent,
};
use crate::dialect::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFuture, Streams};
use crate::health::HealthEvent;
use crate::process::{RunLimits, RunOutput, SpawnSpec};
use crate::rpc::{CallError, CloseReason, ConnectionOptions};
use crate::store::claude::{ClaudePin, CommandHook};
use crate::text::escape;
use io::{About, Event, Said};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The most stdout a hook's answer is read from; the rest is dropped, and the user told.
pub(crate) const MAX_HOOK_STDOUT: usize = 1024 * 1024;

/// How long one inline command of a slash command may run.
pub(crate) const INLINE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most output of one inline command put into a command's text.
pub(crate) const MAX_INLINE_OUTPUT: usize = 64 * 1024;

/// The longest a hook that answered `{"async": true}` runs on in the background.
pub(crate) const MAX_BACKGROUND: Duration = Duration::from_secs(600);

/// What the runtime asks a [`ClaudeCode`] peer by, for its name in logs and `yep list`.
pub(crate) const WIRE: &str = "Claude Code hooks";

/// The Claude Code dialect for one installed plugin: what its lock pinned, and how its
/// commands run (its package, and the recipe its server would be spawned by).
pub(crate) struct ClaudeCode {
    plan: Arc<Plan>,
}

struct Plan {
    pin: ClaudePin,
    package_dir: PathBuf,
    /// How its server would be spawned (its env, log, sandbox mode and grants, data dir): each
    /// hook or inline command runs so, with its own program, in the workspace of the moment.
    spawn: SpawnSpec,
    tool_names: ToolNames,
}

impl ClaudeCode {
    /// The dialect that runs `pin` from `package_dir`, each command spawned as `spawn` says
    /// (its env, log, sandbox and data dir), naming tools as `tool_names` does. A hook that
    /// fails (crashes, hangs, is missing) is an error, never an allow: the approved hook's
    /// `on_error` decides whether the call goes on.
    pub(crate) fn new(
        pin: ClaudePin,
        package_dir: PathBuf,
        spawn: SpawnSpec,
        tool_names: ToolNames,
    ) -> ClaudeCode {
        ClaudeCode {
            plan: Arc::new(Plan {
                pin,
                package_dir,
                spawn,
                tool_names,
            }),
        }
    }
}

impl Dialect for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn post_hooks_answer(&self) -> bool {
        true
    }

    fn intercepts(&self, point: &str) -> bool {
        let event = match point {
            "user_prompt_submit" => Event::UserPromptSubmit,
            "stop" => Event::Stop,
            _ => return false,
        };
        self.plan.pin.hooks.iter().any(|h| h.event == event.name())
    }

    fn open(
        &self,
        _streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        _opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        let plan = Arc::clone(&self.plan);
        Box::pin(async move {
            let data_dir = PathBuf::from(&hello.data_dir);
            // Claude Code's own state (`~/.claude`) lives in the data dir: $HOME is not
            // reachable from the sandbox. Best effort: a hook that needs it says so itself.
            let _ = std::fs::create_dir_all(data_dir.join("claude"));
            let transcript = data_dir.join("transcript.jsonl");
            if !transcript.exists() {
                let _ = std::fs::write(&transcript, b"");
            }
            let peer = Arc::new(ClaudePeer {
                offer: Offer {
                    name: hello.extension.clone(),
                    wire: WIRE.into(),
                    dynamic_prompt: plan.pin.hooks.iter().any(|h| h.event == "SessionStart"),
                    ..Offer::default()
                },
                extension: hello.extension,
                session_id: hello.session_id,
                workspace: Mutex::new(PathBuf::from(hello.workspace_root)),
                transcript,
                data_dir,
                plan,
                events,
                closed: CancellationToken::new(),
                reason: Mutex::new(None),
                calls: AtomicU64::new(0),
                session_context: watch::channel(None).0,
            });
            // SessionStart runs once, as the plugin starts, on its own task (a prompt that
            // stops waiting for it never stops it): its context is prompt text.
            let starting = Arc::clone(&peer);
            tokio::spawn(async move {
                let closed = starting.closed.clone();
                tokio::select! {
                    text = starting.run_session_start() => {
                        starting.session_context.send_replace(Some(Arc::from(text)));
                    }
                    () = closed.cancelled() => {}
                }
            });
            Ok(peer as Arc<dyn Peer>)
        })
    }
}

/// One plugin, started: it runs pinned commands on demand.
struct ClaudePeer {
    offer: Offer,
    extension: String,
    session_id: String,
    workspace: Mutex<PathBuf>,
    transcript: PathBuf,
    data_dir: PathBuf,
    plan: Arc<Plan>,
    events: Arc<dyn Events>,
    closed: CancellationToken,
    reason: Mutex<Option<CloseReason>>,
    /// Numbers the tool calls its hooks see (`tool_use_id`).
    calls: AtomicU64,
    /// What its SessionStart hooks said, once they have run.
    session_context: watch::Sender<Option<Arc<str>>>,
}

/// Why a hook said nothing: its command, and how it failed (escaped, with its log).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HookFailed(String);

/// How one hook went: what it said, or why it said nothing.
type Ran = Result<Said, HookFailed>;

impl ClaudePeer {
    fn workspace(&self) -> PathBuf {
        self.workspace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The environment a hook or inline command gets: the package's env-mapped config and
    /// secrets, and Claude Code's variables.
    fn env(&self, workspace: &Path) -> Vec<(String, String)> {
        let root = self.plan.package_dir.to_string_lossy().into_owned();
        let data = self.data_dir.to_string_lossy().into_owned();
        let mut env = self.plan.spawn.env.clone();
        env.extend([
            ("CLAUDE_PLUGIN_ROOT".into(), root.clone()),
            ("CLAUDE_PLUGIN_DATA".into(), data.clone()),
            ("PLUGIN_ROOT".into(), root),
            ("PLUGIN_DATA".into(), data),
            (
                "CLAUDE_PROJECT_DIR".into(),
                workspace.to_string_lossy().into_owned(),
            ),
            (
                "CLAUDE_CONFIG_DIR".into(),
                self.data_dir.join("claude").to_string_lossy().into_owned(),
            ),
            // `git status` in a hook or an inline command never takes the index lock, and
            // reads no config from the home, which the sandbox hides.
            ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
            ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ]);
        env
    }

    /// How `hook` runs: its command line through `sh -c`, or (exec form) its program with
    /// its arguments, the package's own variables filled in; in the workspace, contained as
    /// the package's server would be.
    fn spawn_spec(&self, program: String, args: Vec<String>) -> SpawnSpec {
        let workspace = self.workspace();
        let env = self.env(&workspace);
        let events = Arc::clone(&self.events);
        let extension = self.extension.clone();
        // Each host a hook or inline command reaches for without a grant is told, naming the
        // grant: a hook that wants the network fails where the user sees it.
        let denied = crate::process::DeniedSink(Arc::new(move |denial: yep_sandbox::Denial| {
            events.health(HealthEvent::SandboxDenied {
                extension: extension.clone(),
                target: denial.target,
                grant: denial.grant,
                message: denial.message,
            })
        }));
        let mut spec = self.plan.spawn.clone();
        if let Some(sandboxed) = spec.sandbox.as_mut() {
            sandboxed.workspace = Some(workspace.clone());
            sandboxed.on_denied = Some(denied);
            sandboxed.tell_refused_hosts = true;
        }
        spec.program = program;
        spec.args = args;
        spec.env = env;
        spec.cwd = workspace;
        spec
    }

    fn hook_spec(&self, hook: &CommandHook) -> SpawnSpec {
        if hook.args.is_empty() {
            return self.spawn_spec("/bin/sh".into(), vec!["-c".into(), hook.command.clone()]);
        }
        let fill = |s: &str| {
            let root = self.plan.package_dir.to_string_lossy();
            let data = self.data_dir.to_string_lossy();
            s.replace("${CLAUDE_PLUGIN_ROOT}", &root)
                .replace("${PLUGIN_ROOT}", &root)
                .replace("${CLAUDE_PLUGIN_DATA}", &data)
                .replace("${PLUGIN_DATA}", &data)
        };
        self.spawn_spec(
            fill(&hook.command),
            hook.args.iter().map(|a| fill(a)).collect(),
        )
    }

    /// The stdin of a hook of `event` about `about`.
    fn input(&self, event: Event, about: &About<'_>) -> Vec<u8> {
        let workspace = self.workspace().to_string_lossy().into_owned();
        let transcript = self.transcript.to_string_lossy();
        // An agent's own session when the event is its (`yep hook`), else the host's.
        let agent = crate::capability::agent_session();
        let context = io::Context {
            session_id: agent.as_deref().unwrap_or(&self.session_id),
            cwd: &workspace,
            transcript_path: &transcript,
        };
        io::input(event, &context, about).to_string().into_bytes()
    }

    /// Run `hooks` of `event` at once, each with `input` within its own timeout (at most
    /// `bound`), and hear each one. An `async` hook is started in the background and says
    /// nothing.
    async fn run_hooks(
        &self,
        event: Event,
        hooks: Vec<CommandHook>,
        input: Vec<u8>,
        bound: Duration,
    ) -> Vec<(CommandHook, Ran)> {
        let input = Arc::new(input);
        let mut running = tokio::task::JoinSet::new();
        let mut started = Vec::new();
        for (i, hook) in hooks.into_iter().enumerate() {
            let spec = self.hook_spec(&hook);
            let limits = RunLimits {
                timeout: Duration::from_secs(hook.effective_timeout()).min(bound),
                max_stdout: MAX_HOOK_STDOUT,
            };
            if hook.is_async {
                self.in_background(event, hook, spec, Arc::clone(&input));
                continue;
            }
            let input = Arc::clone(&input);
            let copy = hook.clone();
            let task = running.spawn(async move {
                let ran = crate::process::run_to_end(&spec, &input, limits).await;
                (i, hook, ran)
            });
            started.push((task.id(), i, copy));
        }
        let mut heard = Vec::new();
        while let Some(joined) = running.join_next().await {
            let (i, hook, ran) = match joined {
                Ok(done) => done,
                // Its runner died: a failure, never a silent allow.
                Err(e) => {
                    if let Some((_, i, hook)) = started.iter().find(|(id, ..)| *id == e.id()) {
                        let why = format!("hook `{}` could not run: {e}", escape(&hook.command));
                        heard.push((*i, hook.clone(), Err(HookFailed(why))));
                    }
                    continue;
                }
            };
            let said = match ran {
                Err(e) => Err(HookFailed(format!(
                    "hook `{}` could not start: {}",
                    escape(&hook.command),
                    e.source
                ))),
                Ok(out) => self.heard(event, &hook, out),
            };
            heard.push((i, hook, said));
        }
        // Answers merge in file order, as Claude Code merges them.
        heard.sort_by_key(|(i, ..)| *i);
        heard.into_iter().map(|(_, h, s)| (h, s)).collect()
    }

    /// What a hook that ran said; a `{"async": true}` first line hands the rest of its run to
    /// the background.
    fn heard(&self, event: Event, hook: &CommandHook, out: RunOutput) -> Ran {
        if out.dropped > 0 {
            self.warn(format!(
                "hook `{}` wrote {} bytes to stdout; only the first {MAX_HOOK_STDOUT} were read",
                escape(&hook.command),
                out.stdout.len() as u64 + out.dropped
            ));
        }
        let (code, signal) = ended(&out);
        let said = io::read(event, code, signal, &out.stdout, &out.stderr_tail).map_err(|e| {
            HookFailed(format!(
                "hook `{}` failed: {} (log: {})",
                escape(&hook.command),
                escape(&e.to_string()),
                out.log_path.display()
            ))
        })?;
        if let Some(message) = &said.system_message {
            self.warn(format!(
                "hook `{}`: {}",
                escape(&hook.command),
                escape(message)
            ));
        }
        Ok(said)
    }

    /// Run a hook that holds nothing: bounded by [`MAX_BACKGROUND`], and a failure is told.
    fn in_background(&self, event: Event, hook: CommandHook, spec: SpawnSpec, input: Arc<Vec<u8>>) {
        let limits = RunLimits {
            timeout: MAX_BACKGROUND,
            max_stdout: MAX_HOOK_STDOUT,
        };
        let (events, extension) = (Arc::clone(&self.events), self.extension.clone());
        let closed = self.closed.clone();
        tokio::spawn(async move {
            let ran = tokio::select! {
                ran = crate::process::run_to_end(&spec, &input, limits) => ran,
                () = closed.cancelled() => return,
            };
            let failed = match ran {
                Err(e) => Some(format!("it could not start: {}", e.source)),
                Ok(out) if out.status.is_some_and(|s| s.success()) => None,
                Ok(out) => Some(format!(
                    "{} (log: {})",
                    failure_of(event, &out),
                    out.log_path.display()
                )),
            };
            if let Some(why) = failed {
                events.health(HealthEvent::Warning {
                    extension: Some(extension.clone()),
                    message: format!(
                        "plugin `{extension}`: {} hook `{}`, run in the background, failed: {}",
                        event.name(),
                        escape(&hook.command),
                        escape(&why)
                    ),
                });
            }
        });
    }

    fn warn(&self, message: String) {
        self.events.health(HealthEvent::Warning {
            extension: Some(self.extension.clone()),
            message: format!("plugin `{}`: {message}", self.extension),
        });
    }

    /// The pinned hooks of tool event `event` that fire for a call of `tool` with `input`.
    fn hooks_for(&self, event: Event, tool: &str, input: &Value) -> Vec<CommandHook> {
        let command = (tool == "Bash")
            .then(|| input["command"].as_str())
            .flatten();
        self.plan
            .pin
            .hooks
            .iter()
            .filter(|h| h.event == event.name() && h.fires_for(tool, command))
            .cloned()
            .collect()
    }

    /// The pinned hooks of lifecycle `event` whose matcher takes `subject` (SessionStart's
    /// source, PreCompact's trigger), or all of them on an event Claude Code matches nothing
    /// on; never one with an `if` rule, which filters tool calls only.
    fn lifecycle_hooks(&self, event: Event, subject: Option<&str>) -> Vec<CommandHook> {
        self.plan
            .pin
            .hooks
            .iter()
            .filter(|h| h.event == event.name() && h.if_rule.is_none())
            .filter(|h| subject.is_none_or(|s| h.fires_for(s, None)))
            .cloned()
            .collect()
    }

    /// What SessionStart's hooks gave for the model, once they have run.
    async fn session_context(&self) -> Arc<str> {
        let mut said = self.session_context.subscribe();
        match said.wait_for(Option::is_some).await {
            Ok(text) => text.clone().unwrap_or_else(|| Arc::from("")),
            Err(_) => Arc::from(""),
        }
    }

    /// Run the SessionStart hooks: what they gave for the model.
    async fn run_session_start(&self) -> String {
        let hooks = self.lifecycle_hooks(Event::SessionStart, Some("startup"));
        if hooks.is_empty() {
            return String::new();
        }
        let input = self.input(Event::SessionStart, &About::Start("startup"));
        let bound = Duration::from_secs(crate::store::claude::hooks::MAX_LIFECYCLE_TIMEOUT_S);
        let mut said = Vec::new();
        for (hook, ran) in self
            .run_hooks(Event::SessionStart, hooks, input, bound)
            .await
        {
            match ran {
                Ok(s) => said.push(s),
                // SessionStart cannot block: a failure is told, and the session goes on.
                Err(why) => self.warn(format!(
                    "SessionStart hook `{}` gave the model nothing: {why}",
                    escape(&hook.command)
                )),
            }
        }
        io::merge(said).context.unwrap_or_default()
    }

    /// Run `hooks` of an observed `event`: what they say can only tell, and a failure is told.
    fn observe(
        &self,
        event: Event,
        hooks: Vec<CommandHook>,
        input: Vec<u8>,
    ) -> PeerFuture<'_, Result<(), PeerError>> {
        let bound = Duration::from_secs(crate::store::claude::hooks::MAX_LIFECYCLE_TIMEOUT_S);
        Box::pin(async move {
            if let Err(e) = self.lifecycle(event, hooks, input, bound).await {
                self.warn(e.to_string());
            }
            Ok(())
        })
    }

    /// Run `hooks` of a lifecycle `event` within `bound`: what they said together, or the
    /// failures of those that said nothing (a block said by one still stands).
    async fn lifecycle(
        &self,
        event: Event,
        hooks: Vec<CommandHook>,
        input: Vec<u8>,
        bound: Duration,
    ) -> Result<Said, PeerError> {
        if hooks.is_empty() {
            return Ok(Said::default());
        }
        let mut said = Vec::new();
        let mut failed = Vec::new();
        for (_, ran) in self.run_hooks(event, hooks, input, bound).await {
            match ran {
                Ok(s) => said.push(s),
                Err(why) => failed.push(why.0),
            }
        }
        let said = io::merge(said);
        if said.block.is_none() && said.stop.is_none() && !failed.is_empty() {
            return Err(self.failure(event, failed));
        }
        Ok(said)
    }

    /// Why the SessionStart text is not there after `waited`: which of the plugin's hooks
    /// run, how long each may, and where their stderr goes (`yep logs <plugin>`).
    fn still_starting(&self, waited: Duration) -> PeerError {
        let hooks: Vec<String> = self
            .lifecycle_hooks(Event::SessionStart, Some("startup"))
            .iter()
            .filter(|h| !h.is_async)
            .map(|h| {
                format!(
                    "`{}` (its timeout is {} s)",
                    escape(&h.command),
                    h.effective_timeout()
                )
            })
            .collect();
        let message = format!(
            "plugin `{}`'s SessionStart hook {} still runs after {:.1} s; its stderr: {} (`yep logs {}`)",
            self.extension,
            hooks.join(", "),
            waited.as_secs_f64(),
            self.plan.spawn.log_path.display(),
            self.extension
        );
        PeerError::call("prompt", CallError::Remote(RemoteError::new(0, message)))
    }

    fn failure(&self, event: Event, why: Vec<String>) -> PeerError {
        PeerError::call(
            event.name(),
            CallError::Remote(RemoteError::new(0, why.join("; "))),
        )
    }
}

/// How a run ended: its exit code, or the signal that ended it, in words (neither: it was
/// killed at its timeout).
fn ended(out: &RunOutput) -> (Option<i32>, Option<String>) {
    use std::os::unix::process::ExitStatusExt;
    let code = out.status.and_then(|s| s.code());
    let signal = out
        .status
        .filter(|s| s.signal().is_some())
        .map(|s| crate::process::describe_status(Some(s)));
    (code, signal)
}

/// Why a hook's run is a failure, in words.
fn failure_of(event: Event, out: &RunOutput) -> String {
    let (code, signal) = ended(out);
    match io::read(event, code, signal, b"", &out.stderr_tail) {
        Err(e) => e.to_string(),
        Ok(_) => crate::process::describe_status(out.status),
    }
}

impl Peer for ClaudePeer {
    fn offer(&self) -> &Offer {
        &self.offer
    }

    fn call_tool(
        &self,
        call: ToolCall,
        _timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>> {
        let message = format!(
            "plugin `{}` has no tools (no tool `{}`)",
            self.extension, call.tool
        );
        Box::pin(async move {
            Err(PeerError::call(
                "tools/call",
                CallError::Remote(RemoteError::new(RemoteError::METHOD_NOT_FOUND, message)),
            ))
        })
    }

    fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<HookAnswer, PeerError>> {
        let event = match firing.event {
            HookEvent::PreToolUse => Event::PreToolUse,
            HookEvent::PostToolUse => Event::PostToolUse,
        };
        let tool = self.plan.tool_names.claude(&firing.tool, &firing.args);
        let hooks = self.hooks_for(event, &tool.name, &tool.input);
        let id = format!("yep-{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1);
        let input = match (event, &firing.result) {
            (Event::PostToolUse, Some(response)) => self.input(
                event,
                &About::ToolDone {
                    name: &tool.name,
                    input: &tool.input,
                    id: &id,
                    response,
                },
            ),
            _ => self.input(
                event,
                &About::Tool {
                    name: &tool.name,
                    input: &tool.input,
                    id: &id,
                },
            ),
        };
        Box::pin(async move {
            if hooks.is_empty() {
                return Ok(HookOutcome::Allow.into());
            }
            let mut said = Vec::new();
            let mut failed = Vec::new();
            for (_, ran) in self.run_hooks(event, hooks, input, timeout).await {
                match ran {
                    Ok(s) => said.push(s),
                    Err(why) => failed.push(why.0),
                }
            }
            let said = io::merge(said);
            let context = said.context.clone();
            let blocked = match event {
                Event::PreToolUse => said
                    .stop
                    .clone()
                    .map(|stop| {
                        (
                            said.reason.clone().unwrap_or_else(|| stop.clone()),
                            Some(stop),
                        )
                    })
                    .or_else(|| {
                        (said.permission == Some(io::Permission::Deny)).then(|| {
                            (
                                said.reason.clone().unwrap_or_default(),
                                said.system_message.clone(),
                            )
                        })
                    }),
                _ => said
                    .block
                    .clone()
                    .or(said.stop.clone())
                    .map(|why| (why, None)),
            };
            // A deny stands whatever else failed; otherwise a failed hook is never an allow:
            // the runtime reports it, and the plugin's failure mode decides.
            if let Some((reason, user_message)) = blocked {
                return Ok(HookAnswer {
                    outcome: HookOutcome::Block {
                        reason,
                        user_message,
                    },
                    context,
                });
            }
            if !failed.is_empty() {
                return Err(self.failure(event, failed));
            }
            let outcome = match (said.permission, said.updated_input) {
                (Some(io::Permission::Ask), _) => HookOutcome::Ask {
                    reason: said.reason.unwrap_or_default(),
                },
                (_, Some(input)) if event == Event::PreToolUse => {
                    HookOutcome::Rewrite(tool.host_input(input))
                }
                _ => HookOutcome::Allow,
            };
            Ok(HookAnswer { outcome, context })
        })
    }

    fn prompt(&self, timeout: Duration) -> PeerFuture<'_, Result<String, PeerError>> {
        Box::pin(async move {
            // Answered before the caller's own deadline, so a wait is told with what it waits
            // on: the plugin, its hooks' commands and the log their stderr goes to.
            let wait = timeout.saturating_sub(timeout / 5);
            match tokio::time::timeout(wait, self.session_context()).await {
                Ok(text) => Ok(text.to_string()),
                Err(_) => Err(self.still_starting(wait)),
            }
        })
    }

    fn command(
        &self,
        name: &str,
        arguments: &str,
        _timeout: Duration,
    ) -> PeerFuture<'_, Result<CommandResult, PeerError>> {
        let pinned = self
            .plan
            .pin
            .commands
            .iter()
            .find(|c| c.name == name)
            .cloned();
        let arguments = arguments.to_string();
        let name = name.to_string();
        Box::pin(async move {
            let Some(pinned) = pinned else {
                return Ok(CommandResult {
                    success: false,
                    message: format!("plugin `{}` has no command `{name}`", self.extension),
                });
            };
            let file = self.plan.package_dir.join(&pinned.file);
            let text = crate::store::fsutil::read_regular_string(
                &file,
                crate::store::claude::MAX_PART_BYTES,
                crate::store::fsutil::Links::Refuse,
            );
            let text = match text {
                Ok(text) => text,
                Err(e) => {
                    return Ok(CommandResult {
                        success: false,
                        message: format!(
                            "plugin `{}`: command `{name}` cannot be read from {}: {e}",
                            self.extension, pinned.file
                        ),
                    });
                }
            };
            let body = crate::store::claude::frontmatter::Frontmatter::parse(&text).body;
            let not_permitted = pinned.not_permitted();
            // Only what was pinned runs, and of that only what its rules permit.
            let permits = |command: &str| {
                pinned.inline.iter().any(|c| c == command) && !not_permitted.contains(&command)
            };
            let expanded =
                command::expand(&body, &arguments, permits, |line| self.inline(line)).await;
            let message = command::attach_files(&expanded, &self.workspace());
            Ok(CommandResult {
                success: true,
                message,
            })
        })
    }

    fn workspace_changed(&self, root: &str) -> PeerFuture<'_, Result<(), PeerError>> {
        *self.workspace.lock().unwrap_or_else(|p| p.into_inner()) = PathBuf::from(root);
        Box::pin(async { Ok(()) })
    }

    fn intercept(
        &self,
        point: &Intercept,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<InterceptOutcome, PeerError>> {
        let (event, input) = match point {
            Intercept::PromptSubmit { prompt } => (
                Event::UserPromptSubmit,
                self.input(Event::UserPromptSubmit, &About::Prompt(prompt)),
            ),
            Intercept::Stop { active } => (
                Event::Stop,
                self.input(Event::Stop, &About::Stop { active: *active }),
            ),
            _ => return Box::pin(async { Ok(InterceptOutcome::Continue) }),
        };
        let hooks = self.lifecycle_hooks(event, None);
        Box::pin(async move {
            let said = self.lifecycle(event, hooks, input, timeout).await?;
            Ok(match (said.block.or(said.stop), said.context) {
                (Some(reason), _) => InterceptOutcome::Block { reason },
                (None, Some(text)) => InterceptOutcome::Context(text),
                (None, None) => InterceptOutcome::Continue,
            })
        })
    }

    fn trace(&self, event: &TraceEvent) -> PeerFuture<'_, Result<(), PeerError>> {
        // The lifecycle events Claude Code's hooks watch (SessionStart ran as the plugin
        // started): each runs its hooks, which can only tell.
        let text =
            |key: &str, default: &str| event.data[key].as_str().unwrap_or(default).to_string();
        let (event, input) = match event.event_type.as_str() {
            "session_end" | "session.ended" => {
                let reason = text("reason", "other");
                (
                    Event::SessionEnd,
                    self.input(Event::SessionEnd, &About::End(&reason)),
                )
            }
            "pre_compact" | "session.compacting" => {
                let trigger = text("trigger", "manual");
                let hooks = self.lifecycle_hooks(Event::PreCompact, Some(&trigger));
                let input = self.input(Event::PreCompact, &About::Compact(&trigger));
                return self.observe(Event::PreCompact, hooks, input);
            }
            "notification" => {
                let message = text("message", "");
                (
                    Event::Notification,
                    self.input(Event::Notification, &About::Notice(&message)),
                )
            }
            "subagent_stop" => (
                Event::SubagentStop,
                self.input(Event::SubagentStop, &About::Stop { active: false }),
            ),
            _ => return Box::pin(async { Ok(()) }),
        };
        let hooks = self.lifecycle_hooks(event, None);
        self.observe(event, hooks, input)
    }

    fn request(
        &self,
        method: &str,
        _params: Option<Value>,
        _timeout: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>> {
        let error = PeerError::call(
            method,
            CallError::Remote(RemoteError::new(
                RemoteError::METHOD_NOT_FOUND,
                format!("a Claude Code plugin answers no `{method}`: it has no server"),
            )),
        );
        Box::pin(async move { Err(error) })
    }

    fn shutdown(&self, _grace: Duration) -> PeerFuture<'_, ()> {
        self.close(CloseReason::Shutdown);
        Box::pin(async {})
    }

    fn close(&self, reason: CloseReason) {
        let mut held = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_none() {
            *held = Some(reason);
        }
        self.closed.cancel();
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn closed(&self) -> PeerFuture<'_, CloseReason> {
        Box::pin(async move {
            self.closed.cancelled().await;
            self.close_reason().unwrap_or(CloseReason::Shutdown)
        })
    }
}

impl ClaudePeer {
    /// Run one inline command of a slash command in the workspace, contained, its stderr
    /// with its stdout, bounded in time and output.
    async fn inline(&self, line: String) -> command::Ran {
        let spec = self.spawn_spec(
            "/bin/sh".into(),
            vec!["-c".into(), format!("exec 2>&1\n{line}")],
        );
        let limits = RunLimits {
            timeout: INLINE_TIMEOUT,
            max_stdout: MAX_INLINE_OUTPUT,
        };
        match crate::process::run_to_end(&spec, b"", limits).await {
            Err(e) => command::Ran::Failed(format!("it could not start: {}", e.source)),
            Ok(out) if out.timed_out() => command::Ran::Failed(format!(
                "it ran past {} s and was stopped",
                INLINE_TIMEOUT.as_secs()
            )),
            Ok(out) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                if out.dropped > 0 {
                    text.push_str(&format!(
                        "\n[output cut at {MAX_INLINE_OUTPUT} bytes: {} more not shown]",
                        out.dropped
                    ));
                }
                match out.status.is_some_and(|s| s.success()) {
                    true => command::Ran::Output(text),
                    false => command::Ran::Output(format!(
                        "{text}\n[{}]",
                        crate::process::describe_status(out.status)
                    )),
                }
            }
        }
    }
}
