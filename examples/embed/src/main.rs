//! A small agent on `yep-host`, written from `docs/embedding.md`: the extensions' prompt
//! segment, their tools in OpenAI's format, each model tool call through the hooks, progress
//! from a stream, a cancel and a timeout told apart, a question answered through a sink, a
//! command, status, health, and a shutdown that is final. The "model" is a fixed script, so the
//! example runs anywhere (CI runs it); swap in real LLM calls where it says so.
//!
//! `cargo run -p yep-example-embed`. The example installs the echo extension into a scratch
//! home first; with `serve-echo` the binary is that extension's server.
#![allow(clippy::print_stdout)] // an example program talking to its user

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use yep_host::prelude::*;
use yep_host::store::{AlwaysYes, InstallOptions};
use yep_host::text::{escape, escape_multiline};

/// One question for the UI task, and where its answer goes.
type Asked = (String, Question, oneshot::Sender<Answer>);

/// Extensions' questions go to the agent's UI task over a channel; its answer comes back.
struct Questions(mpsc::Sender<Asked>);

impl AskSink for Questions {
    async fn ask(&self, extension: &str, question: Question) -> Answer {
        let (reply, answer) = oneshot::channel();
        if self
            .0
            .send((extension.to_string(), question, reply))
            .await
            .is_err()
        {
            return Answer::cancelled(); // the UI is gone
        }
        answer.await.unwrap_or_else(|_| Answer::cancelled())
    }
}

