//! The extension's unasked frames: what it registers, its notes and panels, and its own
//! `call_tool` requests, checked by zot's rules and run on the host.

use super::frames::{FromExtension, ToExtension};
use super::handshake::{Greeting, NotHello};
use super::outbox::Outbox;
use super::peer::Registrations;
use super::{CALL_TOOL_DEADLINE, MAX_CHAIN, MAX_NESTED_CALLS, MAX_REGISTRATIONS, frames};
use crate::capability::{
    Events, HostToolCall, HostToolError, LogLevel, OfferedCommand, OfferedTool, Panel, PanelUpdate,
    RemoteError, Status, StatusLevel,
};
use crate::rpc::{BoxFuture, CloseReason, Handler, WeakConnection};
use crate::store::zot::{CALL_TOOL, EVENTS, INTERCEPTS};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// What an extension registered, and where the handshake stands.
#[derive(Default)]
pub(super) struct State {
    /// Taken by the first frame: told the hello, or why the first frame is not one.
    pub(super) said_hello: Option<oneshot::Sender<Result<Greeting, NotHello>>>,
    pub(super) ready: bool,
    pub(super) tools: Vec<OfferedTool>,
    pub(super) commands: Vec<OfferedCommand>,
    pub(super) intercepts: Vec<String>,
    /// Lifecycle events it observes (known names only).
    pub(super) events: Vec<String>,
    /// What its hello said it takes (exact names; only `tool_cancel` and `call_tool` matter).
    pub(super) capabilities: Vec<String>,
    /// The host's tool calls in flight to it, by id: the chain each is part of.
    pub(super) live: HashMap<String, LiveCall>,
    /// Its tools that wait on the user (no host deadline; they need an interactive UI).
    pub(super) interactive: Vec<String>,
    /// What it registered beyond its pin that was already reported.
    pub(super) reported: Vec<String>,
    /// The handshake is over: a registration now is checked against the pin at once.
    pub(super) open: bool,
}

/// A host `tool_call` in flight to the extension: a `call_tool` made under it continues its
/// chain, and ends when it ends.
pub(super) struct LiveCall {
    /// The tools that led to it, and itself last.
    chain: Vec<String>,
    /// Fired when the call ends.
    done: CancellationToken,
}

/// The extension's unasked frames: its hello, registrations, ready, notes.
pub(super) struct Router {
    pub(super) extension: String,
    pub(super) events: Arc<dyn Events>,
    /// Where its `call_tool` answers go (weak: the connection owns this router).
    pub(super) conn: std::sync::OnceLock<WeakConnection>,
    /// Every frame the host makes unasked, in order; written once `hello_ack` is out.
    pub(super) outbox: Arc<Outbox>,
    /// Its own `call_tool` requests in flight, by its id.
    pub(super) nested: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// The session, as events and intercepts tell it.
    pub(super) session_id: String,
    pub(super) cwd: String,
    /// A user is at an interactive UI.
    pub(super) interactive_ui: bool,
    /// What it was approved to intercept and observe (`None`: not pinned, so whatever it
    /// subscribes to).
    pub(super) pin: Option<crate::store::zot::ZotPin>,
    /// The last event's sequence number.
    pub(super) sequence: AtomicU64,
    pub(super) state: Mutex<State>,
    /// Woken on every frame (the auto-ready idle clock).
    pub(super) frame: Notify,
}

impl Router {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// It subscribed to intercept `name`, within its pin.
    pub(super) fn intercepts(&self, name: &str) -> bool {
        self.lock().intercepts.iter().any(|i| i == name)
            && self.pin.as_ref().is_none_or(|pin| pin.intercepts(name))
    }

    /// What it has registered so far.
    pub(super) fn registrations(&self) -> Registrations {
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
    pub(super) fn report_beyond_pin(&self) {
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
    pub(super) fn observes(&self, name: &str) -> bool {
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
    pub(super) fn queue(&self, line: String) -> Result<(), CloseReason> {
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

/// A host `tool_call` in flight to the extension, from its write until it ends (dropped).
pub(super) struct LiveGuard<'a> {
    pub(super) router: &'a Router,
    pub(super) id: Mutex<Option<String>>,
    pub(super) done: CancellationToken,
}

impl LiveGuard<'_> {
    pub(super) fn register(&self, id: &str, chain: Vec<String>) {
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
