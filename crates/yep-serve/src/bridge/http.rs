//! `yep mcp serve --http`: the bridge over streamable HTTP, behind a bearer token, built to
//! run for days under clients that misbehave.
//!
//! - An accept error (EMFILE under a connection flood) never ends the server: it backs off
//!   and keeps serving, and frees a slot by closing the oldest connection that has not yet
//!   sent an authorized request.
//! - Connections are capped ([`HttpLimits::max_connections`], by default a share of the open
//!   file limit). At the cap, a new connection takes the slot of the oldest one that never
//!   sent an authorized request; when every connection has, the new one is closed.
//! - A request header must arrive whole within [`HttpLimits::header_timeout`]; the same
//!   limit closes a keep-alive connection idle between requests.
//! - MCP sessions are capped ([`HttpLimits::max_sessions`]): at the cap a new session evicts
//!   the idle session least worth keeping (one that never made a request after its
//!   handshake, then the least recently used); with none idle it is refused.

use super::Bridge;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager, local::LocalSessionManager,
};
use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What `yep mcp serve --http` holds open at most, and for how long.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HttpLimits {
    /// TCP connections open at once.
    pub max_connections: usize,
    /// How long a request header may take to arrive whole, and how long a keep-alive
    /// connection may sit idle between requests.
    pub header_timeout: Duration,
    /// MCP sessions open at once (every client's, with the one token).
    pub max_sessions: usize,
    /// How long a session may go without a request before it is closed.
    pub session_idle: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: default_max_connections(),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// The default [`HttpLimits::header_timeout`]. Longer than the idle keep-alive of the
/// common HTTP clients (5 s in httpx, 4 s in Node's), so they close an idle connection
/// before the server does.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`HttpLimits::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 128;

/// The default [`HttpLimits::session_idle`].
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);

/// The default [`HttpLimits::max_connections`]: half of the open files this process may
/// have beyond 64 kept for its extensions and logs, between 8 and 1024.
pub fn default_max_connections() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given and nothing else.
    let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur,
        _ => 1024,
    };
    let soft = usize::try_from(soft).unwrap_or(usize::MAX);
    (soft.saturating_sub(64) / 2).clamp(8, 1024)
}

/// Where `yep mcp serve --http` keeps its bearer token (owner-only).
pub fn token_path(home: &yep_host::store::Home) -> std::path::PathBuf {
    home.root.join("mcp-serve.token")
}

