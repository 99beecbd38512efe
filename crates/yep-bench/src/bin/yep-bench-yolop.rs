//! An echo server on the published `yolop-yep` 0.5 SDK, the way yolop's own extensions are built.
#![deny(clippy::print_stdout)]

use serde_json::json;
use yolop_yep::{HookResponse, Server, ToolResponse};

fn main() -> std::io::Result<()> {
    Server::new("echo")
        .tool("echo", |args| {
            let text = args.get("text").and_then(|v| v.as_str()).unwrap_or("");
            ToolResponse::ok(json!({ "echoed": text }))
        })
        .on_hook(|params| {
            if params.args.get("forbidden") == Some(&json!(true)) {
                HookResponse::block("forbidden")
            } else {
                HookResponse::allow()
            }
        })
        .serve()
}
