//! `yep session`: a live host session over the enabled extensions, for trying and debugging
//! them. At a terminal: a prompt with line editing and history, a status line, questions asked
//! inline. With `--json` (or no terminal): one command per stdin line, one JSON object per
//! stdout line.

use super::prompt::TerminalAsk;
use crate::output::{eline, stdout_line};
use serde_json::{Value, json};
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use yep_host::rpc::BoxFuture;
use yep_host::runtime::AskSink;
use yep_host::store::Home;
use yep_host::text::escape;
use yep_host::{ExtensionHost, HostOptions, PreDecision, Session, UpdateSink};
use yep_protocol::{UiAskParams, UiAskResult};

#[derive(clap::Args)]
pub struct Args {
    /// One JSON object per line, even at a terminal.
    #[arg(long)]
    json: bool,
    /// Answers to `ui/ask`, used in order (JSON mode); after them questions are cancelled.
    #[arg(long = "answer", value_name = "TEXT")]
    answers: Vec<String>,
}

/// Scripted answers for JSON mode.
struct Scripted(Mutex<std::collections::VecDeque<String>>);

impl AskSink for Scripted {
    fn ask(&self, _: &str, _: UiAskParams) -> BoxFuture<UiAskResult> {
        let next = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        Box::pin(async move { next.map_or_else(UiAskResult::cancelled, UiAskResult::answered) })
    }
}

const HELP: &str = "commands: tools | call <tool> <json> | pre <tool> <json> | post <tool> <json> | prompt | commands | command <ext:name> [args] | status | skills | mcp | mcp list-tools <server> | reload <name> | enable <name> | disable <name> | quit";

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let interactive =
        !args.json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let ask: Arc<dyn AskSink> = if interactive {
        Arc::new(TerminalAsk::default())
    } else {
        Arc::new(Scripted(Mutex::new(args.answers.into())))
    };
    let session = Session {
        id: format!("yep-session-{}", std::process::id()),
        workspace_root: std::env::current_dir()?,
    };
    let opts = HostOptions {
        ask_sink: Some(ask),
        ..HostOptions::default()
    };
    let host = Arc::new(ExtensionHost::start(home.clone(), session, opts).await?);
    let mut turn = 0u64;
    if interactive {
        for w in host.warnings() {
            eline!("warning: {w}");
        }
        eline!(
            "yep session: {} extension(s) enabled: {}. {HELP}",
            host.extensions().len(),
            host.extensions().join(", ")
        );
        let mut editor = rustyline::DefaultEditor::new()?;
        let history = home.root.join("session_history");
        let _ = editor.load_history(&history);
        loop {
            let line = {
                let prompt = format!("{}yep> ", status_line(&host));
                // Reading the terminal blocks; keep it off the runtime's threads.
                let (editor_back, line) = tokio::task::block_in_place(|| {
                    let line = editor.readline(&prompt);
                    (editor, line)
                });
                editor = editor_back;
                match line {
                    Ok(line) => line,
                    Err(_) => break,
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let _ = editor.add_history_entry(line.as_str());
            match execute(&host, &line, &mut turn, true).await {
                Step::Quit => break,
                Step::Out(v) => print_human(&v),
            }
        }
        let _ = editor.save_history(&history);
    } else {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match execute(&host, &line, &mut turn, false).await {
                Step::Quit => break,
                Step::Out(v) => stdout_line(&v.to_string()),
            }
        }
    }
    host.flush(std::time::Duration::from_secs(5)).await;
    host.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

fn status_line(host: &ExtensionHost) -> String {
    let status = host.status();
    if status.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = status
        .iter()
        .map(|(ext, s)| format!("{ext}: {}", escape(&s.text)))
        .collect();
    format!("[{}] ", parts.join(" | "))
}

fn print_human(v: &Value) {
    match v {
        Value::Object(map) if map.len() == 1 => {
            let (_, inner) = map.iter().next().expect("one entry");
            stdout_line(&serde_json::to_string_pretty(inner).unwrap_or_default());
        }
        other => stdout_line(&serde_json::to_string_pretty(other).unwrap_or_default()),
    }
}

enum Step {
    Out(Value),
    Quit,
}

fn parse_json(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| format!("arguments are not JSON: {e}"))
}

