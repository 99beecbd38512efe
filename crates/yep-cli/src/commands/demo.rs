//! `yep demo`: the bundled echo extension driven through `yep-host`, step by step: handshake,
//! a call, streamed progress, cancel, a hook block, prompts, a command, a question, a stop.

use crate::output::stdout_line;
use anyhow::Context;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use yep_host::capability::{Answer, HookFiring, HookOutcome, Question, Status};
use yep_host::rpc::BoxFuture;
use yep_host::runtime::launch;
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{Events, Extension, Manifest, SupervisorOptions, UpdateSink};
use yep_store::manifest::HookEvent;

#[derive(clap::Args)]
pub struct Args {
    /// Print the steps as one JSON document instead of prose.
    #[arg(long)]
    json: bool,
}

/// Records what the server pushes; answers its question like a user would.
#[derive(Default)]
struct DemoEvents {
    statuses: Mutex<Vec<String>>,
    questions: Mutex<Vec<String>>,
}

impl Events for DemoEvents {
    fn status(&self, _: &str, status: Option<Status>) {
        let Some(status) = status else { return };
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{} ({:?})", status.text, status.level).to_lowercase());
    }

    fn ask(&self, _: &str, params: Question) -> BoxFuture<Answer> {
        self.questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(params.prompt);
        Box::pin(async { Answer::answered("blue") })
    }
}

/// Collects steps; prints each at once in prose mode.
struct Report {
    json: bool,
    steps: Vec<Value>,
}

impl Report {
    fn step(&mut self, name: &str, took: Duration, text: String, data: Value) {
        if !self.json {
            stdout_line(&format!(
                "{:>2}. {name:<22} {:>8}  {text}",
                self.steps.len() + 1,
                ms(took)
            ));
        }
        self.steps.push(
            json!({"step": name, "ms": took.as_secs_f64() * 1000.0, "summary": text, "data": data}),
        );
    }

