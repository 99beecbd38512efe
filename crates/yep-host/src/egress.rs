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
//! A sandboxed server is hostile: headers must arrive within [`HEADER_READ_TIMEOUT`], a
//! proxy holds at most [`MAX_CONNECTIONS`] connections, and at most [`MAX_REPORTED`]
//! refusals reach the host, so a flood costs the flooder.
//!
//! Names are looked up by the system's resolver, after the table in `$YEP_EGRESS_HOSTS`
//! (`name=ip,name2=ip2`, like curl's `--resolve`: tests map a name to a loopback server with
//! it, and grant `private` to reach it). Only the host process reads it: the sandbox's
//! scrubbed environment ([`crate::sandbox::scrubbed_env`]) never passes it on.

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

/// What a package may reach through its proxy: parsed from its `net` grant entries that
/// name hosts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    rules: Vec<Rule>,
    /// `private` was granted: names may resolve to private and loopback addresses.
    private: bool,
}

/// One host entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    host: HostPattern,
    /// `None`: the web's ports, 80 and 443.
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// This name or address (normalized: lowercase, no trailing dot).
    Exact(String),
    /// Any name below this one, never the name itself.
    Below(String),
}

impl Allowed {
    /// From grant entries: `api.github.com` (ports 80 and 443), `*.context7.com` (any
    /// subdomain, not the apex; ports 80 and 443), `example.org:8443` (that port only),
    /// `10.1.2.3:5432` (that address asked for by address, on that port), and `private`
    /// (the names granted may resolve to private and loopback addresses). `*` is no proxy
    /// entry (Landlock keeps it), and entries that name no valid host are ignored (the
    /// manifest refuses those). Names are compared case-insensitively, a trailing dot
    /// ignored.
    pub fn from_grants<'a>(entries: impl IntoIterator<Item = &'a str>) -> Allowed {
        let mut allowed = Allowed::default();
        for entry in entries {
            if entry.trim() == crate::store::grants::PRIVATE {
                allowed.private = true;
            } else if let Some(rule) = parse_rule(entry) {
                allowed.rules.push(rule);
            }
        }
        allowed
    }

    /// Whether no entry names a host (then the package needs no proxy).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a granted name may resolve to an address of `kind`.
    fn reaches(&self, kind: Guarded) -> bool {
        self.private && kind.is_private()
    }

    /// Whether a request for `host` (a name, an IP address, or `[v6]`) on `port` may pass.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        normalize_host(host).is_some_and(|host| self.allows_normalized(&host, port))
    }

    fn allows_normalized(&self, host: &str, port: u16) -> bool {
        let is_ip = host.parse::<IpAddr>().is_ok();
        self.rules.iter().any(|rule| {
            let port_ok = match rule.port {
                None => port == 80 || port == 443,
                Some(p) => p == port,
            };
            port_ok
                && match &rule.host {
                    HostPattern::Exact(name) => name == host,
                    HostPattern::Below(suffix) => {
                        !is_ip
                            && host.len() > suffix.len() + 1
                            && host.ends_with(suffix.as_str())
                            && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                    }
                }
        })
    }
}

/// One grant entry as a rule; `None` when it is no proxy entry.
fn parse_rule(entry: &str) -> Option<Rule> {
    let entry = entry.trim();
    if entry == "*" {
        return None;
    }
    let (host, port) = split_host_port(entry)?;
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0)?),
    };
    if let Some(suffix) = host.strip_prefix("*.") {
        let suffix = normalize_host(suffix)?;
        if suffix.parse::<IpAddr>().is_ok() {
            return None;
        }
        return Some(Rule {
            host: HostPattern::Below(suffix),
            port,
        });
    }
    let host = normalize_host(host)?;
    Some(Rule {
        host: HostPattern::Exact(host),
        port,
    })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 literal (no port).
fn split_host_port(entry: &str) -> Option<(&str, Option<&str>)> {
    if entry.starts_with('[') {
        let end = entry.find(']')?;
        let (host, rest) = entry.split_at(end + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?))),
        };
    }
    match entry.matches(':').count() {
        0 => Some((entry, None)),
        1 => entry.split_once(':').map(|(h, p)| (h, Some(p))),
        _ => Some((entry, None)),
    }
}

/// A host as compared and looked up: an IP address in its canonical form (an IPv4-mapped
/// IPv6 address as IPv4), or a valid DNS name in lowercase without its trailing dot.
fn normalize_host(host: &str) -> Option<String> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let ip = inner.parse::<Ipv6Addr>().ok()?;
        return Some(IpAddr::V6(ip).to_canonical().to_string());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip.to_canonical().to_string());
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    valid.then_some(name)
}

