//! The client's side: `yep mcp serve` attached to the home's shared host, passing its
//! session's requests on (and the host's lines back, when it could not hand the agent's output
//! over), and the calls in flight answered if the host dies.

use super::{
    Hello, PROTOCOL, Purpose, Welcome, lock, lock_path, read_hello, same_user, socket_path, version,
};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use yep_host::store::Home;

/// The longest line passed through either way (a longer one is dropped, and answered when it
/// came from the agent).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// How long a started host has to say it listens.
const START_WAIT: Duration = Duration::from_secs(15);

/// The size past which the host's log is rotated when a host starts.
const LOG_CAP: u64 = 8 * 1024 * 1024;

/// How long a client waits for another to finish starting a host.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Why a session could not attach.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// No host could be started: why, with the host log's last lines.
    #[error("could not start the shared host: {0}")]
    Start(String),
    /// The host would not serve this session: its reason.
    #[error("the shared host refused this session: {0}")]
    Refused(String),
    /// A session the shared host never serves (its workspace holds the home): why.
    #[error("{0}: a shared host never serves it")]
    Unshared(String),
    /// A session whose environment is not the shared host's where its servers would see it:
    /// the variables that differ. Its caller serves it with a host of its own.
    #[error("the shared host runs with another {0} than this session's")]
    OtherEnv(String),
    #[error("the shared host's socket: {0}")]
    Io(#[from] std::io::Error),
}

/// How a client starts a host: the command that runs [`super::serve`] for this home and
/// prints `ready` on its stdout once it listens (`yep --home <home> host serve`).
pub type Starter = dyn Fn() -> std::process::Command + Send + Sync;

/// The [`Starter`] of `home`'s shared host with the `yep` binary at `yep`:
/// `yep --home <home> host serve`, detached (it is meant to outlive the session or event that
/// started it, and is reaped by init once that is gone).
pub fn starter(yep: PathBuf, home: &Home) -> Box<Starter> {
    let root = home.root.clone();
    #[allow(clippy::disallowed_methods)]
    let start = move || {
        let mut cmd = std::process::Command::new(&yep);
        cmd.arg("--home").arg(&root).args(["host", "serve"]);
        cmd
    };
    Box::new(start)
}

/// What one connection attempt found.
enum Found {
    Attached(BufReader<OwnedReadHalf>, OwnedWriteHalf),
    /// No host, a dead one, or one that hung up: start one.
    Nobody(String),
    /// A host of another version: start one of ours in its place.
    OtherVersion(String),
    /// A host of our version that will not serve this: its reason.
    Refused(String),
    /// A host of our version whose environment is not this client's: what differs.
    OtherEnv(String),
}

/// Ask the host at `path` something ([`Purpose::Status`], [`Purpose::Stop`]): its welcome.
pub(crate) async fn ask(path: &Path, hello: &Hello) -> std::io::Result<Welcome> {
    let (_, _, welcome) = handshake(path, hello).await?;
    Ok(welcome)
}

/// Connect to `path`, check the peer is this user, and trade the handshake.
async fn handshake(
    path: &Path,
    hello: &Hello,
) -> std::io::Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Welcome)> {
    let stream = UnixStream::connect(path).await?;
    same_user(&stream)?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(hello).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    let mut reader = BufReader::new(read);
    let answer = tokio::time::timeout(Duration::from_secs(10), read_hello(&mut reader))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no handshake within 10 s")
        })??;
    let welcome: Welcome = serde_json::from_slice(&answer)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok((reader, write, welcome))
}

async fn try_once(path: &Path, hello: &Hello) -> Found {
    match handshake(path, hello).await {
        Err(e) => Found::Nobody(e.to_string()),
        Ok((_, _, welcome)) if welcome.version != hello.version => {
            Found::OtherVersion(welcome.version)
        }
        Ok((_, _, Welcome { error: Some(e), .. })) => Found::Refused(e),
        Ok((
            _,
            _,
            Welcome {
                own_host: Some(e), ..
            },
        )) => Found::OtherEnv(e),
        Ok((reader, writer, _)) => Found::Attached(reader, writer),
    }
}

