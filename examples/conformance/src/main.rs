//! The tools the MCP conformance suite's server scenarios call (`@modelcontextprotocol/
//! conformance`, `server` mode), as a YEP extension: behind `yep mcp serve`, the suite then
//! exercises the whole bridge, MCP client → yep → this YEP server → back.
//!
//! What YEP has no words for is said by the tool instead (sampling: an extension cannot ask
//! the agent's model); `conformance/expected-failures.yml` lists each scenario that fails
//! for it, with the reason.
#![deny(clippy::print_stdout)]

use serde_json::{Value, json};
use std::time::Duration;
use yep_sdk::{Server, StatusLevel, ToolError, UiAskParams};

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";
/// Eight samples of 8 kHz mono silence, as WAV.
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// An MCP-shaped result: the bridge passes a `content` array through as it came.
fn content(blocks: Value) -> Result<Value, ToolError> {
    Ok(json!({ "content": blocks }))
}

fn image() -> Value {
    json!({"type": "image", "data": PNG, "mimeType": "image/png"})
}

/// The question `prompt` asks, answered in the words the scenarios look for.
fn asked(ctx: &yep_sdk::Context, params: UiAskParams) -> Result<Value, ToolError> {
    let reply = ctx.ask(params)?;
    let action = if reply.cancelled { "cancel" } else { "accept" };
    let text = format!(
        "User response: action={action}, content={}",
        json!({ "answer": reply.answer })
    );
    content(json!([{ "type": "text", "text": text }]))
}

/// Three statuses while it runs (each a `notifications/message` to a client that hears them).
fn logging(_: &Value, ctx: &yep_sdk::Context) -> Result<Value, ToolError> {
    for (i, text) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 && ctx.sleep(Duration::from_millis(50)) {
            return Err(ToolError::new("cancelled"));
        }
        ctx.status(text, StatusLevel::Ok);
    }
    content(json!([{"type": "text", "text": "Tool with logging executed successfully"}]))
}

fn main() -> std::io::Result<()> {
    Server::new("conformance")
        .tool("test_simple_text", |_, _| {
            content(json!([{"type": "text", "text": "This is a simple text response for testing."}]))
        })
        .tool("test_image_content", |_, _| content(json!([image()])))
        .tool("test_audio_content", |_, _| {
            content(json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]))
        })
        .tool("test_embedded_resource", |_, _| {
            content(json!([{"type": "resource", "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."}}]))
        })
        .tool("test_multiple_content_types", |_, _| {
            content(json!([
                {"type": "text", "text": "Multiple content types test:"},
                image(),
                {"type": "resource", "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": "{\"test\":\"data\",\"value\":123}"}}
            ]))
        })
        .tool("test_tool_with_logging", logging)
        // The 0.2 suite's name for it: a log a 2026-07-28 client did not ask for (no
        // `logLevel` in the request's `_meta`) must not reach it.
        .tool("test_logging_tool", logging)
        .tool("test_error_handling", |_, _| {
            Err(ToolError::new(
                "This tool intentionally returns an error for testing",
            ))
        })
        .tool("test_tool_with_progress", |_, ctx| {
            for (i, step) in ["0/100", "50/100", "100/100"].into_iter().enumerate() {
                if i > 0 && ctx.sleep(Duration::from_millis(50)) {
                    return Err(ToolError::new("cancelled"));
                }
                ctx.update(step);
            }
            content(json!([{"type": "text", "text": "Progress test completed"}]))
        })
        .tool("test_sampling", |_, _| {
            Err(ToolError::new(
                "a YEP extension cannot ask the agent's model (MCP sampling has no YEP counterpart)",
            ))
        })
        .tool("test_elicitation", |args, ctx| {
            let message = args["message"].as_str().unwrap_or("Please provide your information");
            asked(
                ctx,
                UiAskParams {
                    prompt: message.to_string(),
                    ..UiAskParams::default()
                },
            )
        })
        .tool("test_elicitation_sep1034_defaults", |_, ctx| {
            asked(
                ctx,
                UiAskParams {
                    prompt: "Please review and update the form fields with defaults".into(),
                    placeholder: Some("John Doe".into()),
                    ..UiAskParams::default()
                },
            )
        })
        .tool("test_elicitation_sep1330_enums", |_, ctx| {
            asked(
                ctx,
                UiAskParams {
                    prompt: "Please pick an option".into(),
                    options: vec!["option1".into(), "option2".into(), "option3".into()],
                    ..UiAskParams::default()
                },
            )
        })
        .tool("test_reconnection", |_, ctx| {
            if ctx.sleep(Duration::from_millis(100)) {
                return Err(ToolError::new("cancelled"));
            }
            content(json!([{"type": "text", "text": "Reconnection test completed"}]))
        })
        .tool("json_schema_2020_12_tool", |args, _| {
            content(json!([{"type": "text", "text": format!("received {args}")}]))
        })
        .serve()
}
