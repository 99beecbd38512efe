//! A capability server built on the published `yolop-yep` 0.5 SDK, exactly as yolop's own
//! extensions are. The interop tests drive it through `yep-host`.

use serde_json::json;
use yolop_yep::{HookResponse, Server, ToolResponse};

fn main() -> std::io::Result<()> {
    Server::new("yolop-fixture")
        .instructions("Static prompt from a yolop-yep server.")
        .tool("echo", |args| {
            let text = args.get("text").and_then(|v| v.as_str()).unwrap_or("");
            ToolResponse::ok(json!({ "echoed": text }))
        })
        .tool("fail", |_| ToolResponse::err("fixture failure"))
        .tool("slow", |_| {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            ToolResponse::ok(json!("slow done"))
        })
        .on_hook(|params| {
            if params.args.get("forbidden") == Some(&json!(true)) {
                HookResponse::block("blocked by the yolop fixture")
            } else {
                HookResponse::allow()
            }
        })
        .dynamic_prompt(|| "dynamic prompt from a yolop-yep server".to_string())
        .serve()
}
