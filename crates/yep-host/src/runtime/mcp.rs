//! MCP servers in the session, beside the extensions and under the same policy: where they
//! come from (the enabled extensions' `mcpServers`, the home's `yep mcp add`, the workspace's
//! `.mcp.json`), whether they may run (an approval pinned in the lock), and their tools in the
//! host's table as `mcp__<server>__<tool>`, offered from the approved list until the server
//! first starts, and as it last listed them while it is stopped after that (an idle stop, say).
//! A tool that is new or changed since approval is withheld until `yep trust`.

use super::contrib::{argv_safe, expand, expand_withholding, references};
use crate::capability::{Events, HostToolCall, HostToolError, LogLevel, OfferedTool, Question};
use crate::health::HealthEvent;
use crate::manifest::{Grants, Manifest, McpServer};
use crate::store::Home;
use crate::store::code::{CodeError, WorkspaceCode};
use crate::store::fsutil::{Links, Refused, read_regular_string};
use crate::store::launcher::{self, InstallError, Installed, Launched};
use crate::store::mcp::{McpPin, McpTool, Origin, ToolChange};
use crate::supervisor::{Extension, ServerSpec, SupervisorOptions};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The prefix of every MCP tool's name in the table; no extension tool may take it.
pub const MCP_PREFIX: &str = "mcp__";

/// The largest `.mcp.json` read; a bigger one is skipped with a warning.
pub const MAX_MCP_JSON_BYTES: u64 = 1024 * 1024;

/// The most servers one `.mcp.json` defines; the rest are skipped with a warning.
pub const MAX_WORKSPACE_SERVERS: usize = 64;

/// How long an MCP server gets to exit after its stdin closes, and again after SIGTERM.
pub const MCP_GRACE: Duration = Duration::from_secs(2);

/// One MCP server a session sees, as defined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpSource {
    /// `<ext>__<server>` for an extension's, else the name it was given.
    pub name: String,
    pub origin: Origin,
    /// As it runs: `${VAR}` expanded (it can carry secrets; never show it).
    #[serde(skip)]
    pub server: McpServer,
    /// As written: what is shown and what an approval hashes.
    pub shown: McpServer,
    /// For a workspace's, the code its command line names in the workspace, pinned (or why it
    /// cannot be): an approval holds for this code only.
    #[serde(skip)]
    pub code: Option<Result<WorkspaceCode, CodeError>>,
    /// A home's server over HTTP that takes an OAuth login and has none kept for its URL.
    #[serde(skip)]
    pub needs_login: bool,
}

/// Why an MCP server may not start.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unapproved {
    /// It was never approved (a workspace's: never here).
    Never,
    /// Its command, url or environment is not what was approved.
    Definition,
    /// The code its command line names in the workspace is not what was approved;
    /// `unpinned` when the approval was given before yep pinned code.
    Code { paths: Vec<String>, unpinned: bool },
    /// The code it runs from the workspace cannot be pinned, so it cannot be approved.
    Unpinnable(CodeError),
    /// It starts through a package launcher (`npx -y`, `uvx`) and was approved before yep
    /// installed and pinned what such a launcher fetches.
    NotInstalled { launcher: String },
}

impl Unapproved {
    /// The reason in a few words, as `yep trust` says it before asking.
    pub fn reason(&self) -> String {
        match self {
            Unapproved::Never => "never approved".into(),
            Unapproved::Definition => {
                "its command, url or environment changed since it was approved".into()
            }
            Unapproved::Code {
                paths,
                unpinned: false,
            } => format!(
                "the code it runs from the workspace changed since it was approved ({})",
                crate::text::escape(&paths.join(", "))
            ),
            Unapproved::Code {
                paths,
                unpinned: true,
            } => format!(
                "it was approved before yep pinned the code it runs from the workspace ({})",
                crate::text::escape(&paths.join(", "))
            ),
            Unapproved::Unpinnable(why) => {
                format!("yep cannot pin the code it runs from the workspace: {why}")
            }
            Unapproved::NotInstalled { launcher } => format!(
                "it starts through `{}`, and was approved before yep installed and pinned the package such a launcher fetches",
                crate::text::escape(launcher)
            ),
        }
    }
}

impl McpSource {
    /// What an approval hashes: the definition as written, and for a workspace's, its env
    /// values too (they are the repository's, and a changed `PATH`, `LD_PRELOAD` or
    /// `NODE_OPTIONS` runs other code; header values are hashed by name only).
    pub fn definition(&self) -> &McpServer {
        match self.origin {
            Origin::Workspace(_) => &self.server,
            _ => &self.shown,
        }
    }

    /// What it runs, as the approval question shows it: the command line or url, and the
    /// names of the environment it sets.
    pub fn described(&self) -> String {
        let mut out = format!("`{}`", crate::text::escape(&command_line(&self.shown)));
        if !self.shown.env.is_empty() {
            let names: Vec<&str> = self.shown.env.keys().map(String::as_str).collect();
            out.push_str(&format!(
                " with env {}",
                crate::text::escape(&names.join(", "))
            ));
        }
        out
    }

    /// The hash of the code it runs from the workspace, as an approval now pins it: none for
    /// a server from elsewhere, or one whose command line names nothing in the workspace.
    pub fn code_pin(&self) -> Option<&str> {
        match &self.code {
            Some(Ok(code)) => code.hash.as_deref(),
            _ => None,
        }
    }

    /// The package launcher it starts through (`npx -y pkg`, `uvx pkg`), when it is one yep
    /// installs for.
    pub fn launched(&self) -> Option<Launched> {
        match self.server.transport.as_str() {
            "stdio" => launcher::parse(self.server.command.as_deref()?, &self.server.args),
            _ => None,
        }
    }

    /// Why it may not start against `pin`, or `None` when its approval stands.
    pub fn blocked(&self, pin: Option<&McpPin>) -> Option<Unapproved> {
        if let Some(Err(why)) = &self.code {
            return Some(Unapproved::Unpinnable(why.clone()));
        }
        let pin = match pin {
            None => return Some(Unapproved::Never),
            Some(pin) => pin,
        };
        if pin.spec != crate::store::mcp::spec_hash(self.definition(), &self.origin) {
            return Some(Unapproved::Definition);
        }
        if let Some(launched) = self.launched()
            && pin.install.is_none()
            && !pin.as_written
        {
            return Some(Unapproved::NotInstalled {
                launcher: launched.launcher,
            });
        }
        match &self.code {
            Some(Ok(code)) if pin.code.as_deref() != code.hash.as_deref() => {
                Some(Unapproved::Code {
                    paths: code.paths.clone(),
                    unpinned: pin.code.is_none(),
                })
            }
            _ => None,
        }
    }

