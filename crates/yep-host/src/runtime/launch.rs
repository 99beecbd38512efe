//! How an installed extension's server is launched: the one recipe a session and
//! `yep call <name>` share. The approved manifest, plain config as `initialize.config`, secrets
//! and `env`-mapped fields as environment, the data dir, the workspace as cwd, stderr to the
//! home's log, and yolop's `request_timeout_ms`. [`zot_dir`] is how a zot extension's
//! directory runs before it is installed.

use super::hooks;
use crate::dialect::claude::{ClaudeCode, ToolNames};
use crate::dialect::zot::Zot;
use crate::health::HealthEvent;
use crate::manifest::{Grants, Manifest, ManifestError};
use crate::store::claude::ClaudePin;
use crate::store::lockfile::LockEntry;
use crate::store::zot::resolve_exec;
use crate::store::{Home, StoreError, config};
use crate::supervisor::{NoStreams, ServerSpec, SupervisorOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why an installed extension cannot be launched. Every variant names the extension; where
/// another error is the cause it is the `source`, and the message does not repeat it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error("failed to read the lock to launch extension `{extension}`")]
    Lock {
        extension: String,
        #[source]
        source: Box<StoreError>,
    },
    #[error("extension `{extension}` is not installed")]
    NotInstalled { extension: String },
    /// A copied package whose files are no longer what was approved. `why` names the
    /// extension and says how to review it.
    #[error("{why}")]
    Drifted { extension: String, why: String },
    #[error("failed to load the manifest of extension `{extension}`")]
    Manifest {
        extension: String,
        #[source]
        source: ManifestError,
    },
    #[error(
        "extension `{extension}` is installed under that name, but its manifest calls it `{manifest_name}`"
    )]
    Renamed {
        extension: String,
        manifest_name: String,
    },
    /// A zot extension whose `extension.json` says `"enabled": false`: zot never starts it.
    #[error(
        "extension `{extension}` is off in its extension.json (\"enabled\": false): zot does not start it, and neither does yep"
    )]
    ZotDisabled { extension: String },
    #[error("failed to read the config of extension `{extension}`")]
    Config {
        extension: String,
        #[source]
        source: Box<StoreError>,
    },
    #[error("the stored config of extension `{extension}` is not valid")]
    InvalidConfig {
        extension: String,
        #[source]
        source: Box<StoreError>,
    },
}

impl LaunchError {
    /// The extension it is about.
    pub fn extension(&self) -> &str {
        match self {
            LaunchError::Lock { extension, .. }
            | LaunchError::NotInstalled { extension }
            | LaunchError::Drifted { extension, .. }
            | LaunchError::Manifest { extension, .. }
            | LaunchError::Renamed { extension, .. }
            | LaunchError::ZotDisabled { extension }
            | LaunchError::Config { extension, .. }
            | LaunchError::InvalidConfig { extension, .. } => extension,
        }
    }
}

/// An installed extension, ready to spawn.
pub struct Launch {
    /// What was approved (a linked package's edited `plugin.json` is not).
    pub manifest: Manifest,
    pub spec: ServerSpec,
    pub supervisor: SupervisorOptions,
    /// Start it with the session, whatever it contributes (zot starts every extension).
    pub eager: bool,
    /// What of it the user switched off, already left out of `manifest` and its dialect.
    pub off: crate::store::components::Off,
    /// Things the user should hear about: a clamped hook ([`HealthEvent::Warning`]), an edited
    /// linked package ([`HealthEvent::Drifted`]). Each shows as its message.
    pub warnings: Vec<HealthEvent>,
}