/// The home's host, attached with `hello`: the running one, else one this call starts.
async fn connect(
    home: &Home,
    hello: &Hello,
    start: &Starter,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf), AttachError> {
    let path = socket_path(home);
    match try_once(&path, hello).await {
        Found::Attached(r, w) => return Ok((r, w)),
        Found::Refused(e) => return Err(AttachError::Refused(e)),
        Found::OtherEnv(e) => return Err(AttachError::OtherEnv(e)),
        Found::Nobody(_) | Found::OtherVersion(_) => {}
    }
    yep_host::store::fsutil::create_private_dir(&super::run_dir(home))?;
    let _lock = StartLock::take(&lock_path(home)).await?;
    // Another client may have started one while this one waited.
    let why = match try_once(&path, hello).await {
        Found::Attached(r, w) => return Ok((r, w)),
        Found::Refused(e) => return Err(AttachError::Refused(e)),
        Found::OtherEnv(e) => return Err(AttachError::OtherEnv(e)),
        Found::Nobody(why) => why,
        Found::OtherVersion(v) => {
            tracing::info!(
                "the shared host is yep {v}; starting one of yep {}",
                hello.version
            );
            format!("a host of yep {v}")
        }
    };
    tracing::debug!("starting the shared host ({why})");
    spawn_host(home, start).await?;
    match try_once(&path, hello).await {
        Found::Attached(r, w) => Ok((r, w)),
        Found::Refused(e) => Err(AttachError::Refused(e)),
        Found::OtherEnv(e) => Err(AttachError::OtherEnv(e)),
        Found::Nobody(e) | Found::OtherVersion(e) => Err(AttachError::Start(format!(
            "it started but does not answer: {e}"
        ))),
    }
}

/// An exclusive `flock` on the start lock, released when dropped (or the process dies).
struct StartLock {
    _file: std::fs::File,
}

impl StartLock {
    async fn take(path: &Path) -> Result<StartLock, AttachError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)?;
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock on a descriptor this function owns; LOCK_NB never blocks.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(StartLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err.into());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(AttachError::Start(format!(
                    "another session has been starting it for {} s ({} is locked)",
                    LOCK_WAIT.as_secs(),
                    path.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Start a host with `start`, detached from this session, and wait for it to listen.
async fn spawn_host(home: &Home, start: &Starter) -> Result<(), AttachError> {
    use std::os::unix::process::CommandExt;
    let log = super::log_path(home);
    if let Some(dir) = log.parent() {
        yep_host::store::fsutil::create_private_dir(dir)?;
    }
    // Kept to two files of at most LOG_CAP each: the host says little, but it runs for long.
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > LOG_CAP) {
        let _ = std::fs::rename(&log, log.with_extension("log.1"));
    }
    let stderr = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&log)?
    };
    let mut cmd = start();
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr);
    // SAFETY: setsid is async-signal-safe; the child calls nothing else before exec. In a
    // session of its own, the agent's terminal and process group signals do not reach it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| AttachError::Start(format!("failed to run it: {e}")))?;
    let stdout = child.stdout.take();
    let said = async {
        let mut out = String::new();
        if let Some(mut stdout) = stdout {
            let mut buf = [0u8; 256];
            while !out.contains('\n') {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        }
        out
    };
    match tokio::time::timeout(START_WAIT, said).await {
        Ok(line) if line.starts_with("ready") => {
            // Reaped by whoever outlives it: it is in a session of its own now.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            Ok(())
        }
        Ok(_) => {
            let status = child.wait().await.ok();
            Err(AttachError::Start(format!(
                "it exited ({}) before it listened; {}",
                status.map_or_else(|| "unknown status".into(), |s| s.to_string()),
                log_tail(&log)
            )))
        }
        Err(_) => Err(AttachError::Start(format!(
            "it did not listen within {} s; {}",
            START_WAIT.as_secs(),
            log_tail(&log)
        ))),
    }
}

/// The host log's last lines, escaped, for an error.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<String> = lines
        .into_iter()
        .rev()
        .map(|l| yep_host::text::escape(l).into_owned())
        .collect();
    match tail.is_empty() {
        true => format!("its log ({}) is empty", log.display()),
        false => format!("its log ({}) ends: {}", log.display(), tail.join(" | ")),
    }
}