/// `host:port`, with an IPv6 address in brackets.
fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Untrusted text for a message: escaped, and cut to [`MAX_SHOWN_CHARS`].
fn shown(text: &str) -> String {
    let escaped = crate::text::escape(text);
    match escaped.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped.into_owned(),
    }
}

/// A refused request: the package, the host and port it asked for, and the grant that would
/// allow it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The package whose proxy refused.
    pub package: String,
    /// The name (lowercase, no trailing dot, at most 253 characters of `a-z0-9-_.`) or IP
    /// address asked for.
    pub host: String,
    pub port: u16,
    /// The grant entry that would allow it, e.g. `net:api.example.com`: the text a
    /// manifest's `net` list (after `net:`) or `yep grant <name> net:<host>` takes.
    pub grant: String,
    /// When a granted name was refused for what it resolves to: the address, and its kind.
    pub resolved: Option<(IpAddr, Guarded)>,
}

impl Refusal {
    /// A granted `host` that resolves to `ip`, of `kind`: `net:private` would allow it, or,
    /// for an address no name may reach, the address itself as a grant.
    fn resolved(package: &str, host: &str, port: u16, ip: IpAddr, kind: Guarded) -> Refusal {
        let grant = match kind.is_private() {
            true => format!("net:{}", crate::store::grants::PRIVATE),
            false => format!("net:{}", target(&ip.to_string(), port)),
        };
        Refusal {
            package: package.to_string(),
            host: host.to_string(),
            port,
            grant,
            resolved: Some((ip, kind)),
        }
    }

    fn new(package: &str, host: &str, port: u16) -> Refusal {
        let grant = if port == 80 || port == 443 {
            if host.contains(':') {
                format!("net:[{host}]")
            } else {
                format!("net:{host}")
            }
        } else {
            format!("net:{}", target(host, port))
        };
        Refusal {
            package: package.to_string(),
            host: host.to_string(),
            port,
            grant,
            resolved: None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asked = shown(&target(&self.host, self.port));
        let package = shown(&self.package);
        let grant = shown(&self.grant);
        match self.resolved {
            None => write!(
                f,
                "yep's sandbox refused {asked} for package {package}: its grants do not name it; the grant `{grant}` would allow it",
            ),
            Some((ip, kind)) if kind.is_private() => write!(
                f,
                "yep's sandbox refused {asked} for package {package}: it resolves to {ip}, {kind}, which a granted name reaches only with the grant `{grant}`",
            ),
            Some((ip, kind)) => write!(
                f,
                "yep's sandbox refused {asked} for package {package}: it resolves to {ip}, {kind}, which no granted name reaches; only a request for the address itself does, with the grant `{grant}`",
            ),
        }
    }
}

/// An address a granted name may not resolve to, unless the grants say so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Guarded {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0/8, ::: a connection to it reaches this machine.
    Unspecified,
    /// One of this machine's interfaces' addresses.
    ThisMachine,
    /// A cloud's metadata service: 169.254.169.254, fd00:ec2::254, 100.100.100.200,
    /// 168.63.129.16.
    Metadata,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// CGNAT's shared space, 100.64.0.0/10.
    SharedNat,
    /// Unique local IPv6, fc00::/7.
    UniqueLocal,
}

impl Guarded {
    /// What `net:private` lets a granted name reach: the machine's own and private
    /// networks, never link-local, unspecified or metadata addresses.
    pub fn is_private(self) -> bool {
        matches!(
            self,
            Guarded::Loopback
                | Guarded::ThisMachine
                | Guarded::Private
                | Guarded::SharedNat
                | Guarded::UniqueLocal
        )
    }