    /// Why it may not start, or `None` when its approval stands: none was given, or what runs
    /// under the name changed since, as a sentence that says how to approve it.
    pub fn unapproved(&self, pin: Option<&McpPin>) -> Option<String> {
        let name = crate::text::escape(&self.name);
        let why = self.blocked(pin)?;
        Some(match &why {
            Unapproved::Never if self.needs_login => format!(
                "MCP server `{name}` wants a login first: `yep mcp login {name}` logs in and approves its tools"
            ),
            Unapproved::Never => match &self.origin {
                Origin::Workspace(root) => format!(
                    "MCP server `{name}` from {} is not approved, so it does not start; approve it with `yep trust {name}`",
                    crate::text::escape(&root.join(".mcp.json").display().to_string())
                ),
                _ => format!(
                    "MCP server `{name}` has no approved tool list, so it does not start; approve it with `yep trust {name}`"
                ),
            },
            Unapproved::Unpinnable(_) => format!(
                "MCP server `{name}`: {}, so it cannot be approved and does not start; point its command line in .mcp.json at its script or package",
                why.reason()
            ),
            _ => format!(
                "MCP server `{name}`: {}, so it does not start; review it with `yep trust {name}`",
                why.reason()
            ),
        })
    }
}

/// The variables that name a package's own directories: the first two its package, the last
/// two its data dir.
pub const PACKAGE_VARS: [&str; 4] = crate::store::claude::PACKAGE_DIR_VARS;

