//! Learning what a server needs (`yep doctor --sandbox-learn`): it runs once outside the
//! sandbox under `strace`, and what it touched beyond its default profile becomes the grants
//! that would let it through, as `yep grant` takes them.
//!
//! The run is the spawn path's own (`yep_host::process::Sandboxed::learn`): the same scrubbed
//! environment and private `TMPDIR`, the profile built as for a contained run, only not
//! applied. So what it learns is what the sandbox would have refused.

use crate::{Net, Profile, SandboxError, TmpDir};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io::BufRead;
use std::net::IpAddr;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// At most this many grants are proposed; the rest are only counted.
pub const MAX_PROPOSALS: usize = 32;

/// At most this many lines of a trace are read: a server that floods costs the flooder.
const MAX_TRACE_LINES: usize = 4_000_000;

/// The system calls traced: what opens, creates, removes or runs a path, and TCP connects.
const TRACED: &str = "trace=open,openat,openat2,creat,mkdir,mkdirat,unlink,unlinkat,rename,renameat,renameat2,execve,connect";

/// One run of a server under `strace`, and what it touched.
pub struct Learning {
    strace: PathBuf,
    trace: PathBuf,
    _dir: TmpDir,
    spawned: Mutex<Option<Spawned>>,
}

impl std::fmt::Debug for Learning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learning")
            .field("strace", &self.strace)
            .field("trace", &self.trace)
            .finish()
    }
}

/// What the spawn path built for the run: the profile it would have applied.
#[derive(Debug, Clone)]
struct Spawned {
    profile: Profile,
    workspace: Option<PathBuf>,
    cwd: PathBuf,
}

/// Why nothing could be learned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LearnError {
    #[error("--sandbox-learn needs strace: apt-get install strace")]
    NoStrace,
    #[error(transparent)]
    Tmp(#[from] SandboxError),
    #[error("the server was never started, so nothing was learned")]
    NotStarted,
    #[error("failed to read the trace {}: {source}", .path.display())]
    Trace {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The grants a run proposes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Proposal {
    /// As `yep grant` takes them: `workspace:write`, `write:<dir>`, `read:<path>`,
    /// `net:<address>:<port>`. Escaped.
    pub grants: Vec<String>,
    /// How many more there were past [`MAX_PROPOSALS`].
    pub more: usize,
}

impl Learning {
    /// A learning run, with `strace` found on `PATH`.
    pub fn new() -> Result<Learning, LearnError> {
        let strace = find_strace().ok_or(LearnError::NoStrace)?;
        let dir = TmpDir::new("sandbox-learn")?;
        Ok(Learning {
            strace,
            trace: dir.path().join("trace"),
            _dir: dir,
            spawned: Mutex::new(None),
        })
    }

    /// The program and arguments that run `program args` under `strace`, writing its trace.
    pub fn wrap(&self, program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
        let mut wrapped: Vec<String> = [
            "-f",
            "-qq",
            "-yy",
            "-s",
            "4096",
            "--seccomp-bpf",
            "-e",
            TRACED,
            "-e",
            "signal=none",
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        wrapped.push(self.trace.to_string_lossy().into_owned());
        wrapped.push("--".into());
        wrapped.push(program.to_string_lossy().into_owned());
        wrapped.extend(args.iter().cloned());
        (self.strace.clone(), wrapped)
    }

    /// What the spawn path built for the run (the last spawn wins: a restart runs it again).
    pub fn record(&self, profile: &Profile, workspace: Option<&Path>, cwd: &Path) {
        *self.spawned.lock().unwrap_or_else(|p| p.into_inner()) = Some(Spawned {
            profile: profile.clone(),
            workspace: workspace.map(Path::to_path_buf),
            cwd: cwd.to_path_buf(),
        });
    }

    /// The grants what it touched needs beyond its profile. Read once the server has exited.
    pub fn proposal(&self) -> Result<Proposal, LearnError> {
        let spawned = self
            .spawned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(LearnError::NotStarted)?;
        let file = std::fs::File::open(&self.trace).map_err(|source| LearnError::Trace {
            path: self.trace.clone(),
            source,
        })?;
        let touches = parse_trace(std::io::BufReader::new(file), &spawned.cwd);
        Ok(propose(
            &spawned.profile,
            spawned.workspace.as_deref(),
            &touches,
        ))
    }
}

fn find_strace() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join("strace"))
        .find(|p| p.is_file())
}

/// What a traced process did to a path or an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Touch {
    /// Read (or ran) this path.
    Read(PathBuf),
    /// Created, wrote, removed or renamed this path: its directory is written.
    Write(PathBuf),
    /// Opened a TCP connection to this address.
    Connect(IpAddr, u16),
}