/// The launch recipe for installed extension `name`, or why it cannot run (not installed, a
/// copied package that changed since approval, a renamed manifest, invalid config).
///
/// This is the one place that decides how an installed extension runs: a session, `yep call
/// <name>`, `yep doctor <name>` and `yep demo` all launch through it. A Claude Code plugin's
/// hooks see the agent's tools by their usual names (`ToolNames::default`).
pub fn installed(
    home: &Home,
    name: &str,
    workspace_root: PathBuf,
    session_id: &str,
    supervisor: &SupervisorOptions,
) -> Result<Launch, LaunchError> {
    let tool_names = ToolNames::default();
    installed_naming(
        home,
        name,
        workspace_root,
        session_id,
        supervisor,
        &tool_names,
    )
}

/// [`installed`], for a host whose agent names its tools as `tool_names` says to Claude Code
/// plugins' hooks ([`HostOptions::claude_tool_names`](super::HostOptions::claude_tool_names)).
pub(super) fn installed_naming(
    home: &Home,
    name: &str,
    workspace_root: PathBuf,
    session_id: &str,
    supervisor: &SupervisorOptions,
    tool_names: &ToolNames,
) -> Result<Launch, LaunchError> {
    let extension = || name.to_string();
    let lock = home.lockfile().map_err(|e| LaunchError::Lock {
        extension: extension(),
        source: Box::new(e),
    })?;
    let Some(entry) = lock.get(name).cloned() else {
        return Err(LaunchError::NotInstalled {
            extension: extension(),
        });
    };
    // A copied package must still be what was approved (a linked one is the author's to
    // edit, and is clamped to its approved manifest below).
    let drift = home.drift_of(&entry);
    if let Some(why) = drift.as_ref().filter(|_| !entry.is_linked()) {
        return Err(LaunchError::Drifted {
            extension: extension(),
            why: why.clone(),
        });
    }
    let dir = home.package_dir(name);
    let (mut manifest, warnings) = approved_manifest(home, name, &entry, drift)?;
    // What the user switched off never runs: out of the manifest (its hooks, MCP servers and
    // commands) and out of a plugin's pin (the hooks and commands its dialect runs).
    let off = crate::store::settings::off(&home.settings_path(), name).map_err(|e| {
        LaunchError::Config {
            extension: extension(),
            source: Box::new(e),
        }
    })?;
    let mut claude = entry.claude.clone();
    off.apply(&mut manifest, claude.as_mut());
    let mut spec = server_spec(home, name, &manifest, &dir, workspace_root);
    spec.session_id = session_id.to_string();
    // Its data dir (`YEP_DATA_DIR`, zot's `data_dir`) is the one place of its own it writes.
    spec.data_dir = Some(home.data_dir(name));
    // What the user granted beyond the manifest (`yep grant`) widens it too.
    spec.sandbox_grants =
        crate::store::approval::effective_grants(&lock, name, None, &spec.sandbox_grants);
    // Plain config (secrets stripped) for initialize; secrets and env-mapped fields as env.
    let read = |e| LaunchError::Config {
        extension: extension(),
        source: Box::new(e),
    };
    let (plain, env) = config::server_inputs(home, &manifest).map_err(read)?;
    let secrets = config::secrets(home, name).map_err(read)?;
    config::validate(&manifest, &plain, &secrets, false).map_err(|e| {
        LaunchError::InvalidConfig {
            extension: extension(),
            source: Box::new(e),
        }
    })?;
    let mut supervisor = supervisor.clone();
    if entry.zot.is_some() {
        zot_spec(home, name, &entry, dir, &mut spec, &mut supervisor)?;
    }
    // yolop's own key: the per-request timeout, clamped to 1–600 s.
    if let Some(ms) = plain.get("request_timeout_ms").and_then(Value::as_u64) {
        supervisor.request_timeout = Duration::from_millis(ms.clamp(1_000, 600_000));
    }
    spec.config = plain;
    spec.env = env;
    // A brokered secret reaches the server as its placeholder; the value, only its proxy.
    let brokered = crate::store::broker::brokered(home, &manifest).map_err(read)?;
    crate::store::broker::hide(&mut spec.env, &brokered);
    spec.broker = Some(crate::store::broker::Broker {
        ca_dir: crate::store::broker::dir(home),
        secrets: brokered,
    });
    if let Some(pin) = claude {
        // A plugin has no server: its dialect runs its pinned hooks and commands, each a
        // short-lived process contained as a server would be, with state in its data dir.
        let data = home.data_dir(name);
        let _ = std::fs::create_dir_all(&data);
        spec.data_dir = Some(data);
        claude_wire(pin, &spec, &mut supervisor, tool_names);
    }
    Ok(Launch {
        eager: entry.zot.is_some(),
        off,
        manifest,
        spec,
        supervisor,
        warnings,
    })
}

