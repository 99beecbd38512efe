//! Shared helpers: locating the binaries cargo built, specs in a temp dir, recording events.
//! `yep-tools`' tests use this file too (`#[path]`).
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use yep_host::capability::{Answer, LogLevel, Question, Status};
use yep_host::rpc::BoxFuture;
use yep_host::store::grants::SandboxGrants;
use yep_host::{Events, Extension, Grants, ServerSpec, SupervisorOptions};

pub use yep_test_support::bins::{built, target_dir};

/// The real `yep-example-echo` binary.
pub fn echo_bin() -> String {
    built(
        target_dir().join("yep-example-echo"),
        "cargo build -p yep-example-echo",
    )
}

/// The configurable runtime fixture (`examples/fixture`).
pub fn fixture_bin() -> String {
    built(
        target_dir().join("yep-fixture"),
        "cargo build -p yep-fixture",
    )
}

/// The yolop-yep fixture (an example of `yep-host`, built by its `cargo test`).
pub fn yolop_fixture_bin() -> String {
    built(
        target_dir().join("examples/yolop_fixture"),
        "cargo build -p yep-host --example yolop_fixture",
    )
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn spec(&self, name: &str, command: &str, args: &[&str]) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            command: command.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            package_dir: self.dir.path().to_path_buf(),
            workspace_root: self.dir.path().to_path_buf(),
            cwd: None,
            data_dir: None,
            language: None,
            session_id: "test-session".into(),
            config: Value::Null,
            env: Vec::new(),
            log_dir: self.dir.path().join("logs"),
            grants: Grants::ALL,
            // Unchecked: these tests drive servers with whatever arguments they like.
            tool_schemas: Default::default(),
            // The scripts these tests run write pid files and markers beside them and exec
            // the workspace's built servers: granted, as an embedder grants its servers.
            sandbox_grants: SandboxGrants {
                write: vec![self.dir.path().display().to_string()],
                read: vec![target_dir().display().to_string()],
                ..SandboxGrants::default()
            },
            grant_name: None,
            broker: None,
        }
    }

    pub fn echo(&self) -> ServerSpec {
        self.spec("echo", &echo_bin(), &[])
    }

    /// The echo server spawned bare, for tests that speak the wire themselves.
    pub fn spawn_echo(&self) -> yep_host::process::Spawned {
        yep_host::process::spawn(&yep_host::process::SpawnSpec {
            program: echo_bin(),
            args: vec![],
            cwd: self.dir.path().into(),
            bin_dir: None,
            env: vec![],
            log_path: self.dir.path().join("logs/echo.log"),
            sandbox: None,
        })
        .unwrap()
    }
}

pub fn quick_opts() -> SupervisorOptions {
    SupervisorOptions {
        request_timeout: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(10),
        grace: Duration::from_millis(500),
        backoff_base: Duration::from_millis(50),
        ..SupervisorOptions::default()
    }
}

/// Events that record what arrives and answer questions from a script.
#[derive(Default)]
pub struct Recorder {
    /// Every status push (`None`: cleared).
    pub statuses: Mutex<Vec<Option<Status>>>,
    pub logs: Mutex<Vec<(LogLevel, String)>>,
    pub asked: Mutex<Vec<Question>>,
    pub answer: Mutex<Option<String>>,
}

impl Events for Recorder {
    fn status(&self, _: &str, status: Option<Status>) {
        self.statuses.lock().unwrap().push(status);
    }
    fn log(&self, _: &str, level: LogLevel, message: &str) {
        self.logs.lock().unwrap().push((level, message.to_string()));
    }
    fn ask(&self, _: &str, params: Question) -> BoxFuture<Answer> {
        self.asked.lock().unwrap().push(params);
        let answer = self.answer.lock().unwrap().clone();
        Box::pin(async move {
            match answer {
                Some(a) => Answer::answered(a),
                None => Answer::cancelled(),
            }
        })
    }
}

pub fn extension(spec: ServerSpec, events: Arc<Recorder>) -> Extension {
    Extension::new(spec, quick_opts(), events)
}

