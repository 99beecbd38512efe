//! The zot extension protocol v1 (its wire summed up in `docs/zot.md`) as a dialect: a zot
//! extension's frames ([`frames`]) adapted to the host's capability model.
//!
//! The handshake is the extension's: its `hello` is its first line (no deadline in zot; here
//! at least [`HELLO_WAIT`], and [`SLOW_START_HELLO_WAIT`] for a launcher that builds or
//! fetches first), the host's `hello_ack` is the host's first frame, registrations
//! are taken whenever they come (before the ack, after it, after `ready`), and an extension
//! that never says `ready` is ready after [`AUTO_READY_IDLE`] without a frame, at most
//! [`READY_WAIT`] after its hello. Its registered tools and commands are the offer.

pub mod frames;
pub mod probe;

use super::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFuture, Streams};
use crate::capability::{
    CommandResult, ConfigOutcome, Events, HookAnswer, HookEvent, HookFiring, HookOutcome,
    HostToolCall, HostToolError, Intercept, InterceptOutcome, LogLevel, Offer, OfferedCommand,
    OfferedTool, Panel, PanelInput, PanelUpdate, RemoteError, Status, StatusLevel, ToolCall,
    ToolResult, TraceEvent,
};
use crate::launcher::said;
use crate::rpc::{
    BoxFuture, CallError, CallOptions, CloseReason, Codec, Connection, ConnectionOptions, Frame,
    Handler, Id, Malformed, RawValue, WeakConnection,
};
use crate::store::zot::{CALL_TOOL, EVENTS, INTERCEPTS};
use frames::{FromExtension, PROTOCOL_VERSION, ToExtension, model_content};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The least time an extension gets to say `hello` (zot waits for ever; a start that hangs
/// must end somewhere). `$YEP_ZOT_HELLO_WAIT_MS` sets it instead ([`HELLO_WAIT_ENV`]).
pub const HELLO_WAIT: Duration = Duration::from_secs(60);
/// The time an extension started by a launcher that builds or fetches first
/// ([`crate::launcher::slow_start`]: `go run .`, `npx -y tsx`) gets to say `hello`: a cold
/// build cache or a slow network takes minutes, and zot waits for ever.
pub const SLOW_START_HELLO_WAIT: Duration = crate::launcher::SLOW_START_WAIT;
/// How long such an extension is waited for before the user is told why (at most the
/// ordinary wait): a `yep_host::progress` info line.
pub const SLOW_START_NOTICE: Duration = crate::launcher::SLOW_START_NOTICE;
/// The variable that sets the ordinary hello wait, in milliseconds (the tests shorten it).
pub const HELLO_WAIT_ENV: &str = "YEP_ZOT_HELLO_WAIT_MS";
/// The `tracing` target of what the host says while a start takes long; the CLI shows it.
pub const PROGRESS_TARGET: &str = crate::launcher::PROGRESS_TARGET;
/// An extension that never says `ready` is ready once this passes without a frame.
pub const AUTO_READY_IDLE: Duration = Duration::from_millis(250);
/// The longest the host waits for `ready` after `hello`.
pub const READY_WAIT: Duration = Duration::from_secs(3);
/// The most tools, and the most commands, one extension may register; later ones are refused
/// with a diagnostic.
pub const MAX_REGISTRATIONS: usize = 256;
/// The longest a command may take to answer.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(30);
/// The longest a `call_tool` from an extension may run.
pub const CALL_TOOL_DEADLINE: Duration = Duration::from_secs(60);
/// The most tools in one `call_tool` chain, counting the original call.
pub const MAX_CHAIN: usize = 4;
/// The most `call_tool` requests one extension may have in flight.
pub const MAX_NESTED_CALLS: usize = 16;
/// The most frames queued for one extension, beyond the one being written.
pub const OUTBOX_FRAMES: usize = 256;
/// The most bytes queued for one extension.
pub const OUTBOX_BYTES: usize = 16 * 1024 * 1024;
/// The longest one write to an extension may block before it is disconnected.
pub const WRITE_BOUND: Duration = Duration::from_secs(5);
/// What the host says it is in `hello_ack.zot_version`.
pub const HOST_VERSION: &str = concat!("yep-", env!("CARGO_PKG_VERSION"));

/// The zot wire.
pub struct Zot;

impl Dialect for Zot {
    fn name(&self) -> &'static str {
        "zot"
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        Box::pin(async move {
            let peer = open(streams, hello, events, opts).await?;
            Ok(peer as Arc<dyn Peer>)
        })
    }
}

/// Connect to a zot extension and shake hands: the [`Zot`] dialect's `open`, with the
/// extension's own type (and so [`ZotPeer::registrations`]).
pub async fn open(
    streams: Streams,
    hello: Hello,
    events: Arc<dyn Events>,
    opts: ConnectionOptions,
) -> Result<Arc<ZotPeer>, HandshakeError> {
    let (said_hello, heard) = oneshot::channel();
    let router = Arc::new(Router {
        extension: hello.extension.clone(),
        events,
        conn: std::sync::OnceLock::new(),
        outbox: Arc::default(),
        nested: Arc::default(),
        session_id: hello.session_id.clone(),
        cwd: hello.workspace_root.clone(),
        interactive_ui: hello.interactive_ui,
        pin: hello.pin.clone(),
        sequence: AtomicU64::new(0),
        state: Mutex::new(State {
            said_hello: Some(said_hello),
            ..State::default()
        }),
        frame: Notify::new(),
    });
    let codec = Arc::new(ZotCodec::default());
    let conn = streams.connect(
        Arc::clone(&router) as Arc<dyn Handler>,
        Arc::clone(&codec) as Arc<dyn Codec>,
        opts,
    )?;
    let _ = router.conn.set(conn.downgrade());
    match handshake(&conn, &router, &codec, heard, &hello).await {
        Ok(offer) => {
            let outbox = Arc::clone(&router.outbox);
            Ok(Arc::new(ZotPeer {
                conn,
                offer,
                router,
                outbox,
            }))
        }
        Err(err) => {
            conn.close(CloseReason::Shutdown);
            Err(err)
        }
    }
}

/// What the extension said in its first line.
struct Greeting {
    capabilities: Vec<String>,
}

/// The extension's first frame was something else than its hello (`method`: what it was;
/// `line`: the line itself when it is no frame at all, escaped and cut short).
#[derive(Debug, thiserror::Error)]
#[error("first frame must be hello (got {:?})", crate::text::escape(method))]
struct NotHello {
    method: String,
    line: Option<String>,
}

