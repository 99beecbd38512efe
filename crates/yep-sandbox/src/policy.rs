//! The policy as plain data: what a sandboxed process may reach ([`Profile`]), made from where
//! it runs ([`Place`]) and what the user granted, and said back to the user.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::*;

/// TCP a sandboxed process may connect to.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Net {
    /// None at all.
    #[default]
    None,
    /// These ports, on any address.
    Ports(Vec<u16>),
    /// Any.
    Any,
}

/// Limits on a sandboxed process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// Processes and threads in the server's cgroup (`pids.max`), where the host has one.
    pub processes: u64,
    /// `RLIMIT_AS`, in bytes.
    pub address_space: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            open_files: 4096,
            processes: 512,
            // Generous: runtimes reserve far more address space than they use (V8, Go).
            address_space: 64 << 30,
        }
    }
}

/// What a sandboxed process may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Profile {
    /// Read and execute beneath each.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath each.
    pub write: Vec<PathBuf>,
    pub net: Net,
    /// Host names it may reach through the host's egress proxy (`api.github.com`,
    /// `*.context7.com`, `example.org:8443`): its only way out by name.
    pub egress: Vec<String>,
    /// The other `net` grants its proxy decides by: `private` (granted names may resolve to
    /// private and loopback addresses) and addresses with a port (`10.1.2.3:5432`), which
    /// it may also be asked for by address.
    pub egress_also: Vec<String>,
    /// The port of its egress proxy on 127.0.0.1, once started: it may connect there. Kept
    /// apart from `net`, since it changes at each start and is never shown.
    pub proxy: Option<u16>,
    pub limits: Limits,
    /// What of the workspace it may read (and write, with `workspace:write`): all of it, or
    /// all but the yep homes it holds ([`workspace_access`]).
    pub workspace: Vec<PathBuf>,
    /// The workspace, when none of it was opened because it holds what no server may read
    /// (the home, credentials): why, as a clause ("is your home directory").
    pub withheld: Option<(PathBuf, String)>,
    /// Directories in which it may make, read, write and remove regular files, and nothing
    /// else (no directory, link or program): a zot extension's `<workspace>/.zot`
    /// ([`own_files`]).
    pub files: Vec<PathBuf>,
    /// Its [`Place::files`] directory, when it was not opened: why, as a clause ("holds
    /// extensions, a directory").
    pub files_withheld: Option<(PathBuf, String)>,
    /// The protected paths of the workspace that exist ([`protected_paths`]), less those a
    /// `write:` grant names: what no write rule opens. Those its write rules reach
    /// ([`Profile::read_only`]) are mounted read-only in its own mount namespace.
    pub protected: Vec<PathBuf>,
}

/// The system's own directories, read-only: programs, libraries, configuration.
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/snap",
    "/sys",
];

/// What of `/proc` a sandboxed process reads: the system's entries (`cpuinfo`, `meminfo`,
/// `sys`…), never another process's directory (the host's `environ` holds the user's
/// tokens). Its own (`/proc/self`) is added in the child, where `self` is the child
/// ([`Prepared::apply`]).
/// Listed once: the system's entries stay put, while listing `/proc` reads one entry per
/// process on the machine.
pub(crate) fn proc_entries() -> &'static [PathBuf] {
    static ENTRIES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                !(name.bytes().all(|b| b.is_ascii_digit())
                    || name == "self"
                    || name == "thread-self")
            })
            .map(|e| e.path())
            .collect()
    })
}

/// Devices any program expects to open for writing. No terminal: a server that could open
/// `/dev/tty` could draw on the user's screen past every escape, or push keystrokes at it.
pub(crate) const DEVICES_WRITE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/shm",
];

/// Where a sandboxed process runs and what it runs: the inputs of its default profile.
#[derive(Clone, Debug)]
pub struct Place<'a> {
    /// The program as resolved for the spawn.
    pub program: &'a Path,
    pub args: &'a [String],
    /// The package's own files: read, never written.
    pub package_dir: Option<&'a Path>,
    /// Its state: read and write.
    pub data_dir: Option<&'a Path>,
    /// The user's workspace: read.
    pub workspace: Option<&'a Path>,
    /// Its private temp dir: read and write.
    pub tmp_dir: &'a Path,
    /// A directory of the workspace whose regular files it may keep ([`own_files`]).
    pub files: Option<&'a Path>,
}