/// How long `yep hook` waits for the chain's answer: under the 120 s the agents are told to
/// give the command, so the agent hears yep's own refusal, not its timeout.
const HOOK_WAIT: Duration = Duration::from_secs(110);

/// One event of an agent that runs its own tools, run by the chain of the shared host of
/// `workspace` (started if none runs): its answer.
pub async fn hook(
    home: &Home,
    workspace: PathBuf,
    session: Option<String>,
    event: &yep_host::runtime::AgentEvent,
    start: &Starter,
) -> Result<yep_host::runtime::AgentAnswer, AttachError> {
    let hello = hook_hello(home, workspace, session)?;
    let (reader, writer) = connect(home, &hello, start).await?;
    exchange(reader, writer, event).await
}

/// [`hook`] on the host that runs for this home, never starting one: `None` when none runs
/// (the status line asks often, and has nothing to show of a host that is not there).
pub async fn hook_if_running(
    home: &Home,
    workspace: PathBuf,
    event: &yep_host::runtime::AgentEvent,
) -> Result<Option<yep_host::runtime::AgentAnswer>, AttachError> {
    let path = socket_path(home);
    if !path.exists() {
        return Ok(None);
    }
    let hello = hook_hello(home, workspace, None)?;
    match try_once(&path, &hello).await {
        Found::Attached(reader, writer) => exchange(reader, writer, event).await.map(Some),
        Found::Refused(e) => Err(AttachError::Refused(e)),
        Found::Nobody(_) | Found::OtherVersion(_) | Found::OtherEnv(_) => Ok(None),
    }
}

/// The hello of a [`Purpose::Hook`] connection for `workspace`.
fn hook_hello(
    home: &Home,
    workspace: PathBuf,
    session: Option<String>,
) -> Result<Hello, AttachError> {
    yep_sandbox::protect(&home.root);
    if let Some(why) = yep_sandbox::workspace_withheld(&workspace) {
        return Err(AttachError::Unshared(format!(
            "the workspace {} {why}",
            yep_host::text::escape(&workspace.display().to_string())
        )));
    }
    Ok(Hello {
        yep_shared_host: PROTOCOL,
        version: version(),
        key: super::attach_key(home)?,
        env: Some(super::session_env()),
        purpose: Purpose::Hook { workspace, session },
    })
}

/// Send `event` on an attached hook connection and read the host's answer.
async fn exchange(
    mut reader: BufReader<OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
    event: &yep_host::runtime::AgentEvent,
) -> Result<yep_host::runtime::AgentAnswer, AttachError> {
    let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    line.push(b'\n');
    writer.write_all(&line).await?;
    writer.flush().await?;
    let answer = tokio::time::timeout(
        HOOK_WAIT,
        super::read_line(&mut reader, crate::agents::MAX_INPUT),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", HOOK_WAIT.as_secs()),
        )
    })??;
    match serde_json::from_slice(&answer) {
        Ok(super::Answered::Answer(answer)) => Ok(*answer),
        Ok(super::Answered::Error(why)) => Err(AttachError::Refused(why)),
        Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e).into()),
    }
}

/// Ask the home's running host for its status or to stop, without starting one: `None` when
/// none answers.
pub async fn control(home: &Home, purpose: Purpose) -> Result<Option<Welcome>, AttachError> {
    if !socket_path(home).exists() {
        return Ok(None);
    }
    let hello = Hello {
        yep_shared_host: PROTOCOL,
        version: version(),
        key: super::attach_key(home)?,
        env: None,
        purpose,
    };
    match handshake(&socket_path(home), &hello).await {
        Ok((_, _, welcome)) => Ok(Some(welcome)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The parts of a JSON-RPC line the client looks at.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
}

fn peek(line: &[u8]) -> Option<Peek<'_>> {
    serde_json::from_slice(line).ok()
}

/// What both directions share: whether a host is attached, and the agent's requests it has
/// not answered yet (their ids, as compact JSON text: [`id_key`]).
#[derive(Default)]
struct Link {
    up: bool,
    waiting: HashMap<String, usize>,
}

impl Link {
    /// One more request `id` is waiting (an agent may use an id again once it was answered,
    /// and the host's note of that answer can come after the new request).
    fn wait(&mut self, id: String) {
        *self.waiting.entry(id).or_default() += 1;
    }

    fn answered(&mut self, id: &str) {
        if let Some(n) = self.waiting.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                self.waiting.remove(id);
            }
        }
    }
}

