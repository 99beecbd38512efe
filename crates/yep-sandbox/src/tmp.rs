//! Per-process resources: a private temp dir ([`TmpDir`]) and a cgroup's processes limit
//! ([`PidsLimit`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::*;

/// A private temp dir for one sandboxed process: `<system temp>/yep-<uid>/<stem>-<n>`,
/// owner-only, removed when dropped.
pub struct TmpDir {
    path: PathBuf,
}

/// The count that tells this process's temp dirs apart.
pub(crate) static TMP_NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
