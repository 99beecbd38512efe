//! YEP 1.0, the wire yolop speaks: ndjson JSON-RPC-shaped frames. This module is everything
//! YEP-specific in the host: the handshake, the typed calls, `tool/update` routing by
//! `request_id`, `cancel {id}`, and the server's notifications and requests mapped to
//! [`Events`].

use super::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFuture, Streams};
use crate::capability::{
    Answer, CommandResult, ConfigOutcome, Events, Grants, HookAnswer, HookEvent, HookFiring,
    HookOutcome, LogLevel, Offer, OfferedTool, Progress, Question, RemoteError, Status,
    StatusLevel, ToolCall, ToolResult, TraceEvent,
};
use crate::rpc::{
    BoxFuture, CallError, CallOptions, CloseReason, Codec, Connection, ConnectionOptions, Frame,
    Handler, Id, Malformed, RawValue,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use yep_protocol::methods::{
    CANCEL, COMMAND_EXECUTE, CONFIG_CHANGED, EXIT, HOOK_FIRE, INITIALIZE, INITIALIZED,
    PROMPT_CONTRIBUTION, SHUTDOWN, TOOL_CALL, TOOL_UPDATE, TRACE_EVENT, WORKSPACE_CHANGED,
};
use yep_protocol::{
    CancelParams, CommandExecuteParams, CommandExecuteResult, ConfigChangedParams,
    ConfigChangedResult, ConfigStatus, ErrorCode, ErrorObject, HookDecision, HookFireParams,
    InitializeParams, InitializeResult, PROTOCOL_VERSION, PromptContribution, RawMessage,
    ServerNotification, ServerRequest, ToolCallParams, ToolUpdateParams, TraceEventParams,
    UiAskParams, UiAskResult, WorkspaceChangedParams, error_line, notification_line, request_line,
    result_line, tool_call_line, version_compatible,
};

/// Feature tokens this host always advertises in `initialize`; `ui_ask` and `status` are
/// added when the manifest grants them.
pub(crate) const HOST_CAPABILITIES: &[&str] = &["streaming", "cancel"];

/// The sink of a tool call nobody watches: one for every such call, not one each.
static IGNORE_PROGRESS: std::sync::LazyLock<crate::capability::UpdateSink> =
    std::sync::LazyLock::new(|| Arc::new(|_: &Progress| {}));

/// The YEP 1.0 dialect.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Yep;

impl Dialect for Yep {
    fn name(&self) -> &'static str {
        "YEP"
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        Box::pin(async move {
            let router = Arc::new(EventRouter {
                extension: hello.extension.clone(),
                events,
            });
            let conn = streams.connect(router, codec(), opts)?;
            let params = initialize_params(
                &hello.session_id,
                &hello.workspace_root,
                hello.config.clone(),
                hello.grants,
            );
            // A server run through `go run` or `npx` may build or download first: waited for
            // longer, and the user told why.
            let slow = hello.slow_start.as_ref();
            let patience = crate::launcher::patience(slow, hello.timeout);
            let answered = crate::launcher::told_while(
                &hello.extension,
                "initialize answer",
                slow,
                hello.timeout,
                handshake(&conn, &params, patience),
            );
            match answered.await {
                Ok(init) => Ok(Arc::new(YepPeer::new(conn, init, hello)) as Arc<dyn Peer>),
                Err(err) => {
                    // A server that ended before it read the request: what it wrote is read
                    // to its end first.
                    if matches!(err, HandshakeError::Call(CallError::Write(_))) {
                        let _ = tokio::time::timeout(WRITE_FAILED_DRAIN, conn.closed()).await;
                    }
                    conn.close(CloseReason::Shutdown);
                    // Output before the handshake is most often why it failed: say which.
                    Err(match conn.first_stray_line() {
                        Some(line) => HandshakeError::StrayOutput {
                            expected: "a YEP message",
                            line: line.to_string(),
                            error: Box::new(err),
                        },
                        None => err,
                    })
                }
            }
        })
    }
}

/// How long a failed handshake whose request could not be written waits for the server's
/// stdout to end, so that what it wrote before is read.
const WRITE_FAILED_DRAIN: Duration = Duration::from_millis(500);

/// YEP's framing, for [`Connection`]s that speak YEP.
pub fn codec() -> Arc<dyn Codec> {
    Arc::new(YepCodec)
}

struct YepCodec;