/// hello → hello_ack → registrations until ready (or idle); the offer.
async fn handshake(
    conn: &Connection,
    router: &Router,
    codec: &ZotCodec,
    heard: oneshot::Receiver<Result<Greeting, NotHello>>,
    hello: &Hello,
) -> Result<Offer, HandshakeError> {
    let waits = HelloWaits::new(
        hello.timeout,
        hello.slow_start.is_some(),
        std::env::var(HELLO_WAIT_ENV).ok().as_deref(),
    );
    // A launcher that builds first is waited for longer, and the user told why.
    let notice = async {
        if let (Some(slow), Some(after)) = (&hello.slow_start, waits.notice) {
            tokio::time::sleep(after).await;
            tracing::info!(
                target: PROGRESS_TARGET,
                "waiting for {}'s hello: {slow} (up to {})",
                crate::text::escape(&hello.extension),
                said(waits.hello)
            );
        }
        std::future::pending::<std::convert::Infallible>().await
    };
    // An extension that exits (or closes its stdout) before its hello fails at once.
    let heard = tokio::select! {
        biased;
        heard = tokio::time::timeout(waits.hello, heard) => heard,
        reason = conn.closed() => return Err(HandshakeError::Call(CallError::Closed(reason))),
        never = notice => match never {},
    };
    let greeting = match heard {
        Err(_) => {
            let why = hello
                .slow_start
                .as_ref()
                .map(|slow| format!(" ({slow})"))
                .unwrap_or_default();
            return Err(HandshakeError::Malformed(format!(
                "no hello within {}{why}",
                said(waits.hello)
            )));
        }
        Ok(Err(_)) => {
            let reason = conn.closed().await;
            return Err(HandshakeError::Call(CallError::Closed(reason)));
        }
        Ok(Ok(Err(why))) => {
            let error = HandshakeError::Malformed(why.to_string());
            return Err(match why.line {
                // Output before the hello (a log line, most likely): say which.
                Some(line) => HandshakeError::StrayOutput {
                    expected: "a zot frame",
                    line,
                    error: Box::new(error),
                },
                None => error,
            });
        }
        Ok(Ok(Ok(greeting))) => greeting,
    };
    codec.tool_cancel.store(
        greeting.capabilities.iter().any(|c| c == "tool_cancel"),
        Ordering::Release,
    );
    router.lock().capabilities = greeting.capabilities;
    let ack = ToExtension::HelloAck {
        protocol_version: PROTOCOL_VERSION,
        capabilities: vec!["call_tool".into()],
        zot_version: HOST_VERSION.into(),
        provider: String::new(),
        model: String::new(),
        cwd: hello.workspace_root.clone(),
        extension_dir: hello.package_dir.clone(),
        data_dir: hello.data_dir.clone(),
    };
    conn.send(ack.line()).await.map_err(HandshakeError::Call)?;
    // `hello_ack` is the host's first frame: what is queued goes after it.
    tokio::spawn(Arc::clone(&router.outbox).write(conn.downgrade()));
    // Ready, or idle for a while, or the cap; an extension that ends first fails its start.
    let cap = Instant::now() + READY_WAIT;
    loop {
        if router.lock().ready {
            break;
        }
        if let Some(reason) = conn.close_reason() {
            return Err(HandshakeError::NotReady(reason));
        }
        let idle = Instant::now() + AUTO_READY_IDLE;
        tokio::select! {
            biased;
            _ = conn.closed() => {}
            next = tokio::time::timeout_at(idle.min(cap), router.frame.notified()) => {
                if next.is_err() {
                    if Instant::now() >= cap {
                        tracing::info!(extension = %hello.extension, "timed out waiting for ready frame; proceeding");
                    } else {
                        tracing::debug!(extension = %hello.extension, "no ready frame; auto-ready after idle");
                    }
                    break;
                }
            }
        }
    }
    router.lock().open = true;
    router.report_beyond_pin();
    let state = router.lock();
    Ok(Offer {
        // The manifest's name is the identity; the hello's is only informational.
        name: hello.extension.clone(),
        wire: format!("zot {PROTOCOL_VERSION}"),
        tools: state.tools.clone(),
        commands: state.commands.clone(),
        ..Offer::default()
    })
}

/// How long the host waits for an extension's `hello`, and when it says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HelloWaits {
    hello: Duration,
    /// When to tell the user why it takes long (a slow start only).
    notice: Option<Duration>,
}

impl HelloWaits {
    /// For a handshake timeout of `timeout`, a `slow` start or not, and `env`, the value of
    /// [`HELLO_WAIT_ENV`] (milliseconds; anything else is ignored): the ordinary wait is that,
    /// else the longer of [`HELLO_WAIT`] and `timeout`; a slow start gets the longer of
    /// [`SLOW_START_HELLO_WAIT`] and the ordinary wait, and is told after [`SLOW_START_NOTICE`]
    /// or the ordinary wait, whichever comes first (past the ordinary wait, it would have
    /// failed).
    fn new(timeout: Duration, slow: bool, env: Option<&str>) -> HelloWaits {
        let ordinary = env
            .and_then(|ms| ms.trim().parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_else(|| timeout.max(HELLO_WAIT));
        match slow {
            true => HelloWaits {
                hello: SLOW_START_HELLO_WAIT.max(ordinary),
                notice: Some(SLOW_START_NOTICE.min(ordinary)),
            },
            false => HelloWaits {
                hello: ordinary,
                notice: None,
            },
        }
    }
}

/// What an extension registered, and where the handshake stands.
#[derive(Default)]
struct State {
    /// Taken by the first frame: told the hello, or why the first frame is not one.
    said_hello: Option<oneshot::Sender<Result<Greeting, NotHello>>>,
    ready: bool,
    tools: Vec<OfferedTool>,
    commands: Vec<OfferedCommand>,
    intercepts: Vec<String>,
    /// Lifecycle events it observes (known names only).
    events: Vec<String>,
    /// What its hello said it takes (exact names; only `tool_cancel` and `call_tool` matter).
    capabilities: Vec<String>,
    /// The host's tool calls in flight to it, by id: the chain each is part of.
    live: HashMap<String, LiveCall>,
    /// Its tools that wait on the user (no host deadline; they need an interactive UI).
    interactive: Vec<String>,
    /// What it registered beyond its pin that was already reported.
    reported: Vec<String>,
    /// The handshake is over: a registration now is checked against the pin at once.
    open: bool,
}

/// A host `tool_call` in flight to the extension: a `call_tool` made under it continues its
/// chain, and ends when it ends.
struct LiveCall {
    /// The tools that led to it, and itself last.
    chain: Vec<String>,
    /// Fired when the call ends.
    done: CancellationToken,
}

/// The extension's unasked frames: its hello, registrations, ready, notes.
struct Router {
    extension: String,
    events: Arc<dyn Events>,
    /// Where its `call_tool` answers go (weak: the connection owns this router).
    conn: std::sync::OnceLock<WeakConnection>,
    /// Every frame the host makes unasked, in order; written once `hello_ack` is out.
    outbox: Arc<Outbox>,
    /// Its own `call_tool` requests in flight, by its id.
    nested: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// The session, as events and intercepts tell it.
    session_id: String,
    cwd: String,
    /// A user is at an interactive UI.
    interactive_ui: bool,
    /// What it was approved to intercept and observe (`None`: not pinned, so whatever it
    /// subscribes to).
    pin: Option<crate::store::zot::ZotPin>,
    /// The last event's sequence number.
    sequence: AtomicU64,
    state: Mutex<State>,
    /// Woken on every frame (the auto-ready idle clock).
    frame: Notify,
}

impl Router {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// It subscribed to intercept `name`, within its pin.
    fn intercepts(&self, name: &str) -> bool {
        self.lock().intercepts.iter().any(|i| i == name)
            && self.pin.as_ref().is_none_or(|pin| pin.intercepts(name))
    }