impl Profile {
    /// The profile with no grants: the system and the toolchain the program runs on, read;
    /// the package and the workspace, read; the data dir and the private temp dir, read and
    /// write; no network; the rest of `$HOME` (the yep home included) and other packages,
    /// nothing.
    pub fn default_for(place: &Place) -> Profile {
        let (tools_read, tools_write) = toolchain(place.program);
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(proc_entries().iter().cloned());
        read.extend(tools_read);
        read.extend(place.package_dir.map(Path::to_path_buf));
        // A workspace that holds the home (an agent started in `~` or `/`) or a credentials
        // directory would open them all: none of it is granted. One that holds a yep home is
        // granted all but that home.
        let (workspace, withheld) = match place.workspace.map(workspace_access) {
            None => (Vec::new(), None),
            Some(WorkspaceAccess::Whole(_)) => (
                place.workspace.into_iter().map(Path::to_path_buf).collect(),
                None,
            ),
            Some(WorkspaceAccess::Parts(parts, _)) => (parts, None),
            Some(WorkspaceAccess::Nothing(why)) => {
                (Vec::new(), place.workspace.map(|w| (w.to_path_buf(), why)))
            }
        };
        read.extend(workspace.iter().cloned());
        // A file its command line names (`python3 /srv/server.py`): what was approved runs.
        // Never the root, the home or a directory holding the home: a command line that
        // names one (`srv.py /root`) would open everything the profile keeps out.
        let named: Vec<&Path> = place
            .args
            .iter()
            .map(Path::new)
            .filter(|p| p.is_absolute() && p.exists())
            .collect();
        read.extend(
            named
                .iter()
                .filter(|p| !holds_home(p))
                .map(|p| p.to_path_buf()),
        );
        // The install the program, or a file its command line names (`node /x/node_modules/
        // pkg/dist/index.js`), belongs to: a tree of modules or a venv is read whole.
        let home = real_home();
        for path in std::iter::once(place.program).chain(named) {
            read.extend(install_roots(path, home.as_deref()));
        }
        let mut write: Vec<PathBuf> = DEVICES_WRITE.iter().map(PathBuf::from).collect();
        write.extend(tools_write);
        write.push(place.tmp_dir.to_path_buf());
        write.extend(place.data_dir.map(Path::to_path_buf));
        // Only in a workspace opened whole: one held back, or opened in parts, is not the
        // place to make anything.
        let whole = !workspace.is_empty() && withheld.is_none() && place.workspace.is_some();
        let (files, files_withheld) = match place.files {
            Some(dir) if whole => match own_files(dir) {
                Ok(()) => (vec![dir.to_path_buf()], None),
                Err(why) => (Vec::new(), Some((dir.to_path_buf(), why.to_string()))),
            },
            _ => (Vec::new(), None),
        };
        // Judged from the workspace itself, opened whole or in parts: its root holds them.
        let mut protected = match workspace.is_empty() {
            true => Vec::new(),
            false => place.workspace.map(protected_paths).unwrap_or_default(),
        };
        // A zot extension's own files (`.zot`) stay its own: it writes them whatever else it
        // was granted, and protecting them from it would take away only its scratchpad.
        protected.retain(|p| !files.iter().any(|f| same_place(p, f)));
        Profile {
            read,
            write,
            net: Net::None,
            egress: Vec::new(),
            egress_also: Vec::new(),
            proxy: None,
            limits: Limits::default(),
            workspace,
            withheld,
            files,
            files_withheld,
            protected,
        }
    }

    /// The protected paths its write rules reach (`workspace:write`, or a `write:` grant of a
    /// directory that holds one): what is mounted read-only for it. Empty for a server that
    /// writes none of the workspace, which then pays nothing for them.
    pub fn read_only(&self) -> Vec<&PathBuf> {
        self.protected
            .iter()
            .filter(|p| self.write.iter().any(|w| p.starts_with(w)))
            .collect()
    }
}

