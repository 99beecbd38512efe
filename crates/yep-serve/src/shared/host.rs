//! The shared host itself (`yep host serve`, started by the first `yep mcp serve` that finds
//! none): it listens on the home's socket and serves each attached session as an MCP client
//! of its workspace's [`ExtensionHost`].

use super::{
    Answered, Hello, HostStatus, Key, PROTOCOL, Purpose, ServerStatus, SessionEnv, Welcome,
    WorkspaceStatus, attach_key, key_path, lock, read_hello, rss_kib, same_user, socket_path,
    version,
};
use crate::bridge::{AskClients, Bridge, Clients, StatusToClients};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use yep_host::runtime::{AgentEvent, ExtensionHost, HostOptions, SEARCH_TOOLS, Session};
use yep_host::store::Home;

/// How the shared host runs.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// How long a server may sit unused before it is stopped (`None`: never).
    pub idle_stop: Option<Duration>,
    /// How long the host stays up with no session attached, and a workspace's servers stay
    /// warm after its last session left.
    pub linger: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            idle_stop: Some(Duration::from_secs(600)),
            linger: Duration::from_secs(600),
        }
    }
}

/// Why [`serve`] did not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A host of this version already serves this home.
    #[error("a shared host of this version already serves this home (pid {0})")]
    AlreadyRunning(u32),
    /// The socket's directory is not the user's own, or not owner-only.
    #[error("{0}")]
    UnsafeDir(String),
    /// The attach key could not be read or made.
    #[error("the attach key {path}: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to listen on {path}: {source}")]
    Listen {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Serve `home`'s shared host until it is stopped ([`Purpose::Stop`]), or no session has
/// been attached for [`HostConfig::linger`], or another version's host took the socket and
/// the last session left. `ready` is called with this process's id once the socket listens.
pub async fn serve(
    home: Home,
    config: HostConfig,
    ready: impl FnOnce(u32),
) -> Result<(), ServeError> {
    let path = socket_path(&home);
    yep_sandbox::protect(&home.root);
    prepare_dir(&super::run_dir(&home))?;
    let key = attach_key(&home).map_err(|source| ServeError::Key {
        path: key_path(&home),
        source,
    })?;
    if let Some(pid) = running_here(&path, &key).await {
        return Err(ServeError::AlreadyRunning(pid));
    }
    let listener = listen(&path)?;
    let inode = inode(&path).unwrap_or(0);
    let shared = Arc::new(Shared {
        home,
        config,
        workspaces: Mutex::default(),
        sessions: AtomicUsize::new(0),
        last_left: Mutex::new(Instant::now()),
        started: Instant::now(),
        stop: CancellationToken::new(),
        path: path.clone(),
        inode,
        key,
    });
    ready(std::process::id());
    tracing::info!(
        "shared host {} (pid {}) serving {}",
        version(),
        std::process::id(),
        path.display()
    );
    let sweep_every =
        (shared.config.linger / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let mut sweep = tokio::time::interval(sweep_every);
    // A signal's stop is said in the log: it is where a session that lost the host points.
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int, mut hup) = (
        signal(SignalKind::terminate()).ok(),
        signal(SignalKind::interrupt()).ok(),
        signal(SignalKind::hangup()).ok(),
    );
    async fn received(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => _ = s.recv().await,
            None => std::future::pending().await,
        }
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(Arc::clone(&shared).connection(stream));
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shared.stop.cancelled() => break,
            _ = received(&mut term) => break tracing::warn!("stopping: SIGTERM received"),
            _ = received(&mut int) => break tracing::warn!("stopping: SIGINT received"),
            _ = received(&mut hup) => break tracing::warn!("stopping: SIGHUP received"),
            _ = sweep.tick() => {
                if shared.sweep().await {
                    break;
                }
            }
        }
    }
    drop(listener);
    if !shared.replaced() {
        let _ = std::fs::remove_file(&path);
    }
    let hosts: Vec<Arc<Workspace>> = lock(&shared.workspaces)
        .drain()
        .filter_map(|(_, cell)| cell.get().cloned())
        .collect();
    for w in hosts {
        w.close().await;
    }
    tracing::info!("shared host (pid {}) stopped", std::process::id());
    Ok(())
}