    /// What it has registered so far.
    fn registrations(&self) -> Registrations {
        let state = self.lock();
        Registrations {
            tools: state.tools.clone(),
            commands: state.commands.clone(),
            intercepts: state.intercepts.clone(),
            events: state.events.clone(),
            capabilities: state.capabilities.clone(),
            interactive: state.interactive.clone(),
        }
    }

    /// Report, once each, what it subscribed to beyond its pin: withheld, not silently.
    fn report_beyond_pin(&self) {
        let Some(pin) = &self.pin else { return };
        let (lines, _) = pin.diff(&self.registrations().pin());
        let mut state = self.lock();
        let beyond: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("+ "))
            .filter(|l| !state.reported.iter().any(|r| r == l))
            .map(String::from)
            .collect();
        if beyond.is_empty() {
            return;
        }
        state.reported.extend(beyond.iter().cloned());
        drop(state);
        self.events.health(crate::health::HealthEvent::Warning {
            extension: Some(self.extension.clone()),
            message: format!(
                "extension `{}` registered more than was approved ({}); that is withheld (`yep trust {}` asks again)",
                self.extension,
                beyond.join(", "),
                self.extension
            ),
        });
    }

    /// It subscribed to observe `name`, within its pin.
    fn observes(&self, name: &str) -> bool {
        self.lock().events.iter().any(|e| e == name)
            && self
                .pin
                .as_ref()
                .is_none_or(|pin| pin.events.iter().any(|e| e == name))
    }

    fn diagnostic(&self, message: &str) {
        self.events.log(
            &self.extension,
            LogLevel::Warn,
            &crate::text::escape(message),
        );
    }

    fn register(&self, frame: FromExtension) {
        let mut state = self.lock();
        match frame {
            FromExtension::RegisterTool {
                name,
                description,
                schema,
                exposure,
                deferred,
                interactive,
                output_schema,
                ..
            } => {
                // An explicit exposure overrides the `deferred` flag.
                let deferred = match exposure.as_str() {
                    "" => deferred,
                    "direct" | "model-only" => false,
                    "codemode" | "deferred" => true,
                    _ => {
                        drop(state);
                        self.diagnostic(&format!(
                            "tool {name}: unknown exposure {exposure:?}; skipping the tool"
                        ));
                        return;
                    }
                };
                if schema.as_ref().is_some_and(|s| !s.is_object()) {
                    drop(state);
                    self.diagnostic(&format!(
                        "tool {name}: its schema is not a JSON object; skipping the tool"
                    ));
                    return;
                }
                if state.tools.iter().any(|t| t.name == name) {
                    return;
                }
                if state.tools.len() >= MAX_REGISTRATIONS {
                    drop(state);
                    self.diagnostic(&format!(
                        "tool {name}: over {MAX_REGISTRATIONS} tools registered; refusing it"
                    ));
                    return;
                }
                if interactive {
                    state.interactive.push(name.clone());
                }
                state.tools.push(OfferedTool {
                    name,
                    description: Some(description),
                    schema,
                    deferred,
                    output_schema: output_schema.filter(Value::is_object),
                    annotations: None,
                });
            }
            FromExtension::RegisterCommand { name, description } => {
                // Case-insensitive; the first spelling stays.
                if state
                    .commands
                    .iter()
                    .any(|c| c.name.eq_ignore_ascii_case(&name))
                {
                    drop(state);
                    self.diagnostic(&format!(
                        "command /{name} conflicts with one registered before; keeping the first"
                    ));
                    return;
                }
                if state.commands.len() >= MAX_REGISTRATIONS {
                    drop(state);
                    self.diagnostic(&format!(
                        "command /{name}: over {MAX_REGISTRATIONS} commands registered; refusing it"
                    ));
                    return;
                }
                state.commands.push(OfferedCommand { name, description });
            }
            FromExtension::Subscribe { intercept, events } => {
                // Known names only, each once: the lists stay as small as zot's own.
                for event in intercept {
                    if INTERCEPTS.contains(&event.as_str()) && !state.intercepts.contains(&event) {
                        state.intercepts.push(event);
                    }
                }
                for event in events {
                    if EVENTS.contains(&event.as_str()) && !state.events.contains(&event) {
                        state.events.push(event);
                    }
                }
            }
            FromExtension::Ready => state.ready = true,
            _ => {}
        }
        if state.open {
            drop(state);
            self.report_beyond_pin();
        }
    }
}

