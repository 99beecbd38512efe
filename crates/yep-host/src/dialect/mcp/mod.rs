//! MCP as a dialect, on rmcp's client: an MCP server's tools in the host's capability model,
//! called like any tool (progress as tool updates, cancel as `notifications/cancelled`,
//! `isError` as a tool error, `structuredContent` kept).
//!
//! The supervisor spawns the server (its log, process group, backoff) and hands this dialect
//! the pipes; MCP has no hooks, prompt text, commands, config push or traces, so those are the
//! `Peer` defaults, as for any server without them.

#[cfg(feature = "mcp-http")]
pub mod credentials;
pub mod revision;
mod skills;

use super::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFuture, Streams};
use crate::capability::{Events, Offer, OfferedTool, Progress, RemoteError, ToolCall, ToolResult};
use crate::rpc::{CallError, CloseReason, ConnectionOptions, UpdateSink};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, Peer as RmcpPeer, PeerRequestOptions, RoleClient};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

/// The least time between two listings after `notifications/tools/list_changed`.
pub(crate) const RELIST_SPACING: Duration = Duration::from_millis(200);

/// How long a listing after `notifications/tools/list_changed` may take.
pub(crate) const RELIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The MCP wire.
#[derive(Default)]
pub struct Mcp {
    /// The home a host runs this server for ([`home_id`]): a server that says it is `yep mcp
    /// serve` of that same home ([`SERVE_MARKER`]) is refused as yep itself.
    pub host_home: Option<String>,
    /// Set once the server ended on the `server/discover` probe (`revision::Probed::Ended`):
    /// from then on it is spoken to with `initialize` only.
    pub handshake_only: Arc<std::sync::atomic::AtomicBool>,
    /// Set once a server too slow to answer the probe in time (`revision::Probed::Silent`)
    /// turned out to speak 2026-07-28 only (its late answer said so, and it refused
    /// `initialize`): from then on it is asked `server/discover` alone, with the whole
    /// handshake's time to answer.
    pub discover_only: Arc<std::sync::atomic::AtomicBool>,
    /// How long `tools/list` may take at start before the handshake ends without it
    /// ([`Peer::list_pending`]): the host serves the list the server's approval pinned
    /// meanwhile, and the list is waited for in the background. `None`: it is waited for as
    /// long as the handshake may take, and not listing in that time fails the start.
    pub list_deadline: Option<Duration>,
}

/// The lifecycle every MCP client here offers first: 2026-07-28, falling back to the
/// handshake of 2025-11-25 (a server of 2025-06-18 answers that with its own).
fn auto_lifecycle() -> rmcp::service::ClientLifecycleMode {
    rmcp::service::ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: Some(rmcp::model::ProtocolVersion::V_2025_11_25),
    }
}

impl Dialect for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn names_its_package(&self) -> bool {
        false
    }

    fn spawn_fix(&self) -> Option<&'static str> {
        Some(
            "install it, or fix its command where the server is defined (`yep mcp add`, the workspace's .mcp.json, or its package's)",
        )
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        let host_home = self.host_home.clone();
        let handshake_only = Arc::clone(&self.handshake_only);
        let discover_only = Arc::clone(&self.discover_only);
        let list_deadline = self.list_deadline;
        Box::pin(async move {
            use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
            use std::sync::atomic::Ordering::SeqCst;
            let (reader, mut writer): (
                Box<dyn AsyncRead + Send + Unpin>,
                Box<dyn AsyncWrite + Send + Unpin>,
            ) = match streams {
                Streams::Pipe { stdout, stdin } => (Box::new(stdout), Box::new(stdin)),
                Streams::Other { reader, writer } => (reader, writer),
            };
            // The host's frame cap holds on this wire too: a longer line ends the connection.
            let mut reader = LineCap {
                inner: reader,
                cap: opts.max_frame_bytes,
                run: 0,
            };
            let client = Client::new(&hello, events);
            // `npx -y <server>` or `uvx <server>` may download first: waited for longer, and
            // the user told why.
            let mut hello = hello;
            let slow = hello.slow_start.clone();
            let ordinary = hello.timeout;
            hello.timeout = crate::launcher::patience(slow.as_ref(), ordinary);
            let deadline = tokio::time::Instant::now() + hello.timeout;
            // A late answer to the probe that lists 2026-07-28 ([`revision::Handover`]).
            let late_modern = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mut was_silent = false;
            let served = crate::launcher::told_while(
                &hello.extension,
                "initialize answer",
                slow.as_ref(),
                ordinary,
                async {
                    // Which revision it speaks ([`revision`]); one that left on the probe
                    // before is not asked again.
                    let (probed, rest) =
                        match (handshake_only.load(SeqCst), discover_only.load(SeqCst)) {
                            (true, _) => (revision::Probed::Legacy, Vec::new()),
                            // rmcp asks `server/discover` itself, and waits the whole handshake.
                            (false, true) => (revision::Probed::Modern, Vec::new()),
                            (false, false) => {
                                let wait = match &slow {
                                    Some(_) => hello.timeout,
                                    None => revision::PROBE_WAIT,
                                };
                                let config = client.get_info();
                                revision::probe(&mut reader, &mut writer, &config, wait).await?
                            }
                        };
                    if probed == revision::Probed::Ended {
                        handshake_only.store(true, SeqCst);
                        return Err(HandshakeError::RestartWanted);
                    }
                    let lifecycle = match probed {
                        revision::Probed::Modern => ClientLifecycleMode::Discover {
                            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                        },
                        _ => ClientLifecycleMode::Initialize,
                    };
                    was_silent = probed == revision::Probed::Silent;
                    let reader = revision::Handover::new(reader, probed, rest)
                        .noting_late_modern(Arc::clone(&late_modern));
                    let started = client
                        .clone()
                        .serve_with_lifecycle((reader, writer), lifecycle);
                    Ok(tokio::time::timeout_at(deadline, started).await)
                },
            )
            .await?;
            let finished = finish(served, client, &hello, host_home, list_deadline).await;
            // Too slow for the probe (a loaded machine, a big SDK to import), and 2026-07-28
            // only: it refused `initialize`. Started again and asked `server/discover` alone.
            if finished.is_err() && was_silent && late_modern.load(SeqCst) {
                discover_only.store(true, SeqCst);
                return Err(HandshakeError::RestartWanted);
            }
            finished
        })
    }
}