/// The manifest installed extension `name` (locked as `entry`) runs with, and what the user
/// should hear of it: the approved one when its files changed since, else the package's (a
/// linked package's other `drift` told); its hooks failing closed when the user chose so,
/// and clamped. An error when it cannot be read or names another extension.
fn approved_manifest(
    home: &Home,
    name: &str,
    entry: &LockEntry,
    drift: Option<String>,
) -> Result<(Manifest, Vec<HealthEvent>), LaunchError> {
    let extension = || name.to_string();
    let mut warnings = Vec::new();
    // A zot extension's is its extension.json with the registrations it was approved with.
    let mut manifest = home
        .package_manifest(entry)
        .map_err(|e| LaunchError::Manifest {
            extension: extension(),
            source: e,
        })?;
    // Files can change after approval: the grants are the approved ones.
    if let Some(approved) = entry.approved() {
        use crate::store::approval::{Approval, Decision, Moment, decide};
        let pinned = Approval::of_manifest(entry.kind(), approved.clone());
        let candidate = Approval::of_manifest(entry.kind(), manifest.clone());
        // Nobody is asked at launch: a change is refused, and what was approved runs.
        if let Decision::Refuse(_) = decide(Some(&pinned), &candidate, Moment::Launch) {
            warnings.push(HealthEvent::Drifted {
                extension: extension(),
                message: format!("extension `{name}`: {} changed since it was approved; using the approved manifest (review with `yep update {name}`)", entry.manifest_file()),
            });
            manifest = approved;
        }
    }
    // Other files of a linked package changed: it runs, and the user hears of it once.
    if warnings.is_empty()
        && let Some(why) = drift
    {
        warnings.push(HealthEvent::Drifted {
            extension: extension(),
            message: why,
        });
    }
    // The user's choice, stricter than any manifest: a hook that cannot answer blocks.
    if crate::store::settings::fails_closed(&home.settings_path(), name).unwrap_or(false) {
        for hook in &mut manifest.yolop.hooks {
            hook.on_error = crate::manifest::OnError::Block;
        }
    }
    if manifest.name != name {
        return Err(LaunchError::Renamed {
            extension: extension(),
            manifest_name: manifest.name,
        });
    }
    warnings.extend(
        hooks::clamp_warnings(name, &manifest)
            .into_iter()
            .map(|message| HealthEvent::Warning {
                extension: Some(extension()),
                message,
            }),
    );
    Ok((manifest, warnings))
}

/// The server `manifest` declares, run from package dir `dir`; a declarative package (skills,
/// MCP servers) gets one with no command.
fn server_spec(
    home: &Home,
    name: &str,
    manifest: &Manifest,
    dir: &Path,
    workspace_root: PathBuf,
) -> ServerSpec {
    ServerSpec::from_manifest(
        manifest,
        dir.to_path_buf(),
        workspace_root.clone(),
        home.logs_dir(),
    )
    .unwrap_or_else(|| {
        // A declarative package (skills, MCP servers) has no server; calls fail cleanly.
        let (name, command) = (name.to_string(), String::new());
        ServerSpec {
            grants: Grants::from_manifest(manifest),
            ..ServerSpec::new(
                name,
                command,
                Vec::new(),
                dir.to_path_buf(),
                workspace_root,
                home.logs_dir(),
            )
        }
    })
}

