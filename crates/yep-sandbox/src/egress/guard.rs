//! Addresses a granted name may not reach ([`Guarded`]), and looking names up so that a name
//! cannot be re-pointed between the check and the connection ([`Resolver`]).

use super::*;

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
    pub(super) fn of(ip: IpAddr) -> Option<Guarded> {
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
pub(super) struct OwnAddresses(Option<Vec<IpAddr>>);

impl OwnAddresses {
    pub(super) fn contains(&mut self, ip: IpAddr) -> bool {
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
    pub(super) fixed: Arc<HashMap<String, IpAddr>>,
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
    pub(super) async fn connect(
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
