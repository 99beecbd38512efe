//! JSON Schema (Draft 2020-12) of every payload, written to `schema/yep/v1/schema.json`.
//!
//! Payloads are keyed by method under `messages` (`{params, result}` refs) with every type
//! under `$defs`, the same document shape yolop publishes, so tools written against theirs
//! read ours.

use crate::types::*;
use crate::{ErrorObject, PROTOCOL_VERSION};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The document written to `schema/yep/v1/schema.json`.
pub fn schema_json() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let r = |schema: schemars::Schema| schema.to_value();
    macro_rules! sub {
        ($t:ty) => {
            r(generator.subschema_for::<$t>())
        };
    }
    let messages = json!({
        "initialize": { "params": sub!(InitializeParams), "result": sub!(InitializeResult) },
        "tool/call": { "params": sub!(ToolCallParams) },
        "tool/update": { "params": sub!(ToolUpdateParams) },
        "cancel": { "params": sub!(CancelParams), "result": sub!(CancelResult) },
        "status/changed": { "params": sub!(StatusChangedParams) },
        "hook/fire": { "params": sub!(HookFireParams), "result": sub!(HookDecision) },
        "prompt/contribution": { "result": sub!(PromptContribution) },
        "command/execute": { "params": sub!(CommandExecuteParams), "result": sub!(CommandExecuteResult) },
        "ui/ask": { "params": sub!(UiAskParams), "result": sub!(UiAskResult) },
        "config/changed": { "params": sub!(ConfigChangedParams), "result": sub!(ConfigChangedResult) },
        "workspace/changed": { "params": sub!(WorkspaceChangedParams) },
        "trace/event": { "params": sub!(TraceEventParams) },
        "log": { "params": sub!(LogParams) },
    });
    let capability_params = sub!(CapabilityParams);
    let error = sub!(ErrorObject);
    let defs: Value = generator.take_definitions(true).into();
    sorted(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "YEP payload schemas",
        "protocol_version": PROTOCOL_VERSION,
        "description": "JSON Schema for YEP 1.0 request, result and notification payloads. Companion to meta.json.",
        "capability_params": capability_params,
        "error": error,
        "messages": messages,
        "$defs": defs,
    }))
}

/// Recursively sort object keys so the file is stable whatever map order serde_json uses.
pub fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The generated artifacts as `(file name, contents)`, exactly as committed.
pub fn artifacts() -> [(&'static str, String); 2] {
    let render = |v: &Value| serde_json::to_string_pretty(v).expect("schema serializes") + "\n";
    [
        ("meta.json", render(&crate::meta::meta_json())),
        ("schema.json", render(&schema_json())),
    ]
}