/// zot's way, for zot extension `name` (locked as `entry`) in `dir`: its own wire, run in its
/// own directory, `exec` resolved as zot resolves it, and state in a data dir outside the
/// approved (hashed) files. An error when its manifest turns it off.
fn zot_spec(
    home: &Home,
    name: &str,
    entry: &LockEntry,
    dir: PathBuf,
    spec: &mut ServerSpec,
    supervisor: &mut SupervisorOptions,
) -> Result<(), LaunchError> {
    zot_wire(supervisor, Zot::pinned(entry.zot.clone()));
    if !spec.command.is_empty() {
        spec.command = resolve_exec(&spec.command, &dir).program();
    }
    let extension_json = crate::store::zot::ZotManifest::load(&dir).ok();
    // Its `go run` was built at install: that program runs, pinned with the package.
    let go_run = extension_json.as_ref().and_then(|m| m.go_run());
    if let (Some(run), Some(built)) = (go_run, &entry.binary)
        && built.path == crate::store::zot::GO_BUILT
    {
        spec.command = dir.join(&built.path).to_string_lossy().into_owned();
        spec.args = run.args;
    }
    // zot's own switch: one its manifest turns off never starts.
    if extension_json.as_ref().is_some_and(|m| !m.enabled) {
        return Err(LaunchError::ZotDisabled {
            extension: name.to_string(),
        });
    }
    spec.language = extension_json.map(|m| m.language);
    spec.cwd = Some(dir);
    // Running the host's tools is pinned like the rest of what it registered.
    spec.grants.call_tools = entry
        .zot
        .as_ref()
        .is_some_and(|pin| pin.has(crate::store::zot::CALL_TOOL));
    let data = home.data_dir(name);
    // Best effort: a data dir that cannot be made fails the extension's own writes,
    // which it reports.
    let _ = std::fs::create_dir_all(&data);
    spec.data_dir = Some(data);
    Ok(())
}

/// The zot extension `extension` in directory `dir`, an author's work in progress, as
/// `yep call <dir>` runs it: zot's wire, its own directory as cwd, `exec` resolved as zot
/// resolves it, and, as under zot, its directory as its data dir; nothing is pinned. `None`
/// for a bundle with nothing to run.
pub fn zot_dir(
    extension: &crate::store::zot::ZotManifest,
    dir: &Path,
    workspace_root: PathBuf,
    log_dir: &Path,
    supervisor: &SupervisorOptions,
) -> Option<(ServerSpec, SupervisorOptions)> {
    let mut spec = zot_dir_spec(extension, dir, workspace_root, log_dir)?;
    // As under zot, its directory is its data dir: an author's work in progress writes there.
    spec.data_dir = Some(dir.to_path_buf());
    let mut supervisor = supervisor.clone();
    zot_wire(&mut supervisor, Zot::default());
    Some((spec, supervisor))
}

/// How a zot extension in `dir` is run, as a session would run it (its own directory as cwd,
/// `exec` resolved as zot resolves it; its data dir the store's, set by the caller); `None`
/// for a bundle with nothing to run.
pub fn zot_dir_spec(
    manifest: &crate::store::zot::ZotManifest,
    dir: &Path,
    workspace: PathBuf,
    log_dir: &Path,
) -> Option<ServerSpec> {
    let command = manifest.exec_in(dir)?.program();
    Some(ServerSpec {
        name: manifest.name.clone(),
        command,
        args: manifest.args.clone(),
        package_dir: dir.to_path_buf(),
        workspace_root: workspace,
        cwd: Some(dir.to_path_buf()),
        data_dir: None,
        language: Some(manifest.language.clone()),
        session_id: String::new(),
        config: Value::Null,
        env: Vec::new(),
        log_dir: log_dir.to_path_buf(),
        grants: Grants::default(),
        tool_schemas: Default::default(),
        sandbox_grants: Default::default(),
        grant_name: None,
        broker: None,
    })
}