/// [`PACKAGE_VARS`] with their values for extension `ext`: its package dir and its data dir.
pub fn package_vars(home: &Home, ext: &str) -> [(&'static str, String); 4] {
    let root = home.package_dir(ext).to_string_lossy().into_owned();
    let data = home.data_dir(ext).to_string_lossy().into_owned();
    [
        (PACKAGE_VARS[0], root.clone()),
        (PACKAGE_VARS[1], root),
        (PACKAGE_VARS[2], data.clone()),
        (PACKAGE_VARS[3], data),
    ]
}

/// Every MCP server a session in `workspace` sees: each of `extensions`' `mcpServers` as
/// `<ext>__<server>` (a malformed entry is skipped with a warning), `${VAR}` expanded from the
/// package's own directories ([`PACKAGE_VARS`]: argv-safe, they are paths in the home), the
/// extension's secrets and the environment; then the home's own (`yep mcp add`, header values
/// from `connections.toml`); then the workspace's `.mcp.json`, whose entry named like one of
/// those is skipped with a warning (a repository never takes the user's server's name), and
/// whose each server carries the code it runs from the workspace, pinned
/// ([`crate::store::code::workspace_code`]).
///
/// Deny by default: in `command` and `args`, where any local user can read them in
/// `/proc/<pid>/cmdline`, only `argv_safe` variables expand (`HOME`, `PATH`, `XDG_*`...) and
/// never one of the extension's secret fields, whatever its name. Any other reference expands
/// to nothing there; its value goes into the server's `env` under the same name, with a
/// warning naming the variable and the server. `url`, `headers` and `env` expand everything
/// (they need the values), with a warning for a variable in an http server's `url` other than
/// an `argv_safe` one: use a header instead.
pub fn sources(
    home: &Home,
    extensions: &[(String, Manifest)],
    workspace: &Path,
    warn: &mut dyn FnMut(String),
) -> Vec<McpSource> {
    let mut out: Vec<McpSource> = Vec::new();
    // A later source of the same name replaces an earlier one; a workspace's is refused
    // before it gets here.
    fn put(out: &mut Vec<McpSource>, source: McpSource) {
        out.retain(|s| s.name != source.name);
        out.push(source);
    }
    for (ext, manifest) in extensions {
        let secrets = crate::store::config::secrets(home, ext).unwrap_or_default();
        let own = package_vars(home, ext);
        let vars = |name: &str| {
            own.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| secrets.get(name).map(|s| s.expose().to_string()))
                .or_else(|| std::env::var(name).ok())
        };
        let declared: BTreeSet<String> = crate::store::summary::config_fields(manifest)
            .into_iter()
            .filter(|f| f.secret)
            .map(|f| f.name)
            .collect();
        // Kept out of argv: a secret field whatever its name, and every host variable but the
        // harmless few. The package's own directories are paths in the home, never secrets.
        let withheld = |name: &str| {
            !PACKAGE_VARS.contains(&name)
                && (declared.contains(name) || secrets.contains_key(name) || !argv_safe(name))
        };
        for (server, spec) in &manifest.yolop.mcp_servers {
            let shape_ok = match spec.transport.as_str() {
                "stdio" => {
                    spec.command.as_deref().is_some_and(|c| !c.is_empty()) && spec.url.is_none()
                }
                "http" => {
                    spec.url.as_deref().is_some_and(|u| !u.is_empty()) && spec.command.is_none()
                }
                _ => false,
            };
            if !shape_ok {
                warn(format!(
                    "extension `{ext}`: skipping MCP server `{server}`: a stdio server needs `command` (and no `url`), an http one `url` (and no `command`)"
                ));
                continue;
            }
            let in_argv: BTreeSet<String> = spec
                .command
                .iter()
                .chain(&spec.args)
                .flat_map(|a| references(a))
                .filter(|n| withheld(n))
                .collect();
            for name in &in_argv {
                warn(format!(
                    "extension `{ext}`: MCP server `{server}` puts variable `${{{name}}}` in its command line, where any local user can read it; its value is left out of argv and passed as env `{name}` instead (read it from there, or map it with `env`)"
                ));
            }
            let in_url: BTreeSet<String> = spec
                .url
                .iter()
                .flat_map(|u| references(u))
                .filter(|n| withheld(n))
                .collect();
            for name in &in_url {
                warn(format!(
                    "extension `{ext}`: MCP server `{server}` puts variable `${{{name}}}` in its url, where logs and process lists can show it; pass secrets in a header instead"
                ));
            }
            let mut run = spec.clone();
            let mut moved = BTreeSet::new();
            run.command = run
                .command
                .map(|c| expand_withholding(&c, &vars, &withheld, &mut moved));
            run.args = run
                .args
                .iter()
                .map(|a| expand_withholding(a, &vars, &withheld, &mut moved))
                .collect();
            run.url = run.url.map(|u| expand(&u, &vars));
            run.env = run
                .env
                .iter()
                .map(|(k, v)| (k.clone(), expand(v, &vars)))
                .collect();
            for name in moved {
                if let Some(value) = vars(&name) {
                    run.env.entry(name).or_insert(value);
                }
            }
            run.headers = run
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), expand(v, &vars)))
                .collect();
            put(
                &mut out,
                McpSource {
                    name: format!("{ext}__{server}"),
                    origin: Origin::Extension(ext.clone()),
                    server: run,
                    shown: spec.clone(),
                    // Its code is the package's, pinned by the package's content hash.
                    code: None,
                    needs_login: false,
                },
            );
        }
    }
    // The user's own (`yep mcp add`): header values from the secrets only to run it.
    match (
        crate::store::mcp::resolved(home),
        crate::store::mcp::list(home),
    ) {
        (Ok(run), Ok(shown)) => {
            for (name, shown) in shown {
                let server = run.get(&name).cloned().unwrap_or_else(|| shown.clone());
                let logged_in = crate::store::mcp::oauth_credentials(home, &name)
                    .ok()
                    .flatten()
                    .is_some_and(|(url, _)| server.url.as_deref() == Some(url.as_str()));
                let needs_login = crate::store::mcp::oauth_wanted(home, &name) && !logged_in;
                put(
                    &mut out,
                    McpSource {
                        name,
                        origin: Origin::Home,
                        server,
                        shown,
                        // The user's own command line, run from wherever they are.
                        code: None,
                        needs_login,
                    },
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => warn(format!("skipping the home's MCP servers: {e}")),
    }
    // Approvals are kept per workspace: one path for it, however it was spelled.
    let workspace = &workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let file = workspace.join(".mcp.json");
    // A regular file (a link to one is followed) of at most `MAX_MCP_JSON_BYTES`: a device,
    // a FIFO or a longer file is refused, never a read without end.
    let read = read_regular_string(&file, MAX_MCP_JSON_BYTES, Links::Follow);
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.get_ref().is_some_and(|inner| inner.is::<Refused>()) => {
            warn(format!("skipping the workspace's MCP servers: {e}"))
        }
        Err(e) => warn(format!("skipping {}: {e}", file.display())),
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(doc) => {
                let servers = doc.get("mcpServers").and_then(Value::as_object);
                let count = servers.map_or(0, serde_json::Map::len);
                if count > MAX_WORKSPACE_SERVERS {
                    warn(format!(
                        "{}: {count} MCP servers; using the first {MAX_WORKSPACE_SERVERS}",
                        file.display()
                    ));
                }
                for (name, spec) in servers.into_iter().flatten().take(MAX_WORKSPACE_SERVERS) {
                    // Its name becomes a tool prefix, a log file and a question's subject:
                    // odd characters are refused.
                    if !crate::store::manifest::valid_item_name(name) {
                        warn(format!(
                            "{}: skipping MCP server {:?}: not a server name (A-Z a-z 0-9 _ . -)",
                            file.display(),
                            crate::text::escape(name)
                        ));
                        continue;
                    }
                    // A repository never takes the name of the user's own server or an
                    // extension's: `yep trust <name>` would run its command in their stead.
                    if let Some(owner) = out.iter().find(|s| s.name == *name) {
                        let whose = match &owner.origin {
                            Origin::Extension(ext) => {
                                format!("extension `{}`'s", crate::text::escape(ext))
                            }
                            _ => "the home's (`yep mcp add`)".to_string(),
                        };
                        warn(format!(
                            "{}: skipping MCP server `{}`: {whose} MCP server has that name, and a workspace's server never takes another's; rename it in .mcp.json to use it here",
                            file.display(),
                            crate::text::escape(name)
                        ));
                        continue;
                    }
                    match serde_json::from_value::<McpServer>(spec.clone()) {
                        Ok(server) => {
                            // A workspace file often holds tokens as they are: never shown.
                            let mut shown = server.clone();
                            for v in shown.headers.values_mut().chain(shown.env.values_mut()) {
                                *v = crate::store::mcp::HIDDEN.into();
                            }
                            let code = Some(crate::store::code::workspace_code(&server, workspace));
                            put(
                                &mut out,
                                McpSource {
                                    name: name.clone(),
                                    origin: Origin::Workspace(workspace.to_path_buf()),
                                    server,
                                    shown,
                                    code,
                                    needs_login: false,
                                },
                            );
                        }
                        Err(e) => warn(format!(
                            "{}: skipping MCP server `{}`: {e}",
                            file.display(),
                            crate::text::escape(name)
                        )),
                    }
                }
            }
            Err(e) => warn(format!("failed to read {}: {e}", file.display())),
        },
    }
    // yep is never one of its own servers: it would serve this home again, nested.
    out.retain(|s| {
        let itself = runs_yep_serve(&s.server, home);
        if itself {
            let whose = match &s.origin {
                Origin::Extension(ext) => format!("extension `{}`", crate::text::escape(ext)),
                Origin::Home => "the home (`yep mcp add`)".to_string(),
                Origin::Workspace(_) => file.display().to_string(),
            };
            warn(format!(
                "{whose}: skipping MCP server `{}`: it runs `yep mcp serve`, yep itself, and a session here has everything that serves already",
                crate::text::escape(&s.name)
            ));
        }
        !itself
    });
    out
}

