//! Server processes: spawned in their own process group (and their own cgroup where the host
//! may create one), stderr drained into a log file and an in-memory tail, killed with the whole
//! group when dropped.
//!
//! This is the one place that builds a `Command`; `clippy.toml` bans it everywhere else.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

mod run;
#[cfg(test)]
mod tests;

pub(crate) use run::{RunLimits, RunOutput, run_to_end};

/// How many stderr lines are kept in memory for error messages.
pub(crate) const STDERR_TAIL_LINES: usize = 20;

/// A server's log grows to this size, then moves to `<name>.log.1` (replacing the one before)
/// and starts again: a server that floods stderr costs at most twice this on disk.
pub(crate) const LOG_CAP_BYTES: u64 = 8 * 1024 * 1024;

/// What to run.
#[derive(Clone)]
pub struct SpawnSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Put first on PATH (the package's `bin/`), when it exists.
    pub bin_dir: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Where stderr is appended.
    pub log_path: PathBuf,
    /// The sandbox it runs in ([`yep_sandbox`]); `None` runs it with the host's rights
    /// and environment (the host's own helpers, tests of the spawn path).
    pub sandbox: Option<Sandboxed>,
}

/// How a spawned process is contained: the mode, and the places its default profile opens.
#[derive(Clone, Debug)]
pub struct Sandboxed {
    pub mode: yep_sandbox::Mode,
    /// The package's own files: read, never written.
    pub package_dir: Option<PathBuf>,
    /// Its state: read and write.
    pub data_dir: Option<PathBuf>,
    /// The user's workspace: read.
    pub workspace: Option<PathBuf>,
    /// A directory of the workspace whose regular files it may keep (a zot extension's
    /// `.zot`): see [`yep_sandbox::own_files`].
    pub files: Option<PathBuf>,
    /// What its approval grants beyond the default profile.
    pub grants: crate::manifest::SandboxGrants,
    /// Its brokered secrets (it holds their placeholders; its egress proxy puts the values
    /// into requests to their hosts), and where the home's CA is kept, which its proxy
    /// terminates TLS with for those hosts and for grants with request rules. `None` runs
    /// it with neither: a host with a request rule is then refused.
    pub broker: Option<crate::store::broker::Broker>,
    /// The name `yep grant` knows it by: what its egress proxy's refusals name.
    pub name: String,
    /// Told of each refusal the host sees (a host name its grants do not name, asked of its
    /// egress proxy).
    pub on_denied: Option<DeniedSink>,
    /// With no network granted, still give it an egress proxy that refuses every host, so
    /// each host it reaches for (a hook's `pip install`) is told to `on_denied` rather than
    /// failing where nobody sees it. Off for servers, whose refusals show in their log.
    pub tell_refused_hosts: bool,
    /// Learn what it needs instead of containing it (`yep doctor --sandbox-learn`): its
    /// profile is built, its environment scrubbed and its `TMPDIR` private as for a contained
    /// run, but nothing is applied, and it runs under `strace`, whatever the mode.
    pub learn: Option<Arc<yep_sandbox::learn::Learning>>,
    /// The audit trail its egress proxy's decisions (and the secrets it injects) are
    /// recorded in ([`crate::audit`]); `None` records nothing.
    pub audit: Option<crate::audit::AuditLog>,
}

/// Where the sandbox's refusals go ([`Sandboxed::on_denied`]).
#[derive(Clone)]
pub struct DeniedSink(pub Arc<dyn Fn(yep_sandbox::Denial) + Send + Sync>);

impl std::fmt::Debug for DeniedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeniedSink")
    }
}

/// A package's proxy for the host names it was granted, where this build has one.
#[cfg(feature = "egress")]
type Egress = yep_sandbox::egress::EgressProxy;
#[cfg(not(feature = "egress"))]
type Egress = ();

