//! The egress proxy: how a sandboxed server reaches the host names its `net` grants name.
//!
//! Landlock allows TCP connect by port, never by host name. So a package granted
//! `net: ["api.github.com", "*.context7.com", "example.org:8443"]` gets its own HTTP proxy
//! on 127.0.0.1 ([`EgressProxy`], one listener per sandboxed process, so the port says whose
//! request it is); the sandbox may connect to that port, and the process finds it in
//! `HTTP_PROXY`, `HTTPS_PROXY` and their lowercase forms ([`EgressProxy::env`]). `NO_PROXY`
//! names loopback only: a loopback port is a grant of its own, kept by Landlock.
//!
//! A granted name is checked again after it is looked up: the proxy resolves it once, checks
//! every address, and connects only to an address it checked, so a name cannot be
//! re-pointed between the check and the connection. An address that is the machine's own
//! (loopback, unspecified, any of its interfaces'), link-local, a cloud's metadata service,
//! or private (RFC 1918, CGNAT, ULA), IPv4-mapped or not, is refused ([`Guarded`]), unless
//! the grants say so: `private` lets granted names reach private and loopback addresses, and
//! a grant that names an address (`10.1.2.3:5432`) lets the package ask for that address.
//!
//! The proxy speaks `CONNECT host:port` (what HTTPS clients send: the bytes are relayed, the
//! TLS stays end to end) and plain HTTP in absolute form (`GET http://host/path`, forwarded
//! over a fresh HTTP/1.1 connection). What the grants do not name is answered `403` with the
//! grant that would allow it, and reported once per host and port ([`Refusal`]).
//!
//! Two things make it read requests rather than relay bytes:
//! - a grant with a request rule (`api.github.com GET,POST /repos/me/`): a request the
//!   rules do not let through is answered `403` naming them ([`Reason::Request`]);
//! - a brokered secret ([`Broker`]): the process holds a placeholder, and the proxy puts
//!   the value into requests to the hosts the secret belongs to, and refuses a request that
//!   carries the placeholder anywhere else ([`Reason::Placeholder`]).
//!
//! For such a host, a CONNECT is answered by the proxy itself: it terminates the client's TLS
//! with a certificate its home's CA signed ([`Ca`]), reads each request, and sends it on over
//! TLS it opens to the origin, verified against the system's roots. Other hosts' TLS stays
//! end to end. Every decision can be told to the host as it is made ([`Decision`]).
//!
//! A sandboxed server is hostile: headers must arrive within [`HEADER_READ_TIMEOUT`], a
//! proxy holds at most [`MAX_CONNECTIONS`] connections, and at most [`MAX_REPORTED`]
//! refusals reach the host, so a flood costs the flooder.
//!
//! Names are looked up by the system's resolver, after the table in `$YEP_EGRESS_HOSTS`
//! (`name=ip,name2=ip2`, like curl's `--resolve`: tests map a name to a loopback server with
//! it, and grant `private` to reach it). Only the host process reads it: the sandbox's
//! scrubbed environment ([`crate::scrubbed_env`]) never passes it on.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::{CancellationToken, DropGuard};

mod guard;
mod inspect;
#[cfg(test)]
mod inspect_tests;
mod rules;
mod terminate;
#[cfg(test)]
mod tests;
mod tls;

pub use guard::{Guarded, Resolver};
pub use inspect::Broker;
use inspect::Held;
pub use rules::{Allowed, Reason, Refusal};
use rules::{normalize_host, shown, target};
pub use tls::{Ca, ROOTS_ENV};

/// How long a client has to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections one proxy holds (tunnels included); past it, new ones are closed.
pub const MAX_CONNECTIONS: usize = 64;

/// The most distinct refused `host:port`s one proxy reports; past it, refusals are silent.
pub const MAX_REPORTED: usize = 32;

/// The environment variable with the host's table of fixed answers ([`Resolver::from_env`]).
pub const HOSTS_ENV: &str = "YEP_EGRESS_HOSTS";