/// The MCP wire over streamable HTTP, to the server at `url` (it runs on its own; nothing
/// is spawned). `headers` go with every request.
#[cfg(feature = "mcp-http")]
pub struct McpHttp {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// The url as errors show it: as written, before `${VAR}` was expanded into it.
    pub shown: String,
    /// As [`Mcp::host_home`].
    pub host_home: Option<String>,
    /// The home and the server's name its OAuth login is kept under (`yep mcp login`): its
    /// tokens go with every request when one is kept for this `url`.
    pub login: Option<(crate::store::Home, String)>,
    /// As [`Mcp::handshake_only`]: set once the server answered `server/discover` with
    /// something else than that revision's answer or an error.
    pub handshake_only: Arc<std::sync::atomic::AtomicBool>,
    /// As [`Mcp::list_deadline`].
    pub list_deadline: Option<Duration>,
}

#[cfg(feature = "mcp-http")]
impl Dialect for McpHttp {
    fn name(&self) -> &'static str {
        "mcp-http"
    }

    fn names_its_package(&self) -> bool {
        false
    }

    fn open(
        &self,
        _streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        use rmcp::service::ClientServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let (url, headers) = (self.url.clone(), self.headers.clone());
        let url_shown = self.shown.clone();
        let host_home = self.host_home.clone();
        let login = self.login.clone();
        let handshake_only = Arc::clone(&self.handshake_only);
        let list_deadline = self.list_deadline;
        Box::pin(async move {
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let bad = |e: &dyn std::fmt::Display| {
                    HandshakeError::Malformed(format!("header {}: {e}", crate::text::escape(&name)))
                };
                let header = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(&e))?;
                let value = http::HeaderValue::from_str(&value).map_err(|e| bad(&e))?;
                custom.insert(header, value);
            }
            // reqwest is built without a TLS provider of its own: ring, installed once for the
            // process (an embedder's own choice, installed first, stands).
            let _ = rustls::crypto::ring::default_provider().install_default();
            // The host's frame cap holds here too: no answer or event longer than it.
            let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                .custom_headers(custom)
                .max_sse_event_size(opts.max_frame_bytes)
                .max_json_response_size(opts.max_frame_bytes);
            let mut client = Client::new(&hello, events);
            client.login = login.clone();
            // 2026-07-28 first, then the handshake (rmcp's `Auto`); a server whose answer to
            // `server/discover` is neither that revision's nor an error (some answer every
            // request with `{}`) is connected to again with `initialize` alone, and so it
            // is from then on.
            let mut served = None;
            for modern in [true, false] {
                if modern && handshake_only.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let lifecycle = match modern {
                    true => auto_lifecycle(),
                    false => rmcp::service::ClientLifecycleMode::Initialize,
                };
                let manager = match &login {
                    Some((home, name)) => {
                        credentials::manager(home, name, &url).await.map_err(|e| {
                            HandshakeError::Io(std::io::Error::other(format!(
                                "its login could not be used ({}); `yep mcp login {}` logs in again",
                                crate::text::escape(&e.to_string()),
                                crate::text::escape(name)
                            )))
                        })?
                    }
                    None => None,
                };
                let started = match manager {
                    // Logged in: the tokens go with every request, refreshed as they run out.
                    Some(manager) => {
                        let http = reqwest::Client::builder()
                            .redirect(reqwest::redirect::Policy::none())
                            .build()
                            .map_err(|e| HandshakeError::Io(std::io::Error::other(e)))?;
                        let auth = rmcp::transport::AuthClient::new(http, manager);
                        let transport =
                            StreamableHttpClientTransport::with_client(auth, config.clone());
                        let serving = client.clone().serve_with_lifecycle(transport, lifecycle);
                        tokio::time::timeout(hello.timeout, serving).await
                    }
                    None => {
                        let transport = StreamableHttpClientTransport::from_config(config.clone());
                        let serving = client.clone().serve_with_lifecycle(transport, lifecycle);
                        tokio::time::timeout(hello.timeout, serving).await
                    }
                };
                let again = modern
                    && matches!(
                        &started,
                        Ok(Err(
                            rmcp::service::ClientInitializeError::ExpectedInitResult(_)
                        ))
                    );
                if again {
                    handshake_only.store(true, std::sync::atomic::Ordering::SeqCst);
                    continue;
                }
                served = Some(
                    started.map(|r| r.map_err(|e| reach_error(&e, &url_shown, login.as_ref()))),
                );
                break;
            }
            let Some(served) = served else {
                return Err(HandshakeError::Malformed(
                    "no answer to server/discover or initialize".into(),
                ));
            };
            // Not reaching the server is not a malformed answer: say so, with the cause.
            let served = match served {
                Ok(Err(e)) => return Err(e),
                other => other,
            };
            finish(served, client, &hello, host_home, list_deadline).await
        })
    }
}