    /// The kind of `ip` by its range alone (IPv4-mapped, IPv4-compatible and NAT64 forms
    /// as their IPv4 address); `None` for a public address, which may still be one of this
    /// machine's ([`guarded`]).
    fn of(ip: IpAddr) -> Option<Guarded> {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Guarded::of_v4(v4),
            IpAddr::V6(v6) => {
                if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                    return Some(Guarded::Metadata);
                }
                let s = v6.segments();
                if v6.is_loopback() {
                    Some(Guarded::Loopback)
                } else if v6.is_unspecified() {
                    Some(Guarded::Unspecified)
                } else if s[0] & 0xffc0 == 0xfe80 {
                    Some(Guarded::LinkLocal)
                } else if s[0] & 0xfe00 == 0xfc00 {
                    Some(Guarded::UniqueLocal)
                } else if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                    // ::a.b.c.d (IPv4-compatible) and 64:ff9b::a.b.c.d (NAT64) carry an
                    // IPv4 address that a stack or a gateway may reach.
                    let o = v6.octets();
                    Guarded::of_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
                } else {
                    None
                }
            }
        }
    }

    fn of_v4(v4: Ipv4Addr) -> Option<Guarded> {
        const METADATA: [Ipv4Addr; 3] = [
            Ipv4Addr::new(169, 254, 169, 254),
            Ipv4Addr::new(100, 100, 100, 200),
            Ipv4Addr::new(168, 63, 129, 16),
        ];
        let o = v4.octets();
        if METADATA.contains(&v4) {
            Some(Guarded::Metadata)
        } else if o[0] == 0 {
            Some(Guarded::Unspecified)
        } else if v4.is_loopback() {
            Some(Guarded::Loopback)
        } else if v4.is_link_local() {
            Some(Guarded::LinkLocal)
        } else if v4.is_private() {
            Some(Guarded::Private)
        } else if o[0] == 100 && o[1] & 0xc0 == 64 {
            Some(Guarded::SharedNat)
        } else {
            None
        }
    }
}

impl std::fmt::Display for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Guarded::Loopback => "a loopback address",
            Guarded::Unspecified => "the unspecified address",
            Guarded::ThisMachine => "an address of this machine",
            Guarded::Metadata => "a cloud metadata service's address",
            Guarded::LinkLocal => "a link-local address",
            Guarded::Private => "a private address",
            Guarded::SharedNat => "a CGNAT address",
            Guarded::UniqueLocal => "a unique local address",
        })
    }
}

/// The addresses of this machine's interfaces, looked up once per request that needs them
/// (interfaces come and go).
#[derive(Default)]
struct OwnAddresses(Option<Vec<IpAddr>>);

impl OwnAddresses {
    fn contains(&mut self, ip: IpAddr) -> bool {
        let own = self.0.get_or_insert_with(|| {
            let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
                tracing::warn!("egress proxy: listing this machine's addresses failed");
                return Vec::new();
            };
            interfaces
                .filter_map(|i| i.address)
                .filter_map(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
                    (Some(v4), _) => Some(IpAddr::V4(v4.ip())),
                    (_, Some(v6)) => Some(IpAddr::V6(v6.ip()).to_canonical()),
                    _ => None,
                })
                .collect()
        });
        own.contains(&ip.to_canonical())
    }
}

/// Whether `ip` is one a granted name may not resolve to, and of which kind.
fn guarded(ip: IpAddr, own: &mut OwnAddresses) -> Option<Guarded> {
    Guarded::of(ip).or_else(|| own.contains(ip).then_some(Guarded::ThisMachine))
}

/// Where the proxy looks names up: a table of fixed answers, then the system's resolver.
#[derive(Clone, Debug, Default)]
pub struct Resolver {
    fixed: Arc<HashMap<String, IpAddr>>,
}

impl Resolver {
    /// The system's resolver after the table in `$YEP_EGRESS_HOSTS` ([`HOSTS_ENV`]), read
    /// once per process. The table is for tests: it sends a name to a loopback server.
    pub fn from_env() -> Resolver {
        static FROM_ENV: OnceLock<Resolver> = OnceLock::new();
        FROM_ENV
            .get_or_init(|| match std::env::var(HOSTS_ENV) {
                Ok(table) => Resolver::with_table(&table),
                Err(_) => Resolver::default(),
            })
            .clone()
    }

