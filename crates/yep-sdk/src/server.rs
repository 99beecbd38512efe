//! The builder and the serve loop: framing, handshake, dispatch, cancellation.

use crate::context::{CancelFlag, Context, Notifier, Shared};
use crate::framing::{Line, Wire, read_line_capped};
use crate::pool::Pool;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use yep_protocol::{
    CancelResult, CommandExecuteResult, ConfigChangedResult, ConfigStatus, ErrorCode, ErrorObject,
    HookDecision, HookFireParams, HostNotification, HostRequest, InitializeParams,
    InitializeResult, Message, PROTOCOL_VERSION, PromptContribution, PromptParams, ServedTool,
    TraceEventParams, error_line, result_line, version_compatible,
};

/// What a tool handler returns.
pub type ToolResult = Result<Value, ToolError>;

/// A tool failure, sent to the host as an error object.
#[derive(Debug, Clone)]
pub struct ToolError(pub ErrorObject);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(ErrorObject::message(message))
    }

    /// Mark the error as worth retrying.
    pub fn retryable(mut self) -> Self {
        self.0.retryable = true;
        self
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

impl From<ErrorObject> for ToolError {
    fn from(err: ErrorObject) -> Self {
        ToolError(err)
    }
}

type ToolHandler = Arc<dyn Fn(&Value, &Context) -> ToolResult + Send + Sync>;
type HookHandler = Arc<dyn Fn(&HookFireParams) -> HookDecision + Send + Sync>;
type PromptHandler = Arc<dyn Fn() -> String + Send + Sync>;
type CommandHandler = Arc<dyn Fn(&str, &Context) -> CommandExecuteResult + Send + Sync>;
type ConfigHandler = Box<dyn FnMut(&Value) -> ConfigStatus + Send>;
type WorkspaceHandler = Box<dyn FnMut(&str) + Send>;
type TraceHandler = Box<dyn FnMut(&TraceEventParams) + Send>;
type StartHandler = Box<dyn FnMut(&Notifier) + Send>;

/// At EOF, requests still running get this long to answer before they are cancelled.
const EOF_GRACE: Duration = Duration::from_secs(2);

/// The default cap on one incoming line.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// A capability server under construction. Register handlers, then [`Server::serve`].
pub struct Server {
    name: String,
    instructions: Option<String>,
    tools: BTreeMap<String, ToolHandler>,
    hook: Option<HookHandler>,
    dynamic_prompt: Option<PromptHandler>,
    commands: BTreeMap<String, CommandHandler>,
    config: Option<ConfigHandler>,
    workspace: Option<WorkspaceHandler>,
    trace: Option<TraceHandler>,
    start: Option<StartHandler>,
    max_concurrency: usize,
    max_frame_bytes: usize,
}

impl Server {
    pub fn new(name: impl Into<String>) -> Self {
        Server {
            name: name.into(),
            instructions: None,
            tools: BTreeMap::new(),
            hook: None,
            dynamic_prompt: None,
            commands: BTreeMap::new(),
            config: None,
            workspace: None,
            trace: None,
            start: None,
            max_concurrency: 64,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
        }
    }

    /// Static system-prompt text, sent in the handshake.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Serve a tool. The handler gets the call's `args` and a [`Context`].
    pub fn tool<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&Value, &Context) -> ToolResult + Send + Sync + 'static,
    {
        self.tools.insert(name.into(), Arc::new(handler));
        self
    }

    /// Answer `hook/fire` for every subscription in the manifest; inspect `event`/`tool_name`.
    pub fn on_hook<F>(mut self, handler: F) -> Self
    where
        F: Fn(&HookFireParams) -> HookDecision + Send + Sync + 'static,
    {
        self.hook = Some(Arc::new(handler));
        self
    }

    /// Recompute the system-prompt contribution per turn (`prompt/contribution`).
    pub fn dynamic_prompt<F>(mut self, handler: F) -> Self
    where
        F: Fn() -> String + Send + Sync + 'static,
    {
        self.dynamic_prompt = Some(Arc::new(handler));
        self
    }

    /// Serve a slash command. The handler gets the raw argument text.
    pub fn command<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&str, &Context) -> CommandExecuteResult + Send + Sync + 'static,
    {
        self.commands.insert(name.into(), Arc::new(handler));
        self
    }

    /// Receive config: once with `initialize.config` at handshake (the answer is ignored
    /// there), then on every `config/changed`, answering whether the change applied in place.
    pub fn on_config<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&Value) -> ConfigStatus + Send + 'static,
    {
        self.config = Some(Box::new(handler));
        self
    }

    /// Receive `workspace/changed`: the new workspace root.
    pub fn on_workspace<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&str) + Send + 'static,
    {
        self.workspace = Some(Box::new(handler));
        self
    }

    /// Receive `trace/event` notifications, in order, never answered.
    pub fn on_trace<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&TraceEventParams) + Send + 'static,
    {
        self.trace = Some(Box::new(handler));
        self
    }

    /// Run once the handshake completes (`initialized`), e.g. to push a first status.
    pub fn on_start<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&Notifier) + Send + 'static,
    {
        self.start = Some(Box::new(handler));
        self
    }

    /// How many requests may run at once (default 64). Past it, requests queue.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n;
        self
    }

    /// The longest incoming line accepted (default 4 MiB). Longer lines are skipped.
    pub fn max_frame_bytes(mut self, n: usize) -> Self {
        self.max_frame_bytes = n;
        self
    }

    /// Serve on this process's stdin/stdout until EOF or `exit`.
    ///
    /// On Unix, stdout is then re-pointed at stderr, so a stray `println!` in a handler lands
    /// in the host's log instead of corrupting the wire.
    pub fn serve(self) -> std::io::Result<()> {
        let wire = guard_stdout()?;
        self.serve_on(std::io::stdin().lock(), wire)
    }

    /// Serve on any reader/writer pair (tests, sockets).
    pub fn serve_on<R: Read, W: Write + Send + 'static>(
        self,
        input: R,
        output: W,
    ) -> std::io::Result<()> {
        let shared = Arc::new(Shared {
            wire: Wire::new(Box::new(output)),
            asks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let max_frame = self.max_frame_bytes;
        let mut serve = Serve::new(self, shared);
        let mut reader = BufReader::with_capacity(64 * 1024, input);
        let mut buf = Vec::with_capacity(4096);
        loop {
            match read_line_capped(&mut reader, &mut buf, max_frame)? {
                Line::Eof => {
                    serve.finish(EOF_GRACE);
                    return Ok(());
                }
                Line::TooLong(n) => eprintln!(
                    "yep-sdk: skipping a {n}-byte line over the {max_frame}-byte frame cap"
                ),
                Line::Complete if buf.iter().all(u8::is_ascii_whitespace) => {}
                Line::Complete => match Message::parse(&buf) {
                    Ok(msg) => {
                        if serve.handle(msg) == Flow::Exit {
                            serve.finish(EOF_GRACE);
                            return Ok(());
                        }
                    }
                    Err(err) => eprintln!("yep-sdk: skipping malformed wire line: {err}"),
                },
            }
        }
    }
}

/// Re-point fd 1 at stderr and return a private handle on the real stdout for the wire.
#[cfg(unix)]
fn guard_stdout() -> std::io::Result<Box<dyn Write + Send>> {
    use std::os::fd::{FromRawFd, OwnedFd};
    std::io::stdout().flush()?;
    // SAFETY: dup/dup2 on the process's own standard descriptors; the duplicate is owned by
    // exactly one `OwnedFd` and nothing else closes it.
    let wire = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    Ok(Box::new(std::io::BufWriter::new(std::fs::File::from(wire))))
}

#[cfg(not(unix))]
fn guard_stdout() -> std::io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(std::io::stdout()))
}