/// Why `initialize` over HTTP failed: the server wants a login (and the command that logs
/// in), or it could not be reached, with the cause.
#[cfg(feature = "mcp-http")]
fn reach_error(
    error: &rmcp::service::ClientInitializeError,
    shown: &str,
    login: Option<&(crate::store::Home, String)>,
) -> HandshakeError {
    match (error.auth_challenge(), login) {
        (Some(_), Some((_, name))) => HandshakeError::LoginWanted(format!(
            "{} wants a login: `yep mcp login {}`",
            crate::text::escape(shown),
            crate::text::escape(name)
        )),
        (Some(_), None) => {
            HandshakeError::LoginWanted(format!("{} wants a login", crate::text::escape(shown)))
        }
        (None, _) => HandshakeError::Io(std::io::Error::other(format!(
            "could not reach {}: {}",
            crate::text::escape(shown),
            root_cause(error)
        ))),
    }
}

/// The innermost cause of `error`: what went wrong, without the layers that carried it.
#[cfg(feature = "mcp-http")]
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    // rmcp names its transport's type before the cause: the cause is what a person reads.
    let text = text.rfind("] error: ").map_or(&*text, |i| &text[i + 9..]);
    crate::text::escape(text).into_owned()
}

/// The experimental capability `yep mcp serve` declares in its `initialize` answer, with the
/// [`home_id`] it serves (`{"home": …}`), so that a host meeting it as one of the MCP servers
/// of that same home (behind a wrapper its command line does not show) knows it is yep
/// itself and skips it.
pub const SERVE_MARKER: &str = "yep/serve";

/// A home's identity in [`SERVE_MARKER`]: 16 hex digits of the hash of its path, resolved.
pub fn home_id(home: &crate::store::Home) -> String {
    let root = home
        .root
        .canonicalize()
        .unwrap_or_else(|_| home.root.clone());
    crate::store::hash::sha256_hex(root.as_os_str().as_encoded_bytes())[..16].to_string()
}