/// The bearer token HTTP clients must send, made (owner-only) on first use: the token, and
/// whether it was just made (it is then shown once).
pub fn bearer_token(home: &yep_host::store::Home) -> std::io::Result<(String, bool)> {
    use std::io::Read;
    let path = token_path(home);
    // A regular file only: a FIFO planted there would hang the server's start.
    let kept = yep_host::store::fsutil::read_regular_string(
        &path,
        4096,
        yep_host::store::fsutil::Links::Refuse,
    );
    if let Ok(text) = kept {
        let token = text.trim().to_string();
        if token.len() >= 32 {
            return Ok((token, false));
        }
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let token = yep_host::store::hash::hex(&bytes);
    std::fs::create_dir_all(&home.root)?;
    yep_host::store::fsutil::write_atomic(&path, token.as_bytes(), 0o600)?;
    Ok((token, true))
}

/// Whether `request` carries `Authorization: Bearer <token>`, compared in constant time.
fn authorized<B>(request: &http::Request<B>, token: &str) -> bool {
    let Some(given) = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who may use the HTTP endpoint.
#[derive(Clone, Debug)]
pub enum Access {
    /// Clients that send this bearer token.
    Token(String),
    /// Any client, without a token: only for test suites that cannot send one (the MCP
    /// conformance suite). Served only on a loopback listener, to loopback `Host`s, never
    /// with `remote`.
    NoTokenLoopbackTestingOnly,
}

/// [`serve_http_with`] under the default [`HttpLimits`], to clients that send `token`.
pub async fn serve_http(
    bridge: Bridge,
    listener: tokio::net::TcpListener,
    token: String,
    remote: bool,
    stop: CancellationToken,
) {
    let access = Access::Token(token);
    // With a token every listener is served: this cannot fail.
    let _ = serve_http_with(
        bridge,
        listener,
        access,
        remote,
        HttpLimits::default(),
        stop,
    )
    .await;
}

/// Serve `bridge` (one per client session, sharing its host) over streamable HTTP on
/// `listener` at `/mcp`, to the clients `access` lets in, under `limits`, until `stop` is
/// cancelled. Only loopback `Host`s are served (against DNS rebinding) unless `remote`:
/// then any, still behind the token. Nothing a client does ends it (see the module docs).
///
/// Fails at once, serving nothing, when `access` has no token and the listener is not on
/// loopback or `remote` is asked.
pub async fn serve_http_with(
    bridge: Bridge,
    listener: tokio::net::TcpListener,
    access: Access,
    remote: bool,
    limits: HttpLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    use http_body_util::BodyExt;
    let token: Option<Arc<str>> = match access {
        Access::Token(token) => Some(token.into()),
        Access::NoTokenLoopbackTestingOnly => {
            let local = listener.local_addr()?;
            if remote || !local.ip().is_loopback() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "refusing to serve {local} without a token: that is for testing, on loopback only"
                    ),
                ));
            }
            None
        }
    };
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    // A request body is held to the host's frame cap, as a line from an extension is.
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(yep_host::rpc::DEFAULT_MAX_FRAME_BYTES);
    config.cancellation_token = stop.child_token();
    if remote {
        config = config.disable_allowed_hosts();
    }
    let sessions = CappedSessions::new(&limits);
    let service =
        StreamableHttpService::new(move || Ok(bridge.for_client()), Arc::new(sessions), config);
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let connections = Connections::new(limits.max_connections);
    let mut backoff = ACCEPT_BACKOFF_FIRST;
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        let stream = match stream {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF_FIRST;
                // A response goes out in several small writes (head, SSE events, the last
                // chunk): without this, each waits for the client's delayed ACK (~40 ms).
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(e) => {
                // Out of descriptors (or any other accept failure): free a slot if one is
                // held by a connection that never proved itself, wait, and go on.
                let freed = connections.evict_unproven();
                tracing::warn!(
                    "accepting a connection failed: {e}; retrying in {} ms{}",
                    backoff.as_millis(),
                    if freed {
                        " (closed an idle connection)"
                    } else {
                        ""
                    }
                );
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let Some(slot) = connections.admit() else {
            drop(stream);
            continue;
        };
        let (service, token) = (service.clone(), token.clone());
        let proven = Arc::clone(&slot.proven);
        let handler =
            hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let mut service = service.clone();
                let allowed = token.as_ref().is_none_or(|t| authorized(&request, t));
                if allowed {
                    proven.store(true, Ordering::Relaxed);
                }
                async move {
                    if !allowed {
                        let body = http_body_util::Full::new(hyper::body::Bytes::from_static(
                            b"a bearer token is needed (see `yep mcp serve --http`)",
                        ))
                        .boxed();
                        let mut refused = http::Response::new(body);
                        *refused.status_mut() = http::StatusCode::UNAUTHORIZED;
                        // An unauthorized client keeps no connection open.
                        refused.headers_mut().insert(
                            http::header::CONNECTION,
                            http::HeaderValue::from_static("close"),
                        );
                        return Ok::<_, std::convert::Infallible>(refused);
                    }
                    match one_message(request).await {
                        Ok(request) => tower_service::Service::call(&mut service, request).await,
                        Err(refused) => Ok(refused),
                    }
                }
            });
        let connection = http1.serve_connection(hyper_util::rt::TokioIo::new(stream), handler);
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = slot.closed.cancelled() => {}
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// The largest request body read (rmcp's own cap): a longer one is refused with `413`.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// What JSON-RPC batches get: MCP took them out at revision 2025-06-18.
const NO_BATCHES: &str = "JSON-RPC batches are not accepted: send one message per request \
    (MCP removed batches at revision 2025-06-18)";

/// `request` with its body read (at most [`MAX_BODY`]), or the answer it gets instead: a
/// JSON-RPC batch (an array) is refused with `400` and a JSON-RPC `-32600` that says why, as
/// stdio refuses one, not rmcp's `415` that says the body could not be read.
async fn one_message(
    request: http::Request<hyper::body::Incoming>,
) -> Result<
    http::Request<http_body_util::Full<hyper::body::Bytes>>,
    http::Response<
        http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>,
    >,
> {
    use http_body_util::BodyExt;
    let answer = |status: http::StatusCode, body: String, json: bool| {
        let mut response =
            http::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)).boxed());
        *response.status_mut() = status;
        if json {
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
        }
        response
    };
    let (parts, body) = request.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let too_large = e.is::<http_body_util::LengthLimitError>();
            return Err(match too_large {
                true => answer(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    format!("a request body is at most {MAX_BODY} bytes"),
                    false,
                ),
                false => answer(
                    http::StatusCode::BAD_REQUEST,
                    format!("the request body could not be read: {e}"),
                    false,
                ),
            });
        }
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32600, "message": NO_BATCHES},
        });
        return Err(answer(
            http::StatusCode::BAD_REQUEST,
            error.to_string(),
            true,
        ));
    }
    Ok(http::Request::from_parts(
        parts,
        http_body_util::Full::new(bytes),
    ))
}

/// The first wait after a failed accept, doubled on each failure in a row.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);

/// The longest wait after a failed accept.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The open connections, oldest first, and the cap on them.
#[derive(Clone)]
struct Connections {
    open: Arc<Mutex<BTreeMap<u64, ConnState>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
    max: usize,
}

struct ConnState {
    /// Set once the connection sent an authorized request.
    proven: Arc<AtomicBool>,
    /// Cancelled to close it.
    closed: CancellationToken,
}

/// One admitted connection's place among [`Connections`]; freed when dropped.
struct Slot {
    connections: Connections,
    id: u64,
    proven: Arc<AtomicBool>,
    closed: CancellationToken,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.lock().remove(&self.id);
    }
}

