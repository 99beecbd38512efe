//! An agent loop embedding `yep-host`: assemble the prompt, list the tools, fire pre-hooks,
//! call, fire post-hooks; then answer a question, show status, change config and the workspace,
//! and watch the table change. The "model" here is a fixed script, so the example runs anywhere
//! (CI runs it); swap in real LLM calls where it says so. `docs/embedding.md` walks through it.
//!
//! `cargo run -p yep-example-embed`. The example installs the echo extension into a scratch
//! home first; with `serve-echo` the binary is that extension's server.
#![allow(clippy::print_stdout)] // an example program talking to its user

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use yep_host::capability::{Answer, BoxFuture, Question, Status, TraceEvent};
use yep_host::dialect::yep::Yep;
use yep_host::runtime::{AskSink, StatusSink};
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{ExtensionHost, HostOptions, PreDecision, Session, SupervisorOptions, UpdateSink};

/// The agent's status bar: told of every change (`None`: cleared).
struct StatusBar;

impl StatusSink for StatusBar {
    fn status_changed(&self, extension: &str, status: Option<&Status>) {
        match status {
            Some(s) => println!("[status] {extension}: {} ({:?})", s.text, s.level),
            None => println!("[status] {extension}: cleared"),
        }
    }
}

/// The agent's question UI. A real one shows `prompt`, masks the input when `secret`, offers
/// `options` as a selector, and answers `Answer::cancelled()` when the user dismisses it.
struct Questions;

impl AskSink for Questions {
    fn ask(&self, extension: &str, question: Question) -> BoxFuture<Answer> {
        println!("[ask] {extension} asks: {}", question.prompt);
        Box::pin(async { Answer::answered("blue") })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve-echo") {
        return Ok(yep_example_echo::server().serve()?);
    }
    let scratch = tempfile::tempdir()?;
    let home = Home {
        root: scratch.path().join("home"),
    };
    install_echo(&home, scratch.path())?;

    // 1. One host per agent session. The agent's own tool names go in `builtins`, so an
    //    extension tool can never shadow them. The sinks are optional: without `ask_sink` every
    //    question is answered cancelled.
    let session = Session {
        id: "embed-demo".into(),
        workspace_root: std::env::current_dir()?,
    };
    let opts = HostOptions {
        builtins: vec!["read_file".into(), "bash".into()],
        status_sink: Some(Arc::new(StatusBar)),
        ask_sink: Some(Arc::new(Questions)),
        // The default, spelled out: servers speak YEP and are spawned as child processes. A
        // server on another wire takes its own `Dialect` here, and one that is not a child
        // process a `Transport` (see crates/yep-host/tests/dialect.rs).
        supervisor: SupervisorOptions {
            dialect: Arc::new(Yep),
            transport: None,
            ..SupervisorOptions::default()
        },
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home, session, opts).await?;

    // 2. Each turn: the extensions' prompt text is its own trailing segment.
    let system_prompt = "You are a coding agent.";
    let segment = host.prompt(1).await;
    println!("system prompt: {system_prompt:?} + extension segment:\n{segment}\n");

    // 3. The tools the model sees: always-loaded ones in full, the rest via search_tools.
    for t in host.tools() {
        println!(
            "tool {:<8} from {:<5} {}",
            t.name,
            t.extension,
            if t.never_defer {
                "always loaded"
            } else {
                "deferred"
            }
        );
    }
    println!(
        "search_tools(\"count\") -> {:?}\n",
        host.search_tools("count")
            .iter()
            .map(|t| &t.name)
            .collect::<Vec<_>>()
    );

    // 4. The model asks for tool calls (here: a script). Each goes through the hooks.
    let planned: [(&str, Value); 3] = [
        ("echo", json!({ "text": "hello from the agent" })),
        ("count", json!({ "n": 3, "interval_ms": 20 })),
        ("echo", json!({ "text": "rm -rf /", "forbidden": true })),
    ];
    for (tool, args) in planned {
        let args = match host.pre_tool_use(tool, args).await {
            PreDecision::Allow { args, .. } => args,
            PreDecision::Block {
                extension, reason, ..
            } => {
                println!("{tool}: blocked by {extension}: {reason}");
                continue;
            }
        };
        let updates: UpdateSink = Arc::new(move |p: &yep_host::capability::Progress| {
            println!("  {tool} progress: {}", p.message)
        });
        let result = host
            .call_tool(tool, args.clone(), Some(updates), None)
            .await;
        let shown = match &result {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        };
        println!("{tool}: {shown}");
        // Observers only: this returns at once.
        match &result {
            Ok(value) => host.post_tool_use(tool, &args, Ok(value)),
            Err(e) => host.post_tool_use(tool, &args, Err(&e.to_string())),
        }
    }

    // 5. A tool that asks the user: the question goes to the `AskSink`.
    let answer = host
        .call_tool("ask", json!({ "prompt": "Favourite colour?" }), None, None)
        .await?;
    println!("ask: {answer}");

    // 6. Slash commands, namespaced by extension.
    for c in host.commands() {
        let out = host.execute_command(&c.name, "").await?;
        println!("/{} -> {} (success: {})", c.name, out.message, out.success);
    }

    // 7. Config: validated, persisted, pushed. Echo cannot apply config live, so its server is
    //    restarted with the new value.
    let before = host.pid("echo");
    let outcome = host.set_config("echo", "greeting", json!("hello")).await?;
    let restarted = before != host.pid("echo");
    println!("set_config -> {outcome:?} (new process: {restarted})");

    // 8. Lifecycle events for `trace` extensions (echo declares none, so nothing is queued).
    //    `emit` never blocks; `flush` at session end, before `shutdown`.
    host.emit(TraceEvent {
        event_type: "tool.completed".into(),
        id: "ev-1".into(),
        context: json!({ "turn_id": "t1" }),
        data: json!({ "tool": "echo" }),
        ..TraceEvent::default()
    });
    host.flush(Duration::from_secs(5)).await;

    // 9. The workspace moved: running servers are told, later starts run there.
    host.set_workspace(std::env::temp_dir()).await?;

    // 10. Watch the table: every activate, deactivate or refresh publishes a new snapshot.
    let mut tables = host.subscribe();
    host.deactivate("echo").await?;
    tables.changed().await?;
    println!(
        "after deactivate: extensions {:?}, {} tools",
        tables.borrow().extensions(),
        host.snapshot().tools().len()
    );

    host.shutdown().await;
    Ok(())
}

/// Put the echo extension into `home`, served by this binary.
fn install_echo(home: &Home, scratch: &std::path::Path) -> anyhow::Result<()> {
    let pkg = scratch.join("echo-package");
    std::fs::create_dir_all(&pkg)?;
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON)?;
    let exe = std::env::current_exe()?;
    manifest["yolop"]["capabilityServer"] = json!({ "command": exe, "args": ["serve-echo"] });
    manifest["yolop"]["config_schema"] = json!({
        "type": "object",
        "properties": { "greeting": { "type": "string", "description": "how to greet" } }
    });
    std::fs::write(pkg.join("plugin.json"), manifest.to_string())?;
    home.install(
        &pkg.display().to_string(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )?;
    home.set_enabled("echo", true)?;
    Ok(())
}