/// A request id as one spelling: compact JSON (`1`, `"a"`), however the agent or the host
/// wrote it.
fn id_key(raw: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(raw)
        .ok()
        .map(|v| v.to_string())
}

type Out = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// Serve this process's stdin and stdout as a session of the home's shared host, for
/// `workspace`: attached first (a host started if none runs), then every line passed
/// through until the agent closes stdin. Fails before reading stdin when no host can be
/// attached, so the caller can serve the session itself instead.
pub async fn attach_stdio(
    home: &Home,
    workspace: PathBuf,
    deferred: bool,
    start: &Starter,
) -> Result<(), AttachError> {
    // Never for a workspace the host would refuse: this session is served by its caller.
    yep_sandbox::protect(&home.root);
    if let Some(why) = yep_sandbox::workspace_withheld(&workspace) {
        return Err(AttachError::Unshared(format!(
            "the workspace {} {why}",
            yep_host::text::escape(&workspace.display().to_string())
        )));
    }
    let key = super::attach_key(home)?;
    let env = super::session_env();
    let session = |hand_off| Hello {
        yep_shared_host: PROTOCOL,
        version: version(),
        key: key.clone(),
        env: Some(env.clone()),
        purpose: Purpose::Session {
            workspace: workspace.clone(),
            deferred,
            hand_off,
        },
    };
    // The agent's output goes to the host when it can, so answers skip this process. A host
    // started after the first died is passed its lines by this process instead.
    let output = super::handoff::agent_output();
    let (reader, writer) = connect(home, &session(output.is_some()), start).await?;
    if let Some(fd) = &output {
        super::handoff::send_fd(writer.as_ref(), fd).await?;
    }
    let first = match output {
        Some(_) => Attached::Handed(HandedOff::new(reader, writer)?),
        None => Attached::Relay(reader, writer),
    };
    drop(output);
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let out: Out = Arc::new(tokio::sync::Mutex::new(Box::new(stdout)));
    pass_through(home, session(false), start, stdin, out, first).await;
    Ok(())
}

/// A connection to the host, as the first one is made.
enum Attached {
    /// The host passes its lines back on the socket.
    Relay(BufReader<OwnedReadHalf>, OwnedWriteHalf),
    /// The host writes to the agent itself.
    Handed(HandedOff),
}

/// The way to the host for the agent's lines.
enum ToHost {
    /// The host passes its lines back on the socket (read by the other direction's task).
    Relay(OwnedWriteHalf),
    /// The host writes to the agent itself.
    Handed(HandedOff),
    /// The host is gone, or the write to it failed and its end is awaited.
    Gone,
}

/// The socket while the host writes to the agent itself. It is off this process's reactor
/// and written to blocking, so neither the host reading a request nor its note of an answer
/// wakes this process: the notes are read as each request passes, and all of them once a
/// thread sees the host hang up.
struct HandedOff {
    socket: std::os::unix::net::UnixStream,
    /// Note bytes read past the last whole line.
    partial: Vec<u8>,
    hangup: tokio::sync::oneshot::Receiver<()>,
}

impl HandedOff {
    fn new(reader: BufReader<OwnedReadHalf>, writer: OwnedWriteHalf) -> std::io::Result<Self> {
        let partial = reader.buffer().to_vec();
        let socket = reader
            .into_inner()
            .reunite(writer)
            .map_err(std::io::Error::other)?
            .into_std()?;
        socket.set_nonblocking(false)?;
        let watched = socket.try_clone()?;
        let (hung_up, hangup) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("yep-attach-hangup".into())
            .spawn(move || {
                wait_for_hangup(&watched);
                let _ = hung_up.send(());
            })?;
        Ok(HandedOff {
            socket,
            partial,
            hangup,
        })
    }

