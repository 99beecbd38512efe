//! Containment: the OS sandbox around every process yep starts for a package or server.
//!
//! A [`Profile`] says what the process may reach: paths to read (and execute), paths to read
//! and write, TCP ports to connect to, and limits. [`process::spawn`](crate::process::spawn)
//! applies it between fork and exec, so the server and everything it starts run inside it:
//!
//! - Landlock for the filesystem, for TCP bind and connect (ABI 4 and later), and for signals
//!   and abstract unix sockets outside the sandbox (ABI 6 and later);
//! - a seccomp filter that refuses ptrace, `process_vm_*`, mounts, bpf, kexec, module loading,
//!   io_uring, new namespaces and the like with `EPERM` (`clone3` with `ENOSYS`, so callers
//!   fall back to `clone`, whose flags it checks), every socket family but unix, IPv4 and IPv6,
//!   and, with no network granted, every IP socket but a plain TCP stream;
//! - `no_new_privs`, and rlimits on open files and address space (the processes limit is the
//!   server's cgroup's, where the host may make one: see [`crate::process`]);
//! - a scrubbed environment ([`scrubbed_env`]) and a private `TMPDIR`.
//!
//! Everything that can allocate or fail runs in the host before the fork ([`prepare`]); the
//! child only makes the system calls, through the `landlock` and `seccompiler` crates.
//!
//! Where the kernel cannot do all of it, [`Mode`] decides: `best-effort` applies what it can
//! and says what it could not ([`Support::missing`]); `required` refuses to start the process.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub mod gitconfig;

/// How hard the host insists on the sandbox: `sandbox = "…"` in settings.toml.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Refuse to start what the kernel cannot contain in full.
    Required,
    /// Apply what the kernel supports, and say what it does not.
    #[default]
    BestEffort,
    /// No sandbox: processes run with the user's rights.
    Off,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Required => "required",
            Mode::BestEffort => "best-effort",
            Mode::Off => "off",
        })
    }
}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(text: &str) -> Result<Mode, UnknownMode> {
        match text {
            "required" => Ok(Mode::Required),
            "best-effort" => Ok(Mode::BestEffort),
            "off" => Ok(Mode::Off),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}

/// The mode a [`crate::supervisor::SupervisorOptions`] starts with, for this process:
/// [`UNSET_MODE`] until [`set_default_mode`] says otherwise.
pub fn default_mode() -> Mode {
    match DEFAULT_MODE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Mode::Required,
        2 => Mode::Off,
        _ => Mode::BestEffort,
    }
}

/// Set the mode every server of this process is spawned under unless its options say
/// otherwise (the CLI sets the home's `sandbox` setting, or `$YEP_SANDBOX`, once at start).
pub fn set_default_mode(mode: Mode) {
    let n = match mode {
        Mode::Required => 0,
        Mode::BestEffort => 1,
        Mode::Off => 2,
    };
    DEFAULT_MODE.store(n, std::sync::atomic::Ordering::Relaxed);
}

static DEFAULT_MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// The mode when neither the home nor `$YEP_SANDBOX` names one: everything the kernel can
/// enforce, and a warning for what it cannot.
pub const UNSET_MODE: Mode = Mode::BestEffort;

/// The mode for `home`: `$YEP_SANDBOX` when set, else its `sandbox` setting, else
/// [`UNSET_MODE`].
pub fn mode_for(home: &crate::store::Home) -> Result<Mode, ModeError> {
    if let Some(text) = std::env::var_os("YEP_SANDBOX").filter(|v| !v.is_empty()) {
        return text
            .to_string_lossy()
            .parse()
            .map_err(|e| ModeError::Env(Box::new(e)));
    }
    match crate::store::settings::top_level(&home.settings_path(), "sandbox")
        .map_err(|e| ModeError::Settings(Box::new(e)))?
    {
        Some(text) => text.parse().map_err(|e| ModeError::Setting {
            path: home.settings_path(),
            error: e,
        }),
        None => Ok(UNSET_MODE),
    }
}

/// Why the sandbox mode could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModeError {
    #[error("$YEP_SANDBOX: {0}")]
    Env(Box<UnknownMode>),
    #[error("{}: `sandbox`: {error}", .path.display())]
    Setting { path: PathBuf, error: UnknownMode },
    #[error(transparent)]
    Settings(Box<crate::store::StoreError>),
}

/// A sandbox mode that is none of the three.
#[derive(Debug, thiserror::Error)]
#[error(
    "sandbox mode {:?} is not one of required, best-effort, off",
    crate::text::escape(.0)
)]
pub struct UnknownMode(pub String);

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
}

/// Where in its workspace a zot extension keeps files of its own (zot's scratchpad:
/// `.zot/scratchpad-notes.jsonl`). zot also finds a project's extensions there, in
/// `.zot/extensions/`, and runs them: [`own_files`] never opens a directory of it.
pub const ZOT_FILES: &str = ".zot";

/// At most this many entries of a [`Place::files`] directory are looked at; past it, it is
/// not opened.
const MAX_FILES_ENTRIES: usize = 4096;

/// Why a [`Place::files`] directory was not opened ([`own_files`]); its text is a clause
/// ("holds extensions, a directory").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesWithheld {
    #[error("could not be made or read: {0}")]
    Io(#[from] std::io::Error),
    #[error("is a link")]
    Link,
    #[error("is not a directory")]
    NotADirectory,
    #[error("holds more than {MAX_FILES_ENTRIES} entries")]
    TooMany,
    /// An entry that is not a regular file: its name (escaped), and what it is.
    #[error("holds {0}, {1}")]
    Holds(String, &'static str),
}

/// Whether a server may keep regular files in `dir` (a [`Place::files`] directory): made when
/// missing, and opened only while it is a directory of regular files alone. A directory or a
/// link in it could be (or lead to) what other code reads or runs (zot runs the extensions in
/// `.zot/extensions/`), and the rule on `dir` would reach beneath it.
pub fn own_files(dir: &Path) -> Result<(), FilesWithheld> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(std::fs::create_dir(dir)?);
        }
        Err(e) => return Err(e.into()),
        Ok(meta) if meta.file_type().is_symlink() => return Err(FilesWithheld::Link),
        Ok(meta) if !meta.is_dir() => return Err(FilesWithheld::NotADirectory),
        Ok(_) => {}
    }
    for (n, entry) in std::fs::read_dir(dir)?.enumerate() {
        if n >= MAX_FILES_ENTRIES {
            return Err(FilesWithheld::TooMany);
        }
        let entry = entry?;
        let kind = entry.file_type()?;
        let what = match (kind.is_file(), kind.is_dir(), kind.is_symlink()) {
            (true, _, _) => continue,
            (_, true, _) => "a directory",
            (_, _, true) => "a link",
            _ => "neither a file nor a directory",
        };
        let name = crate::text::escape(&entry.file_name().to_string_lossy()).into_owned();
        return Err(FilesWithheld::Holds(name, what));
    }
    Ok(())
}