/// The rest of the handshake, once `initialize` was sent: list the tools and make the peer.
/// A list that takes longer than `list_deadline` is waited for in the background
/// ([`Client::list_late`]), and the peer says so meanwhile ([`Peer::list_pending`]).
async fn finish<E: std::fmt::Display>(
    served: Result<
        Result<rmcp::service::RunningService<RoleClient, Client>, E>,
        tokio::time::error::Elapsed,
    >,
    client: Client,
    hello: &Hello,
    host_home: Option<String>,
    list_deadline: Option<Duration>,
) -> Result<Arc<dyn Peer>, HandshakeError> {
    let started = served
        .map_err(|_| {
            HandshakeError::Malformed(format!(
                "no initialize answer within {} ms",
                hello.timeout.as_millis()
            ))
        })?
        .map_err(|e| HandshakeError::Malformed(format!("initialize failed: {e}")))?;
    let peer = started.peer().clone();
    let served_home = peer.peer_info().and_then(|info| {
        let marker = info.capabilities.experimental.as_ref()?.get(SERVE_MARKER)?;
        Some(marker.get("home")?.as_str()?.to_string())
    });
    let itself = host_home.is_some() && served_home == host_home;
    if itself {
        started.cancellation_token().cancel();
        return Err(HandshakeError::IsThisHost);
    }
    let listing = {
        let (peer, extension) = (peer.clone(), hello.extension.clone());
        async move { list(&peer, &extension).await }
    };
    let mut listing: Listing = Box::pin(listing);
    // A deadline past the handshake's own changes nothing.
    let deadline = list_deadline.filter(|d| *d < hello.timeout);
    let mut late = false;
    let tools = match tokio::time::timeout(deadline.unwrap_or(hello.timeout), &mut listing).await {
        Ok(listed) => listed,
        Err(_) => match deadline {
            Some(deadline) => {
                late = true;
                client.list_late(listing, deadline);
                Ok(Vec::new())
            }
            None => {
                return Err(HandshakeError::Malformed(
                    "tools/list did not answer".into(),
                ));
            }
        },
    };
    let tools = tools.map_err(|e| match e {
        ListError::Cap(cap) => HandshakeError::OfferPastCap(cap),
        // Open to `initialize`, closed after it: a login (or more access) is wanted.
        ListError::Service(e) if e.auth_challenge().is_some() => {
            HandshakeError::LoginWanted(format!(
                "tools/list was refused: it wants a login{}: `yep mcp login`",
                match e
                    .auth_challenge()
                    .is_some_and(|c| c.contains("insufficient_scope"))
                {
                    true => " with more access",
                    false => "",
                }
            ))
        }
        service => HandshakeError::Malformed(service.to_string()),
    })?;
    let name = peer
        .peer_info()
        .and_then(|info| info.server_info.as_ref().map(|s| s.name.clone()))
        .unwrap_or_default();
    if !late {
        *client.listed.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(tools.clone());
    }
    let version = peer
        .peer_info()
        .map(|info| info.protocol_version.to_string())
        .unwrap_or_default();
    // At 2026-07-28 a changed list is heard of only through a subscription.
    let changes = peer
        .peer_info()
        .and_then(|info| info.capabilities.tools.as_ref()?.list_changed)
        == Some(true);
    if changes
        && !peer
            .peer_info()
            .is_some_and(|i| i.protocol_version.has_initialize())
    {
        tokio::spawn(listen(peer.clone(), client.clone()));
    }
    let offer = Offer {
        name,
        wire: format!("MCP {version}").trim_end().to_string(),
        tools,
        ..Offer::default()
    };
    // The service runs until the server goes or we close it; its end is the close.
    let (closed_tx, closed) = watch::channel(None);
    let stop = started.cancellation_token();
    tokio::spawn(async move {
        let reason = match started.waiting().await {
            Ok(rmcp::service::QuitReason::Cancelled) => CloseReason::Shutdown,
            _ => CloseReason::Eof,
        };
        let _ = closed_tx.send(Some(reason));
    });
    Ok(Arc::new(McpPeer {
        peer,
        offer,
        progress: Arc::clone(&client.progress),
        listed: Arc::clone(&client.listed),
        stop: Mutex::new(Some(stop)),
        closed,
        login: client.login.clone(),
        client,
    }) as Arc<dyn Peer>)
}

/// A 2026-07-28 server's tool list changes, heard through `subscriptions/listen` (which takes
/// the place of the unsolicited notice): each is listed again as the notice was. A listener
/// that fell behind lists once and listens anew; one the server ends, ends.
async fn listen(peer: RmcpPeer<RoleClient>, client: Client) {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    use rmcp::service::SubscriptionEnd;
    loop {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::debug!(extension = %client.extension, "subscriptions/listen: {e}");
                return;
            }
        };
        while let Ok(Some(notice)) = subscription.next().await {
            if let ServerNotification::ToolListChangedNotification(_) = notice {
                client.relist(peer.clone());
            }
        }
        match subscription.end() {
            Some(SubscriptionEnd::Lagged { .. }) => client.relist(peer.clone()),
            _ => return,
        }
    }
}

/// A server's tool list on its way ([`list`]).
type Listing = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<OfferedTool>, ListError>> + Send>,
>;

/// The most `tools/list` pages read; a server that pages on and on is cut there.
pub(crate) const MAX_PAGES: usize = 64;

/// Why a server's tool list was not taken.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("tools/list failed: {0}")]
    Service(#[from] rmcp::ServiceError),
    /// Past a cap on what may be approved: reading stopped there.
    #[error(transparent)]
    Cap(#[from] crate::store::mcp::ListCap),
}

/// The server's tools over at most [`MAX_PAGES`] pages (a longer list is cut, with a warning:
/// a server that pages forever is not followed forever), held to the caps on an approved list
/// as they come ([`crate::store::mcp::ListBudget`]): past one, reading stops and the list is
/// refused, so a server listing pages of megabytes costs what the caps allow and no more.
async fn list(peer: &RmcpPeer<RoleClient>, extension: &str) -> Result<Vec<OfferedTool>, ListError> {
    let mut budget = crate::store::mcp::ListBudget::default();
    let mut tools = Vec::new();
    let mut cursor = None;
    for page in 0.. {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let listed = peer.list_tools(Some(params)).await?;
        cursor = listed.next_cursor;
        for t in listed.tools {
            let tool = crate::store::mcp::McpTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()),
                input_schema: Value::Object((*t.input_schema).clone()),
                output_schema: t.output_schema.map(|s| Value::Object((*s).clone())),
                annotations: t
                    .annotations
                    .and_then(|a| serde_json::to_value(a).ok())
                    .filter(|a| a.as_object().is_some_and(|o| !o.is_empty())),
            };
            budget.admit(&tool)?;
            tools.push(tool);
        }
        if cursor.is_none() {
            break;
        }
        if page + 1 >= MAX_PAGES {
            tracing::warn!(
                extension,
                "{} tools over {} pages and more to come; offering those",
                tools.len(),
                page + 1
            );
            break;
        }
    }
    Ok(tools
        .into_iter()
        .map(|t| OfferedTool {
            name: t.name,
            description: t.description,
            schema: Some(t.input_schema),
            deferred: false,
            output_schema: t.output_schema,
            annotations: t.annotations,
        })
        .collect())
}