impl Router {
    /// The extension's `call_tool`: checked against zot's rules (opt-in, a live parent, the
    /// chain's depth and cycles), then run on the host, and answered with a `tool_result`
    /// held to zot's bounds. A refusal is a `tool_result` with zot's own text.
    fn call_tool(&self, id: String, name: String, args: Option<Value>, parent: Option<String>) {
        let answer = {
            let (id, name) = (id.clone(), name.clone());
            move |content, is_error, truncated| {
                ToExtension::ToolResult {
                    id,
                    name,
                    content,
                    is_error,
                    truncated,
                }
                .line()
            }
        };
        let checked = {
            let state = self.lock();
            let mut nested = self.nested.lock().unwrap_or_else(|p| p.into_inner());
            if nested.contains_key(&id) {
                // zot ignores a duplicate id in flight.
                drop((state, nested));
                self.diagnostic(&format!("call_tool {id:?} is already in flight; ignored"));
                return;
            }
            call_tool_checks(&state, &name, args.as_ref(), parent.as_deref()).and_then(
                |(chain, parent_done)| {
                    if nested.len() >= MAX_NESTED_CALLS {
                        return Err(CallToolRefusal::TooMany);
                    }
                    // A call made under a tool call ends when that call ends.
                    let cancel =
                        parent_done.map_or_else(CancellationToken::new, |done| done.child_token());
                    nested.insert(id.clone(), cancel.clone());
                    Ok((chain, cancel))
                },
            )
        };
        let (chain, cancel) = match checked {
            Ok(checked) => checked,
            Err(refusal) => {
                let _ = self.queue(answer(
                    vec![frames::ContentBlock::text(refusal.to_string())],
                    true,
                    false,
                ));
                return;
            }
        };
        let run = self.events.run_tool(
            &self.extension,
            HostToolCall {
                tool: name,
                args: args.unwrap_or_default(),
                chain,
                cancel: cancel.clone(),
            },
        );
        let nested = Arc::clone(&self.nested);
        let (outbox, conn) = (Arc::clone(&self.outbox), self.conn.get().cloned());
        let conn_for_close = conn.clone();
        let closed = async move {
            match conn.as_ref().and_then(WeakConnection::upgrade) {
                Some(live) => live.closed().await,
                None => CloseReason::Shutdown,
            }
        };
        tokio::spawn(async move {
            let outcome: Result<Value, NestedCallError> = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(NestedCallError::Cancelled),
                _ = closed => Err(NestedCallError::Disconnected),
                out = tokio::time::timeout(CALL_TOOL_DEADLINE, run) => match out {
                    Ok(answer) => answer.map_err(NestedCallError::from),
                    Err(_) => Err(NestedCallError::TimedOut),
                },
            };
            // However it ended, the tool it ran is told (a cancel reaches the wire).
            cancel.cancel();
            nested.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            let (blocks, is_error) = match outcome {
                Ok(value) => {
                    let is_error = value.get("is_error").and_then(Value::as_bool) == Some(true);
                    (frames::host_content(&value), is_error)
                }
                Err(why) => (vec![frames::ContentBlock::text(why.to_string())], true),
            };
            let (content, truncated) = frames::bound_content(blocks);
            // In order, within the queue's bounds, as every frame to it.
            if let Err(reason) = outbox.push(answer(content, is_error, truncated))
                && let Some(live) = conn_for_close.and_then(|c| c.upgrade())
            {
                live.close(reason);
            }
        });
    }

    /// Queue `line` behind what is queued; an extension that is not reading is disconnected.
    fn queue(&self, line: String) -> Result<(), CloseReason> {
        self.outbox.push(line).inspect_err(|reason| {
            self.diagnostic(&format!("disconnecting: {reason}"));
            if let Some(live) = self.conn.get().and_then(WeakConnection::upgrade) {
                live.close(reason.clone());
            }
        })
    }
}

/// Why zot refuses an extension's `call_tool` before it runs; the text is zot's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum CallToolRefusal {
    #[error("extension did not opt in to call_tool")]
    NotOptedIn,
    #[error("call_tool requires a name and JSON object args")]
    Malformed,
    #[error("unknown or expired parent tool call")]
    UnknownParent,
    #[error("parent_id is required while an extension tool is active")]
    ParentRequired,
    #[error("tool call cycle detected")]
    Cycle,
    #[error("tool call depth limit reached")]
    TooDeep,
    #[error("too many call_tool requests in flight (at most {MAX_NESTED_CALLS})")]
    TooMany,
}

/// Why an extension's `call_tool` that ran gave no answer.
#[derive(Debug, thiserror::Error)]
enum NestedCallError {
    /// The host's answer: the tool's own error, or why it did not run.
    #[error(transparent)]
    Host(#[from] HostToolError),
    #[error("tool call cancelled")]
    Cancelled,
    #[error("extension disconnected")]
    Disconnected,
    #[error("tool call timed out after {} s", CALL_TOOL_DEADLINE.as_secs())]
    TimedOut,
}

/// zot's checks on a `call_tool`, in its order: the chain it continues and the call that
/// ends it, or zot's refusal.
fn call_tool_checks(
    state: &State,
    name: &str,
    args: Option<&Value>,
    parent: Option<&str>,
) -> Result<(Vec<String>, Option<CancellationToken>), CallToolRefusal> {
    if !state.capabilities.iter().any(|c| c == CALL_TOOL) {
        return Err(CallToolRefusal::NotOptedIn);
    }
    if name.is_empty() || !args.is_some_and(Value::is_object) {
        return Err(CallToolRefusal::Malformed);
    }
    let (chain, done) = match parent.filter(|p| !p.is_empty()) {
        Some(parent) => match state.live.get(parent) {
            Some(live) => (live.chain.clone(), Some(live.done.clone())),
            None => return Err(CallToolRefusal::UnknownParent),
        },
        None if !state.live.is_empty() => {
            return Err(CallToolRefusal::ParentRequired);
        }
        None => (Vec::new(), None),
    };
    if chain.iter().any(|t| t == name) {
        return Err(CallToolRefusal::Cycle);
    }
    if chain.len() >= MAX_CHAIN {
        return Err(CallToolRefusal::TooDeep);
    }
    // The tool it calls adds itself when it runs (on any wire's peer).
    Ok((chain, done))
}

impl Handler for Router {
    fn notification(&self, method: &str, params: Value) {
        let first = self.lock().said_hello.take();
        // A first line that is no frame comes as its text.
        let stray = first
            .as_ref()
            .and_then(|_| params.as_str().map(String::from));
        // The codec read the line as JSON already.
        let frame = FromExtension::from_value(params);
        if let Some(said) = first {
            let _ = said.send(match frame {
                Ok(FromExtension::Hello {
                    name, capabilities, ..
                }) if !name.is_empty() => {
                    // The manifest's name wins; the hello's is only informational.
                    tracing::debug!(extension = %self.extension, hello_name = %name, "hello");
                    Ok(Greeting { capabilities })
                }
                _ => Err(NotHello {
                    method: method.to_string(),
                    line: stray,
                }),
            });
            self.frame.notify_one();
            return;
        }
        match frame {
            Ok(FromExtension::Notify { level, message }) => {
                let level = match level.as_str() {
                    "warn" => StatusLevel::Warn,
                    "error" => StatusLevel::Error,
                    _ => StatusLevel::Ok,
                };
                self.events.status(
                    &self.extension,
                    Some(Status {
                        text: message,
                        level,
                        detail: None,
                    }),
                );
            }
            Ok(FromExtension::ClearNotes) => self.events.status(&self.extension, None),
            Ok(FromExtension::CallTool {
                id,
                name,
                args,
                parent_id,
            }) => self.call_tool(id, name, args, parent_id),
            Ok(FromExtension::OpenPanel { panel }) => {
                self.events
                    .panel(&self.extension, PanelUpdate::Open(panel.into()));
            }
            Ok(FromExtension::PanelRender {
                panel_id,
                title,
                lines,
                footer,
            }) => {
                let panel = Panel {
                    id: panel_id,
                    title,
                    lines,
                    footer,
                };
                self.events
                    .panel(&self.extension, PanelUpdate::Render(panel));
            }
            Ok(FromExtension::PanelClose { panel_id }) => {
                self.events
                    .panel(&self.extension, PanelUpdate::Close { id: panel_id });
            }
            Ok(FromExtension::Submit { text }) => self.events.submit(&self.extension, &text),
            Ok(FromExtension::SubmitSlash { text }) => self.diagnostic(&format!(
                "submit_slash is not supported; ignored: {}",
                text.trim()
            )),
            Ok(FromExtension::CallToolCancel { id }) => {
                let nested = self.nested.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(cancel) = nested.get(&id) {
                    cancel.cancel();
                }
            }
            Ok(FromExtension::Unknown { kind }) => {
                self.diagnostic(&format!("unknown frame type {kind:?}; ignored"))
            }
            Ok(
                frame @ (FromExtension::RegisterTool { .. }
                | FromExtension::RegisterCommand { .. }
                | FromExtension::Subscribe { .. }
                | FromExtension::Ready),
            ) => self.register(frame),
            Ok(_) => {}
            Err(e) => self.diagnostic(&e.to_string()),
        }
        self.frame.notify_one();
    }

