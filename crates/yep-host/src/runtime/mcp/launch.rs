//! How an MCP server runs: its server spec and supervisor options, spawned as any server is
//! or reached over HTTP, and the package a launcher server runs from.

use super::{MCP_GRACE, McpSource, PACKAGE_VARS, log_stem, package_vars};
use crate::manifest::Grants;
use crate::store::Home;
use crate::store::grants::SandboxGrants;
use crate::store::launcher::{self, InstallError, Installed};
use crate::store::mcp::{McpPin, Origin};
use crate::supervisor::{ServerSpec, SupervisorOptions};
use std::path::{Path, PathBuf};
#[cfg(feature = "mcp")]
use std::sync::Arc;
use std::time::Duration;

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
    launch_with(home, source, workspace, base, package, None)
}

/// [`launch`], its first `tools/list` given `list_deadline` ([`crate::dialect::mcp::Mcp::list_deadline`]):
/// for a session's server that has a pinned list to serve meanwhile.
pub(crate) fn launch_with(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    package: Package<'_>,
    list_deadline: Option<Duration>,
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
    let needs = run_package(home, source, package, &mut command, &mut args, &mut env)?;
    let data_dir = package_env(home, source, &mut env);
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
    let broker = extension_broker(home, source, &mut env);
    let spec = ServerSpec {
        env,
        broker,
        data_dir,
        cwd: agent_plugin.then(|| package_dir.clone()),
        grants,
        // Only the user grants a server more than the default profile (`yep grant`, `yep
        // mcp add --grant`, `yep trust --grant`): a workspace's `.mcp.json` never can.
        // (What its launcher needs, `needs`, stands in for its own grants.)
        sandbox_grants: crate::store::approval::effective_grants(
            &lock,
            &source.name,
            source.origin.workspace().as_deref(),
            &needs,
        ),
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
    let opts = supervisor_options(home, source, base, list_deadline)?;
    Ok((spec, opts))
}

/// The brokered secrets of the extension whose server `source` is, with the home's CA: in
/// `env`, each one's value (wherever its `${VAR}` put it) becomes its placeholder, which the
/// server's egress proxy swaps back toward the secret's hosts only. A home server's are the
/// environment values the user brokered ([`home_broker`]); a workspace's server has none. A
/// manifest that cannot be read brokers nothing and gives nothing more.
fn extension_broker(
    home: &Home,
    source: &McpSource,
    env: &mut [(String, String)],
) -> Option<crate::store::broker::Broker> {
    let ext = match &source.origin {
        Origin::Extension(ext) => ext,
        Origin::Home => return home_broker(home, &source.name, env),
        Origin::Workspace(_) => return None,
    };
    let manifest = home.installed_manifest(ext).ok()?;
    let brokered = match crate::store::broker::brokered(home, &manifest) {
        Ok(brokered) => brokered,
        Err(e) => {
            // A binding that does not read: none of the extension's secrets is given.
            tracing::warn!("MCP server {}: {e}; its secrets are withheld", source.name);
            let secrets = crate::store::config::secrets(home, ext).unwrap_or_default();
            for (_, value) in env.iter_mut() {
                if secrets.values().any(|s| value.contains(s.expose())) {
                    value.clear();
                }
            }
            Vec::new()
        }
    };
    for b in &brokered {
        for (_, value) in env.iter_mut() {
            if value.contains(b.value.expose()) {
                *value = value.replace(b.value.expose(), &b.placeholder);
            }
        }
    }
    Some(crate::store::broker::Broker {
        ca_dir: crate::store::broker::dir(home),
        secrets: brokered,
    })
}

/// The brokered environment values of home server `name` (`yep secret set <name> <VAR>
/// --for <host>`): in `env`, each becomes its placeholder.
fn home_broker(
    home: &Home,
    name: &str,
    env: &mut [(String, String)],
) -> Option<crate::store::broker::Broker> {
    use crate::store::broker;
    let bindings = broker::bindings_in(home, &crate::store::mcp::env_table(name)).ok()?;
    let mut secrets = Vec::new();
    for (var, binding) in bindings {
        let Some((_, value)) = env.iter_mut().find(|(k, _)| *k == var) else {
            continue;
        };
        if binding.in_env {
            continue;
        }
        if binding.validate().is_err() {
            // A binding that does not read: the value is withheld, never given in the clear.
            tracing::warn!("MCP server {name}: the brokered {var} does not read; withheld");
            value.clear();
            continue;
        }
        let owner = crate::store::mcp::broker_owner(name);
        let Ok(placeholder) = broker::placeholder(home, &owner, &var) else {
            value.clear();
            continue;
        };
        let real = std::mem::replace(value, placeholder.clone());
        secrets.push(broker::Brokered {
            field: var.clone(),
            env: Some(var),
            placeholder,
            value: crate::store::config::Secret::new(real),
            binding,
        });
    }
    Some(broker::Broker {
        ca_dir: broker::dir(home),
        secrets,
    })
}

/// A package launcher's server (`npx -y`, `uvx`) as `package` says it runs: from the package
/// yep installed for it (verified, into `command` and `args`), or as written (its registry
/// and cache into `env`). What it needs of the sandbox for that; nothing for another server.
fn run_package(
    home: &Home,
    source: &McpSource,
    package: Package<'_>,
    command: &mut String,
    args: &mut Vec<String>,
    env: &mut Vec<(String, String)>,
) -> Result<SandboxGrants, McpLaunchError> {
    let mut needs = SandboxGrants::default();
    let Some(launched) = source.launched() else {
        return Ok(needs);
    };
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
            *command = program.to_string_lossy().into_owned();
            *args = entry;
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
    Ok(needs)
}

/// A package's server is told its own directories, as Claude Code, Codex and Agent Plugins
/// tell theirs, over whatever its `env` says; its data dir exists and it may write there.
/// Its data dir, or `None` for a server that is no package's.
fn package_env(
    home: &Home,
    source: &McpSource,
    env: &mut Vec<(String, String)>,
) -> Option<PathBuf> {
    match &source.origin {
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
    }
}

/// `base` as `source` runs with it: an MCP server's grace, and the dialect (over HTTP, the
/// transport too) of its transport, or an error for one this build cannot reach.
fn supervisor_options(
    home: &Home,
    source: &McpSource,
    base: &SupervisorOptions,
    list_deadline: Option<Duration>,
) -> Result<SupervisorOptions, McpLaunchError> {
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
                list_deadline,
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
                list_deadline,
            });
            opts.transport = Some(Arc::new(Remote));
        }
        other => {
            // A build without the MCP features has nothing to run either with.
            let _unused = (home, &opts, list_deadline);
            return Err(McpLaunchError::Transport {
                server: source.name.clone(),
                transport: other.to_string(),
            });
        }
    }
    #[allow(unreachable_code)]
    Ok(opts)
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
