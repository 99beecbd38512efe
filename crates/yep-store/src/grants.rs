//! Sandbox grants: what a package or server may reach beyond the sandbox's default profile.
//!
//! A YEP package asks for them in `plugin.json` (a top-level `sandbox` key, which yolop
//! ignores); the user gives any package or MCP server more with `yep grant` (kept in the
//! lock, see [`crate::lockfile::GrantPin`]). Either way each grant is shown before consent
//! and pinned.
//!
//! On the command line a grant is one token ([`SandboxGrants::parse`]):
//! `workspace:write`, `read:<path>`, `write:<path>`, `net:<entry>`, `processes:<n>`,
//! `open-files:<n>`, `address-space-mib:<n>`. A `net` entry is `*` (any TCP), a loopback or
//! IP address with a port (`127.0.0.1:8080`: that port, on any address, as the kernel's rules
//! know ports only), a host name (`api.github.com`, `*.context7.com`, `example.org:8443`)
//! reached through the host's egress proxy, which lets through only the names granted, or
//! `private`: the names granted may resolve to private and loopback addresses.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// A package's or server's sandbox grants (`"sandbox": {…}` in plugin.json): each widens the
/// default profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxGrants {
    /// `"write"` lets it write the workspace; `"read"` (the default) does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// More paths to read, absolute or under `~/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// More paths to read and write, absolute or under `~/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Network it may reach: see [`NetEntry`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    /// Higher limits than the default profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitGrants>,
}

/// Limits a package may ask for above the default profile's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitGrants {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space_mib: Option<u64>,
}

/// The most a package may ask for: past these, a grant is a mistake or an attack.
const MAX_GRANTED_PROCESSES: u64 = 65_536;
const MAX_GRANTED_OPEN_FILES: u64 = 1 << 20;
const MAX_GRANTED_ADDRESS_SPACE_MIB: u64 = 1 << 20;
/// The most paths or net entries one grant list holds.
const MAX_GRANT_ENTRIES: usize = 64;

/// One `net` entry, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetEntry<'a> {
    /// `*`: any TCP connection.
    Any,
    /// An address with a port (`127.0.0.1:8080`, `localhost:8080`, `[::1]:8080`): the port,
    /// on any address (the kernel's rules know ports, not addresses).
    Port(u16),
    /// A host name, reached through the egress proxy: `name` may start with `*.` (any name
    /// below it, not itself); without a port, 80 and 443. `rule`, when the entry has one,
    /// is its [`RequestRule`] as written (`GET,POST /repos/me/`).
    Host {
        name: &'a str,
        port: Option<u16>,
        rule: Option<&'a str>,
    },
    /// `private`: the host names granted may resolve to loopback and private addresses
    /// (RFC 1918, CGNAT, ULA, the machine's own); the proxy refuses those otherwise.
    Private,
}

impl NetEntry<'_> {
    /// Read a `net` entry; `None` when it is none of the four forms. A host name may be
    /// followed by a request rule (`api.github.com GET,POST /repos/me/`, see
    /// [`RequestRule`]); no other form may.
    pub fn parse(entry: &str) -> Option<NetEntry<'_>> {
        let entry = entry.trim();
        if let Some((host, rest)) = entry.split_once(char::is_whitespace) {
            let rest = rest.trim();
            RequestRule::parse(rest)?;
            return match NetEntry::parse(host)? {
                NetEntry::Host { name, port, .. } => Some(NetEntry::Host {
                    name,
                    port,
                    rule: Some(rest),
                }),
                _ => None,
            };
        }
        if entry == "*" {
            return Some(NetEntry::Any);
        }
        if entry == PRIVATE {
            return Some(NetEntry::Private);
        }
        // `[v6]:port`
        if let Some(rest) = entry.strip_prefix('[') {
            let (addr, port) = rest.split_once("]:")?;
            addr.parse::<std::net::Ipv6Addr>().ok()?;
            return port_of(port).map(NetEntry::Port);
        }
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port_of(port)?)),
            None => (entry, None),
        };
        if host.parse::<std::net::IpAddr>().is_ok() || host.eq_ignore_ascii_case("localhost") {
            return port.map(NetEntry::Port);
        }
        let name = host.strip_prefix("*.").unwrap_or(host);
        let labels: Vec<&str> = name.split('.').collect();
        let valid = name.len() <= 253
            && labels.iter().all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
            // A wildcard needs a name of two labels or more beneath it (never `*.com`).
            && (name.len() == host.len() || labels.len() >= 2);
        valid.then_some(NetEntry::Host {
            name: host,
            port,
            rule: None,
        })
    }
}