/// Whether `server` runs `yep mcp serve` of `home`: a command named `yep` (or this very
/// program), `mcp` then `serve` among its arguments, and no `--home` naming another home.
/// One behind a wrapper is known at `initialize` instead
/// ([`crate::dialect::HandshakeError::Itself`]).
pub fn runs_yep_serve(server: &McpServer, home: &Home) -> bool {
    let Some(command) = server.command.as_deref() else {
        return false;
    };
    let path = Path::new(command);
    let named_yep = path.file_stem().is_some_and(|stem| stem == "yep");
    let this_program = || {
        let ours = std::env::current_exe().ok()?.canonicalize().ok()?;
        Some(path.canonicalize().ok()? == ours)
    };
    let other_home = || {
        let named = server
            .args
            .iter()
            .enumerate()
            .find_map(|(i, a)| match a.as_str() {
                "--home" => server.args.get(i + 1).map(String::as_str),
                _ => a.strip_prefix("--home="),
            });
        let resolved = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        named.is_some_and(|dir| resolved(Path::new(dir)) != resolved(&home.root))
    };
    (named_yep || this_program() == Some(true))
        && server
            .args
            .windows(2)
            .any(|w| w[0] == "mcp" && w[1] == "serve")
        && !other_home()
}

/// The enabled extensions' approved manifests, as a session outside one sees them (for
/// `yep trust` and `yep mcp list`).
pub fn enabled_manifests(home: &Home) -> Result<Vec<(String, Manifest)>, crate::store::StoreError> {
    let lock = home.lockfile()?;
    let enabled = crate::store::settings::enabled(&home.settings_path())?;
    Ok(enabled
        .into_iter()
        .filter_map(|name| {
            let entry = lock.get(&name)?;
            let manifest = entry
                .approved()
                .or_else(|| home.package_manifest(entry).ok())?;
            Some((name, manifest))
        })
        .collect())
}

/// The stem of MCP server `name`'s log and run state, unique to the server: its log is
/// `<home>/logs/<stem>.log`. `mcp.<name>` for the home's and extensions' (a server name is
/// `A-Z a-z 0-9 _ . -`, a file name as it is; the `.` keeps it apart from every extension's
/// name), and `mcp.<name>@<workspace>` for a workspace's, where `<workspace>` is 12 hex digits
/// of the workspace path's hash: no other server's stem holds an `@`, and the same name in two
/// workspaces is two servers with two logs.
pub fn log_stem(name: &str, origin: &Origin) -> String {
    // Names are checked where they are read; one that is not a name gets a stem that is.
    let name = match crate::store::manifest::valid_item_name(name) {
        true => name.to_string(),
        false => format!(
            "{}={}",
            safe(name),
            &crate::store::hash::sha256_hex(name.as_bytes())[..12]
        ),
    };
    match origin.workspace() {
        Some(root) => format!(
            "mcp.{name}@{}",
            &crate::store::hash::sha256_hex(root.as_bytes())[..12]
        ),
        None => format!("mcp.{name}"),
    }
}

/// `text` with every character but `A-Z a-z 0-9 _ -` as `_`: a tool name every model API
/// takes.
fn safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The table's name for `tool` of MCP server `server`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{MCP_PREFIX}{}__{}", safe(server), safe(tool))
}

/// Why an MCP server cannot be run as it is defined ([`launch`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpLaunchError {
    /// An http server whose url is not an `http://` or `https://` one (`url` as written).
    #[error(
        "MCP server `{}`: {:?} is not an http:// or https:// url",
        crate::text::escape(server),
        crate::text::escape(url)
    )]
    NotHttp { server: String, url: String },
    /// A transport this build has no dialect for (an MCP feature left out, or an unknown
    /// one).
    #[error(
        "MCP server `{}`: this build cannot reach a server over {:?}",
        crate::text::escape(server),
        crate::text::escape(transport)
    )]
    Transport { server: String, transport: String },
    /// The lock, which holds what the user granted it, could not be read.
    #[error(transparent)]
    Lock(Box<crate::store::StoreError>),
    /// The package its launcher was installed as is gone or changed since it was approved.
    #[error("MCP server `{}`: {}", crate::text::escape(server), .error)]
    Install {
        server: String,
        error: Box<InstallError>,
    },
}

/// Why an MCP server's tools could not be listed ([`probe`]) or pinned ([`approve`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpProbeError {
    /// Its definition cannot run in this build (a transport it lacks, a url that is not one).
    #[error(transparent)]
    Launch(#[from] McpLaunchError),
    /// The code it runs from the workspace cannot be pinned: it is not run.
    #[error("yep cannot pin the code it runs from the workspace: {0}")]
    Unpinnable(CodeError),
    /// It did not start, or its handshake failed (a tool list past the caps among the causes).
    #[error("{}", crate::error::report(&**.0))]
    Start(Box<crate::supervisor::ExtensionError>),
    /// Its tools were listed, but they could not be pinned (past a cap, or the lock could not
    /// be written).
    #[error("{}", crate::error::report(&**.0))]
    Record(Box<crate::store::StoreError>),
    /// The package its launcher fetches could not be installed.
    #[error("{0}")]
    Install(Box<InstallError>),
}

impl McpProbeError {
    /// The cap its tool list passed, when that is why: approving it again cannot help.
    pub fn over_cap(&self) -> Option<&crate::store::mcp::ListCap> {
        use crate::dialect::HandshakeError;
        use crate::supervisor::ExtensionError;
        match self {
            McpProbeError::Start(e) => match &**e {
                ExtensionError::Handshake {
                    error: HandshakeError::ToolList(cap),
                    ..
                } => Some(cap),
                _ => None,
            },
            McpProbeError::Record(e) => match &**e {
                crate::store::StoreError::McpToolList { cap, .. } => Some(cap),
                _ => None,
            },
            McpProbeError::Launch(_) | McpProbeError::Unpinnable(_) | McpProbeError::Install(_) => {
                None
            }
        }
    }
}

/// A server that is reached over HTTP has no streams of its own: the dialect connects.
#[cfg(feature = "mcp-http")]
struct Remote;

#[cfg(feature = "mcp-http")]
impl crate::supervisor::Transport for Remote {
    fn open(&self, _spec: &ServerSpec) -> std::io::Result<crate::dialect::Streams> {
        Ok(crate::dialect::Streams::Other {
            reader: Box::new(tokio::io::empty()),
            writer: Box::new(tokio::io::sink()),
        })
    }
}