/// The system's own directories, read-only: programs, libraries, configuration.
const SYSTEM_READ: &[&str] = &[
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
fn proc_entries() -> &'static [PathBuf] {
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
const DEVICES_WRITE: &[&str] = &[
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
        }
    }
}

impl Profile {
    /// This profile widened by what an approval grants: the workspace writable, more paths,
    /// TCP ports or any network, higher limits. A path under `~/` is the user's home.
    pub fn granted(mut self, grants: &crate::manifest::SandboxGrants) -> Profile {
        if grants.workspace.as_deref() == Some("write") {
            self.write.extend(self.workspace.iter().cloned());
        }
        self.read
            .extend(grants.read.iter().filter_map(|p| grant_path(p)));
        self.write
            .extend(grants.write.iter().filter_map(|p| grant_path(p)));
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
                    use crate::store::grants::NetEntry;
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
            (true, _) => "and write the workspace, its data and temp dirs".to_string(),
            (false, Some(files)) => format!(
                "and write only its data and temp dirs and files in {}",
                crate::text::escape(&files.display().to_string())
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

    /// The grant that would likely let through the denial a server's last stderr lines
    /// report, as `yep grant` takes it: `workspace:write`, `write:<dir>`, `read:<path>` from
    /// the path the message names (`Permission denied: '/x'`, `EACCES: …, open '/x'`,
    /// `open /x: permission denied`), `net:<address>:<port>` from a refused connect
    /// (`connect EACCES 127.0.0.1:8080`). `None` when no line names what was denied.
    pub fn suggest_grant(&self, workspace: Option<&Path>, tail: &[String]) -> Option<String> {
        let denials = tail.iter().rev().filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("permission denied") || l.contains("eacces")
        });
        for line in denials {
            if let Some(addr) = line
                .split("connect EACCES ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .filter(|a| crate::store::grants::NetEntry::parse(a).is_some())
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
/// proxy): told as [`crate::HealthEvent::SandboxDenied`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// What it reached for (`host:port`).
    pub target: String,
    /// The grant that would allow it, as `yep grant` takes it.
    pub grant: String,
    /// The sentence to tell, naming the server, the target and the command that grants it.
    pub message: String,
}

/// The path a `read:` or `write:` grant names, as the sandbox opens it: `~/` is the home.
/// `None` for `~/` with no home.
pub fn grant_path(written: &str) -> Option<PathBuf> {
    match written.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest)),
        None => Some(PathBuf::from(written)),
    }
}

/// Whether yep may make the missing directory `path` for a `write:` grant: it is inside the
/// user's home (never the home itself), and neither in nor holding credentials
/// ([`CREDENTIALS`]) or a yep home (`yep_home`, and those [`protect`]ed). Anywhere else a
/// missing path is the user's to make.
pub fn may_make_for_grant(path: &Path, yep_home: &Path) -> bool {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return false;
    };
    let near = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    homes.push(yep_home.to_path_buf());
    homes.push(crate::store::Home::resolve(None).root);
    path.is_absolute()
        && path.starts_with(&home)
        && path != home
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        && !CREDENTIALS.iter().any(|c| near(path, &home.join(c)))
        && !homes.iter().any(|h| near(path, h))
}

/// Whether `path` is in a yep home (the default one, or one [`protect`]ed).
pub(crate) fn in_yep_home(path: &Path) -> bool {
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    homes.push(crate::store::Home::resolve(None).root);
    homes.iter().any(|h| path.starts_with(h))
}

/// Whether `dir` is the root, the user's home, or a directory that holds the home: a rule on
/// it would open everything the profile keeps out.
pub(crate) fn holds_home(dir: &Path) -> bool {
    holds_home_real(&dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// [`holds_home`] for a path whose links are already resolved.
fn holds_home_real(real: &Path) -> bool {
    real == Path::new("/") || real_home().is_some_and(|h| h.starts_with(real))
}

/// Directories of the user's home that hold credentials: a workspace that holds one, or is
/// inside one, is never opened to a server.
const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
    ".terraform.d",
];

/// yep homes this process serves ([`protect`]): never opened to a server by way of its
/// workspace.
static PROTECTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Keep `dir` (a yep home: its secrets, its lock, its packages) out of every server's
/// workspace. The host calls it for the home it serves; an embedder with more homes calls it
/// for each.
pub fn protect(dir: &Path) {
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut protected = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    if !protected.contains(&real) {
        protected.push(real);
    }
}

/// How much of a workspace a server may be opened to ([`workspace_access`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkspaceAccess {
    /// All of it: an ordinary project directory (its real path).
    Whole(PathBuf),
    /// All of it but the yep homes it holds: these parts, and why, as a clause.
    Parts(Vec<PathBuf>, String),
    /// None of it, and why, as a clause ("is your home directory").
    Nothing(String),
}

/// How much of `workspace` a server may be opened to:
/// - nothing when it is the root or holds the user's home, is inside a yep home, or holds or
///   is inside a credentials directory ([`CREDENTIALS`]): what it holds besides is not known
///   to be safe;
/// - all but the yep homes it holds ([`protect`]ed ones and the default one) when it holds
///   one: every entry beside the path down to each;
/// - else all of it.
pub fn workspace_access(workspace: &Path) -> WorkspaceAccess {
    let real = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    if real == Path::new("/") {
        return WorkspaceAccess::Nothing("is the root of the filesystem".into());
    }
    let home = real_home();
    if let Some(home) = home.as_deref().filter(|h| h.starts_with(&real)) {
        return WorkspaceAccess::Nothing(match home == real {
            true => "is your home directory".into(),
            false => "holds your home directory".into(),
        });
    }
    let near = |dir: &Path| real.starts_with(dir) || dir.starts_with(&real);
    if let Some(c) = home
        .iter()
        .flat_map(|h| CREDENTIALS.iter().map(move |c| h.join(c)))
        .find(|c| near(c))
    {
        return WorkspaceAccess::Nothing(format!(
            "holds or is in {}, which holds credentials",
            c.display()
        ));
    }
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let default_home = crate::store::Home::resolve(None).root;
    homes.push(default_home.canonicalize().unwrap_or(default_home));
    if let Some(inside) = homes.iter().find(|h| real.starts_with(h)) {
        return WorkspaceAccess::Nothing(format!("is in yep's home ({})", inside.display()));
    }
    let held: Vec<PathBuf> = homes.into_iter().filter(|h| h.starts_with(&real)).collect();
    match held.first() {
        None => WorkspaceAccess::Whole(real),
        Some(first) => {
            let why = format!("holds yep's home ({})", first.display());
            WorkspaceAccess::Parts(all_but(&real, &held, 0), why)
        }
    }
}