    fn request(&self, method: &str, _params: Value) -> BoxFuture<Result<Value, RemoteError>> {
        // zot has no requests the host answers by id other than `call_tool`, which the codec
        // reads as a frame of its own.
        let message = format!("unexpected request {method:?}");
        Box::pin(async move {
            Err(RemoteError {
                code: RemoteError::METHOD_NOT_FOUND,
                message,
                retryable: false,
                data: Value::Null,
            })
        })
    }
}

/// What a zot frame is, read before the rest of it.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(rename = "type", default)]
    kind: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
}

/// zot's framing: responses by their `id` (host ids are decimal strings), everything else
/// unasked (the extension's `call_tool` too: the router answers it, by zot's own rules).
#[derive(Default)]
struct ZotCodec {
    /// The extension said it takes `tool_cancel`.
    tool_cancel: AtomicBool,
    /// A line was read: past the first, a malformed line is skipped, as zot skips it.
    past_first: AtomicBool,
}

impl Codec for ZotCodec {
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
        let first = !self.past_first.swap(true, Ordering::AcqRel);
        // The frame's `type` and `id` first: an answer then passes on as the extension wrote
        // it, and only a frame the host acts on is read whole.
        let typed = serde_json::from_slice::<Head>(line)
            .map_err(|e| match e.classify() {
                serde_json::error::Category::Data => {
                    "a frame must be a JSON object with a string `type`".to_string()
                }
                _ => format!("malformed json frame: {e}"),
            })
            .and_then(|head| match head.kind {
                Some(Value::String(kind)) => Ok((kind, head.id)),
                _ => Err("a frame must be a JSON object with a string `type`".to_string()),
            });
        let whole = || serde_json::from_slice::<Value>(line).map_err(Malformed::new);
        let (kind, id) = match typed {
            // The first line is the hello's, whatever it is: never a response or a request.
            Ok((kind, _)) if first => {
                return Ok(Frame::Notification {
                    method: kind,
                    params: whole()?,
                });
            }
            Ok(typed) => typed,
            // The first line must be the hello: the handshake hears what it was instead.
            Err(why) if first => {
                return Ok(Frame::Notification {
                    method: why,
                    params: Value::String(crate::rpc::stray_preview(line)),
                });
            }
            Err(why) => return Err(Malformed::new(why)),
        };
        Ok(match kind.as_str() {
            "tool_result" | "command_response" | "event_intercept_response" => {
                let Some(Value::String(id)) = id else {
                    return Err(Malformed::new(format!(
                        "a `{kind}` frame needs a string `id`"
                    )));
                };
                Frame::Response {
                    id: Id::Str(id.into()),
                    result: Ok(serde_json::from_slice(line).map_err(Malformed::new)?),
                }
            }
            _ => Frame::Notification {
                method: kind,
                params: whole()?,
            },
        })
    }

    fn id(&self, _n: u64) -> Id {
        // Opaque decimal strings, unique within the host (not only per extension).
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Id::Str(NEXT.fetch_add(1, Ordering::Relaxed).to_string().into())
    }

    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
        let id = id_text(id);
        let (name, content, is_error) = match result {
            Ok(v) => (
                v["name"].as_str().unwrap_or_default().to_string(),
                serde_json::from_value(v["content"].clone()).unwrap_or_default(),
                v["is_error"].as_bool().unwrap_or(false),
            ),
            Err(e) => (
                String::new(),
                vec![frames::ContentBlock::text(e.message)],
                true,
            ),
        };
        ToExtension::ToolResult {
            id,
            name,
            content,
            is_error,
            truncated: false,
        }
        .line()
    }

    fn cancel(&self, id: &Id, _fresh: Id) -> Option<String> {
        // Only to extensions that said they take it; an id that is not a tool call's is
        // ignored by the extension, as zot requires.
        self.tool_cancel
            .load(Ordering::Acquire)
            .then(|| ToExtension::ToolCancel { id: id_text(id) }.line())
    }
}

/// Everything a zot extension registered this run (more than its [`Offer`] says: the
/// intercepts, observed events and capabilities a pin holds).
#[derive(Debug, Clone, Default)]
pub struct Registrations {
    pub tools: Vec<OfferedTool>,
    pub commands: Vec<OfferedCommand>,
    pub intercepts: Vec<String>,
    pub events: Vec<String>,
    pub capabilities: Vec<String>,
    /// Its tools that wait on the user.
    pub interactive: Vec<String>,
}

impl Registrations {
    /// What of it a pin holds (beyond tools and commands).
    pub fn pin(&self) -> crate::store::zot::ZotPin {
        crate::store::zot::ZotPin {
            intercepts: self.intercepts.clone(),
            events: self.events.clone(),
            capabilities: self
                .capabilities
                .iter()
                .filter(|c| *c == CALL_TOOL)
                .cloned()
                .collect(),
            interactive: self.interactive.clone(),
        }
    }
}

/// A live zot extension.
pub struct ZotPeer {
    conn: Connection,
    offer: Offer,
    router: Arc<Router>,
    /// Events waiting to be written, in order.
    outbox: Arc<Outbox>,
}

