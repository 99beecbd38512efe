//! The process layer's own guarantees, held by its crate-private parts: a stop escalates, a log
//! is capped and private, a `setsid()` grandchild dies in its server's cgroup, and a one-shot
//! command is bounded in time, stdout and stderr, and contained.

use super::*;
use std::time::Duration;

/// `cond` holds within about five seconds.
async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Alive and not a zombie.
fn running(pid: i32) -> bool {
    yep_test_support::procs::running(pid.into())
}

/// A file under `tests/fixtures/hostile/<attack>/` at the repository root.
fn hostile(attack: &str, file: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(attack)
        .join(file)
        .to_string_lossy()
        .into_owned()
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The session id of a process (field 6 of `/proc/<pid>/stat`).
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// `sh -c script`, run in `dir` without a sandbox.
fn shell(dir: &std::path::Path, script: &str) -> SpawnSpec {
    SpawnSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: dir.into(),
        bin_dir: None,
        env: vec![],
        log_path: dir.join("hook.log"),
        sandbox: None,
    }
}

/// The most memory this test process has held so far, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

const QUICK: RunLimits = RunLimits {
    timeout: Duration::from_secs(10),
    max_stdout: 10_000,
};

#[tokio::test]
async fn a_stop_escalates_to_sigkill_when_the_server_ignores_eof_and_sigterm() {
    let fx = tempfile::tempdir().unwrap();
    let spawned = spawn(&SpawnSpec {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            "trap '' TERM; while :; do sleep 0.05; done".into(),
        ],
        cwd: fx.path().into(),
        bin_dir: None,
        env: vec![],
        log_path: fx.path().join("stubborn.log"),
        sandbox: None,
    })
    .unwrap();
    drop(spawned.stdin);
    let proc_ = spawned.process;
    let status = proc_.terminate(Duration::from_millis(200)).await;
    assert_eq!(describe_status(status), "signal 9 (SIGKILL)");
}

#[tokio::test]
async fn a_flooding_server_leaves_a_capped_rotated_private_log() {
    use std::os::unix::fs::PermissionsExt;
    let fx = tempfile::tempdir().unwrap();
    let logs = fx.path().join("logs");
    let log = logs.join("flood.log");
    // A world-readable dir and log from before logs were private.
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&log, "an older run\n").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let spawned = spawn(&SpawnSpec {
        program: "sh".into(),
        args: vec![hostile("stderr-flood", "flood.sh")],
        cwd: fx.path().into(),
        bin_dir: None,
        env: vec![],
        log_path: log.clone(),
        sandbox: None,
    })
    .unwrap();
    let proc_ = spawned.process;
    assert!(
        proc_
            .wait_for_exit(Duration::from_secs(120))
            .await
            .is_some()
    );
    proc_.stderr.drained(Duration::from_secs(120)).await;
    let rotated = logs.join("flood.log.1");
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["flood.log", "flood.log.1"]);
    for path in [&log, &rotated] {
        let len = std::fs::metadata(path).unwrap().len();
        assert!(len <= LOG_CAP_BYTES, "{} is {len} bytes", path.display());
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }
    assert!(std::fs::metadata(&rotated).unwrap().len() > LOG_CAP_BYTES / 2);
    assert_eq!(mode(&logs), 0o700);
    // The tail still holds the server's last words.
    assert!(
        proc_
            .stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("a server flooding")
    );
}

#[tokio::test]
async fn a_grandchild_that_calls_setsid_dies_with_its_server_in_its_cgroup() {
    let fx = tempfile::tempdir().unwrap();
    let pidfile = fx.path().join("escaped.pid");
    let spawned = spawn(&SpawnSpec {
        program: "sh".into(),
        args: vec![
            hostile("setsid-escape", "server.sh"),
            pidfile.to_string_lossy().into_owned(),
            "cat".into(),
        ],
        cwd: fx.path().into(),
        bin_dir: None,
        env: vec![],
        log_path: fx.path().join("logs/escape.log"),
        sandbox: None,
    })
    .unwrap();
    let Some(cgroup) = spawned.process.cgroup().map(|c| c.path().to_path_buf()) else {
        // The documented limit (README, docs/architecture.md): without a writable cgroup v2,
        // only the process group bounds a server, and setsid() leaves it.
        eprintln!("no writable cgroup v2 here: the setsid() escape is a documented limit");
        return;
    };
    let server = spawned.process.pid().unwrap() as i32;
    assert!(
        eventually(|| std::fs::read_to_string(&pidfile).is_ok_and(|p| p.ends_with('\n'))).await
    );
    let escaped: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // It really left: a session (and so a process group) of its own.
    assert!(eventually(|| session_of(escaped) == Some(escaped)).await);
    assert_ne!(session_of(server), Some(escaped));
    drop(spawned);
    assert!(
        eventually(|| !running(escaped)).await,
        "the setsid() grandchild {escaped} outlived its server"
    );
    assert!(
        eventually(|| !cgroup.exists()).await,
        "{} was not removed",
        cgroup.display()
    );
}

