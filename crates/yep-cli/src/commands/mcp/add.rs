//! `yep mcp add` and `yep mcp remove`: an MCP server the user adds to the home (a command or a
//! URL, its secrets and grants with it), its tools pinned as it is added; or removed again.

use super::pin::{as_written_line, install_lines, over_cap_hint, pin_now, tools_count};
use super::{here, workspace};
use crate::output::{hinted, stdout_line};
use std::collections::BTreeMap;
use std::io::Write;
use yep_host::runtime::mcp::{McpSource, Pinned, StageOptions};
use yep_store::Home;
use yep_store::manifest::McpServer;
use yep_store::mcp::Origin;
use yep_store::text::{escape, escape_controls};

#[derive(clap::Args)]
pub struct AddArgs {
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
    /// Let it reach more than the sandbox's default profile (repeatable): `workspace:write`,
    /// `read:<path>`, `write:<path>`, `net:<* | address:port | host name | private>`,
    /// `processes:<n>`… (as `yep grant` takes them).
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
}

/// `yep mcp add`: the server kept in the home, granted what it was given, and its tools as
/// they are now pinned (adding it is approving it), or left for a login.
pub(super) async fn add(args: AddArgs, home: &Home) -> anyhow::Result<()> {
    let granted = crate::commands::grant::parse_all(&args.grants)?;
    // Checked before anything is kept: a grant that cannot be given adds nothing.
    let _ = crate::commands::grant::missing_paths(home, &granted)?;
    let server = server(&args)?;
    let name = &args.name;
    yep_store::mcp::add(home, name, &server)?;
    // Typed with the command that adds it: granted as it is added, before its first
    // run (which lists its tools) so that run has them too.
    let subject = yep_store::approval::Subject::mcp_server(home, name, Origin::Home)?;
    crate::commands::grant::grant_typed(home, &subject, &granted)?;
    if args.oauth {
        return added_for_login(home, name, args.json);
    }
    // Adding it is approving it: its tools as they are now are pinned.
    let source = here(home)?
        .into_iter()
        .find(|s| s.name == *name && s.origin == Origin::Home);
    let approved = approve(home, name, source.as_ref(), args.as_written).await?;
    let wants_login = approved.as_ref().is_err_and(|no| no.wants_login);
    if wants_login {
        yep_store::mcp::set_oauth(home, name, true)?;
        let _ = writeln!(
            std::io::stderr(),
            "MCP server {} wants a login: `yep mcp login {}` logs in and pins its tools",
            escape(name),
            escape(name)
        );
    } else if let Err(no) = &approved {
        not_started(home, name, args.keep, &no.why)?;
    }
    report_added(home, &args, &approved, wants_login, source.as_ref());
    Ok(())
}

/// The server `args` define: a command after `--`, or a URL with its headers.
fn server(args: &AddArgs) -> anyhow::Result<McpServer> {
    let parsed = headers(&args.headers)?;
    let vars = env_vars(&args.env)?;
    Ok(match (args.url.clone(), args.command.split_first()) {
        (Some(_), Some(_)) => anyhow::bail!("give a --url or a command after --, not both"),
        (None, None) => anyhow::bail!(
            "give a command after -- (`yep mcp add {} -- <command> [args…]`) or a --url",
            args.name
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
    })
}

/// The `--header K=V`s, by name.
fn headers(headers: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut parsed = BTreeMap::new();
    for h in headers {
        let (k, v) = h
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| anyhow::anyhow!("--header {h:?} is not K=V"))?;
        parsed.insert(k.trim().to_string(), v.to_string());
    }
    Ok(parsed)
}