/// Start the egress proxy for `profile`'s host names: its port is the profile's `proxy`, one more
/// port the sandbox lets it reach. `Ok(None)` where this build has no proxy (the caller says so).
#[cfg(feature = "egress")]
fn start_egress(
    profile: &mut yep_sandbox::Profile,
    sandboxed: &Sandboxed,
    tmp: &Path,
) -> std::io::Result<Option<Egress>> {
    let on_denied = sandboxed.on_denied.clone();
    let name = sandboxed.name.clone();
    let report = Arc::new(move |refused: yep_sandbox::egress::Refusal| {
        if let Some(sink) = &on_denied {
            // A refusal no grant lifts (a stray placeholder, a refused certificate) says so
            // itself; one a grant lifts names the command.
            let message = match refused.grant.is_empty() {
                true => refused.to_string(),
                false => {
                    let grant = crate::text::escape(&refused.grant);
                    let grant = match grant.contains(' ') {
                        true => format!("'{grant}'"),
                        false => grant.into_owned(),
                    };
                    format!(
                        "{refused}: `yep grant {} {grant}`",
                        crate::text::escape(&name)
                    )
                }
            };
            (sink.0)(yep_sandbox::Denial {
                target: format!("{}:{}", refused.host, refused.port),
                message,
                grant: refused.grant,
            })
        }
    });
    let allowed = yep_sandbox::egress::Allowed::from_grants(
        profile
            .egress
            .iter()
            .chain(&profile.egress_also)
            .map(String::as_str),
    );
    let setup = yep_sandbox::egress::Setup {
        allowed,
        broker: sandboxed.broker.clone(),
        on_refused: Some(report),
        on_decided: sandboxed
            .audit
            .clone()
            .map(|audit| audited(audit, sandboxed.name.clone())),
        ..Default::default()
    };
    let mut proxy = yep_sandbox::egress::EgressProxy::start(&sandboxed.name, setup)?;
    proxy.write_trust(tmp)?;
    profile.proxy = Some(proxy.port());
    Ok(Some(proxy))
}

/// Every decision of `name`'s egress proxy, into the audit trail: each request let through
/// or refused (with the grant that let it, or would), and each brokered secret put into one
/// (its name, never its value).
#[cfg(feature = "egress")]
fn audited(
    audit: crate::audit::AuditLog,
    name: String,
) -> Arc<dyn Fn(yep_sandbox::egress::Decision) + Send + Sync> {
    use crate::audit::{Egress, Injection};
    use yep_sandbox::egress::{Decision, Reason};
    Arc::new(move |decision| match decision {
        Decision::Allowed {
            host,
            port,
            method,
            path,
            rule,
        } => {
            let egress = Egress::new(&name, host, port, true, rule);
            audit.egress(match (method, path) {
                (Some(method), Some(path)) => egress.request(method, &path),
                _ => egress,
            });
        }
        Decision::Injected { host, secret, .. } => {
            audit.injection(Injection::new(&name, host, secret));
        }
        Decision::Refused(refused) => {
            let rule = match &refused.reason {
                Reason::Placeholder { secret } => format!("placeholder of {secret}"),
                Reason::Certificate { .. } => "certificate refused by the client".into(),
                _ => refused.grant.clone(),
            };
            let egress = Egress::new(&name, &refused.host, refused.port, false, rule);
            audit.egress(match &refused.reason {
                Reason::Request { method, path, .. } => egress.request(method, path),
                _ => egress,
            });
        }
        _ => {}
    })
}

#[cfg(not(feature = "egress"))]
fn start_egress(
    _profile: &mut yep_sandbox::Profile,
    _sandboxed: &Sandboxed,
    _tmp: &Path,
) -> std::io::Result<Option<Egress>> {
    Ok(None)
}

/// The environment that sends a sandboxed process's HTTP through its proxy.
#[cfg(feature = "egress")]
fn egress_env(proxy: &Egress) -> Vec<(String, String)> {
    proxy.env()
}

#[cfg(not(feature = "egress"))]
fn egress_env(_proxy: &Egress) -> Vec<(String, String)> {
    Vec::new()
}

/// What is missing where this build has no egress proxy.
const NO_EGRESS: &str = "network by host name (this build has no egress proxy)";