#[derive(PartialEq)]
enum Flow {
    Continue,
    Exit,
}

/// Notifications run in arrival order on their own thread, off the reader.
enum Ordered {
    Initialized,
    Trace(TraceEventParams),
    Workspace(String),
}

struct Serve {
    shared: Arc<Shared>,
    handlers: Arc<Handlers>,
    config: Arc<Mutex<Option<ConfigHandler>>>,
    inflight: Arc<Mutex<HashMap<u64, Arc<CancelFlag>>>>,
    pool: Pool,
    ordered: Option<Sender<Ordered>>,
    ordered_thread: Option<std::thread::JoinHandle<()>>,
}

struct Handlers {
    name: String,
    instructions: Option<String>,
    tools: BTreeMap<String, ToolHandler>,
    hook: Option<HookHandler>,
    dynamic_prompt: Option<PromptHandler>,
    commands: BTreeMap<String, CommandHandler>,
    has_trace: bool,
}

impl Serve {
    fn new(server: Server, shared: Arc<Shared>) -> Self {
        let (tx, rx) = channel::<Ordered>();
        let notifier = Notifier {
            shared: Arc::clone(&shared),
        };
        let (mut trace, mut workspace, mut start) = (server.trace, server.workspace, server.start);
        let has_trace = trace.is_some();
        let spawned = std::thread::Builder::new()
            .name("yep-notifications".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        Ordered::Initialized => start.as_mut().map_or((), |h| h(&notifier)),
                        Ordered::Trace(ev) => trace.as_mut().map_or((), |h| h(&ev)),
                        Ordered::Workspace(root) => workspace.as_mut().map_or((), |h| h(&root)),
                    }
                }
            });
        let ordered_thread = spawned
            .map_err(|err| eprintln!("yep-sdk: failed to start the notification thread: {err}"))
            .ok();
        Serve {
            shared,
            handlers: Arc::new(Handlers {
                name: server.name,
                instructions: server.instructions,
                tools: server.tools,
                hook: server.hook,
                dynamic_prompt: server.dynamic_prompt,
                commands: server.commands,
                has_trace,
            }),
            config: Arc::new(Mutex::new(server.config)),
            inflight: Arc::new(Mutex::new(HashMap::new())),
            pool: Pool::new(server.max_concurrency),
            ordered: Some(tx),
            ordered_thread,
        }
    }

    fn send_result(&self, id: u64, result: Result<Value, ErrorObject>) {
        answer(&self.shared, id, result);
    }

    fn handle(&mut self, msg: Message) -> Flow {
        match msg {
            Message::Response(resp) => {
                let waiter = self
                    .shared
                    .asks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&resp.id);
                if let Some(tx) = waiter {
                    let _ = tx.send(resp.result);
                }
            }
            Message::Notification(n) => match HostNotification::parse(&n.method, n.params) {
                Ok(HostNotification::Initialized) => self.order(Ordered::Initialized),
                Ok(HostNotification::TraceEvent(ev)) => self.order(Ordered::Trace(ev)),
                Ok(HostNotification::WorkspaceChanged(w)) => {
                    self.order(Ordered::Workspace(w.workspace_root))
                }
                Ok(HostNotification::Exit) => return Flow::Exit,
                Ok(_) => {}
                Err(err) => eprintln!("yep-sdk: ignoring {} with bad params: {err}", n.method),
            },
            Message::Request(req) => match HostRequest::parse(&req.method, req.params) {
                Ok(request) => self.request(req.id, request),
                Err(err) => {
                    self.send_result(req.id, Err(ErrorObject::invalid_params(&req.method, err)))
                }
            },
        }
        Flow::Continue
    }

    /// Before returning from serve: let in-flight requests finish (up to `grace`), answer the
    /// rest `cancelled`, so every request gets exactly one answer, and let the notification
    /// handlers finish what already arrived (the last trace events of a session).
    fn finish(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline
            && !self
                .inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        let rest: Vec<_> = self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (id, flag) in rest {
            flag.cancel();
            self.send_result(id, Err(ErrorObject::cancelled()));
        }
        drop(self.ordered.take());
        if let Some(thread) = self.ordered_thread.take() {
            let _ = thread.join();
        }
    }

    fn order(&self, msg: Ordered) {
        if let Some(tx) = &self.ordered {
            let _ = tx.send(msg);
        }
    }

    fn request(&mut self, id: u64, request: HostRequest) {
        match request {
            // Inline on the reader: it must finish before any later request runs.
            HostRequest::Initialize(params) => {
                let result = self.initialize(params);
                self.send_result(id, result);
            }
            HostRequest::Cancel(params) => {
                let flag = self
                    .inflight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&params.id);
                let cancelled = flag.is_some();
                if let Some(flag) = flag {
                    flag.cancel();
                    // The cancelled call resolves now, not when its handler notices.
                    self.send_result(params.id, Err(ErrorObject::cancelled()));
                }
                self.send_result(id, Ok(json!(CancelResult { cancelled })));
            }
            HostRequest::Shutdown => self.send_result(id, Ok(json!({}))),
            HostRequest::ConfigChanged(params) => {
                let status = match self
                    .config
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_mut()
                {
                    Some(handler) => handler(&params.config),
                    None => ConfigStatus::RestartRequired,
                };
                self.send_result(id, Ok(json!(ConfigChangedResult { status })));
            }
            other => self.spawn(id, other),
        }
    }

    /// Run a request on a worker, registered as in flight so `cancel` can find it.
    fn spawn(&mut self, id: u64, request: HostRequest) {
        let flag = Arc::new(CancelFlag::default());
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&flag));
        let ctx = Context {
            notifier: Notifier {
                shared: Arc::clone(&self.shared),
            },
            request_id: id,
            cancel: flag,
        };
        let handlers = Arc::clone(&self.handlers);
        let inflight = Arc::clone(&self.inflight);
        let shared = Arc::clone(&self.shared);
        self.pool.submit(Box::new(move || {
            let method = request.method().to_string();
            let result = catch_unwind(AssertUnwindSafe(|| handlers.run(request, &ctx)))
                .unwrap_or_else(|_| {
                    Err(ErrorObject::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("handler for {method} panicked"),
                    ))
                });
            // Whoever removes the entry answers: a cancelled call was already answered.
            if inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id)
                .is_some()
            {
                let line = match result {
                    Ok(v) => result_line(id, &v),
                    Err(e) => error_line(id, &e),
                };
                shared.wire.send(&line);
            }
        }));
    }

    fn initialize(&mut self, params: InitializeParams) -> Result<Value, ErrorObject> {
        let version = params.protocol_version.as_str();
        if !version.is_empty() && !version_compatible(version) {
            return Err(ErrorObject::new(
                ErrorCode::INCOMPATIBLE_VERSION,
                format!(
                    "host speaks YEP {version}, incompatible with this server ({PROTOCOL_VERSION})"
                ),
            ));
        }
        if let Some(handler) = self
            .config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            handler(&params.config);
        }
        let h = &self.handlers;
        let mut capabilities = vec!["tools", "streaming", "cancel"];
        let flags = [
            (h.instructions.is_some(), "prompt"),
            (h.dynamic_prompt.is_some(), "dynamic_prompt"),
            (h.hook.is_some(), "hooks"),
            (!h.commands.is_empty(), "commands"),
            (h.has_trace, "trace"),
        ];
        capabilities.extend(flags.iter().filter(|(on, _)| *on).map(|(_, t)| *t));
        let mut result = InitializeResult {
            protocol_version: PROTOCOL_VERSION.into(),
            name: h.name.clone(),
            capabilities: capabilities.into_iter().map(String::from).collect(),
            ..InitializeResult::default()
        };
        result.capability_params.tools = h
            .tools
            .keys()
            .map(|name| ServedTool { name: name.clone() })
            .collect();
        result.capability_params.prompt = h.instructions.as_ref().map(|text| PromptParams {
            static_text: text.clone(),
        });
        Ok(json!(result))
    }
}