/// A reader that fails once a line runs past `cap` bytes without a newline: rmcp's line
/// reader would otherwise grow without bound on a server that never ends its line.
struct LineCap<R> {
    inner: R,
    cap: usize,
    /// Bytes since the last newline.
    run: usize,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let read = &buf.filled()[before..];
            let run = match read.iter().rposition(|b| *b == b'\n') {
                Some(last) => read.len() - last - 1,
                None => self.run + read.len(),
            };
            self.run = run;
            if run > self.cap {
                return std::task::Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "the server sent a line over the {}-byte frame cap",
                        self.cap
                    ),
                )));
            }
        }
        polled
    }
}

/// Where each call's progress goes, by its progress token.
type ProgressSinks = Arc<Mutex<HashMap<ProgressToken, UpdateSink>>>;

/// The tools a server lists now, replaced on each `notifications/tools/list_changed`.
/// A new `Arc` for each new list ([`Peer::listing`]).
type Listed = Arc<Mutex<Arc<Vec<OfferedTool>>>>;

/// Whether a listing after `notifications/tools/list_changed` runs, and whether another is due.
#[derive(Default)]
struct Relist {
    running: std::sync::atomic::AtomicBool,
    stale: std::sync::atomic::AtomicBool,
}

/// rmcp's client side: progress to the calls' sinks, the rest to the host's events.
#[derive(Clone)]
struct Client {
    extension: String,
    events: Arc<dyn Events>,
    progress: ProgressSinks,
    listed: Listed,
    relist: Arc<Relist>,
    /// Where an HTTP server's OAuth login is kept (home, server name).
    login: Option<(crate::store::Home, String)>,
    /// Its first `tools/list` missed the deadline and has not answered yet.
    pending: Arc<std::sync::atomic::AtomicBool>,
}

impl Client {
    fn new(hello: &Hello, events: Arc<dyn Events>) -> Client {
        Client {
            extension: hello.extension.clone(),
            events,
            progress: Arc::default(),
            listed: Arc::default(),
            relist: Arc::default(),
            login: None,
            pending: Arc::default(),
        }
    }
}

/// The most rounds of questions one 2026-07-28 tool call may ask before it answers.
pub(crate) const MAX_INPUT_ROUNDS: usize = 8;

/// The most fields one elicitation may ask for.
pub(crate) const MAX_ELICIT_FIELDS: usize = 16;

impl ClientHandler for Client {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::new())
                .with_url(rmcp::model::UrlElicitationCapability::new()),
        );
        // The newest revision with an `initialize` handshake, which every server in the field
        // answers: one that speaks only 2025-06-18 answers with that, and is spoken to in it.
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("yep", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }

    /// A question from the server ([`Client::elicit`]).
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(self.elicit(request).await)
    }

    /// Listed again ([`Client::relist`]).
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.relist(context.peer);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = self
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&params.progress_token)
            .cloned();
        match sink {
            Some(sink) => sink(&Progress {
                message: params.message.unwrap_or_default(),
                progress: Some(params.progress),
                total: params.total,
            }),
            None => tracing::debug!(extension = %self.extension, "progress for no call in flight"),
        }
    }
}