/// Env values can be secrets: Debug shows their names only.
impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &redacted_env(&self.env))
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// Env as `NAME=***`: values can be secrets, names help debugging.
pub(crate) fn redacted_env(env: &[(String, String)]) -> Vec<String> {
    env.iter().map(|(k, _)| format!("{k}=***")).collect()
}

/// The last lines a server wrote to stderr.
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    done: Option<watch::Receiver<bool>>,
}

impl StderrTail {
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Wait (bounded) until stderr reached EOF, so the tail holds the server's last words.
    pub(crate) async fn drained(&self, within: Duration) {
        if let Some(mut rx) = self.done.clone() {
            let _ = tokio::time::timeout(within, rx.wait_for(|done| *done)).await;
        }
    }
}

/// A running server process. Dropping it kills its whole process group.
///
/// A watcher task owns the child and reaps it the moment it exits, so a death is noticed even
/// when the server's stdout stays open (a grandchild holding it), and the group is killed
/// right then, before its id can be reused.
pub struct ServerProcess {
    pid: Option<u32>,
    pgid: Option<i32>,
    cgroup: Option<Arc<Cgroup>>,
    exit: watch::Receiver<Option<ExitStatus>>,
    pub(crate) stderr: StderrTail,
    pub log_path: PathBuf,
    /// How it is contained: `None` unsandboxed.
    pub(crate) sandbox: Option<Containment>,
    /// Its private temp dir, removed with it.
    _tmp: Option<yep_sandbox::TmpDir>,
    /// Its egress proxy, stopped with it.
    _egress: Option<Egress>,
    /// Its pids cgroup (v1), removed with it.
    _pids: Option<yep_sandbox::PidsLimit>,
}

/// How a spawned process is contained.
pub(crate) struct Containment {
    /// What it may reach.
    pub(crate) profile: yep_sandbox::Profile,
    /// The workspace it was started in.
    pub(crate) workspace: Option<PathBuf>,
    /// What the kernel could not enforce (empty when everything).
    pub(crate) missing: Vec<&'static str>,
}

/// The spawned process plus its stdio pipes.
pub struct Spawned {
    pub process: ServerProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// Why a spawn failed. The I/O error is the `source`, not repeated in the message; a sandbox
/// that could not be built is one too (its message says why).
#[derive(Debug, thiserror::Error)]
#[error("cannot spawn `{program}`")]
pub struct SpawnError {
    pub program: String,
    #[source]
    pub source: std::io::Error,
}

/// PATH with `dir` first.
fn path_with(dir: &Path) -> OsString {
    let mut parts = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        parts.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(parts).unwrap_or_default()
}

/// Spawn a server: cwd set, `bin/` first on PATH, its own process group, stderr to its log.
pub fn spawn(spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
    let err = |source| SpawnError {
        program: spec.program.clone(),
        source,
    };
    if let Some(parent) = spec.log_path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
        // Logs hold whatever a server prints, paths and tokens included: owner-only. A dir we
        // do not own (a shared one an embedder chose) stays as it is.
        let _ = crate::store::fsutil::make_private(parent);
    }
    let mut program = resolve_program(spec);
    let mut args = spec.args.clone();
    // The sandbox is built here, before the fork: the child only applies it.
    let mut egress_gap = false;
    let learn = spec.sandbox.as_ref().and_then(|s| s.learn.clone());
    let contained = match &spec.sandbox {
        Some(sandboxed) if sandboxed.mode != yep_sandbox::Mode::Off || learn.is_some() => {
            let stem = spec
                .log_path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("server");
            let tmp = yep_sandbox::TmpDir::new(stem).map_err(|e| err(std::io::Error::other(e)))?;
            let profile = yep_sandbox::Profile::default_for(&yep_sandbox::Place {
                program: &program,
                args: &spec.args,
                package_dir: sandboxed.package_dir.as_deref(),
                data_dir: sandboxed.data_dir.as_deref(),
                workspace: sandboxed.workspace.as_deref(),
                tmp_dir: tmp.path(),
                files: sandboxed.files.as_deref(),
            });
            let mut profile = profile.granted(&sandboxed.grants);
            if let Some(learning) = &learn {
                // The profile it would run in, to tell what it touched beyond; nothing applied.
                learning.record(&profile, sandboxed.workspace.as_deref(), &spec.cwd);
                (program, args) = learning.wrap(&program, &args);
                return spawn_built(spec, program, args, Some((None, tmp, profile, None)), false);
            }
            // Host names are reached through a proxy of its own, or not at all.
            let quiet = !(sandboxed.tell_refused_hosts
                && sandboxed.on_denied.is_some()
                && matches!(profile.net, yep_sandbox::Net::None));
            let egress = match profile.egress.is_empty() && quiet {
                true => None,
                false => match start_egress(&mut profile, sandboxed, tmp.path()).map_err(err)? {
                    Some(proxy) => Some(proxy),
                    None if sandboxed.mode == yep_sandbox::Mode::Required => {
                        let refused = yep_sandbox::SandboxError::Unsupported {
                            missing: vec![NO_EGRESS],
                        };
                        return Err(err(std::io::Error::other(refused)));
                    }
                    None => {
                        egress_gap = true;
                        None
                    }
                },
            };
            yep_sandbox::prepare(&profile, sandboxed.mode)
                .map_err(|e| err(std::io::Error::other(e)))?
                .map(|prepared| (Some(Arc::new(prepared)), tmp, profile, egress))
        }
        _ => None,
    };
    spawn_built(spec, program, args, contained, egress_gap)
}