/// How `source` runs, started from `workspace`: spawned as any server is (its log, process
/// group, backoff, graceful stop), or reached over HTTP. A question it asks (elicitation)
/// goes to the user.
pub fn launch(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    package: Package<'_>,
) -> Result<(ServerSpec, SupervisorOptions), McpLaunchError> {
    let package_dir = match &source.origin {
        Origin::Extension(ext) => home.package_dir(ext),
        _ => workspace.to_path_buf(),
    };
    let grants = Grants {
        ui_ask: true,
        ..Grants::default()
    };
    // An http server's url stands where errors show what ran.
    let mut command = match &source.server.command {
        Some(command) => command.clone(),
        None => source.shown.url.clone().unwrap_or_default(),
    };
    let mut args = source.server.args.clone();
    let workspace_root = workspace.to_path_buf();
    let mut env: Vec<(String, String)> = source
        .server
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // A package launcher runs the package yep installed for it, read where it is, or (as the
    // user chose) as written, with its registry and cache.
    let mut needs = crate::store::grants::SandboxGrants::default();
    if let Some(launched) = source.launched() {
        match package {
            Package {
                as_written: true, ..
            } => {
                needs = launcher::needs(&launched);
                env.extend(launcher::registry_env(&launched));
            }
            Package {
                install: Some(install),
                ..
            } => {
                install
                    .verify(home, &source.name)
                    .map_err(|error| McpLaunchError::Install {
                        server: source.name.clone(),
                        error: Box::new(error),
                    })?;
                let (program, entry) = install.command(home);
                command = program.to_string_lossy().into_owned();
                args = entry;
                args.extend(launched.args.iter().cloned());
                needs
                    .read
                    .push(install.path(home).to_string_lossy().into_owned());
                if install.ecosystem == launcher::Ecosystem::Pypi {
                    // Its files are pinned: Python is not to write beside them.
                    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
                }
            }
            // Not approved as it is: it never starts (`McpSource::blocked`).
            _ => {}
        }
    }
    // A package's server is told its own directories, as Claude Code, Codex and Agent Plugins
    // tell theirs, over whatever its `env` says; its data dir exists and it may write there.
    let data_dir = match &source.origin {
        Origin::Extension(ext) => {
            let vars = package_vars(home, ext);
            env.retain(|(k, _)| !PACKAGE_VARS.contains(&k.as_str()));
            env.extend(vars.map(|(k, v)| (k.to_string(), v)));
            let data = home.data_dir(ext);
            // Best effort: a data dir that cannot be made fails the server's own writes.
            let _ = std::fs::create_dir_all(&data);
            Some(data)
        }
        _ => None,
    };
    let lock = home
        .lockfile()
        .map_err(|e| McpLaunchError::Lock(Box::new(e)))?;
    // An Agent Plugin's server runs in its plugin root unless it says otherwise (Agent Plugins
    // 1.0, §7.2.1); every other server runs in the workspace.
    let agent_plugin = match &source.origin {
        Origin::Extension(ext) => lock
            .get(ext)
            .and_then(|e| e.claude.as_ref())
            .is_some_and(|pin| pin.kind == crate::store::claude::PluginKind::AgentPlugin),
        _ => false,
    };
    let spec = ServerSpec {
        env,
        data_dir,
        cwd: agent_plugin.then(|| package_dir.clone()),
        grants,
        // Only the user grants a server more than the default profile (`yep grant`, `yep
        // mcp add --grant`, `yep trust --grant`): a workspace's `.mcp.json` never can.
        sandbox_grants: lock
            .granted(&source.name, source.origin.workspace().as_deref())
            .merged(&needs),
        grant_name: Some(source.name.clone()),
        ..ServerSpec::new(
            log_stem(&source.name, &source.origin),
            command,
            args,
            package_dir,
            workspace_root,
            home.logs_dir(),
        )
    };
    // Only the MCP features' transports change it.
    #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
    let mut opts = SupervisorOptions {
        grace: MCP_GRACE,
        term_wait: MCP_GRACE,
        ..base.clone()
    };
    match source.server.transport.as_str() {
        #[cfg(feature = "mcp")]
        "stdio" => {
            opts.dialect = Arc::new(crate::dialect::mcp::Mcp {
                host_home: Some(crate::dialect::mcp::home_id(home)),
                ..Default::default()
            })
        }
        #[cfg(feature = "mcp-http")]
        "http" => {
            let url = source.server.url.clone().unwrap_or_default();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(McpLaunchError::NotHttp {
                    server: source.name.clone(),
                    url: source.shown.url.clone().unwrap_or_default(),
                });
            }
            opts.dialect = Arc::new(crate::dialect::mcp::McpHttp {
                url,
                shown: source.shown.url.clone().unwrap_or_default(),
                headers: source
                    .server
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                host_home: Some(crate::dialect::mcp::home_id(home)),
                login: Some((home.clone(), source.name.clone())),
                handshake_only: Default::default(),
            });
            opts.transport = Some(Arc::new(Remote));
        }
        other => {
            // A build without the MCP features has nothing to run either with.
            let _unused = (&spec, &opts);
            return Err(McpLaunchError::Transport {
                server: source.name.clone(),
                transport: other.to_string(),
            });
        }
    }
    #[allow(unreachable_code)]
    Ok((spec, opts))
}

/// The tools a server lists, as a pin records them.
pub fn pinned_form(tool: &OfferedTool) -> McpTool {
    McpTool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.schema.clone().unwrap_or(Value::Null),
        output_schema: tool.output_schema.clone(),
        annotations: tool.annotations.clone(),
    }
}

/// How a server that starts through a package launcher runs: from the package yep installed
/// for it, or its launcher as written. Nothing for any other server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Package<'a> {
    pub install: Option<&'a Installed>,
    pub as_written: bool,
}

impl<'a> Package<'a> {
    /// As approval `pin` says.
    pub fn of(pin: Option<&'a McpPin>) -> Package<'a> {
        Package {
            install: pin.and_then(|p| p.install.as_ref()),
            as_written: pin.is_some_and(|p| p.as_written),
        }
    }
}

/// A launcher server's package made ready for the run that lists its tools: installed now, or
/// the install its approval holds already.
#[derive(Debug, Default)]
pub struct Staged {
    pub install: Option<Installed>,
    pub as_written: bool,
    /// Installed by this staging: gone again if nothing approves it.
    pub fresh: bool,
}

impl Staged {
    pub fn package(&self) -> Package<'_> {
        Package {
            install: self.install.as_ref(),
            as_written: self.as_written,
        }
    }

