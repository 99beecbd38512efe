//! Protected workspace files: what in a workspace runs code outside the sandbox when written
//! (git's hooks and config, agent and editor settings, shell rc files), found in the host and
//! mounted read-only in the server's own mount namespace ([`Mounts`]).
//!
//! Landlock's rules only allow, so a writable workspace allows everything below it. A bind
//! mount of each protected path onto itself, remounted read-only, takes the write back for that
//! path alone, whatever Landlock allows. The mount namespace (with a user namespace, so that a
//! user who is not root may make one) is the child's own: the host and every other process see
//! the workspace unchanged.
//!
//! Only paths that exist when the server starts can be covered: a bind mount needs something
//! to mount over, and yep never makes files in the user's workspace to have one. A server that
//! may write the workspace can make a protected path that was missing (a `.vscode/` of its
//! own); what it makes is there for the next start, which protects it.

use std::ffi::CString;
use std::path::{Path, PathBuf};

pub use yep_store::grants::PROTECTED_WORKSPACE;

/// The protected paths of the workspace `root` ([`PROTECTED_WORKSPACE`]) that exist, each as
/// its real path, and only those inside the workspace:
/// - a link is judged by where it leads: protected there when that is inside the workspace,
///   else left alone (nothing outside is ever mounted; the Landlock rules keep it closed);
/// - `.git` may be a file (`gitdir: …`, a worktree's or a submodule's): then the hooks and
///   config of the git dir it names are protected, and of its common dir (a worktree's
///   `commondir`, which holds the hooks git runs), each only when it is inside the workspace.
///   A git dir outside the workspace is not writable to the server unless a grant opens it,
///   and then it is the user's choice.
pub fn protected_paths(root: &Path) -> Vec<PathBuf> {
    let Ok(root) = root.canonicalize() else {
        return Vec::new();
    };
    let inside = |path: &Path| -> Option<PathBuf> {
        std::fs::symlink_metadata(path).ok()?;
        let real = path.canonicalize().ok()?;
        (real.starts_with(&root) && real != root).then_some(real)
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for name in PROTECTED_WORKSPACE
        .iter()
        .filter(|n| !n.starts_with(".git/"))
    {
        out.extend(inside(&root.join(name)));
    }
    for git in git_dirs(&root) {
        for name in ["hooks", "config"] {
            out.extend(inside(&git.join(name)));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The git dirs of the repository at `root` whose hooks and config git reads: `.git` itself
/// when it is a directory, else the dir its `gitdir:` line names, and that dir's common dir
/// (`commondir`) when it has one. Outside the workspace, none is kept.
fn git_dirs(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let meta = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) => meta,
        Err(_) => return Vec::new(),
    };
    let named = match meta.is_file() {
        true => std::fs::read_to_string(&dot_git).ok().and_then(|text| {
            let line = text.lines().next()?.strip_prefix("gitdir:")?.trim();
            Some(root.join(line))
        }),
        false => Some(dot_git),
    };
    let Some(git) = named.and_then(|g| g.canonicalize().ok()) else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(git.join("commondir"))
        .ok()
        .and_then(|text| git.join(text.trim()).canonicalize().ok());
    std::iter::once(git)
        .chain(common)
        .filter(|dir| dir.starts_with(root) && dir != root)
        .collect()
}

/// Whether `path` is the one a `write:` grant names (with links resolved on both sides): a
/// grant that names a protected path lifts it, and only it.
pub(crate) fn named_by(path: &Path, written: &Path) -> bool {
    written == path || written.canonicalize().is_ok_and(|real| real == path)
}

/// The read-only bind mounts over a profile's protected paths, built before the fork: the
/// paths as C strings with the flags their mount already has, and the uid and gid maps of the
/// user namespace. [`Mounts::apply`] only makes system calls on them.
pub(crate) struct Mounts {
    /// Each path, with the flags of the mount it is on that a remount must keep
    /// (`nosuid`, `nodev`, `noexec`, the atime mode): in a user namespace they are locked, and
    /// a remount that drops one fails with `EPERM`.
    paths: Vec<(CString, libc::c_ulong)>,
    /// `<uid> <uid> 1`: the user is itself inside, so files keep their owner.
    uid_map: Vec<u8>,
    /// `<gid> <gid> 1`.
    gid_map: Vec<u8>,
}

impl Mounts {
    /// The mounts for `paths`, each of which must exist; `None` when none does any longer.
    pub(crate) fn new(paths: &[PathBuf]) -> Option<Mounts> {
        use std::os::unix::ffi::OsStrExt;
        let paths: Vec<(CString, libc::c_ulong)> = paths
            .iter()
            .filter_map(|p| {
                let c = CString::new(p.as_os_str().as_bytes()).ok()?;
                let flags = locked_flags(&c)?;
                Some((c, flags))
            })
            .collect();
        if paths.is_empty() {
            return None;
        }
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Some(Mounts {
            paths,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        })
    }

    /// Make the calling process's own user and mount namespaces, and mount each path over
    /// itself read-only. Called between fork and exec, before Landlock and seccomp (whose
    /// filter then refuses `mount`, `umount2` and new namespaces): it allocates nothing.
    ///
    /// The user is itself in the new user namespace: a process that is not root holds no
    /// capability once it execs, and root holds what it held. A path gone since it was found
    /// is passed over.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        enter_namespaces(&self.uid_map, &self.gid_map)?;
        for (path, locked) in &self.paths {
            let bind = libc::MS_BIND | libc::MS_REC;
            // SAFETY: mount(2) with NUL-terminated paths that outlive the call.
            if unsafe {
                libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    bind,
                    std::ptr::null(),
                )
            } != 0
            {
                let error = std::io::Error::last_os_error();
                if error.raw_os_error() == Some(libc::ENOENT) {
                    continue;
                }
                return Err(error);
            }
            let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_REC | locked;
            // SAFETY: as above; a remount reads only the target path.
            if unsafe {
                libc::mount(
                    std::ptr::null(),
                    path.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                )
            } != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Enter a user namespace in which the user is itself (`uid_map` and `gid_map`, with
/// `setgroups` denied, as an unprivileged user must) and a mount namespace whose mounts no
/// longer propagate back to the host's. Only system calls.
fn enter_namespaces(uid_map: &[u8], gid_map: &[u8]) -> std::io::Result<()> {
    // SAFETY: unshare(2) takes flags only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    write_proc(c"/proc/self/setgroups", b"deny")?;
    write_proc(c"/proc/self/uid_map", uid_map)?;
    write_proc(c"/proc/self/gid_map", gid_map)?;
    let private = libc::MS_REC | libc::MS_PRIVATE;
    // SAFETY: mount(2) of a NUL-terminated literal, changing propagation only.
    if unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            private,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Write `bytes` to the `/proc` file `path` in one call.
fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: open(2) of a NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: write(2) from a live slice of `bytes.len()` bytes to the fd just opened.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    match written == bytes.len() as isize {
        true => Ok(()),
        false => Err(error),
    }
}

/// The flags of the mount `path` is on that a read-only remount of it must repeat; `None`
/// when it cannot be asked (it is gone).
fn locked_flags(path: &std::ffi::CStr) -> Option<libc::c_ulong> {
    // SAFETY: statvfs fills the zeroed struct it is given, from a NUL-terminated path.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(path.as_ptr(), &mut st) == 0).then_some(st)
    }?;
    let kept = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    let mut flags = kept
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |all, (_, ms)| all | ms);
    // Neither `noatime` nor `relatime` is `strictatime`, which a remount must say, or it
    // asks for the default `relatime`.
    if st.f_flag & (libc::ST_NOATIME | libc::ST_RELATIME) == 0 {
        flags |= libc::MS_STRICTATIME;
    }
    Some(flags)
}

/// Whether this system lets a process make the user and mount namespaces [`Mounts`] needs
/// (Ubuntu's AppArmor restriction, a container's seccomp profile or
/// `user.max_user_namespaces = 0` may not): found once by a forked child that makes them.
pub(crate) fn namespaces_work() -> bool {
    if std::env::var_os("YEP_SANDBOX_NO_USERNS").is_some() {
        return false;
    }
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("{uid} {uid} 1").into_bytes();
    let gid_map = format!("{gid} {gid} 1").into_bytes();
    // SAFETY: the child makes system calls on what was built before the fork and exits with
    // `_exit`, running nothing of the parent's (no destructors, no atexit).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => false,
        0 => {
            let code = match enter_namespaces(&uid_map, &gid_map) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: ends the forked child at once.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waitpid writes the status of our own child into `status`.
            let waited = loop {
                let r = unsafe { libc::waitpid(pid, &mut status, 0) };
                if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break r;
                }
            };
            waited == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    }
}
