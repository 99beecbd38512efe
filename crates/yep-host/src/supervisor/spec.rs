//! How to run one extension's server ([`ServerSpec`]): its command, where it runs, what it
//! was granted, and the one recipe the supervisor spawns it by.

use super::options::SupervisorOptions;
use crate::manifest::{Grants, Manifest};
use crate::process::{self, SpawnSpec};
use crate::tool_args::ToolSchemas;
use serde_json::Value;
use std::path::PathBuf;

/// How to run one extension's server.
#[derive(Clone)]
pub struct ServerSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The package directory; its `bin/` goes first on PATH.
    pub package_dir: PathBuf,
    /// The server's cwd (unless `cwd` is set) and `initialize.workspace_root`.
    pub workspace_root: PathBuf,
    /// A fixed cwd for the server (a zot extension runs in its own directory); `None` is the
    /// workspace.
    pub cwd: Option<PathBuf>,
    /// Where the server keeps its state, when its wire tells it (zot's `data_dir`); outside
    /// the package, so state never looks like tampering and survives an update.
    pub data_dir: Option<PathBuf>,
    /// The language the package says it is written in (zot's `language`), for errors.
    pub language: Option<String>,
    pub session_id: String,
    /// `initialize.config` (secrets already stripped).
    pub config: Value,
    /// Extra environment (injected secrets and `env`-mapped config).
    pub env: Vec<(String, String)>,
    /// Where `<name>.log` (the server's stderr) is written.
    pub log_dir: PathBuf,
    /// What the manifest lets the server push back at the user.
    pub grants: Grants,
    /// The manifest's tool argument schemas, compiled: every `tool/call` is checked against
    /// them before it is sent. Empty (the default) checks nothing.
    pub tool_schemas: ToolSchemas,
    /// What its approval grants beyond the sandbox's default profile.
    pub sandbox_grants: crate::manifest::SandboxGrants,
    /// The name `yep grant` knows it by, when not `name` (an MCP server's `name` is the stem
    /// of its log).
    pub grant_name: Option<String>,
    /// Its brokered secrets and the home's CA ([`process::Sandboxed::broker`]).
    pub broker: Option<crate::store::broker::Broker>,
}

/// Env values can be secrets: Debug shows their names only.
impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("package_dir", &self.package_dir)
            .field("workspace_root", &self.workspace_root)
            .field("cwd", &self.cwd)
            .field("data_dir", &self.data_dir)
            .field("language", &self.language)
            .field("session_id", &self.session_id)
            .field("config", &self.config)
            .field("env", &process::redacted_env(&self.env))
            .field("log_dir", &self.log_dir)
            .field("grants", &self.grants)
            .field("tool_schemas", &self.tool_schemas)
            .finish()
    }
}

impl ServerSpec {
    /// `command args`, run from `package_dir` in `workspace_root`, logging to `log_dir`: no
    /// config, env, grants or schema checks, which a caller adds as it needs.
    pub fn new(
        name: String,
        command: String,
        args: Vec<String>,
        package_dir: PathBuf,
        workspace_root: PathBuf,
        log_dir: PathBuf,
    ) -> ServerSpec {
        ServerSpec {
            name,
            command,
            args,
            package_dir,
            workspace_root,
            cwd: None,
            data_dir: None,
            language: None,
            session_id: String::new(),
            config: Value::Null,
            env: Vec::new(),
            log_dir,
            grants: Grants::default(),
            tool_schemas: ToolSchemas::default(),
            sandbox_grants: Default::default(),
            grant_name: None,
            broker: None,
        }
    }

    /// The spec a manifest describes, or `None` when it declares no capability server.
    pub fn from_manifest(
        manifest: &Manifest,
        package_dir: PathBuf,
        workspace_root: PathBuf,
        log_dir: PathBuf,
    ) -> Option<ServerSpec> {
        let server = manifest.yolop.capability_server.as_ref()?;
        let name = manifest.name.clone();
        let (command, args) = (server.command.clone(), server.args.clone());
        Some(ServerSpec {
            grants: Grants::from_manifest(manifest),
            tool_schemas: ToolSchemas::from_manifest(manifest),
            sandbox_grants: manifest.sandbox.clone(),
            ..ServerSpec::new(name, command, args, package_dir, workspace_root, log_dir)
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_dir.join(format!("{}.log", self.name))
    }

    /// How the supervisor spawns it in `workspace` with `env`: the one recipe, also for
    /// tools that talk to a server's raw stdio (`yep doctor --conformance`).
    pub fn spawn_spec(
        &self,
        workspace: &std::path::Path,
        env: Vec<(String, String)>,
        opts: &SupervisorOptions,
        on_denied: Option<process::DeniedSink>,
    ) -> SpawnSpec {
        SpawnSpec {
            program: self.command.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone().unwrap_or_else(|| workspace.to_path_buf()),
            bin_dir: Some(self.package_dir.join("bin")),
            env,
            log_path: self.log_path(),
            sandbox: Some(crate::process::Sandboxed {
                mode: opts.sandbox,
                package_dir: Some(self.package_dir.clone()),
                data_dir: self.data_dir.clone(),
                workspace: Some(workspace.to_path_buf()),
                // A wire whose servers keep files of their own in the workspace (zot's `.zot`).
                files: opts
                    .dialect
                    .workspace_files()
                    .map(|dir| workspace.join(dir)),
                grants: self.sandbox_grants.clone(),
                name: self.grant_name.clone().unwrap_or_else(|| self.name.clone()),
                on_denied,
                tell_refused_hosts: false,
                broker: self.broker.clone(),
                learn: opts.learn.clone(),
                audit: opts.audit.clone(),
            }),
        }
    }

    /// What runs and where, as startup errors say it: `` `cmd args` in DIR (language) ``.
    pub(crate) fn ran(&self, workspace: &std::path::Path) -> String {
        let line = std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let dir = self.cwd.as_deref().unwrap_or(workspace);
        let mut out = format!(
            "`{}` in {}",
            crate::text::escape(&line),
            crate::text::escape(&dir.display().to_string())
        );
        if let Some(language) = self.language.as_deref().filter(|l| !l.is_empty()) {
            out.push_str(&format!(" ({})", crate::text::escape(language)));
        }
        out
    }
}