impl Codec for YepCodec {
    /// The envelope is classified without parsing its payload: a result stays the text the
    /// server wrote (one copy out of the line); what the host acts on itself is parsed.
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
        let value = |raw: Option<&RawValue>| match raw {
            Some(raw) => serde_json::from_str::<Value>(raw.get()).map_err(Malformed::new),
            None => Ok(Value::Null),
        };
        Ok(match RawMessage::parse(line).map_err(Malformed::new)? {
            RawMessage::Response { id, result } => Frame::Response {
                id: Id::Num(id),
                result: match result {
                    Ok(raw) => Ok(raw.to_owned()),
                    Err(raw) => Err(remote(ErrorObject::from_wire(value(Some(raw))?))),
                },
            },
            RawMessage::Notification { method, params } if method == TOOL_UPDATE => {
                let update: ToolUpdateParams = params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or_default();
                Frame::Progress {
                    id: Id::Num(update.request_id),
                    update: Progress::message(update.output),
                }
            }
            RawMessage::Notification { method, params } => Frame::Notification {
                method: method.into_owned(),
                params: value(params)?,
            },
            RawMessage::Request { id, method, params } => Frame::Request {
                id: Id::Num(id),
                method: method.into_owned(),
                params: value(params)?,
            },
        })
    }

    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
        let Id::Num(id) = *id else {
            unreachable!("YEP requests carry numeric ids")
        };
        match result {
            Ok(v) => result_line(id, &v),
            Err(e) => error_line(id, &error_object(e)),
        }
    }

    fn cancel(&self, id: &Id, fresh: Id) -> Option<String> {
        let (Id::Num(id), Id::Num(fresh)) = (id, fresh) else {
            return None;
        };
        Some(request_line(fresh, CANCEL, Some(&CancelParams { id: *id })))
    }
}

fn remote(e: ErrorObject) -> RemoteError {
    RemoteError {
        code: e.code.0,
        message: e.message,
        retryable: e.retryable,
        data: e.data,
    }
}

fn error_object(e: RemoteError) -> ErrorObject {
    ErrorObject {
        code: ErrorCode(e.code),
        message: e.message,
        retryable: e.retryable,
        data: e.data,
    }
}

/// A request on a YEP connection, decoded as `R`.
pub async fn request<P: Serialize, R: DeserializeOwned>(
    conn: &Connection,
    method: &str,
    params: Option<&P>,
    opts: CallOptions,
) -> Result<R, PeerError> {
    let raw = conn
        .call(method, |id| request_line(num(id), method, params), opts)
        .await
        .map_err(|e| PeerError::call(method, e))?;
    // Straight from the server's text into what is asked for: no value in between.
    serde_json::from_str(raw.get()).map_err(|e| PeerError::malformed_text(method, e, raw.get()))
}

/// A notification on a YEP connection.
pub(crate) async fn notify<P: Serialize>(
    conn: &Connection,
    method: &str,
    params: Option<&P>,
) -> Result<(), CallError> {
    conn.send(notification_line(method, params)).await
}

fn num(id: &Id) -> u64 {
    match id {
        Id::Num(n) => *n,
        Id::Str(_) => unreachable!("the YEP codec numbers its requests"),
    }
}

/// A live YEP server.
pub(crate) struct YepPeer {
    conn: Connection,
    offer: Offer,
    extension: String,
    session_id: String,
    next_call: AtomicU64,
}

impl YepPeer {
    fn new(conn: Connection, init: InitializeResult, hello: Hello) -> YepPeer {
        let offer = Offer {
            name: init.name.clone(),
            wire: format!("YEP {}", init.protocol_version),
            tools: init
                .capability_params
                .tools
                .iter()
                .map(|t| OfferedTool {
                    description: t.description.clone(),
                    schema: t.schema.clone(),
                    output_schema: t.output_schema.clone(),
                    ..OfferedTool::named(&t.name)
                })
                .collect(),
            prompt: init
                .capability_params
                .prompt
                .as_ref()
                .map(|p| p.static_text.clone()),
            dynamic_prompt: init.capabilities.iter().any(|c| c == "dynamic_prompt"),
            commands: Vec::new(),
            hooks: Vec::new(),
            grants: Grants {
                ui_ask: init.capabilities.iter().any(|c| c == "ui_ask"),
                status: init.capabilities.iter().any(|c| c == "status"),
                call_tools: false,
            },
        };
        YepPeer {
            conn,
            offer,
            extension: hello.extension,
            session_id: hello.session_id,
            next_call: AtomicU64::new(1),
        }
    }
}

impl Peer for YepPeer {
    fn offer(&self) -> &Offer {
        &self.offer
    }