/// A connection's read buffer, and so the most its request head may take (hyper's default
/// is 400 KiB; no client needs more than this).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// How long connecting to one of an origin's addresses may take, and looking its name up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most addresses of one name tried in turn.
const MAX_ADDRESSES: usize = 4;

/// The most characters of untrusted text a message shows.
const MAX_SHOWN_CHARS: usize = 256;

/// The first wait after a failed accept, doubled on each failure in a row.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);

/// The longest wait after a failed accept.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why the proxy could not reach an origin.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("looking the name up failed: {0}")]
    Lookup(std::io::Error),
    #[error("looking the name up timed out")]
    LookupTimedOut,
    #[error("the name has no address")]
    NoAddress,
    #[error("it resolves to {0}, {1}, which the grants do not let a name reach")]
    Guarded(IpAddr, Guarded),
    #[error("connecting to {0} failed: {1}")]
    Connect(SocketAddr, std::io::Error),
    #[error("connecting to {0} timed out")]
    TimedOut(SocketAddr),
}

/// A running proxy for one package; dropping it stops accepting and closes its connections.
pub struct EgressProxy {
    port: u16,
    /// The CA it terminates TLS with, when it terminates any host's.
    ca: Option<Arc<Ca>>,
    /// The trust variables [`EgressProxy::write_trust`] made.
    trust: Vec<(String, String)>,
    _stop: DropGuard,
}

/// What a proxy decides by and whom it tells ([`EgressProxy::start`]).
#[derive(Default)]
pub struct Setup {
    /// What the package may reach.
    pub allowed: Allowed,
    /// Its brokered secrets, and where the CA is kept.
    pub broker: Option<Broker>,
    /// How names are looked up; `None` is [`Resolver::from_env`].
    pub resolver: Option<Resolver>,
    /// Told of the first refusal of each `host:port` and kind, up to [`MAX_REPORTED`].
    pub on_refused: Option<Arc<dyn Fn(Refusal) + Send + Sync>>,
    /// Told of every decision (for an audit trail), from the proxy's tasks.
    pub on_decided: Option<Arc<dyn Fn(Decision) + Send + Sync>>,
    /// A PEM file of more roots to verify origins by, beside the system's; `None` is
    /// `$YEP_EGRESS_ROOTS` (see [`ROOTS_ENV`]). For tests: a loopback origin with a test CA.
    pub origin_roots: Option<std::path::PathBuf>,
}

/// One decision of a proxy ([`Setup::on_decided`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Decision {
    /// A tunnel or request let through by grant `rule` (`net:api.github.com`): the method
    /// and path when the proxy read them.
    Allowed {
        host: String,
        port: u16,
        method: Option<String>,
        path: Option<String>,
        rule: String,
    },
    /// Brokered secret `secret` (its field's name, never its value) put into a request.
    Injected {
        host: String,
        port: u16,
        secret: String,
    },
    /// A refusal, each one.
    Refused(Refusal),
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("port", &self.port)
            .finish()
    }
}

/// What bypasses the proxy: loopback, whose ports the sandbox grants on their own.
const LOOPBACK: &str = "localhost,127.0.0.1,::1";