impl ZotPeer {
    /// Queue `frame` behind what is queued; an extension that is not reading is disconnected.
    fn queue(&self, what: &str, frame: ToExtension) -> Result<(), PeerError> {
        self.router
            .queue(frame.line())
            .map_err(|reason| PeerError::call(what, CallError::Closed(reason)))
    }

    /// An `event_intercept` for `event`, and its answer.
    async fn ask_intercept(
        &self,
        event: &str,
        fields: serde_json::Map<String, Value>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, PeerError> {
        let event = event.to_string();
        self.ask(
            "event_intercept",
            |id| ToExtension::EventIntercept { id, event, fields },
            CallOptions::timeout(timeout),
        )
        .await
    }

    /// What it has registered so far.
    pub fn registrations(&self) -> Registrations {
        self.router.registrations()
    }

    /// Send a frame the host numbers, and wait for the frame answering it.
    /// Frames reach the extension in the order the host made them (zot serialises them): a
    /// request waits for the queued frames to be written, within its own timeout.
    async fn ask(
        &self,
        what: &str,
        frame: impl FnOnce(String) -> ToExtension,
        mut opts: CallOptions,
    ) -> Result<Box<RawValue>, PeerError> {
        if !self.outbox.is_empty() {
            let started = Instant::now();
            let wait = opts.timeout.unwrap_or(WRITE_BOUND);
            let _ = tokio::time::timeout(wait, self.outbox.drained()).await;
            opts.timeout = opts.timeout.map(|t| t.saturating_sub(started.elapsed()));
        }
        self.conn
            .call(what, |id| frame(id_text(id)).line(), opts)
            .await
            .map_err(|e| PeerError::call(what, e))
    }
}

impl Peer for ZotPeer {
    fn offer(&self) -> &Offer {
        &self.offer
    }

    fn serves(&self, tool: &str) -> bool {
        // Registrations are taken whenever they come, even after `ready`.
        self.router.lock().tools.iter().any(|t| t.name == tool)
    }

