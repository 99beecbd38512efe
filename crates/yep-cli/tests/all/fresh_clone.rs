//! The README's test command on a fresh machine: the committed repository is cloned into a temp
//! dir and `scripts/test` runs there, with a cold target dir (the clone's own) and a Python that
//! has no `wheel` (a fresh venv's, first on PATH). Every test must run and pass. The pinned peers
//! are this checkout's (`$YEP_PEERS`, which `scripts/test` sets), so the inner run reaches no
//! registry.
//!
//! The inner run sets `YEP_FRESH_CLONE`, so this test does not clone itself again there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INNER: &str = "YEP_FRESH_CLONE";
/// A hang must not hold CI for ever; a cold build plus the suite takes well under this.
const DEADLINE: Duration = Duration::from_secs(45 * 60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[allow(clippy::disallowed_methods)] // git, python3 and cargo are what a newcomer runs
fn must(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cargo test` prints `test result: ok. N passed; M failed; K ignored; ...` per test binary.
fn tally(log: &str) -> (usize, usize, usize) {
    let (mut binaries, mut passed, mut failed) = (0, 0, 0);
    for line in log.lines().filter(|l| l.starts_with("test result: ")) {
        binaries += 1;
        // Each `;`-separated part ends in `<number> <word>`.
        let count = |what: &str| {
            line.split(';')
                .find_map(
                    |part| match part.split_whitespace().collect::<Vec<_>>()[..] {
                        [.., n, w] if w == what => n.parse::<usize>().ok(),
                        _ => None,
                    },
                )
                .unwrap_or(0)
        };
        passed += count("passed");
        failed += count("failed");
    }
    (binaries, passed, failed)
}

#[test]
fn tally_reads_cargo_test_summaries() {
    let log = "running 2 tests\ntest result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
               test result: FAILED. 5 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s\n";
    assert_eq!(tally(log), (2, 7, 1));
}

#[allow(clippy::disallowed_methods)] // the README's command, run as a newcomer would
fn run_readme_test_command(clone: &Path, path: &str, log: &Path) -> bool {
    let file = std::fs::File::create(log).unwrap();
    let mut child = Command::new(clone.join("scripts/test"))
        .current_dir(clone)
        .env("PATH", path)
        .env_remove("YEP_MCP_PYTHON")
        // The interop corpora sit beside this checkout, not beside the clone.
        .env(
            "YEP_ZOT_INTEROP",
            std::env::var_os("YEP_ZOT_INTEROP")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo().join("../shared/interop/zot")),
        )
        .env(
            "YEP_CLAUDE_INTEROP",
            std::env::var_os("YEP_CLAUDE_INTEROP")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo().join("../shared/interop/claude-plugins")),
        )
        .env_remove("CARGO_TARGET_DIR")
        .env(INNER, "1")
        // CI runs with no `$SHELL`; tests that reach a shell must not depend on the caller's.
        .env_remove("SHELL")
        .env_remove("RUSTC_WRAPPER")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("cargo runs");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.success();
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the README's test command ran past {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // git and python3, as a newcomer runs them
fn the_readme_test_command_passes_in_a_fresh_clone_without_wheel() {
    if std::env::var_os(INNER).is_some() {
        eprintln!("inside the fresh-clone run: not cloning again");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let clone = tmp.path().join("yep");
    must(
        Command::new("git")
            .args(["clone", "--quiet"])
            .arg(repo())
            .arg(&clone),
    );
    assert!(clone.join("README.md").is_file());

    // A fresh venv's Python, first on PATH: pip, and no wheel.
    let venv = tmp.path().join("venv");
    must(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    let python = venv.join("bin/python3");
    #[allow(clippy::disallowed_methods)] // probing the venv's interpreter
    let probe = Command::new(&python)
        .args(["-c", "import wheel"])
        .output()
        .unwrap();
    assert!(!probe.status.success(), "the venv must not have wheel");
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let log = tmp.path().join("cargo-test.log");
    let ok = run_readme_test_command(&clone, &path, &log);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let (binaries, passed, failed) = tally(&text);
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        ok && failed == 0,
        "`scripts/test` failed in a fresh clone ({passed} passed, {failed} failed):\n{}",
        tail.join("\n")
    );
    // Every test binary ran: cargo stops at the first failing one, so a short count means some
    // never did. Count the binaries the outer run would see: the workspace's targets.
    assert!(
        binaries >= 20 && passed >= 200,
        "only {binaries} test binaries and {passed} tests ran:\n{}",
        tail.join("\n")
    );
    eprintln!("fresh clone: {binaries} test binaries, {passed} tests passed");
}