/// Why `workspace` is not opened to a server whole (the shared host serves no such
/// workspace); `None` for an ordinary project directory.
pub fn workspace_withheld(workspace: &Path) -> Option<String> {
    match workspace_access(workspace) {
        WorkspaceAccess::Whole(_) => None,
        WorkspaceAccess::Parts(_, why) | WorkspaceAccess::Nothing(why) => Some(why),
    }
}

/// What of `dir` (a real path) rules may open so that none reaches any of `held`: each entry
/// of `dir` that holds none of them, and the same, in turn, of each that does. An entry that
/// is a link is judged by where it leads, as the rule on it would be.
fn all_but(dir: &Path, held: &[PathBuf], depth: usize) -> Vec<PathBuf> {
    // Deeper than any real home; what is past it stays closed.
    if depth > 32 {
        return Vec::new();
    }
    let mut open = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if held.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        match held.iter().any(|h| h.starts_with(&real)) {
            true if real.starts_with(dir) => open.extend(all_but(&real, held, depth + 1)),
            // A link out of the directory toward a home: not followed.
            true => {}
            false => open.push(path),
        }
    }
    open
}

/// `$HOME` with its links resolved. A spawn asks a few dozen times, so the answer is kept
/// for the value it was found from (one resolved, not one that failed to).
fn real_home() -> Option<PathBuf> {
    static KNOWN: Mutex<Option<(std::ffi::OsString, PathBuf)>> = Mutex::new(None);
    let home = std::env::var_os("HOME")?;
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, real)) = known.as_ref().filter(|(from, _)| *from == home) {
        return Some(real.clone());
    }
    match Path::new(&home).canonicalize() {
        Ok(real) => {
            *known = Some((home, real.clone()));
            Some(real)
        }
        Err(_) => Some(PathBuf::from(home)),
    }
}

/// The install root of a program: `…/bin/x` → `…`; a program beside its files → their
/// directory. `None` for `/`. Of a `cargo install` root (a cargo home: `/usr/local/cargo`),
/// only `bin`: the rest holds the registry's credentials.
fn prefix(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let root = match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin") if dir.parent().is_some_and(is_cargo_root) => dir,
        Some("bin" | "sbin" | "shims") => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    (root != Path::new("/")).then(|| root.to_path_buf())
}

/// Whether `dir` is where `cargo install` puts programs (`dir/bin`), a cargo home above all.
fn is_cargo_root(dir: &Path) -> bool {
    [
        ".crates.toml",
        ".crates2.json",
        "credentials.toml",
        "credentials",
    ]
    .iter()
    .any(|f| dir.join(f).is_file())
}

/// The install roots `path` belongs to by its layout, as given and with its links resolved:
/// what a server started from it (or naming it) reads whole.
/// - The outermost `node_modules` above it: Node loads a package's siblings from there
///   (`node_modules/.bin/x` → `../pkg/dist/index.js` imports `@scope/sdk`), and a pnpm
///   store nests inside it.
/// - The venv above it (the directory with `pyvenv.cfg`: a virtualenv, a pipx or uv tool's
///   venv), and the base interpreter's install it names (`home = …/bin`), when that holds
///   a Python.
///
/// A `cargo install` root gives only its `bin` ([`prefix`]), and a Go binary its own
/// directory ([`toolchain`]). Never one that [`may_open`] refuses.
fn install_roots(path: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let real = path.canonicalize().ok();
    for p in std::iter::once(path).chain(real.as_deref()) {
        if let Some(tree) = p
            .ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last()
        {
            roots.push(tree.to_path_buf());
        }
        if let Some(venv) = p
            .ancestors()
            .skip(1)
            .find(|a| a.join("pyvenv.cfg").is_file())
        {
            roots.push(venv.to_path_buf());
            roots.extend(venv_base(venv));
        }
    }
    roots.sort();
    roots.dedup();
    roots.retain(|r| may_open(r, home));
    roots
}

/// The install of the Python a venv was made from, by its `pyvenv.cfg`'s `home` (the
/// interpreter's directory): `…/bin` → `…`. Only a directory that holds a Python: the file
/// is the venv's, not the user's word.
fn venv_base(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let dir = cfg.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    let python = ["python3", "python"]
        .iter()
        .map(|p| dir.join(p))
        .find(|p| dir.is_absolute() && p.is_file())?;
    prefix(&python)
}

/// Whether a rule on `dir` keeps out what the profile keeps out: never the root, the home or
/// a directory holding it (`home`, links resolved), a credentials directory or one that holds
/// or is in one ([`CREDENTIALS`]), or a directory holding a yep home ([`protect`]).
fn may_open(dir: &Path, home: Option<&Path>) -> bool {
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if real == Path::new("/") || home.is_some_and(|h| h.starts_with(&real)) {
        return false;
    }
    let near = |c: &Path| real.starts_with(c) || c.starts_with(&real);
    if home.is_some_and(|h| CREDENTIALS.iter().any(|c| near(&h.join(c)))) {
        return false;
    }
    let homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    !homes.iter().any(|h| h.starts_with(&real))
}

/// A toolchain's own directory in the home, by the variable that moves it and its usual place.
const HOME_TOOLCHAINS: &[(&str, &str)] = &[
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
    ("VOLTA_HOME", ".volta"),
    ("ASDF_DATA_DIR", ".asdf"),
    ("RUSTUP_HOME", ".rustup"),
    ("BUN_INSTALL", ".bun"),
    ("DENO_INSTALL", ".deno"),
];