impl EgressProxy {
    /// Bind 127.0.0.1 on a free port and serve `setup` for `package` on the current tokio
    /// runtime (an error outside one). With brokered secrets or request rules, its home's
    /// CA is read, or made, first.
    pub fn start(package: &str, setup: Setup) -> std::io::Result<EgressProxy> {
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let held: Vec<Held> = setup
            .broker
            .iter()
            .flat_map(|b| &b.secrets)
            .filter_map(|b| Held::of(package, b))
            .collect();
        let ca = match &setup.broker {
            Some(b) if !held.is_empty() || setup.allowed.has_any_request_rule() => {
                Some(Ca::open(&b.ca_dir)?)
            }
            _ => None,
        };
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            package: package.to_string(),
            allowed: setup.allowed,
            resolver: setup.resolver.unwrap_or_else(Resolver::from_env),
            on_refused: setup.on_refused,
            on_decided: setup.on_decided,
            reported: Mutex::new(HashSet::new()),
            held,
            ca: ca.clone(),
            origin_roots: setup.origin_roots,
            stop: stop.clone(),
        });
        runtime.spawn(serve(listener, shared));
        Ok(EgressProxy {
            port,
            ca,
            trust: Vec::new(),
            _stop: stop.drop_guard(),
        })
    }

    /// Write what a process needs to trust the proxy's certificates into `dir` (its
    /// private temp dir), when the proxy terminates any host's TLS: `yep-ca.pem` (the CA
    /// alone, for `NODE_EXTRA_CA_CERTS`, which adds to Node's own roots) and
    /// `yep-ca-bundle.pem` (the system's roots and the CA, for the variables that replace
    /// the roots: `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `GIT_SSL_CAINFO`,
    /// `CARGO_HTTP_CAINFO`). [`EgressProxy::env`] then names them.
    pub fn write_trust(&mut self, dir: &std::path::Path) -> std::io::Result<()> {
        let Some(ca) = &self.ca else { return Ok(()) };
        let (alone, bundle) = (dir.join("yep-ca.pem"), dir.join("yep-ca-bundle.pem"));
        std::fs::write(&alone, ca.pem())?;
        let mut roots = tls::system_bundle();
        if !roots.is_empty() && !roots.ends_with('\n') {
            roots.push('\n');
        }
        roots.push_str(ca.pem());
        std::fs::write(&bundle, roots)?;
        let (alone, bundle) = (alone.display().to_string(), bundle.display().to_string());
        self.trust = vec![("NODE_EXTRA_CA_CERTS".to_string(), alone)];
        for name in [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "CARGO_HTTP_CAINFO",
        ] {
            self.trust.push((name.to_string(), bundle.clone()));
        }
        Ok(())
    }

    /// The port it listens on, on 127.0.0.1: the one port the sandbox may connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The environment the sandboxed process gets: the proxy for HTTP and HTTPS, in upper
    /// and lower case, `NO_PROXY` naming loopback only (its ports are grants of their own),
    /// `NODE_USE_ENV_PROXY=1` (so Node's own `fetch` uses them, from Node 22.21 and 24.5),
    /// and the trust variables [`EgressProxy::write_trust`] wrote.
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let mut env: Vec<(String, String)> =
            ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
                .into_iter()
                .map(|name| (name.to_string(), url.clone()))
                .collect();
        for name in ["NO_PROXY", "no_proxy"] {
            env.push((name.to_string(), LOOPBACK.to_string()));
        }
        env.push(("NODE_USE_ENV_PROXY".to_string(), "1".to_string()));
        env.extend(self.trust.iter().cloned());
        env
    }
}