/// What [`spawn`] built before the fork: the sandbox to apply (`None` for a learning run),
/// its private temp dir, its profile and its egress proxy.
type Contained = (
    Option<Arc<yep_sandbox::Prepared>>,
    yep_sandbox::TmpDir,
    yep_sandbox::Profile,
    Option<Egress>,
);

/// Fork and exec `program args` as `spec` says, contained as `contained` says.
fn spawn_built(
    spec: &SpawnSpec,
    program: PathBuf,
    args: Vec<String>,
    contained: Option<Contained>,
    egress_gap: bool,
) -> Result<Spawned, SpawnError> {
    let err = |source| SpawnError {
        program: spec.program.clone(),
        source,
    };
    let mut cmd = command(spec, &program, &args, contained.as_ref());
    // Its own cgroup, joined before exec: a grandchild that leaves the process group with
    // setsid() stays in it, and dies with it.
    let cgroup = Cgroup::create().map(Arc::new);
    let procs = cgroup.as_ref().and_then(|c| c.procs_fd());
    // A sandboxed server's processes are bounded: in its own cgroup (v2), else in a pids
    // cgroup of its own (v1).
    let mut missing = contained
        .as_ref()
        .and_then(|(p, _, _, _)| p.as_ref())
        .map(|p| p.missing.clone());
    if let Some(m) = missing.as_mut().filter(|_| egress_gap) {
        m.push(NO_EGRESS);
    }
    let prepared = contained.as_ref().and_then(|(p, _, _, _)| p.as_ref());
    let pids = pids_limit(spec, prepared, cgroup.as_deref(), &mut missing).map_err(err)?;
    let pids_procs = pids.as_ref().and_then(|p| p.procs_fd());
    #[cfg(target_os = "linux")]
    {
        join_on_exec(&mut cmd, pids_procs.as_ref());
        join_on_exec(&mut cmd, procs.as_ref());
    }
    // After joining the cgroup (which the sandbox would refuse): the sandbox, last.
    if let Some(prepared) = prepared {
        let prepared = Arc::clone(prepared);
        // SAFETY: `apply` makes system calls on what was built before the fork, and
        // allocates nothing.
        unsafe {
            cmd.pre_exec(move || prepared.apply());
        }
    }
    let spawned = cmd.spawn();
    drop(procs);
    drop(pids_procs);
    let mut child = spawned.map_err(err)?;
    let pid = child.id();
    let pgid = pid.map(|pid| pid as i32);
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let tail = drain_stderr(stderr, spec.log_path.clone());
    let exit = watch_exit(child, pgid, cgroup.clone());
    let (sandbox, tmp, egress) = containment(spec, contained, missing);
    Ok(Spawned {
        process: ServerProcess {
            pid,
            pgid,
            cgroup,
            exit,
            stderr: tail,
            log_path: spec.log_path.clone(),
            sandbox,
            _egress: egress,
            _tmp: tmp,
            _pids: pids,
        },
        stdin,
        stdout,
    })
}