/// What the toolchain a program runs on needs: to read where it lives (a pyenv Python, a
/// venv, an nvm Node, a rustup toolchain, each directory on `PATH` a shebang's `env` may look
/// in), and to write the caches its launchers fill (`npx`'s `~/.npm`, `go run`'s build and
/// module caches). In the home, only those directories: never the home itself, and of
/// `~/.cargo` only `bin` (its credentials stay out).
fn toolchain(program: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut read = Vec::new();
    let mut write = Vec::new();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"));
    let in_home = |p: &Path| home.as_ref().is_some_and(|h| p.starts_with(h));
    let roots: Vec<PathBuf> = HOME_TOOLCHAINS
        .iter()
        .filter_map(|(var, dir)| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(dir)))
        })
        .filter(|d| d.is_absolute() && d.is_dir())
        .collect();
    // `real` is `p` with its links resolved, when they could be.
    let mut place = |p: &Path, real: Option<&Path>| {
        if holds_home_real(real.unwrap_or(p)) {
            // `$HOME` itself on `PATH`: its programs are not worth the whole home.
        } else if let Some(root) = roots.iter().find(|r| p.starts_with(r)) {
            read.push(root.clone());
        } else if in_home(p) {
            // A directory of programs in the home (`~/.cargo/bin`, `~/.local/bin`): itself.
            read.push(
                if p.is_dir() {
                    p
                } else {
                    p.parent().unwrap_or(p)
                }
                .to_path_buf(),
            );
        } else if let Some(root) = prefix(p) {
            read.push(root);
        }
    };
    // Each path resolved once: a spawn reads every directory on `PATH`.
    let mut place_both = |p: &Path| {
        let real = p.canonicalize().ok();
        place(p, real.as_deref());
        if let Some(real) = &real {
            place(real, Some(real));
        }
    };
    place_both(program);
    let mut path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    // A directory listed twice (a shell profile run twice) is looked at once.
    let mut seen = std::collections::HashSet::new();
    path.retain(|d| seen.insert(d.clone()));
    for dir in path {
        if dir.is_absolute() && dir.is_dir() {
            place_both(&dir);
        }
    }
    // Where the user told the interpreters and npm to look for modules (an SDK checked out, a
    // global npm prefix): each directory by itself.
    for var in [
        "PYTHONPATH",
        "NODE_PATH",
        "npm_config_prefix",
        "NPM_CONFIG_PREFIX",
    ] {
        if let Some(paths) = std::env::var_os(var) {
            read.extend(std::env::split_paths(&paths).filter(|d| d.is_absolute() && d.is_dir()));
        }
    }
    // cargo's and rustc's proxies in `~/.cargo/bin` run the toolchains of rustup's home.
    if let Some(h) = &home {
        // A pip `--user` install (the MCP SDK, say) lives in `~/.local/lib/pythonX.Y`.
        if let Ok(entries) = std::fs::read_dir(h.join(".local/lib")) {
            read.extend(entries.flatten().map(|e| e.path()).filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python"))
            }));
        }
        let launcher = program.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(launcher, "npx" | "npm" | "pnpm" | "pnpx" | "yarn" | "bunx") {
            write.push(h.join(".npm"));
        }
    }
    if program.file_name().and_then(|n| n.to_str()) == Some("go") {
        write.extend(go_caches(home.as_deref()));
    }
    read.sort();
    read.dedup();
    read.retain(|r| !holds_home(r));
    (read, write)
}

/// Where `go` keeps what `go run` builds and downloads, as it finds them itself (which the
/// child sees too: [`ENV_ALLOWED`] passes the variables): `$GOCACHE`, else
/// `~/.cache/go-build`; `$GOMODCACHE`, else the first `$GOPATH` entry's `pkg/mod`, else
/// `~/go/pkg/mod`. Each is made when missing, as `go` would make it: a rule on a path that
/// does not exist lets nothing be written there.
fn go_caches(home: Option<&Path>) -> Vec<PathBuf> {
    let set = |var| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let build = set("GOCACHE").or_else(|| home.map(|h| h.join(".cache/go-build")));
    let modules = set("GOMODCACHE").or_else(|| {
        let gopath = std::env::var_os("GOPATH")
            .and_then(|p| std::env::split_paths(&p).find(|d| !d.as_os_str().is_empty()))
            .or_else(|| home.map(|h| h.join("go")))?;
        Some(gopath.join("pkg/mod"))
    });
    let caches: Vec<PathBuf> = [build, modules]
        .into_iter()
        .flatten()
        // go refuses a relative cache itself; never the home or what holds it.
        .filter(|d| d.is_absolute() && !holds_home(d))
        .collect();
    for dir in &caches {
        let _ = std::fs::create_dir_all(dir);
    }
    caches
}

/// The host environment a sandboxed process gets, by name: what programs need to run, and
/// nothing that is the user's own (tokens, keys, the agent's variables).
pub const ENV_ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    // Toolchains find themselves by these.
    "PYENV_ROOT",
    "PYENV_VERSION",
    "NVM_DIR",
    "NVM_BIN",
    "VOLTA_HOME",
    "ASDF_DATA_DIR",
    "GOROOT",
    "GOPATH",
    "GOFLAGS",
    // Where `go run` builds and downloads: the very directories the sandbox lets it write
    // (`go_caches`), so what the install-time run fills is what every later start reuses.
    // Never `GOPROXY` (its URL may carry a user and password) nor `GOENV`'s file.
    "GOCACHE",
    "GOMODCACHE",
    "GOTOOLCHAIN",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    // Where the interpreters find modules: their directories are read as the toolchain's.
    "PYTHONPATH",
    "NODE_PATH",
    // Where npm and npx find packages installed globally (read likewise), and whether they
    // may reach the registry: never the config files that can hold a token.
    "npm_config_prefix",
    "NPM_CONFIG_PREFIX",
    "npm_config_offline",
    "NPM_CONFIG_OFFLINE",
];

/// The host environment, scrubbed to [`ENV_ALLOWED`] and the locale's `LC_*`.
pub fn scrubbed_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| ENV_ALLOWED.contains(&k) || k.starts_with("LC_"))
        })
        .collect()
}

/// What this kernel can enforce, found once by asking it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Support {
    /// The Landlock ABI the kernel offers (0 without Landlock).
    pub landlock_abi: i32,
    /// seccomp filters.
    pub seccomp: bool,
}

impl Support {
    /// This kernel's, asked once.
    pub fn current() -> Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        *SUPPORT.get_or_init(|| Support {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_filter(false).is_some(),
        })
    }

    /// What a profile needs that this kernel cannot do, as a person reads it; empty when it
    /// contains everything.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.landlock_abi < 1 {
            out.push("filesystem rules (Landlock)");
        }
        if self.landlock_abi < 4 {
            out.push("network rules (Landlock ABI 4)");
        }
        if self.landlock_abi < 6 {
            out.push("signal and abstract-socket scoping (Landlock ABI 6)");
        }
        if !self.seccomp {
            out.push("the syscall filter (seccomp)");
        }
        out
    }
}

/// The highest Landlock ABI this kernel enforces (and this crate knows), 0 for none: the
/// highest for which a ruleset that requires all of its filesystem rights can be created.
#[cfg(target_os = "linux")]
fn landlock_abi() -> i32 {
    use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};
    let known = [
        ABI::V7,
        ABI::V6,
        ABI::V5,
        ABI::V4,
        ABI::V3,
        ABI::V2,
        ABI::V1,
    ];
    // `$YEP_SANDBOX_LANDLOCK_ABI` holds it lower: to see what an older kernel gets.
    let cap = std::env::var("YEP_SANDBOX_LANDLOCK_ABI")
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(i32::MAX);
    for (abi, n) in known.into_iter().zip((1..=7).rev()) {
        if n > cap {
            continue;
        }
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create());
        if created.is_ok() {
            return n;
        }
    }
    0
}

