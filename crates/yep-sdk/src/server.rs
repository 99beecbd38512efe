//! The builder and the serve loop: framing, handshake, dispatch, cancellation.

use crate::context::{CancelFlag, Context, Notifier, Shared};
#[cfg(unix)]
use crate::framing::SpinStdin;
use crate::framing::{Line, Source, Wire, lock, read_line_capped};
use crate::typed;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use yep_protocol::framing::{LineBuffer, spin_from_env};
use yep_protocol::{
    CancelResult, CommandExecuteResult, ConfigChangedResult, ConfigStatus, ErrorCode, ErrorObject,
    HookDecision, HookFireParams, HostNotification, HostRequest, InitializeParams,
    InitializeResult, PROTOCOL_VERSION, PromptContribution, PromptParams, RawMessage, ServedTool,
    TraceEventParams, error_line, result_line, value_result_line, version_compatible,
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

/// Notifications waiting for their handler before the reader waits too.
const ORDERED_QUEUE: usize = 1024;

/// At EOF, requests still running get this long to answer before they are cancelled.
const EOF_GRACE: Duration = Duration::from_secs(1);

/// The default cap on one incoming line.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// A capability server under construction. Register handlers, then [`Server::serve`].
pub struct Server {
    name: String,
    instructions: Option<String>,
    tools: BTreeMap<String, Tool>,
    hook: Option<HookHandler>,
    dynamic_prompt: Option<PromptHandler>,
    commands: BTreeMap<String, CommandHandler>,
    config: Option<ConfigHandler>,
    workspace: Option<WorkspaceHandler>,
    trace: Option<TraceHandler>,
    start: Option<StartHandler>,
    max_concurrency: usize,
    max_frame_bytes: usize,
    spin: Duration,
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
            spin: spin_from_env(),
        }
    }

    /// Static system-prompt text, sent in the handshake.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Serve a tool. The handler gets the call's `args` and a [`Context`].
    pub fn tool<F>(self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(&Value, &Context) -> ToolResult + Send + Sync + 'static,
    {
        self.insert_tool(ServedTool::named(name), Arc::new(handler))
    }

    fn insert_tool(mut self, served: ServedTool, handler: ToolHandler) -> Self {
        let tool = Tool {
            served,
            handler,
            last_run: RunTime::default(),
        };
        self.tools.insert(tool.served.name.clone(), tool);
        self
    }

    /// Serve a typed tool: the handler gets its arguments as an `A`. The argument schema is
    /// derived from `A` (schemars) and sent with `description` in the handshake, where `yep
    /// manifest sync` copies both into `plugin.json`. Arguments that do not deserialize are
    /// answered with an invalid-params error naming the field, before the handler runs.
    ///
    /// ```no_run
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    /// use yep_sdk::Server;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Forecast {
    ///     city: String,
    ///     #[serde(default)]
    ///     days: Option<u32>,
    /// }
    ///
    /// Server::new("weather")
    ///     .typed_tool("forecast", "The weather for a city", |args: Forecast, _ctx| {
    ///         Ok(serde_json::json!({ "city": args.city, "days": args.days.unwrap_or(3) }))
    ///     })
    ///     .serve()
    ///     .unwrap();
    /// ```
    pub fn typed_tool<A, R, F>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize,
        F: Fn(A, &Context) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        self.typed(name.into(), description.into(), None, handler)
    }

    /// [`Server::typed_tool`] whose result type declares the tool's output schema too.
    pub fn typed_tool_with_output<A, R, F>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize + JsonSchema,
        F: Fn(A, &Context) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        let output = typed::schema_of::<R>();
        self.typed(name.into(), description.into(), Some(output), handler)
    }

    fn typed<A, R, F>(
        self,
        name: String,
        description: String,
        output_schema: Option<Value>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize,
        F: Fn(A, &Context) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        let served = ServedTool {
            name: name.clone(),
            description: Some(description),
            schema: Some(typed::schema_of::<A>()),
            output_schema,
        };
        let tool_name = name;
        let handler: ToolHandler = Arc::new(move |args: &Value, ctx: &Context| {
            let args = typed::arguments::<A>(&tool_name, args)?;
            typed::result(&tool_name, handler(args, ctx)?)
        });
        self.insert_tool(served, handler)
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

    /// How long the reader busy-polls stdin before blocking (default 50 µs; `YEP_SPIN_US`
    /// overrides, `0` disables). Trades a little CPU right after each message for skipping a
    /// scheduler wake-up on the next one.
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
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
        #[cfg(unix)]
        let input = Source::Stdin(SpinStdin::open(self.spin)?);
        #[cfg(not(unix))]
        let input = Source::Stream(Box::new(std::io::stdin()));
        self.run(input, wire)
    }

    /// Serve on any reader/writer pair (tests, sockets). Returns at EOF or `exit`, once every
    /// request has its answer and the notification handlers have run.
    pub fn serve_on<R, W>(self, input: R, output: W) -> std::io::Result<()>
    where
        R: Read + Send + 'static,
        W: Write + Send + 'static,
    {
        self.run(Source::Stream(Box::new(input)), Box::new(output))
    }

    fn run(self, input: Source, output: Box<dyn Write + Send>) -> std::io::Result<()> {
        let shared = Arc::new(Shared {
            wire: Wire::new(output),
            asks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let core = Arc::new(Core::new(self, shared, input));
        core.run()
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

/// Notifications run in arrival order on their own thread, off the reader.
enum Ordered {
    Initialized,
    Trace(TraceEventParams),
    Workspace(String),
    /// `shutdown` is answered after every notification before it was handled: hosts use it
    /// as the barrier that says the last trace events were exported.
    Shutdown(u64),
}

/// What one incoming message asks of the thread that read it.
enum Next {
    /// Handled while still the reader (cheap, or must finish before later messages).
    Handled,
    /// Real work: hand the reader role on and run it.
    Work(Job),
    /// `exit`.
    Exit,
}

struct Job {
    id: u64,
    request: HostRequest,
    cancel: Arc<CancelFlag>,
}

/// The input side, touched only by the thread that holds the reader role.
struct Input {
    reader: BufReader<Feed>,
    lines: LineBuffer,
}

/// The serve loop's input. Before it waits on the source, the lines the wire held back for the
/// reader ([`Wire::cork`]) go out: the host may be waiting for them before it sends more.
struct Feed {
    source: Source,
    shared: Arc<Shared>,
    /// Lines taken since the source was last read.
    lines: usize,
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.shared.wire.uncork();
        self.lines = 0;
        self.source.read(buf)
    }
}

/// How long a reader role may stay reserved for the thread running the request it read.
const HANDOFF_DELAY: Duration = Duration::from_micros(500);

/// How long the standby keeps its timed watch after the last deferred hand-off.
const STANDBY_LINGER: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Engine {
    /// Requests waiting because `max_concurrency` are already running.
    queue: VecDeque<Job>,
    /// Some thread holds the reader role.
    reading: bool,
    /// Threads waiting for work.
    idle: usize,
    /// Jobs running now.
    running: usize,
    /// No more input: idle threads leave.
    done: bool,
    /// Every request answered and every notification handled: `serve` may return.
    finished: bool,
    /// A deferred hand-off: the reader role is kept for the thread running the last request
    /// until this instant; after it, the standby takes it.
    handoff_at: Option<Instant>,
    /// One thread waits with a timeout to take a deferred reader role.
    standby: bool,
    /// When the last hand-off was deferred; the standby lingers while they keep coming.
    last_deferral: Option<Instant>,
}

/// The serve loop's state, shared by its threads.
///
/// Threads take turns as the reader (leader/follower): the thread that reads a request runs it
/// itself, so a call costs no thread hop on the server. Control messages (`initialize`,
/// `cancel`, `shutdown`, `config/changed`, responses) are handled by the reader in place, so a
/// cancel is never queued behind work.
///
/// Handing the reader role on: when more input is already waiting and the request's handler
/// was not quick last time ([`QUICK_RUN`]), at once, to an idle thread. Otherwise the hand-off
/// is deferred by [`HANDOFF_DELAY`]: a quick request finishes first and its thread goes
/// straight back to reading (and polling for the next line, or taking the next one buffered),
/// with no other thread woken; a slow one loses the role to the standby thread when the delay
/// is up.
struct Core {
    shared: Arc<Shared>,
    handlers: Handlers,
    config: Mutex<Option<ConfigHandler>>,
    inflight: Mutex<HashMap<u64, Arc<CancelFlag>>>,
    ordered: Mutex<Option<SyncSender<Ordered>>>,
    ordered_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    input: Mutex<Input>,
    engine: Mutex<Engine>,
    /// Wakes a waiting thread for the reader role or a queued job.
    work: Condvar,
    /// Wakes `serve`'s thread when everything is finished.
    done: Condvar,
    max_running: usize,
    io_error: Mutex<Option<std::io::Error>>,
}

impl Core {
    fn new(server: Server, shared: Arc<Shared>, input: Source) -> Self {
        // Bounded: a flood of trace events slows the reader (and so the host's forwarder, which
        // drops its oldest) instead of growing this process without limit.
        let (tx, rx) = sync_channel::<Ordered>(ORDERED_QUEUE);
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
                        Ordered::Shutdown(id) => {
                            notifier.shared.wire.send(result_line(id, &json!({})))
                        }
                    }
                }
            });
        let ordered_thread = spawned
            .map_err(|err| {
                crate::framing::note(format_args!(
                    "yep-sdk: failed to start the notification thread: {err}"
                ))
            })
            .ok();
        Core {
            shared: Arc::clone(&shared),
            handlers: Handlers {
                name: server.name,
                instructions: server.instructions,
                tools: server.tools,
                hook: server.hook,
                hook_run: RunTime::default(),
                dynamic_prompt: server.dynamic_prompt,
                commands: server.commands,
                has_trace,
            },
            config: Mutex::new(server.config),
            inflight: Mutex::new(HashMap::new()),
            ordered: Mutex::new(Some(tx)),
            ordered_thread: Mutex::new(ordered_thread),
            input: Mutex::new(Input {
                reader: BufReader::with_capacity(
                    64 * 1024,
                    Feed {
                        source: input,
                        shared,
                        lines: 0,
                    },
                ),
                lines: LineBuffer::new(server.max_frame_bytes),
            }),
            engine: Mutex::new(Engine::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            max_running: server.max_concurrency.max(1),
            io_error: Mutex::new(None),
        }
    }

    /// `serve`'s thread: work like any other thread, then wait until everything is finished.
    fn run(self: &Arc<Self>) -> std::io::Result<()> {
        self.work_loop();
        let mut engine = lock(&self.engine);
        while !engine.finished {
            engine = self.done.wait(engine).unwrap_or_else(|p| p.into_inner());
        }
        drop(engine);
        // Lines queued behind another thread's write go out before the server returns.
        self.shared.wire.drain();
        match lock(&self.io_error).take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    fn work_loop(self: &Arc<Self>) {
        enum Task {
            Run(Job),
            Read,
        }
        loop {
            let task = {
                let mut engine = lock(&self.engine);
                loop {
                    if let Some(job) = engine.queue.pop_front() {
                        engine.running += 1;
                        break Task::Run(job);
                    }
                    if engine.done {
                        return;
                    }
                    let now = Instant::now();
                    if !engine.reading {
                        match engine.handoff_at {
                            Some(at) if now < at => {}
                            _ => {
                                engine.handoff_at = None;
                                engine.reading = true;
                                break Task::Read;
                            }
                        }
                    }
                    let watch = engine.handoff_at.is_some()
                        || engine
                            .last_deferral
                            .is_some_and(|t| now - t < STANDBY_LINGER);
                    engine.idle += 1;
                    if watch && !engine.standby {
                        // The standby: wake by itself to take a deferred reader role in time.
                        engine.standby = true;
                        let wait = engine.handoff_at.map_or(HANDOFF_DELAY, |at| at - now);
                        engine = self
                            .work
                            .wait_timeout(engine, wait)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                        engine.standby = false;
                    } else {
                        engine = self.work.wait(engine).unwrap_or_else(|p| p.into_inner());
                    }
                    engine.idle -= 1;
                }
            };
            match task {
                Task::Run(job) => {
                    // No reader is running quick work now: nothing may wait behind this job.
                    self.shared.wire.uncork();
                    self.execute(job)
                }
                Task::Read => self.read(),
            }
        }
    }

    /// Hold the reader role: read and dispatch until a request needs running, then pass the
    /// role on and run it here.
    fn read(self: &Arc<Self>) {
        let mut input = lock(&self.input);
        loop {
            let Input { reader, lines } = &mut *input;
            // Spin only while nothing runs: a polling reader would take the CPU a running
            // request needs (a host may have only two).
            reader
                .get_mut()
                .source
                .set_spin(lock(&self.engine).running == 0);
            let max_frame = lines.cap();
            let line = match read_line_capped(reader, lines) {
                Ok(line) => line,
                Err(err) => {
                    *lock(&self.io_error) = Some(err);
                    drop(input);
                    return self.end();
                }
            };
            reader.get_mut().lines += 1;
            let next = match line {
                Line::Eof => Next::Exit,
                Line::TooLong(n) => {
                    crate::framing::note(format_args!(
                        "yep-sdk: skipping a {n}-byte line over the {max_frame}-byte frame cap"
                    ));
                    Next::Handled
                }
                Line::Complete(buf) if buf.iter().all(u8::is_ascii_whitespace) => Next::Handled,
                // A request as hosts write it is read in one pass; anything else in two.
                Line::Complete(buf) => match HostRequest::parse_line(buf) {
                    Some((id, request)) => self.request(id, request),
                    None => match RawMessage::parse(buf) {
                        Ok(msg) => self.dispatch(msg),
                        Err(err) => {
                            crate::framing::note(format_args!(
                                "yep-sdk: skipping malformed wire line: {err}"
                            ));
                            Next::Handled
                        }
                    },
                },
            };
            match next {
                Next::Handled => continue,
                Next::Exit => {
                    drop(input);
                    return self.end();
                }
                Next::Work(job) => {
                    let mut engine = lock(&self.engine);
                    if engine.running >= self.max_running {
                        // At the bound: the job waits for a free thread; keep reading so a
                        // cancel or a shutdown still gets through.
                        engine.queue.push_back(job);
                        continue;
                    }
                    engine.running += 1;
                    engine.reading = false;
                    // Only what is buffered counts: asking the pipe would cost a syscall on
                    // every call, and a line landing just after would be missed all the same.
                    // With more waiting, a handler that was quick last time still runs here
                    // first: waking a thread for it would cost more than the run (and on a
                    // two-core host, the CPU the host needs), and if it is slow this time the
                    // standby takes the role when the delay is up.
                    let quick = self.handlers.was_quick(&job.request);
                    let buffered = !input.reader.buffer().is_empty();
                    // The last of several requests read together.
                    let batched = buffered || input.reader.get_ref().lines > 1;
                    let deferred = !buffered || quick;
                    if deferred {
                        let now = Instant::now();
                        engine.handoff_at = Some(now + HANDOFF_DELAY);
                        engine.last_deferral = Some(now);
                    }
                    // Someone must take the role: at once, or as the standby when deferred.
                    let wake = !(deferred && engine.standby);
                    let spare = engine.idle > 0;
                    drop(engine);
                    drop(input);
                    // Quick work on input read with others: its answer waits for theirs and
                    // they go out sixteen to a write, the rest before the reader next waits
                    // for input (right after the last one's run, or when the standby takes
                    // the role if that run turns out slow this time). A lone request's answer
                    // goes at once: nothing would join it.
                    // Anything else may take a while, so what was held goes out now.
                    if quick && batched {
                        self.shared.wire.cork();
                    } else {
                        self.shared.wire.uncork();
                    }
                    if wake && spare {
                        self.work.notify_one();
                    } else if wake {
                        self.spawn_thread();
                    }
                    self.execute(job);
                    if deferred {
                        // Done within the delay: the role is ours again, no one else woken.
                        let mut engine = lock(&self.engine);
                        if !engine.reading {
                            engine.handoff_at = None;
                        }
                    }
                    return;
                }
            }
        }
    }

    fn spawn_thread(self: &Arc<Self>) {
        let core = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("yep-worker".into())
            .spawn(move || core.work_loop());
        if let Err(err) = spawned {
            // The next thread to finish a job takes the reader role instead.
            crate::framing::note(format_args!(
                "yep-sdk: failed to start a worker thread: {err}"
            ));
        }
    }

    /// Run one request and answer it, unless a cancel already did.
    fn execute(&self, job: Job) {
        let Job {
            id,
            request,
            cancel,
        } = job;
        if !lock(&self.inflight).contains_key(&id) {
            // Cancelled before it started: it was answered, and must not run.
            lock(&self.engine).running -= 1;
            return;
        }
        let ctx = Context {
            notifier: Notifier {
                shared: Arc::clone(&self.shared),
            },
            request_id: id,
            cancel,
        };
        let result = catch_unwind(AssertUnwindSafe(|| self.handlers.run(&request, &ctx)))
            .unwrap_or_else(|_| {
                Err(ErrorObject::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("handler for {} panicked", request.method()),
                ))
            });
        // Whoever removes the entry answers: a cancelled call was already answered.
        if lock(&self.inflight).remove(&id).is_some() {
            self.answer(id, result);
        }
        lock(&self.engine).running -= 1;
    }

    fn answer(&self, id: u64, result: Result<Value, ErrorObject>) {
        let line = match result {
            Ok(v) => value_result_line(id, &v),
            Err(e) => error_line(id, &e),
        };
        self.shared.wire.send(line);
    }

    fn dispatch(&self, msg: RawMessage<'_>) -> Next {
        match msg {
            RawMessage::Response { id, result } => {
                if let Some(tx) = lock(&self.shared.asks).remove(&id) {
                    let value =
                        |raw: &RawValue| serde_json::from_str(raw.get()).unwrap_or_default();
                    let _ = tx.send(match result {
                        Ok(raw) => Ok(value(raw)),
                        Err(raw) => Err(ErrorObject::from_wire(value(raw))),
                    });
                }
            }
            RawMessage::Notification { method, params } => {
                match HostNotification::parse_raw(&method, params) {
                    Ok(HostNotification::Initialized) => self.order(Ordered::Initialized),
                    Ok(HostNotification::TraceEvent(ev)) => self.order(Ordered::Trace(ev)),
                    Ok(HostNotification::WorkspaceChanged(w)) => {
                        self.order(Ordered::Workspace(w.workspace_root))
                    }
                    Ok(HostNotification::Exit) => return Next::Exit,
                    Ok(_) => {}
                    Err(err) => crate::framing::note(format_args!(
                        "yep-sdk: ignoring {method} with bad params: {err}"
                    )),
                }
            }
            RawMessage::Request { id, method, params } => {
                match HostRequest::parse_raw(&method, params) {
                    Ok(request) => return self.request(id, request),
                    Err(err) => self.answer(id, Err(ErrorObject::invalid_params(&method, err))),
                }
            }
        }
        Next::Handled
    }

    fn order(&self, msg: Ordered) {
        if let Some(tx) = lock(&self.ordered).as_ref() {
            let _ = tx.send(msg);
        }
    }

    fn request(&self, id: u64, request: HostRequest) -> Next {
        match request {
            HostRequest::Initialize(params) => {
                let result = self.initialize(params);
                self.answer(id, result);
            }
            HostRequest::Cancel(params) => {
                let flag = lock(&self.inflight).remove(&params.id);
                let cancelled = flag.is_some();
                if let Some(flag) = flag {
                    flag.cancel();
                    // The cancelled call resolves now, not when its handler notices.
                    self.answer(params.id, Err(ErrorObject::cancelled()));
                }
                self.answer(id, Ok(json!(CancelResult { cancelled })));
            }
            HostRequest::Shutdown => self.order(Ordered::Shutdown(id)),
            HostRequest::ConfigChanged(params) => {
                let status = match lock(&self.config).as_mut() {
                    Some(handler) => handler(&params.config),
                    None => ConfigStatus::RestartRequired,
                };
                self.answer(id, Ok(json!(ConfigChangedResult { status })));
            }
            request => {
                let cancel = Arc::new(CancelFlag::default());
                lock(&self.inflight).insert(id, Arc::clone(&cancel));
                return Next::Work(Job {
                    id,
                    request,
                    cancel,
                });
            }
        }
        Next::Handled
    }

    /// No more input. Let in-flight requests finish (up to [`EOF_GRACE`]), answer the rest
    /// `cancelled` so every request gets exactly one answer, let the notification handlers
    /// finish what already arrived (a session's last trace events), then release every thread.
    fn end(&self) {
        self.shared.wire.uncork();
        let deadline = Instant::now() + EOF_GRACE;
        while Instant::now() < deadline && !lock(&self.inflight).is_empty() {
            std::thread::sleep(Duration::from_millis(2));
        }
        let rest: Vec<_> = lock(&self.inflight).drain().collect();
        for (id, flag) in rest {
            flag.cancel();
            self.answer(id, Err(ErrorObject::cancelled()));
        }
        drop(lock(&self.ordered).take());
        if let Some(thread) = lock(&self.ordered_thread).take() {
            let _ = thread.join();
        }
        let mut engine = lock(&self.engine);
        engine.done = true;
        engine.finished = true;
        engine.queue.clear();
        drop(engine);
        self.work.notify_all();
        self.done.notify_all();
    }

    fn initialize(&self, params: InitializeParams) -> Result<Value, ErrorObject> {
        let version = params.protocol_version.as_str();
        if !version.is_empty() && !version_compatible(version) {
            return Err(ErrorObject::new(
                ErrorCode::INCOMPATIBLE_VERSION,
                format!(
                    "host speaks YEP {version}, incompatible with this server ({PROTOCOL_VERSION})"
                ),
            ));
        }
        if let Some(handler) = lock(&self.config).as_mut() {
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
        result.capability_params.tools = h.tools.values().map(|t| t.served.clone()).collect();
        result.capability_params.prompt = h.instructions.as_ref().map(|text| PromptParams {
            static_text: text.clone(),
        });
        Ok(json!(result))
    }
}

