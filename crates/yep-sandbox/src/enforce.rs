//! Enforcement on Linux: what the kernel supports ([`Support`]), the Landlock ruleset and the
//! seccomp filter built before the fork ([`prepare`]), and applied in the child
//! ([`Prepared::apply`]).

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::*;

/// What this kernel can enforce, found once by asking it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Support {
    /// The Landlock ABI the kernel offers (0 without Landlock).
    pub landlock_abi: i32,
    /// seccomp filters.
    pub seccomp: bool,
    /// User and mount namespaces a process may make for itself: what keeps protected
    /// workspace files read-only ([`Profile::read_only`]).
    pub namespaces: bool,
}

impl Support {
    /// This kernel's, asked once.
    pub fn current() -> Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        *SUPPORT.get_or_init(|| Support {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_filter(false).is_some(),
            namespaces: namespaces_work(),
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

    /// What `profile` needs that this kernel cannot do: [`Support::missing`], and protected
    /// workspace files when it writes one and no namespace can be made to keep it read-only.
    pub fn missing_for(&self, profile: &Profile) -> Vec<&'static str> {
        let mut out = self.missing();
        if !self.namespaces && !profile.read_only().is_empty() {
            out.push(NO_PROTECTED_FILES);
        }
        out
    }
}

/// What [`Support::missing_for`] names when protected workspace files cannot be kept
/// read-only.
pub const NO_PROTECTED_FILES: &str = "protected workspace files (user namespaces)";

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
    /// The read-only mounts over the protected paths it may otherwise write; `None` when it
    /// writes none (or namespaces are unavailable, and `missing` says so).
    mounts: Option<Mounts>,
    limits: Limits,
    /// What this kernel left out (best-effort), for the one warning a session shows.
    pub missing: Vec<&'static str>,
}

/// Build `profile` for a spawn under `mode`; `None` for [`Mode::Off`].
pub fn prepare(profile: &Profile, mode: Mode) -> Result<Option<Prepared>, SandboxError> {
    prepare_on(profile, mode, Support::current())
}

/// [`prepare`] on a kernel that supports what `support` says.
pub(crate) fn prepare_on(
    profile: &Profile,
    mode: Mode,
    support: Support,
) -> Result<Option<Prepared>, SandboxError> {
    if mode == Mode::Off {
        return Ok(None);
    }
    let missing = support.missing_for(profile);
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
        mounts: match support.namespaces {
            true => Mounts::new(&profile.read_only().into_iter().cloned().collect::<Vec<_>>()),
            false => None,
        },
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

    /// Whether it mounts protected workspace files read-only (in namespaces of its own).
    pub fn protects_files(&self) -> bool {
        self.mounts.is_some()
    }

    /// Apply it to the calling process: the read-only mounts over protected workspace files
    /// (in user and mount namespaces of its own), rlimits, `no_new_privs`, Landlock, then
    /// seccomp (the filter refuses nothing the others need, and from then on refuses mounts
    /// and new namespaces). Called between fork and exec: it makes system calls and allocates
    /// nothing.
    pub fn apply(&self) -> std::io::Result<()> {
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
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