    fn call_tool(
        &self,
        call: ToolCall,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>> {
        Box::pin(async move {
            let (name, args) = (call.tool, call.args);
            // A tool that waits on the user has no deadline, and needs a user (pinned as such).
            let interactive = self.router.lock().interactive.contains(&name)
                && self
                    .router
                    .pin
                    .as_ref()
                    .is_none_or(|pin| pin.interactive.contains(&name));
            if interactive && !self.router.interactive_ui {
                let error = RemoteError {
                    code: 0,
                    message: format!(
                        "tool {name} is interactive (it waits on the user at a panel), and this host has no interactive UI"
                    ),
                    retryable: false,
                    data: Value::Null,
                };
                return Err(PeerError::call("tool_call", CallError::Remote(error)));
            }
            let opts = CallOptions {
                timeout: (!interactive).then_some(timeout),
                updates: call.updates,
                cancel: call.cancel,
            };
            // The runtime names the chain, ending with this call; a caller that did not
            // starts one here.
            let mut chain = call.chain;
            if chain.is_empty() {
                chain.push(name.clone());
            }
            // In flight under its id: a `call_tool` the extension makes under it continues
            // its chain, and ends with it.
            let live = LiveGuard {
                router: &self.router,
                id: Mutex::new(None),
                done: CancellationToken::new(),
            };
            let answer = self
                .ask(
                    "tool_call",
                    |id| {
                        live.register(&id, chain);
                        ToExtension::ToolCall { id, name, args }
                    },
                    opts,
                )
                .await;
            drop(live);
            let answer = answer?;
            let Ok(FromExtension::ToolResult {
                content,
                is_error,
                structured_content,
                activate_tools,
                ..
            }) = serde_json::from_str::<FromExtension>(answer.get())
            else {
                return Err(PeerError::malformed_text(
                    "tool_call",
                    "not a tool_result",
                    answer.get(),
                ));
            };
            if !activate_tools.is_empty() {
                // Only its own tools, and only ones it registered.
                let own: Vec<String> = activate_tools
                    .into_iter()
                    .filter(|t| self.serves(t))
                    .collect();
                self.router
                    .events
                    .activate_tools(&self.router.extension, &own);
            }
            let (content, is_error) = model_content(content, is_error, &self.router.extension);
            if is_error {
                // A tool error, as every wire reports one: its text, with the blocks kept.
                let message = content
                    .iter()
                    .filter(|b| !b.text.is_empty())
                    .map(|b| b.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let error = RemoteError {
                    code: 0,
                    message,
                    retryable: false,
                    data: json!({ "content": content }),
                };
                return Err(PeerError::call("tool_call", CallError::Remote(error)));
            }
            let mut result = json!({ "content": content, "is_error": false });
            if let Some(structured) = structured_content {
                result["structured_content"] = structured;
            }
            // Mapped from zot's content blocks: the one wire here whose answer the host reads.
            Ok(ToolResult::from_value(result))
        })
    }

    fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<HookAnswer, PeerError>> {
        // zot intercepts tool calls before they run; it has no hook after them.
        let wanted = firing.event == HookEvent::PreToolUse && self.router.intercepts("tool_call");
        let mut fields = serde_json::Map::new();
        fields.insert("tool_name".into(), json!(firing.tool));
        fields.insert("tool_args".into(), firing.args.clone());
        Box::pin(async move {
            if !wanted {
                return Ok(HookOutcome::Allow.into());
            }
            let answer = self.ask_intercept("tool_call", fields, timeout).await?;
            let outcome = match serde_json::from_str::<FromExtension>(answer.get()) {
                Ok(FromExtension::EventInterceptResponse {
                    block: true,
                    reason,
                    ..
                }) => HookOutcome::Block {
                    reason,
                    user_message: None,
                },
                Ok(FromExtension::EventInterceptResponse {
                    modified_args: Some(args),
                    ..
                }) if args.is_object() => HookOutcome::Rewrite(args),
                Ok(FromExtension::EventInterceptResponse {
                    modified_args: None,
                    ..
                }) => HookOutcome::Allow,
                // Malformed: it goes ahead unchanged (zot's rule), and the host hears why.
                _ => {
                    return Err(PeerError::malformed_text(
                        "event_intercept",
                        "not an event_intercept_response with object modified_args",
                        answer.get(),
                    ));
                }
            };
            Ok(outcome.into())
        })
    }

    fn intercept(
        &self,
        point: &Intercept,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<InterceptOutcome, PeerError>> {
        let name = point.name();
        let wanted = self.router.intercepts(name);
        let mut fields = serde_json::Map::new();
        match point {
            Intercept::TurnStart { step } => {
                fields.insert("step".into(), json!(step));
            }
            Intercept::AssistantMessage { text } => {
                fields.insert("text".into(), json!(text));
            }
            Intercept::SystemPrompt {
                prompt,
                provider,
                model,
            } => {
                fields.insert("system_prompt".into(), json!(prompt));
                fields.insert("session_id".into(), json!(self.router.session_id));
                fields.insert("cwd".into(), json!(self.router.cwd));
                fields.insert("provider".into(), json!(provider));
                fields.insert("model".into(), json!(model));
            }
            // zot intercepts neither: its `user_prompt_submit` is an event only.
            Intercept::PromptSubmit { .. } | Intercept::Stop { .. } => {
                return Box::pin(async { Ok(InterceptOutcome::Continue) });
            }
        }
        Box::pin(async move {
            if !wanted {
                return Ok(InterceptOutcome::Continue);
            }
            let answer = self.ask_intercept(name, fields, timeout).await?;
            let Ok(FromExtension::EventInterceptResponse {
                block,
                reason,
                replace_text,
                system_prompt,
                ..
            }) = serde_json::from_str::<FromExtension>(answer.get())
            else {
                return Err(PeerError::malformed_text(
                    "event_intercept",
                    "not an event_intercept_response",
                    answer.get(),
                ));
            };
            Ok(match name {
                // `block` is ignored here; an omitted prompt keeps the current one.
                "before_agent_start" => match system_prompt {
                    None => InterceptOutcome::Continue,
                    Some(Value::String(prompt)) => InterceptOutcome::SystemPrompt(prompt),
                    Some(other) => {
                        return Err(PeerError::malformed(
                            "event_intercept",
                            "system_prompt must be a string",
                            &other,
                        ));
                    }
                },
                _ if block => InterceptOutcome::Block { reason },
                "assistant_message" => {
                    replace_text.map_or(InterceptOutcome::Continue, InterceptOutcome::ReplaceText)
                }
                _ => InterceptOutcome::Continue,
            })
        })
    }

    fn panel_input(&self, input: &PanelInput) -> PeerFuture<'_, Result<(), PeerError>> {
        let frame = match input {
            PanelInput::Key { id, key, text } => ToExtension::PanelKey {
                panel_id: id.clone(),
                key: key.clone(),
                text: text.clone().unwrap_or_default(),
            },
            PanelInput::Closed { id } => ToExtension::PanelClose {
                panel_id: id.clone(),
            },
        };
        // In order with the events queued before it.
        let queued = self.queue("panel_key", frame);
        Box::pin(async move { queued })
    }

    fn prompt(&self, _timeout: Duration) -> PeerFuture<'_, Result<String, PeerError>> {
        // zot extensions contribute no prompt text (before_agent_start replaces the whole
        // prompt, which is another path).
        Box::pin(async { Ok(String::new()) })
    }

    fn command(
        &self,
        name: &str,
        arguments: &str,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<CommandResult, PeerError>> {
        // The registered spelling, whatever case it was asked in.
        let name = self
            .offer
            .commands
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .map_or_else(|| name.to_string(), |c| c.name.clone());
        let args = arguments.trim().to_string();
        // zot gives a command 30 s.
        let timeout = timeout.min(COMMAND_DEADLINE);
        Box::pin(async move {
            let answer = self
                .ask(
                    "command_invoked",
                    |id| ToExtension::CommandInvoked { id, name, args },
                    CallOptions::timeout(timeout),
                )
                .await?;
            let Ok(FromExtension::CommandResponse {
                action,
                prompt,
                insert,
                display,
                open_panel,
                error,
                ..
            }) = serde_json::from_str::<FromExtension>(answer.get())
            else {
                return Err(PeerError::malformed_text(
                    "command_invoked",
                    "not a command_response",
                    answer.get(),
                ));
            };
            if !error.is_empty() {
                return Ok(CommandResult {
                    success: false,
                    message: error,
                });
            }
            let message = match action.as_str() {
                "prompt" | "tool_prompt" => prompt,
                "insert" => insert,
                "display" => display,
                "open_panel" => match open_panel {
                    // The panel opens (owned by this extension); the command says what it shows.
                    Some(panel) => {
                        let message = std::iter::once(panel.title.clone())
                            .chain(panel.lines.iter().cloned())
                            .collect::<Vec<_>>()
                            .join("\n");
                        let extension = &self.router.extension;
                        self.router
                            .events
                            .panel(extension, PanelUpdate::Open(panel.into()));
                        message
                    }
                    None => String::new(),
                },
                "noop" | "" => String::new(),
                other => {
                    return Ok(CommandResult {
                        success: false,
                        message: format!("unknown action {other}"),
                    });
                }
            };
            Ok(CommandResult {
                success: true,
                message,
            })
        })
    }

    fn config_changed(
        &self,
        _config: Value,
        _timeout: Duration,
    ) -> PeerFuture<'_, Result<ConfigOutcome, PeerError>> {
        // zot has no config push: new config means a restart.
        Box::pin(async { Ok(ConfigOutcome::RestartRequired) })
    }

    fn workspace_changed(&self, _root: &str) -> PeerFuture<'_, Result<(), PeerError>> {
        // zot tells the workspace only in hello_ack; the next start gets the new one.
        Box::pin(async { Ok(()) })
    }

    fn trace(&self, event: &TraceEvent) -> PeerFuture<'_, Result<(), PeerError>> {
        // A lifecycle event, to an extension that observes it: queued, never awaited.
        let queued = match frames::zot_event(&event.event_type) {
            Some(name) if self.router.observes(name) => {
                let sequence = self.router.sequence.fetch_add(1, Ordering::Relaxed) + 1;
                let frame = frames::event_frame(
                    name,
                    &event.data,
                    &self.router.session_id,
                    &self.router.cwd,
                    sequence,
                );
                self.queue("event", frame)
            }
            _ => Ok(()),
        };
        Box::pin(async move { queued })
    }