/// Make the socket's directory owner-only and check it is this user's: a directory someone
/// else planted could hold their socket.
fn prepare_dir(dir: &Path) -> Result<(), ServeError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let unsafe_dir = |why: String| ServeError::UnsafeDir(format!("{}: {why}", dir.display()));
    yep_host::store::fsutil::create_private_dir(dir)
        .map_err(|e| unsafe_dir(format!("could not make it owner-only: {e}")))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| unsafe_dir(e.to_string()))?;
    if !meta.is_dir() {
        return Err(unsafe_dir("not a directory".into()));
    }
    if meta.uid() != super::my_uid() {
        return Err(unsafe_dir(format!(
            "owned by uid {}, not this user ({}): remove it",
            meta.uid(),
            super::my_uid()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(unsafe_dir("group or others may enter it".into()));
    }
    Ok(())
}

/// The pid of a host of this version that answers on `path`, if one does.
async fn running_here(path: &Path, key: &Key) -> Option<u32> {
    let hello = Hello {
        yep_shared_host: PROTOCOL,
        version: version(),
        key: key.clone(),
        env: None,
        purpose: Purpose::Status,
    };
    let welcome = super::attach::ask(path, &hello).await.ok()?;
    (welcome.version == version()).then_some(welcome.pid)
}

/// Listen on `path`, owner-only: what was there (a dead host's socket, or one of another
/// version's, which keeps its sessions) is replaced.
fn listen(path: &Path) -> Result<UnixListener, ServeError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let failed = |source| ServeError::Listen {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(failed(std::io::Error::other(
                "something other than a socket is in its place; remove it",
            )));
        }
        std::fs::remove_file(path).map_err(failed)?;
    }
    let listener = UnixListener::bind(path).map_err(failed)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    Ok(listener)
}

fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// The host's state: its workspaces and who is attached.
struct Shared {
    home: Home,
    config: HostConfig,
    /// Each workspace root's host, once started (a cell still empty is starting). A session
    /// is counted under this lock, so the sweep never closes a host a session just got.
    workspaces: Mutex<HashMap<PathBuf, Starting>>,
    sessions: AtomicUsize,
    /// When the last session left (or the host started).
    last_left: Mutex<Instant>,
    started: Instant,
    stop: CancellationToken,
    path: PathBuf,
    /// The socket's inode as bound: another one at `path` means another host took over.
    inode: u64,
    /// The home's attach key: a hello without it is served nothing.
    key: Key,
}

/// A workspace's host, started once by whichever session comes first; the others wait for
/// it, and sessions of other workspaces do not.
type Starting = Arc<tokio::sync::OnceCell<Arc<Workspace>>>;

/// One session's hold on its workspace's host, from attach until it is dropped.
struct Hold {
    shared: Arc<Shared>,
    workspace: Arc<Workspace>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        *lock(&self.workspace.last_left) = Instant::now();
        self.workspace.sessions.fetch_sub(1, Ordering::AcqRel);
        *lock(&self.shared.last_left) = Instant::now();
        if self.shared.sessions.fetch_sub(1, Ordering::AcqRel) == 1 && self.shared.replaced() {
            tracing::info!("the last session left and another host took the socket");
            self.shared.stop.cancel();
        }
    }
}

/// One workspace root's host and the sessions attached to it.
struct Workspace {
    root: PathBuf,
    host: ExtensionHost,
    bridge: Bridge,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    sessions: AtomicUsize,
    last_left: Mutex<Instant>,
}

impl Workspace {
    async fn close(&self) {
        for task in &self.tasks {
            task.abort();
        }
        self.host.shutdown().await;
    }
}

impl Shared {
    /// Whether another host now listens at the socket's path (a new version's).
    fn replaced(&self) -> bool {
        inode(&self.path) != Some(self.inode)
    }

    /// Close the workspaces no session used for `linger`; whether the host should exit.
    async fn sweep(&self) -> bool {
        let linger = self.config.linger;
        let mut gone = Vec::new();
        lock(&self.workspaces).retain(|_, cell| {
            let Some(w) = cell.get() else {
                return true;
            };
            let keep =
                w.sessions.load(Ordering::Acquire) > 0 || lock(&w.last_left).elapsed() < linger;
            if !keep {
                gone.push(Arc::clone(w));
            }
            keep
        });
        for w in gone {
            tracing::info!("closing {}: no session for {:?}", w.root.display(), linger);
            w.close().await;
        }
        self.sessions.load(Ordering::Acquire) == 0
            && (self.replaced() || lock(&self.last_left).elapsed() >= linger)
    }

