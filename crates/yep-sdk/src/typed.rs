//! Typed tools: the argument schema from the handler's type (schemars), and arguments that
//! fail to deserialize answered with an error naming the field (serde_path_to_error).

use crate::server::ToolError;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use yep_protocol::{ErrorCode, ErrorObject};

/// The JSON Schema of `T` as a manifest holds it: no `$schema` or `title` at the top (the
/// tool's name and description say that), everything else as schemars derives it.
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
        root.remove("title");
    }
    schema
}

/// `args` as an `A`, or an invalid-params error that names the field at fault.
pub fn arguments<A: DeserializeOwned>(tool: &str, args: &Value) -> Result<A, ToolError> {
    // A host may send no arguments at all: that is an empty object.
    let empty = Value::Object(serde_json::Map::new());
    let args = if args.is_null() { &empty } else { args };
    serde_path_to_error::deserialize(args).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = if path == "." {
            format!("invalid arguments for `{tool}`: {inner}")
        } else {
            format!("invalid arguments for `{tool}`: `{path}`: {inner}")
        };
        ToolError(ErrorObject::new(ErrorCode::INVALID_PARAMS, message))
    })
}

/// A handler's result as JSON.
pub fn result<R: Serialize>(tool: &str, value: R) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::new(format!("the result of `{tool}` is not JSON: {e}")))
}