/// What requests a host's `net` entry lets through, when it names more than the host:
/// methods, then path prefixes, after the host and a space:
/// `api.github.com GET,POST /repos/me/ /user` lets `GET` and `POST` to paths under
/// `/repos/me/` or `/user`; `*` (or no methods) is any method, and no prefix is any path.
/// The egress proxy can see a request only over plain HTTP or where it terminates TLS, so a
/// host with a rule is always terminated. Several entries for one host let through what any
/// of them does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRule {
    /// Upper-case methods; empty is any.
    pub methods: Vec<String>,
    /// Path prefixes, each starting with `/`; empty is any.
    pub prefixes: Vec<String>,
}

/// The most methods and path prefixes one rule names.
const MAX_RULE_PARTS: usize = 16;

impl RequestRule {
    /// Read the text after an entry's host; `None` when it is not `[METHODS|*] [/prefix…]`
    /// with at least one of them.
    pub fn parse(text: &str) -> Option<RequestRule> {
        let mut words = text.split_whitespace().peekable();
        let mut methods = Vec::new();
        match words.peek() {
            Some(&"*") => {
                words.next();
            }
            Some(w) if !w.starts_with('/') => {
                for m in w.split(',') {
                    let valid =
                        !m.is_empty() && m.len() <= 16 && m.bytes().all(|b| b.is_ascii_uppercase());
                    if !valid {
                        return None;
                    }
                    methods.push(m.to_string());
                }
                words.next();
            }
            _ => {}
        }
        let mut prefixes = Vec::new();
        for w in words {
            let valid = w.starts_with('/')
                && w.len() <= 512
                && !w.split('/').any(|seg| seg == ".." || seg == ".")
                && !w.contains(['%', '?', '#', '\\'])
                && w.bytes().all(|b| b.is_ascii_graphic());
            if !valid {
                return None;
            }
            prefixes.push(w.to_string());
        }
        let parts = methods.len() + prefixes.len();
        (!text.trim().is_empty() && parts <= MAX_RULE_PARTS)
            .then_some(RequestRule { methods, prefixes })
    }

    /// Whether it lets `method` to `path` (the request's path, without its query) through.
    /// A path with a `.` or `..` segment, an encoded byte, or a backslash never matches a
    /// prefix: what the origin makes of it is not what the rule names.
    pub fn allows(&self, method: &str, path: &str) -> bool {
        let method_ok = self.methods.is_empty() || self.methods.iter().any(|m| m == method);
        let path_ok = self.prefixes.is_empty()
            || (path.starts_with('/')
                && !path.contains(['%', '\\'])
                && !path.split('/').any(|seg| seg == ".." || seg == ".")
                && self.prefixes.iter().any(|p| path.starts_with(p.as_str())));
        method_ok && path_ok
    }
}

/// The `net` entry that lets granted names resolve to private and loopback addresses.
pub const PRIVATE: &str = "private";

fn port_of(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p > 0)
}

/// Why a grant was refused: its text names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidGrant(pub String);

impl SandboxGrants {
    pub fn is_empty(&self) -> bool {
        *self == SandboxGrants::default()
    }