/// The touches in a trace, with the pids that made them (`/proc/<pid>` is each one's own).
#[derive(Debug, Default)]
struct Touches {
    touches: BTreeSet<Touch>,
    pids: BTreeSet<u32>,
}

/// Read a `strace -f -yy` trace. Lines that do not parse are skipped.
fn parse_trace(reader: impl BufRead, cwd: &Path) -> Touches {
    let mut out = Touches::default();
    let mut unfinished: HashMap<u32, String> = HashMap::new();
    for line in reader.split(b'\n').take(MAX_TRACE_LINES) {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        let (pid, rest) = match line.split_once(' ') {
            Some((p, rest)) if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() => {
                (p.parse().unwrap_or(0), rest.trim_start())
            }
            _ => (0, line.as_ref()),
        };
        out.pids.insert(pid);
        if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            unfinished.insert(pid, head.to_string());
            continue;
        }
        let whole;
        let call = match rest.strip_prefix("<... ") {
            Some(resumed) => {
                let Some((_, tail)) = resumed.split_once(" resumed>") else {
                    continue;
                };
                let Some(head) = unfinished.remove(&pid) else {
                    continue;
                };
                whole = format!("{head}{tail}");
                whole.as_str()
            }
            None => rest,
        };
        out.touches.extend(parse_call(call, cwd));
    }
    out
}

/// One argument of a traced call.
#[derive(Debug)]
struct Arg {
    text: String,
    /// A quoted string's bytes, decoded; `None` for anything else or a cut string.
    string: Option<Vec<u8>>,
    /// The path `-yy` shows for an fd (`AT_FDCWD</dir>`, `3<TCP:[…]>`).
    decoration: Option<String>,
}

/// `name(args) = result`, as far as this module needs it: what it touched (a rename, both
/// directories).
fn parse_call(line: &str, cwd: &Path) -> Vec<Touch> {
    parse_call_in(line, cwd).unwrap_or_default()
}