/// Write the one response a request gets.
fn answer(shared: &Shared, id: u64, result: Result<Value, ErrorObject>) {
    let line = match result {
        Ok(v) => result_line(id, &v),
        Err(e) => error_line(id, &e),
    };
    shared.wire.send(&line);
}

impl Handlers {
    fn run(&self, request: HostRequest, ctx: &Context) -> Result<Value, ErrorObject> {
        match request {
            HostRequest::ToolCall(call) => match self.tools.get(&call.name) {
                Some(tool) => tool(&call.args, ctx).map_err(|e| e.0),
                None => Err(ErrorObject::message(format!("no such tool: {}", call.name))),
            },
            HostRequest::HookFire(fire) => {
                let decision = self.hook.as_ref().map(|h| h(&fire)).unwrap_or_default();
                Ok(json!(decision))
            }
            HostRequest::PromptContribution => {
                let text = self
                    .dynamic_prompt
                    .as_ref()
                    .map(|p| p())
                    .unwrap_or_default();
                Ok(json!(PromptContribution { text }))
            }
            HostRequest::CommandExecute(cmd) => match self.commands.get(&cmd.name) {
                Some(handler) => Ok(json!(handler(&cmd.arguments, ctx))),
                None => Err(ErrorObject::message(format!(
                    "no such command: {}",
                    cmd.name
                ))),
            },
            other => Err(ErrorObject::method_not_found(other.method())),
        }
    }
}