/// The command that runs `program args` as `spec` says: piped stdio, a process group of its
/// own, and the environment it gets (a contained one gets none of the user's own).
fn command(
    spec: &SpawnSpec,
    program: &Path,
    args: &[String],
    contained: Option<&Contained>,
) -> Command {
    #[allow(clippy::disallowed_methods)] // the one spawn wrapper
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some((_, tmp, _, _)) = contained {
        // Nothing of the user's own environment (tokens, keys, the agent's variables): what
        // programs need, then the package's own config and secrets (`spec.env`).
        cmd.env_clear();
        cmd.envs(yep_sandbox::scrubbed_env());
        cmd.env("TMPDIR", tmp.path());
        // The home, `~/.gitconfig` with it, is closed, and git fails on a config it may not
        // read: a sanitised copy instead (a package's own env may still say otherwise).
        let grants = spec.sandbox.as_ref().map(|s| &s.grants);
        cmd.envs(yep_sandbox::gitconfig::env(
            tmp.path(),
            grants.unwrap_or(&Default::default()),
        ));
    }
    if let Some(bin) = spec.bin_dir.as_deref().filter(|d| d.is_dir()) {
        cmd.env("PATH", path_with(bin));
    }
    // Python would write `__pycache__` beside a package's modules, into the approved files
    // (a drift); a server's own env can still say otherwise.
    cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    // After the package's own env: its proxy is the one way out by name.
    if let Some(proxy) = contained.and_then(|c| c.3.as_ref()) {
        cmd.envs(egress_env(proxy));
    }
    #[cfg(unix)]
    cmd.process_group(0);
    cmd
}

/// The pids cgroup that bounds a sandboxed server's processes where its own cgroup (v2)
/// cannot: `None` when that one does, or when nothing is sandboxed. Without either, the
/// bound is added to `missing`, or, when the sandbox is required, the start refused.
fn pids_limit(
    spec: &SpawnSpec,
    prepared: Option<&Arc<yep_sandbox::Prepared>>,
    cgroup: Option<&Cgroup>,
    missing: &mut Option<Vec<&'static str>>,
) -> std::io::Result<Option<yep_sandbox::PidsLimit>> {
    Ok(match (prepared, cgroup) {
        (Some(p), Some(c)) if c.limit_pids(p.limits().processes) => None,
        (Some(p), _) => {
            let limit = yep_sandbox::PidsLimit::create(p.limits().processes);
            if limit.is_none() {
                let what = "the process limit (no pids cgroup it may write)";
                if spec.sandbox.as_ref().map(|s| s.mode) == Some(yep_sandbox::Mode::Required) {
                    let refused = yep_sandbox::SandboxError::Unsupported {
                        missing: vec![what],
                    };
                    return Err(std::io::Error::other(refused));
                }
                if let Some(m) = missing.as_mut() {
                    m.push(what);
                }
            }
            limit
        }
        _ => None,
    })
}

/// Have the child join a cgroup before it execs: write `0` to that cgroup's `cgroup.procs`
/// (`procs`, opened before the fork).
#[cfg(target_os = "linux")]
fn join_on_exec(cmd: &mut Command, procs: Option<&std::fs::File>) {
    if let Some(fd) = procs.map(std::os::fd::AsRawFd::as_raw_fd) {
        // SAFETY: between fork and exec only `write(2)` runs, on an fd opened before the fork;
        // a failure leaves the child where it was (the process group still holds it).
        unsafe {
            cmd.pre_exec(move || {
                libc::write(fd, b"0".as_ptr().cast(), 1);
                Ok(())
            });
        }
    }
}