fn parse_call_in(line: &str, cwd: &Path) -> Option<Vec<Touch>> {
    let open = line.find('(')?;
    let name = &line[..open];
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let (args, result) = split_args(&line[open + 1..])?;
    let result = result.trim_start().strip_prefix("= ")?;
    let errno = match result.strip_prefix("-1 ") {
        Some(e) => Some(e.split_whitespace().next().unwrap_or("")),
        None if result.starts_with('?') => return None,
        None => None,
    };
    // A refusal is what the sandbox would say too; anything else that failed touched nothing.
    let tried = errno.is_none_or(|e| matches!(e, "EACCES" | "EPERM"));
    let path_at = |dir: Option<&Arg>, arg: Option<&Arg>| -> Option<PathBuf> {
        let raw = PathBuf::from(OsString::from_vec(arg?.string.clone()?));
        if raw.is_absolute() {
            return Some(raw);
        }
        let base = match dir {
            None => cwd.to_path_buf(),
            Some(d) => match &d.decoration {
                Some(dec) => PathBuf::from(dec),
                None if d.text == "AT_FDCWD" => cwd.to_path_buf(),
                None => return None,
            },
        };
        base.is_absolute().then(|| base.join(raw))
    };
    let writes = |flags: Option<&Arg>| {
        flags.is_some_and(|f| {
            f.text.split('|').any(|f| {
                matches!(
                    f.trim(),
                    "O_WRONLY" | "O_RDWR" | "O_CREAT" | "O_TRUNC" | "O_APPEND" | "O_TMPFILE"
                )
            })
        })
    };
    let file = |path: Option<PathBuf>, write: bool| {
        let path = path?;
        Some(if write {
            Touch::Write(path)
        } else {
            Touch::Read(path)
        })
    };
    let one = match name {
        "connect" => {
            // Only TCP: Landlock's network rules cover nothing else.
            let fd = args.first()?.decoration.as_deref()?;
            if !fd.starts_with("TCP") {
                return None;
            }
            // Refused, reset or still in progress: it was let out either way.
            connect_target(&args.get(1)?.text)
        }
        _ if !tried => None,
        // Both directories change: the source's loses an entry, the target's gains one.
        "rename" => {
            return Some(
                [args.first(), args.get(1)]
                    .into_iter()
                    .filter_map(|a| file(path_at(None, a), true))
                    .collect(),
            );
        }
        "renameat" | "renameat2" => {
            return Some(
                [(args.first(), args.get(1)), (args.get(2), args.get(3))]
                    .into_iter()
                    .filter_map(|(d, a)| file(path_at(d, a), true))
                    .collect(),
            );
        }
        "open" => file(path_at(None, args.first()), writes(args.get(1))),
        "creat" => file(path_at(None, args.first()), true),
        "openat" | "openat2" => file(path_at(args.first(), args.get(1)), writes(args.get(2))),
        "execve" => file(path_at(None, args.first()), false),
        "mkdir" | "unlink" => file(path_at(None, args.first()), true),
        "mkdirat" | "unlinkat" => file(path_at(args.first(), args.get(1)), true),
        _ => None,
    };
    Some(one.into_iter().collect())
}