    fn call_tool(
        &self,
        call: ToolCall,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>> {
        // `<extension>-<n>`, without the formatting machinery: this is on every call.
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        let mut tool_call_id = String::with_capacity(self.extension.len() + 21);
        tool_call_id.push_str(&self.extension);
        tool_call_id.push('-');
        tool_call_id.push_str(itoa::Buffer::new().format(n));
        let params = ToolCallParams {
            tool_call_id,
            name: call.tool,
            args: call.args,
        };
        let opts = CallOptions {
            timeout: Some(timeout),
            // A sink even when nobody listens: progress then still pushes the timeout out.
            updates: Some(call.updates.unwrap_or_else(|| Arc::clone(&IGNORE_PROGRESS))),
            cancel: call.cancel,
        };
        Box::pin(async move {
            // The result passes through as the server wrote it.
            let raw = self
                .conn
                .call(TOOL_CALL, |id| tool_call_line(num(id), &params), opts)
                .await
                .map_err(|e| PeerError::call(TOOL_CALL, e))?;
            Ok(ToolResult::from_raw(raw))
        })
    }

    fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<HookAnswer, PeerError>> {
        let params = HookFireParams {
            event: match firing.event {
                HookEvent::PreToolUse => "pre_tool_use",
                HookEvent::PostToolUse => "post_tool_use",
            }
            .into(),
            tool_name: firing.tool.clone(),
            args: firing.args.clone(),
            result: firing.result.clone(),
        };
        Box::pin(async move {
            let d: HookDecision = request(
                &self.conn,
                HOOK_FIRE,
                Some(&params),
                CallOptions::timeout(timeout),
            )
            .await?;
            Ok(if d.block {
                HookOutcome::Block {
                    reason: d.reason,
                    user_message: d.user_message,
                }
            } else {
                match d.modified_args {
                    Some(args) => HookOutcome::Rewrite(args),
                    None => HookOutcome::Allow,
                }
            }
            .into())
        })
    }

    fn prompt(&self, timeout: Duration) -> PeerFuture<'_, Result<String, PeerError>> {
        Box::pin(async move {
            let c: PromptContribution = request::<(), _>(
                &self.conn,
                PROMPT_CONTRIBUTION,
                None,
                CallOptions::timeout(timeout),
            )
            .await?;
            Ok(c.text)
        })
    }

    fn command(
        &self,
        name: &str,
        arguments: &str,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<CommandResult, PeerError>> {
        let params = CommandExecuteParams {
            name: name.into(),
            arguments: arguments.into(),
        };
        Box::pin(async move {
            let r: CommandExecuteResult = request(
                &self.conn,
                COMMAND_EXECUTE,
                Some(&params),
                CallOptions::timeout(timeout),
            )
            .await?;
            Ok(CommandResult {
                success: r.success,
                message: r.message,
            })
        })
    }

    fn config_changed(
        &self,
        config: Value,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ConfigOutcome, PeerError>> {
        let params = ConfigChangedParams { config };
        Box::pin(async move {
            let answer = request::<_, Value>(
                &self.conn,
                CONFIG_CHANGED,
                Some(&params),
                CallOptions::timeout(timeout),
            )
            .await;
            match answer {
                Ok(v) => Ok(match ConfigChangedResult::from_wire(&v).status {
                    ConfigStatus::Ok => ConfigOutcome::Applied,
                    ConfigStatus::RestartRequired => ConfigOutcome::RestartRequired,
                }),
                // A server that does not know the method takes new config by a restart.
                Err(PeerError {
                    failure: super::PeerFailure::Call(CallError::Remote(e)),
                    ..
                }) if e.is_method_not_found() => Ok(ConfigOutcome::RestartRequired),
                Err(err) => Err(err),
            }
        })
    }

    fn workspace_changed(&self, root: &str) -> PeerFuture<'_, Result<(), PeerError>> {
        let params = WorkspaceChangedParams {
            workspace_root: root.into(),
        };
        Box::pin(async move {
            notify(&self.conn, WORKSPACE_CHANGED, Some(&params))
                .await
                .map_err(|e| PeerError::call(WORKSPACE_CHANGED, e))
        })
    }

    fn trace(&self, event: &TraceEvent) -> PeerFuture<'_, Result<(), PeerError>> {
        let params = TraceEventParams {
            event_type: event.event_type.clone(),
            id: event.id.clone(),
            ts: event.ts.clone(),
            session_id: self.session_id.clone(),
            context: event.context.clone(),
            data: event.data.clone(),
            metadata: event.metadata.clone(),
        };
        Box::pin(async move {
            notify(&self.conn, TRACE_EVENT, Some(&params))
                .await
                .map_err(|e| PeerError::call(TRACE_EVENT, e))
        })
    }

