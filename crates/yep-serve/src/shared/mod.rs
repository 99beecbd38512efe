//! One warm host per user, shared by every agent session.
//!
//! An agent spawns `yep mcp serve` once per session. Without sharing, each one builds its own
//! [`ExtensionHost`](yep_host::ExtensionHost), so N sessions of M packages run N×M server
//! processes. With it, `yep mcp serve` is a thin client ([`attach`]): it connects to the one
//! host of its home ([`host::serve`]) over a unix socket in the home, and passes the session's
//! requests on.
//!
//! - The socket is `<home>/run/host.sock`, in a directory only its owner may enter (0700),
//!   itself owner-only (0600). Both ends check the other's uid (`SO_PEERCRED`): same uid only.
//! - Every hello carries the home's attach key ([`attach_key`], `<home>/run/host.key`,
//!   owner-only), and the host serves nothing (no session, status or stop) to a connection
//!   without it. The uid check cannot tell yep from a server yep started: both run as the
//!   user, and Landlock (up to ABI 7) does not govern connecting to a pathname socket. But
//!   the sandbox keeps every server out of the yep home, so no process yep starts can read
//!   the key. (An abstract socket, which Landlock's scoping closes to sandboxed processes,
//!   would hold only on ABI 6 and later, and its name is open to every user to squat; seccomp
//!   cannot see the address a `connect` names.)
//! - The host never serves a session whose workspace is the root, the home or holds yep's
//!   home ([`yep_sandbox::workspace_withheld`]): a client in such a directory serves its
//!   session itself.
//! - The first line each way is the handshake ([`Hello`], [`Welcome`]). It carries the yep
//!   version: a host of another version is never used; the new client starts a host of its
//!   own in its place, and the old one exits once its last session has left.
//! - Starting is race-free: a client that finds no host takes `<home>/run/host.lock`, looks
//!   again, and only then starts one, so sessions that start together share one host.
//! - The host keeps one [`ExtensionHost`](yep_host::ExtensionHost) per workspace root: a server
//!   is told its workspace, so two workspaces never share a process, and a workspace's
//!   approvals (its `.mcp.json` servers, its `.claude/` project) reach its own sessions only.
//!   What is per session stays per session: each one is its own MCP client of that host
//!   (questions, cancels, progress, status and call ids, as over `--http`).
//! - The client hands the agent's output (its stdout, a pipe or a socket) to the host over
//!   the socket (`shared/handoff.rs`), so answers go from the host to the agent directly.
//!   The client still passes the agent's requests on, and the host tells it the id of each
//!   answer.
//! - If the host dies, the client answers the calls in flight with an error at once, and the
//!   next request starts a new host and replays the session's handshake to it (whose lines
//!   the client then passes both ways).

pub mod attach;
mod handoff;
pub mod host;

pub use attach::{AttachError, Starter, attach_stdio, control, hook, hook_if_running, starter};
pub use host::{HostConfig, serve};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The handshake's own version: a change to [`Hello`] or [`Welcome`] that an older peer
/// would misread bumps it.
pub const PROTOCOL: u32 = 1;

/// For tests only: the yep version a client and the host it starts claim, in place of this
/// build's, so a suite can stage a host "of another version".
pub const VERSION_ENV: &str = "YEP_SHARED_HOST_VERSION";

/// The longest handshake line either side reads.
const MAX_HELLO: usize = 64 * 1024;