impl Client {
    /// A question from the server goes to the host's questions (held to the grants): a form
    /// is asked field by field; a URL is shown, never opened. Asked as `elicitation/create`
    /// before 2026-07-28, inside an `InputRequiredResult` since.
    async fn elicit(&self, request: rmcp::model::ElicitRequestParams) -> rmcp::model::ElicitResult {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        // A field's default is shown as the placeholder: an empty answer takes it.
        let ask = |prompt: String, options: Vec<String>, default: Option<&Value>| {
            self.events.ask(
                &self.extension,
                crate::capability::Question {
                    prompt,
                    placeholder: default.map(|d| match d {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }),
                    secret: false,
                    options,
                },
            )
        };
        match request {
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                let answer = ask(
                    format!("{message} (open it yourself: {url})"),
                    vec!["done".into(), "decline".into()],
                    None,
                )
                .await;
                let action = match (answer.cancelled, answer.answer.as_str()) {
                    (true, _) => ElicitationAction::Cancel,
                    (false, "decline") => ElicitationAction::Decline,
                    _ => ElicitationAction::Accept,
                };
                ElicitResult::new(action)
            }
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                let fields = schema["properties"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let mut content = serde_json::Map::new();
                for (field, spec) in fields.into_iter().take(MAX_ELICIT_FIELDS) {
                    let options = spec["enum"]
                        .as_array()
                        .map(|v| {
                            v.iter()
                                .filter_map(|o| o.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                    let about = spec["description"].as_str().unwrap_or(&field);
                    let default = spec.get("default").filter(|d| !d.is_null());
                    let answer = ask(format!("{message} ({about})"), options, default).await;
                    if answer.cancelled {
                        return ElicitResult::new(ElicitationAction::Cancel);
                    }
                    content.insert(field, field_value(&spec, answer.answer));
                }
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            // A kind of question this host does not know: declined, not guessed at.
            _ => ElicitResult::new(ElicitationAction::Decline),
        }
    }

    /// What a 2026-07-28 server asks in an `input_required` answer, asked one after another:
    /// its questions as `elicitation/create` would have been. yep offers no sampling and no
    /// roots, so a server asking for them is told so, and the call fails with that.
    async fn fulfil(
        &self,
        requests: Option<rmcp::model::InputRequests>,
    ) -> Result<Option<rmcp::model::InputResponses>, PeerError> {
        use rmcp::model::InputRequest;
        let refused = |why: &str| Err(failed("tools/call", why));
        let mut answers = rmcp::model::InputResponses::new();
        for (key, request) in requests.unwrap_or_default() {
            let answer = match request {
                InputRequest::Elicitation(asked) => self.elicit(asked.params).await,
                InputRequest::CreateMessage(_) => {
                    return refused("it asked to sample the model, which yep does not offer");
                }
                InputRequest::ListRoots(_) => {
                    return refused("it asked for the roots, which yep does not offer");
                }
                _ => return refused("it asked for input of a kind yep does not know"),
            };
            answers.insert(key, serde_json::to_value(answer).unwrap_or_default());
        }
        Ok((!answers.is_empty()).then_some(answers))
    }

    /// A first `tools/list` that missed `deadline`: the server is marked slow (the health
    /// stream says so, and [`Peer::list_pending`] until it answers), and its answer is waited
    /// for in the background for as long as the connection lasts. When it comes, it is the
    /// list, and the host hears of it as of a changed list.
    fn list_late(&self, listing: Listing, deadline: Duration) {
        use std::sync::atomic::Ordering::SeqCst;
        self.pending.store(true, SeqCst);
        self.events.health(crate::health::HealthEvent::Slow {
            extension: self.extension.clone(),
            message: slow_message(&self.extension, deadline),
        });
        let client = self.clone();
        tokio::spawn(async move {
            let tools = match listing.await {
                Ok(tools) => tools,
                // Nothing of a list past the caps is offered, as after list_changed.
                Err(ListError::Cap(cap)) => {
                    tracing::warn!(extension = %client.extension, "its late tool list is refused: {cap}");
                    Vec::new()
                }
                // The connection ended, or the server refused to list: it stays slow, served
                // the pinned list, until it lists (after list_changed) or starts again.
                Err(e) => {
                    tracing::warn!(extension = %client.extension, "{e} after the deadline");
                    return;
                }
            };
            client.take_list(tools);
        });
    }

    /// `tools` is the server's list now: it is no longer slow, and the host hears of it.
    fn take_list(&self, tools: Vec<OfferedTool>) {
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(tools);
        self.pending
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.events.tools_changed(&self.extension);
    }

    /// The list is read again off the caller's task (its answer comes through the same
    /// service loop), then the host hears of it. One listing runs at a time, at most one per
    /// [`RELIST_SPACING`]: notices that come meanwhile are answered by one more listing after
    /// it, so a server that sends them without pause costs little.
    fn relist(&self, peer: RmcpPeer<RoleClient>) {
        use std::sync::atomic::Ordering::SeqCst;
        let relist = &self.relist;
        relist.stale.store(true, SeqCst);
        if relist.running.swap(true, SeqCst) {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let relist = &client.relist;
            loop {
                while relist.stale.swap(false, SeqCst) {
                    let listed =
                        tokio::time::timeout(RELIST_TIMEOUT, list(&peer, &client.extension)).await;
                    match listed {
                        Ok(Ok(tools)) => client.take_list(tools),
                        Ok(Err(ListError::Cap(cap))) => {
                            // Nothing of a list past the caps is offered: not a part of it,
                            // nor the list it replaces, which the server no longer serves.
                            client.take_list(Vec::new());
                            tracing::warn!(extension = %client.extension, "its tool list after list_changed is refused: {cap}")
                        }
                        // A server gone (stopped, or its exit reported where it happened):
                        // nothing left to list.
                        Ok(Err(_)) if peer.is_transport_closed() => break,
                        Ok(Err(e)) => {
                            tracing::warn!(extension = %client.extension, "{e} after list_changed")
                        }
                        Err(_) => {
                            tracing::warn!(extension = %client.extension, "tools/list after list_changed did not answer")
                        }
                    }
                    tokio::time::sleep(RELIST_SPACING).await;
                }
                relist.running.store(false, SeqCst);
                // A notice between the last listing and the line above is not lost.
                if !relist.stale.load(SeqCst) || relist.running.swap(true, SeqCst) {
                    break;
                }
            }
        });
    }
}

/// Why a server is slow: its `tools/list` missed `deadline` at start.
pub(crate) fn slow_message(extension: &str, deadline: Duration) -> String {
    format!(
        "extension `{extension}`: tools/list did not answer within {}; the tools pinned at its approval are served until it does",
        humantime::format_duration(deadline)
    )
}

/// An answer as the field's type wants it: a number, a boolean, or the text.
/// What the answer to one field of a form gives: the field's `default` when nothing was typed
/// (the user took the default shown), else the answer as the field's type reads it.
fn field_value(spec: &Value, answer: String) -> Value {
    match spec.get("default").filter(|d| !d.is_null()) {
        Some(default) if answer.trim().is_empty() => default.clone(),
        _ => typed(spec, answer),
    }
}

fn typed(spec: &Value, answer: String) -> Value {
    match spec["type"].as_str() {
        Some("integer") => answer
            .trim()
            .parse::<i64>()
            .map_or(Value::String(answer), Value::from),
        Some("number") => answer
            .trim()
            .parse::<f64>()
            .map_or(Value::String(answer), Value::from),
        Some("boolean") => match answer.trim() {
            "true" | "yes" | "y" => Value::Bool(true),
            "false" | "no" | "n" => Value::Bool(false),
            _ => Value::String(answer),
        },
        _ => Value::String(answer),
    }
}

/// A live MCP server.
pub(crate) struct McpPeer {
    peer: RmcpPeer<RoleClient>,
    offer: Offer,
    progress: ProgressSinks,
    listed: Listed,
    /// Taken by the first close or shutdown.
    stop: Mutex<Option<rmcp::service::RunningServiceCancellationToken>>,
    closed: watch::Receiver<Option<CloseReason>>,
    /// Where its OAuth login is kept: a refusal for want of scope is noted there, so the
    /// next `yep mcp login` asks for it.
    login: Option<(crate::store::Home, String)>,
    /// Its client side: what a 2026-07-28 server asks inside a result is asked through it.
    client: Client,
}

impl McpPeer {
    /// End the client: the transport is dropped, so the server's stdin closes.
    fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            stop.cancel();
        }
    }