#[tokio::test]
async fn a_one_shot_command_gets_its_stdin_and_gives_its_stdout_and_exit_status() {
    let fx = tempfile::tempdir().unwrap();
    let spec = shell(
        fx.path(),
        "read line; echo \"got $line\"; echo oops >&2; exit 2",
    );
    let ran = run_to_end(&spec, b"{\"tool\":\"Bash\"}\n", QUICK)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "got {\"tool\":\"Bash\"}\n"
    );
    assert_eq!(ran.status.and_then(|s| s.code()), Some(2));
    assert_eq!(ran.stderr_tail, ["oops"]);
    assert!(!ran.timed_out());
    // One that reads none of a large input still ends, and is not held by the write.
    let big = vec![b'x'; 4 << 20];
    let ran = run_to_end(&shell(fx.path(), "echo done"), &big, QUICK)
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "done\n");
}

#[tokio::test]
async fn a_one_shot_command_past_its_timeout_is_killed_with_its_whole_group() {
    let fx = tempfile::tempdir().unwrap();
    let pidfile = fx.path().join("sleeper.pid");
    let script = format!("sleep 300 & echo $! > '{}'; wait", pidfile.display());
    let limits = RunLimits {
        timeout: Duration::from_millis(500),
        ..QUICK
    };
    let started = std::time::Instant::now();
    let ran = run_to_end(&shell(fx.path(), &script), b"", limits)
        .await
        .unwrap();
    assert!(ran.timed_out(), "{ran:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let sleeper: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        eventually(|| !running(sleeper)).await,
        "the command's child {sleeper} outlived its timeout"
    );
}

#[tokio::test]
async fn stdout_past_the_cap_is_cut_and_said_and_never_blocks_the_command() {
    let fx = tempfile::tempdir().unwrap();
    // 10 MB, more than any pipe holds: the command ends only if it is read to the end.
    let spec = shell(
        fx.path(),
        "head -c 10000000 /dev/zero | tr '\\0' a; echo; exit 0",
    );
    let ran = run_to_end(&spec, b"", QUICK).await.unwrap();
    assert_eq!(ran.status.and_then(|s| s.code()), Some(0), "{ran:?}");
    assert_eq!(ran.stdout.len(), 10_000);
    assert_eq!(ran.dropped, 10_000_001 - 10_000);
}

#[tokio::test]
async fn a_200_mib_stderr_line_is_kept_as_a_bounded_tail_and_the_answer_still_arrives() {
    let fx = tempfile::tempdir().unwrap();
    let before = peak_rss_kib();
    let spec = SpawnSpec {
        program: "sh".into(),
        args: vec![hostile("hook-stderr-line-flood", "flood.sh")],
        ..shell(fx.path(), "")
    };
    let limits = RunLimits {
        timeout: Duration::from_secs(120),
        ..QUICK
    };
    let ran = run_to_end(&spec, b"", limits).await.unwrap();
    let grown = peak_rss_kib().saturating_sub(before);
    assert_eq!(ran.status.and_then(|s| s.code()), Some(0), "{ran:?}");
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("permissionDecision"),
        "{ran:?}"
    );
    // The line's first 16 KiB are kept, said to be cut; the rest was read and dropped.
    let kept: usize = ran.stderr_tail.iter().map(String::len).sum();
    assert!(kept <= 64 * 1024, "{kept} bytes of stderr kept");
    assert!(
        ran.stderr_tail[0].ends_with("..."),
        "{:?}",
        ran.stderr_tail.len()
    );
    assert!(
        grown < 64 * 1024,
        "the host grew by {grown} KiB reading a hook's 200 MiB of stderr"
    );
}