    /// The system's resolver after `table`, written as `$YEP_EGRESS_HOSTS` is:
    /// `name=ip,name2=ip2` (an IPv6 address bare or in brackets). A pair that is not a name
    /// and an address is skipped, with a warning. Its answers are checked as DNS's are.
    pub fn with_table(table: &str) -> Resolver {
        let mut fixed = HashMap::new();
        for pair in table.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let parsed = pair.split_once('=').and_then(|(name, ip)| {
                let ip = ip.trim();
                let ip = ip
                    .strip_prefix('[')
                    .and_then(|i| i.strip_suffix(']'))
                    .unwrap_or(ip);
                Some((normalize_host(name.trim())?, ip.parse::<IpAddr>().ok()?))
            });
            match parsed {
                Some((name, ip)) => {
                    fixed.insert(name, ip);
                }
                None => tracing::warn!("egress host table: skipped {:?}: not name=ip", shown(pair)),
            }
        }
        Resolver {
            fixed: Arc::new(fixed),
        }
    }

    /// A TCP connection to `host` (normalized, and allowed by `allowed`) on `port`: the
    /// fixed answer, the address itself, or what the system's resolver says, looked up once
    /// and tried in turn. An address a granted name may not reach ([`Guarded`]) is skipped
    /// unless `allowed` says so; when `host` is an address, the grants named it.
    async fn connect(
        &self,
        host: &str,
        port: u16,
        allowed: &Allowed,
    ) -> Result<TcpStream, ConnectError> {
        let (addrs, named) = if let Some(ip) = self.fixed.get(host) {
            (vec![SocketAddr::new(*ip, port)], false)
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            (vec![SocketAddr::new(ip, port)], true)
        } else {
            let found =
                tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port)))
                    .await
                    .map_err(|_| ConnectError::LookupTimedOut)?
                    .map_err(ConnectError::Lookup)?;
            (found.take(16).collect(), false)
        };
        let mut last = ConnectError::NoAddress;
        let mut refused = None;
        let mut own = OwnAddresses::default();
        let mut tried = 0;
        for addr in addrs {
            // The address checked is the address connected to: no second lookup.
            if !named
                && let Some(kind) = guarded(addr.ip(), &mut own)
                && !allowed.reaches(kind)
            {
                refused.get_or_insert(ConnectError::Guarded(addr.ip().to_canonical(), kind));
                continue;
            }
            if tried == MAX_ADDRESSES {
                break;
            }
            tried += 1;
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = ConnectError::Connect(addr, e),
                Err(_) => last = ConnectError::TimedOut(addr),
            }
        }
        Err(match (tried, refused) {
            (0, Some(refused)) => refused,
            _ => last,
        })
    }
}

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
    _stop: DropGuard,
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
    /// Bind 127.0.0.1 on a free port and serve `allowed` for `package` on the current tokio
    /// runtime (an error outside one), looking names up with [`Resolver::from_env`].
    /// `on_refused` is called, from the proxy's task, for the first refusal of each
    /// `host:port`, up to [`MAX_REPORTED`] of them.
    pub fn start(
        package: &str,
        allowed: Allowed,
        on_refused: Arc<dyn Fn(Refusal) + Send + Sync>,
    ) -> std::io::Result<EgressProxy> {
        EgressProxy::start_with(package, allowed, Resolver::from_env(), on_refused)
    }

    /// [`EgressProxy::start`] with its own [`Resolver`].
    pub fn start_with(
        package: &str,
        allowed: Allowed,
        resolver: Resolver,
        on_refused: Arc<dyn Fn(Refusal) + Send + Sync>,
    ) -> std::io::Result<EgressProxy> {
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
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
            allowed,
            resolver,
            on_refused,
            reported: Mutex::new(HashSet::new()),
            stop: stop.clone(),
        });
        runtime.spawn(serve(listener, shared));
        Ok(EgressProxy {
            port,
            _stop: stop.drop_guard(),
        })
    }

    /// The port it listens on, on 127.0.0.1: the one port the sandbox may connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The environment the sandboxed process gets: the proxy for HTTP and HTTPS, in upper
    /// and lower case, and `NO_PROXY` naming loopback only (its ports are grants of their own).
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
        env
    }
}