/// The yep version this process speaks for ([`VERSION_ENV`], else this build's).
pub fn version() -> String {
    std::env::var(VERSION_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
}

/// The directory of the socket and the start lock: `<home>/run`, owner-only.
pub fn run_dir(home: &yep_host::store::Home) -> PathBuf {
    home.root.join("run")
}

/// The shared host's socket.
pub fn socket_path(home: &yep_host::store::Home) -> PathBuf {
    run_dir(home).join("host.sock")
}

/// The lock a client holds while it starts a host.
fn lock_path(home: &yep_host::store::Home) -> PathBuf {
    run_dir(home).join("host.lock")
}

/// The shared host's log: what it says as it starts, serves and stops.
pub fn log_path(home: &yep_host::store::Home) -> PathBuf {
    home.log_path("host")
}

/// The attach key's file: `<home>/run/host.key`, owner-only, in the owner-only run dir.
pub fn key_path(home: &yep_host::store::Home) -> PathBuf {
    run_dir(home).join("host.key")
}

/// The secret a client proves it may use the home's host with: 32 random bytes, as hex.
/// Never shown (its `Debug` is redacted) and compared in constant time.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Key(String);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

impl Key {
    /// Whether `other` is this key, in time that does not depend on where they differ.
    fn matches(&self, other: &Key) -> bool {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        a.len() == b.len()
            && !a.is_empty()
            && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }

    fn valid(text: &str) -> bool {
        text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// The home's attach key: read from [`key_path`], or made there once (the first client or
/// host to need it links a fresh one into place; a racing one reads the winner's). A key
/// file that is not this user's regular owner-only file is refused, never used.
pub fn attach_key(home: &yep_host::store::Home) -> std::io::Result<Key> {
    use std::io::{Read, Write};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let path = key_path(home);
    let read = || -> std::io::Result<Option<Key>> {
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file() || meta.uid() != my_uid() || meta.mode() & 0o077 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not an owner-only file of this user: remove it",
                    path.display()
                ),
            ));
        }
        let mut text = String::new();
        file.take(128).read_to_string(&mut text)?;
        Ok(Key::valid(text.trim()).then(|| Key(text.trim().to_string())))
    };
    if let Some(key) = read()? {
        return Ok(key);
    }
    let dir = run_dir(home);
    yep_host::store::fsutil::create_private_dir(&dir)?;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let fresh: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = dir.join(format!(".host.key.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let made = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(fresh.as_bytes())?;
        file.sync_all()?;
        match std::fs::hard_link(&tmp, &path) {
            // Another made one first: theirs is the key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match read()? {
                    Some(_) => Ok(()),
                    // A key file left unfinished: this one takes its place.
                    None => std::fs::rename(&tmp, &path),
                }
            }
            other => other,
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    made?;
    read()?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} holds no key", path.display()),
        )
    })
}

/// A client's environment: each UTF-8 variable's name, and a digest of its value (never the
/// value: a shell's environment holds credentials, and the host needs only to compare).
pub type SessionEnv = std::collections::BTreeMap<String, String>;

/// This process's environment, as a [`Hello`] carries it: names and digests of values.
pub fn session_env() -> SessionEnv {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .map(|(k, v)| {
            let digest = yep_host::store::hash::sha256_hex(format!("yep-env\0{v}").as_bytes());
            (k, digest)
        })
        .collect()
}

/// What a terminal says of itself alone: two sessions that differ only in these share a host.
const DISPLAY_ONLY: [&str; 3] = ["TERM", "COLORTERM", "NO_COLOR"];

/// The variables a server of this process can see whose values in `session` are not this
/// process's own: [`yep_sandbox::ENV_ALLOWED`] (`PATH` first among them) but what only
/// describes a terminal (`DISPLAY_ONLY`), the locale's `LC_*` and every variable a server's
/// definition has named (`${VAR}`). Empty when a host started with this process's environment
/// may serve `session`.
pub fn env_differs(session: &SessionEnv) -> Vec<String> {
    let mine = session_env();
    let mut names: std::collections::BTreeSet<String> = yep_sandbox::ENV_ALLOWED
        .iter()
        .filter(|n| !DISPLAY_ONLY.contains(n))
        .map(|n| n.to_string())
        .collect();
    names.extend(yep_host::runtime::mcp::host_vars_read());
    let locale = |env: &SessionEnv| -> Vec<String> {
        env.keys()
            .filter(|k| k.starts_with("LC_"))
            .cloned()
            .collect()
    };
    names.extend(locale(session));
    names.extend(locale(&mine));
    names
        .into_iter()
        .filter(|n| mine.get(n) != session.get(n))
        .collect()
}

/// The client's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// [`PROTOCOL`].
    pub yep_shared_host: u32,
    /// The client's yep version ([`version`]).
    pub version: String,
    /// The home's attach key ([`attach_key`]): without it the host serves nothing.
    #[serde(default)]
    pub key: Key,
    /// A session's or event's environment ([`session_env`]): the host serves it only when
    /// the variables its servers see have the values the host's own have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<SessionEnv>,
    /// What the connection is for.
    #[serde(flatten)]
    pub purpose: Purpose,
}