    fn detail(&self, text: &str) {
        if !self.json {
            stdout_line(&format!("    {:<22} {:>8}  {text}", "", ""));
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub async fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let dir = tempfile::tempdir().context("failed to create a scratch directory")?;
    let launch = install_echo(dir.path())?;
    let manifest = launch.manifest;
    let events = Arc::new(DemoEvents::default());
    let ext = Extension::new(
        launch.spec,
        launch.supervisor,
        Arc::clone(&events) as Arc<dyn Events>,
    );
    let mut report = Report {
        json: args.json,
        steps: Vec::new(),
    };
    if !args.json {
        stdout_line("yep demo: the bundled echo extension, driven through yep-host");
        stdout_line(&format!(
            "  manifest declares tools {:?}, a pre_tool_use hook, prompt, dynamic prompt, command /echo:ping, status, ui_ask\n",
            tool_names(&manifest)
        ));
    }

    let static_prompt = handshake(&ext, &manifest, &events, &mut report).await?;
    plain_call(&ext, &mut report).await?;
    streamed_call(&ext, &mut report).await?;
    cancelled_call(&ext, &mut report).await?;
    hook(&ext, &manifest, &mut report).await?;
    prompt(&ext, static_prompt, &mut report).await?;
    command(&ext, &mut report).await?;
    question(&ext, &events, &mut report).await?;
    stop(&ext, &mut report).await;

    if args.json {
        stdout_line(&serde_json::to_string_pretty(
            &json!({"steps": report.steps}),
        )?);
    } else {
        stdout_line("\nEvery step ran over YEP 1.0 on the server's stdio pipes.");
        stdout_line(
            "Next: cargo build --release --workspace && PATH=$PWD/target/release:$PATH yep call examples/echo count '{\"n\":3}'",
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// 1. Spawn and handshake; the served tools are clamped to the manifest. Returns the
///    handshake's static prompt.
async fn handshake(
    ext: &Extension,
    manifest: &Manifest,
    events: &DemoEvents,
    report: &mut Report,
) -> anyhow::Result<Option<String>> {
    let t = Instant::now();
    let init = ext.handshake().await?;
    let served: Vec<String> = init
        .tools
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| manifest.tool(n).is_some())
        .collect();
    report.step(
        "spawn + handshake",
        t.elapsed(),
        format!(
            "`{}` speaks {}, serves {} (pid {})",
            init.name,
            init.wire,
            served.join(", "),
            ext.pid().unwrap_or(0)
        ),
        json!({"name": init.name, "wire": init.wire, "tools": served}),
    );
    // The server pushes its status once the handshake completes; give it a moment to land.
    for _ in 0..100 {
        if !events
            .statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for status in events
        .statuses
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        report.detail(&format!("status/changed ← {status}"));
    }

    Ok(init.prompt)
}

/// 2. A plain call.
async fn plain_call(ext: &Extension, report: &mut Report) -> anyhow::Result<()> {
    let t = Instant::now();
    let echoed = ext
        .call_tool("echo", json!({"text": "hello from yep"}), None, None)
        .await?;
    report.step(
        "tool/call echo",
        t.elapsed(),
        echoed.to_string(),
        echoed.into_value(),
    );

    Ok(())
}

/// 3. Streamed progress: every update arrives before the result.
async fn streamed_call(ext: &Extension, report: &mut Report) -> anyhow::Result<()> {
    let t = Instant::now();
    let seen: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let sink_seen = Arc::clone(&seen);
    let sink: UpdateSink = Arc::new(move |p: &yep_host::capability::Progress| {
        sink_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((p.message.clone(), t.elapsed()))
    });
    let counted = ext
        .call_tool(
            "count",
            json!({"n": 5, "interval_ms": 60}),
            Some(sink),
            None,
        )
        .await?;
    let updates = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    report.step(
        "tool/call count",
        t.elapsed(),
        format!("{counted} after {} streamed updates", updates.len()),
        json!({"result": counted, "updates": updates.iter().map(|u| &u.0).collect::<Vec<_>>()}),
    );
    for (line, at) in &updates {
        report.detail(&format!("tool/update ← {line} at +{}", ms(*at)));
    }

    Ok(())
}

/// 4. Cancel a long call mid-way.
async fn cancelled_call(ext: &Extension, report: &mut Report) -> anyhow::Result<()> {
    let token = CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(250)).await;
        canceller.cancel();
    });
    let t = Instant::now();
    let outcome = ext
        .call_tool(
            "count",
            json!({"n": 100, "interval_ms": 100}),
            None,
            Some(token),
        )
        .await;
    let cancelled = matches!(&outcome, Err(e) if e.is_cancelled());
    report.step(
        "cancel count",
        t.elapsed(),
        format!(
            "a 10 s count cancelled at 250 ms resolved {}",
            if cancelled {
                "`cancelled`"
            } else {
                "unexpectedly"
            }
        ),
        json!({"cancelled": cancelled}),
    );
    anyhow::ensure!(cancelled, "the cancelled call resolved as {outcome:?}");

    Ok(())
}

/// 5. A pre_tool_use hook that blocks.
async fn hook(ext: &Extension, manifest: &Manifest, report: &mut Report) -> anyhow::Result<()> {
    let hook = manifest
        .yolop
        .hooks
        .iter()
        .find(|h| h.event == HookEvent::PreToolUse)
        .context("the echo manifest declares a pre_tool_use hook")?;
    let fire = |forbidden: bool| HookFiring {
        event: HookEvent::PreToolUse,
        tool: "bash".into(),
        args: json!({"command": "rm -rf /", "forbidden": forbidden}),
        result: None,
    };
    let describe = |outcome: &HookOutcome| match outcome {
        HookOutcome::Block { reason, .. } => json!({"block": true, "reason": reason}),
        HookOutcome::Rewrite(args) => json!({"block": false, "modified_args": args}),
        HookOutcome::Allow => json!({"block": false}),
        HookOutcome::Ask { reason } => json!({"block": false, "ask": reason}),
    };
    let t = Instant::now();
    let blocked = ext
        .with_peer(|p, _| {
            p.fire_hook(
                &fire(true),
                yep_host::manifest::hook_timeout(hook.timeout_ms),
            )
        })
        .await?
        .outcome;
    let allowed = ext
        .with_peer(|p, _| {
            p.fire_hook(
                &fire(false),
                yep_host::manifest::hook_timeout(hook.timeout_ms),
            )
        })
        .await?
        .outcome;
    report.step(
        "hook/fire pre_tool_use",
        t.elapsed(),
        format!(
            "forbidden bash call {}: {:?}; a permitted one {}",
            if describe(&blocked)["block"] == true {
                "blocked"
            } else {
                "allowed"
            },
            describe(&blocked)["reason"].as_str().unwrap_or_default(),
            if describe(&allowed)["block"] == true {
                "blocked"
            } else {
                "allowed"
            }
        ),
        json!({"blocked": describe(&blocked), "allowed": describe(&allowed)}),
    );

    Ok(())
}

/// 6. Prompt text: static from the handshake, dynamic per turn. The dynamic text is what
///    the model sees; the static one stands in when it is empty or fails.
async fn prompt(
    ext: &Extension,
    static_prompt: Option<String>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let dynamic = ext.with_peer(|p, t| p.prompt(t)).await?;
    let static_text = static_prompt.unwrap_or_default();
    report.step(
        "prompt",
        t.elapsed(),
        format!(
            "dynamic {dynamic:?} (the model sees this; the static {static_text:?} is its fallback)"
        ),
        json!({"static": static_text, "dynamic": dynamic}),
    );

    Ok(())
}

/// 7. A slash command.
async fn command(ext: &Extension, report: &mut Report) -> anyhow::Result<()> {
    let t = Instant::now();
    let pong = ext.with_peer(|p, t| p.command("ping", "", t)).await?;
    report.step(
        "command/execute ping",
        t.elapsed(),
        format!("/echo:ping → {:?}", pong.message),
        json!(pong),
    );

    Ok(())
}

/// 8. A question to the user (answered by the demo).
async fn question(ext: &Extension, events: &DemoEvents, report: &mut Report) -> anyhow::Result<()> {
    let t = Instant::now();
    let answer = ext
        .call_tool("ask", json!({"prompt": "favourite colour?"}), None, None)
        .await?;
    let asked = events
        .questions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .join("; ");
    report.step(
        "ui/ask",
        t.elapsed(),
        format!("server asked {asked:?}; the demo answered, tool returned {answer}"),
        answer.into_value(),
    );

    Ok(())
}

/// 9. Graceful stop.
async fn stop(ext: &Extension, report: &mut Report) {
    let t = Instant::now();
    let status = ext.stop().await.unwrap_or_else(|| "not running".into());
    report.step(
        "shutdown",
        t.elapsed(),
        format!("shutdown, exit, stdin closed: {status}"),
        json!({"status": status}),
    );
}

/// Install the bundled echo extension into a scratch home under `scratch` (its server is this
/// binary's `serve-example-echo`) and launch it the way every installed extension is launched.
fn install_echo(scratch: &Path) -> anyhow::Result<launch::Launch> {
    let exe = std::env::current_exe()
        .map_err(|e| crate::output::internal("failed to locate the yep binary", e))?;
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON)
        .context("the bundled echo manifest is not JSON")?;
    manifest["yolop"]["capabilityServer"] =
        json!({"command": exe.to_string_lossy(), "args": ["serve-example-echo"]});
    let package = scratch.join("echo");
    std::fs::create_dir_all(&package)
        .with_context(|| format!("failed to create {}", package.display()))?;
    std::fs::write(package.join("plugin.json"), manifest.to_string())
        .with_context(|| format!("failed to write {}", package.join("plugin.json").display()))?;
    let home = Home::resolve(Some(scratch.join("home")));
    let installed = home.install(
        &package.to_string_lossy(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )?;
    Ok(launch::installed(
        &home,
        &installed.name,
        scratch.to_path_buf(),
        "yep-demo",
        &SupervisorOptions::for_home(&home),
    )?)
}

fn tool_names(manifest: &Manifest) -> Vec<&str> {
    manifest
        .yolop
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect()
}