/// The arguments up to the call's closing parenthesis, and what follows it.
fn split_args(s: &str) -> Option<(Vec<Arg>, &str)> {
    let bytes = s.as_bytes();
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'<' if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') => {
                // `-yy`'s decoration, whose path is escaped as strings are.
                while i < bytes.len() && bytes[i] != b'>' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' if depth > 0 => depth -= 1,
            b')' => {
                let last = s[start..i].trim();
                if !last.is_empty() {
                    args.push(arg(last));
                }
                return Some((args, &s[i + 1..]));
            }
            b',' if depth == 0 => {
                args.push(arg(s[start..i].trim()));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn arg(text: &str) -> Arg {
    let string = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .and_then(unescape);
    let decoration = text
        .split_once('<')
        .filter(|(head, _)| !head.is_empty() && !head.starts_with('"'))
        .and_then(|(_, rest)| rest.strip_suffix('>'))
        .and_then(unescape)
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    Arg {
        text: text.to_string(),
        string,
        decoration,
    }
}

/// A C string body as strace prints it: `\"`, `\\`, `\n`, octal `\ooo`, hex `\xhh`.
fn unescape(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let hex = s.get(i..i + 2)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut n = u32::from(c - b'0');
                for _ in 0..2 {
                    match b.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            n = n * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(u8::try_from(n).ok()?);
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// `{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("1.2.3.4")}` and its
/// `AF_INET6` kin (`inet_pton(AF_INET6, "::1", &sin6_addr)`).
fn connect_target(sockaddr: &str) -> Option<Touch> {
    let port = sockaddr
        .split("_port=htons(")
        .nth(1)?
        .split(')')
        .next()?
        .parse()
        .ok()?;
    let quoted = sockaddr.split('"').nth(1)?;
    let addr: IpAddr = if sockaddr.contains("sa_family=AF_INET6") || sockaddr.contains("AF_INET6") {
        IpAddr::V6(quoted.parse().ok()?)
    } else if sockaddr.contains("sa_family=AF_INET") {
        IpAddr::V4(quoted.parse().ok()?)
    } else {
        return None;
    };
    Some(Touch::Connect(addr, port))
}

/// `path` without `.` and `..`, its links resolved as far as it exists.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    if let Ok(real) = out.canonicalize() {
        return real;
    }
    match (
        out.parent().and_then(|p| p.canonicalize().ok()),
        out.file_name(),
    ) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => out,
    }
}

/// The grants `touches` needs beyond `profile`.
fn propose(profile: &Profile, workspace: Option<&Path>, touches: &Touches) -> Proposal {
    let canon = |rules: &[PathBuf]| -> Vec<PathBuf> {
        rules
            .iter()
            .flat_map(|r| [r.clone(), normal(r)])
            .collect::<Vec<_>>()
    };
    let write_rules = canon(&profile.write);
    let mut read_rules = canon(&profile.read);
    read_rules.extend(write_rules.iter().cloned());
    let workspace = workspace.map(normal);
    let beneath = |p: &Path, rules: &[PathBuf]| rules.iter().any(|r| p.starts_with(r));
    // A process's own `/proc/<pid>` is its own; devices are never a grant.
    let own_proc = |p: &Path| {
        let mut parts = p.components().skip(1);
        parts.next().is_some_and(|c| c.as_os_str() == "proc")
            && parts.next().is_some_and(|c| {
                let c = c.as_os_str().to_string_lossy();
                c == "self"
                    || c == "thread-self"
                    || c.parse::<u32>()
                        .is_ok_and(|pid| touches.pids.contains(&pid))
            })
    };
    let ungrantable = |p: &Path| p.starts_with("/dev") || p.starts_with("/proc") || own_proc(p);
    let mut writes: BTreeSet<PathBuf> = BTreeSet::new();
    let mut reads: BTreeSet<PathBuf> = BTreeSet::new();
    let mut ports: BTreeSet<(IpAddr, u16)> = BTreeSet::new();
    let mut workspace_write = false;
    for touch in &touches.touches {
        match touch {
            Touch::Write(p) => {
                let p = normal(p);
                if beneath(&p, &write_rules) || ungrantable(&p) {
                    continue;
                }
                if workspace.as_deref().is_some_and(|w| p.starts_with(w)) {
                    workspace_write = true;
                    continue;
                }
                // Its directory: where it is made, replaced or removed.
                let dir = p.parent().filter(|d| !holds_home(d)).unwrap_or(&p);
                if !holds_home(dir) {
                    writes.insert(dir.to_path_buf());
                }
            }
            Touch::Read(p) => {
                let p = normal(p);
                if beneath(&p, &read_rules) || ungrantable(&p) {
                    continue;
                }
                let target = match p.is_dir() {
                    true => p.as_path(),
                    false => p.parent().filter(|d| !holds_home(d)).unwrap_or(&p),
                };
                if !holds_home(target) {
                    reads.insert(target.to_path_buf());
                }
            }
            Touch::Connect(addr, port) => match &profile.net {
                Net::Any => {}
                Net::Ports(allowed) if allowed.contains(port) => {}
                _ => {
                    ports.insert((*addr, *port));
                }
            },
        }
    }
    // The widest of each: a directory covers what is beneath it, and writing covers reading.
    let widest = |set: &BTreeSet<PathBuf>, covers: &BTreeSet<PathBuf>| -> Vec<PathBuf> {
        set.iter()
            .filter(|p| {
                !covers.iter().any(|c| c != *p && p.starts_with(c))
                    && !set.iter().any(|o| o != *p && p.starts_with(o))
            })
            .cloned()
            .collect()
    };
    let writes_kept = widest(&writes, &writes);
    let covered: BTreeSet<PathBuf> = writes_kept.iter().cloned().collect();
    let reads_kept: Vec<PathBuf> = widest(&reads, &covered)
        .into_iter()
        .filter(|r| !covered.contains(r))
        .collect();
    let mut grants = Vec::new();
    if workspace_write {
        grants.push("workspace:write".to_string());
    }
    grants.extend(writes_kept.iter().map(|p| format!("write:{}", shown(p))));
    grants.extend(reads_kept.iter().map(|p| format!("read:{}", shown(p))));
    grants.extend(ports.iter().map(|(addr, port)| match addr {
        IpAddr::V4(a) => format!("net:{a}:{port}"),
        IpAddr::V6(a) => format!("net:[{a}]:{port}"),
    }));
    let more = grants.len().saturating_sub(MAX_PROPOSALS);
    grants.truncate(MAX_PROPOSALS);
    Proposal { grants, more }
}

/// A path as a grant names it: `~/…` beneath the home, escaped.
fn shown(p: &Path) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rest = home.as_deref().and_then(|h| {
        p.strip_prefix(h)
            .ok()
            .or_else(|| p.strip_prefix(normal(h)).ok())
    });
    let text = match rest {
        Some(rest) => format!("~/{}", rest.display()),
        None => p.display().to_string(),
    };
    yep_store::text::escape(&text).into_owned()
}