/// What a connection is for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "purpose", rename_all = "snake_case")]
pub enum Purpose {
    /// An MCP session in `workspace` follows the handshake.
    Session {
        workspace: PathBuf,
        /// `--deferred`: list only the always-loaded tools and `search_tools`.
        #[serde(default)]
        deferred: bool,
        /// The client hands the agent's output over after the welcome (one byte carrying
        /// the descriptor): the host writes the session's lines to it, and the id of each
        /// answer it wrote to the socket, one JSON id per line.
        #[serde(default)]
        hand_off: bool,
    },
    /// One event of an agent that runs its own tools (`yep hook <agent>`) in `workspace`: the
    /// client sends one [`yep_host::runtime::AgentEvent`] line, the host answers one
    /// [`Answered`] line and closes.
    Hook {
        workspace: PathBuf,
        /// The agent's session, as its hooks know it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
    /// Answer with [`HostStatus`] and close.
    Status,
    /// Stop the host: its sessions end, its servers stop.
    Stop,
}

/// The host's answer to a [`Purpose::Hook`] event.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answered {
    /// What the chain decided.
    Answer(Box<yep_host::runtime::AgentAnswer>),
    /// Why the host could not run it.
    Error(String),
}

/// The host's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Welcome {
    /// The host's yep version: a client of another one does not go on.
    pub version: String,
    /// The host's process id.
    pub pid: u32,
    /// Why the host will not serve this connection, when it will not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the client should serve this session (or event) with a host of its own: its
    /// environment is not the host's in a variable the host's servers see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_host: Option<String>,
    /// The answer to [`Purpose::Status`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<HostStatus>,
}

/// What `yep host status` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostStatus {
    pub version: String,
    pub pid: u32,
    /// Seconds since the host started.
    pub uptime_secs: u64,
    /// The host process's resident memory, in KiB.
    pub rss_kib: Option<u64>,
    /// Sessions attached now.
    pub sessions: usize,
    /// How long a server may sit unused before it is stopped, in seconds (`None`: never).
    pub idle_stop_secs: Option<u64>,
    /// With no session attached: seconds until the host exits.
    pub exits_in_secs: Option<u64>,
    /// One per workspace root the host serves.
    pub workspaces: Vec<WorkspaceStatus>,
}

/// One workspace's part of the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceStatus {
    pub root: PathBuf,
    /// Sessions attached from it now.
    pub sessions: usize,
    /// Its servers, running or not.
    pub servers: Vec<ServerStatus>,
}

/// One server of a workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerStatus {
    pub name: String,
    /// `running`, `idle` (stopped for want of use; it starts on the next use), `not started`,
    /// `failed` or `stopped`.
    pub state: String,
    pub pid: Option<u32>,
    /// Its resident memory, in KiB, when it runs.
    pub rss_kib: Option<u64>,
    /// Seconds since it was last used.
    pub idle_secs: Option<u64>,
    /// Seconds until it is stopped for want of use.
    pub stops_in_secs: Option<u64>,
}

/// The resident memory of process `pid`, in KiB (`VmRSS` in `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A lock, taken even when a thread panicked holding it (the data is plain counts and maps).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process's effective uid.
fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether the process at the other end of `stream` runs as this process's uid: an error of
/// kind `PermissionDenied` saying whose it is, when it does not.
fn same_user(stream: &tokio::net::UnixStream) -> std::io::Result<()> {
    let cred = stream.peer_cred()?;
    if cred.uid() == my_uid() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "the peer runs as uid {}, not {}: only the same user may use a shared host",
            cred.uid(),
            my_uid()
        ),
    ))
}

/// Read one handshake line (at most [`MAX_HELLO`] bytes) from `reader`.
async fn read_hello<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Vec<u8>> {
    read_line(reader, MAX_HELLO).await
}

/// Read one line of at most `max` bytes from `reader`, without its newline.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncBufReadExt;
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the connection closed before a whole line",
            ));
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if line.len() > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line is longer than {max} bytes"),
            ));
        }
        if done {
            line.pop();
            return Ok(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attach_key_is_made_once_kept_private_and_a_loose_one_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let home = yep_host::store::Home {
            root: tmp.path().to_path_buf(),
        };
        let made = attach_key(&home).unwrap();
        assert!(Key::valid(&made.0));
        assert_eq!(attach_key(&home).unwrap(), made);
        let path = key_path(&home);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(made.matches(&made.clone()));
        assert!(!made.matches(&Key::default()) && !Key::default().matches(&Key::default()));
        assert_eq!(format!("{made:?}"), "Key(…)");
        // One that others may read is never used.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = attach_key(&home).unwrap_err();
        assert!(e.to_string().contains("not an owner-only file"), "{e}");
        // One left empty by a crash is replaced.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let again = attach_key(&home).unwrap();
        assert!(Key::valid(&again.0) && again != made);
    }
}