/// A registered tool, what the handshake says of it, and how long its last run took.
struct Tool {
    served: ServedTool,
    handler: ToolHandler,
    last_run: RunTime,
}

/// A run that took less than this counts as quick: the next one runs on the reader's thread
/// even with more input waiting (see [`Core::read`]).
const QUICK_RUN: Duration = Duration::from_micros(50);

/// How long a handler's last run took, in ns; unknown (never run) counts as slow.
struct RunTime(std::sync::atomic::AtomicU64);

impl Default for RunTime {
    fn default() -> Self {
        RunTime(AtomicU64::new(u64::MAX))
    }
}

impl RunTime {
    fn quick(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) < QUICK_RUN.as_nanos() as u64
    }

    fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0.store(ns, std::sync::atomic::Ordering::Relaxed);
    }

    /// Run `f`, keeping how long it took. While it runs, and after a panic, it counts as slow
    /// (as before its first run).
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        self.record(Duration::MAX);
        let started = Instant::now();
        let out = f();
        self.record(started.elapsed());
        out
    }
}

struct Handlers {
    name: String,
    instructions: Option<String>,
    tools: BTreeMap<String, Tool>,
    hook: Option<HookHandler>,
    hook_run: RunTime,
    dynamic_prompt: Option<PromptHandler>,
    commands: BTreeMap<String, CommandHandler>,
    has_trace: bool,
}

impl Handlers {
    /// Whether this request's handler was quick the last time it ran. Only tools and the hook
    /// handler are timed: they are the requests that come many at once.
    fn was_quick(&self, request: &HostRequest) -> bool {
        let run_time = match request {
            HostRequest::ToolCall(call) => self.tools.get(&call.name).map(|t| &t.last_run),
            HostRequest::HookFire(_) => Some(&self.hook_run),
            _ => None,
        };
        run_time.is_some_and(RunTime::quick)
    }

    fn run(&self, request: &HostRequest, ctx: &Context) -> Result<Value, ErrorObject> {
        match request {
            HostRequest::ToolCall(call) => match self.tools.get(&call.name) {
                Some(tool) => tool
                    .last_run
                    .time(|| (tool.handler)(&call.args, ctx))
                    .map_err(|e| e.0),
                None => Err(ErrorObject::message(format!("no such tool: {}", call.name))),
            },
            HostRequest::HookFire(fire) => {
                let decision = self
                    .hook_run
                    .time(|| self.hook.as_ref().map(|h| h(fire)).unwrap_or_default());
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