/// Reap `child` on a task of its own, and kill whatever it left running in its process group
/// (`pgid`) or its cgroup; the receiver hears its exit status.
fn watch_exit(
    mut child: tokio::process::Child,
    pgid: Option<i32>,
    group: Option<Arc<Cgroup>>,
) -> watch::Receiver<Option<ExitStatus>> {
    let (exit_tx, exit) = watch::channel(None);
    tokio::spawn(async move {
        let status = child.wait().await.ok();
        // Whatever the server left running in its group (or its cgroup) goes with it.
        signal_group(pgid, libc::SIGKILL);
        if let Some(c) = &group {
            c.kill();
        }
        let _ = exit_tx.send(status);
    });
    exit
}

/// What a spawned server keeps of what [`spawn`] built: its containment (with what the
/// sandbox is `missing`), its private temp dir and its egress proxy.
fn containment(
    spec: &SpawnSpec,
    contained: Option<Contained>,
    missing: Option<Vec<&'static str>>,
) -> (
    Option<Containment>,
    Option<yep_sandbox::TmpDir>,
    Option<Egress>,
) {
    match contained {
        // A learning run was not contained: it says so by having no containment.
        Some((None, tmp, _, _)) => (None, Some(tmp), None),
        Some((_, tmp, profile, egress)) => (
            Some(Containment {
                profile,
                workspace: spec.sandbox.as_ref().and_then(|s| s.workspace.clone()),
                missing: missing.unwrap_or_default(),
            }),
            Some(tmp),
            egress,
        ),
        None => (None, None, None),
    }
}

/// A cgroup v2 of one server's own, under the host's cgroup: `<host cgroup>/yep-<pid>-<n>`.
/// Killing it reaches every process the server started, including those that called
/// `setsid()` to leave its process group. Only where the host may create one (cgroup v2
/// mounted and the host's own cgroup writable); elsewhere the process group is the bound.
pub(crate) struct Cgroup {
    path: PathBuf,
}

impl Cgroup {
    /// The host's own cgroup v2 directory, if it may create cgroups under it.
    fn base() -> Option<&'static Path> {
        static BASE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
        BASE.get_or_init(|| {
            let base = Self::find_base()?;
            Self::sweep(&base);
            Some(base)
        })
        .as_deref()
    }

    fn find_base() -> Option<PathBuf> {
        if std::env::var_os("YEP_NO_CGROUP").is_some() {
            return None;
        }
        // `0::<path>`: the process's place in the v2 hierarchy.
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
        // Field 5 is the mount point, field 4 the mounted root; the fs type follows " - ".
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mounts.lines().find_map(|l| {
            let (fields, fs) = l.split_once(" - ")?;
            if !fs.starts_with("cgroup2 ") {
                return None;
            }
            let fields: Vec<&str> = fields.split(' ').collect();
            if fields.get(3) != Some(&"/") {
                return None;
            }
            fields.get(4).map(PathBuf::from)
        })?;
        let base = mount.join(rel.trim_start_matches('/'));
        let writable = std::ffi::CString::new(base.as_os_str().as_encoded_bytes())
            .ok()
            // SAFETY: access(2) reads a NUL-terminated path and nothing else.
            .is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0);
        (writable && base.join("cgroup.procs").is_file()).then_some(base)
    }

    /// Remove the empty cgroups of hosts that are gone (a crash skips the clean-up).
    fn sweep(base: &Path) {
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("yep-"))
                .and_then(|n| n.split('-').next())
                .filter(|p| p.parse::<u32>().is_ok())
            else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }

    fn create() -> Option<Cgroup> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = Self::base()?.join(format!("yep-{}-{n}", std::process::id()));
        std::fs::create_dir(&path).ok()?;
        Some(Cgroup { path })
    }

    /// Its directory.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bound it to `max` processes and threads, where its `pids` controller is enabled.
    fn limit_pids(&self, max: u64) -> bool {
        let enabled = std::fs::read_to_string(self.path.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"));
        enabled && std::fs::write(self.path.join("pids.max"), max.to_string()).is_ok()
    }

    /// `cgroup.procs`, opened for the child to join before exec (closed at exec).
    fn procs_fd(&self) -> Option<std::fs::File> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.path.join("cgroup.procs"))
            .ok()
    }

    /// SIGKILL every process in it: `cgroup.kill` where the kernel has it (5.14+), else each
    /// listed pid, a few rounds so that a forking process cannot stay ahead.
    fn kill(&self) {
        if std::fs::write(self.path.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for _ in 0..8 {
            let Ok(procs) = std::fs::read_to_string(self.path.join("cgroup.procs")) else {
                return;
            };
            if procs.trim().is_empty() {
                return;
            }
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: kill(2) only sends a signal, to a process in the server's own cgroup.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// The last holder (the watcher, the `ServerProcess`) kills what is left and removes the dir
/// once it is empty, from a short-lived thread: this also runs when the async runtime is going
/// away and its tasks are dropped. A dir that stays busy is swept at a later start.
impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill();
        if std::fs::remove_dir(&self.path).is_ok() {
            return;
        }
        let path = std::mem::take(&mut self.path);
        std::thread::spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(10));
                match std::fs::remove_dir(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {}
                    _ => return,
                }
            }
        });
    }
}

