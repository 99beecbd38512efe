//! The grants a proxy decides by ([`Allowed`]), and what it tells of a refusal ([`Refusal`]).

use super::*;

/// What a package may reach through its proxy: parsed from its `net` grant entries that
/// name hosts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    rules: Vec<Rule>,
    /// `private` was granted: names may resolve to private and loopback addresses.
    pub(super) private: bool,
}

/// One host entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rule {
    host: HostPattern,
    /// `None`: the web's ports, 80 and 443.
    port: Option<u16>,
    /// What requests it lets through, when it says (`GET,POST /repos/me/`); `None` is all.
    request: Option<yep_store::grants::RequestRule>,
    /// The entry as written (its words one space apart): what a decision names.
    written: String,
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
            if entry.trim() == yep_store::grants::PRIVATE {
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
    pub(super) fn reaches(&self, kind: Guarded) -> bool {
        self.private && kind.is_private()
    }

    /// Whether a request for `host` (a name, an IP address, or `[v6]`) on `port` may pass.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        normalize_host(host).is_some_and(|host| self.allows_normalized(&host, port))
    }

    pub(super) fn allows_normalized(&self, host: &str, port: u16) -> bool {
        self.rules.iter().any(|rule| rule.matches(host, port))
    }

    /// Whether any entry has a request rule (then the proxy needs its CA).
    pub(super) fn has_any_request_rule(&self) -> bool {
        self.rules.iter().any(|r| r.request.is_some())
    }

    /// Whether the proxy must see `host:port`'s requests to decide them: every entry that
    /// names it has a request rule.
    pub(super) fn has_request_rules(&self, host: &str, port: u16) -> bool {
        let mut matching = self
            .rules
            .iter()
            .filter(|r| r.matches(host, port))
            .peekable();
        matching.peek().is_some() && matching.all(|r| r.request.is_some())
    }

    /// Whether `method` to `path` on `host:port` may pass; else the rules that name the host,
    /// as written, for the refusal.
    pub(super) fn allows_request(
        &self,
        host: &str,
        port: u16,
        method: &str,
        path: &str,
    ) -> Result<(), String> {
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.matches(host, port))
            .collect();
        let allowed = matching.iter().any(|r| match &r.request {
            None => true,
            Some(rule) => rule.allows(method, path),
        });
        match allowed {
            true => Ok(()),
            false => Err(matching
                .iter()
                .map(|r| r.written.as_str())
                .collect::<Vec<_>>()
                .join("`, `")),
        }
    }

    /// The grant entry that lets `host:port` through (the first that names it), as written.
    pub(super) fn rule_for(&self, host: &str, port: u16) -> String {
        self.rules
            .iter()
            .find(|r| r.matches(host, port))
            .map(|r| format!("net:{}", r.written))
            .unwrap_or_default()
    }
}

impl Rule {
    /// Whether it names `host` (normalized) on `port`.
    pub(super) fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            None => port == 80 || port == 443,
            Some(p) => p == port,
        };
        port_ok
            && match &self.host {
                HostPattern::Exact(name) => name == host,
                HostPattern::Below(suffix) => {
                    host.parse::<IpAddr>().is_err()
                        && host.len() > suffix.len() + 1
                        && host.ends_with(suffix.as_str())
                        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                }
            }
    }
}