    fn barrier(&self, timeout: Duration) -> PeerFuture<'_, Result<(), PeerError>> {
        // Nothing answers for events: the barrier is the queue written out.
        Box::pin(async move {
            let _ = tokio::time::timeout(timeout, self.outbox.drained()).await;
            Ok(())
        })
    }

    fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>> {
        // A frame of type `method` with these fields and a fresh id.
        let method = method.to_string();
        Box::pin(async move {
            let mut frame = params.unwrap_or_else(|| json!({}));
            let answer = self
                .conn
                .call(
                    &method,
                    |id| {
                        frame["type"] = json!(method);
                        frame["id"] = json!(id_text(id));
                        frame.to_string()
                    },
                    CallOptions::timeout(timeout),
                )
                .await
                .map_err(|e| PeerError::call(&method, e))?;
            serde_json::from_str(answer.get())
                .map_err(|e| PeerError::malformed_text(&method, e, answer.get()))
        })
    }

    fn shutdown(&self, grace: Duration) -> PeerFuture<'_, ()> {
        Box::pin(async move {
            // What is queued (a `session_end`, say) goes first; then `shutdown`, and stdin
            // closes at once. All of it within one grace: the host waits for the exit, not
            // for `shutdown_ack`.
            let stop = async {
                self.outbox.drained().await;
                if !self.conn.is_closed() {
                    let _ = self.conn.send(ToExtension::Shutdown.line()).await;
                }
            };
            let _ = tokio::time::timeout(grace, stop).await;
            // At once, however the above went: closing stdin is what ends a zot extension.
            let _ = tokio::time::timeout(Duration::from_millis(100), self.conn.close_write()).await;
        })
    }

    fn close(&self, reason: CloseReason) {
        self.conn.close(reason);
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.conn.close_reason()
    }

    fn closed(&self) -> PeerFuture<'_, CloseReason> {
        Box::pin(self.conn.closed())
    }
}

/// The frames queued for one extension, written in order by one task: at most
/// [`OUTBOX_FRAMES`] (plus the one being written) or [`OUTBOX_BYTES`]; past that the
/// extension is disconnected, never silently dropped from. A write that blocks for
/// [`WRITE_BOUND`] disconnects it too.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutboxState>,
    wake: Notify,
    idle: Notify,
}

#[derive(Default)]
struct OutboxState {
    queue: std::collections::VecDeque<String>,
    bytes: usize,
    writing: bool,
    /// The writer is gone (the connection closed): nothing more is written, or waited for.
    dead: bool,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `line`, or say why the extension must be disconnected.
    fn push(&self, line: String) -> Result<(), CloseReason> {
        let mut state = self.lock();
        if state.dead {
            // Disconnected already: its calls fail on their own.
            return Ok(());
        }
        if state.queue.len() >= OUTBOX_FRAMES || state.bytes + line.len() > OUTBOX_BYTES {
            return Err(CloseReason::Backlogged {
                frames: OUTBOX_FRAMES,
                bytes: OUTBOX_BYTES,
            });
        }
        state.bytes += line.len();
        state.queue.push_back(line);
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// Nothing queued or being written.
    fn is_empty(&self) -> bool {
        let state = self.lock();
        state.dead || (state.queue.is_empty() && !state.writing)
    }

    /// Resolves once everything queued has been written.
    async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            if self.is_empty() {
                return;
            }
            // The timeout covers a wake that raced the check.
            let _ = tokio::time::timeout(Duration::from_millis(20), idle).await;
        }
    }

    /// The writer: until the connection is gone. Then the queue is dead, so nothing waits on
    /// it.
    async fn write(self: Arc<Self>, conn: WeakConnection) {
        self.write_until_closed(&conn).await;
        {
            let mut state = self.lock();
            state.dead = true;
            state.queue.clear();
            state.bytes = 0;
            state.writing = false;
        }
        self.idle.notify_waiters();
    }

    async fn write_until_closed(&self, conn: &WeakConnection) {
        loop {
            let next = {
                let mut state = self.lock();
                let next = state.queue.pop_front();
                if let Some(line) = &next {
                    state.bytes -= line.len();
                }
                state.writing = next.is_some();
                next
            };
            let Some(line) = next else {
                self.idle.notify_waiters();
                // Idle without holding the connection: it goes when its peer does.
                let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
                if conn.upgrade().is_none_or(|c| c.is_closed()) {
                    return;
                }
                continue;
            };
            let Some(live) = conn.upgrade() else { return };
            match tokio::time::timeout(WRITE_BOUND, live.send(line)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    live.close(CloseReason::WriteStalled { after: WRITE_BOUND });
                    return;
                }
            }
        }
    }
}

/// A host `tool_call` in flight to the extension, from its write until it ends (dropped).
struct LiveGuard<'a> {
    router: &'a Router,
    id: Mutex<Option<String>>,
    done: CancellationToken,
}

impl LiveGuard<'_> {
    fn register(&self, id: &str, chain: Vec<String>) {
        *self.id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.to_string());
        let done = self.done.clone();
        self.router
            .lock()
            .live
            .insert(id.to_string(), LiveCall { chain, done });
    }
}

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.lock().unwrap_or_else(|p| p.into_inner()).take() {
            self.router.lock().live.remove(&id);
        }
        // The calls the extension made under it end with it.
        self.done.cancel();
    }
}

/// An id as zot writes it: the bare string.
fn id_text(id: &Id) -> String {
    match id {
        Id::Str(s) => s.to_string(),
        Id::Num(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launcher_that_builds_first_is_waited_for_longer_and_told_of_early() {
        let ten = Duration::from_secs(10);
        let ordinary = HelloWaits::new(ten, false, None);
        assert_eq!(
            ordinary,
            HelloWaits {
                hello: HELLO_WAIT,
                notice: None
            }
        );
        let slow = HelloWaits::new(ten, true, None);
        assert_eq!(slow.hello, SLOW_START_HELLO_WAIT);
        assert_eq!(slow.notice, Some(SLOW_START_NOTICE));
        // A longer handshake timeout (an embedder's) is never cut short.
        let hour = Duration::from_secs(3600);
        assert_eq!(HelloWaits::new(hour, false, None).hello, hour);
        assert_eq!(HelloWaits::new(hour, true, None).hello, hour);
    }

    #[test]
    fn the_ordinary_hello_wait_is_set_by_its_variable_and_a_slow_start_keeps_its_own() {
        let ten = Duration::from_secs(10);
        let short = Duration::from_millis(300);
        assert_eq!(
            HelloWaits::new(ten, false, Some("300")),
            HelloWaits {
                hello: short,
                notice: None
            }
        );
        // Told of once the ordinary wait is past, where it would otherwise have failed.
        assert_eq!(
            HelloWaits::new(ten, true, Some("300")),
            HelloWaits {
                hello: SLOW_START_HELLO_WAIT,
                notice: Some(short)
            }
        );
        for junk in ["", "soon", "-1", "1.5"] {
            assert_eq!(
                HelloWaits::new(ten, false, Some(junk)).hello,
                HELLO_WAIT,
                "{junk:?}"
            );
        }
    }

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(said(Duration::from_millis(300)), "300 ms");
        assert_eq!(said(HELLO_WAIT), "60 s");
        assert_eq!(said(Duration::from_secs(90)), "90 s");
        assert_eq!(said(SLOW_START_HELLO_WAIT), "10 min");
        assert_eq!(said(Duration::from_secs(3600)), "60 min");
    }
}