/// Send a signal to a process group.
fn signal_group(pgid: Option<i32>, signal: i32) {
    #[cfg(unix)]
    if let Some(pgid) = pgid {
        // SAFETY: killpg only sends a signal; the group is one we created at spawn.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = (pgid, signal);
}

/// A program named without a slash is looked up in `bin/` first, then on PATH, matching the
/// PATH the child sees.
fn resolve_program(spec: &SpawnSpec) -> PathBuf {
    let program = Path::new(&spec.program);
    if program.components().count() == 1
        && let Some(candidate) = spec
            .bin_dir
            .as_ref()
            .map(|b| b.join(program))
            .filter(|c| c.is_file())
    {
        return candidate;
    }
    if program.is_relative() && program.components().count() > 1 {
        // Relative paths with a slash are relative to the package (its bin dir's parent).
        if let Some(pkg) = spec.bin_dir.as_ref().and_then(|b| b.parent()) {
            return pkg.join(program);
        }
    }
    program.to_path_buf()
}

/// Longest stderr line kept; the rest of a longer line is dropped.
const MAX_STDERR_LINE: usize = 16 * 1024;

fn drain_stderr(stderr: tokio::process::ChildStderr, log_path: PathBuf) -> StderrTail {
    let (done_tx, done_rx) = watch::channel(false);
    let tail = StderrTail {
        lines: Arc::default(),
        done: Some(done_rx),
    };
    let lines = Arc::clone(&tail.lines);
    tokio::spawn(async move {
        let mut log = Log::open(log_path, LOG_CAP_BYTES).await;
        // Bytes, not `lines()`: a server's stderr need not be UTF-8, and draining must go on to
        // EOF whatever it writes, or the server blocks (or dies) writing to a full pipe.
        let mut reader = BufReader::new(stderr);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match (&mut reader)
                .take(MAX_STDERR_LINE as u64)
                .read_until(b'\n', &mut buf)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if buf.last() != Some(&b'\n') && buf.len() == MAX_STDERR_LINE {
                buf.extend_from_slice(b"...\n");
                skip_line(&mut reader).await;
            }
            if let Some(file) = log.as_mut()
                && file.write(&buf).await.is_err()
            {
                log = None;
            }
            let line = String::from_utf8_lossy(&buf)
                .trim_end_matches(['\n', '\r'])
                .to_string();
            let mut tail = lines.lock().unwrap_or_else(|p| p.into_inner());
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
        if let Some(mut file) = log {
            let _ = file.file.flush().await;
        }
        let _ = done_tx.send(true);
    });
    tail
}

/// Read and drop the rest of a line, a buffer at a time: a line with no end (a gigabyte of
/// stderr with no newline) costs the host one buffer, never the line.
async fn skip_line<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) {
    loop {
        let Ok(chunk) = reader.fill_buf().await else {
            return;
        };
        if chunk.is_empty() {
            return;
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return;
            }
            None => {
                let all = chunk.len();
                reader.consume(all);
            }
        }
    }
}