/// Poll `cond` for up to five seconds.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Spawn an MCP server spec the way `yep session`'s `mcp list-tools` does (its command, args
/// and env as given) and return everything it prints before it exits.
pub async fn run_mcp_spec(
    spec: &yep_host::manifest::McpServer,
    cwd: &std::path::Path,
    log_path: PathBuf,
) -> String {
    use tokio::io::AsyncReadExt;
    let spawned = yep_host::process::spawn(&yep_host::process::SpawnSpec {
        program: spec.command.clone().unwrap(),
        args: spec.args.clone(),
        cwd: cwd.to_path_buf(),
        bin_dir: None,
        env: spec.env.clone().into_iter().collect(),
        log_path,
        sandbox: None,
    })
    .unwrap();
    let mut out = String::new();
    let mut stdout = spawned.stdout;
    tokio::time::timeout(Duration::from_secs(30), stdout.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

/// Install and enable, in `home`, a fixture package `name` written under `src`: `facet` is the
/// manifest's approval (its `yolop`), `config` the fixture's behaviour.
pub fn install_fixture(
    home: &yep_host::store::Home,
    src: &std::path::Path,
    name: &str,
    facet: Value,
    config: Value,
) {
    let mut facet = facet;
    let mut config = config;
    config["name"] = serde_json::json!(name);
    facet["capabilityServer"] =
        serde_json::json!({"command": fixture_bin(), "args": [config.to_string()]});
    // What the fixture logs (hook fires, markers) goes beside `src`: granted.
    let beside = src.parent().unwrap_or(src).display().to_string();
    let manifest = serde_json::json!({"name": name, "version": "1.0.0", "description": format!("{name} fixture"), "yolop": facet, "sandbox": {"write": [beside]}});
    install_manifest(home, src, manifest);
}

/// Install and enable, in `home`, the package this `plugin.json` describes (written under
/// `src`), as `yep install --yes` and `yep enable` do.
pub fn install_manifest(home: &yep_host::store::Home, src: &std::path::Path, manifest: Value) {
    let name = manifest["name"].as_str().unwrap().to_string();
    let pkg = src.join(&name);
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    home.install(
        pkg.to_str().unwrap(),
        &yep_host::store::InstallOptions::default(),
        &mut yep_host::store::AlwaysYes,
    )
    .unwrap();
    home.set_enabled(&name, true).unwrap();
}

/// What the host tells server `extension` in `dir` as it starts it: no config, nothing granted,
/// ten seconds for the handshake.
pub fn hello(extension: &str, dir: &std::path::Path) -> yep_host::dialect::Hello {
    yep_host::dialect::Hello {
        extension: extension.into(),
        session_id: "s1".into(),
        workspace_root: dir.display().to_string(),
        config: Value::Null,
        grants: Default::default(),
        timeout: Duration::from_secs(10),
        package_dir: dir.display().to_string(),
        data_dir: dir.display().to_string(),
        interactive_ui: false,
        slow_start: None,
    }
}

/// The echo example's `plugin.json`, its server the built `yep-example-echo`.
pub fn echo_manifest() -> Value {
    let mut echo: Value =
        serde_json::from_str(include_str!("../../../../../examples/echo/plugin.json")).unwrap();
    echo["yolop"]["capabilityServer"]["command"] = serde_json::json!(echo_bin());
    echo
}

/// A host over a home in `dir` (session `s1`, workspace `dir`) where the echo example is
/// installed and enabled, started with `opts` (quick supervisor timings unless they say
/// otherwise).
pub async fn echo_host(
    dir: &std::path::Path,
    opts: yep_host::HostOptions,
) -> (yep_host::store::Home, yep_host::ExtensionHost) {
    let home = yep_host::store::Home {
        root: dir.join("home"),
    };
    install_manifest(&home, &dir.join("src"), echo_manifest());
    let session = yep_host::Session {
        id: "s1".into(),
        workspace_root: dir.to_path_buf(),
    };
    let host = yep_host::ExtensionHost::start(home.clone(), session, opts)
        .await
        .unwrap();
    (home, host)
}