impl Profile {
    /// This profile widened by what an approval grants: the workspace writable, more paths,
    /// TCP ports or any network, higher limits. A path under `~/` is the user's home.
    pub fn granted(mut self, grants: &yep_store::manifest::SandboxGrants) -> Profile {
        if grants.workspace.as_deref() == Some("write") {
            self.write.extend(self.workspace.iter().cloned());
        }
        self.read
            .extend(grants.read.iter().filter_map(|p| grant_path(p)));
        let written: Vec<PathBuf> = grants.write.iter().filter_map(|p| grant_path(p)).collect();
        // A grant that names a protected path lifts it, and only it.
        self.protected
            .retain(|p| !written.iter().any(|w| named_by(p, w)));
        self.write.extend(written);
        if !grants.net.is_empty() {
            self.net = match grants.net_ports() {
                None => Net::Any,
                Some(ports) => Net::Ports(ports),
            };
        }
        if self.net != Net::Any {
            self.egress = grants.net_hosts().into_iter().map(String::from).collect();
            self.egress_also = grants
                .net
                .iter()
                .filter(|n| {
                    use yep_store::grants::NetEntry;
                    match NetEntry::parse(n) {
                        Some(NetEntry::Private) => true,
                        // An address (not `localhost`) with a port.
                        Some(NetEntry::Port(_)) => !n.to_ascii_lowercase().starts_with("localhost"),
                        _ => false,
                    }
                })
                .cloned()
                .collect();
        }
        if let Some(l) = &grants.limits {
            let limits = &mut self.limits;
            limits.processes = l
                .processes
                .unwrap_or(limits.processes)
                .max(limits.processes);
            limits.open_files = l
                .open_files
                .unwrap_or(limits.open_files)
                .max(limits.open_files);
            limits.address_space = l
                .address_space_mib
                .map(|m| m << 20)
                .unwrap_or(limits.address_space)
                .max(limits.address_space);
        }
        self
    }
}

impl Profile {
    /// What it allows, in a clause: "lets it read its package, its toolchain and the
    /// workspace, and write only its data and temp dirs, with no network".
    pub fn said(&self, workspace: Option<&Path>) -> String {
        let writes_workspace = workspace.is_some()
            && !self.workspace.is_empty()
            && self.workspace.iter().all(|w| self.write.contains(w));
        let net = match (&self.net, self.egress.is_empty()) {
            (Net::Any, _) => "any network".to_string(),
            (Net::None, true) => "no network".to_string(),
            (Net::Ports(p), true) if p.is_empty() => "no network".to_string(),
            (Net::Ports(p), true) => format!("TCP to {}", ports(p)),
            (Net::Ports(p), false) if !p.is_empty() => format!(
                "TCP to {} and {} through yep's egress proxy",
                ports(p),
                self.egress.join(", ")
            ),
            (_, false) => format!("{} through yep's egress proxy", self.egress.join(", ")),
        };
        let workspace = match (writes_workspace, self.files.first()) {
            (true, _) => format!(
                "and write the workspace{}, its data and temp dirs",
                self.protected_said(workspace)
            ),
            (false, Some(files)) => format!(
                "and write only its data and temp dirs and files in {}",
                yep_store::text::escape(&files.display().to_string())
            ),
            (false, None) => "and write only its data and temp dirs".to_string(),
        };
        if let Some((_, why)) = &self.withheld {
            return format!(
                "lets it read its package and its toolchain (not the workspace, which {why}), {workspace}, with {net}"
            );
        }
        format!(
            "lets it read its package, its toolchain and the workspace, {workspace}, with {net}"
        )
    }