    fn barrier(&self, timeout: Duration) -> PeerFuture<'_, Result<(), PeerError>> {
        // A server handles its input in order: the answer to `shutdown` comes after every
        // trace event sent before it.
        Box::pin(async move {
            request::<(), Value>(&self.conn, SHUTDOWN, None, CallOptions::timeout(timeout))
                .await
                .map(drop)
        })
    }

    fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>> {
        let method = method.to_string();
        Box::pin(async move {
            request(
                &self.conn,
                &method,
                params.as_ref(),
                CallOptions::timeout(timeout),
            )
            .await
        })
    }

    fn shutdown(&self, grace: Duration) -> PeerFuture<'_, ()> {
        Box::pin(async move {
            if !self.conn.is_closed() {
                let _ =
                    request::<(), Value>(&self.conn, SHUTDOWN, None, CallOptions::timeout(grace))
                        .await;
                let _ = tokio::time::timeout(grace, notify::<()>(&self.conn, EXIT, None)).await;
            }
            let _ = tokio::time::timeout(grace, self.conn.close_write()).await;
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

/// Adapts a YEP server's notifications and requests to [`Events`] for one extension.
struct EventRouter {
    extension: String,
    events: Arc<dyn Events>,
}

impl Handler for EventRouter {
    fn notification(&self, method: &str, params: Value) {
        match ServerNotification::parse(method, params) {
            Ok(ServerNotification::StatusChanged(s)) => {
                let status = (!s.status.is_empty()).then_some(Status {
                    text: s.status,
                    level: match s.level {
                        yep_protocol::StatusLevel::Ok => StatusLevel::Ok,
                        yep_protocol::StatusLevel::Warn => StatusLevel::Warn,
                        yep_protocol::StatusLevel::Error => StatusLevel::Error,
                    },
                    detail: s.detail,
                });
                self.events.status(&self.extension, status)
            }
            Ok(ServerNotification::Log(l)) => {
                let level = match l.level.as_deref().unwrap_or("info") {
                    "error" => LogLevel::Error,
                    "warn" => LogLevel::Warn,
                    "debug" | "trace" => LogLevel::Debug,
                    _ => LogLevel::Info,
                };
                self.events.log(&self.extension, level, &l.message)
            }
            Ok(other) => {
                tracing::debug!(extension = %self.extension, "ignoring notification {}", other.method())
            }
            Err(err) => {
                tracing::warn!(extension = %self.extension, "ignoring {method} with bad params: {err}")
            }
        }
    }

    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, RemoteError>> {
        match ServerRequest::parse(method, params) {
            Ok(ServerRequest::UiAsk(ask)) => {
                let fut = self.events.ask(&self.extension, question(ask));
                Box::pin(async move {
                    let answer: Answer = fut.await;
                    Ok(serde_json::to_value(UiAskResult {
                        answer: answer.answer,
                        cancelled: answer.cancelled,
                        reason: answer.reason,
                    })
                    .unwrap_or(Value::Null))
                })
            }
            Ok(other) => {
                let err = remote(ErrorObject::method_not_found(other.method()));
                Box::pin(async move { Err(err) })
            }
            Err(err) => {
                let err = remote(ErrorObject::invalid_params(method, err));
                Box::pin(async move { Err(err) })
            }
        }
    }
}

fn question(ask: UiAskParams) -> Question {
    Question {
        prompt: ask.prompt,
        placeholder: ask.placeholder,
        secret: ask.secret,
        options: ask.options,
    }
}

/// `initialize`, the version check, then `initialized`.
pub(crate) async fn handshake(
    conn: &Connection,
    params: &InitializeParams,
    timeout: Duration,
) -> Result<InitializeResult, HandshakeError> {
    let raw = conn
        .call(
            INITIALIZE,
            |id| request_line(num(id), INITIALIZE, Some(params)),
            CallOptions::timeout(timeout),
        )
        .await?;
    let result: InitializeResult = serde_json::from_str(raw.get())
        .map_err(|e| HandshakeError::Malformed(crate::text::escape(&e.to_string()).into_owned()))?;
    if !version_compatible(&result.protocol_version) {
        return Err(HandshakeError::Incompatible {
            wire: "YEP",
            version: result.protocol_version,
            ours: PROTOCOL_VERSION.to_string(),
        });
    }
    notify::<()>(conn, INITIALIZED, None).await?;
    Ok(result)
}

/// The `initialize` params this host sends.
pub(crate) fn initialize_params(
    session_id: &str,
    workspace_root: &str,
    config: Value,
    grants: Grants,
) -> InitializeParams {
    let mut capabilities: Vec<String> = HOST_CAPABILITIES.iter().map(|s| s.to_string()).collect();
    if grants.ui_ask {
        capabilities.push("ui_ask".into());
    }
    if grants.status {
        capabilities.push("status".into());
    }
    InitializeParams {
        protocol_version: PROTOCOL_VERSION.to_string(),
        session_id: session_id.to_string(),
        workspace_root: workspace_root.to_string(),
        config,
        capabilities,
    }
}
