//! The example capability server, as a library so `yep demo` can run it in-process too.
//!
//! - `echo {text}` returns `{"echoed": text}`;
//! - `count {n, interval_ms}` streams `i/n` updates, returns `{"counted": n}`, cancellable
//!   (a cancel is logged to stderr, the server's log);
//! - `ask {prompt}` returns `{"answer": …}` from the user (`ui/ask`), or an error saying why
//!   there is none;
//! - a `pre_tool_use` hook blocks any call whose args carry `"forbidden": true`;
//! - a static and a dynamic prompt, a `ping` command answering `pong`, a status push at start.
#![deny(clippy::print_stdout)]

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use yep_sdk::{CommandExecuteResult, HookDecision, Server, StatusLevel, ToolError, UiAskParams};

/// The manifest that ships beside the binary.
pub const PLUGIN_JSON: &str = include_str!("../plugin.json");

/// Build the echo server.
pub fn server() -> Server {
    let turns = AtomicU64::new(0);
    Server::new("echo")
        .instructions("Use the echo tool to repeat text back; count streams progress.")
        .tool("echo", |args, _ctx| {
            let text = args.get("text").and_then(Value::as_str).unwrap_or("");
            Ok(json!({ "echoed": text }))
        })
        .tool("count", |args, ctx| {
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(3);
            let interval = Duration::from_millis(
                args.get("interval_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(100),
            );
            for i in 1..=n {
                if ctx.sleep(interval) {
                    // Into the server's log (stderr), so a cancel is visible from outside.
                    eprintln!("count: cancelled before {i}/{n}");
                    return Err(ToolError::new("cancelled"));
                }
                ctx.update(format!("{i}/{n}"));
            }
            Ok(json!({ "counted": n }))
        })
        .tool("ask", |args, ctx| {
            let prompt = args
                .get("prompt")
                .and_then(Value::as_str)
                .unwrap_or("What is your answer?");
            let reply = ctx.ask(UiAskParams {
                prompt: prompt.to_string(),
                ..UiAskParams::default()
            })?;
            if reply.cancelled {
                // The host says why when it cancelled without asking anyone.
                let why = reply
                    .reason
                    .as_deref()
                    .unwrap_or("the user dismissed the question");
                return Err(ToolError::new(why));
            }
            Ok(json!({ "answer": reply.answer }))
        })
        .on_hook(|fire| {
            if fire.event == "pre_tool_use" && fire.args.get("forbidden") == Some(&json!(true)) {
                HookDecision::block("blocked by the echo example: args.forbidden is true")
            } else {
                HookDecision::allow()
            }
        })
        .dynamic_prompt(move || {
            let turn = turns.fetch_add(1, Ordering::Relaxed) + 1;
            format!("echo dynamic prompt, turn {turn}")
        })
        .command("ping", |_args, _ctx| CommandExecuteResult::ok("pong"))
        .on_start(|notifier| notifier.status("echo ready", StatusLevel::Ok))
}
