//! `yep mcp login | logout`: an MCP server over HTTP logged in to with OAuth (its page opened
//! in the user's browser, its tools pinned once it lets them be listed), or its login forgotten.

use super::pin::{pin_now, tools_count};
use super::{here, workspace};
use crate::output::{hinted, stdout_line};
use std::process::ExitCode;
use yep_host::runtime::mcp::{McpSource, StageOptions};
use yep_store::Home;
use yep_store::mcp::Origin;
use yep_store::text::{escape, escape_controls};

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
pub(super) async fn login(
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

/// `yep mcp logout <name>`: its OAuth tokens forgotten.
pub(super) fn logout(home: &Home, name: &str, json: bool) -> anyhow::Result<()> {
    let source = http_source(home, name)?;
    let forgot = yep_store::mcp::clear_oauth_credentials(home, &source.name)?;
    if json {
        stdout_line(&serde_json::json!({ "logged_out": name, "had_login": forgot }).to_string());
    } else if forgot {
        stdout_line(&format!("logged out of MCP server {}", escape(name)));
    } else {
        stdout_line(&format!(
            "no login was kept for MCP server {}",
            escape(name)
        ));
    }
    Ok(())
}