    /// Take the notes the host has written so far, without waiting: each id answered. At
    /// most one read's worth and [`MAX_NOTE`] are held at a time, however much is there.
    fn take_notes(&mut self, link: &Mutex<Link>) {
        use nix::sys::socket::{MsgFlags, recv};
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = recv(self.socket.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
            self.partial.extend_from_slice(&buf[..n]);
            if let Some(i) = self.partial.iter().rposition(|b| *b == b'\n') {
                let mut link = lock(link);
                for note in self.partial[..i].split(|b| *b == b'\n') {
                    if let Some(id) = id_key(note) {
                        link.answered(&id);
                    }
                }
                self.partial.drain(..=i);
            }
            // A note is an id: one this long is not one.
            if self.partial.len() > MAX_NOTE {
                self.partial.clear();
            }
        }
    }

    /// The host hung up: its last notes taken, and every request it did not answer
    /// answered with an error.
    async fn finish(mut self, link: &Mutex<Link>, out: &Out, log: &Path) {
        self.take_notes(link);
        fail_waiting(link, out, log).await;
    }
}

/// The longest note (an answered request's id) read.
const MAX_NOTE: usize = 64 * 1024;

/// Block until the other end of `socket` hangs up (closes, or shuts its writing down).
/// Only the hang-up is asked for, so the notes the host writes never wake this thread.
fn wait_for_hangup(socket: &std::os::unix::net::UnixStream) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    loop {
        // A full close is reported as a hang-up whatever is asked for; Linux also reports the
        // host shutting its writing down.
        #[cfg(target_os = "linux")]
        let asked = PollFlags::from_bits_retain(libc::POLLRDHUP);
        #[cfg(not(target_os = "linux"))]
        let asked = PollFlags::empty();
        let mut fds = [PollFd::new(socket.as_fd(), asked)];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// The session's two directions: agent → host here, host → agent (or the host's notes of
/// what it answered) on its own task. `hello` attaches again after the host died.
async fn pass_through(
    home: &Home,
    hello: Hello,
    start: &Starter,
    stdin: impl AsyncRead + Unpin,
    out: Out,
    first: Attached,
) {
    let link = Arc::new(Mutex::new(Link {
        up: true,
        waiting: HashMap::new(),
    }));
    let log = super::log_path(home);
    let (readers, mut next_reader) = tokio::sync::mpsc::unbounded_channel();
    let mut to_host = match first {
        Attached::Relay(reader, writer) => {
            let _ = readers.send(reader);
            ToHost::Relay(writer)
        }
        Attached::Handed(handed) => ToHost::Handed(handed),
    };
    let back = {
        let (link, out, log) = (Arc::clone(&link), Arc::clone(&out), super::log_path(home));
        tokio::spawn(async move {
            while let Some(reader) = next_reader.recv().await {
                to_agent(reader, &link, &out, &log).await;
            }
        })
    };
    let mut lines = Lines::new(stdin);
    // The session's handshake, replayed to a host started after the first died.
    let (mut initialize, mut initialized): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    loop {
        let next = match &mut to_host {
            ToHost::Handed(handed) => tokio::select! {
                next = lines.next() => Some(next),
                _ = &mut handed.hangup => None,
            },
            _ => Some(lines.next().await),
        };
        let Some(next) = next else {
            if let ToHost::Handed(handed) = std::mem::replace(&mut to_host, ToHost::Gone) {
                handed.finish(&link, &out, &log).await;
            }
            continue;
        };
        let line = match next {
            Ok(Some(Line::Whole(line))) => line,
            Ok(Some(Line::TooLong)) => {
                too_long(&to_host, &out).await;
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        let (id, method, request) = classify(&line);
        let up = lock(&link).up;
        if !up {
            // A notification or an answer meant for the host that died goes nowhere.
            if !request {
                continue;
            }
            match reconnect(
                home,
                &hello,
                start,
                initialize.as_deref(),
                initialized.as_deref(),
            )
            .await
            {
                Ok((reader, w)) => {
                    to_host = ToHost::Relay(w);
                    lock(&link).up = true;
                    let _ = readers.send(reader);
                }
                Err(e) => {
                    let message = format!(
                        "yep's shared host is gone and a new one could not be started: {}",
                        yep_host::text::escape(&e.to_string())
                    );
                    let error = error_line(id.as_deref().unwrap_or("null"), -32603, &message);
                    let _ = write_out(&out, &error).await;
                    continue;
                }
            }
        }
        match method.as_deref() {
            Some("initialize") => initialize = Some(line.clone()),
            Some("notifications/initialized") => initialized = Some(line.clone()),
            _ => {}
        }
        if let Some(id) = id.filter(|_| method.is_some()) {
            let mut link = lock(&link);
            if link.up {
                link.wait(id);
            }
        }
        send(&mut to_host, &line, &link).await;
    }
    // The agent closed stdin: the session ends, the host's answers still in flight go out.
    close(to_host, &link, &out, &log).await;
    drop(readers);
    let _ = tokio::time::timeout(Duration::from_secs(5), back).await;
}

/// A line from the agent too long to pass on, dropped: said to the agent, or on stderr while
/// the host writes to the agent (a line from here could split one of its own).
async fn too_long(to_host: &ToHost, out: &Out) {
    let said = "a message longer than 64 MiB was dropped";
    match matches!(to_host, ToHost::Handed(_)) {
        true => tracing::warn!("{said}"),
        false => {
            let _ = write_out(out, &error_line("null", -32600, said)).await;
        }
    }
}

/// A line from the agent: its id (as a key), its method, and whether it is a request (a
/// batch, an array from a client of an earlier MCP revision, is passed on, but its ids are
/// not followed).
fn classify(line: &[u8]) -> (Option<String>, Option<String>, bool) {
    let seen = peek(line);
    let id = seen
        .as_ref()
        .and_then(|p| p.id)
        .and_then(|id| id_key(id.get().as_bytes()));
    let method = seen
        .as_ref()
        .and_then(|p| p.method.as_deref().map(str::to_string));
    let request = (id.is_some() && method.is_some()) || line.first() == Some(&b'[');
    (id, method, request)
}

/// Pass `line` on to the host. A failed write is the host gone: the other direction (or the
/// hang-up) sees it and answers.
async fn send(to_host: &mut ToHost, line: &[u8], link: &Mutex<Link>) {
    let sent = match to_host {
        ToHost::Relay(w) => w.write_all(line).await.is_ok(),
        ToHost::Handed(handed) => {
            use std::io::Write;
            handed.take_notes(link);
            (&handed.socket).write_all(line).is_ok()
        }
        ToHost::Gone => true,
    };
    if !sent && matches!(to_host, ToHost::Relay(_)) {
        *to_host = ToHost::Gone;
    }
}

/// The agent closed stdin: the host's end shut, its answers still in flight let out.
async fn close(to_host: ToHost, link: &Mutex<Link>, out: &Out, log: &Path) {
    match to_host {
        ToHost::Relay(mut w) => {
            let _ = w.shutdown().await;
        }
        ToHost::Handed(mut handed) => {
            let _ = handed.socket.shutdown(std::net::Shutdown::Write);
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut handed.hangup).await;
            handed.finish(link, out, log).await;
        }
        ToHost::Gone => {}
    }
}

/// Attach again after the host died, and replay the session's handshake to the new one.
async fn reconnect(
    home: &Home,
    hello: &Hello,
    start: &Starter,
    initialize: Option<&[u8]>,
    initialized: Option<&[u8]>,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf), AttachError> {
    let (mut reader, mut writer) = connect(home, hello, start).await?;
    let Some(initialize) = initialize else {
        return Ok((reader, writer));
    };
    writer.write_all(initialize).await?;
    let id = peek(initialize)
        .and_then(|p| p.id.map(|id| id.get().to_string()))
        .unwrap_or_default();
    let answered = async {
        let mut lines = Lines::new(&mut reader);
        while let Ok(Some(line)) = lines.next().await {
            if let Line::Whole(line) = line {
                let seen = peek(&line);
                if seen.as_ref().is_some_and(|p| {
                    p.method.is_none() && p.id.map(|i| i.get()) == Some(id.as_str())
                }) {
                    return Ok(lines.rest());
                }
            }
        }
        Err(AttachError::Start(
            "the new host closed during the session's handshake".into(),
        ))
    };
    let rest = tokio::time::timeout(Duration::from_secs(30), answered)
        .await
        .map_err(|_| {
            AttachError::Start("the new host did not answer initialize within 30 s".into())
        })??;
    if !rest.is_empty() {
        // What came after the answer belongs to the session; nothing is sent before
        // `initialized`, so this is not expected, and is dropped with a note.
        tracing::debug!(
            "dropped {} bytes the new host sent before initialized",
            rest.len()
        );
    }
    if let Some(initialized) = initialized {
        writer.write_all(initialized).await?;
    }
    Ok((reader, writer))
}

/// Host → agent until the host's side closes. Then every request it had not answered is
/// answered with an error, at once.
async fn to_agent(reader: BufReader<OwnedReadHalf>, link: &Mutex<Link>, out: &Out, log: &Path) {
    let mut lines = Lines::new(reader);
    loop {
        match lines.next().await {
            Ok(Some(Line::Whole(line))) => {
                if let Some(id) = peek(&line)
                    .filter(|p| p.method.is_none())
                    .and_then(|p| p.id)
                    .and_then(|id| id_key(id.get().as_bytes()))
                {
                    lock(link).answered(&id);
                }
                if write_out(out, &line).await.is_err() {
                    return;
                }
            }
            Ok(Some(Line::TooLong)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    fail_waiting(link, out, log).await;
}

/// The host is gone: every request it had not answered is answered with an error.
async fn fail_waiting(link: &Mutex<Link>, out: &Out, log: &Path) {
    let waiting: Vec<String> = {
        let mut link = lock(link);
        link.up = false;
        link.waiting
            .drain()
            .flat_map(|(id, n)| std::iter::repeat_n(id, n))
            .collect()
    };
    let message = format!(
        "yep's shared host stopped during this request (it crashed or was killed; its log: {}); the next request starts a new one",
        log.display()
    );
    if !waiting.is_empty() {
        note_lost(log, waiting.len());
    }
    for id in waiting {
        let _ = write_out(out, &error_line(&id, -32603, &message)).await;
    }
}

/// Say in the host's log that a session lost the host with `unanswered` requests: a host
/// killed with SIGKILL (or by the OOM killer) writes nothing on its way out, and the error the
/// session got points here.
fn note_lost(log: &Path, unanswered: usize) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let line = format!(
        "{} session pid {}: the shared host closed its connection with {unanswered} request(s) unanswered; unless a line above says why it stopped, it was killed (SIGKILL, the OOM killer) or crashed\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        std::process::id()
    );
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log);
    if let Ok(mut file) = file {
        let _ = file.write_all(line.as_bytes());
    }
}

async fn write_out(out: &Out, line: &[u8]) -> std::io::Result<()> {
    let mut out = out.lock().await;
    out.write_all(line).await?;
    out.flush().await
}

/// A JSON-RPC error answer to request `id` (JSON text), as one line.
fn error_line(id: &str, code: i64, message: &str) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
        serde_json::Value::String(message.to_string())
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// One line read by [`Lines`].
enum Line {
    /// The line, with its newline.
    Whole(Vec<u8>),
    /// A line longer than [`MAX_LINE`], dropped.
    TooLong,
}

/// Newline-framed lines under [`MAX_LINE`]; cancel-safe, and passes bytes as they are.
struct Lines<R> {
    inner: R,
    buf: Vec<u8>,
    /// How far `buf` was searched for a newline.
    searched: usize,
    /// Dropping the rest of a line that was too long.
    skipping: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(inner: R) -> Self {
        Lines {
            inner,
            buf: Vec::with_capacity(8 * 1024),
            searched: 0,
            skipping: false,
        }
    }

    /// What was read past the last line returned.
    fn rest(self) -> Vec<u8> {
        self.buf
    }

    async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            if let Some(i) = self.buf[self.searched..].iter().position(|b| *b == b'\n') {
                let end = self.searched + i + 1;
                let line: Vec<u8> = self.buf.drain(..end).collect();
                self.searched = 0;
                if std::mem::take(&mut self.skipping) {
                    return Ok(Some(Line::TooLong));
                }
                return Ok(Some(Line::Whole(line)));
            }
            self.searched = self.buf.len();
            if self.buf.len() > MAX_LINE {
                self.buf.clear();
                self.searched = 0;
                self.skipping = true;
            }
            self.buf.reserve(64 * 1024);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }
}