/// Run a server as zot runs its extensions: its wire (`zot`, with what was pinned), and its
/// stop (2 s to exit after `shutdown`, all stop at once, then SIGTERM, then 1 s).
fn zot_wire(supervisor: &mut SupervisorOptions, zot: Zot) {
    supervisor.dialect = Arc::new(zot);
    supervisor.grace = Duration::from_secs(2);
    supervisor.term_wait = Duration::from_secs(1);
}

/// Run a Claude Code plugin pinned as `pin` for `spec`: no server and no streams, its dialect
/// runs the pinned hooks and commands, each spawned as `spec`'s server would be (contained
/// the same), and shows them the agent's tools as `tool_names` names them.
pub fn claude_wire(
    pin: ClaudePin,
    spec: &ServerSpec,
    supervisor: &mut SupervisorOptions,
    tool_names: &ToolNames,
) {
    let spawn = spec.spawn_spec(&spec.workspace_root, spec.env.clone(), supervisor, None);
    let dialect = ClaudeCode::new(pin, spec.package_dir.clone(), spawn, tool_names.clone());
    supervisor.dialect = Arc::new(dialect);
    supervisor.transport = Some(Arc::new(NoStreams));
}

/// What a workspace's own Claude Code config is to a session: nothing to run, waiting for
/// `yep trust project` (the warning says why), or approved, with its launch and the hash it
/// was approved at.
pub(crate) enum Project {
    None,
    Unapproved(String),
    Approved { launch: Box<Launch>, hash: String },
}

/// The workspace's `.claude` config as a session runs it: only as `yep trust project` pinned
/// it for this workspace, and not once it, or the code its hooks run from the workspace,
/// changed since (the pin's hooks and commands, never what the files say now), through the
/// Claude Code dialect, contained as any package.
pub(crate) fn project(
    home: &Home,
    workspace: &Path,
    session_id: &str,
    supervisor: &SupervisorOptions,
    tool_names: &ToolNames,
) -> Project {
    use crate::store::claude::project::{self, PROJECT};
    let read = match project::read(workspace) {
        Ok(Some(read)) => read,
        Ok(None) => return Project::None,
        Err(e) => {
            return Project::Unapproved(format!(
                "the workspace's .claude config cannot be read, so it does not run: {e}"
            ));
        }
    };
    let pin = home.project_pin(workspace).ok().flatten();
    if let Some(why) = read.unapproved(pin.as_ref()) {
        return Project::Unapproved(format!(
            "the workspace's .claude hooks and commands ({}) are not approved{}, so they do not run; approve them with `yep trust project`",
            read.dir.display(),
            why.since()
        ));
    }
    let Some(pin) = pin else {
        return Project::None;
    };
    let manifest = match Manifest::parse_approval(&pin.approved_manifest, Path::new(".claude")) {
        Ok(manifest) => manifest,
        Err(e) => {
            return Project::Unapproved(format!(
                "the workspace's .claude approval cannot be read ({e}); approve it again with `yep trust project`"
            ));
        }
    };
    let mut spec = ServerSpec::new(
        PROJECT.into(),
        String::new(),
        Vec::new(),
        read.dir.clone(),
        workspace.to_path_buf(),
        home.logs_dir(),
    );
    spec.grants = Grants::from_manifest(&manifest);
    spec.sandbox_grants = manifest.sandbox.clone();
    spec.session_id = session_id.to_string();
    let data = home.project_data_dir(workspace);
    let _ = std::fs::create_dir_all(&data);
    spec.data_dir = Some(data);
    let mut supervisor = supervisor.clone();
    claude_wire(pin.claude, &spec, &mut supervisor, tool_names);
    Project::Approved {
        launch: Box::new(Launch {
            eager: false,
            off: Default::default(),
            manifest,
            spec,
            supervisor,
            warnings: Vec::new(),
        }),
        hash: read.hash,
    }
}