    /// Remove what this staging installed, when nothing approved it.
    pub fn discard(self, home: &Home) {
        if let (true, Some(install)) = (self.fresh, &self.install) {
            let dir = install.path(home);
            let _ = crate::store::fsutil::remove_tree(&dir);
            let _ = std::fs::remove_file(dir.with_extension("unapproved"));
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// What [`stage`] does with a launcher server's package.
#[derive(Debug, Clone, Default)]
pub struct StageOptions {
    /// Keep the launcher as written (`Some(true)`), install for it (`Some(false)`), or as its
    /// approval says (`None`).
    pub as_written: Option<bool>,
    /// Resolve and install again even when the approved install is intact (`yep update`).
    pub reinstall: bool,
    pub progress: crate::store::progress::Progress,
}

/// Make ready the package `source`'s launcher fetches (nothing for another server): the
/// approved install when its definition is unchanged and its files intact, else a new install
/// of what the definition asks for.
pub async fn stage(
    home: &Home,
    source: &McpSource,
    opts: &StageOptions,
) -> Result<Staged, McpProbeError> {
    let Some(launched) = source.launched() else {
        return Ok(Staged::default());
    };
    let pin = crate::store::mcp::pin(home, &source.name, &source.origin)
        .ok()
        .flatten();
    let as_written = opts
        .as_written
        .unwrap_or_else(|| pin.as_ref().is_some_and(|p| p.as_written));
    if as_written {
        return Ok(Staged {
            as_written,
            ..Staged::default()
        });
    }
    let spec = crate::store::mcp::spec_hash(source.definition(), &source.origin);
    let kept = pin
        .filter(|p| !opts.reinstall && p.spec == spec)
        .and_then(|p| p.install)
        .filter(|i| i.verify(home, &source.name).is_ok());
    if let Some(install) = kept {
        return Ok(Staged {
            install: Some(install),
            ..Staged::default()
        });
    }
    let (home, stem, progress) = (
        home.clone(),
        log_stem(&source.name, &source.origin),
        opts.progress.clone(),
    );
    let installed =
        tokio::task::spawn_blocking(move || launcher::install(&home, &stem, &launched, &progress))
            .await
            .map_err(|e| McpProbeError::Install(Box::new(InstallError::Io(e.to_string()))))?
            .map_err(|e| McpProbeError::Install(Box::new(e)))?;
    Ok(Staged {
        install: Some(installed),
        fresh: true,
        as_written: false,
    })
}

/// Start `source` once, list its tools and stop it: what `yep trust`, `yep mcp add` and an
/// install show and pin. Questions it asks meanwhile are answered cancelled. A launcher's
/// package runs as `package` says ([`stage`] makes it ready).
pub async fn probe(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    package: Package<'_>,
) -> Result<Vec<McpTool>, McpProbeError> {
    // Code that cannot be pinned is never run to be approved.
    if let Some(Err(why)) = &source.code {
        return Err(McpProbeError::Unpinnable(why.clone()));
    }
    let (spec, opts) = launch(home, source, workspace, base, package)?;
    let ext = Extension::new(spec, opts, Arc::new(crate::capability::NoEvents));
    let listed = match ext.live().await {
        Ok(live) => Ok(live.peer().listed()),
        Err(e) => Err(McpProbeError::Start(Box::new(e))),
    };
    ext.stop().await;
    Ok(listed?.iter().map(pinned_form).collect())
}

/// What an approval pinned: the tools, and the package installed for a launcher.
#[derive(Debug)]
pub struct Approval {
    pub tools: Vec<McpTool>,
    pub install: Option<Installed>,
}

/// Approve `source` as it is now: start it once, list its tools, and pin them in the lock
/// (what `yep mcp add`, `yep trust` and an install do). Its tools, or why it could not be
/// listed.
pub async fn approve(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
) -> Result<Vec<McpTool>, McpProbeError> {
    Ok(
        approve_with(home, source, workspace, base, &StageOptions::default())
            .await?
            .tools,
    )
}

/// [`approve`], with the launcher's package made ready as `opts` says first.
pub async fn approve_with(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    opts: &StageOptions,
) -> Result<Approval, McpProbeError> {
    let staged = stage(home, source, opts).await?;
    let tools = match probe(home, source, workspace, base, staged.package()).await {
        Ok(tools) => tools,
        Err(e) => {
            staged.discard(home);
            return Err(e);
        }
    };
    if let Err(e) = record(home, source, &staged, &tools) {
        staged.discard(home);
        return Err(McpProbeError::Record(Box::new(e)));
    }
    Ok(Approval {
        tools,
        install: staged.install,
    })
}

/// Pin `tools` of `source` with its package as `staged`, and remove the server's installs
/// nothing pins any more.
pub fn record(
    home: &Home,
    source: &McpSource,
    staged: &Staged,
    tools: &[McpTool],
) -> Result<McpPin, crate::store::StoreError> {
    let pin = crate::store::mcp::record(
        home,
        &source.name,
        &source.origin,
        crate::store::mcp::Approved {
            spec: source.definition(),
            code: source.code_pin(),
            install: staged.install.as_ref(),
            as_written: staged.as_written,
        },
        tools,
    )?;
    let keep: Vec<&str> = staged.install.iter().map(|i| i.dir.as_str()).collect();
    for dir in &keep {
        launcher::approved(home, dir);
    }
    launcher::prune(home, &log_stem(&source.name, &source.origin), &keep);
    Ok(pin)
}

/// One MCP server in the session.
pub(crate) struct McpEntry {
    pub(crate) source: McpSource,
    pub(crate) pin: Option<McpPin>,
    /// Why it may not start (see [`McpSource::unapproved`]).
    pub(crate) blocked: Option<String>,
    /// The approved tools as cached at approval: offered until the server first starts.
    pub(crate) cached: Vec<McpTool>,
    /// What its server listed when the table last looked at it running: what it offers while
    /// stopped after that (an idle stop keeps its tools, even with no cache).
    listed: std::sync::Mutex<Option<Vec<McpTool>>>,
    /// What [`McpEntry::approves`] found for the running server's list: kept for as long as
    /// that list stands, so a call hashes its tool once per list, not once per call.
    verdicts: std::sync::Mutex<Verdicts>,
    pub(crate) ext: Extension,
}

/// [`McpEntry::approves`]'s verdicts on one list ([`Peer::listing`]), by tool: only tools on
/// that list, so a caller's made-up names never grow it.
///
/// [`Peer::listing`]: crate::dialect::Peer::listing
#[derive(Default)]
struct Verdicts {
    listing: Option<Arc<Vec<OfferedTool>>>,
    tools: std::collections::HashMap<String, bool>,
}

impl Verdicts {
    /// Whether `tool` on `listing` is what `pin` approved: hashed the first time it is asked
    /// of a list, remembered until another list comes.
    fn approves(&mut self, listing: Arc<Vec<OfferedTool>>, pin: &McpPin, tool: &str) -> bool {
        if !self
            .listing
            .as_ref()
            .is_some_and(|seen| Arc::ptr_eq(seen, &listing))
        {
            // Holding the list keeps its address from being taken by a later one.
            *self = Verdicts {
                listing: Some(Arc::clone(&listing)),
                tools: Default::default(),
            };
        }
        if let Some(verdict) = self.tools.get(tool) {
            return *verdict;
        }
        let Some(listed) = listing.iter().find(|t| t.name == tool) else {
            return false;
        };
        let verdict = pin.tools.get(tool) == Some(&pinned_form(listed).hash());
        self.tools.insert(tool.to_string(), verdict);
        verdict
    }
}

impl McpEntry {
    /// `source` in the session, approved as `pin` says.
    pub(crate) fn new(
        home: &Home,
        source: McpSource,
        pin: Option<McpPin>,
        workspace: &Path,
        base: &SupervisorOptions,
        events: Arc<dyn Events>,
    ) -> Result<McpEntry, McpLaunchError> {
        let blocked = source.unapproved(pin.as_ref());
        let cached = match (&pin, &blocked) {
            (Some(pin), None) => crate::store::mcp::cached(home, &source.origin, pin),
            _ => Vec::new(),
        };
        let (spec, opts) = launch(home, &source, workspace, base, Package::of(pin.as_ref()))?;
        let name = source.name.clone();
        let ext = Extension::new(
            spec,
            opts,
            Arc::new(McpEvents {
                name,
                inner: events,
            }),
        );
        Ok(McpEntry {
            source,
            pin,
            blocked,
            cached,
            listed: std::sync::Mutex::new(None),
            verdicts: std::sync::Mutex::default(),
            ext,
        })
    }

    /// Whether it is the same server, approved the same way: a session keeps its process.
    pub(crate) fn same(&self, source: &McpSource, pin: Option<&McpPin>) -> bool {
        self.source == *source && self.pin.as_ref() == pin
    }

    /// The tools it offers now: the running server's list, else the list it gave when last
    /// seen running, else the approved cache; each held to the pin. The rest are what is
    /// withheld and why.
    pub(crate) fn tools(&self) -> (Vec<McpTool>, Vec<ToolChange>) {
        let (Some(pin), None) = (&self.pin, &self.blocked) else {
            return (Vec::new(), Vec::new());
        };
        let listed = match self.note_listed() {
            Some(listed) => listed,
            None => match self.last_listed() {
                Some(listed) => listed,
                None => return (self.cached.clone(), Vec::new()),
            },
        };
        let changes = crate::store::mcp::diff(Some(pin), &listed);
        let offered = listed
            .into_iter()
            .filter(|t| pin.tools.get(&t.name) == Some(&t.hash()))
            .collect();
        let withheld = changes
            .into_iter()
            .filter(|c| !matches!(c, ToolChange::Removed(_)))
            .collect();
        (offered, withheld)
    }

    /// What the running server lists now, remembered for when it stops; `None` when none runs.
    pub(crate) fn note_listed(&self) -> Option<Vec<McpTool>> {
        let listed: Vec<McpTool> = {
            let live = self.ext.running()?;
            live.peer().listed().iter().map(pinned_form).collect()
        };
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = Some(listed.clone());
        Some(listed)
    }

    /// What its server listed when last seen running, if it ever was.
    fn last_listed(&self) -> Option<Vec<McpTool>> {
        self.listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the running server's `tool` is still what was approved.
    pub(crate) fn approves(&self, peer: &dyn crate::dialect::Peer, tool: &str) -> bool {
        let Some(pin) = &self.pin else {
            return false;
        };
        self.verdicts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .approves(peer.listing(), pin, tool)
    }

    /// Where it stands, for the session status and `yep list`.
    pub(crate) fn state(&self) -> McpState {
        let (offered, withheld) = self.tools();
        let state = if self.blocked.is_some() {
            "unapproved"
        } else if self.ext.is_running() {
            "started"
        } else if self.ext.is_idle_stopped() {
            "idle"
        } else if self.ext.failures() > 0 {
            "failed"
        } else {
            "configured"
        };
        McpState {
            name: self.source.name.clone(),
            origin: self.source.origin.clone(),
            transport: self.source.shown.transport.clone(),
            state,
            tools: offered
                .iter()
                .map(|t| tool_name(&self.source.name, &t.name))
                .collect(),
            withheld: withheld.iter().map(ToString::to_string).collect(),
            message: self.blocked.clone(),
        }
    }
}

/// Where one MCP server stands in the session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpState {
    pub name: String,
    pub origin: Origin,
    pub transport: String,
    /// `unapproved` (never started), `configured` (not started yet), `started`, `idle` (stopped
    /// for want of use; it starts again on next use) or `failed`.
    pub state: &'static str,
    /// Its tools in the table.
    pub tools: Vec<String>,
    /// Tools withheld as new or changed since approval (`+ tool x (new)`).
    pub withheld: Vec<String>,
    /// Why it does not start, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An MCP server's events: the host's, and a new table when its tools may have changed (it
/// started, restarted, or said its list changed).
struct McpEvents {
    name: String,
    inner: Arc<dyn Events>,
}

impl Events for McpEvents {
    fn log(&self, extension: &str, level: LogLevel, message: &str) {
        self.inner.log(extension, level, message);
    }

    fn health(&self, event: HealthEvent) {
        let changed = matches!(
            event,
            HealthEvent::Started { .. } | HealthEvent::Restarted { .. }
        );
        self.inner.health(event);
        if changed {
            self.inner.tools_changed(&self.name);
        }
    }

    fn tools_changed(&self, _extension: &str) {
        self.inner.tools_changed(&self.name);
    }

    fn run_tool(
        &self,
        extension: &str,
        call: HostToolCall,
    ) -> crate::capability::BoxFuture<Result<Value, HostToolError>> {
        self.inner.run_tool(extension, call)
    }

    fn ask(
        &self,
        _extension: &str,
        question: Question,
    ) -> crate::capability::BoxFuture<crate::capability::Answer> {
        // Asked in the server's own name, not its log file's.
        self.inner.ask(&self.name, question)
    }
}

/// Which of `sources` the session runs, keeping `old` entries that are still the same.
pub(crate) fn entries(
    home: &Home,
    sources: Vec<McpSource>,
    old: &[Arc<McpEntry>],
    workspace: &Path,
    base: &SupervisorOptions,
    events: &Arc<dyn Events>,
    warn: &mut dyn FnMut(Option<String>, String),
) -> Vec<Arc<McpEntry>> {
    let mut out = Vec::new();
    // One read of the lock for every server's pin.
    let lock = home.lockfile().map_err(|e| crate::error::report(&e));
    for source in sources {
        let name = source.name.clone();
        let pin = match &lock {
            Ok(lock) => crate::store::mcp::pin_in(lock, &source.name, &source.origin),
            Err(why) => {
                warn(Some(name), why.clone());
                continue;
            }
        };
        if let Some(kept) = old.iter().find(|e| e.same(&source, pin.as_ref())) {
            out.push(Arc::clone(kept));
            continue;
        }
        match McpEntry::new(home, source, pin, workspace, base, Arc::clone(events)) {
            Ok(entry) => {
                if let Some(why) = &entry.blocked {
                    warn(Some(name), why.clone());
                }
                out.push(Arc::new(entry));
            }
            Err(why) => warn(Some(name), why.to_string()),
        }
    }
    out
}

/// Start, in the background, each approved server of `entries` whose tools were never cached
/// (approved elsewhere, or a cache lost): its list comes in with its start.
pub(crate) fn learn(entries: Vec<Arc<McpEntry>>) {
    for entry in entries {
        let unknown = entry.blocked.is_none()
            && entry.cached.is_empty()
            && entry.pin.as_ref().is_some_and(|p| !p.tools.is_empty());
        if unknown {
            tokio::spawn(async move {
                // A failure is reported where it happens, in the supervisor.
                let _ = entry.ext.live().await;
            });
        }
    }
}

/// The answer that approves an MCP server when the session asks.
pub const APPROVE: &str = "approve";

/// Ask the user, one server at a time, about each MCP server of the session that may not
/// start (a workspace's never approved, one whose definition changed): approved, its tools
/// are pinned as they are now and the session offers them. Holds the host weakly, so a
/// question left open does not keep it alive.
pub(crate) async fn ask_approval(host: super::WeakHost) {
    let waiting: Vec<Arc<McpEntry>> = match host.upgrade() {
        Some(h) => h
            .snapshot()
            .mcp
            .iter()
            .filter(|e| e.blocked.is_some())
            .cloned()
            .collect(),
        None => return,
    };
    for entry in waiting {
        let Some(h) = host.upgrade() else {
            return;
        };
        let source = &entry.source;
        let prompt = format!(
            "{} It would run {}. Run it and offer its tools?",
            entry.blocked.as_deref().unwrap_or_default(),
            source.described(),
        );
        let question = Question {
            prompt,
            options: vec![APPROVE.into(), "not now".into()],
            ..Question::default()
        };
        let events = Arc::clone(&h.core.events);
        drop(h);
        let answer = Events::ask(&*events, &source.name, question).await;
        if answer.cancelled || answer.answer != APPROVE {
            continue;
        }
        let Some(h) = host.upgrade() else {
            return;
        };
        let base = &h.core.opts.supervisor;
        match approve(&h.core.home, source, &h.core.workspace_root(), base).await {
            Ok(_) => {
                let _ = h.refresh().await;
            }
            Err(why) => h.core.warn(format!(
                "MCP server `{}` was approved, but its tools could not be listed: {}",
                crate::text::escape(&source.name),
                crate::error::report(&why)
            )),
        }
    }
}

/// What runs, as one line: the command and its arguments, or the url.
pub fn command_line(server: &McpServer) -> String {
    match (&server.command, &server.url) {
        (Some(c), _) => std::iter::once(c.as_str())
            .chain(server.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        (None, Some(u)) => u.clone(),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> OfferedTool {
        OfferedTool {
            description: Some(description.into()),
            schema: Some(serde_json::json!({"type": "object"})),
            ..OfferedTool::named(name)
        }
    }

    /// A verdict holds for the list it was found on only: a new list, even one with the same
    /// tools in it, is looked at again, and a name the list lacks is refused and not kept.
    #[test]
    fn a_verdict_lasts_as_long_as_its_list() {
        let approved = tool("echo", "echo text");
        let pin = McpPin {
            name: "py".into(),
            workspace: None,
            spec: String::new(),
            code: None,
            install: None,
            as_written: false,
            tools: [("echo".to_string(), pinned_form(&approved).hash())].into(),
        };
        let mut verdicts = Verdicts::default();
        let first = Arc::new(vec![approved.clone()]);
        for _ in 0..3 {
            assert!(verdicts.approves(Arc::clone(&first), &pin, "echo"));
        }
        // The server changed the tool and listed again.
        let changed = Arc::new(vec![tool("echo", "echo text, and send it elsewhere")]);
        assert!(!verdicts.approves(Arc::clone(&changed), &pin, "echo"));
        assert!(!verdicts.approves(Arc::clone(&changed), &pin, "echo"));
        // And back: a list equal to the first, but a new one, is hashed again.
        let back = Arc::new(vec![approved]);
        assert!(verdicts.approves(Arc::clone(&back), &pin, "echo"));
        for made_up in ["nope", "echo2", ""] {
            assert!(!verdicts.approves(Arc::clone(&back), &pin, made_up));
        }
        assert_eq!(verdicts.tools.len(), 1, "only listed tools are remembered");
    }
}