    /// Attach a session to workspace `root`'s host, started on its first session.
    async fn attach(self: &Arc<Self>, root: &Path) -> Result<Hold, yep_host::runtime::HostError> {
        loop {
            let cell = Arc::clone(
                lock(&self.workspaces)
                    .entry(root.to_path_buf())
                    .or_default(),
            );
            let started = cell.get_or_try_init(|| self.start_workspace(root)).await;
            let mut workspaces = lock(&self.workspaces);
            let current = workspaces.get(root).is_some_and(|c| Arc::ptr_eq(c, &cell));
            let w = match started {
                Ok(w) => Arc::clone(w),
                Err(e) => {
                    // A start that failed is tried again by the next session.
                    if current && cell.get().is_none() {
                        workspaces.remove(root);
                    }
                    return Err(e);
                }
            };
            if !current {
                // The sweep closed it between its start and now: start another.
                continue;
            }
            w.sessions.fetch_add(1, Ordering::AcqRel);
            self.sessions.fetch_add(1, Ordering::AcqRel);
            return Ok(Hold {
                shared: Arc::clone(self),
                workspace: w,
            });
        }
    }

    /// Start workspace `root`'s host.
    async fn start_workspace(
        &self,
        root: &Path,
    ) -> Result<Arc<Workspace>, yep_host::runtime::HostError> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let clients = Clients::default();
        let opts = HostOptions {
            // Reserved whether or not a session lists tools deferred: the host is shared.
            builtins: vec![SEARCH_TOOLS.to_string()],
            ask_sink: Some(Arc::new(AskClients(clients.clone()))),
            status_sink: Some(Arc::new(StatusToClients(clients.clone()))),
            idle_stop: self.config.idle_stop,
            // Contained as the home says, read when the workspace opens.
            supervisor: yep_host::supervisor::SupervisorOptions::for_home(&self.home),
            // As the home says too; a setting that is not a duration is the default, warned.
            mcp_list_deadline: yep_host::runtime::mcp_list_deadline_setting(&self.home)
                .unwrap_or_else(|e| {
                    tracing::warn!("{e}; the default is used");
                    HostOptions::default().mcp_list_deadline
                }),
            ..HostOptions::default()
        };
        let session = Session {
            id: format!(
                "yep-host-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            workspace_root: root.to_path_buf(),
        };
        let host = ExtensionHost::start(self.home.clone(), session, opts).await?;
        let bridge = Bridge::new(host.clone(), clients, false).await;
        let tasks = vec![
            crate::bridge::forward_changes(&bridge),
            crate::bridge::watch_home(&host, self.home.clone()),
        ];
        Ok(Arc::new(Workspace {
            root: root.to_path_buf(),
            host,
            bridge,
            tasks,
            sessions: AtomicUsize::new(0),
            last_left: Mutex::new(Instant::now()),
        }))
    }

    /// Serve one connection: its handshake, then what it is for.
    async fn connection(self: Arc<Self>, stream: UnixStream) {
        if let Err(why) = same_user(&stream) {
            tracing::warn!("refused a connection: {why}");
            return;
        }
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let line = match tokio::time::timeout(Duration::from_secs(5), read_hello(&mut reader)).await
        {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return tracing::debug!("a connection's handshake failed: {e}"),
            Err(_) => return tracing::debug!("a connection sent no handshake within 5 s"),
        };
        let mut welcome = Welcome {
            version: version(),
            pid: std::process::id(),
            error: None,
            own_host: None,
            status: None,
        };
        // Another version's client may ask for the status or a stop (`yep host stop` after an
        // upgrade), never for a session.
        let hello = match serde_json::from_slice::<Hello>(&line) {
            Ok(hello)
                if hello.yep_shared_host == PROTOCOL
                    && (hello.version == version()
                        || !matches!(hello.purpose, Purpose::Session { .. })) =>
            {
                hello
            }
            Ok(hello) => {
                welcome.error = Some(format!(
                    "this shared host is yep {} (handshake {PROTOCOL}); the client is yep {} (handshake {})",
                    version(),
                    yep_host::text::escape(&hello.version),
                    hello.yep_shared_host
                ));
                let _ = send(&mut write, &welcome).await;
                return;
            }
            Err(e) => {
                welcome.error = Some(format!("the handshake is not understood: {e}"));
                let _ = send(&mut write, &welcome).await;
                return;
            }
        };
        if !self.key.matches(&hello.key) {
            tracing::warn!(
                "refused a connection without the attach key (pid {}): only yep itself may use the shared host",
                stream_pid(&write).map_or("unknown".into(), |p| p.to_string())
            );
            welcome.error = Some(format!(
                "the hello does not carry this home's attach key ({}): only yep itself, run by this user, may use the shared host",
                key_path(&self.home).display()
            ));
            let _ = send(&mut write, &welcome).await;
            return;
        }
        let env = hello.env;
        match hello.purpose {
            Purpose::Status => {
                welcome.status = Some(self.status().await);
                let _ = send(&mut write, &welcome).await;
            }
            Purpose::Stop => {
                let _ = send(&mut write, &welcome).await;
                tracing::info!("asked to stop");
                self.stop.cancel();
            }
            Purpose::Hook { workspace, session } => {
                self.hook(reader, write, welcome, (workspace, env), session)
                    .await
            }
            Purpose::Session {
                workspace,
                deferred,
                hand_off,
            } => {
                let session = SessionAsked {
                    workspace,
                    env,
                    deferred,
                    hand_off,
                };
                self.session(reader, write, welcome, session).await;
            }
        }
    }