/// What every connection of one proxy shares.
struct Shared {
    package: String,
    allowed: Allowed,
    resolver: Resolver,
    on_refused: Option<Arc<dyn Fn(Refusal) + Send + Sync>>,
    on_decided: Option<Arc<dyn Fn(Decision) + Send + Sync>>,
    /// The `host:port`s and kinds of refusal reported so far.
    reported: Mutex<HashSet<(String, u16, u8)>>,
    /// Its brokered secrets.
    held: Vec<Held>,
    /// The CA it terminates TLS with; `None` when it terminates none.
    ca: Option<Arc<Ca>>,
    /// More roots to verify origins by ([`Setup::origin_roots`]).
    origin_roots: Option<std::path::PathBuf>,
    stop: CancellationToken,
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Accept until the proxy is dropped, each connection in its own task under the cap.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    let mut backoff = ACCEPT_BACKOFF_FIRST;
    loop {
        let accepted = tokio::select! {
            () = shared.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF_FIRST;
                stream
            }
            Err(e) => {
                tracing::warn!(
                    "egress proxy of {}: accepting a connection failed: {e}; retrying in {} ms",
                    shown(&shared.package),
                    backoff.as_millis()
                );
                tokio::select! {
                    () = shared.stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        // Past the cap the connection is closed unanswered: a flood costs the flooder.
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let slot = Arc::new(slot);
        let for_requests = Arc::clone(&shared);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let (shared, slot) = (Arc::clone(&for_requests), Arc::clone(&slot));
            async move { Ok::<_, Infallible>(answer(shared, slot, request).await) }
        });
        let connection = http1
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let stop = shared.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// The answer to one request.
async fn answer(
    shared: Arc<Shared>,
    slot: Arc<OwnedSemaphorePermit>,
    request: Request<Incoming>,
) -> Response<Body> {
    let connect = request.method() == Method::CONNECT;
    let (host, port) = match requested(&request, connect) {
        Ok(target) => target,
        Err(why) => return text(StatusCode::BAD_REQUEST, why.to_string()),
    };
    if !shared.allowed.allows_normalized(&host, port) {
        return shared.refuse(Refusal::new(&shared.package, &host, port));
    }
    // What makes the proxy read this host's requests, if anything.
    let terminate = shared.terminates(&host, port);
    if connect && terminate.is_some() && shared.ca.is_none() {
        return text(
            StatusCode::BAD_GATEWAY,
            format!(
                "yep's egress proxy must read requests to {} and has no CA to terminate TLS with",
                target(&host, port)
            ),
        );
    }
    let upstream = match shared.resolver.connect(&host, port, &shared.allowed).await {
        Ok(upstream) => upstream,
        Err(ConnectError::Guarded(ip, kind)) => {
            return shared.refuse(Refusal::resolved(&shared.package, &host, port, ip, kind));
        }
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                format!(
                    "yep's egress proxy could not reach {}: {e}",
                    target(&host, port)
                ),
            );
        }
    };
    match (connect, terminate) {
        (true, Some(because)) => {
            terminate::terminate(shared, slot, request, upstream, host, port, because)
        }
        (true, None) => {
            shared.decided(|| Decision::Allowed {
                host: host.clone(),
                port,
                method: None,
                path: None,
                rule: shared.allowed.rule_for(&host, port),
            });
            tunnel(&shared, slot, request, upstream)
        }
        (false, _) => forward(&shared, request, upstream, &host, port).await,
    }
}

/// Why a request cannot be served: its text is the answer's body.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    #[error("CONNECT needs host:port")]
    ConnectTarget,
    #[error(
        "this is yep's egress proxy: ask for an absolute URI (http://host/path), or CONNECT host:port"
    )]
    NotAbsolute,
    #[error("yep's egress proxy forwards http:// URIs; for {0} use CONNECT")]
    Scheme(String),
    #[error("{0:?} is not a host name")]
    Host(String),
}

/// The normalized host and the port a request asks for, or why it cannot be served.
fn requested(request: &Request<Incoming>, connect: bool) -> Result<(String, u16), BadRequest> {
    let uri = request.uri();
    let Some(authority) = uri.authority() else {
        return Err(match connect {
            true => BadRequest::ConnectTarget,
            false => BadRequest::NotAbsolute,
        });
    };
    let port = if connect {
        authority.port_u16().ok_or(BadRequest::ConnectTarget)?
    } else {
        match uri.scheme_str() {
            Some("http") => authority.port_u16().unwrap_or(80),
            _ => return Err(BadRequest::Scheme(shown(uri.scheme_str().unwrap_or("")))),
        }
    };
    let host = normalize_host(authority.host())
        .ok_or_else(|| BadRequest::Host(shown(authority.host())))?;
    Ok((host, port))
}

impl Shared {
    /// Refuse with `refusal`: a `403` saying why, told to the host.
    fn refuse(&self, refusal: Refusal) -> Response<Body> {
        let body = refusal.to_string();
        self.report(refusal);
        text(StatusCode::FORBIDDEN, body)
    }

    /// Tell the host of a refusal: every one to [`Setup::on_decided`], and once per
    /// `host:port` and kind, at most [`MAX_REPORTED`] of them, to [`Setup::on_refused`].
    fn report(&self, refusal: Refusal) {
        self.decided(|| Decision::Refused(refusal.clone()));
        let Some(on_refused) = &self.on_refused else {
            return;
        };
        {
            let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (refusal.host.clone(), refusal.port, refusal.reason.kind());
            if reported.len() >= MAX_REPORTED || reported.contains(&key) {
                return;
            }
            reported.insert(key);
        }
        on_refused(refusal);
    }

