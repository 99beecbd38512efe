//! `yep-conformance-client <url>`: the MCP conformance suite's client entry point (`conformance
//! client --command 'yep-conformance-client'`, which appends the test server's URL). It does
//! what an agent on `yep-host` does with a remote MCP server, through the real dialect: adds
//! it to a scratch home and approves it (the first connection lists its tools), starts a host,
//! calls each tool with arguments built from its schema, and answers the server's questions
//! as a user who takes every default shown (an empty answer).
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
        .nth(1)
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
        url: Some(url),
        headers: Default::default(),
    };
    yep_host::store::mcp::add(&home, "server", &server)?;
    let source = sources(&home, &[], &workspace, &mut |w| eprintln!("warning: {w}"))
        .into_iter()
        .find(|s| s.name == "server")
        .ok_or_else(|| anyhow::anyhow!("the server just added is not among the sources"))?;
    let pinned = approve(&home, &source, &workspace, &SupervisorOptions::default()).await?;
    println!("{}", json!({"approved": pinned.len()}));

    let session = Session {
        id: "yep-conformance-client".into(),
        workspace_root: workspace,
    };
    let opts = HostOptions {
        ask_sink: Some(Arc::new(TakesDefaults)),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home, session, opts).await?;
    for tool in host.tools() {
        let args = yep_host::tool_args::probe_args(&tool.schema).unwrap_or_else(|_| json!({}));
        let result = host.call_tool(&tool.name, args.clone(), None, None).await;
        let outcome = match result {
            Ok(result) => json!({"tool": tool.name, "args": args, "result": result.into_value()}),
            Err(e) => json!({"tool": tool.name, "args": args, "error": e.to_string()}),
        };
        println!("{outcome}");
    }
    host.shutdown().await;
    Ok(())
}