    /// Each grant as a person reads it (`workspace write`, `read ~/.config/gh`, `net any`,
    /// `net port 8080`, `net api.github.com`, `limit processes 1024`): what the install
    /// summary lists and an update's diff compares.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.writes_workspace() {
            out.push("workspace write".to_string());
        }
        out.extend(self.read.iter().map(|p| format!("read {p}")));
        out.extend(self.write.iter().map(|p| format!("write {p}")));
        for n in &self.net {
            out.push(match NetEntry::parse(n) {
                Some(NetEntry::Any) => "net any".to_string(),
                Some(NetEntry::Port(port)) => format!("net port {port}"),
                Some(NetEntry::Private) => "net private addresses".to_string(),
                _ => format!("net {n}"),
            });
        }
        for (what, v) in self.limit_values() {
            out.push(format!("limit {what} {v}"));
        }
        out
    }

    /// Each grant as `yep grant` takes it ([`SandboxGrants::parse`]).
    pub fn tokens(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.writes_workspace() {
            out.push("workspace:write".to_string());
        }
        out.extend(self.read.iter().map(|p| format!("read:{p}")));
        out.extend(self.write.iter().map(|p| format!("write:{p}")));
        out.extend(self.net.iter().map(|n| format!("net:{n}")));
        for (what, v) in self.limit_values() {
            out.push(format!("{}:{v}", what.replace('_', "-")));
        }
        out
    }

    /// A warning for each `write:` grant that names a protected workspace path
    /// ([`PROTECTED_WORKSPACE`]): granted, it lets the server write what runs outside its
    /// sandbox.
    pub fn warnings(&self) -> Vec<String> {
        self.write
            .iter()
            .filter_map(|p| {
                let name = protected_name(Path::new(p))?;
                Some(format!(
                    "warning: write {} lifts the protection of {name}: what the server writes there can run outside its sandbox",
                    crate::text::escape(p)
                ))
            })
            .collect()
    }

    fn limit_values(&self) -> Vec<(&'static str, u64)> {
        let Some(l) = &self.limits else {
            return Vec::new();
        };
        [
            ("processes", l.processes),
            ("open_files", l.open_files),
            ("address_space_mib", l.address_space_mib),
        ]
        .into_iter()
        .filter_map(|(what, v)| v.map(|v| (what, v)))
        .collect()
    }

    pub fn writes_workspace(&self) -> bool {
        self.workspace.as_deref() == Some("write")
    }

    /// The ports its `net` grants open to any address; `None` when one grants any TCP.
    pub fn net_ports(&self) -> Option<Vec<u16>> {
        let mut ports = Vec::new();
        for n in &self.net {
            match NetEntry::parse(n) {
                Some(NetEntry::Any) => return None,
                Some(NetEntry::Port(p)) => ports.push(p),
                _ => {}
            }
        }
        Some(ports)
    }

    /// Its `net` entries that name hosts: reached through the egress proxy.
    pub fn net_hosts(&self) -> Vec<&str> {
        self.net
            .iter()
            .filter(|n| matches!(NetEntry::parse(n), Some(NetEntry::Host { .. })))
            .map(String::as_str)
            .collect()
    }

    /// One grant as typed on the command line (`workspace:write`, `read:~/.config/gh`,
    /// `net:api.github.com`, `processes:2048`…), checked as a manifest's are.
    pub fn parse(token: &str) -> Result<SandboxGrants, InvalidGrant> {
        let (kind, value) = token.split_once(':').ok_or_else(|| {
            InvalidGrant(format!(
                "grant {:?} is not <kind>:<value> ({})",
                crate::text::escape(token),
                GRANT_FORMS
            ))
        })?;
        let mut g = SandboxGrants::default();
        let number = |v: &str| {
            v.parse::<u64>().map_err(|_| {
                InvalidGrant(format!(
                    "grant {}: {:?} is not a number",
                    crate::text::escape(kind),
                    crate::text::escape(v)
                ))
            })
        };
        match kind {
            "workspace" => g.workspace = Some(value.to_string()),
            "read" => g.read.push(value.to_string()),
            "write" => g.write.push(value.to_string()),
            "net" => g.net.push(value.to_string()),
            "processes" => {
                g.limits = Some(LimitGrants {
                    processes: Some(number(value)?),
                    ..LimitGrants::default()
                })
            }
            "open-files" => {
                g.limits = Some(LimitGrants {
                    open_files: Some(number(value)?),
                    ..LimitGrants::default()
                })
            }
            "address-space-mib" => {
                g.limits = Some(LimitGrants {
                    address_space_mib: Some(number(value)?),
                    ..LimitGrants::default()
                })
            }
            other => {
                return Err(InvalidGrant(format!(
                    "no grant kind {:?} ({})",
                    crate::text::escape(other),
                    GRANT_FORMS
                )));
            }
        }
        if g.workspace.as_deref() == Some("read") {
            return Err(InvalidGrant(
                "workspace:read is the default profile: nothing to grant (workspace:write widens it)"
                    .into(),
            ));
        }
        g.validate().map_err(InvalidGrant)?;
        Ok(g)
    }

    /// Everything either grants: the union of paths and net entries, the higher of limits.
    pub fn merged(&self, other: &SandboxGrants) -> SandboxGrants {
        let union = |a: &Vec<String>, b: &Vec<String>| {
            let mut out = a.clone();
            out.extend(b.iter().filter(|x| !a.contains(x)).cloned());
            out
        };
        let limits = match (&self.limits, &other.limits) {
            (None, None) => None,
            (a, b) => {
                let (a, b) = (a.clone().unwrap_or_default(), b.clone().unwrap_or_default());
                let max = |x: Option<u64>, y: Option<u64>| x.max(y);
                Some(LimitGrants {
                    processes: max(a.processes, b.processes),
                    open_files: max(a.open_files, b.open_files),
                    address_space_mib: max(a.address_space_mib, b.address_space_mib),
                })
            }
        };
        SandboxGrants {
            workspace: (self.writes_workspace() || other.writes_workspace())
                .then(|| "write".to_string()),
            read: union(&self.read, &other.read),
            write: union(&self.write, &other.write),
            net: union(&self.net, &other.net),
            limits,
        }
    }

    /// These grants less `other`'s: each path, net entry and limit it names taken away
    /// (a limit by kind, whatever its value), and the workspace back to read.
    pub fn without(&self, other: &SandboxGrants) -> SandboxGrants {
        let less = |a: &Vec<String>, b: &Vec<String>| {
            a.iter().filter(|x| !b.contains(x)).cloned().collect()
        };
        let limits = self.limits.as_ref().map(|l| {
            let o = other.limits.clone().unwrap_or_default();
            LimitGrants {
                processes: l.processes.filter(|_| o.processes.is_none()),
                open_files: l.open_files.filter(|_| o.open_files.is_none()),
                address_space_mib: l
                    .address_space_mib
                    .filter(|_| o.address_space_mib.is_none()),
            }
        });
        SandboxGrants {
            workspace: self.workspace.clone().filter(|_| !other.writes_workspace()),
            read: less(&self.read, &other.read),
            write: less(&self.write, &other.write),
            net: less(&self.net, &other.net),
            limits: limits.filter(|l| *l != LimitGrants::default()),
        }
    }

    /// The lines of `new` that these grants do not hold: what approving it would add.
    pub fn widened_by(&self, new: &SandboxGrants) -> Vec<String> {
        // Limits compare by value (a lower one adds nothing); the rest line by line.
        let unlimited = |g: &SandboxGrants| {
            SandboxGrants {
                limits: None,
                ..g.clone()
            }
            .lines()
        };
        let old = unlimited(self);
        let old_limits = self.limit_values();
        let mut out: Vec<String> = unlimited(new)
            .into_iter()
            .filter(|l| !old.contains(l))
            .collect();
        for (what, v) in new.limit_values() {
            if old_limits.iter().all(|(w, o)| *w != what || *o < v) {
                out.push(format!("limit {what} {v}"));
            }
        }
        out
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        match self.workspace.as_deref() {
            None | Some("read") | Some("write") => {}
            Some(other) => {
                return Err(format!(
                    "sandbox.workspace {:?} is neither \"read\" nor \"write\"",
                    crate::text::escape(other)
                ));
            }
        }
        for (kind, paths) in [("read", &self.read), ("write", &self.write)] {
            if paths.len() > MAX_GRANT_ENTRIES {
                return Err(format!(
                    "sandbox.{kind} lists {} paths; at most {MAX_GRANT_ENTRIES}",
                    paths.len()
                ));
            }
            for p in paths {
                let rest = p.strip_prefix("~/").unwrap_or(p);
                let plain = (p.starts_with('/') || p.starts_with("~/"))
                    && !p.chars().any(char::is_control)
                    && !Path::new(rest)
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir));
                if !plain || p == "/" || p == "~/" {
                    return Err(format!(
                        "sandbox.{kind} path {:?} must be absolute or start with ~/, name something below the root or the home, and have no `..`",
                        crate::text::escape(p)
                    ));
                }
            }
        }
        if self.net.len() > MAX_GRANT_ENTRIES {
            return Err(format!(
                "sandbox.net lists {} entries; at most {MAX_GRANT_ENTRIES}",
                self.net.len()
            ));
        }
        if let Some(n) = self.net.iter().find(|n| NetEntry::parse(n).is_none()) {
            return Err(format!(
                "sandbox.net entry {:?} is none of \"*\", \"<address>:<port>\" (127.0.0.1:8080), a host name (api.github.com, *.example.com, example.org:8443), perhaps with a request rule (\"api.github.com GET,POST /repos/me/\") or \"private\"",
                crate::text::escape(n)
            ));
        }
        for (what, v) in self.limit_values() {
            let max = match what {
                "processes" => MAX_GRANTED_PROCESSES,
                "open_files" => MAX_GRANTED_OPEN_FILES,
                _ => MAX_GRANTED_ADDRESS_SPACE_MIB,
            };
            if !(1..=max).contains(&v) {
                return Err(format!("sandbox.limits.{what} {v} is outside 1 to {max}"));
            }
        }
        Ok(())
    }
}