/// The `--env K=V`s, by name.
fn env_vars(env: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut vars = BTreeMap::new();
    for e in env {
        let (k, v) = e
            .split_once('=')
            .filter(|(k, _)| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
            .ok_or_else(|| anyhow::anyhow!("--env {e:?} is not K=V"))?;
        vars.insert(k.to_string(), v.to_string());
    }
    Ok(vars)
}

/// `--oauth`: added, its tools pinned once logged in.
fn added_for_login(home: &Home, name: &str, json: bool) -> anyhow::Result<()> {
    yep_store::mcp::set_oauth(home, name, true)?;
    let next = format!("next: yep mcp login {}", escape(name));
    if json {
        stdout_line(
            &serde_json::json!({ "added": name, "pinned": [], "login": "needs login" }).to_string(),
        );
    } else {
        stdout_line(&format!(
            "added MCP server {} (needs login; its tools are pinned once logged in)",
            escape(name)
        ));
        crate::output::stderr_line(&next);
    }
    Ok(())
}

/// The added server started once and its tools pinned, or why not. A list past the caps
/// can never be approved: the server is not kept, and that is the error.
async fn approve(
    home: &Home,
    name: &str,
    source: Option<&McpSource>,
    as_written: bool,
) -> anyhow::Result<Result<Pinned, NotApproved>> {
    let opts = StageOptions {
        as_written: Some(as_written),
        reinstall: false,
        progress: crate::progress::bars(),
    };
    Ok(match source {
        None => Err(NotApproved {
            why: "it is not among the servers a session here sees".to_string(),
            wants_login: false,
        }),
        Some(source) => match pin_now(home, source, &workspace()?, &opts).await {
            Ok(approval) => Ok(approval),
            // A list past the caps can never be approved: the server is not kept.
            Err(why) if why.over_cap().is_some() => {
                yep_store::mcp::remove(home, name)?;
                return Err(hinted(
                    format!("not added: {}", escape_controls(&why.to_string())),
                    &[&over_cap_hint()],
                ));
            }
            Err(why) => Err(NotApproved {
                why: why.to_string(),
                wants_login: why.wants_login(),
            }),
        },
    })
}

/// Why an added server's tools were not approved: the reason, and whether a login is the way
/// on.
struct NotApproved {
    why: String,
    wants_login: bool,
}

/// A server that could not start and list its tools: removed again (the error), or, with
/// `--keep`, kept unapproved with a warning.
fn not_started(home: &Home, name: &str, keep: bool, why: &str) -> anyhow::Result<()> {
    // The reason names the log when a process ran; the command reads it whatever it was.
    let log_hint = format!("`yep logs {}` shows its log", escape(name));
    if !keep {
        // A server that cannot start is not kept as if it were added.
        yep_store::mcp::remove(home, name)?;
        return Err(hinted(
            format!(
                "not added: MCP server {} could not start and list its tools: {}",
                escape(name),
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
        escape(name),
        escape_controls(why),
        escape(name)
    );
    Ok(())
}

/// What was added: its pinned tools and the install made for its launcher.
fn report_added(
    home: &Home,
    args: &AddArgs,
    approved: &Result<Pinned, NotApproved>,
    wants_login: bool,
    source: Option<&McpSource>,
) {
    let name = &args.name;
    let tools: Vec<String> = approved
        .as_ref()
        .map(|a| a.tools.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    let install = approved.as_ref().ok().and_then(|a| a.install.as_ref());
    let launched = source.and_then(McpSource::launched);
    if args.json {
        stdout_line(
            &serde_json::json!({
                "added": name,
                "pinned": tools,
                "install": install,
                "as_written": args.as_written && launched.is_some(),
            })
            .to_string(),
        );
        return;
    }
    let pinned = match approved {
        Ok(_) => format!("{} pinned", tools_count(tools.len())),
        Err(_) if wants_login => "needs login".into(),
        Err(_) => "not approved yet".into(),
    };
    stdout_line(&format!("added MCP server {} ({pinned})", escape(name)));
    if let Some(install) = install {
        for line in install_lines(install, home) {
            stdout_line(&format!("  {line}"));
        }
    }
    if let (true, Some(launched)) = (args.as_written, &launched) {
        stdout_line(&format!("  {}", as_written_line(launched)));
    }
}

/// `yep mcp remove <name>`: a server added with `yep mcp add`, and its header secrets.
pub(super) fn remove(home: &Home, name: &str, json: bool) -> anyhow::Result<()> {
    if !yep_store::mcp::remove(home, name)? {
        anyhow::bail!(
            "no MCP server named `{}` was added to this home",
            escape(name)
        );
    }
    if json {
        stdout_line(&serde_json::json!({ "removed": name }).to_string());
    } else {
        stdout_line(&format!("removed MCP server {}", escape(name)));
    }
    Ok(())
}