    /// Tell [`Setup::on_decided`] of a decision, made only when someone listens.
    fn decided(&self, decision: impl FnOnce() -> Decision) {
        if let Some(on_decided) = &self.on_decided {
            on_decided(decision());
        }
    }

    /// Tell [`Setup::on_decided`] of a request let through to `host:port`, and of the
    /// secrets put into it.
    fn told(&self, host: &str, port: u16, parts: &http::request::Parts, put: Vec<String>) {
        self.decided(|| Decision::Allowed {
            host: host.to_string(),
            port,
            method: Some(parts.method.as_str().to_string()),
            path: Some(shown(parts.uri.path())),
            rule: self.allowed.rule_for(host, port),
        });
        for secret in put {
            self.decided(|| Decision::Injected {
                host: host.to_string(),
                port,
                secret,
            });
        }
    }

    /// Why the proxy must read the requests to `host:port` (for a message), or `None` when
    /// it relays their bytes: a brokered secret belongs there, or its grants have request
    /// rules only.
    fn terminates(&self, host: &str, port: u16) -> Option<String> {
        if let Some(held) = self.held.iter().find(|h| h.belongs_to(host, port)) {
            return Some(format!("the brokered secret `{}`", held.field()));
        }
        self.allowed
            .has_request_rules(host, port)
            .then(|| "its request rules".to_string())
    }
}

/// Answer a CONNECT `200` and relay bytes both ways, once hyper hands the connection over,
/// until either side closes or the proxy is dropped.
fn tunnel(
    shared: &Shared,
    slot: Arc<OwnedSemaphorePermit>,
    request: Request<Incoming>,
    mut upstream: TcpStream,
) -> Response<Body> {
    let stop = shared.stop.clone();
    tokio::spawn(async move {
        // The tunnel holds its connection's slot.
        let _slot = slot;
        let relay = async {
            let Ok(upgraded) = hyper::upgrade::on(request).await else {
                return;
            };
            let mut client = TokioIo::new(upgraded);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        };
        tokio::select! {
            () = relay => {}
            () = stop.cancelled() => {}
        }
    });
    Response::new(empty())
}

/// Send a plain HTTP request on to its origin over `upstream` and stream the answer back.
async fn forward(
    shared: &Shared,
    request: Request<Incoming>,
    upstream: TcpStream,
    host: &str,
    port: u16,
) -> Response<Body> {
    let unreachable = |what: &str, e: hyper::Error| {
        text(
            StatusCode::BAD_GATEWAY,
            format!(
                "yep's egress proxy could not reach {}: {what}: {e}",
                target(host, port)
            ),
        )
    };
    let (mut parts, body) = request.into_parts();
    let put = match inspect::vet(shared, host, port, &mut parts) {
        Ok(put) => put,
        Err(refusal) => return shared.refuse(*refusal),
    };
    shared.told(host, port, &parts, put);
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse::<http::Uri>()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    // The origin serves the host that was checked, whatever `Host` the client sent.
    let host_header = match (parts.uri.authority(), parts.uri.port_u16()) {
        (Some(authority), Some(port)) => format!("{}:{port}", authority.host()),
        (Some(authority), None) => authority.host().to_string(),
        (None, _) => target(host, port),
    };
    match HeaderValue::from_str(&host_header) {
        Ok(value) => {
            headers.insert(header::HOST, value);
        }
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "the host is no header value".to_string(),
            );
        }
    }
    let mut outgoing = Request::new(body);
    *outgoing.method_mut() = parts.method;
    *outgoing.uri_mut() = path;
    *outgoing.headers_mut() = headers;
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return unreachable("handshake", e),
        };
    let stop = shared.stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = connection => {}
            () = stop.cancelled() => {}
        }
    });
    match sender.send_request(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => unreachable("request", e),
    }
}

/// Remove what concerns one hop only: the headers `Connection` names, the hop-by-hop ones,
/// and every `Proxy-*`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    let proxy: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy {
        headers.remove(name);
    }
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

/// A short text answer, after which the connection closes: a refused client keeps nothing
/// open.
fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body + "\n"))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