/// The paths of a workspace, relative to its root, that run code outside the sandbox when
/// written: git's hooks and its config (which names programs git runs), the settings of agents
/// and editors (`.mcp.json`, `.claude/` and the like start servers and hooks), direnv's
/// `.envrc` and shell rc files. Even `workspace:write` does not let a sandboxed server write
/// them; a `write:` grant that names one by its absolute path lifts that one alone
/// (docs/sandbox.md, "Protected workspace files").
pub const PROTECTED_WORKSPACE: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".mcp.json",
    ".claude",
    ".codex",
    ".cursor",
    ".vscode",
    ".zot",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
];

/// The entry of [`PROTECTED_WORKSPACE`] that `path` ends with (`/src/app/.vscode` is
/// `.vscode`), if any: a `write:` grant of it is shown with a warning.
pub fn protected_name(path: &Path) -> Option<&'static str> {
    PROTECTED_WORKSPACE
        .iter()
        .copied()
        .find(|name| path.ends_with(name))
}

/// The grant forms, for errors.
const GRANT_FORMS: &str = "workspace:write, read:<path>, write:<path>, net:<* | address:port | host name [METHODS] [/prefix…] | private>, processes:<n>, open-files:<n>, address-space-mib:<n>";

/// The path a `read:` or `write:` grant names, as the sandbox opens it: `~/` is the home.
/// `None` for `~/` with no home.
pub fn grant_path(written: &str) -> Option<std::path::PathBuf> {
    match written.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(rest)),
        None => Some(std::path::PathBuf::from(written)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_entries_are_read_as_any_a_port_or_a_host_name() {
        let cases = [
            ("*", Some(NetEntry::Any)),
            ("127.0.0.1:8080", Some(NetEntry::Port(8080))),
            ("localhost:9", Some(NetEntry::Port(9))),
            ("[::1]:443", Some(NetEntry::Port(443))),
            (
                "api.github.com",
                Some(NetEntry::Host {
                    name: "api.github.com",
                    port: None,
                    rule: None,
                }),
            ),
            (
                "*.context7.com",
                Some(NetEntry::Host {
                    name: "*.context7.com",
                    port: None,
                    rule: None,
                }),
            ),
            (
                "example.org:8443",
                Some(NetEntry::Host {
                    name: "example.org",
                    port: Some(8443),
                    rule: None,
                }),
            ),
            ("private", Some(NetEntry::Private)),
            (
                "api.github.com GET,POST /repos/me/",
                Some(NetEntry::Host {
                    name: "api.github.com",
                    port: None,
                    rule: Some("GET,POST /repos/me/"),
                }),
            ),
            (
                "example.org:8443  * /v1/ /v2/",
                Some(NetEntry::Host {
                    name: "example.org",
                    port: Some(8443),
                    rule: Some("* /v1/ /v2/"),
                }),
            ),
            ("api.github.com get", None),
            ("api.github.com GET /a/../b", None),
            ("api.github.com GET /a%2f", None),
            ("api.github.com GET repos", None),
            ("* GET", None),
            ("private GET", None),
            ("127.0.0.1:80 GET", None),
            ("127.0.0.1", None),
            ("localhost", None),
            ("*.com", None),
            ("*", Some(NetEntry::Any)),
            ("a..b", None),
            ("-a.b", None),
            ("a.b:0", None),
            ("a.b:99999", None),
            ("a b.c", None),
            ("[::1]", None),
            ("", None),
        ];
        for (entry, want) in cases {
            assert_eq!(NetEntry::parse(entry), want, "{entry}");
        }
    }

    #[test]
    fn a_grant_token_parses_to_the_grant_and_back() {
        for token in [
            "workspace:write",
            "read:~/.config/gh",
            "write:/var/tmp/cache",
            "net:*",
            "net:127.0.0.1:8080",
            "net:api.github.com",
            "net:private",
            "processes:2048",
            "open-files:16384",
            "address-space-mib:131072",
        ] {
            let g = SandboxGrants::parse(token).unwrap();
            assert_eq!(g.tokens(), vec![token.to_string()], "{token}");
        }
        for (token, said) in [
            ("workspace", "is not <kind>:<value>"),
            ("workspace:read", "nothing to grant"),
            ("workspace:own", "neither \"read\" nor \"write\""),
            ("read:relative", "must be absolute"),
            ("net:a b", "is none of"),
            ("processes:lots", "is not a number"),
            ("processes:0", "outside 1 to 65536"),
            ("root:yes", "no grant kind"),
        ] {
            let err = SandboxGrants::parse(token).unwrap_err().to_string();
            assert!(err.contains(said), "{token}: {err}");
        }
    }

    #[test]
    fn grants_merge_take_away_and_say_what_widens() {
        let a = SandboxGrants::parse("read:/a")
            .unwrap()
            .merged(&SandboxGrants::parse("processes:1024").unwrap());
        let b = SandboxGrants::parse("workspace:write")
            .unwrap()
            .merged(&SandboxGrants::parse("read:/a").unwrap())
            .merged(&SandboxGrants::parse("processes:2048").unwrap());
        let both = a.merged(&b);
        assert_eq!(
            both.lines(),
            ["workspace write", "read /a", "limit processes 2048"]
        );
        assert_eq!(
            a.widened_by(&both),
            ["workspace write", "limit processes 2048"]
        );
        assert!(both.widened_by(&a).is_empty());
        let less = both.without(&SandboxGrants::parse("processes:1").unwrap());
        assert_eq!(less.lines(), ["workspace write", "read /a"]);
        let none = less
            .without(&SandboxGrants::parse("workspace:write").unwrap())
            .without(&SandboxGrants::parse("read:/a").unwrap());
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn ports_and_hosts_are_told_apart() {
        let g = SandboxGrants {
            net: vec![
                "127.0.0.1:8080".into(),
                "api.github.com".into(),
                "*.context7.com".into(),
                "private".into(),
            ],
            ..SandboxGrants::default()
        };
        assert_eq!(g.net_ports(), Some(vec![8080]));
        assert_eq!(g.net_hosts(), ["api.github.com", "*.context7.com"]);
        assert_eq!(
            g.lines(),
            [
                "net port 8080",
                "net api.github.com",
                "net *.context7.com",
                "net private addresses"
            ]
        );
        let any = SandboxGrants::parse("net:*").unwrap().merged(&g);
        assert_eq!(any.net_ports(), None);
    }

    #[test]
    fn request_rules_let_through_their_methods_and_paths_only() {
        let rule = RequestRule::parse("GET,POST /repos/me/ /user").unwrap();
        assert!(rule.allows("GET", "/repos/me/x/issues"));
        assert!(rule.allows("POST", "/user"));
        assert!(!rule.allows("DELETE", "/repos/me/x"));
        assert!(!rule.allows("GET", "/repos/other/x"));
        assert!(!rule.allows("GET", "/repos/me/../other/x"));
        assert!(!rule.allows("GET", "/repos/me/%2e%2e/other"));
        assert!(!rule.allows("GET", "/repos/me/./x"));
        assert!(!rule.allows("GET", "repos/me/"));
        let any_path = RequestRule::parse("GET").unwrap();
        assert!(any_path.allows("GET", "/anything/%20"));
        assert!(!any_path.allows("PUT", "/"));
        let any_method = RequestRule::parse("* /v1/").unwrap();
        assert!(any_method.allows("PATCH", "/v1/x"));
        assert!(RequestRule::parse("").is_none());
        assert!(RequestRule::parse("*").is_some());
    }

    #[test]
    fn a_write_grant_naming_a_protected_path_is_warned_of_and_no_other() {
        let g = SandboxGrants {
            write: vec![
                "/srv/ws/.vscode".into(),
                "/srv/ws/.git/hooks".into(),
                "~/.bashrc".into(),
                "/srv/ws/.git".into(),
                "/srv/ws/vscode".into(),
            ],
            read: vec!["/srv/ws/.envrc".into()],
            ..SandboxGrants::default()
        };
        let warned = g.warnings();
        assert_eq!(warned.len(), 3, "{warned:?}");
        for (w, name) in warned.iter().zip([".vscode", ".git/hooks", ".bashrc"]) {
            assert!(w.contains(&format!("protection of {name}:")), "{w}");
        }
    }
}