/// The crate's name for ABI `n` (1 to 7).
#[cfg(target_os = "linux")]
fn abi_of(n: i32) -> landlock::ABI {
    use landlock::ABI;
    match n {
        ..=1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> i32 {
    0
}

/// The syscalls no server has a use for and an attacker does: refused with `EPERM`.
#[cfg(target_os = "linux")]
const DENIED_SYSCALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_bpf,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    // Its own submission queue makes sockets and does I/O that seccomp never sees.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The namespace flags of `clone(2)`: a process that makes namespaces of its own (a user
/// namespace above all) reaches kernel surface no server needs, as `unshare` would.
#[cfg(target_os = "linux")]
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The compiled filters, built once each way. Both refuse [`DENIED_SYSCALLS`], `clone` with a
/// namespace flag, and sockets of any family but unix, IPv4 and IPv6 (netlink, vsock, packet
/// sockets and the rest: kernel surface and ways around the network rules). With
/// `no_datagrams`, for a profile that does not grant any network, the main one also refuses
/// every IPv4 and IPv6 socket but a plain TCP stream (protocol 0 or `IPPROTO_TCP`): Landlock's
/// network rules cover TCP only, so UDP, raw, `SOCK_PACKET`, MPTCP and SCTP sockets would
/// pass them.
///
/// The second filter answers `clone3` with `ENOSYS`: its flags are in memory, where seccomp
/// cannot look, and on `ENOSYS` libc and runtimes fall back to `clone`, which the first
/// filter checks.
#[cfg(target_os = "linux")]
fn seccomp_filter(no_datagrams: bool) -> Option<&'static [seccompiler::BpfProgram; 2]> {
    static FILTERS: [OnceLock<Option<[seccompiler::BpfProgram; 2]>>; 2] =
        [OnceLock::new(), OnceLock::new()];
    FILTERS[usize::from(no_datagrams)]
        .get_or_init(|| {
            use seccompiler::{
                SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
                SeccompRule,
            };
            let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into().ok()?;
            let arg = |index, op, value: i32| {
                SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value as u64).ok()
            };
            let rule = |conditions: Vec<Option<SeccompCondition>>| {
                SeccompRule::new(conditions.into_iter().collect::<Option<Vec<_>>>()?).ok()
            };
            let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
                DENIED_SYSCALLS.iter().map(|&n| (n, Vec::new())).collect();
            let clone = NAMESPACE_FLAGS
                .iter()
                .map(|&flag| rule(vec![arg(0, SeccompCmpOp::MaskedEq(flag as u64), flag)]))
                .collect::<Option<Vec<_>>>()?;
            rules.insert(libc::SYS_clone, clone);
            // `socket(domain, type, protocol)`: any domain but AF_UNIX (1), AF_INET (2) and
            // AF_INET6 (10).
            let mut socket = vec![
                rule(vec![arg(0, SeccompCmpOp::Lt, libc::AF_UNIX)])?,
                rule(vec![
                    arg(0, SeccompCmpOp::Gt, libc::AF_INET),
                    arg(0, SeccompCmpOp::Lt, libc::AF_INET6),
                ])?,
                rule(vec![arg(0, SeccompCmpOp::Gt, libc::AF_INET6)])?,
            ];
            if no_datagrams {
                for domain in [libc::AF_INET, libc::AF_INET6] {
                    // The type's low bits, past SOCK_CLOEXEC and SOCK_NONBLOCK: all but a
                    // stream.
                    for kind in (0..16).filter(|&k| k != libc::SOCK_STREAM) {
                        socket.push(rule(vec![
                            arg(0, SeccompCmpOp::Eq, domain),
                            arg(1, SeccompCmpOp::MaskedEq(0xf), kind),
                        ])?);
                    }
                    // A stream of another protocol than TCP (MPTCP, SCTP).
                    socket.push(rule(vec![
                        arg(0, SeccompCmpOp::Eq, domain),
                        arg(2, SeccompCmpOp::Ne, 0),
                        arg(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP),
                    ])?);
                }
            }
            rules.insert(libc::SYS_socket, socket);
            let main = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(libc::EPERM as u32),
                arch,
            )
            .ok()?;
            let clone3 = SeccompFilter::new(
                [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
                SeccompAction::Allow,
                SeccompAction::Errno(libc::ENOSYS as u32),
                arch,
            )
            .ok()?;
            Some([main.try_into().ok()?, clone3.try_into().ok()?])
        })
        .as_ref()
}

#[cfg(not(target_os = "linux"))]
fn seccomp_filter(_no_datagrams: bool) -> Option<&'static ()> {
    None
}

