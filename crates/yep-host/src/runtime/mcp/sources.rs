//! Where a session's MCP servers come from (the enabled extensions' `mcpServers`, the home's
//! `yep mcp add`, the workspace's `.mcp.json`), as defined, and whether they may run.

use super::{MAX_MCP_JSON_BYTES, MAX_WORKSPACE_SERVERS, command_line};
use crate::manifest::{Manifest, McpServer};
use crate::runtime::contrib::{argv_safe, expand, expand_withholding, references};
use crate::store::Home;
use crate::store::approval::{Approval, Decision, Moment, decide};
use crate::store::code::{CodeError, WorkspaceCode};
use crate::store::fsutil::{Links, Refused, read_regular_string};
use crate::store::launcher::{self, Launched};
use crate::store::mcp::{McpPin, Origin};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

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
    pub(crate) fn definition(&self) -> &McpServer {
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
    pub(crate) fn code_pin(&self) -> Option<&str> {
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
        // What would run now, in the one approval model, against what was approved: its
        // definition and the workspace code it names (its tools are known only once it runs,
        // and are withheld one by one then).
        let now = McpPin {
            spec: crate::store::mcp::spec_hash(self.definition(), &self.origin),
            code: match &self.code {
                Some(Ok(code)) => code.hash.clone(),
                _ => pin.code.clone(),
            },
            ..pin.clone()
        };
        let approved = Approval::of_mcp(pin.clone());
        let changed = !matches!(
            decide(
                Some(&approved),
                &Approval::of_mcp(now.clone()),
                Moment::Launch
            ),
            Decision::Run
        );
        if changed && now.spec != pin.spec {
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
            Some(Ok(code)) if changed => Some(Unapproved::Code {
                paths: code.paths.clone(),
                unpinned: pin.code.is_none(),
            }),
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
pub(crate) const PACKAGE_VARS: [&str; 4] = crate::store::claude::PACKAGE_DIR_VARS;

/// [`PACKAGE_VARS`] with their values for extension `ext`: its package dir and its data dir.
pub(crate) fn package_vars(home: &Home, ext: &str) -> [(&'static str, String); 4] {
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
/// package's own directories (`PACKAGE_VARS`: argv-safe, they are paths in the home), the
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
    for (ext, manifest) in extensions {
        extension_servers(home, ext, manifest, &mut out, warn);
    }
    home_servers(home, &mut out, warn);
    // Approvals are kept per workspace: one path for it, however it was spelled.
    let workspace = &workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let file = workspace.join(".mcp.json");
    workspace_servers(workspace, &file, &mut out, warn);
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

/// Put `source` in `out`. A later source of the same name replaces an earlier one; a
/// workspace's is refused before it gets here.
fn put(out: &mut Vec<McpSource>, source: McpSource) {
    out.retain(|s| s.name != source.name);
    out.push(source);
}

/// The host variables a server's definition named (`${VAR}`), as this process has read them:
/// a host shared by sessions serves only those whose values of them are its own.
static HOST_VARS_READ: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

/// Host variable `name`, noted in [`host_vars_read`].
fn host_var(name: &str) -> Option<String> {
    HOST_VARS_READ
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.to_string());
    std::env::var(name).ok()
}

/// The names of the host variables this process has put into a server's definition so far.
pub fn host_vars_read() -> Vec<String> {
    let read = HOST_VARS_READ.lock().unwrap_or_else(|p| p.into_inner());
    read.iter().cloned().collect()
}

/// Extension `ext`'s `mcpServers` as `<ext>__<server>`, put in `out`, `${VAR}` expanded from
/// its package's own directories, its secrets and the environment as [`sources`] says.
fn extension_servers(
    home: &Home,
    ext: &str,
    manifest: &Manifest,
    out: &mut Vec<McpSource>,
    warn: &mut dyn FnMut(String),
) {
    let secrets = crate::store::config::secrets(home, ext).unwrap_or_default();
    let own = package_vars(home, ext);
    let vars = |name: &str| {
        own.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| secrets.get(name).map(|s| s.expose().to_string()))
            .or_else(|| host_var(name))
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
        if let Some(source) = extension_server(ext, server, spec, &vars, &withheld, warn) {
            put(out, source);
        }
    }
}

/// Extension `ext`'s MCP server `server`, defined as `spec`, as it runs; `None`, with a
/// warning, when it is malformed. A variable `withheld` says yes to is left out of its command
/// line and url, with a warning.
fn extension_server(
    ext: &str,
    server: &str,
    spec: &McpServer,
    vars: &dyn Fn(&str) -> Option<String>,
    withheld: &dyn Fn(&str) -> bool,
    warn: &mut dyn FnMut(String),
) -> Option<McpSource> {
    let shape_ok = match spec.transport.as_str() {
        "stdio" => spec.command.as_deref().is_some_and(|c| !c.is_empty()) && spec.url.is_none(),
        "http" => spec.url.as_deref().is_some_and(|u| !u.is_empty()) && spec.command.is_none(),
        _ => false,
    };
    if !shape_ok {
        warn(format!(
            "extension `{ext}`: skipping MCP server `{server}`: a stdio server needs `command` (and no `url`), an http one `url` (and no `command`)"
        ));
        return None;
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
    Some(McpSource {
        name: format!("{ext}__{server}"),
        origin: Origin::Extension(ext.to_string()),
        server: expanded(spec, vars, withheld),
        shown: spec.clone(),
        // Its code is the package's, pinned by the package's content hash.
        code: None,
        needs_login: false,
    })
}

/// `spec` with `${VAR}` expanded from `vars`: in `command` and `args`, a variable `withheld`
/// says yes to expands to nothing and its value goes into `env` under its name instead.
fn expanded(
    spec: &McpServer,
    vars: &dyn Fn(&str) -> Option<String>,
    withheld: &dyn Fn(&str) -> bool,
) -> McpServer {
    let mut run = spec.clone();
    let mut moved = BTreeSet::new();
    run.command = run
        .command
        .map(|c| expand_withholding(&c, vars, withheld, &mut moved));
    run.args = run
        .args
        .iter()
        .map(|a| expand_withholding(a, vars, withheld, &mut moved))
        .collect();
    run.url = run.url.map(|u| expand(&u, vars));
    run.env = run
        .env
        .iter()
        .map(|(k, v)| (k.clone(), expand(v, vars)))
        .collect();
    for name in moved {
        if let Some(value) = vars(&name) {
            run.env.entry(name).or_insert(value);
        }
    }
    run.headers = run
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), expand(v, vars)))
        .collect();
    run
}

/// The user's own servers (`yep mcp add`), put in `out`: header values from the secrets only
/// to run it.
fn home_servers(home: &Home, out: &mut Vec<McpSource>, warn: &mut dyn FnMut(String)) {
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
                    out,
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
}

/// The servers of `workspace`'s `.mcp.json` (`file`), put in `out`, as [`sources`] says.
fn workspace_servers(
    workspace: &Path,
    file: &Path,
    out: &mut Vec<McpSource>,
    warn: &mut dyn FnMut(String),
) {
    // A regular file (a link to one is followed) of at most `MAX_MCP_JSON_BYTES`: a device,
    // a FIFO or a longer file is refused, never a read without end.
    let read = read_regular_string(file, MAX_MCP_JSON_BYTES, Links::Follow);
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.get_ref().is_some_and(|inner| inner.is::<Refused>()) => {
            warn(format!("skipping the workspace's MCP servers: {e}"))
        }
        Err(e) => warn(format!("skipping {}: {e}", file.display())),
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(doc) => workspace_doc(workspace, file, &doc, out, warn),
            Err(e) => warn(format!("failed to read {}: {e}", file.display())),
        },
    }
}

/// The servers `doc`, `workspace`'s `.mcp.json` (`file`), defines, put in `out`: the first
/// [`MAX_WORKSPACE_SERVERS`], each carrying the code it runs from the workspace, pinned. One
/// whose name is not a server name, or is taken already, is skipped with a warning.
fn workspace_doc(
    workspace: &Path,
    file: &Path,
    doc: &Value,
    out: &mut Vec<McpSource>,
    warn: &mut dyn FnMut(String),
) {
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
                    out,
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

/// Whether `server` runs `yep mcp serve` of `home`: a command named `yep` (or this very
/// program), `mcp` then `serve` among its arguments, and no `--home` naming another home.
/// One behind a wrapper is known at `initialize` instead
/// ([`crate::dialect::HandshakeError::IsThisHost`]).
pub(crate) fn runs_yep_serve(server: &McpServer, home: &Home) -> bool {
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
            let mut manifest = entry
                .approved()
                .or_else(|| home.package_manifest(entry).ok())?;
            // A server the user switched off is none of the session's.
            let off = crate::store::settings::off(&home.settings_path(), &name).ok()?;
            off.apply(&mut manifest, None);
            Some((name, manifest))
        })
        .collect())
}