fn holds_home(p: &Path) -> bool {
    crate::holds_home(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"100 execve("/usr/bin/python3", ["python3", "s.py"], 0x7ffd /* 3 vars */) = 0
100 openat(AT_FDCWD</srv/ws>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>
100 openat(AT_FDCWD</srv/ws>, "/srv/state/a.txt", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3</srv/state/a.txt>
100 openat(AT_FDCWD</srv/ws>, "/srv/missing.json", O_RDONLY) = -1 ENOENT (No such file or directory)
100 openat(AT_FDCWD</srv/ws>, "out.txt", O_WRONLY|O_CREAT <unfinished ...>
101 mkdir("/srv/cache\x2dx", 0777) = -1 EACCES (Permission denied)
100 <... openat resumed>, 0666) = 4</srv/ws/out.txt>
100 openat(AT_FDCWD</srv/ws>, "/proc/100/status", O_RDONLY) = 5</proc/100/status>
100 connect(3<TCP:[1]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)
100 connect(4<TCPv6:[2]>, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0
101 rename("/opt/old/a", "/var/new/a") = 0
100 connect(5<UDP:[3]>, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}, 16) = 0
"#;

    #[test]
    fn a_trace_reads_as_what_it_touched() {
        let t = parse_trace(TRACE.as_bytes(), Path::new("/nowhere"));
        let want = [
            Touch::Read("/usr/bin/python3".into()),
            Touch::Read("/etc/ld.so.cache".into()),
            Touch::Write("/srv/state/a.txt".into()),
            Touch::Write("/srv/cache-x".into()),
            Touch::Write("/srv/ws/out.txt".into()),
            Touch::Write("/opt/old/a".into()),
            Touch::Write("/var/new/a".into()),
            Touch::Read("/proc/100/status".into()),
            Touch::Connect("127.0.0.1".parse().unwrap(), 8080),
            Touch::Connect("::1".parse().unwrap(), 443),
        ];
        for w in &want {
            assert!(t.touches.contains(w), "{w:?} in {:?}", t.touches);
        }
        assert_eq!(t.touches.len(), want.len(), "{:?}", t.touches);
    }

    #[test]
    fn what_the_profile_allows_is_never_proposed_and_the_rest_is_collapsed() {
        let t = parse_trace(TRACE.as_bytes(), Path::new("/nowhere"));
        let profile = Profile {
            read: vec!["/usr".into(), "/etc".into()],
            write: vec!["/opt".into(), "/var".into()],
            net: Net::Ports(vec![443]),
            ..Profile::default()
        };
        let p = propose(&profile, Some(Path::new("/srv/ws")), &t);
        assert_eq!(
            p.grants,
            ["workspace:write", "write:/srv", "net:127.0.0.1:8080"],
            "{p:?}"
        );
    }
}