/// A server's stderr log: mode 0600, never followed through a symlink, rotated to
/// `<path>.1` when it reaches its cap.
struct Log {
    path: PathBuf,
    file: tokio::fs::File,
    size: u64,
    cap: u64,
}

impl Log {
    async fn open(path: PathBuf, cap: u64) -> Option<Log> {
        let file = Self::open_file(&path).await.ok()?;
        let size = file.metadata().await.map(|m| m.len()).unwrap_or(0);
        Some(Log {
            path,
            file,
            size,
            cap,
        })
    }

    async fn open_file(path: &Path) -> std::io::Result<tokio::fs::File> {
        let mut options = tokio::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        let file = options.open(path).await?;
        #[cfg(unix)]
        {
            // A log written before logs were private keeps its old mode unless tightened.
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .await?;
        }
        Ok(file)
    }

    /// Append `bytes`, first moving a full log to `<path>.1`.
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + bytes.len() as u64 > self.cap {
            self.file.flush().await?;
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            tokio::fs::rename(&self.path, &rotated).await?;
            self.file = Self::open_file(&self.path).await?;
            self.size = 0;
        }
        self.file.write_all(bytes).await?;
        self.size += bytes.len() as u64;
        Ok(())
    }
}

impl ServerProcess {
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The last lines it wrote to stderr (all of it went to its log).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr.lines()
    }

    /// The server's own cgroup, when the host could create one.
    #[cfg(test)]
    pub(crate) fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_deref()
    }

    /// The exit status, once the process has exited and been reaped.
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Resolves when the process exits.
    pub(crate) async fn exited(&self) -> Option<ExitStatus> {
        self.on_exit().await
    }

    /// A future that resolves when the process exits, independent of `self`.
    pub(crate) fn on_exit(
        &self,
    ) -> impl std::future::Future<Output = Option<ExitStatus>> + Send + 'static {
        let mut rx = self.exit.clone();
        async move {
            match rx.wait_for(Option::is_some).await {
                Ok(status) => *status,
                // The watcher is gone only if the runtime is shutting down.
                Err(_) => None,
            }
        }
    }

    /// The exit status, if it exited within `within`.
    pub async fn wait_for_exit(&self, within: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(within, self.exited())
            .await
            .ok()
            .flatten()
    }

    fn signal(&self, signal: i32) {
        if self.exit_status().is_none() {
            signal_group(self.pgid, signal);
        }
    }

    /// After stdin was closed: wait `grace`, SIGTERM the group, wait `grace`, SIGKILL, reap.
    pub async fn terminate(&self, grace: Duration) -> Option<ExitStatus> {
        self.terminate_in(grace, grace).await
    }

    /// [`ServerProcess::terminate`], waiting `grace` for the exit, then `after_term` after
    /// SIGTERM before SIGKILL.
    pub async fn terminate_in(&self, grace: Duration, after_term: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.wait_for_exit(grace).await {
            return Some(status);
        }
        self.signal(libc::SIGTERM);
        if let Some(status) = self.wait_for_exit(after_term).await {
            return Some(status);
        }
        self.signal(libc::SIGKILL);
        self.wait_for_exit(Duration::from_secs(5)).await
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Once reaped, the watcher already killed the group; afterwards the id may be reused.
        self.signal(libc::SIGKILL);
        // A cgroup's name is never reused while it exists: killing it again is always safe, and
        // covers a runtime that is shutting down (its watcher may never run again).
        if let Some(c) = &self.cgroup {
            c.kill();
        }
    }
}

/// Render an exit status the way people read it: `exit code 3`, `signal 9 (SIGKILL)`.
pub(crate) fn describe_status(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "still running or not reaped".to_string();
    };
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                _ => "",
            };
            return format!("signal {sig}{name}");
        }
    }
    status.to_string()
}
