//! `yep mcp add | remove | list`: MCP servers the user adds to the home, and every MCP server
//! a session here would see (the user's, the enabled extensions', the workspace's).

use crate::output::{hinted, stdout_line};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use yep_host::runtime::mcp::{
    Approval, McpProbeError, McpSource, StageOptions, Unapproved, approve_with, command_line,
    enabled_manifests, log_stem, probe, sources, stage,
};
use yep_host::settings::sandbox_mode_or_required;
use yep_store::Home;
use yep_store::code::{MAX_CODE_BYTES, MAX_CODE_FILES};
use yep_store::launcher::{Installed, Launched};
use yep_store::manifest::McpServer;
use yep_store::mcp::{Origin, ToolChange};
use yep_store::text::{escape, escape_controls};

#[derive(clap::Subcommand)]
pub enum McpCommand {
    /// Add an MCP server to the home: `yep mcp add <name> -- <command> [args…]`, or
    /// `yep mcp add <name> --url <url> [--header K=V]…` (header values are stored as secrets).
    Add {
        /// The server's name (A-Z a-z 0-9 _ . -, no `__`).
        name: String,
        /// A streamable HTTP server at this URL (instead of a command).
        #[arg(long)]
        url: Option<String>,
        /// An HTTP header, `K=V`; its value is kept in connections.toml (owner-only).
        #[arg(long = "header", value_name = "K=V")]
        headers: Vec<String>,
        /// An environment variable for a command's server, `K=V` (repeatable); its value is
        /// kept in connections.toml (owner-only), as a header's is.
        #[arg(long = "env", short = 'e', value_name = "K=V")]
        env: Vec<String>,
        /// The server takes an OAuth login (`yep mcp login <name>` next); its tools are
        /// pinned once logged in.
        #[arg(long, requires = "url")]
        oauth: bool,
        /// Let it reach more than the sandbox's default profile (repeatable): workspace:write,
        /// read:<path>, write:<path>, net:<* | address:port | host name | private>, processes:<n>…
        /// (as `yep grant` takes them).
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        /// Keep a package launcher (`npx -y`, `uvx`, `pnpm dlx`, `bunx`, `pipx run`) as
        /// written: it fetches at each cold start, reaching its registry through yep's proxy
        /// and writing its cache. Without it yep installs the package once, pinned to its
        /// version and hash, and starts it directly.
        #[arg(long)]
        as_written: bool,
        /// Keep the server even when it cannot start or list its tools (it stays unapproved
        /// until `yep trust <name>`).
        #[arg(long)]
        keep: bool,
        /// Print what was added as JSON.
        #[arg(long)]
        json: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Log in to an MCP server over HTTP with OAuth: its authorization page opens in the
    /// browser (`$BROWSER`, else the system's opener; the URL is printed too), the answer
    /// comes back to a loopback address, and the tokens are kept in connections.toml
    /// (owner-only). Again, it asks for what the server's last refusal named (a step-up).
    Login {
        /// The server's name, as `yep mcp list` shows it.
        name: String,
        /// A scope to ask for beyond what the server suggests (repeatable).
        #[arg(long = "scope", value_name = "SCOPE")]
        scopes: Vec<String>,
        /// A client registered beforehand with the authorization server (else yep registers
        /// itself where the server allows it).
        #[arg(long, value_name = "ID")]
        client_id: Option<String>,
        /// How long to wait for the page's answer.
        #[arg(long, value_name = "TIME", default_value = "5m", value_parser = humantime::parse_duration)]
        wait: std::time::Duration,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget an MCP server's OAuth login (its tokens, kept in connections.toml).
    Logout {
        /// The server's name.
        name: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove an MCP server added with `yep mcp add` (and its header secrets).
    Remove {
        /// The name it was added under.
        name: String,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every MCP server a session here sees: the home's, the enabled extensions'
    /// (`<ext>__<server>`) and this workspace's `.mcp.json`. Header values are never shown.
    List {
        /// Print every server as JSON (header values never shown).
        #[arg(long)]
        json: bool,
    },
    /// Serve every enabled extension and approved MCP server as one MCP server on stdio, for
    /// any agent that speaks MCP: the same tools, hooks and pins as a yep session.
    Serve {
        /// List only the always-loaded tools and `search_tools` (for clients without a tool
        /// search of their own).
        #[arg(long)]
        deferred: bool,
        /// Serve streamable HTTP at this loopback address (`127.0.0.1:PORT`, at `/mcp`)
        /// instead of stdio; clients send the bearer token kept in the home.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Let `--http` listen on an address other than loopback.
        #[arg(long)]
        allow_remote: bool,
        /// Testing only: serve `--http` with no bearer token, so any local process can run
        /// your extensions' tools. For test suites that cannot send a token (the MCP
        /// conformance suite). Refused on any address but loopback.
        #[arg(long, requires = "http", conflicts_with = "allow_remote")]
        insecure_no_token_for_testing: bool,
        /// With `--http`: the most connections open at once [default: half the open-file
        /// limit beyond 64, between 8 and 1024]. At the cap a new connection takes the slot of
        /// the oldest one that has not sent an authorized request.
        #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: Option<u32>,
        /// With `--http`: the most MCP sessions open at once [default: 128]. At the cap a new
        /// session closes the idle one least worth keeping.
        #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions: Option<u32>,
        /// With `--http`: how long a request header may take to arrive, and a keep-alive
        /// connection may sit idle (`10s`, `500ms`) [default: 10s].
        #[arg(long, value_name = "TIME", requires = "http", value_parser = humantime::parse_duration)]
        header_timeout: Option<std::time::Duration>,
        /// Serve this session with a host of its own, as before the shared host: its servers
        /// start for it and stop when it ends (`yep host status` shows the shared one).
        #[arg(long, conflicts_with = "http")]
        no_shared: bool,
    },
    /// Print the snippet that adds `yep mcp serve` to an agent's MCP config: only the config
    /// on stdout (JSON, TOML or YAML, as that agent reads it), where it goes on stderr.
    Config {
        /// The agent whose config format to print.
        #[arg(value_enum)]
        agent: Agent,
    },
}

impl McpCommand {
    /// Whether this is a stdio `yep mcp serve` that attaches to the home's shared host.
    pub fn attaches(&self) -> bool {
        matches!(
            self,
            McpCommand::Serve {
                http: None,
                no_shared: false,
                ..
            }
        )
    }
}

/// An agent `yep mcp config` writes a snippet for.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
    Cursor,
    Goose,
    Gemini,
}

#[derive(clap::Args)]
pub struct TrustArgs {
    /// The MCP server (as `yep mcp list` names it) or zot extension.
    name: String,
    /// Approve without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// With the approval, let it reach more than the sandbox's default profile
    /// (repeatable, as `yep grant` takes them); shown and asked with the rest.
    #[arg(long = "grant", value_name = "GRANT")]
    grants: Vec<String>,
    /// For a server started through a package launcher (`npx -y`, `uvx`): keep the launcher
    /// as written instead of a pinned install (see `yep mcp add --as-written`).
    #[arg(long)]
    as_written: bool,
    /// Resolve and install a launcher's package again (`yep update <server>`).
    #[arg(skip)]
    pub(crate) reinstall: bool,
}

impl TrustArgs {
    /// `yep update <server>`: its launcher's package resolved and installed again, shown and
    /// asked as `yep trust` does.
    pub(crate) fn update(name: &str, yes: bool, json: bool) -> TrustArgs {
        TrustArgs {
            name: name.to_string(),
            yes,
            json,
            grants: Vec::new(),
            as_written: false,
            reinstall: true,
        }
    }
}

/// `yep trust project`: the workspace's own Claude Code config (`.claude/`), shown as a
/// plugin's consent screen shows one with the code its hooks run from the workspace and why
/// it is asked again, and pinned for this workspace once approved.
fn trust_project(args: &TrustArgs, home: &Home) -> anyhow::Result<ExitCode> {
    use yep_store::Approver as _;
    use yep_store::claude::project::Unapproved as Asked;
    let workspace = std::env::current_dir()?;
    let Some(project) = yep_store::claude::project::read(&workspace)? else {
        return Err(hinted(
            "this workspace has no .claude hooks, commands or skills to approve".to_string(),
            &[
                "`yep trust project` approves .claude/settings.json hooks, .claude/commands and .claude/skills",
            ],
        ));
    };
    let pinned = home.project_pin(&workspace)?;
    let Some(why) = project.unapproved(pinned.as_ref()) else {
        report_trust(args, &project.hash, false, "already approved");
        return Ok(ExitCode::SUCCESS);
    };
    let mut summary = yep_store::summary::claude_summary(
        &project.approval.manifest,
        &project.approval.pin,
        &project.approval.notes,
    );
    summary.push_str(&format!(
        "\n  workspace {}",
        escape(&workspace.display().to_string())
    ));
    if !project.code.paths.is_empty() {
        summary.push_str(&format!(
            "\n  code its hooks run from the workspace: {}",
            escape(&project.code.paths.join(", "))
        ));
    }
    if why != Asked::Never {
        summary.push_str(&format!("\n  not approved{}", why.since()));
    }
    let diff = pinned.as_ref().map(|old| {
        let (lines, widened) = old.claude.diff(&project.approval.pin);
        yep_store::summary::ContributionDiff {
            lines,
            widened,
            ..Default::default()
        }
    });
    let mut consent = super::install::Consent::new(args.yes);
    if !consent.approve(&summary, diff.as_ref()) {
        return Err(hinted(
            "not approved: the workspace's .claude config does not run".to_string(),
            &["review the summary above and re-run with --yes to approve it"],
        ));
    }
    home.trust_project(&workspace, &project)?;
    report_trust(args, &project.hash, true, "approved");
    Ok(ExitCode::SUCCESS)
}

fn report_trust(args: &TrustArgs, hash: &str, changed: bool, said: &str) {
    if args.json {
        stdout_line(
            &serde_json::json!({"name": args.name, "approved": true, "changed": changed, "hash": hash})
                .to_string(),
        );
    } else {
        stdout_line(&format!(
            "{said}: the workspace's .claude config ({hash}) runs as `{}`",
            args.name
        ));
    }
}

/// One row of `yep mcp list`.
#[derive(Serialize)]
struct Row {
    name: String,
    /// `home`, `extension <name>`, or `workspace`.
    source: String,
    #[serde(flatten)]
    server: McpServer,
    /// `approved`, or why it does not start.
    approval: String,
    /// `configured` (not running), `started`, `idle` (stopped for want of use by a host that
    /// starts it again on next use) or `failed`, as the last session left it.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    /// Tools the last session withheld as new or changed since approval.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    withheld: Vec<String>,
    /// Its log (a stdio server's stderr), one per server.
    log: PathBuf,
    /// A stdio server's sandbox grants beyond the default profile (what `yep grant` gave
    /// it); none for a server reached over HTTP, which yep does not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<Vec<String>>,
    /// An HTTP server's OAuth login: `logged in`, or `needs login` (never the tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    login: Option<&'static str>,
    /// The package yep installed for its launcher (`npx -y`, `uvx`), as pinned, and whether
    /// its files still match.
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// Its launcher runs as written (`--as-written`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    as_written: bool,
}

/// Where `yep` runs: the workspace whose `.mcp.json` it reads.
fn workspace() -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    std::env::current_dir().context("failed to read the current directory")
}

/// Every MCP server a session here sees, warnings on stderr.
pub(crate) fn here(home: &Home) -> anyhow::Result<Vec<McpSource>> {
    let extensions = enabled_manifests(home)?;
    let mut warn = |message: String| {
        let _ = writeln!(std::io::stderr(), "warning: {}", escape_controls(&message));
    };
    Ok(sources(home, &extensions, &workspace()?, &mut warn))
}

/// The MCP server a session here sees by the name `yep mcp list` gives it, if any.
pub(crate) fn named(home: &Home, name: &str) -> anyhow::Result<Option<McpSource>> {
    Ok(here(home)?.into_iter().find(|s| s.name == name))
}

/// The error for a name that is neither an installed extension nor an MCP server here.
pub(crate) fn no_such_server(home: &Home, name: &str) -> anyhow::Error {
    // The installed name that is close, if any: `; did you mean `weather`?`.
    let close = match home.not_installed(name) {
        yep_store::StoreError::NotInstalled(_, close) => close,
        _ => String::new(),
    };
    crate::output::hinted(
        format!(
            "no extension or MCP server named `{}` here{close}",
            escape(name)
        ),
        &[
            "`yep list` shows installed extensions, `yep mcp list` the MCP servers a session in this directory sees",
        ],
    )
}

fn origin_text(origin: &Origin) -> String {
    match origin {
        Origin::Extension(ext) => format!("extension {ext}"),
        Origin::Home => "home".into(),
        Origin::Workspace(_) => "workspace".into(),
    }
}

/// Where a server is defined, as `yep trust` names the one it means: the extension, the
/// home's settings, or the workspace's `.mcp.json` file.
fn origin_long(origin: &Origin, home: &Home) -> String {
    match origin {
        Origin::Extension(ext) => format!("extension {ext}"),
        Origin::Home => format!("home, {}", home.settings_path().display()),
        Origin::Workspace(root) => format!("workspace, {}", root.join(".mcp.json").display()),
    }
}

pub async fn run(cmd: McpCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::Add {
            name,
            url,
            headers,
            env,
            oauth,
            grants,
            as_written,
            keep,
            json,
            command,
        } => {
            let granted = super::grant::parse_all(&grants)?;
            let missing = super::grant::missing_paths(home, &granted)?;
            let mut parsed = BTreeMap::new();
            for h in &headers {
                let (k, v) = h
                    .split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .ok_or_else(|| anyhow::anyhow!("--header {h:?} is not K=V"))?;
                parsed.insert(k.trim().to_string(), v.to_string());
            }
            let mut vars = BTreeMap::new();
            for e in &env {
                let (k, v) = e
                    .split_once('=')
                    .filter(|(k, _)| {
                        !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    })
                    .ok_or_else(|| anyhow::anyhow!("--env {e:?} is not K=V"))?;
                vars.insert(k.to_string(), v.to_string());
            }
            let server = match (url, command.split_first()) {
                (Some(_), Some(_)) => anyhow::bail!("give a --url or a command after --, not both"),
                (None, None) => anyhow::bail!(
                    "give a command after -- (`yep mcp add {name} -- <command> [args…]`) or a --url"
                ),
                (Some(_), None) if !vars.is_empty() => {
                    anyhow::bail!("--env is for a command's server (after --)")
                }
                (Some(url), None) => McpServer {
                    transport: "http".into(),
                    command: None,
                    args: Vec::new(),
                    env: BTreeMap::new(),
                    url: Some(url),
                    headers: parsed,
                },
                (None, Some((program, args))) => {
                    if !parsed.is_empty() {
                        anyhow::bail!("--header is for an http server (--url)");
                    }
                    McpServer {
                        transport: "stdio".into(),
                        command: Some(program.clone()),
                        args: args.to_vec(),
                        env: vars,
                        url: None,
                        headers: BTreeMap::new(),
                    }
                }
            };
            yep_store::mcp::add(home, &name, &server)?;
            // Typed with the command that adds it: granted as it is added, before its first
            // run (which lists its tools) so that run has them too.
            missing.make()?;
            if !granted.is_empty() {
                let before = home.lockfile()?.granted(&name, None);
                home.set_granted(&name, None, before.merged(&granted))?;
            }
            if oauth {
                yep_store::mcp::set_oauth(home, &name, true)?;
                let next = format!("next: yep mcp login {}", escape(&name));
                if json {
                    stdout_line(
                        &serde_json::json!({ "added": name, "pinned": [], "login": "needs login" })
                            .to_string(),
                    );
                } else {
                    stdout_line(&format!(
                        "added MCP server {} (needs login; its tools are pinned once logged in)",
                        escape(&name)
                    ));
                    crate::output::stderr_line(&next);
                }
                return Ok(ExitCode::SUCCESS);
            }
            // Adding it is approving it: its tools as they are now are pinned.
            let source = here(home)?
                .into_iter()
                .find(|s| s.name == name && s.origin == Origin::Home);
            let opts = StageOptions {
                as_written: Some(as_written),
                reinstall: false,
                progress: crate::progress::bars(),
            };
            let approved = match &source {
                None => Err("it is not among the servers a session here sees".to_string()),
                Some(source) => match pin_now(home, source, &workspace()?, &opts).await {
                    Ok(approval) => Ok(approval),
                    // A list past the caps can never be approved: the server is not kept.
                    Err(why) if why.over_cap().is_some() => {
                        yep_store::mcp::remove(home, &name)?;
                        return Err(hinted(
                            format!("not added: {}", escape_controls(&why.to_string())),
                            &[&over_cap_hint()],
                        ));
                    }
                    Err(why) => Err(why.to_string()),
                },
            };
            let wants_login = approved
                .as_ref()
                .is_err_and(|why| why.contains("wants a login"));
            if wants_login {
                yep_store::mcp::set_oauth(home, &name, true)?;
                let _ = writeln!(
                    std::io::stderr(),
                    "MCP server {} wants a login: `yep mcp login {}` logs in and pins its tools",
                    escape(&name),
                    escape(&name)
                );
            } else if let Err(why) = &approved {
                let log = home.log_path(&log_stem(&name, &Origin::Home));
                let log_hint = format!(
                    "its log: {} (`yep logs {}`)",
                    escape(&log.display().to_string()),
                    escape(&name)
                );
                if !keep {
                    // A server that cannot start is not kept as if it were added.
                    yep_store::mcp::remove(home, &name)?;
                    return Err(hinted(
                        format!(
                            "not added: MCP server {} could not start and list its tools: {}",
                            escape(&name),
                            escape_controls(why)
                        ),
                        &[
                            &log_hint,
                            "`--keep` adds it anyway, unapproved until `yep trust <name>`",
                        ],
                    ));
                }
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: could not list the tools of MCP server {} ({}); none are offered until `yep trust {}`; {log_hint}",
                    escape(&name),
                    escape_controls(why),
                    escape(&name)
                );
            }
            let tools: Vec<String> = approved
                .as_ref()
                .map(|a| a.tools.iter().map(|t| t.name.clone()).collect())
                .unwrap_or_default();
            let install = approved.as_ref().ok().and_then(|a| a.install.as_ref());
            let launched = source.as_ref().and_then(McpSource::launched);
            if json {
                stdout_line(
                    &serde_json::json!({
                        "added": name,
                        "pinned": tools,
                        "install": install,
                        "as_written": as_written && launched.is_some(),
                    })
                    .to_string(),
                );
            } else {
                let pinned = match &approved {
                    Ok(_) => format!("{} pinned", tools_count(tools.len())),
                    Err(_) if wants_login => "needs login".into(),
                    Err(_) => "not approved yet".into(),
                };
                stdout_line(&format!("added MCP server {} ({pinned})", escape(&name)));
                if let Some(install) = install {
                    for line in install_lines(install, home) {
                        stdout_line(&format!("  {line}"));
                    }
                }
                if let (true, Some(launched)) = (as_written, &launched) {
                    stdout_line(&format!("  {}", as_written_line(launched)));
                }
            }
        }
        McpCommand::Login {
            name,
            scopes,
            client_id,
            wait,
            json,
        } => return login(home, &name, scopes, client_id, wait, json).await,
        McpCommand::Logout { name, json } => {
            let source = http_source(home, &name)?;
            let forgot = yep_store::mcp::clear_oauth_credentials(home, &source.name)?;
            if json {
                stdout_line(
                    &serde_json::json!({ "logged_out": name, "had_login": forgot }).to_string(),
                );
            } else if forgot {
                stdout_line(&format!("logged out of MCP server {}", escape(&name)));
            } else {
                stdout_line(&format!(
                    "no login was kept for MCP server {}",
                    escape(&name)
                ));
            }
        }
        McpCommand::Remove { name, json } => {
            if !yep_store::mcp::remove(home, &name)? {
                anyhow::bail!(
                    "no MCP server named `{}` was added to this home",
                    escape(&name)
                );
            }
            if json {
                stdout_line(&serde_json::json!({ "removed": name }).to_string());
            } else {
                stdout_line(&format!("removed MCP server {}", escape(&name)));
            }
        }
        McpCommand::Serve {
            deferred,
            http,
            allow_remote,
            insecure_no_token_for_testing,
            max_connections,
            max_sessions,
            header_timeout,
            no_shared,
        } => {
            if !no_shared && http.is_none() {
                match attach(home, deferred).await {
                    Ok(()) => return Ok(ExitCode::SUCCESS),
                    Err(yep_serve::shared::AttachError::Refused(e)) => {
                        return Err(hinted(
                            format!("the shared host refused this session: {}", escape(&e)),
                            &["`yep mcp serve --no-shared` serves it with a host of its own"],
                        ));
                    }
                    Err(e) => {
                        let _ = writeln!(
                            std::io::stderr(),
                            "warning: {}; serving this session with a host of its own",
                            escape(&e.to_string())
                        );
                    }
                }
            }
            let mut limits = yep_serve::bridge::HttpLimits::default();
            if let Some(n) = max_connections {
                limits.max_connections = n as usize;
            }
            if let Some(n) = max_sessions {
                limits.max_sessions = n as usize;
            }
            if let Some(t) = header_timeout {
                limits.header_timeout = t;
            }
            let access = Access {
                allow_remote,
                no_token: insecure_no_token_for_testing,
            };
            return serve(home, deferred, http, access, limits).await;
        }
        McpCommand::Config { agent } => {
            let (snippet, hint) = config_snippet(agent, home)?;
            stdout_line(&snippet);
            crate::output::stderr_line(&hint);
        }
        McpCommand::List { json } => {
            let mut rows = Vec::new();
            let lock = home.lockfile()?;
            for s in here(home)? {
                let pin = yep_store::mcp::pin_in(&lock, &s.name, &s.origin);
                let stem = log_stem(&s.name, &s.origin);
                let (state, failure) = yep_store::state::run_state(home, &stem);
                let login = login_state(home, &s);
                let package = pin.as_ref().and_then(|p| p.install.as_ref()).map(|i| {
                    let mut said = i.said();
                    if let Err(e) = i.verify(home, &s.name) {
                        said.push_str(&format!(": {e}"));
                    }
                    said
                });
                rows.push(Row {
                    package,
                    as_written: pin.as_ref().is_some_and(|p| p.as_written),
                    login,
                    sandbox: match s.server.transport.as_str() {
                        "stdio" => Some(
                            lock.granted(&s.name, s.origin.workspace().as_deref())
                                .lines(),
                        ),
                        _ => None,
                    },
                    log: home.log_path(&stem),
                    withheld: yep_store::mcp::withheld(home, &s.name, &s.origin),
                    state,
                    failure,
                    approval: s
                        .unapproved(pin.as_ref())
                        .unwrap_or_else(|| "approved".into()),
                    name: s.name,
                    source: origin_text(&s.origin),
                    server: s.shown,
                });
            }
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            if json {
                stdout_line(&serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                stdout_line("no MCP servers; add one: yep mcp add <name> -- <command> [args…]");
            } else {
                for r in &rows {
                    stdout_line(&format!(
                        "{}  [{}, {}]  {}  ({})",
                        escape(&r.name),
                        escape(&r.server.transport),
                        r.state,
                        escape(&command_line(&r.server)),
                        escape(&r.source)
                    ));
                    if let Some(login) = r.login {
                        let next = match login {
                            "needs login" => format!(" (`yep mcp login {}`)", escape(&r.name)),
                            _ => String::new(),
                        };
                        stdout_line(&format!("  login: {login}{next}"));
                    }
                    if let Some(failure) = &r.failure {
                        stdout_line(&format!("  last failure: {}", escape(failure)));
                    }
                    if let Some(package) = &r.package {
                        stdout_line(&format!("  package: {}", escape_controls(package)));
                    }
                    if r.as_written {
                        stdout_line(
                            "  package: fetched by its launcher at each cold start (as written)",
                        );
                    }
                    stdout_line(&format!("  log: {}", escape(&r.log.display().to_string())));
                    if let Some(grants) = &r.sandbox {
                        stdout_line(&format!(
                            "  sandbox: {}",
                            super::grant::profile_text(grants, sandbox_mode_or_required(home))
                        ));
                    }
                    for change in &r.withheld {
                        stdout_line(&format!(
                            "  withheld: {} (`yep trust {}` shows and approves it)",
                            escape_controls(change),
                            escape(&r.name)
                        ));
                    }
                    if r.approval != "approved" {
                        stdout_line(&format!("  {}", escape_controls(&r.approval)));
                    }
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An HTTP server's OAuth login as `list` shows it: `logged in` when one is kept for its URL,
/// `needs login` when it takes one and none is kept, nothing otherwise.
fn login_state(home: &Home, source: &McpSource) -> Option<&'static str> {
    let url = source
        .server
        .url
        .as_deref()
        .filter(|_| source.server.transport == "http")?;
    if yep_host::dialect::mcp::credentials::Credentials::new(home, &source.name, url).logged_in() {
        Some("logged in")
    } else if source.origin == Origin::Home && yep_store::mcp::oauth_wanted(home, &source.name) {
        Some("needs login")
    } else {
        None
    }
}

/// The MCP server over HTTP a session here sees as `name`.
fn http_source(home: &Home, name: &str) -> anyhow::Result<McpSource> {
    let source = here(home)?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            hinted(
                format!("no MCP server named `{}` here", escape(name)),
                &["`yep mcp list` shows the servers a session here sees"],
            )
        })?;
    if source.server.transport != "http" {
        return Err(hinted(
            format!("MCP server `{}` is not reached over HTTP", escape(name)),
            &["a login is for a server at a URL (`yep mcp add <name> --url <url> --oauth`)"],
        ));
    }
    Ok(source)
}

/// A login page opened in the user's browser: `$BROWSER`, else the system's opener. The URL
/// is printed first, so a machine without a browser can have it opened elsewhere.
struct UserBrowser;

impl yep_serve::oauth::Browser for UserBrowser {
    fn open<'a>(
        &'a self,
        url: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(async move {
            // The page's address comes from the authorization server's metadata: only a web
            // page is opened, never a file or another scheme's handler.
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(std::io::Error::other(format!(
                    "the authorization page is not a web address: {}",
                    escape_controls(url)
                )));
            }
            crate::output::stderr_line(&format!(
                "open this page to log in (yep waits for its answer): {}",
                escape_controls(url)
            ));
            let opener = std::env::var("BROWSER")
                .ok()
                .filter(|b| !b.trim().is_empty());
            let (program, args): (String, Vec<String>) = match opener {
                // `$BROWSER` is a command line; the URL goes last.
                Some(line) => (
                    "sh".into(),
                    vec![
                        "-c".into(),
                        format!("{line} \"$1\""),
                        "sh".into(),
                        url.into(),
                    ],
                ),
                None if cfg!(target_os = "macos") => ("open".into(), vec![url.into()]),
                None => ("xdg-open".into(), vec![url.into()]),
            };
            // The page is open in the browser once the opener is done; one that cannot run
            // leaves the printed URL.
            #[allow(clippy::disallowed_methods)] // the user's own browser, not a server
            let opened = tokio::process::Command::new(&program)
                .args(&args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .await;
            if !opened.is_ok_and(|s| s.success()) {
                crate::output::stderr_line(
                    "(no browser could be opened here: open the page yourself)",
                );
            }
            Ok(())
        })
    }
}

/// `yep mcp login <name>`: log in, then pin the tools the login lets it list.
async fn login(
    home: &Home,
    name: &str,
    scopes: Vec<String>,
    client_id: Option<String>,
    wait: std::time::Duration,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let source = http_source(home, name)?;
    let url = source.server.url.clone().unwrap_or_default();
    let opts = yep_serve::oauth::LoginOptions {
        scopes,
        challenge: yep_serve::oauth::challenge(&url).await,
        client_id,
        wait,
        ..Default::default()
    };
    let granted = yep_serve::oauth::login(home, &source.name, &url, &UserBrowser, opts)
        .await
        .map_err(|e| anyhow::anyhow!("could not log in to MCP server {}: {e}", escape(name)))?;
    if source.origin == Origin::Home {
        yep_store::mcp::set_oauth(home, &source.name, true)?;
    }
    // Logged in, it can be listed: its tools as they are now are pinned.
    let pinned = pin_now(home, &source, &workspace()?, &StageOptions::default())
        .await
        .map(|a| a.tools);
    if json {
        stdout_line(
            &serde_json::json!({
                "logged_in": name,
                "scopes": granted,
                "pinned": pinned.as_ref().map(|t| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>()).unwrap_or_default(),
                "error": pinned.as_ref().err().map(|e| e.to_string()),
            })
            .to_string(),
        );
    } else {
        let scopes = match granted.is_empty() {
            true => String::new(),
            false => format!(" (scopes: {})", escape_controls(&granted.join(" "))),
        };
        stdout_line(&format!("logged in to MCP server {}{scopes}", escape(name)));
        match &pinned {
            Ok(tools) => stdout_line(&format!("  {} pinned", tools_count(tools.len()))),
            Err(why) => stdout_line(&format!(
                "  its tools could not be listed yet: {}",
                escape_controls(&why.to_string())
            )),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `1 tool`, `3 tools`.
fn tools_count(n: usize) -> String {
    format!("{n} tool{}", if n == 1 { "" } else { "s" })
}

/// Start `source` once (run from `here`), its launcher's package made ready as `opts` says,
/// list its tools, and pin them as approved.
async fn pin_now(
    home: &Home,
    source: &McpSource,
    here: &std::path::Path,
    opts: &StageOptions,
) -> Result<Approval, McpProbeError> {
    approve_with(
        home,
        source,
        here,
        &yep_host::SupervisorOptions::for_home(home),
        opts,
    )
    .await
}

/// What a launcher's pinned install is, as the consent screen and `yep mcp add` say it: the
/// package, version and hash, where it lives, and where the registry says it was built.
fn install_lines(install: &Installed, home: &Home) -> Vec<String> {
    let mut lines = vec![
        format!("installed {}", escape(&install.said())),
        format!(
            "runs offline from {}, not through the launcher",
            escape(&install.path(home).display().to_string())
        ),
    ];
    if let Some(p) = &install.provenance {
        lines.push(format!(
            "provenance: built from {}{}",
            escape(&p.repository),
            p.workflow
                .as_deref()
                .map(|w| format!(" by {}", escape(w)))
                .unwrap_or_default()
        ));
    }
    lines
}

/// What a launcher kept as written reaches, in a line.
fn as_written_line(launched: &Launched) -> String {
    let needs = yep_store::launcher::needs(launched);
    format!(
        "runs `{}` as written: it fetches {} at each cold start from {} (through yep's proxy) and writes {}",
        escape(&launched.launcher),
        escape(&launched.spec),
        escape(&needs.net.join(", ")),
        escape(&needs.write.join(", "))
    )
}

/// The hint for a tool list past a cap: approving again cannot help.
fn over_cap_hint() -> String {
    use yep_store::mcp::{MAX_APPROVED_TOOLS, MAX_TOOL_BYTES, MAX_TOOL_LIST_BYTES};
    format!(
        "yep approves at most {MAX_APPROVED_TOOLS} tools per server, {} KiB per tool and {} MiB in all (docs/mcp.md); ask the server for fewer tools (many take an option that picks them)",
        MAX_TOOL_BYTES / 1024,
        MAX_TOOL_LIST_BYTES / (1024 * 1024)
    )
}

/// After an install or update: pin the tools of each MCP server the package contributes
/// that has no approval for what it is now (approving the package approved them). A server
/// that cannot be listed yet (a secret not set, say) stays withheld until `yep trust`.
pub async fn pin_contributed(home: &Home, results: &[yep_store::Installed], json: bool) {
    let Ok(here) = workspace() else {
        return;
    };
    let lock = home.lockfile().unwrap_or_default();
    for r in results {
        let Ok(manifest) = home.installed_manifest(&r.name) else {
            continue;
        };
        // A plugin's remote servers are listed, not reached, until the user trusts them: the
        // consent screen said what approving starts, its local (stdio) servers, once each.
        let plugin = lock.get(&r.name).is_some_and(|e| e.claude.is_some());
        let extensions = [(r.name.clone(), manifest)];
        for source in sources(home, &extensions, &here, &mut |_| {}) {
            if !matches!(&source.origin, Origin::Extension(e) if *e == r.name) {
                continue;
            }
            let pin = yep_store::mcp::pin(home, &source.name, &source.origin)
                .ok()
                .flatten();
            if source.unapproved(pin.as_ref()).is_none() {
                continue;
            }
            if plugin && source.server.transport != "stdio" {
                let line = format!(
                    "  MCP server {}: not started (installing a plugin reaches no remote server); `yep trust {}` lists and pins its tools",
                    escape(&source.name),
                    escape(&source.name)
                );
                match json {
                    true => {
                        let _ = writeln!(std::io::stderr(), "{line}");
                    }
                    false => stdout_line(&line),
                }
                continue;
            }
            let opts = StageOptions {
                progress: crate::progress::bars(),
                ..StageOptions::default()
            };
            let line = match pin_now(home, &source, &here, &opts).await {
                Ok(approval) => {
                    let mut line = format!(
                        "  pinned {} of MCP server {}",
                        tools_count(approval.tools.len()),
                        escape(&source.name)
                    );
                    for more in approval.install.iter().flat_map(|i| install_lines(i, home)) {
                        line.push_str(&format!("\n    {more}"));
                    }
                    line
                }
                Err(why) if why.over_cap().is_some() => format!(
                    "  MCP server {}: its tools are not offered: {}",
                    escape(&source.name),
                    escape_controls(&why.to_string()),
                ),
                Err(why) => format!(
                    "  MCP server {}: could not list its tools ({}); none are offered until `yep trust {}`",
                    escape(&source.name),
                    escape_controls(&why.to_string()),
                    escape(&source.name)
                ),
            };
            if json {
                let _ = writeln!(std::io::stderr(), "{line}");
            } else {
                stdout_line(&line);
            }
        }
    }
}

/// What `yep trust` did.
#[derive(Serialize)]
struct Trusted {
    name: String,
    kind: &'static str,
    /// Where the server it means is defined: `home, <settings.toml>`, `extension <name>` or
    /// `workspace, <its .mcp.json>`.
    source: String,
    /// What moved since the last approval (`+ tool x (new)`).
    changes: Vec<String>,
    /// The definition itself (command, url, env) changed, or was never approved.
    definition_changed: bool,
    /// Why it was not approved as it is now (`never approved`, the code it runs changed, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// What its approval pins of the code it runs from the workspace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    code: Vec<String>,
    /// What each new or changed tool says, as a diff against what was approved (hidden
    /// characters marked, `<U+202E>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    text: Vec<yep_store::tooltext::ToolText>,
    approved: bool,
    tools: Vec<String>,
    /// A launcher's package that moved: `pkg: 1.0.0 → 1.1.0 (hashes)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// The package installed for its launcher, as approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<Installed>,
}

/// `yep trust <name>`: an MCP server's tools as they are now (shown as a diff against the
/// last approval), or a zot extension's registrations (run again, as `yep update` does).
pub async fn trust(args: TrustArgs, home: &Home) -> anyhow::Result<ExitCode> {
    if args.name == yep_store::claude::project::PROJECT {
        return trust_project(&args, home);
    }
    let source = here(home)?.into_iter().find(|s| s.name == args.name);
    // A workspace's `.mcp.json` cannot take this verb from an installed zot extension.
    let zot = home
        .lockfile()?
        .get(&args.name)
        .is_some_and(|e| e.zot.is_some());
    let workspace_named = source
        .as_ref()
        .is_none_or(|s| matches!(s.origin, Origin::Workspace(_)));
    // Grants named with the approval are asked for first: its run to list tools has them.
    let mut consent = super::install::Consent::new(args.yes);
    if !args.grants.is_empty() && (source.is_some() || zot) {
        super::grant::grant_with_consent(home, &args.name, &args.grants, &mut consent)?;
    }
    if zot && workspace_named {
        let update = super::install::UpdateArgs::only(&args.name, args.yes, args.json);
        return super::install::update(update, home).await;
    }
    let Some(source) = source else {
        return Err(hinted(
            format!(
                "no MCP server or zot extension named `{}` here",
                escape(&args.name)
            ),
            &["`yep mcp list` shows the MCP servers a session in this directory sees"],
        ));
    };
    let pin = yep_store::mcp::pin(home, &source.name, &source.origin)?;
    let blocked = source.blocked(pin.as_ref());
    let definition_changed = blocked.is_some();
    // Code that cannot be pinned cannot be approved: nothing is run.
    if let Some(Unapproved::Unpinnable(_)) = &blocked {
        return Err(hinted(
            format!(
                "not approved: {}",
                escape_controls(&source.unapproved(pin.as_ref()).unwrap_or_default())
            ),
            &[&format!(
                "yep pins at most {MAX_CODE_FILES} files and {} MiB of the code a workspace's server runs (docs/mcp.md)",
                MAX_CODE_BYTES / (1024 * 1024)
            )],
        ));
    }
    let refused = |consent: &super::install::Consent, what: &str| {
        let hint = if consent.asked {
            format!("no terminal to ask at: review {what} above and re-run with --yes to approve")
        } else {
            "nothing was approved".to_string()
        };
        hinted(
            format!("not approved: MCP server `{}`", escape(&source.name)),
            &[&hint],
        )
    };
    {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "MCP server {} ({}): {}",
            escape(&source.name),
            escape(&origin_long(&source.origin, home)),
            source.described()
        );
        // Listing its tools runs it: asked first, unless what runs is what was approved.
        if let Some(why) = &blocked {
            let _ = writeln!(err, "  {}", why.reason());
            if !consent.ask(&mut err, "run it to list its tools?") {
                return Err(refused(&consent, "what it runs"));
            }
        }
    }
    // A launcher's package: the approved install, or one made now (`yep update`: always).
    let opts = StageOptions {
        as_written: args.as_written.then_some(true),
        reinstall: args.reinstall,
        progress: crate::progress::bars(),
    };
    let staged = stage(home, &source, &opts).await.map_err(|e| {
        anyhow::anyhow!(
            "MCP server {}: {}",
            escape(&source.name),
            escape_controls(&e.to_string())
        )
    })?;
    let tools = match probe(
        home,
        &source,
        &workspace()?,
        &yep_host::SupervisorOptions::for_home(home),
        staged.package(),
    )
    .await
    {
        Ok(tools) => tools,
        Err(why) => {
            staged.discard(home);
            return Err(match why.over_cap() {
                Some(_) => hinted(
                    format!("not approved: {}", escape_controls(&why.to_string())),
                    &[&over_cap_hint()],
                ),
                None => anyhow::anyhow!("{why}"),
            });
        }
    };
    let changes: Vec<ToolChange> = yep_store::mcp::diff(pin.as_ref(), &tools);
    let before = pin.as_ref().and_then(|p| p.install.as_ref());
    let package = match (before, &staged.install) {
        (Some(old), Some(new))
            if (&old.version, &old.integrity) != (&new.version, &new.integrity) =>
        {
            Some(format!(
                "{}: {} → {} ({} → {})",
                new.package, old.version, new.version, old.integrity, new.integrity
            ))
        }
        (None, Some(new)) if pin.is_some() => {
            Some(format!("{} {} installed", new.package, new.version))
        }
        _ => None,
    };
    let as_written_moved = pin
        .as_ref()
        .is_some_and(|p| p.as_written != staged.as_written);
    let mut outcome = Trusted {
        name: source.name.clone(),
        kind: "mcp",
        source: origin_long(&source.origin, home),
        changes: changes.iter().map(ToString::to_string).collect(),
        definition_changed,
        reason: blocked.as_ref().map(Unapproved::reason),
        code: match &source.code {
            Some(Ok(code)) => code.paths.clone(),
            _ => Vec::new(),
        },
        text: yep_store::mcp::changed_text(
            &changes,
            &pin.as_ref()
                .map(|p| yep_store::mcp::cached(home, &source.origin, p))
                .unwrap_or_default(),
            &tools,
        ),
        approved: false,
        tools: tools.iter().map(|t| t.name.clone()).collect(),
        package: package.clone(),
        install: staged.install.clone(),
    };
    if changes.is_empty() && !definition_changed && package.is_none() && !as_written_moved {
        // The same package installed again (its files had changed, or `yep update` found
        // nothing newer): pinned where it is now, with nothing new to approve.
        if staged.fresh {
            yep_host::runtime::mcp::record(home, &source, &staged, &tools)?;
        }
        outcome.approved = true;
        if args.json {
            stdout_line(&serde_json::to_string_pretty(&outcome)?);
        } else {
            let still = match (&staged.install, source.launched()) {
                (Some(install), Some(launched)) => format!(
                    " ({} {} is what `{}` resolves to)",
                    escape(&install.package),
                    escape(&install.version),
                    escape(&launched.spec)
                ),
                _ => String::new(),
            };
            stdout_line(&format!(
                "MCP server {}: nothing changed since it was approved{still}",
                escape(&source.name)
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let approved = {
        let mut err = std::io::stderr().lock();
        if let Some(install) = &staged.install {
            for line in install_lines(install, home) {
                let _ = writeln!(err, "  {line}");
            }
        }
        if let Some(moved) = &package {
            let _ = writeln!(err, "  package: {}", escape(moved));
        }
        if let (true, Some(launched)) = (staged.as_written, source.launched()) {
            let _ = writeln!(err, "  {}", as_written_line(&launched));
        }
        for (change, said) in changes.iter().zip(&outcome.changes) {
            let _ = writeln!(err, "  {said}");
            let name = match change {
                ToolChange::Added(n) | ToolChange::Changed(n) | ToolChange::Removed(n) => n,
            };
            for text in outcome.text.iter().filter(|t| t.tool == *name) {
                for line in &text.lines {
                    // Marked already; escaped once more, as everything a server says is.
                    let _ = writeln!(err, "      {}", escape_controls(line));
                }
            }
        }
        consent.ask(&mut err, "approve these tools?")
    };
    if !approved {
        staged.discard(home);
        return Err(refused(&consent, "the changes"));
    }
    yep_host::runtime::mcp::record(home, &source, &staged, &tools).map_err(|e| match e {
        yep_store::StoreError::McpToolList { .. } => hinted(e.to_string(), &[&over_cap_hint()]),
        other => other.into(),
    })?;
    outcome.approved = true;
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&outcome)?);
    } else {
        stdout_line(&format!(
            "approved MCP server {}: {} pinned",
            escape(&source.name),
            tools_count(tools.len())
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// `yep mcp serve` on stdio, attached to the home's shared host (started if none runs):
/// fails before reading stdin when it cannot attach.
async fn attach(home: &Home, deferred: bool) -> Result<(), yep_serve::shared::AttachError> {
    let workspace =
        workspace().map_err(|e| yep_serve::shared::AttachError::Start(e.to_string()))?;
    // One host per workspace root, however the session's path to it is spelled.
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let yep = std::env::current_exe()?;
    let root = home.root.clone();
    // The shared host is meant to outlive this session: it is started detached, in a
    // session of its own, and is reaped by init when this client is gone.
    #[allow(clippy::disallowed_methods)]
    let start = move || {
        let mut cmd = std::process::Command::new(&yep);
        cmd.arg("--home").arg(&root).args(["host", "serve"]);
        cmd
    };
    yep_serve::shared::attach_stdio(home, workspace, deferred, &start).await
}

/// Who `yep mcp serve --http` lets in, as asked on the command line.
struct Access {
    /// `--allow-remote`: any address, any `Host`, still behind the token.
    allow_remote: bool,
    /// `--insecure-no-token-for-testing`: loopback only, no token.
    no_token: bool,
}

/// `yep mcp serve`: the host of the enabled packages as one MCP server, on stdio until the
/// client goes, or over HTTP until interrupted.
async fn serve(
    home: &Home,
    deferred: bool,
    http: Option<std::net::SocketAddr>,
    access: Access,
    limits: yep_serve::bridge::HttpLimits,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use std::sync::Arc;
    if let Some(addr) = http.filter(|a| !a.ip().is_loopback()) {
        if access.no_token {
            return Err(hinted(
                format!("refusing to serve on {addr} without a token: not a loopback address"),
                &["--insecure-no-token-for-testing is for test suites on this machine only"],
            ));
        }
        if !access.allow_remote {
            return Err(hinted(
                format!("refusing to serve on {addr}: not a loopback address"),
                &[
                    "any host that reaches it could run your extensions' tools; pass --allow-remote if that is what you want",
                ],
            ));
        }
    }
    let listener = match http {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("failed to listen on {addr}"))?,
        ),
        None => None,
    };
    use yep_serve::bridge::{AskClients, Bridge, Clients, StatusToClients};
    let clients = Clients::default();
    let opts = yep_host::HostOptions {
        // Listed under `--deferred`: no extension tool may take its name then.
        builtins: match deferred {
            true => vec![yep_host::runtime::SEARCH_TOOLS.to_string()],
            false => Vec::new(),
        },
        ask_sink: Some(Arc::new(AskClients(clients.clone()))),
        status_sink: Some(Arc::new(StatusToClients(clients.clone()))),
        supervisor: yep_host::SupervisorOptions::for_home(home),
        ..yep_host::HostOptions::default()
    };
    let session = yep_host::Session {
        id: format!("yep-mcp-serve-{}", std::process::id()),
        workspace_root: workspace()?,
    };
    let host = yep_host::ExtensionHost::start(home.clone(), session, opts).await?;
    let bridge = Bridge::new(host.clone(), clients, deferred).await;
    let changes = yep_serve::bridge::forward_changes(&bridge);
    let watch = yep_serve::bridge::watch_home(&host, home.clone());
    let outcome = match listener {
        None => yep_serve::bridge::serve_stdio(bridge)
            .await
            .map_err(|e| e.to_string()),
        Some(listener) => {
            let addr = listener.local_addr()?;
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "serving MCP at http://{addr}/mcp (Ctrl-C stops it)");
            let served = if access.no_token {
                let _ = writeln!(
                    err,
                    "WARNING: no bearer token (--insecure-no-token-for-testing): any process on this machine can run your extensions' tools"
                );
                yep_serve::bridge::Access::NoTokenLoopbackTestingOnly
            } else {
                let (token, made) = yep_serve::bridge::bearer_token(home)
                    .context("failed to make the bearer token")?;
                let path = yep_serve::bridge::token_path(home);
                let _ = match made {
                    true => writeln!(
                        err,
                        "bearer token, shown this once (kept in {}, owner-only): {token}",
                        path.display()
                    ),
                    false => writeln!(err, "bearer token: in {}", path.display()),
                };
                yep_serve::bridge::Access::Token(token)
            };
            drop(err);
            let stop = tokio_util::sync::CancellationToken::new();
            let interrupted = stop.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                interrupted.cancel();
            });
            yep_serve::bridge::serve_http_with(
                bridge,
                listener,
                served,
                access.allow_remote,
                limits,
                stop,
            )
            .await
            .map_err(|e| e.to_string())
        }
    };
    watch.abort();
    changes.abort();
    host.shutdown().await;
    outcome.map_err(|e| anyhow::anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

/// The config snippet that runs `yep mcp serve` from `agent`, with this home, and where it
/// goes (for stderr: the snippet alone is what stdout holds, ready to parse or paste).
fn config_snippet(agent: Agent, home: &Home) -> anyhow::Result<(String, String)> {
    let yep = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(String::from))
        .unwrap_or_else(|| "yep".into());
    let home_dir = home.root.display().to_string();
    let args = ["--home", home_dir.as_str(), "mcp", "serve"];
    let entry = serde_json::json!({"command": yep, "args": args});
    let doc = serde_json::json!({"mcpServers": {"yep": entry}});
    Ok(match agent {
        Agent::Claude => (
            serde_json::to_string_pretty(&doc)?,
            format!(
                "merge this into a project's `.mcp.json` (or `~/.claude.json`), or add the entry alone: claude mcp add-json yep '{}'",
                serde_json::to_string(&entry)?.replace('\'', "'\\''")
            ),
        ),
        Agent::Cursor => (
            serde_json::to_string_pretty(&doc)?,
            "merge this into `~/.cursor/mcp.json` (or `.cursor/mcp.json` in a project)".into(),
        ),
        Agent::Gemini => (
            serde_json::to_string_pretty(&doc)?,
            "merge this into `~/.gemini/settings.json`".into(),
        ),
        Agent::Codex => {
            let quoted: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            (
                format!(
                    "[mcp_servers.yep]\ncommand = {}\nargs = [{}]",
                    toml_string(&yep),
                    quoted.join(", ")
                ),
                "add this to `~/.codex/config.toml`".into(),
            )
        }
        Agent::Goose => {
            let quoted: Vec<String> = args
                .iter()
                .map(|a| format!("      - {}", toml_string(a)))
                .collect();
            (
                format!(
                    "extensions:\n  yep:\n    type: stdio\n    name: yep\n    enabled: true\n    cmd: {}\n    args:\n{}",
                    toml_string(&yep),
                    quoted.join("\n")
                ),
                "merge this into `~/.config/goose/config.yaml`".into(),
            )
        }
    })
}

/// `text` as a double-quoted string, escaped as TOML and YAML both read it.
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}
