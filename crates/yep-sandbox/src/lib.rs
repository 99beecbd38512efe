//! Containment: the OS sandbox around every process yep starts for a package or server.
//!
//! A [`Profile`] says what the process may reach: paths to read (and execute), paths to read
//! and write, TCP ports to connect to, and limits. `yep_host::process::spawn`
//! applies it between fork and exec, so the server and everything it starts run inside it:
//!
//! - Landlock for the filesystem, for TCP bind and connect (ABI 4 and later), and for signals
//!   and abstract unix sockets outside the sandbox (ABI 6 and later);
//! - a seccomp filter that refuses ptrace, `process_vm_*`, mounts, bpf, kexec, module loading,
//!   io_uring, new namespaces and the like with `EPERM` (`clone3` with `ENOSYS`, so callers
//!   fall back to `clone`, whose flags it checks), every socket family but unix, IPv4 and IPv6,
//!   and, with no network granted, every IP socket but a plain TCP stream;
//! - `no_new_privs`, and rlimits on open files and address space (the processes limit is the
//!   server's cgroup's, where the host may make one: see `yep_host::process`);
//! - a scrubbed environment ([`scrubbed_env`]) and a private `TMPDIR`;
//! - for a process that may write the workspace, its protected files (git hooks and config,
//!   agent and editor settings, shell rc files: [`PROTECTED_WORKSPACE`]) mounted read-only in
//!   user and mount namespaces of its own, made first ([`Profile::read_only`]).
//!
//! Everything that can allocate or fail runs in the host before the fork ([`prepare`]); the
//! child only makes the system calls, through the `landlock` and `seccompiler` crates.
//!
//! Where the kernel cannot do all of it, [`Mode`] decides: `best-effort` applies what it can
//! and says what it could not ([`Support::missing`]); `required` refuses to start the process.

#[cfg(feature = "egress")]
pub mod egress;
mod enforce;
mod env;
mod files;
pub mod gitconfig;
mod layout;
pub mod learn;
mod mode;
mod policy;
mod protected;
#[cfg(test)]
mod tests;
mod tmp;
mod withheld;

pub use enforce::{NO_PROTECTED_FILES, Prepared, SandboxError, Support, prepare};
pub use env::{ENV_ALLOWED, scrubbed_env};
pub use files::{FilesWithheld, ZOT_FILES, own_files};
pub use mode::{Mode, UnknownMode};
pub use policy::{Denial, Limits, Net, Place, Profile};
pub use protected::{PROTECTED_WORKSPACE, protected_paths};
pub use tmp::{PidsLimit, TmpDir};
pub use withheld::{
    WorkspaceAccess, grant_path, may_make_for_grant, protect, workspace_access, workspace_withheld,
};

#[cfg(test)]
pub(crate) use layout::prefix;
pub(crate) use layout::{install_roots, toolchain};
pub(crate) use policy::{DEVICES_WRITE, SYSTEM_READ, proc_entries};
pub(crate) use protected::{Mounts, named_by, namespaces_work};
#[cfg(test)]
pub(crate) use tmp::TMP_NEXT;
pub(crate) use withheld::{
    CREDENTIALS, PROTECTED, holds_home, holds_home_real, in_yep_home, real_home,
};