impl Connections {
    fn new(max: usize) -> Self {
        Connections {
            open: Arc::default(),
            next: Arc::default(),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, ConnState>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a new connection: a free one, or the oldest unproven connection's; none
    /// when every open connection has sent an authorized request.
    fn admit(&self) -> Option<Slot> {
        let mut open = self.lock();
        if open.len() >= self.max && !Self::evict_oldest_unproven(&mut open) {
            tracing::warn!(
                "refusing a connection: {} are open, each with an authorized request",
                open.len()
            );
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (proven, closed) = (Arc::new(AtomicBool::new(false)), CancellationToken::new());
        open.insert(
            id,
            ConnState {
                proven: Arc::clone(&proven),
                closed: closed.clone(),
            },
        );
        Some(Slot {
            connections: self.clone(),
            id,
            proven,
            closed,
        })
    }

    /// Close the oldest connection that never sent an authorized request, if there is one.
    fn evict_unproven(&self) -> bool {
        Self::evict_oldest_unproven(&mut self.lock())
    }

    fn evict_oldest_unproven(open: &mut BTreeMap<u64, ConnState>) -> bool {
        let oldest = open
            .iter()
            .find(|(_, c)| !c.proven.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        let Some(id) = oldest else {
            return false;
        };
        if let Some(conn) = open.remove(&id) {
            conn.closed.cancel();
        }
        true
    }
}

/// rmcp's in-memory sessions, capped (see the module docs).
struct CappedSessions {
    inner: LocalSessionManager,
    max: usize,
    seen: Mutex<HashMap<SessionId, SessionUse>>,
}

/// What one session did, to choose which to evict.
struct SessionUse {
    /// When it last sent anything.
    last: Instant,
    /// Requests after its handshake.
    requests: u64,
    /// Its response streams now open: while one is, the session is not idle.
    open_streams: Arc<()>,
}

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("{0} MCP sessions are open and busy; try again when one ends")]
    Full(usize),
    #[error(transparent)]
    Local(
        #[from] rmcp::transport::streamable_http_server::session::local::LocalSessionManagerError,
    ),
}

impl CappedSessions {
    fn new(limits: &HttpLimits) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.session_idle);
        CappedSessions {
            inner,
            max: limits.max_sessions.max(1),
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionUse>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note a message from session `id`; with `stream`, a response stream it opens, held
    /// open by the token this returns.
    fn used(&self, id: &SessionId, request: bool) -> Option<Arc<()>> {
        let mut seen = self.seen();
        let entry = seen.get_mut(id)?;
        entry.last = Instant::now();
        if request {
            entry.requests += 1;
        }
        Some(Arc::clone(&entry.open_streams))
    }

    /// The idle session to close for a new one: one that made no request after its
    /// handshake, the oldest first; else the least recently used.
    fn victim(&self) -> Option<SessionId> {
        let seen = self.seen();
        seen.iter()
            .filter(|(_, u)| Arc::strong_count(&u.open_streams) == 1)
            .min_by_key(|(_, u)| (u.requests > 0, u.last))
            .map(|(id, _)| id.clone())
    }
}

/// A response stream that counts as its session's open stream until it ends.
struct Tracked<S> {
    inner: Pin<Box<S>>,
    _open: Option<Arc<()>>,
}

impl<S: futures_core::Stream> futures_core::Stream for Tracked<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Forget sessions rmcp closed itself (idle past `session_idle`, or deleted).
        let live: Vec<SessionId> = self.inner.sessions.read().await.keys().cloned().collect();
        self.seen().retain(|id, _| live.contains(id));
        if live.len() >= self.max {
            let Some(victim) = self.victim() else {
                return Err(SessionError::Full(live.len()));
            };
            tracing::info!(session = %victim, "closing an idle MCP session for a new one ({} open)", live.len());
            self.seen().remove(&victim);
            self.inner.close_session(&victim).await?;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.seen().insert(
            id.clone(),
            SessionUse {
                last: Instant::now(),
                requests: 0,
                open_streams: Arc::new(()),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.seen().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        let open = self.used(id, true);
        let inner = self.inner.create_stream(id, message).await?;
        Ok(Tracked {
            inner: Box::pin(inner),
            _open: open,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.used(id, false);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        let open = self.used(id, false);
        let inner = self.inner.create_standalone_stream(id).await?;
        Ok(Tracked {
            inner: Box::pin(inner),
            _open: open,
        })
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        let open = self.used(id, false);
        let inner = self.inner.resume(id, last_event_id).await?;
        Ok(Tracked {
            inner: Box::pin(inner),
            _open: open,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_planted_as_the_token_is_replaced_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let home = yep_host::store::Home {
            root: dir.path().to_path_buf(),
        };
        let path = token_path(&home);
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(bearer_token(&home).map(|(t, made)| (t.len(), made))));
        let made = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading the token hung on a FIFO");
        assert_eq!(made.unwrap(), (64, true));
        assert!(std::fs::metadata(&path).unwrap().is_file());
    }
}