async fn execute(host: &Arc<ExtensionHost>, line: &str, turn: &mut u64, interactive: bool) -> Step {
    let line = line.trim();
    let (verb, rest) = line
        .split_once(' ')
        .map_or((line, ""), |(v, r)| (v, r.trim()));
    let (first, tail) = rest
        .split_once(' ')
        .map_or((rest, ""), |(a, b)| (a, b.trim()));
    let err = |e: String| Step::Out(json!({ "error": e }));
    match verb {
        "quit" | "exit" => Step::Quit,
        "help" => Step::Out(json!({ "help": HELP })),
        "tools" => Step::Out(json!({ "tools": host.tools() })),
        "call" => {
            let args = match parse_json(tail) {
                Ok(a) => a,
                Err(e) => return err(e),
            };
            let sink: UpdateSink = if interactive {
                Arc::new(|line: &str| eline!("  … {}", escape(line)))
            } else {
                Arc::new(|line: &str| stdout_line(&json!({ "update": line }).to_string()))
            };
            match host.call_tool(first, args, Some(sink), None).await {
                Ok(v) => Step::Out(json!({ "result": v })),
                Err(e) => err(e.to_string()),
            }
        }
        "pre" => {
            let args = match parse_json(tail) {
                Ok(a) => a,
                Err(e) => return err(e),
            };
            Step::Out(match host.pre_tool_use(first, args.clone()).await {
                PreDecision::Allow {
                    args: after,
                    rewritten_by,
                } => {
                    let modified = (!rewritten_by.is_empty()).then_some(after);
                    json!({ "decision": "allow", "reason": null, "modified_args": modified, "rewritten_by": rewritten_by })
                }
                PreDecision::Block {
                    extension,
                    reason,
                    user_message,
                } => {
                    json!({ "decision": "block", "reason": reason, "user_message": user_message, "extension": extension })
                }
            })
        }
        "post" => {
            let args = match parse_json(tail) {
                Ok(a) => a,
                Err(e) => return err(e),
            };
            host.post_tool_use(first, &args, Ok(&Value::Null));
            Step::Out(json!({ "decision": "allow", "reason": null, "modified_args": null }))
        }
        "prompt" => {
            *turn += 1;
            Step::Out(json!({ "prompt": host.prompt(*turn).await }))
        }
        "commands" => Step::Out(json!({ "commands": host.commands() })),
        "command" => match host.execute_command(first, tail).await {
            Ok(r) => Step::Out(json!({ "success": r.success, "message": r.message })),
            Err(e) => err(e.to_string()),
        },
        "status" => {
            Step::Out(json!({ "status": host.status(), "trace_dropped": host.trace_dropped() }))
        }
        "skills" => Step::Out(json!({ "skills": host.skills() })),
        "mcp" if first == "list-tools" => match mcp_list_tools(host, tail).await {
            Ok(tools) => Step::Out(json!({ "mcp_tools": tools })),
            Err(e) => err(format!("{e:#}")),
        },
        "mcp" => Step::Out(json!({ "mcp": host.mcp_servers_unexpanded() })),
        "reload" => ok_or(host.reload(first).await),
        "enable" => match host.activate(first).await {
            Ok(missing) if missing.is_empty() => Step::Out(json!({ "ok": true })),
            Ok(missing) => Step::Out(json!({ "ok": true, "setup_incomplete": missing })),
            Err(e) => err(e.to_string()),
        },
        "disable" => ok_or(host.deactivate(first).await),
        other => err(format!("unknown command `{other}`; {HELP}")),
    }
}

fn ok_or(r: Result<(), yep_host::HostError>) -> Step {
    Step::Out(match r {
        Ok(()) => json!({ "ok": true }),
        Err(e) => json!({ "error": e.to_string() }),
    })
}

/// Connect to a contributed stdio MCP server through rmcp and list its tools' names.
async fn mcp_list_tools(host: &ExtensionHost, server: &str) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    use rmcp::ServiceExt;
    let servers = host.mcp_servers();
    let spec = servers
        .get(server)
        .with_context(|| format!("no MCP server named `{server}` (see `mcp`)"))?;
    let command = match (spec.transport.as_str(), &spec.command) {
        ("stdio", Some(command)) => command,
        _ => anyhow::bail!(
            "`{server}` is an {} server; only stdio servers can be listed here",
            spec.transport
        ),
    };
    #[allow(clippy::disallowed_methods)] // rmcp's child-process transport takes a Command
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(&spec.args).envs(&spec.env);
    let transport = rmcp::transport::TokioChildProcess::new(cmd)
        .with_context(|| format!("failed to start `{command}`"))?;
    let client = ()
        .serve(transport)
        .await
        .with_context(|| format!("MCP handshake with `{server}` failed"))?;
    let tools = client
        .peer()
        .list_all_tools()
        .await
        .with_context(|| format!("listing the tools of `{server}` failed"));
    let _ = client.cancel().await;
    Ok(tools?.into_iter().map(|t| t.name.to_string()).collect())
}