    /// Serve a session for the workspace `asked` names, over this connection (or, handed
    /// off, with the host writing to the agent itself), once the workspace is one it serves.
    async fn session(
        self: &Arc<Self>,
        reader: BufReader<tokio::net::unix::OwnedReadHalf>,
        mut write: tokio::net::unix::OwnedWriteHalf,
        welcome: Welcome,
        asked: SessionAsked,
    ) {
        let SessionAsked {
            workspace,
            env,
            deferred,
            hand_off,
        } = asked;
        let Some(hold) = self
            .hold(&mut write, welcome, &workspace, env.as_ref())
            .await
        else {
            return;
        };
        let bridge = hold.workspace.bridge.for_session(deferred);
        let served = match hand_off {
            false => crate::bridge::serve_on(bridge, reader, write).await,
            true => {
                let output = match handed_output(&reader).await {
                    Ok(output) => output,
                    Err(e) => {
                        return tracing::warn!(
                            "a session's hand-off failed, so it was hung up on: {e}"
                        );
                    }
                };
                let transport = super::handoff::Noting {
                    inner: rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, output),
                    notes: Arc::new(tokio::sync::Mutex::new(write)),
                };
                crate::bridge::serve_transport(bridge, transport).await
            }
        };
        if let Err(e) = served {
            tracing::debug!("a session ended: {e}");
        }
        drop(hold);
    }

    /// Hold workspace `workspace`'s host (started on its first session) and send the
    /// welcome; `None` once the welcome said why not. A session whose environment `env` is
    /// not this host's where a server would see it is told to serve itself
    /// ([`Welcome::own_host`]): a server is never started for one session with another's
    /// `PATH` or secrets, and one that failed for want of a session's `PATH` is not that
    /// session's failure.
    async fn hold(
        self: &Arc<Self>,
        write: &mut tokio::net::unix::OwnedWriteHalf,
        mut welcome: Welcome,
        workspace: &Path,
        env: Option<&SessionEnv>,
    ) -> Option<Hold> {
        let shown = || yep_host::text::escape(&workspace.display().to_string()).into_owned();
        let refused = if !workspace.is_absolute() || !workspace.is_dir() {
            Some(format!("the workspace {} is not a directory", shown()))
        } else {
            yep_sandbox::workspace_withheld(workspace).map(|why| {
                format!(
                    "the workspace {} {why}: a shared host never serves it",
                    shown()
                )
            })
        };
        let hold = match refused {
            Some(why) => Err(why),
            None => self
                .attach(workspace)
                .await
                .map_err(|e| yep_host::error::report(&e)),
        };
        // After the start: its servers' definitions name the variables that matter too.
        let differs = match (&hold, env) {
            (Ok(_), Some(env)) => super::env_differs(env),
            _ => Vec::new(),
        };
        if !differs.is_empty() {
            drop(hold);
            let what = format!("environment ({})", differs.join(", "));
            tracing::info!(
                "a session of {} has another {what}: it is served by a host of its own",
                shown()
            );
            welcome.own_host = Some(what);
            let _ = send(write, &welcome).await;
            return None;
        }
        match hold {
            Ok(hold) => send(write, &welcome).await.is_ok().then_some(hold),
            Err(why) => {
                welcome.error = Some(why);
                let _ = send(write, &welcome).await;
                None
            }
        }
    }

    /// Run one agent event ([`Purpose::Hook`]) on `workspace`'s host: its line in, the
    /// chain's answer out. The hold keeps the workspace warm as a session does.
    async fn hook(
        self: &Arc<Self>,
        mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
        mut write: tokio::net::unix::OwnedWriteHalf,
        welcome: Welcome,
        (workspace, env): (PathBuf, Option<SessionEnv>),
        session: Option<String>,
    ) {
        let Some(hold) = self
            .hold(&mut write, welcome, &workspace, env.as_ref())
            .await
        else {
            return;
        };
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            super::read_line(&mut reader, crate::agents::MAX_INPUT),
        )
        .await;
        let answered = match read {
            Err(_) => Answered::Error("no event within 10 s".into()),
            Ok(Err(e)) => Answered::Error(format!("the event could not be read: {e}")),
            Ok(Ok(line)) => match serde_json::from_slice::<AgentEvent>(&line) {
                Err(e) => Answered::Error(format!("the event is not understood: {e}")),
                Ok(event) => {
                    let host = &hold.workspace.host;
                    Answered::Answer(Box::new(host.agent_event_in(session, event).await))
                }
            },
        };
        let _ = send(&mut write, &answered).await;
        drop(hold);
    }

    async fn status(&self) -> HostStatus {
        let sessions = self.sessions.load(Ordering::Acquire);
        let exits_in = (sessions == 0).then(|| {
            self.config
                .linger
                .saturating_sub(lock(&self.last_left).elapsed())
                .as_secs()
        });
        let mut workspaces: Vec<WorkspaceStatus> = Vec::new();
        let attached: Vec<Arc<Workspace>> = lock(&self.workspaces)
            .values()
            .filter_map(|cell| cell.get().cloned())
            .collect();
        for w in attached {
            let servers = w
                .host
                .servers()
                .into_iter()
                .map(|s| ServerStatus {
                    rss_kib: s.pid.and_then(rss_kib),
                    state: serde_json::to_value(s.state)
                        .ok()
                        .and_then(|v| v.as_str().map(|t| t.replace('_', " ")))
                        .unwrap_or_default(),
                    name: match s.mcp {
                        true => format!("mcp.{}", s.name),
                        false => s.name,
                    },
                    pid: s.pid,
                    idle_secs: s.idle.map(|d| d.as_secs()),
                    stops_in_secs: s.stops_in.map(|d| d.as_secs()),
                })
                .collect();
            workspaces.push(WorkspaceStatus {
                root: w.root.clone(),
                sessions: w.sessions.load(Ordering::Acquire),
                servers,
            });
        }
        workspaces.sort_by(|a, b| a.root.cmp(&b.root));
        HostStatus {
            version: version(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            rss_kib: rss_kib(std::process::id()),
            sessions,
            idle_stop_secs: self.config.idle_stop.map(|d| d.as_secs()),
            exits_in_secs: exits_in,
            workspaces,
        }
    }
}

/// The agent's output a session's client hands over right after the welcome.
async fn handed_output(
    reader: &BufReader<tokio::net::unix::OwnedReadHalf>,
) -> std::io::Result<super::handoff::Handed> {
    if !reader.buffer().is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the client sent lines before its output",
        ));
    }
    let fd = tokio::time::timeout(
        Duration::from_secs(5),
        super::handoff::receive_fd(reader.get_ref().as_ref()),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no output handed over within 5 s",
        )
    })??;
    super::handoff::Handed::new(fd)
}

/// The process id at the other end of a connection, for the log.
fn stream_pid(write: &tokio::net::unix::OwnedWriteHalf) -> Option<i32> {
    let stream: &UnixStream = write.as_ref();
    stream.peer_cred().ok()?.pid()
}

/// Write `welcome` as one line.
async fn send<W: tokio::io::AsyncWrite + Unpin>(
    write: &mut W,
    what: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(what).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await
}

/// What a `session` hello asks for: the workspace, whether its tools are deferred, and
/// whether the host writes to the agent itself.
struct SessionAsked {
    workspace: PathBuf,
    env: Option<SessionEnv>,
    deferred: bool,
    hand_off: bool,
}