    /// One `tools/call` on the wire: its progress to `updates`, a cancel or a drop before its
    /// answer cancelled there too. Its answer as rmcp read it, whatever kind.
    async fn call_once(
        &self,
        params: CallToolRequestParams,
        updates: Option<UpdateSink>,
        cancel: &tokio_util::sync::CancellationToken,
        timeout: Duration,
    ) -> Result<ServerResult, PeerError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        options.reset_timeout_on_progress = true;
        let handle = self
            .peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| failed("tools/call", e))?;
        let mut flight = InFlight {
            peer: self,
            token: handle.progress_token.clone(),
            id: handle.id.clone(),
            answered: false,
        };
        if let Some(sink) = updates {
            self.progress
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(flight.token.clone(), sink);
        }
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                flight.answered = true;
                cancel_on_wire(&self.peer, flight.id.clone(), "cancelled by the user").await;
                return Err(PeerError::call("tools/call", CallError::Cancelled));
            }
            answer = handle.await_response() => answer,
        };
        // Answered, or timed out (rmcp sent the cancel then).
        flight.answered = true;
        match answer {
            Ok(answer) => Ok(answer),
            Err(rmcp::ServiceError::Timeout { timeout }) => Err(PeerError::call(
                "tools/call",
                CallError::Timeout {
                    method: "tools/call".into(),
                    after: timeout,
                },
            )),
            Err(rmcp::ServiceError::McpError(e)) => Err(failed("tools/call", e.message)),
            // The server wants a login, or more access than the one kept: said, with its
            // challenge as data (what `yep mcp login` asks for with it).
            Err(e) if e.auth_challenge().is_some() => {
                let challenge = e.auth_challenge().unwrap_or_default().to_string();
                let more = challenge.contains("insufficient_scope");
                if let Some((home, name)) = self.login.clone().filter(|_| more) {
                    let noted = challenge.clone();
                    tokio::task::spawn_blocking(move || {
                        crate::store::mcp::note_oauth_challenge(&home, &name, &noted)
                    });
                }
                Err(PeerError::call(
                    "tools/call",
                    CallError::Remote(RemoteError {
                        code: 0,
                        message: match more {
                            true => "the server wants more access than the login gave: `yep mcp login` asks for it".into(),
                            false => "the server wants a login: `yep mcp login`".into(),
                        },
                        retryable: false,
                        data: json!({ "www_authenticate": challenge }),
                    }),
                ))
            }
            Err(e) => Err(PeerError::call(
                "tools/call",
                CallError::Closed(match e {
                    rmcp::ServiceError::TransportClosed => CloseReason::Eof,
                    other => CloseReason::Io(other.to_string()),
                }),
            )),
        }
    }
}

/// A `tools/call` result as the host takes one: `isError` is a tool error, as every wire
/// reports one (its text, with the whole result).
fn tool_result(result: rmcp::model::CallToolResult) -> Result<ToolResult, PeerError> {
    let value = serde_json::to_value(&result).unwrap_or_default();
    if result.is_error == Some(true) {
        // A tool error, as every wire reports one: its text, with the whole result.
        let message = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(PeerError::call(
            "tools/call",
            CallError::Remote(RemoteError {
                code: 0,
                message,
                retryable: false,
                data: value,
            }),
        ));
    }
    // rmcp hands the answer over parsed: it stays a value.
    Ok(ToolResult::from_value(value))
}

