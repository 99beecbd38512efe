//! A loopback npm registry and PyPI index serving the peers' mirror, and a user's home to
//! install published servers into the way their READMEs say, with no real registry reached.
//!
//! `scripts/test` mirrors the pinned servers and their dependencies into `$YEP_PEERS/mirror`;
//! [`Registry::start`] serves it with `tests/fixtures/registry/serve.py`, and [`UserHome`]
//! runs npm, pip, uv and `yep` with the registry's environment in a home of its own.

use std::ffi::OsStr;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The loopback registry (`serve.py`), killed when dropped.
pub struct Registry {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Serve `$YEP_PEERS/mirror` on 127.0.0.1; fails when `scripts/test` has not filled it.
    #[allow(clippy::disallowed_methods)] // the registry, kept running while the test installs
    pub fn start() -> Registry {
        let mirror = std::env::var_os("YEP_PEERS")
            .map(|p| PathBuf::from(p).join("mirror"))
            .filter(|m| m.join("npm").is_dir() && m.join("pypi").is_dir())
            .expect("no mirror in $YEP_PEERS: run the tests with `scripts/test`, which fills it");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        std::fs::write(&log, "").unwrap();
        let serve =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/registry/serve.py");
        let mut child = Command::new("python3")
            .arg(serve)
            .arg(&mirror)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the loopback registry");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = first.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the loopback registry said {first:?}, not its port")
        });
        Registry {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// What points npm, pip and uv at it, as a user's configuration would:
    /// `npm_config_registry`, `PIP_INDEX_URL`, `UV_DEFAULT_INDEX` and `UV_INDEX_URL` (uv's
    /// older name, which a uv that predates the other reads), an empty `PIP_FIND_LINKS` (this
    /// machine's is a local wheel directory), and `UV_PYTHON_DOWNLOADS=never` so uv runs the
    /// Python it finds and never fetches one.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let simple = format!("{}simple/", self.url());
        vec![
            ("npm_config_registry", self.url()),
            ("PIP_INDEX_URL", simple.clone()),
            ("PIP_FIND_LINKS", String::new()),
            ("UV_DEFAULT_INDEX", simple.clone()),
            ("UV_INDEX_URL", simple),
            ("UV_PYTHON_DOWNLOADS", "never".into()),
        ]
    }

    /// Every request it has had, oldest first, as paths (`/@scope%2fname`,
    /// `/simple/mcp/`, `/files/x.whl`).
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Registry {
    /// Fails unless it had no request after the first `count`: what ran since reached no
    /// registry.
    pub fn asked_nothing_since(&self, count: usize) {
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            count,
            "asked since: {:?}",
            &requests[count.min(requests.len())..]
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Variables of this test run that a user's machine does not have: the peers' global npm
/// prefix, the local wheel directory, and the test runner's yep settings.
const NOT_THE_USERS: &[&str] = &[
    "npm_config_prefix",
    "NPM_CONFIG_PREFIX",
    "PIP_FIND_LINKS",
    "YEP_HOME",
    "YEP_SANDBOX",
    "RUST_LOG",
];

/// A user's machine in a temp dir: `home/` as `$HOME`, with a `~/.gitconfig` (name, email, an
/// alias) and an ordinary npm cache, `~/.npm`, empty and not offline; yep's home at
/// `~/.config/yep`; and a workspace, `ws/`, beside the home.
pub struct UserHome {
    tmp: tempfile::TempDir,
    registry: Vec<(&'static str, String)>,
}

/// The identity in the fake home's `~/.gitconfig`.
pub const GIT_NAME: &str = "Ada Lovelace";
pub const GIT_EMAIL: &str = "ada@example.org";

impl UserHome {
    /// The home, pointing npm, pip and uv at `registry` when given.
    pub fn new(registry: Option<&Registry>) -> UserHome {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".npm")).unwrap();
        std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            format!(
                "[user]\n\tname = {GIT_NAME}\n\temail = {GIT_EMAIL}\n[alias]\n\tst = status --short\n[init]\n\tdefaultBranch = main\n"
            ),
        )
        .unwrap();
        UserHome {
            tmp,
            registry: registry.map(Registry::env).unwrap_or_default(),
        }
    }

    /// `$HOME`.
    pub fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// yep's home, `~/.config/yep`.
    pub fn yep_home(&self) -> PathBuf {
        self.home().join(".config/yep")
    }

    /// The workspace, beside the home.
    pub fn workspace(&self) -> PathBuf {
        self.tmp.path().join("ws")
    }

    /// `program` to run as the user would, in the workspace: this `$HOME`, the registry's
    /// environment, and none of the test run's own ([`NOT_THE_USERS`]).
    #[allow(clippy::disallowed_methods)] // npm, pip and the CLI, run as a user runs them
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        for var in NOT_THE_USERS {
            command.env_remove(var);
        }
        command
            .current_dir(self.workspace())
            .env("HOME", self.home())
            .envs(self.registry.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        command
    }

    /// `yep args` in the workspace with `stdin` as its whole input, under everything this
    /// kernel can contain (`YEP_SANDBOX=required`: nothing starts uncontained).
    pub fn yep(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(env!("CARGO_BIN_EXE_yep"))
            .args(args)
            .env("YEP_HOME", self.yep_home())
            .env("YEP_SANDBOX", "required")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// A `yep session --json` fed `script`: its JSON lines, warnings left out.
    pub fn session(&self, script: &str) -> Vec<serde_json::Value> {
        let out = self.yep(&["session", "--json"], script);
        super::text(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{e}: {l}\nstderr: {}", super::text(&out.stderr)))
            })
            .filter(|l: &serde_json::Value| l.get("warning").is_none())
            .collect()
    }

    /// `npm install specs…` in `dir` (made, with a `package.json`), as a user installs
    /// servers locally; `dir/node_modules/.bin` then holds their programs.
    pub fn npm_install(&self, dir: &Path, specs: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("package.json"), r#"{"private": true}"#).unwrap();
        let out = self
            .command("npm")
            .current_dir(dir)
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .args(specs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "npm install {specs:?}: {}",
            super::text(&out.stderr)
        );
    }

    /// A venv at `venv` made with this machine's `python3 -m venv`, with `requirements`
    /// installed by its pip; `venv/bin` then holds their scripts.
    pub fn venv_install(&self, venv: &Path, requirements: &[&str]) {
        let run = |mut command: Command, what: &str| {
            let out = command.output().unwrap();
            assert!(out.status.success(), "{what}: {}", super::text(&out.stderr));
        };
        let mut make = self.command("python3");
        make.args(["-m", "venv"]).arg(venv);
        run(make, "python3 -m venv");
        let mut pip = self.command(venv.join("bin/pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check"])
            .args(requirements);
        run(pip, &format!("pip install {requirements:?}"));
    }
}
