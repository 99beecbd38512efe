//! A live zot extension as a [`Peer`]: tool calls, intercepts, commands, events and panels in
//! zot's frames.

use super::codec::id_text;
use super::frames::{FromExtension, ToExtension, model_content};
use super::outbox::Outbox;
use super::router::{LiveGuard, Router};
use super::{COMMAND_DEADLINE, WRITE_BOUND, frames};
use crate::capability::{
    CommandResult, ConfigOutcome, HookAnswer, HookEvent, HookFiring, HookOutcome, Intercept,
    InterceptOutcome, Offer, OfferedCommand, OfferedTool, PanelInput, PanelUpdate, RemoteError,
    ToolCall, ToolResult, TraceEvent,
};
use crate::dialect::{Peer, PeerError, PeerFuture};
use crate::rpc::{CallError, CallOptions, CloseReason, Connection, RawValue};
use crate::store::zot::CALL_TOOL;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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
pub(crate) struct ZotPeer {
    pub(super) conn: Connection,
    pub(super) offer: Offer,
    pub(super) router: Arc<Router>,
    /// Events waiting to be written, in order.
    pub(super) outbox: Arc<Outbox>,
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
    pub(crate) fn registrations(&self) -> Registrations {
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