#[tokio::test]
async fn a_one_shot_command_runs_in_the_sandbox() {
    let fx = tempfile::tempdir().unwrap();
    let workspace = fx.path().join("ws");
    let data = fx.path().join("data");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let mut spec = shell(
        &workspace,
        "echo inside > \"$0\"/ok && echo outside > ./planted; echo ran",
    );
    spec.args.push(data.display().to_string());
    spec.sandbox = Some(Sandboxed {
        mode: yep_sandbox::Mode::Required,
        package_dir: None,
        data_dir: Some(data.clone()),
        workspace: Some(workspace.clone()),
        files: None,
        grants: Default::default(),
        name: "hook".into(),
        on_denied: None,
        tell_refused_hosts: false,
        broker: None,
        learn: None,
        audit: None,
    });
    let ran = run_to_end(&spec, b"", QUICK).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "ran\n", "{ran:?}");
    assert!(data.join("ok").exists(), "its data dir is its to write");
    assert!(
        !workspace.join("planted").exists(),
        "the workspace is read-only to it"
    );
}

/// The protected directories that hold a file `x` in [`protected_workspace`] (besides
/// `.git/hooks`, which `git init` fills).
const PROTECTED_DIRS: &[&str] = &[".claude", ".codex", ".cursor", ".vscode", ".zot"];

/// A workspace under `root` holding a real git repository (`git init`) and every protected
/// path: the directories each with a file `x`, the files each with a line.
async fn protected_workspace(root: &std::path::Path) -> PathBuf {
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut init = shell(&ws, "git init -q");
    init.log_path = root.join("init.log");
    let ran = run_to_end(&init, b"", PATIENT).await.unwrap();
    assert!(ran.status.is_some_and(|s| s.success()), "{ran:?}");
    for name in yep_sandbox::PROTECTED_WORKSPACE {
        let path = ws.join(name);
        if name.starts_with(".git/") {
            assert!(path.exists(), "git init made {name}");
        } else if PROTECTED_DIRS.contains(name) {
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("x"), "orig\n").unwrap();
        } else {
            std::fs::write(&path, "orig\n").unwrap();
        }
    }
    ws.canonicalize().unwrap()
}

/// Every file under each protected path of `ws`, with its contents.
fn protected_contents(ws: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(path: &std::path::Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        match std::fs::read_dir(path) {
            Ok(dir) => {
                for entry in dir.flatten() {
                    walk(&entry.path(), out);
                }
            }
            Err(_) => out.push((path.to_path_buf(), std::fs::read(path).unwrap_or_default())),
        }
    }
    let mut out = Vec::new();
    for name in yep_sandbox::PROTECTED_WORKSPACE {
        walk(&ws.join(name), &mut out);
    }
    out.sort();
    out
}

/// `sh -c script` in `ws`, sandboxed as `required` with `grants`.
fn contained(
    ws: &std::path::Path,
    script: &str,
    grants: crate::manifest::SandboxGrants,
) -> SpawnSpec {
    let mut spec = shell(ws, script);
    spec.log_path = ws.with_file_name("server.log");
    spec.sandbox = Some(Sandboxed {
        mode: yep_sandbox::Mode::Required,
        package_dir: None,
        data_dir: None,
        workspace: Some(ws.to_path_buf()),
        files: None,
        grants,
        name: "protected".into(),
        on_denied: None,
        tell_refused_hosts: false,
        broker: None,
        audit: None,
        learn: None,
    });
    spec
}

fn workspace_write() -> crate::manifest::SandboxGrants {
    crate::manifest::SandboxGrants {
        workspace: Some("write".into()),
        ..Default::default()
    }
}

/// Time enough for a few hundred commands and a git commit on a loaded machine.
const PATIENT: RunLimits = RunLimits {
    timeout: Duration::from_secs(120),
    max_stdout: 1 << 20,
};