/// The agent's question UI. A real one shows `prompt` (and `placeholder`), masks the input
/// when `secret`, offers `options` as a selector, and answers `Answer::cancelled()` when the
/// user dismisses it. This one always says "blue".
async fn question_ui(mut questions: mpsc::Receiver<Asked>) {
    while let Some((extension, question, reply)) = questions.recv().await {
        println!("[ask] {extension} asks: {}", escape(&question.prompt));
        let _ = reply.send(Answer::answered("blue"));
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
    let host = start(home).await?;
    prompt_and_tools(&host).await?;
    model_tool_calls(&host).await?;
    progress(&host).await?;
    cancel_and_timeout(&host).await?;
    commands_and_status(&host).await?;
    config_and_shutdown(host).await
}

/// The host for this session, its health printed as it happens.
async fn start(home: Home) -> anyhow::Result<ExtensionHost> {
    // 1. One host per agent session. The agent's own tool names go in `builtins`, so no
    //    extension tool can shadow them. The status sink is any `Fn(&str, Option<&Status>)`.
    let (asked, questions) = mpsc::channel(8);
    tokio::spawn(question_ui(questions));
    let session = Session {
        id: "embed-demo".into(),
        workspace_root: std::env::current_dir()?,
    };
    let opts = HostOptions {
        builtins: vec!["read_file".into(), SEARCH_TOOLS.into()],
        status_sink: Some(Arc::new(
            |extension: &str, status: Option<&Status>| match status {
                Some(s) => println!("[status] {extension}: {} ({:?})", escape(&s.text), s.level),
                None => println!("[status] {extension}: cleared"),
            },
        )),
        ask_sink: Some(Arc::new(Questions(asked))),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home, session, opts).await?;
    // Health, as it happens: a server that did not start, a hook that could not run, …
    let mut health = host.health();
    tokio::spawn(async move {
        while let Some(event) = health.recv().await {
            // What packages and servers say is escaped before a terminal sees it.
            println!("[health] {}", escape(&event.to_string()));
        }
    });
    Ok(host)
}

/// What the model is given: the extensions' prompt segment and their tools.
async fn prompt_and_tools(host: &ExtensionHost) -> anyhow::Result<()> {
    // 2. Each turn: the extensions' prompt text is its own trailing segment.
    let segment = host.prompt(1).await;
    println!(
        "system prompt: \"You are a coding agent.\" + segment:\n{}\n",
        escape_multiline(&segment)
    );

    // 3. The tools the model sees, in OpenAI's format (`to_anthropic()` for Anthropic's):
    //    the always-loaded ones, and `search_tools` for the deferred rest.
    let mut tools: Vec<Value> = host
        .tools()
        .iter()
        .filter(|t| t.never_defer)
        .map(ToolDefinition::to_openai)
        .collect();
    tools.push(ToolDefinition::search_tools().to_openai());
    println!(
        "tools for the model:\n{}\n",
        serde_json::to_string_pretty(&tools)?
    );
    let found = host.dispatch_search_tools(&json!({ "query": "count" }));
    println!("search_tools(\"count\") -> {found}\n");
    Ok(())
}

/// The model's tool calls, each through the hooks, and how each ended.
async fn model_tool_calls(host: &ExtensionHost) -> anyhow::Result<()> {
    // 4. The model's tool calls (here: a script). `run_tool` runs the pre hooks, the call and
    //    the post hooks, and says how it ended.
    let planned = [
        ("echo", json!({ "text": "hello from the agent" })),
        ("echo", json!({ "text": "rm -rf /", "forbidden": true })),
        ("ask", json!({ "prompt": "Favourite colour?" })),
        ("echo", json!({})),
    ];
    let mut outcomes = Vec::new();
    for (tool, args) in planned {
        let outcome = host.run_tool(tool, args).await;
        // What the model gets back is `outcome.for_model()`; a person sees this.
        match &outcome {
            CallOutcome::Ok(value) => println!("{tool}: {value}"),
            CallOutcome::Blocked {
                extension, reason, ..
            } => println!("{tool}: blocked by {extension}: {}", escape(reason)),
            CallOutcome::ToolError { message, .. } => {
                println!("{tool}: tool error: {}", escape(message))
            }
            other => println!("{tool}: {other}"),
        }
        outcomes.push(outcome);
    }
    // CI runs this example: it checks what it shows.
    anyhow::ensure!(
        matches!(&outcomes[1], CallOutcome::Blocked { reason, .. } if reason.contains("forbidden")),
        "the forbidden call was not blocked: {}",
        outcomes[1]
    );
    anyhow::ensure!(
        outcomes[2]
            .ok()
            .is_some_and(|r| *r == json!({ "answer": "blue" })),
        "the question was not answered through the sink: {}",
        outcomes[2]
    );
    anyhow::ensure!(
        matches!(&outcomes[3], CallOutcome::ToolError { .. }),
        "{}",
        outcomes[3]
    );
    Ok(())
}

/// A call's progress, from a stream.
async fn progress(host: &ExtensionHost) -> anyhow::Result<()> {
    // 5. Progress from a stream, received on this task (not the connection's reader).
    let (call, mut progress) = host
        .run_tool("count", json!({ "n": 3, "interval_ms": 20 }))
        .progress_stream();
    let running = tokio::spawn(call.into_future());
    let mut updates = 0;
    while let Some(p) = progress.recv().await {
        updates += 1;
        println!("  count progress: {}", escape(&p.message));
    }
    let counted = running.await?;
    println!("count: {counted}");
    anyhow::ensure!(
        updates == 3 && counted.ok().is_some(),
        "{updates} updates: {counted}"
    );
    Ok(())
}

/// A cancelled call and a timed-out one.
async fn cancel_and_timeout(host: &ExtensionHost) -> anyhow::Result<()> {
    // 6. A cancel and a timeout, told apart. The server is told to stop either way.
    let slow = json!({ "n": 1000, "interval_ms": 50 });
    let token = CancellationToken::new();
    let cancelled = tokio::spawn(
        host.run_tool("count", slow.clone())
            .cancel_on(token.clone())
            .into_future(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel(); // the user pressed Esc
    let cancelled = cancelled.await?;
    println!("cancelled call: {cancelled}");
    let timed = host
        .run_tool("count", slow)
        .timeout(Duration::from_millis(150))
        .await;
    println!("timed call: {timed}");
    anyhow::ensure!(matches!(cancelled, CallOutcome::Cancelled), "{cancelled}");
    anyhow::ensure!(matches!(timed, CallOutcome::TimedOut { .. }), "{timed}");
    Ok(())
}

/// The extensions' slash commands, and their status.
async fn commands_and_status(host: &ExtensionHost) -> anyhow::Result<()> {
    // 7. Slash commands, namespaced by extension.
    for c in host.commands() {
        let out = host.execute_command(&c.name, "").await?;
        let (name, said) = (escape(&c.name), escape(&out.message));
        println!("/{name} -> {said} (success: {})", out.success);
        anyhow::ensure!(out.success, "/{name} failed: {said}");
    }

    // 8. Status: the sink heard every change; `status()` is the latest per extension.
    for (extension, s) in host.status() {
        println!("status now: {extension}: {}", escape(&s.text));
    }
    Ok(())
}

/// A config change, then the final shutdown.
async fn config_and_shutdown(host: ExtensionHost) -> anyhow::Result<()> {
    // 9. Config: validated, persisted, pushed. Echo cannot apply config live, so its server is
    //    restarted with the new value (the health stream says so).
    let outcome = host.set_config("echo", "greeting", json!("hello")).await?;
    println!("set_config -> {outcome:?}");

    // 10. Shutdown is final, for every clone of the handle.
    let other = host.clone();
    host.shutdown().await;
    let late = other.run_tool("echo", json!({ "text": "late" })).await;
    println!("after shutdown: {late}");
    anyhow::ensure!(
        matches!(
            late,
            CallOutcome::Failed {
                error: HostError::ShutDown,
                ..
            }
        ),
        "{late}"
    );
    println!("warnings: {:?}", other.warnings());
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
