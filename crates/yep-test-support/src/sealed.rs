//! The sealed environment a test runs a program in ([`Sealed`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment of one test run: a user home and a temp dir of its own, made once per test
/// process beside (never inside) the tests' own temp dirs, so no test's workspace holds the
/// home. A program started through [`Sealed::command`] gets:
///
/// - `HOME` and `TMPDIR` here, and the yep home the test names as `YEP_HOME`;
/// - `PATH` as `scripts/test` made it (the pinned peers first, then the system's);
/// - where the toolchains live that a home would otherwise tell (`CARGO_HOME`, `RUSTUP_HOME`,
///   `PYENV_ROOT`), as the machine has them, so cargo and python still run;
/// - none of the machine's `YEP_*` settings nor `RUST_LOG`: a test that wants one says so.
pub struct Sealed {
    home: PathBuf,
    tmp: PathBuf,
    /// The machine's toolchain locations, found once from the real home.
    tools: Vec<(&'static str, OsString)>,
}

impl Sealed {
    /// This test process's sealed environment, made on first use.
    pub fn get() -> &'static Sealed {
        static SEALED: OnceLock<Sealed> = OnceLock::new();
        SEALED.get_or_init(Sealed::make)
    }

    fn make() -> Sealed {
        sweep_stale();
        let root = std::env::temp_dir().join(format!("yep-test-{}", std::process::id()));
        let (home, tmp) = (root.join("home"), root.join("tmp"));
        for dir in [&home, &tmp] {
            std::fs::create_dir_all(dir).expect("make the sealed home and temp dir");
        }
        // A user's identity for git, as every developer machine has; nothing else.
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = yep tests\n\temail = tests@yep.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .expect("write the sealed home's .gitconfig");
        let real_home = std::env::var_os("HOME").map(PathBuf::from);
        let mut tools = Vec::new();
        for (var, default) in [
            ("CARGO_HOME", ".cargo"),
            ("RUSTUP_HOME", ".rustup"),
            ("PYENV_ROOT", ".pyenv"),
        ] {
            let found = std::env::var_os(var).or_else(|| {
                let dir = real_home.as_ref()?.join(default);
                dir.is_dir().then(|| dir.into_os_string())
            });
            if let Some(dir) = found {
                tools.push((var, dir));
            }
        }
        Sealed { home, tmp, tools }
    }

    /// The sealed `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The sealed `TMPDIR`.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// `program` to run sealed, with `yep_home` as its yep home.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, yep_home: &Path) -> Command {
        #[allow(clippy::disallowed_methods)] // the program under test
        let mut command = Command::new(program);
        self.seal(&mut command, yep_home);
        command
    }

    /// Seal this test process itself as [`Sealed::seal`] seals a program: code a test runs
    /// in-process (an `ExtensionHost`, the store) reads `HOME`, `TMPDIR` and the yep home
    /// too. Each integration-test binary calls it before `main`, through
    /// [`seal_this_test_binary!`](crate::seal_this_test_binary).
    ///
    /// # Safety
    /// It sets the process environment: call it before any other thread runs.
    pub unsafe fn seal_process() {
        let sealed = Sealed::get();
        let vars: Vec<OsString> = std::env::vars_os().map(|(var, _)| var).collect();
        // SAFETY: the caller runs this before any other thread exists.
        unsafe {
            for var in vars {
                let yeps = var
                    .to_str()
                    .is_some_and(|v| v.starts_with("YEP_") && !HARNESS.contains(&v));
                if yeps || var == "RUST_LOG" {
                    std::env::remove_var(&var);
                }
            }
            for (var, dir) in &sealed.tools {
                std::env::set_var(var, dir);
            }
            std::env::set_var("HOME", &sealed.home);
            std::env::set_var("TMPDIR", &sealed.tmp);
            std::env::set_var("YEP_HOME", sealed.home.join(".yep"));
        }
    }

    /// Seal `command` as [`Sealed::command`] does.
    pub fn seal(&self, command: &mut Command, yep_home: &Path) {
        for (var, _) in std::env::vars_os() {
            if var.to_str().is_some_and(|v| v.starts_with("YEP_")) {
                command.env_remove(&var);
            }
        }
        command
            .env_remove("RUST_LOG")
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("YEP_HOME", yep_home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (var, dir) in &self.tools {
            command.env(var, dir);
        }
    }
}

/// The test harness's own settings (`scripts/test` sets them, or a developer: which peers and
/// corpora the tests use), which yep itself never reads: a sealed test process keeps them.
const HARNESS: [&str; 8] = [
    "YEP_PEERS",
    "YEP_NODE22_BIN",
    "YEP_CONFORMANCE_BIN",
    "YEP_AGENTS_BIN",
    "YEP_MCP_PYTHON",
    "YEP_CLAUDE_INTEROP",
    "YEP_ZOT_INTEROP",
    "YEP_FRESH_CLONE",
];

/// What earlier test runs left: the sealed dirs of test processes that are gone (best effort;
/// go's module cache is read-only and may stay).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("yep-test-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