/// Each attempt of `attempts` (shell commands, `{}` the path) at `path`, in a subshell, said
/// as `ESCAPED <command>` when it succeeds.
fn attempts_at(path: &str, attempts: &[&str]) -> String {
    attempts
        .iter()
        .map(|a| {
            let command = a.replace("{}", path);
            format!("( {command} ) 2>/dev/null && echo 'ESCAPED {command}'\n")
        })
        .collect()
}

#[tokio::test]
async fn a_server_that_writes_the_workspace_cannot_write_its_protected_files_but_can_commit() {
    let fx = tempfile::tempdir().unwrap();
    let ws = protected_workspace(fx.path()).await;
    let before = protected_contents(&ws);
    let file_attempts = [
        "echo x > {}",
        "echo x >> {}",
        "truncate -s 0 {}",
        "echo y > ./.swap && mv -f ./.swap {}",
        "rm -f {}",
        "mv {} ./moved",
    ];
    // A directory moved out is copied (a mount point cannot be renamed): the copy is made,
    // the original stays, and `mv` fails.
    let dir_attempts = [
        "echo x > {}/new",
        "mkdir {}/sub",
        "ln -s /bin/sh {}/link",
        "rm -rf {}",
        "mv {} ./moved",
    ];
    let mut script = String::new();
    for name in yep_sandbox::PROTECTED_WORKSPACE {
        match ws.join(name).is_dir() {
            true => {
                script += &attempts_at(name, &dir_attempts);
                for file in protected_contents(&ws)
                    .iter()
                    .filter(|(p, _)| p.starts_with(ws.join(name)))
                {
                    let inner = file.0.strip_prefix(&ws).unwrap().display().to_string();
                    script += &attempts_at(&inner, &file_attempts);
                }
            }
            false => script += &attempts_at(name, &file_attempts),
        }
    }
    // An ordinary file beside them is made, written and renamed; git adds and commits.
    script += "rm -f ./.swap; echo ok > plain && echo more >> plain && mv plain plain2 && mkdir -p src && echo a > src/a && echo made\n";
    script += "git add plain2 src && git -c user.name=t -c user.email=t@example.org commit -qm first && git log --oneline | wc -l\n";
    let ran = run_to_end(&contained(&ws, &script, workspace_write()), b"", PATIENT)
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(out.trim(), "made\n1", "{out}\n{:?}", ran.stderr_tail);
    assert_eq!(protected_contents(&ws), before, "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("plain2")).unwrap(),
        "ok\nmore\n"
    );
}

#[tokio::test]
async fn a_protected_link_out_of_the_workspace_mounts_nothing_outside() {
    let fx = tempfile::tempdir().unwrap();
    let ws = protected_workspace(fx.path()).await;
    let outside = fx.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::remove_dir_all(ws.join(".vscode")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join(".vscode")).unwrap();
    let ran = run_to_end(
        // Read by the shell itself: its own `/proc/self` is what it may read.
        &contained(
            &ws,
            "while read -r line; do echo \"$line\"; done < /proc/self/mountinfo",
            workspace_write(),
        ),
        b"",
        PATIENT,
    )
    .await
    .unwrap();
    let mounts = String::from_utf8_lossy(&ran.stdout);
    let mounted = |p: &std::path::Path| {
        let p = p.display().to_string();
        mounts
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(p.as_str()))
    };
    assert!(mounted(&ws.join(".claude")), "{mounts}");
    assert!(mounted(&ws.join(".git/hooks")), "{mounts}");
    assert!(!mounted(&outside), "{mounts}");
    assert!(!mounted(&ws.join(".vscode")), "{mounts}");
}

#[tokio::test]
async fn a_grant_naming_a_protected_path_lifts_that_one_alone() {
    let fx = tempfile::tempdir().unwrap();
    let ws = protected_workspace(fx.path()).await;
    let mut grants = workspace_write();
    grants.write = vec![ws.join(".vscode").display().to_string()];
    let script = "echo x > .vscode/new && echo lifted\n( echo x > .claude/new ) 2>/dev/null && echo ESCAPED .claude\n( echo x >> .git/config ) 2>/dev/null && echo ESCAPED .git/config\n";
    let ran = run_to_end(&contained(&ws, script, grants), b"", PATIENT)
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "lifted\n", "{ran:?}");
    assert!(ws.join(".vscode/new").exists());
    assert!(!ws.join(".claude/new").exists());
}