/// One grant entry as a rule; `None` when it is no proxy entry.
pub(super) fn parse_rule(entry: &str) -> Option<Rule> {
    let entry = entry.trim();
    if entry == "*" {
        return None;
    }
    if let Some((host, rest)) = entry.split_once(char::is_whitespace) {
        let request = yep_store::grants::RequestRule::parse(rest)?;
        let mut rule = parse_rule(host)?;
        rule.request = Some(request);
        rule.written = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        return Some(rule);
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
            request: None,
            written: entry.to_string(),
        });
    }
    let host = normalize_host(host)?;
    Some(Rule {
        host: HostPattern::Exact(host),
        port,
        request: None,
        written: entry.to_string(),
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
pub(super) fn normalize_host(host: &str) -> Option<String> {
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
pub(super) fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Untrusted text for a message: escaped, and cut to [`MAX_SHOWN_CHARS`].
pub(super) fn shown(text: &str) -> String {
    let escaped = yep_store::text::escape(text);
    match escaped.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped.into_owned(),
    }
}

/// The grant that names `host` on `port`: `net:host` for the web's ports, else with the
/// port (an IPv6 address in brackets).
fn host_grant(host: &str, port: u16) -> String {
    match (port, host.contains(':')) {
        (80 | 443, true) => format!("net:[{host}]"),
        (80 | 443, false) => format!("net:{host}"),
        _ => format!("net:{}", target(host, port)),
    }
}

/// What to do to keep a host's TLS end to end, for what made the proxy terminate it.
fn how_to_keep_connect(because: &str) -> &'static str {
    match because.starts_with("the brokered secret") {
        true => {
            "give the secret in the environment instead (`yep secret set <extension> <field> --in-env`), which lets the process hold its value"
        }
        false => {
            "grant the host without a request rule (`yep grant <extension> net:<host>`), which lets every request through"
        }
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
    /// What was refused of a host the grants name; [`Reason::Host`] when the host itself.
    pub reason: Reason,
}

/// What a refusal refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The host (or what it resolves to): no grant names it.
    Host,
    /// A request the host's request rules do not let through: its method and path, and the
    /// rules as written.
    Request {
        method: String,
        path: String,
        rules: String,
    },
    /// A request that carries the placeholder of brokered secret `secret` to a host it does
    /// not belong to.
    Placeholder { secret: String },
    /// The client refused the certificate yep showed it for a host whose TLS the proxy
    /// terminates (for `because`): it pins certificates, or does not read the trust
    /// variables.
    Certificate { because: String },
}

impl Reason {
    /// A small number per kind, so each kind of refusal of one host is told once.
    pub(super) fn kind(&self) -> u8 {
        match self {
            Reason::Host => 0,
            Reason::Request { .. } => 1,
            Reason::Placeholder { .. } => 2,
            Reason::Certificate { .. } => 3,
        }
    }
}

impl Refusal {
    /// A granted `host` that resolves to `ip`, of `kind`: `net:private` would allow it, or,
    /// for an address no name may reach, the address itself as a grant.
    pub(super) fn resolved(
        package: &str,
        host: &str,
        port: u16,
        ip: IpAddr,
        kind: Guarded,
    ) -> Refusal {
        let grant = match kind.is_private() {
            true => format!("net:{}", yep_store::grants::PRIVATE),
            false => format!("net:{}", target(&ip.to_string(), port)),
        };
        Refusal {
            package: package.to_string(),
            host: host.to_string(),
            port,
            grant,
            resolved: Some((ip, kind)),
            reason: Reason::Host,
        }
    }

    /// A refusal of `host:port` for `reason`, whose grant, if any, is `grant`.
    pub(super) fn of(package: &str, host: &str, port: u16, reason: Reason) -> Refusal {
        let grant = match &reason {
            Reason::Request { method, path, .. } => {
                format!("{} {method} {}", host_grant(host, port), shown(path))
            }
            _ => String::new(),
        };
        Refusal {
            package: package.to_string(),
            host: host.to_string(),
            port,
            grant,
            resolved: None,
            reason,
        }
    }

    pub(super) fn new(package: &str, host: &str, port: u16) -> Refusal {
        Refusal {
            grant: host_grant(host, port),
            ..Refusal::of(package, host, port, Reason::Host)
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asked = shown(&target(&self.host, self.port));
        let package = shown(&self.package);
        let grant = shown(&self.grant);
        match &self.reason {
            Reason::Host => {}
            Reason::Request {
                method,
                path,
                rules,
            } => {
                return write!(
                    f,
                    "yep's sandbox refused {} {} on {asked} for package {package}: its grants let through only `{}` there; the grant `{grant}` would allow it",
                    shown(method),
                    shown(path),
                    shown(rules)
                );
            }
            Reason::Placeholder { secret } => {
                return write!(
                    f,
                    "yep's sandbox refused a request to {asked} for package {package}: it carries the placeholder of the brokered secret `{}`, which belongs to other hosts (the secret was not sent)",
                    shown(secret)
                );
            }
            Reason::Certificate { because } => {
                return write!(
                    f,
                    "a client of package {package} refused yep's certificate for {asked}: it pins certificates, or does not read the trust variables yep sets (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO). yep terminates TLS to this host for {}; to keep plain CONNECT for it, {}",
                    shown(because),
                    how_to_keep_connect(because)
                );
            }
        }
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