/// A call in flight: its progress sink is removed, and a call dropped before its answer is
/// cancelled on the wire (`notifications/cancelled`).
struct InFlight<'a> {
    peer: &'a McpPeer,
    token: ProgressToken,
    id: rmcp::model::RequestId,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.peer
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.token);
        if !self.answered {
            let peer = self.peer.peer.clone();
            let id = self.id.clone();
            tokio::spawn(async move { cancel_on_wire(&peer, id, "cancelled by the host").await });
        }
    }
}

async fn cancel_on_wire(peer: &RmcpPeer<RoleClient>, id: rmcp::model::RequestId, why: &str) {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(
        Some(id),
        Some(why.to_string()),
    ));
    let _ = peer.send_notification(notification.into()).await;
}

pub(super) fn failed(method: &str, error: impl std::fmt::Display) -> PeerError {
    PeerError::call(
        method,
        CallError::Remote(RemoteError {
            code: 0,
            message: error.to_string(),
            retryable: false,
            data: Value::Null,
        }),
    )
}

impl Peer for McpPeer {
    fn offer(&self) -> &Offer {
        &self.offer
    }

    fn serves(&self, tool: &str) -> bool {
        let listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        listed.iter().any(|t| t.name == tool)
    }

    fn listed(&self) -> Vec<OfferedTool> {
        self.listing().to_vec()
    }

    fn listing(&self) -> Arc<Vec<OfferedTool>> {
        Arc::clone(&self.listed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn list_pending(&self) -> bool {
        self.client
            .pending
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn call_tool(
        &self,
        call: ToolCall,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>> {
        Box::pin(async move {
            let arguments = match call.args {
                Value::Object(map) => Some(map),
                Value::Null => None,
                other => {
                    return Err(failed(
                        "tools/call",
                        format!("arguments must be an object, not {other}"),
                    ));
                }
            };
            let mut params = CallToolRequestParams::new(call.tool.clone());
            params.arguments = arguments;
            let cancel = call.cancel.unwrap_or_default();
            // A 2026-07-28 server asks its questions in its answer (`input_required`): they
            // are asked, and the call sent again with the answers, for a few rounds at most.
            for _ in 0..MAX_INPUT_ROUNDS {
                match self
                    .call_once(params.clone(), call.updates.clone(), &cancel, timeout)
                    .await?
                {
                    ServerResult::CallToolResult(result) => return tool_result(result),
                    ServerResult::InputRequiredResult(asked) => {
                        let answers = tokio::select! {
                            biased;
                            () = cancel.cancelled() => {
                                return Err(PeerError::call("tools/call", CallError::Cancelled));
                            }
                            answers = self.client.fulfil(asked.input_requests) => answers,
                        };
                        params.input_responses = answers?;
                        params.request_state = asked.request_state;
                    }
                    other => {
                        return Err(PeerError::malformed(
                            "tools/call",
                            "not a tools/call result",
                            &serde_json::to_value(&other).unwrap_or_default(),
                        ));
                    }
                }
            }
            Err(failed(
                "tools/call",
                format!("it still wanted input after {MAX_INPUT_ROUNDS} rounds of answers"),
            ))
        })
    }

    fn skills(
        &self,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<Vec<super::FetchedSkill>, PeerError>> {
        Box::pin(skills::fetch(&self.peer, &self.offer.name, timeout))
    }

    fn request(
        &self,
        method: &str,
        _params: Option<Value>,
        _timeout: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>> {
        let method = method.to_string();
        Box::pin(async move {
            Err(failed(
                &method,
                json!("requests by name are not offered on the MCP wire"),
            ))
        })
    }

    fn shutdown(&self, grace: Duration) -> PeerFuture<'_, ()> {
        Box::pin(async move {
            self.stop();
            let mut closed = self.closed.clone();
            let _ = tokio::time::timeout(grace, closed.wait_for(Option::is_some)).await;
        })
    }

    fn close(&self, _reason: CloseReason) {
        self.stop();
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.closed.borrow().clone()
    }

    fn closed(&self) -> PeerFuture<'_, CloseReason> {
        let mut closed = self.closed.clone();
        Box::pin(async move {
            match closed.wait_for(Option::is_some).await {
                Ok(reason) => reason.clone().unwrap_or(CloseReason::Eof),
                Err(_) => CloseReason::Eof,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::field_value;
    use serde_json::json;

    #[test]
    fn an_empty_answer_takes_the_fields_default_and_any_other_is_typed() {
        let age = json!({"type": "integer", "default": 30});
        assert_eq!(field_value(&age, String::new()), json!(30));
        assert_eq!(field_value(&age, " ".into()), json!(30));
        assert_eq!(field_value(&age, "41".into()), json!(41));
        let verified = json!({"type": "boolean", "default": true});
        assert_eq!(field_value(&verified, String::new()), json!(true));
        assert_eq!(field_value(&verified, "no".into()), json!(false));
        // No default: the answer as typed, empty included.
        let name = json!({"type": "string"});
        assert_eq!(field_value(&name, String::new()), json!(""));
        assert_eq!(
            field_value(&json!({"type": "number", "default": null}), "".into()),
            json!("")
        );
    }
}