    /// The protected paths it may not write, as a clause after "the workspace": " but
    /// .git/hooks and .vscode", each relative to the workspace; past three, how many more.
    fn protected_said(&self, workspace: Option<&Path>) -> String {
        let names: Vec<String> = self
            .read_only()
            .iter()
            .map(|p| {
                let shown = workspace
                    .and_then(|w| p.strip_prefix(w.canonicalize().unwrap_or(w.into())).ok())
                    .unwrap_or(p);
                yep_store::text::escape(&shown.display().to_string()).into_owned()
            })
            .collect();
        const SHOWN: usize = 3;
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => format!(" but {last}"),
            Some((last, rest)) if names.len() <= SHOWN => {
                format!(" but {} and {last}", rest.join(", "))
            }
            Some(_) => format!(
                " but {} and {} more protected paths (docs/sandbox.md)",
                names[..SHOWN].join(", "),
                names.len() - SHOWN
            ),
        }
    }

    /// The grant that would likely let through the denial a server's last stderr lines
    /// report, as `yep grant` takes it: `workspace:write`, `write:<dir>`, `read:<path>` from
    /// the path the message names (`Permission denied: '/x'`, `EACCES: …, open '/x'`,
    /// `open /x: permission denied`), `net:<address>:<port>` from a refused connect
    /// (`connect EACCES 127.0.0.1:8080`). `None` when no line names what was denied.
    pub fn suggest_grant(&self, workspace: Option<&Path>, tail: &[String]) -> Option<String> {
        let denials = tail.iter().rev().filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("permission denied")
                || l.contains("eacces")
                || l.contains("read-only file system")
                || l.contains("erofs")
        });
        for line in denials {
            if let Some(addr) = line
                .split("connect EACCES ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .filter(|a| yep_store::grants::NetEntry::parse(a).is_some())
            {
                return Some(format!("net:{addr}"));
            }
            // A quoted path is the one denied (`python3: can't open file '/x'`); else the
            // first bare one (`sh: 1: cannot create /x: Permission denied`).
            let words: Vec<&str> = line
                .split_whitespace()
                .map(|w| w.trim_end_matches([':', ',', ';', ')']))
                .collect();
            let quoted = words.iter().find_map(|w| {
                let bare = w.trim_matches(['\'', '"', '`']);
                (bare.len() < w.len() && bare.starts_with('/')).then_some(bare)
            });
            let path = quoted
                .or_else(|| words.iter().copied().find(|w| w.starts_with('/')))
                .map(PathBuf::from);
            if let Some(path) = path {
                return self.grant_for(workspace, &path);
            }
        }
        None
    }

    /// The grant that opens `path` as a denial of it needs.
    fn grant_for(&self, workspace: Option<&Path>, path: &Path) -> Option<String> {
        // A protected path is lifted by a grant that names it.
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if let Some(protected) = self.read_only().into_iter().find(|p| real.starts_with(p)) {
            return Some(format!("write:{}", protected.display()));
        }
        if workspace.is_some_and(|w| path.starts_with(w)) && self.withheld.is_none() {
            return Some("workspace:write".into());
        }
        let readable = self.read.iter().any(|r| path.starts_with(r));
        let (kind, target) = match (readable, path.exists()) {
            // Readable already, so it was a write: the directory it is in.
            (true, _) | (false, false) => match path.is_dir() {
                true => ("write", path.to_path_buf()),
                false => ("write", path.parent()?.to_path_buf()),
            },
            (false, true) => ("read", path.to_path_buf()),
        };
        // Never a grant that opens the home, or credentials (in them, or holding them).
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut credentials = home
            .iter()
            .flat_map(|h| CREDENTIALS.iter().map(move |c| h.join(c)));
        if holds_home(&target)
            || credentials.any(|c| target.starts_with(&c) || c.starts_with(&target))
        {
            return None;
        }
        let shown = match home.as_deref().and_then(|h| target.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => target.display().to_string(),
        };
        Some(format!("{kind}:{shown}"))
    }
}

/// `port 7`, `ports 7, 8080`.
fn ports(ports: &[u16]) -> String {
    let list = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match ports.len() {
        1 => format!("port {list}"),
        _ => format!("ports {list}"),
    }
}

/// Something the sandbox refused a server that the host saw (a host name asked of its egress
/// proxy): told as `yep_host::HealthEvent::SandboxDenied`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// What it reached for (`host:port`).
    pub target: String,
    /// The grant that would allow it, as `yep grant` takes it.
    pub grant: String,
    /// The sentence to tell, naming the server, the target and the command that grants it.
    pub message: String,
}

/// Whether `a` and `b` name the same place, links resolved where they can be.
fn same_place(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    a == b || real(a) == real(b)
}