/// Why a process was not started in a sandbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `sandbox = "required"`, and the kernel cannot do all of it.
    #[error(
        "the sandbox is required (sandbox = \"required\" in settings.toml), and this kernel cannot enforce {}: not started",
        .missing.join(", ")
    )]
    Unsupported { missing: Vec<&'static str> },
    /// The Landlock ruleset could not be built.
    #[cfg(target_os = "linux")]
    #[error("the sandbox's filesystem and network rules could not be built: {0}")]
    Rules(#[from] landlock::RulesetError),
    /// The private temp dir could not be made.
    #[error("the sandbox's private temp dir {} could not be made: {source}", .path.display())]
    Tmp {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A sandbox built in the host, for one spawn: applied in the child between fork and exec.
pub struct Prepared {
    #[cfg(target_os = "linux")]
    ruleset: Mutex<Option<landlock::RulesetCreated>>,
    /// The filter, compiled before the fork (never in the child).
    #[cfg(target_os = "linux")]
    filter: Option<&'static [seccompiler::BpfProgram; 2]>,
    /// What it may do beneath its own `/proc/self`, added in the child.
    #[cfg(target_os = "linux")]
    own_proc: landlock::BitFlags<landlock::AccessFs>,
    limits: Limits,
    /// What this kernel left out (best-effort), for the one warning a session shows.
    pub missing: Vec<&'static str>,
}

/// Build `profile` for a spawn under `mode`; `None` for [`Mode::Off`].
pub fn prepare(profile: &Profile, mode: Mode) -> Result<Option<Prepared>, SandboxError> {
    if mode == Mode::Off {
        return Ok(None);
    }
    let support = Support::current();
    let missing = support.missing();
    if mode == Mode::Required && !missing.is_empty() {
        return Err(SandboxError::Unsupported { missing });
    }
    Ok(Some(Prepared {
        #[cfg(target_os = "linux")]
        ruleset: Mutex::new(ruleset(profile, support)?),
        #[cfg(target_os = "linux")]
        filter: seccomp_filter(profile.net != Net::Any),
        #[cfg(target_os = "linux")]
        own_proc: landlock::AccessFs::from_read(abi_of(support.landlock_abi)),
        limits: profile.limits,
        missing,
    }))
}

/// The Landlock ruleset for `profile`, as much of it as this kernel enforces; `None` without
/// Landlock.
#[cfg(target_os = "linux")]
fn ruleset(
    profile: &Profile,
    support: Support,
) -> Result<Option<landlock::RulesetCreated>, landlock::RulesetError> {
    use landlock::{
        Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
        path_beneath_rules,
    };
    if support.landlock_abi < 1 {
        return Ok(None);
    }
    let abi = abi_of(support.landlock_abi);
    let mut rules = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    if support.landlock_abi >= 4 && profile.net != Net::Any {
        rules = rules.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    if support.landlock_abi >= 6 {
        rules = rules.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut created = rules.create()?;
    let opened = opened_once();
    for (paths, access) in [
        (&profile.read, AccessFs::from_read(abi)),
        (&profile.write, AccessFs::from_all(abi)),
    ] {
        let (kept, fresh): (Vec<&PathBuf>, Vec<&PathBuf>) =
            paths.iter().partition(|p| opened.contains_key(*p));
        for path in kept {
            let (fd, file) = &opened[path];
            let access = match file {
                true => access & AccessFs::from_file(abi),
                false => access,
            };
            created = created.add_rule(landlock::PathBeneath::new(fd, access))?;
        }
        created = created.add_rules(path_beneath_rules(fresh, access))?;
    }
    // Regular files, and nothing else: no directory, link, device or program, and no
    // renaming across directories (`Refer`).
    let files = (AccessFs::ReadFile
        | AccessFs::ReadDir
        | AccessFs::WriteFile
        | AccessFs::Truncate
        | AccessFs::MakeReg
        | AccessFs::RemoveFile)
        & AccessFs::from_all(abi);
    created = created.add_rules(path_beneath_rules(&profile.files, files))?;
    let ports = match &profile.net {
        Net::Ports(ports) => ports.as_slice(),
        Net::None | Net::Any => &[],
    };
    if support.landlock_abi >= 4 && profile.net != Net::Any {
        for &port in ports.iter().chain(&profile.proxy) {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(Some(created))
}

/// The system's paths every profile starts from ([`SYSTEM_READ`], `/proc`'s entries,
/// [`DEVICES_WRITE`]), opened once, each with whether it is a file: every spawn's rules take
/// the same descriptors (`O_PATH`, close-on-exec), and only its own paths are opened each
/// time. Those that could not be opened are tried again at each spawn.
#[cfg(target_os = "linux")]
fn opened_once() -> &'static std::collections::HashMap<PathBuf, (landlock::PathFd, bool)> {
    static OPENED: OnceLock<std::collections::HashMap<PathBuf, (landlock::PathFd, bool)>> =
        OnceLock::new();
    OPENED.get_or_init(|| {
        let system = SYSTEM_READ.iter().chain(DEVICES_WRITE).map(PathBuf::from);
        system
            .chain(proc_entries().iter().cloned())
            .filter_map(|path| {
                use std::os::fd::{AsFd, AsRawFd};
                let fd = landlock::PathFd::new(&path).ok()?;
                // What it opened, as the crate judges its own rules: anything not a directory.
                // SAFETY: fstat fills the zeroed struct it is given, from an fd we hold.
                let file = unsafe {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fd.as_fd().as_raw_fd(), &mut st) == 0
                        && st.st_mode & libc::S_IFMT != libc::S_IFDIR
                };
                Some((path, (fd, file)))
            })
            .collect()
    })
}

impl Prepared {
    /// The limits it sets.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Apply it to the calling process: rlimits, `no_new_privs`, Landlock, then seccomp (the
    /// filter refuses nothing the others need). Called between fork and exec: it makes system
    /// calls and allocates nothing.
    pub fn apply(&self) -> std::io::Result<()> {
        let limit = |resource, value: u64| {
            let lim = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit reads the struct it is given and nothing else.
            if unsafe { libc::setrlimit(resource, &lim) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        // Lowered only: a hard limit below ours stays (raising it would fail).
        let current = |resource| {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes the struct it is given and nothing else.
            unsafe { libc::getrlimit(resource, &mut lim) };
            lim.rlim_max
        };
        limit(
            libc::RLIMIT_NOFILE,
            self.limits.open_files.min(current(libc::RLIMIT_NOFILE)),
        )?;
        limit(
            libc::RLIMIT_AS,
            self.limits.address_space.min(current(libc::RLIMIT_AS)),
        )?;
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        #[cfg(target_os = "linux")]
        {
            let taken = self
                .ruleset
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(ruleset) = taken {
                use landlock::RulesetCreatedAttr;
                use std::os::fd::FromRawFd;
                // Its own /proc/<pid>, which only now is this process's.
                // SAFETY: open(2) of a NUL-terminated literal; the fd is owned from here on.
                let fd =
                    unsafe { libc::open(c"/proc/self".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
                let ruleset = if fd >= 0 {
                    // SAFETY: `fd` was just opened and nothing else holds it.
                    let own = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
                    ruleset
                        .add_rule(landlock::PathBeneath::new(own, self.own_proc))
                        .map_err(|_| std::io::Error::last_os_error())?
                } else {
                    ruleset
                };
                ruleset
                    .restrict_self()
                    .map_err(|_| std::io::Error::last_os_error())?;
            }
            for filter in self.filter.into_iter().flatten() {
                seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())?;
            }
        }
        Ok(())
    }
}

/// A private temp dir for one sandboxed process: `<system temp>/yep-<uid>/<stem>-<n>`,
/// owner-only, removed when dropped.
pub struct TmpDir {
    path: PathBuf,
}

/// The count that tells this process's temp dirs apart.
static TMP_NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl TmpDir {
    pub fn new(stem: &str) -> Result<TmpDir, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let n = TMP_NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let base = std::env::temp_dir().join(format!("yep-{uid}"));
        let stem: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        // The pid and a count make it unique in this run; a process that was killed leaves its
        // dir behind, and pids come round again, so a name taken is passed over.
        let name = |n: u64| format!("{stem}-{}-{n}", std::process::id());
        let mut path = base.join(name(n));
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SandboxError::Tmp { path, source }
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700).recursive(true);
        builder.create(&base).map_err(err(&path))?;
        // The base must be ours alone: a planted one (another user's, a link) is refused.
        let meta = std::fs::symlink_metadata(&base).map_err(err(&path))?;
        use std::os::unix::fs::MetadataExt;
        if !meta.is_dir() || meta.uid() != uid {
            return Err(err(&path)(std::io::Error::other(format!(
                "{} is not a directory of this user's",
                base.display()
            ))));
        }
        builder.recursive(false);
        let mut tries = 0;
        loop {
            match builder.create(&path) {
                Ok(()) => return Ok(TmpDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 64 => {
                    tries += 1;
                    let n = TMP_NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    path = base.join(name(n));
                }
                Err(e) => return Err(err(&path)(e)),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A cgroup that bounds how many processes and threads one server may have (`pids.max`):
/// a fork bomb stops there, whoever the user is (`RLIMIT_NPROC` counts every process of the
/// user, and binds no one running as root). This is the cgroup v1 `pids` hierarchy's; under
/// cgroup v2 the server's own cgroup takes the limit. `None` where the host may make
/// neither. Removed when dropped (once its processes are gone).
pub struct PidsLimit {
    dir: PathBuf,
}

impl PidsLimit {
    /// A new cgroup holding at most `max` tasks.
    pub fn create(max: u64) -> Option<PidsLimit> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = Self::base()?;
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = base.join(format!("yep-pids-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let limit = PidsLimit { dir };
        std::fs::write(limit.dir.join("pids.max"), max.to_string()).ok()?;
        Some(limit)
    }

    /// `cgroup.procs`, opened for the child to join before exec (closed at exec).
    pub fn procs_fd(&self) -> Option<std::fs::File> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
            .ok()
    }

    /// Where this host's pids cgroups go: its own place in a `pids` hierarchy it may write.
    fn base() -> Option<&'static Path> {
        static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
        BASE.get_or_init(|| {
            if std::env::var_os("YEP_NO_CGROUP").is_some() {
                return None;
            }
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            // Field 4 is the mounted root, 5 the mount point; the fs type and options follow " - ".
            let mount_of = |fs: &str, option: Option<&str>| {
                mounts.lines().find_map(|l| {
                    let (fields, rest) = l.split_once(" - ")?;
                    let mut rest = rest.split(' ');
                    if rest.next()? != fs {
                        return None;
                    }
                    let options = rest.nth(1).unwrap_or("");
                    if option.is_some_and(|o| !options.split(',').any(|x| x == o)) {
                        return None;
                    }
                    let fields: Vec<&str> = fields.split(' ').collect();
                    (fields.get(3) == Some(&"/"))
                        .then(|| fields.get(4).map(PathBuf::from))
                        .flatten()
                })
            };
            let writable = |dir: &Path| {
                std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                    .ok()
                    // SAFETY: access(2) reads a NUL-terminated path and nothing else.
                    .is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
            };
            // cgroup v1's `pids` hierarchy (under cgroup v2 the server's own cgroup takes
            // `pids.max`: see `process::Cgroup::limit_pids`).
            let rel = own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == "pids").then_some(path)
            })?;
            let dir = mount_of("cgroup", Some("pids"))?.join(rel.trim_start_matches('/'));
            if !(dir.join("cgroup.procs").is_file() && writable(&dir)) {
                return None;
            }
            // The groups of hosts that are gone (a crash skips the clean-up).
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = e.file_name();
                let pid = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("yep-pids-"))
                    .and_then(|n| n.split('-').next());
                if pid.is_some_and(|p| !Path::new("/proc").join(p).exists()) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
            Some(dir)
        })
        .as_deref()
    }
}

impl Drop for PidsLimit {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // Its last processes are still being reaped: a short-lived thread retries.
        let dir = std::mem::take(&mut self.dir);
        std::thread::spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(std::time::Duration::from_millis(10));
                match std::fs::remove_dir(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {}
                    _ => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_temp_dir_left_by_a_killed_process_with_this_pid_is_passed_over() {
        // What a killed process of an earlier run with this pid left behind: the next names.
        // SAFETY: getuid cannot fail and touches no memory.
        let base = std::env::temp_dir().join(format!("yep-{}", unsafe { libc::getuid() }));
        let next = TMP_NEXT.load(std::sync::atomic::Ordering::Relaxed);
        let stale: Vec<PathBuf> = (next..next + 8)
            .map(|n| base.join(format!("left-over-{}-{n}", std::process::id())))
            .collect();
        for dir in &stale {
            std::fs::create_dir_all(dir).unwrap();
        }
        let tmp = TmpDir::new("left-over").unwrap();
        assert!(tmp.path().is_dir() && !stale.contains(&tmp.path().to_path_buf()));
        for dir in &stale {
            let _ = std::fs::remove_dir(dir);
        }
    }

    use super::*;

    fn place<'a>(args: &'a [String], tmp: &'a Path) -> Place<'a> {
        Place {
            program: Path::new("/bin/sh"),
            args,
            package_dir: None,
            data_dir: None,
            workspace: None,
            tmp_dir: tmp,
            files: None,
        }
    }

    #[test]
    fn a_workspace_holding_the_home_yeps_home_or_credentials_is_withheld() {
        let home = PathBuf::from(std::env::var("HOME").unwrap());
        let project = tempfile::tempdir().unwrap();
        for held in [
            Path::new("/"),
            home.as_path(),
            home.parent().unwrap_or(Path::new("/")),
            &home.join(".ssh"),
            &home.join(".config"),
            &home.join(".aws/sso"),
        ] {
            assert!(workspace_withheld(held).is_some(), "{}", held.display());
        }
        assert_eq!(workspace_withheld(project.path()), None);
        // A yep home the host serves: a workspace in it is closed, one that holds it is
        // opened beside it, a link to it included.
        let root = project.path().canonicalize().unwrap();
        for dir in ["home/data/x", "src/deep", "other"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("README"), "").unwrap();
        // A link at the top is judged by where it leads; one deeper needs nothing (Landlock
        // judges a path by where it resolves, and the home is beneath no rule).
        std::os::unix::fs::symlink(root.join("home"), root.join("to-home")).unwrap();
        protect(&root.join("home"));
        assert!(matches!(
            workspace_access(&root.join("home/data/x")),
            WorkspaceAccess::Nothing(_)
        ));
        let WorkspaceAccess::Parts(mut parts, why) = workspace_access(&root) else {
            panic!("{:?}", workspace_access(&root));
        };
        parts.sort();
        assert_eq!(
            parts,
            [root.join("README"), root.join("other"), root.join("src")],
            "{why}"
        );
        assert!(workspace_withheld(&root).is_some());
        assert_eq!(
            workspace_access(&root.join("other")),
            WorkspaceAccess::Whole(root.join("other"))
        );
        // The profile keeps it out, says so, and a write grant does not bring it back.
        let args = Vec::new();
        let tmp = std::env::temp_dir();
        let mut at_home = place(&args, &tmp);
        at_home.workspace = Some(&home);
        let profile = Profile::default_for(&at_home).granted(&crate::manifest::SandboxGrants {
            workspace: Some("write".into()),
            ..Default::default()
        });
        assert!(
            !profile
                .read
                .iter()
                .chain(&profile.write)
                .any(|p| p == &home),
            "{profile:?}"
        );
        assert!(profile.workspace.is_empty() && profile.withheld.is_some());
        assert!(
            profile
                .said(Some(&home))
                .contains("not the workspace, which is your home")
        );
    }

    #[test]
    fn a_command_line_naming_the_root_or_the_home_opens_neither() {
        let home = std::env::var("HOME").unwrap();
        let tmp = std::env::temp_dir();
        let args = vec!["/".to_string(), home.clone(), "/usr/bin/env".to_string()];
        let profile = Profile::default_for(&place(&args, &tmp));
        assert!(
            !profile.read.iter().any(|p| p == Path::new("/")),
            "{profile:?}"
        );
        assert!(
            !profile.read.iter().any(|p| p == Path::new(&home)),
            "{profile:?}"
        );
        assert!(profile.read.iter().any(|p| p == Path::new("/usr/bin/env")));
        assert!(profile.read.iter().all(|p| !holds_home(p)), "{profile:?}");
    }

    /// `file` made, with its directories.
    fn touch(file: &Path) {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, "").unwrap();
    }

    #[test]
    fn a_program_in_a_node_modules_tree_reads_the_whole_tree_through_its_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let tree = root.join("servers/node_modules");
        let entry = tree.join("@mcp/server-x/dist/index.js");
        touch(&entry);
        touch(&tree.join("@mcp/sdk/server/stdio.js"));
        touch(&root.join("servers/secret.txt"));
        let bin = tree.join(".bin/mcp-server-x");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("../@mcp/server-x/dist/index.js", &bin).unwrap();
        let reads = |program: &Path, args: &[String]| {
            let mut at = place(args, &root);
            at.program = program;
            Profile::default_for(&at).read
        };
        // Started by its bin, or by Node with the entry on its command line.
        for read in [
            reads(&bin, &[]),
            reads(Path::new("/usr/bin/node"), &[entry.display().to_string()]),
        ] {
            assert!(read.contains(&tree), "{read:?}");
            assert!(!read.iter().any(|r| r == &root.join("servers")), "{read:?}");
        }
        // A pnpm store nests in the tree: the outermost is read.
        let nested = tree.join(".pnpm/a@1.0.0/node_modules/a/index.js");
        touch(&nested);
        assert_eq!(install_roots(&nested, None), std::slice::from_ref(&tree));
        // A Go binary (or any program beside its files) reads its own directory.
        let go = root.join("tools/srv");
        touch(&go);
        assert!(reads(&go, &[]).contains(&root.join("tools")));
    }

    #[test]
    fn a_program_in_a_venv_reads_the_venv_and_the_python_it_was_made_from() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        // A Python of uv's, and a uv tool's venv made from it, linked from `~/.local/bin`.
        let python = home.join(".local/share/uv/python/cpython-3.12/bin/python3");
        touch(&python);
        let venv = home.join(".local/share/uv/tools/mcp-server-time");
        let cfg = format!(
            "home = {}\nversion = 3.12\n",
            python.parent().unwrap().display()
        );
        touch(&venv.join("pyvenv.cfg"));
        std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
        touch(&venv.join("bin/mcp-server-time"));
        let link = home.join(".local/bin/mcp-server-time");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(venv.join("bin/mcp-server-time"), &link).unwrap();
        let base = home.join(".local/share/uv/python/cpython-3.12");
        assert_eq!(
            install_roots(&link, Some(&home)),
            [base.clone(), venv.clone()]
        );
        // A `home` that holds no Python names nothing.
        std::fs::write(venv.join("pyvenv.cfg"), "home = /nowhere/bin\n").unwrap();
        assert_eq!(
            install_roots(&link, Some(&home)),
            std::slice::from_ref(&venv)
        );
        // Outside the home as well: a virtualenv beside a project.
        let outside = root.join("srv/.venv");
        touch(&outside.join("pyvenv.cfg"));
        touch(&outside.join("lib/python3.12/site-packages/srv/__main__.py"));
        assert_eq!(
            install_roots(
                &outside.join("lib/python3.12/site-packages/srv/__main__.py"),
                None
            ),
            [outside]
        );
    }

    #[test]
    fn an_install_root_is_never_the_home_credentials_or_a_cargo_homes_credentials() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        // A `pyvenv.cfg` planted in the home, or one naming a "Python" among credentials.
        touch(&home.join("pyvenv.cfg"));
        touch(&home.join("bin/srv"));
        assert_eq!(
            install_roots(&home.join("bin/srv"), Some(&home)),
            Vec::<PathBuf>::new()
        );
        std::fs::remove_file(home.join("pyvenv.cfg")).unwrap();
        touch(&home.join(".aws/bin/python3"));
        let venv = root.join("venv");
        touch(&venv.join("bin/srv"));
        touch(&venv.join("pyvenv.cfg"));
        let cfg = format!("home = {}\n", home.join(".aws/bin").display());
        std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
        assert_eq!(
            install_roots(&venv.join("bin/srv"), Some(&home)),
            std::slice::from_ref(&venv)
        );
        // A tree of modules inside a credentials directory.
        let inside = home.join(".ssh/node_modules/x/index.js");
        touch(&inside);
        assert_eq!(install_roots(&inside, Some(&home)), Vec::<PathBuf>::new());
        // `cargo install`'s root gives its `bin`, never the cargo home's credentials.
        for marker in ["credentials.toml", ".crates.toml"] {
            let cargo = root.join(format!("cargo-{marker}"));
            touch(&cargo.join(marker));
            touch(&cargo.join("bin/srv"));
            assert_eq!(prefix(&cargo.join("bin/srv")), Some(cargo.join("bin")));
            let mut at = place(&[], &root);
            let program = cargo.join("bin/srv");
            at.program = &program;
            let read = Profile::default_for(&at).read;
            assert!(!read.contains(&cargo), "{read:?}");
            assert!(read.contains(&cargo.join("bin")), "{read:?}");
        }
    }

    #[test]
    fn of_proc_only_the_systems_entries_are_read_never_a_process() {
        let entries = proc_entries();
        assert!(entries.iter().any(|p| p.ends_with("cpuinfo")));
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy();
            assert!(
                !name.bytes().all(|b| b.is_ascii_digit())
                    && name != "self"
                    && name != "thread-self",
                "{}",
                p.display()
            );
        }
    }

    #[test]
    fn grants_widen_by_what_they_name_and_never_lower_a_limit() {
        let tmp = std::env::temp_dir();
        let base = Profile::default_for(&place(&[], &tmp));
        let grants = crate::manifest::SandboxGrants {
            workspace: Some("write".into()),
            net: vec!["127.0.0.1:8080".into()],
            limits: Some(crate::manifest::LimitGrants {
                processes: Some(8),
                open_files: Some(1 << 16),
                address_space_mib: None,
            }),
            ..Default::default()
        };
        let ws = Path::new("/srv/ws");
        let mut at = place(&[], &tmp);
        at.workspace = Some(ws);
        let granted = Profile::default_for(&at).granted(&grants);
        assert!(granted.write.iter().any(|p| p == ws));
        assert_eq!(granted.net, Net::Ports(vec![8080]));
        assert_eq!(granted.limits.processes, base.limits.processes);
        assert_eq!(granted.limits.open_files, 1 << 16);
        let any = crate::manifest::SandboxGrants {
            net: vec!["*".into()],
            ..Default::default()
        };
        assert_eq!(base.granted(&any).net, Net::Any);
    }

    #[test]
    fn modes_read_as_written_and_nothing_else() {
        for mode in [Mode::Required, Mode::BestEffort, Mode::Off] {
            assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
        }
        let err = "requried".parse::<Mode>().unwrap_err().to_string();
        assert!(err.contains("required, best-effort, off"), "{err}");
    }
}