/// What every connection of one proxy shares.
struct Shared {
    package: String,
    allowed: Allowed,
    resolver: Resolver,
    on_refused: Arc<dyn Fn(Refusal) + Send + Sync>,
    /// The `host:port`s reported so far.
    reported: Mutex<HashSet<(String, u16)>>,
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
            async move { Ok::<_, Infallible>(answer(&shared, slot, request).await) }
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
    shared: &Shared,
    slot: Arc<OwnedSemaphorePermit>,
    request: Request<Incoming>,
) -> Response<Body> {
    let connect = request.method() == Method::CONNECT;
    let (host, port) = match requested(&request, connect) {
        Ok(target) => target,
        Err(why) => return text(StatusCode::BAD_REQUEST, why.to_string()),
    };
    if !shared.allowed.allows_normalized(&host, port) {
        let refusal = Refusal::new(&shared.package, &host, port);
        let body = refusal.to_string();
        shared.report(refusal);
        return text(StatusCode::FORBIDDEN, body);
    }
    let upstream = match shared.resolver.connect(&host, port, &shared.allowed).await {
        Ok(upstream) => upstream,
        Err(ConnectError::Guarded(ip, kind)) => {
            let refusal = Refusal::resolved(&shared.package, &host, port, ip, kind);
            let body = refusal.to_string();
            shared.report(refusal);
            return text(StatusCode::FORBIDDEN, body);
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
    if connect {
        tunnel(shared, slot, request, upstream)
    } else {
        forward(shared, request, upstream, &host, port).await
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
    /// Tell the host of a refusal: once per `host:port`, at most [`MAX_REPORTED`] of them.
    fn report(&self, refusal: Refusal) {
        {
            let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (refusal.host.clone(), refusal.port);
            if reported.len() >= MAX_REPORTED || reported.contains(&key) {
                return;
            }
            reported.insert(key);
        }
        (self.on_refused)(refusal);
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
    let (parts, body) = request.into_parts();
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// How long a test waits for any one answer before it fails instead of hanging.
    const WAIT: Duration = Duration::from_secs(10);

    type Refusals = Arc<Mutex<Vec<Refusal>>>;

    /// A proxy for package `pkg` granted `grants`, resolving with `table`, and the refusals
    /// it reports.
    fn proxy(grants: &[&str], table: &str) -> (EgressProxy, Refusals) {
        let refusals: Refusals = Arc::default();
        let sink = Arc::clone(&refusals);
        let proxy = EgressProxy::start_with(
            "pkg",
            Allowed::from_grants(grants.iter().copied()),
            Resolver::with_table(table),
            Arc::new(move |r| sink.lock().unwrap().push(r)),
        )
        .unwrap();
        (proxy, refusals)
    }

    /// A loopback TCP server that echoes what it reads; its port.
    async fn echo_server() -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        port
    }

    async fn connect(proxy: &EgressProxy) -> TcpStream {
        TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port()))
            .await
            .unwrap()
    }

    /// Read up to the end of a response head (or the end of the stream).
    async fn read_head(stream: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
            match tokio::time::timeout(WAIT, stream.read(&mut byte)).await {
                Ok(Ok(1)) => head.push(byte[0]),
                Ok(_) => break,
                Err(_) => panic!("no answer within {WAIT:?}: {head:?}"),
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    async fn read_to_end(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut out))
            .await
            .expect("the proxy closes the connection");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Send `CONNECT target` on a new connection; the stream and the answer's head.
    async fn send_connect(proxy: &EgressProxy, target: &str) -> (TcpStream, String) {
        let mut stream = connect(proxy).await;
        stream
            .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let head = read_head(&mut stream).await;
        (stream, head)
    }

    /// Whether a tunnel through `proxy` to `target` (an echo server) carries bytes both ways.
    async fn tunnels(proxy: &EgressProxy, target: &str) -> bool {
        let (mut stream, head) = send_connect(proxy, target).await;
        if !head.starts_with("HTTP/1.1 200") {
            return false;
        }
        stream.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        tokio::time::timeout(WAIT, stream.read_exact(&mut echoed))
            .await
            .unwrap()
            .unwrap();
        &echoed == b"ping"
    }

    #[tokio::test]
    async fn connect_to_an_allowed_name_tunnels_to_the_origin() {
        let echo = echo_server().await;
        let (proxy, refusals) = proxy(
            &[&format!("echo.test:{echo}"), "private"],
            "echo.test=127.0.0.1",
        );
        // Names compare case-insensitively, a trailing dot ignored.
        assert!(tunnels(&proxy, &format!("Echo.TEST.:{echo}")).await);
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn plain_http_to_an_allowed_name_is_forwarded_and_answered() {
        let origin = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = origin.local_addr().unwrap().port();
        let (seen, heard) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut stream, _) = origin.accept().await.unwrap();
            let head = read_head(&mut stream).await;
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .await
                .unwrap();
            let _ = seen.send(head);
        });
        let (proxy, _) = proxy(
            &[&format!("web.test:{port}"), "private"],
            "web.test=127.0.0.1",
        );
        let mut stream = connect(&proxy).await;
        stream
            .write_all(
                format!(
                    "GET http://web.test:{port}/path?q=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\
                     Proxy-Authorization: Basic eA==\r\nX-Kept: yes\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let answer = read_to_end(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
        let head = heard.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("get /path?q=1 http/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("host: web.test:{port}\r\n")),
            "{head}"
        );
        assert!(head.contains("x-kept: yes\r\n"), "{head}");
        assert!(!head.contains("proxy-authorization"), "{head}");
    }

    #[tokio::test]
    async fn a_request_without_a_host_is_a_bad_request() {
        let (proxy, refusals) = proxy(&["web.test"], "");
        let mut stream = connect(&proxy).await;
        stream
            .write_all(b"GET /path HTTP/1.1\r\nHost: web.test\r\n\r\n")
            .await
            .unwrap();
        let answer = read_to_end(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_name_not_granted_is_refused_with_its_grant_and_reported_once() {
        let (proxy, refusals) = proxy(&["api.github.com"], "");
        for _ in 0..5 {
            let (mut stream, head) = send_connect(&proxy, "denied.test:443").await;
            assert!(head.starts_with("HTTP/1.1 403"), "{head}");
            let body = read_to_end(&mut stream).await;
            assert!(body.contains("refused denied.test:443"), "{body}");
            assert!(body.contains("package pkg"), "{body}");
            assert!(body.contains("`net:denied.test`"), "{body}");
        }
        let refusals = refusals.lock().unwrap();
        assert_eq!(
            *refusals,
            [Refusal {
                package: "pkg".to_string(),
                host: "denied.test".to_string(),
                port: 443,
                grant: "net:denied.test".to_string(),
                resolved: None,
            }]
        );
    }

    #[tokio::test]
    async fn refusals_past_the_cap_are_answered_but_not_reported() {
        let (proxy, refusals) = proxy(&["api.github.com"], "");
        for i in 0..MAX_REPORTED + 8 {
            let (_, head) = send_connect(&proxy, &format!("h{i}.test:8080")).await;
            assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        }
        let refusals = refusals.lock().unwrap();
        assert_eq!(refusals.len(), MAX_REPORTED);
        assert_eq!(refusals[0].grant, "net:h0.test:8080");
    }

    #[tokio::test]
    async fn a_wildcard_allows_subdomains_only() {
        let allowed = Allowed::from_grants(["*.example.test"]);
        assert!(allowed.allows("a.example.test", 443));
        assert!(allowed.allows("b.a.EXAMPLE.test.", 80));
        assert!(!allowed.allows("example.test", 443));
        assert!(!allowed.allows("evilexample.test", 443));
        assert!(!allowed.allows("a.example.test", 8080));

        let echo = echo_server().await;
        let (proxy, refusals) = proxy(
            &[&format!("*.example.test:{echo}"), "private"],
            "a.example.test=127.0.0.1,example.test=127.0.0.1,evilexample.test=127.0.0.1",
        );
        assert!(tunnels(&proxy, &format!("a.example.test:{echo}")).await);
        for refused in ["example.test", "evilexample.test"] {
            let (_, head) = send_connect(&proxy, &format!("{refused}:{echo}")).await;
            assert!(head.starts_with("HTTP/1.1 403"), "{refused}: {head}");
        }
        assert_eq!(refusals.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_port_names_that_port_and_a_bare_name_the_web_ports() {
        let allowed = Allowed::from_grants(["example.org:8443", "API.GitHub.com."]);
        assert!(allowed.allows("example.org", 8443));
        assert!(!allowed.allows("example.org", 443));
        assert!(!allowed.allows("example.org", 80));
        assert!(allowed.allows("api.github.com", 443));
        assert!(allowed.allows("api.github.com", 80));
        assert!(!allowed.allows("api.github.com", 8443));
        assert!(!allowed.allows("api.github.com", 22));
    }

    #[test]
    fn any_and_private_name_no_host_and_addresses_name_themselves() {
        let allowed = Allowed::from_grants(["*", "private", "", "a b:1"]);
        assert!(allowed.is_empty(), "{allowed:?}");
        assert!(allowed.private);
        assert!(!allowed.allows("private", 443));
        let allowed = Allowed::from_grants(["10.0.0.5", "[2001:db8::1]", "10.1.2.3:5432"]);
        assert!(allowed.allows("10.0.0.5", 443));
        assert!(allowed.allows("[2001:db8::1]", 443));
        assert!(!allowed.allows("10.0.0.5", 8080));
        assert!(allowed.allows("10.1.2.3", 5432));
        assert!(!allowed.allows("10.1.2.3", 443));
        assert!(!allowed.private);
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let echo = echo_server().await;
        let (proxy, refusals) = proxy(&[&format!("localhost:{echo}")], "");
        let (mut stream, head) = send_connect(&proxy, &format!("localhost:{echo}")).await;
        let body = read_to_end(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
        assert!(body.contains("a loopback address"), "{body}");
        assert!(body.contains("`net:private`"), "{body}");
        assert_eq!(refusals.lock().unwrap()[0].grant, "net:private");
    }

    #[tokio::test]
    async fn a_granted_name_mapped_to_loopback_is_refused_and_told_unless_private_is_granted() {
        let echo = echo_server().await;
        let (refused, refusals) = proxy(&[&format!("echo.test:{echo}")], "echo.test=127.0.0.1");
        let (mut stream, head) = send_connect(&refused, &format!("echo.test:{echo}")).await;
        let body = read_to_end(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
        assert!(
            body.contains(&format!(
                "refused echo.test:{echo} for package pkg: it resolves to 127.0.0.1, a loopback address"
            )),
            "{body}"
        );
        assert!(body.contains("the grant `net:private`"), "{body}");
        assert_eq!(
            *refusals.lock().unwrap(),
            [Refusal {
                package: "pkg".to_string(),
                host: "echo.test".to_string(),
                port: echo,
                grant: "net:private".to_string(),
                resolved: Some((IpAddr::V4(Ipv4Addr::LOCALHOST), Guarded::Loopback)),
            }]
        );

        let (private, _) = proxy(
            &[&format!("echo.test:{echo}"), "private"],
            "echo.test=127.0.0.1",
        );
        assert!(tunnels(&private, &format!("echo.test:{echo}")).await);
    }

    #[tokio::test]
    async fn an_address_granted_by_itself_is_reached_by_address_only() {
        let echo = echo_server().await;
        let (proxy, _) = proxy(&[&format!("127.0.0.1:{echo}")], "echo.test=127.0.0.1");
        assert!(tunnels(&proxy, &format!("127.0.0.1:{echo}")).await);
        let (_, head) = send_connect(&proxy, &format!("echo.test:{echo}")).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    }

    #[tokio::test]
    async fn a_name_mapped_to_this_machines_own_address_is_refused() {
        // A service bound to every interface, reached by one of this machine's addresses.
        let Some(own) = nix::ifaddrs::getifaddrs()
            .unwrap()
            .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
            .find(|ip| !ip.is_loopback())
        else {
            eprintln!("skipped: this machine has no address but loopback");
            return;
        };
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let table = format!("me.test={own}");
        let (refused, refusals) = proxy(&[&format!("me.test:{port}")], &table);
        let (mut stream, head) = send_connect(&refused, &format!("me.test:{port}")).await;
        let body = read_to_end(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
        assert!(body.contains(&format!("it resolves to {own}")), "{body}");
        assert_eq!(refusals.lock().unwrap()[0].grant, "net:private");

        let (private, _) = proxy(&[&format!("me.test:{port}"), "private"], &table);
        assert!(tunnels(&private, &format!("me.test:{port}")).await);
    }

    #[tokio::test]
    async fn a_name_mapped_to_a_metadata_address_is_refused_even_with_private() {
        let (proxy, refusals) = proxy(
            &["meta.test", "private"],
            "meta.test=169.254.169.254,mapped.test=::ffff:10.0.0.1",
        );
        let (mut stream, head) = send_connect(&proxy, "meta.test:80").await;
        let body = read_to_end(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
        assert!(
            body.contains("it resolves to 169.254.169.254, a cloud metadata service's address"),
            "{body}"
        );
        assert_eq!(refusals.lock().unwrap()[0].grant, "net:169.254.169.254:80");
    }

    #[test]
    fn addresses_are_guarded_by_their_range_in_every_form() {
        let cases: &[(&str, Option<Guarded>)] = &[
            ("127.0.0.1", Some(Guarded::Loopback)),
            ("127.9.9.9", Some(Guarded::Loopback)),
            ("::1", Some(Guarded::Loopback)),
            ("::ffff:127.0.0.1", Some(Guarded::Loopback)),
            ("::127.0.0.1", Some(Guarded::Loopback)),
            ("64:ff9b::127.0.0.1", Some(Guarded::Loopback)),
            ("0.0.0.0", Some(Guarded::Unspecified)),
            ("::", Some(Guarded::Unspecified)),
            ("::ffff:0.0.0.0", Some(Guarded::Unspecified)),
            ("169.254.169.254", Some(Guarded::Metadata)),
            ("::ffff:169.254.169.254", Some(Guarded::Metadata)),
            ("fd00:ec2::254", Some(Guarded::Metadata)),
            ("100.100.100.200", Some(Guarded::Metadata)),
            ("168.63.129.16", Some(Guarded::Metadata)),
            ("169.254.1.1", Some(Guarded::LinkLocal)),
            ("fe80::1", Some(Guarded::LinkLocal)),
            ("febf::1", Some(Guarded::LinkLocal)),
            ("10.1.2.3", Some(Guarded::Private)),
            ("172.16.0.1", Some(Guarded::Private)),
            ("172.31.255.255", Some(Guarded::Private)),
            ("192.168.1.1", Some(Guarded::Private)),
            ("::ffff:192.168.1.1", Some(Guarded::Private)),
            ("100.64.0.1", Some(Guarded::SharedNat)),
            ("100.127.255.255", Some(Guarded::SharedNat)),
            ("fc00::1", Some(Guarded::UniqueLocal)),
            ("fdff::1", Some(Guarded::UniqueLocal)),
            ("8.8.8.8", None),
            ("172.15.0.1", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("168.63.129.17", None),
            ("fec0::1", None),
            ("2001:db8::1", None),
            ("::ffff:8.8.8.8", None),
        ];
        for (ip, want) in cases {
            assert_eq!(Guarded::of(ip.parse().unwrap()), *want, "{ip}");
        }
        // The machine's own addresses are listed: loopback is one of them.
        assert!(OwnAddresses::default().contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[tokio::test]
    async fn garbage_and_oversized_heads_leave_the_proxy_serving() {
        let echo = echo_server().await;
        let (proxy, _) = proxy(
            &[&format!("echo.test:{echo}"), "private"],
            "echo.test=127.0.0.1",
        );

        let mut garbage = connect(&proxy).await;
        garbage
            .write_all(b"\x00\x01\xff garbage\r\n\r\n")
            .await
            .unwrap();
        let answer = read_to_end(&mut garbage).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

        let mut oversized = connect(&proxy).await;
        let big = format!(
            "CONNECT echo.test:{echo} HTTP/1.1\r\nX-Big: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES * 2)
        );
        // The proxy may close before it has read it all.
        let _ = oversized.write_all(big.as_bytes()).await;
        let head = read_head(&mut oversized).await;
        assert!(head.starts_with("HTTP/1.1 431"), "{head}");

        assert!(tunnels(&proxy, &format!("echo.test:{echo}")).await);
    }

    #[tokio::test]
    async fn connections_past_the_cap_are_closed() {
        let (proxy, _) = proxy(&["web.test"], "");
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut stream = connect(&proxy).await;
            // A head that never ends holds its slot until the header timeout.
            stream
                .write_all(b"GET http://web.test/ HTTP/1.1\r\n")
                .await
                .unwrap();
            held.push(stream);
        }
        let mut extra = connect(&proxy).await;
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(WAIT, extra.read(&mut byte))
            .await
            .unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    #[tokio::test]
    async fn dropping_the_proxy_closes_its_tunnels() {
        let echo = echo_server().await;
        let (proxy, _) = proxy(
            &[&format!("echo.test:{echo}"), "private"],
            "echo.test=127.0.0.1",
        );
        let (mut stream, head) = send_connect(&proxy, &format!("echo.test:{echo}")).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        drop(proxy);
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(WAIT, stream.read(&mut byte))
            .await
            .unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    #[tokio::test]
    async fn the_environment_points_every_scheme_at_the_proxy() {
        let (proxy, _) = proxy(&["web.test"], "");
        let url = format!("http://127.0.0.1:{}", proxy.port());
        let env: HashMap<String, String> = proxy.env().into_iter().collect();
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            assert_eq!(env[name], url, "{name}");
        }
        assert_eq!(env["NO_PROXY"], "localhost,127.0.0.1,::1");
        assert_eq!(env["no_proxy"], "localhost,127.0.0.1,::1");
    }

    #[test]
    fn the_host_table_skips_what_is_not_name_equals_address() {
        let resolver = Resolver::with_table("a.test=127.0.0.1, B.test.=[::1],junk,c.test=nope");
        assert_eq!(resolver.fixed.len(), 2);
        assert_eq!(resolver.fixed["b.test"], IpAddr::V6(Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn starting_outside_a_runtime_is_an_error_not_a_panic() {
        let started = EgressProxy::start_with(
            "pkg",
            Allowed::default(),
            Resolver::default(),
            Arc::new(|_| {}),
        );
        assert!(started.is_err());
    }
}
