//! `yep mcp serve`: the enabled extensions and approved MCP servers served as one MCP server,
//! on stdio (attached to the home's shared host, or a host of its own) or over HTTP.

use super::workspace;
use crate::output::hinted;
use std::io::Write;
use std::process::ExitCode;
use yep_store::Home;
use yep_store::text::escape;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// List only the always-loaded tools and `search_tools` (for clients without a tool
    /// search of their own).
    #[arg(long)]
    deferred: bool,
    /// Serve streamable HTTP at this loopback address (`127.0.0.1:PORT`, at `/mcp`)
    /// instead of stdio; clients send the bearer token kept in the home.
    #[arg(long, value_name = "ADDR")]
    pub(super) http: Option<std::net::SocketAddr>,
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
    pub(super) no_shared: bool,
    /// Refuse tool calls whose arguments or results carry what looks like a credential (an
    /// AWS key id, a GitHub, Slack, Google, OpenAI or Anthropic token, a PEM private key).
    /// The shared host refuses them when settings.toml says `[audit] block_secrets = true`;
    /// this flag serves the session with a host of its own that does.
    #[arg(long)]
    pub(super) block_secrets: bool,
}

/// `yep mcp serve`: attached to the shared host when it can be (stdio, not `--no-shared`),
/// else with a host of its own.
pub(super) async fn run(args: ServeArgs, home: &Home) -> anyhow::Result<ExitCode> {
    if !args.no_shared && !args.block_secrets && args.http.is_none() {
        match attach(home, args.deferred).await {
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
    if let Some(n) = args.max_connections {
        limits.max_connections = n as usize;
    }
    if let Some(n) = args.max_sessions {
        limits.max_sessions = n as usize;
    }
    if let Some(t) = args.header_timeout {
        limits.header_timeout = t;
    }
    let access = Access {
        allow_remote: args.allow_remote,
        no_token: args.insecure_no_token_for_testing,
        block_secrets: args.block_secrets,
    };
    serve(home, args.deferred, args.http, access, limits).await
}

/// `yep mcp serve` on stdio, attached to the home's shared host (started if none runs):
/// fails before reading stdin when it cannot attach.
async fn attach(home: &Home, deferred: bool) -> Result<(), yep_serve::shared::AttachError> {
    let workspace =
        workspace().map_err(|e| yep_serve::shared::AttachError::Start(e.to_string()))?;
    // One host per workspace root, however the session's path to it is spelled.
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let start = crate::commands::host::starter(home)?;
    yep_serve::shared::attach_stdio(home, workspace, deferred, &start).await
}

/// Who `yep mcp serve --http` lets in, as asked on the command line.
struct Access {
    /// `--allow-remote`: any address, any `Host`, still behind the token.
    allow_remote: bool,
    /// `--insecure-no-token-for-testing`: loopback only, no token.
    no_token: bool,
    /// `--block-secrets`: credentials in arguments or results are refused.
    block_secrets: bool,
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
        block_secrets: access.block_secrets,
        mcp_list_deadline: yep_host::runtime::mcp_list_deadline_setting(home)?,
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
