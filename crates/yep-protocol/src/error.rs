//! The JSON-RPC-shaped error object carried by error responses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An error code: an open integer space with the JSON-RPC conventions named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// Unclassified: what yolop uses for tool errors and refusals.
    pub const UNCLASSIFIED: ErrorCode = ErrorCode(0);
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// The request was cancelled (`cancel {id}`); the message is `cancelled`.
    pub const REQUEST_CANCELLED: ErrorCode = ErrorCode(-32800);
    /// The peer's protocol major is not ours.
    pub const INCOMPATIBLE_VERSION: ErrorCode = ErrorCode(-32001);
}

/// JSON-RPC-shaped error object. Everything beyond `message` is optional and
/// defaulted, so a peer that sends bare `{ "message": … }` still parses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorObject {
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(with = "i64"))]
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
}

impl ErrorObject {
    /// The message yolop sends for an error value it cannot parse.
    pub const MALFORMED: &'static str = "malformed error object on the wire";

    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            retryable: false,
            data: Value::Null,
        }
    }

    /// An unclassified error (code 0) with this message.
    pub fn message(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UNCLASSIFIED, message)
    }

    /// `-32601`, worded as yolop words it so both hosts read it the same way.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not supported by this host: {method}"),
        )
    }

    pub fn invalid_params(method: &str, err: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorCode::INVALID_PARAMS,
            format!("invalid params for {method}: {err}"),
        )
    }

    /// The error a cancelled request resolves with.
    pub fn cancelled() -> Self {
        Self::new(ErrorCode::REQUEST_CANCELLED, "cancelled")
    }

    pub fn is_cancelled(&self) -> bool {
        self.message == "cancelled"
    }

    /// Parse an `error` value leniently: anything that is not an error object becomes the
    /// "malformed" error instead of failing the line.
    pub fn from_wire(value: Value) -> Self {
        serde_json::from_value(value).unwrap_or_else(|_| Self::message(Self::MALFORMED))
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ErrorObject {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bare_message_parses_with_defaults() {
        let err: ErrorObject = serde_json::from_value(json!({"message": "boom"})).unwrap();
        assert_eq!(err.code, ErrorCode::UNCLASSIFIED);
        assert_eq!(err.message, "boom");
        assert!(!err.retryable);
        assert!(err.data.is_null());
    }

    #[test]
    fn full_object_round_trips_and_null_data_is_omitted() {
        let err = ErrorObject {
            code: ErrorCode::METHOD_NOT_FOUND,
            message: "nope".into(),
            retryable: true,
            data: json!({"k": 1}),
        };
        let back: ErrorObject =
            serde_json::from_str(&serde_json::to_string(&err).unwrap()).unwrap();
        assert_eq!(back, err);
        let line = serde_json::to_string(&ErrorObject::message("x")).unwrap();
        assert!(!line.contains("data"), "{line}");
    }

    #[test]
    fn malformed_error_value_becomes_the_malformed_message() {
        assert_eq!(
            ErrorObject::from_wire(json!(42)).message,
            ErrorObject::MALFORMED
        );
        assert_eq!(
            ErrorObject::from_wire(json!({})).message,
            ErrorObject::MALFORMED
        );
    }
}
