//! `yep-conformance-client <url>`: the MCP conformance suite's client entry point (`conformance
//! client --command 'yep-conformance-client'`, which appends the test server's URL). It does
//! what an agent on `yep-host` does with a remote MCP server, through the real dialect: adds
//! it to a scratch home and approves it (the first connection lists its tools), starts a host,
//! calls each tool with arguments built from its schema, and answers the server's questions
//! as a user who takes every default shown (an empty answer).
//!
//! A server that wants a login is logged into as `yep mcp login` does (`yep_serve::oauth`),
//! with a "browser" that follows the authorization page's redirects to the loopback
//! callback; a call refused for want of scope logs in again with the server's challenge and
//! is tried once more (three logins at most).
#![allow(clippy::print_stdout)] // a test client reporting what it did

use serde_json::json;
use std::sync::Arc;
use yep_host::SupervisorOptions;
use yep_host::prelude::*;
use yep_host::runtime::mcp::{approve, sources};
use yep_host::store::manifest::McpServer;

/// A user who answers every question with nothing typed: a form field's default, when it
/// has one.
struct TakesDefaults;

impl AskSink for TakesDefaults {
    async fn ask(&self, _extension: &str, _question: Question) -> Answer {
        Answer::answered("")
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .filter(|u| u.starts_with("http"))
        .ok_or_else(|| anyhow::anyhow!("usage: yep-conformance-client <url>"))?;
    let scratch = tempfile::tempdir()?;
    let home = Home {
        root: scratch.path().join("home"),
    };
    let workspace = scratch.path().to_path_buf();
    let server = McpServer {
        transport: "http".into(),
        command: None,
        args: Vec::new(),
        env: Default::default(),
        url: Some(url.clone()),
        headers: Default::default(),
    };
    yep_host::store::mcp::add(&home, "server", &server)?;
    let source = sources(&home, &[], &workspace, &mut |w| eprintln!("warning: {w}"))
        .into_iter()
        .find(|s| s.name == "server")
        .ok_or_else(|| anyhow::anyhow!("the server just added is not among the sources"))?;
    let mut logins = 0;
    let pinned = match approve(&home, &source, &workspace, &SupervisorOptions::default()).await {
        Ok(pinned) => pinned,
        Err(first) => {
            // It may want a login: its challenge says, and where to look.
            let Some(challenge) = yep_serve::oauth::challenge(&url).await else {
                return Err(first.into());
            };
            log_in(&home, &url, Some(challenge), &mut logins).await?;
            approve(&home, &source, &workspace, &SupervisorOptions::default()).await?
        }
    };
    println!("{}", json!({"approved": pinned.len()}));

    let session = Session {
        id: "yep-conformance-client".into(),
        workspace_root: workspace,
    };
    let opts = HostOptions {
        ask_sink: Some(Arc::new(TakesDefaults)),
        ..HostOptions::default()
    };
    let host_home = home.clone();
    let host = ExtensionHost::start(home, session, opts).await?;
    let tools = host.tools();
    for tool in &tools {
        let mut args = yep_host::tool_args::probe_args(&tool.schema).unwrap_or_else(|_| json!({}));
        // The schema-preservation scenario asks for its other tool's inputSchema, as the
        // host's table holds it, to be echoed back: what a model would be shown.
        if tool.name.ends_with("__json_schema_echo")
            && let Some(focal) = tools
                .iter()
                .find(|t| t.name.ends_with("__json_schema_2020_12_tool"))
        {
            args = json!({"schema": focal.schema});
        }
        let mut result = host.call_tool(&tool.name, args.clone(), None, None).await;
        // Refused for want of access: log in again with the server's challenge, try again.
        while let Some(challenge) = wants_login(&result)
            && logins < MAX_LOGINS
        {
            log_in(&host_home, &url, Some(challenge), &mut logins).await?;
            result = host.call_tool(&tool.name, args.clone(), None, None).await;
        }
        let outcome = match result {
            Ok(result) => json!({"tool": tool.name, "args": args, "result": result.into_value()}),
            Err(e) => json!({"tool": tool.name, "args": args, "error": e.to_string()}),
        };
        println!("{outcome}");
    }
    host.shutdown().await;
    Ok(())
}

/// The most logins one run makes (the first, and step-ups).
const MAX_LOGINS: usize = 3;

/// The server's challenge, when `result` is a call refused for want of a login or of scope.
fn wants_login(result: &Result<yep_host::capability::ToolResult, HostError>) -> Option<String> {
    let Err(HostError::Extension(error)) = result else {
        return None;
    };
    error.remote()?.data["www_authenticate"]
        .as_str()
        .map(String::from)
}

/// A page opened by fetching it, following its redirects (to the loopback callback).
struct Fetch;

impl yep_serve::oauth::Browser for Fetch {
    fn open<'a>(
        &'a self,
        url: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .build()
                .map_err(std::io::Error::other)?;
            client
                .get(url)
                .send()
                .await
                .map_err(std::io::Error::other)?;
            Ok(())
        })
    }
}

/// Log in to the server as `yep mcp login` does; a client registered beforehand comes from
/// the suite's `MCP_CONFORMANCE_CONTEXT`.
async fn log_in(
    home: &Home,
    url: &str,
    challenge: Option<String>,
    logins: &mut usize,
) -> anyhow::Result<()> {
    *logins += 1;
    let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let text = |k: &str| context[k].as_str().map(String::from);
    let opts = yep_serve::oauth::LoginOptions {
        challenge,
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: Some("https://conformance-test.local/client-metadata.json".into()),
        wait: std::time::Duration::from_secs(20),
        ..Default::default()
    };
    let granted = yep_serve::oauth::login(home, "server", url, &Fetch, opts).await?;
    println!("{}", json!({"logged_in": granted}));
    Ok(())
}
