//! YEP 1.0: the handshake, and the server → host traffic routed to [`Events`].

use crate::rpc::{BoxFuture, CallError, CallOptions, Connection, Handler};
use crate::supervisor::Grants;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use yep_protocol::methods::{INITIALIZE, INITIALIZED};
use yep_protocol::{
    ErrorObject, InitializeParams, InitializeResult, LogParams, PROTOCOL_VERSION,
    ServerNotification, ServerRequest, StatusChangedParams, UiAskParams, UiAskResult,
    version_compatible,
};

/// Feature tokens this host always advertises in `initialize`; `ui_ask` and `status` are
/// added when the manifest grants them.
pub const HOST_CAPABILITIES: &[&str] = &["streaming", "cancel"];

/// What a server pushes to the host. Every method has a default, so implement what you show.
pub trait Events: Send + Sync + 'static {
    /// `status/changed`: a status-bar string (empty clears).
    fn status(&self, extension: &str, status: StatusChangedParams) {
        tracing::info!(extension, level = ?status.level, "status: {}", status.status);
    }

    /// `log`: a log line from the server.
    fn log(&self, extension: &str, log: LogParams) {
        let level = log.level.as_deref().unwrap_or("info");
        match level {
            "error" => tracing::error!(extension, "{}", log.message),
            "warn" => tracing::warn!(extension, "{}", log.message),
            "debug" | "trace" => tracing::debug!(extension, "{}", log.message),
            _ => tracing::info!(extension, "{}", log.message),
        }
    }

    /// `ui/ask`: ask the user. Without a prompt surface, answer `cancelled` (the default).
    fn ask(&self, extension: &str, params: UiAskParams) -> BoxFuture<UiAskResult> {
        tracing::info!(
            extension,
            "no prompt surface; refusing ui/ask: {}",
            params.prompt
        );
        Box::pin(async { UiAskResult::cancelled() })
    }
}

/// Events that go to the log only, and questions that are refused.
pub struct NoEvents;
impl Events for NoEvents {}

/// Adapts the rpc layer's untyped traffic to [`Events`] for one extension.
pub(crate) struct EventRouter {
    pub(crate) extension: String,
    pub(crate) events: Arc<dyn Events>,
    pub(crate) grants: Grants,
}

impl Handler for EventRouter {
    fn notification(&self, method: &str, params: Value) {
        match ServerNotification::parse(method, params) {
            Ok(ServerNotification::StatusChanged(s)) if self.grants.status => {
                self.events.status(&self.extension, s)
            }
            Ok(ServerNotification::StatusChanged(s)) => tracing::info!(
                extension = %self.extension,
                "ignoring status/changed (the manifest does not declare `status`): {}",
                s.status
            ),
            Ok(ServerNotification::Log(l)) => self.events.log(&self.extension, l),
            Ok(other) => {
                tracing::debug!(extension = %self.extension, "ignoring notification {}", other.method())
            }
            Err(err) => {
                tracing::warn!(extension = %self.extension, "ignoring {method} with bad params: {err}")
            }
        }
    }

    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, ErrorObject>> {
        match ServerRequest::parse(method, params) {
            Ok(ServerRequest::UiAsk(ask)) if !self.grants.ui_ask => {
                tracing::warn!(
                    extension = %self.extension,
                    "refusing ui/ask (the manifest does not declare `ui_ask`): {}",
                    ask.prompt
                );
                Box::pin(async {
                    Ok(serde_json::to_value(UiAskResult::cancelled()).unwrap_or(Value::Null))
                })
            }
            Ok(ServerRequest::UiAsk(ask)) => {
                let fut = self.events.ask(&self.extension, ask);
                Box::pin(async move { Ok(serde_json::to_value(fut.await).unwrap_or(Value::Null)) })
            }
            Ok(other) => {
                let err = ErrorObject::method_not_found(other.method());
                Box::pin(async move { Err(err) })
            }
            Err(err) => {
                let err = ErrorObject::invalid_params(method, err);
                Box::pin(async move { Err(err) })
            }
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    #[error("initialize failed: {0}")]
    Call(#[from] CallError),
    #[error("the server speaks YEP {0:?}, incompatible with this host ({PROTOCOL_VERSION})")]
    Incompatible(String),
    #[error("the initialize result is malformed: {0}")]
    Malformed(String),
}

/// `initialize`, the version check, then `initialized`.
pub async fn handshake(
    conn: &Connection,
    params: &InitializeParams,
    timeout: Duration,
) -> Result<InitializeResult, HandshakeError> {
    let raw = conn
        .call(INITIALIZE, Some(params), CallOptions::timeout(timeout))
        .await?;
    let result: InitializeResult =
        serde_json::from_value(raw).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
    if !version_compatible(&result.protocol_version) {
        return Err(HandshakeError::Incompatible(result.protocol_version));
    }
    conn.notify::<()>(INITIALIZED, None).await?;
    Ok(result)
}

/// The `initialize` params this host sends.
pub fn initialize_params(
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
