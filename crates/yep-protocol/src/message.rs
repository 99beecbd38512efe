//! The envelope: one JSON object per line, classified by its fields alone.
//!
//! `method` + `id` is a request, `method` alone a notification, and a line without `method`
//! but with an `id` a response. `"jsonrpc":"2.0"` is accepted and never required nor emitted.
//! Ids are u64; a string or negative id counts as absent, as in yolop.

use crate::error::ErrorObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// One wire message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: u64,
    pub method: String,
    pub params: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: u64,
    pub result: Result<Value, ErrorObject>,
}

/// Why a line is not a message. The caller logs it and skips the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("line is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "line is neither a request, a notification nor a response (no `method`, no numeric `id`)"
    )]
    Unclassifiable,
}

/// The union of envelope fields, borrowed where it can be.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// One wire message, classified by its envelope alone: `params` and `result` stay the JSON
/// text they are on the line, borrowed from it, for a reader that passes them on unparsed
/// (`null` and absent are both `None`).
#[derive(Debug, Clone)]
pub enum RawMessage<'a> {
    Request {
        id: u64,
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    Response {
        id: u64,
        result: Result<&'a RawValue, &'a RawValue>,
    },
}

/// The envelope, its payloads left as text.
#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

impl<'a> RawMessage<'a> {
    /// Classify one line (without its newline) as [`Message::parse`] does, without parsing
    /// `params`, `result` or `error` beyond finding where they end.
    pub fn parse(line: &'a [u8]) -> Result<RawMessage<'a>, ParseError> {
        let env: RawEnvelope<'a> = serde_json::from_slice(line)?;
        // As `Value::as_u64` reads it: a string or negative id counts as absent.
        let id = env.id.and_then(|id| id.get().parse::<u64>().ok());
        Ok(match (env.method, id) {
            (Some(method), Some(id)) => RawMessage::Request {
                id,
                method,
                params: env.params,
            },
            (Some(method), None) => RawMessage::Notification {
                method,
                params: env.params,
            },
            (None, Some(id)) => RawMessage::Response {
                id,
                result: match env.error {
                    Some(err) => Err(err),
                    None => Ok(env.result.unwrap_or(RawValue::NULL)),
                },
            },
            (None, None) => return Err(ParseError::Unclassifiable),
        })
    }
}

impl Message {
    /// Parse one line (without its newline). Blank lines are the caller's to skip.
    pub fn parse(line: &[u8]) -> Result<Message, ParseError> {
        let env: Envelope = serde_json::from_slice(line)?;
        let id = env.id.as_ref().and_then(Value::as_u64);
        let params = env.params.unwrap_or(Value::Null);
        Ok(match (env.method, id) {
            (Some(method), Some(id)) => Message::Request(Request { id, method, params }),
            (Some(method), None) => Message::Notification(Notification { method, params }),
            (None, Some(id)) => Message::Response(Response {
                id,
                result: match env.error {
                    Some(err) => Err(ErrorObject::from_wire(err)),
                    None => Ok(env.result.unwrap_or(Value::Null)),
                },
            }),
            (None, None) => return Err(ParseError::Unclassifiable),
        })
    }

    /// Encode as one line, without the trailing newline.
    pub fn to_line(&self) -> String {
        match self {
            Message::Request(r) => request_line(r.id, &r.method, non_null(&r.params)),
            Message::Notification(n) => notification_line(&n.method, non_null(&n.params)),
            Message::Response(r) => response_line(r.id, r.result.as_ref()),
        }
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P: Serialize> {
    id: u64,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutNotification<'a, P: Serialize> {
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutResult<'a, R: Serialize> {
    id: u64,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    id: u64,
    error: &'a ErrorObject,
}

fn encode<T: Serialize>(value: &T) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string(value).expect("wire payloads always serialize")
}

/// `{"id":N,"method":M,"params":P}`; `None` params are omitted from the line, as yolop does.
pub fn request_line<P: Serialize>(id: u64, method: &str, params: Option<&P>) -> String {
    encode(&OutRequest { id, method, params })
}

/// `{"method":M,"params":P}`; `None` params are omitted from the line.
pub fn notification_line<P: Serialize>(method: &str, params: Option<&P>) -> String {
    encode(&OutNotification { method, params })
}

/// `Some(params)` unless they are `null`: the wire omits null params.
pub fn non_null(params: &Value) -> Option<&Value> {
    (!params.is_null()).then_some(params)
}

/// `{"id":N,"result":R}`.
pub fn result_line<R: Serialize>(id: u64, result: &R) -> String {
    encode(&OutResult { id, result })
}

/// `{"id":N,"result":R}` for a result that is a `Value`: [`result_line`]'s text, written by
/// [`crate::json`] (a big result's strings are the cost of an answer).
pub fn value_result_line(id: u64, result: &Value) -> String {
    // Room for a small result (and the newline the wire adds) at once: growing from a few
    // bytes would copy it several times.
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"id\":");
    write_u64(&mut out, id);
    out.extend_from_slice(b",\"result\":");
    crate::json::write_value(&mut out, result);
    out.push(b'}');
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// The `tool/call` request: [`request_line`]'s text for it, its arguments written by
/// [`crate::json`] (big arguments are the cost of a call).
pub fn tool_call_line(id: u64, params: &crate::ToolCallParams) -> String {
    // Every field by name: one added to the type fails to build here, not to reach the wire.
    let crate::ToolCallParams {
        tool_call_id,
        name,
        args,
    } = params;
    // Room for the envelope and small arguments (and the newline the wire adds) at once.
    let mut out = Vec::with_capacity(512 + tool_call_id.len() + name.len());
    out.extend_from_slice(b"{\"id\":");
    write_u64(&mut out, id);
    out.extend_from_slice(b",\"method\":");
    crate::json::write_str(&mut out, crate::methods::TOOL_CALL);
    out.extend_from_slice(b",\"params\":{\"tool_call_id\":");
    crate::json::write_str(&mut out, tool_call_id);
    out.extend_from_slice(b",\"name\":");
    crate::json::write_str(&mut out, name);
    out.extend_from_slice(b",\"args\":");
    crate::json::write_value(&mut out, args);
    out.extend_from_slice(b"}}");
    String::from_utf8(out).expect("JSON text is UTF-8")
}

fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `{"id":N,"error":E}`.
pub fn error_line(id: u64, error: &ErrorObject) -> String {
    encode(&OutError { id, error })
}

fn response_line(id: u64, result: Result<&Value, &ErrorObject>) -> String {
    match result {
        Ok(value) => result_line(id, value),
        Err(err) => error_line(id, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(line: &str) -> Message {
        Message::parse(line.as_bytes()).unwrap()
    }

    #[test]
    fn the_fast_lines_are_the_serde_lines() {
        let args = json!({"text": "x\"y\n".repeat(40) + &"z".repeat(500), "n": [1, 2.5, null]});
        for result in [
            json!(null),
            json!("hi"),
            args.clone(),
            json!({"echoed": "a".repeat(9000)}),
        ] {
            assert_eq!(value_result_line(7, &result), result_line(7, &result));
        }
        let params = crate::ToolCallParams {
            tool_call_id: "echo-1".into(),
            name: "ech\"o".into(),
            args,
        };
        let line = tool_call_line(u64::MAX, &params);
        assert_eq!(
            line,
            request_line(u64::MAX, crate::methods::TOOL_CALL, Some(&params))
        );
        let back = crate::HostRequest::parse_raw(
            crate::methods::TOOL_CALL,
            match RawMessage::parse(line.as_bytes()).unwrap() {
                RawMessage::Request { params, .. } => params,
                other => panic!("not a request: {other:?}"),
            },
        )
        .unwrap();
        assert_eq!(back, crate::HostRequest::ToolCall(params));
    }

    #[test]
    fn classification_is_by_fields_only() {
        assert!(
            matches!(parse(r#"{"id":1,"method":"tool/call"}"#), Message::Request(r) if r.id == 1 && r.params.is_null())
        );
        assert!(matches!(
            parse(r#"{"method":"log","params":{"message":"hi"}}"#),
            Message::Notification(_)
        ));
        assert!(matches!(
            parse(r#"{"id":7,"result":{"ok":true}}"#),
            Message::Response(Response {
                id: 7,
                result: Ok(_)
            })
        ));
        assert!(matches!(
            parse(r#"{"id":7}"#),
            Message::Response(Response {
                result: Ok(Value::Null),
                ..
            })
        ));
        assert!(
            matches!(parse(r#"{"id":7,"error":{"message":"x"}}"#), Message::Response(Response { result: Err(e), .. }) if e.message == "x")
        );
    }

    /// The raw reading, its payloads parsed afterwards, is the plain one.
    fn raw_as_message(line: &str) -> Result<Message, String> {
        let text = |raw: Option<&RawValue>| -> Value {
            raw.map_or(Value::Null, |r| serde_json::from_str(r.get()).unwrap())
        };
        Ok(
            match RawMessage::parse(line.as_bytes()).map_err(|e| e.to_string())? {
                RawMessage::Request { id, method, params } => Message::Request(Request {
                    id,
                    method: method.into_owned(),
                    params: text(params),
                }),
                RawMessage::Notification { method, params } => {
                    Message::Notification(Notification {
                        method: method.into_owned(),
                        params: text(params),
                    })
                }
                RawMessage::Response { id, result } => Message::Response(Response {
                    id,
                    result: match result {
                        Ok(raw) => Ok(text(Some(raw))),
                        Err(raw) => Err(ErrorObject::from_wire(text(Some(raw)))),
                    },
                }),
            },
        )
    }

    #[test]
    fn the_raw_reading_classifies_every_line_as_the_plain_one() {
        for line in [
            r#"{"id":1,"method":"tool/call"}"#,
            r#"{"id":1,"method":"tool/call","params":null}"#,
            r#"{"method":"log","params":{"message":"hi"}}"#,
            r#"{"method":"tool\/update","params":{"request_id":2,"output":"é\n"}}"#,
            r#"{"id":7,"result":{"ok":true,"text":"a\"b"}}"#,
            r#"{"id":7}"#,
            r#"{"id":7,"result":null}"#,
            r#"{"id":7,"error":{"message":"x","code":-32601}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#,
            r#"{"id":"a","method":"m"}"#,
            r#"{"id":-1,"method":"m"}"#,
            r#"{"id":7.5,"result":1}"#,
            r#"{"id":"a","result":1}"#,
            r#"{"id":1, "result" : [1, {"a": []}] , "extra": {"x": 1}}"#,
            r#"[1,2]"#,
            r#"{"id":1,"result":}"#,
        ] {
            let plain = Message::parse(line.as_bytes()).map_err(|e| e.to_string());
            assert_eq!(raw_as_message(line), plain, "{line}");
        }
        // The payload is the line's own text.
        let line = br#"{"id":9,"result":{"echoed": "x"}}"#;
        let RawMessage::Response {
            result: Ok(raw), ..
        } = RawMessage::parse(line).unwrap()
        else {
            panic!("a response")
        };
        assert_eq!(raw.get(), r#"{"echoed": "x"}"#);
    }

    #[test]
    fn jsonrpc_field_is_accepted_and_not_required() {
        let with = parse(r#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#);
        let without = parse(r#"{"id":3,"method":"shutdown"}"#);
        assert_eq!(with, without);
        assert!(!with.to_line().contains("jsonrpc"));
    }

    #[test]
    fn string_and_negative_ids_count_as_absent() {
        assert!(matches!(
            parse(r#"{"id":"a","method":"m"}"#),
            Message::Notification(_)
        ));
        assert!(matches!(
            parse(r#"{"id":-1,"method":"m"}"#),
            Message::Notification(_)
        ));
        assert!(matches!(
            Message::parse(br#"{"id":"a","result":1}"#),
            Err(ParseError::Unclassifiable)
        ));
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        assert!(matches!(
            Message::parse(b"not json"),
            Err(ParseError::Json(_))
        ));
        assert!(matches!(Message::parse(b"[1,2]"), Err(ParseError::Json(_))));
        assert!(matches!(
            Message::parse(b"{}"),
            Err(ParseError::Unclassifiable)
        ));
    }

    #[test]
    fn null_params_are_omitted_and_lines_round_trip() {
        assert_eq!(
            request_line(1, "prompt/contribution", non_null(&Value::Null)),
            r#"{"id":1,"method":"prompt/contribution"}"#
        );
        assert_eq!(
            notification_line::<()>("initialized", None),
            r#"{"method":"initialized"}"#
        );
        let msg = Message::Request(Request {
            id: 9,
            method: "tool/call".into(),
            params: json!({"name":"echo"}),
        });
        assert_eq!(parse(&msg.to_line()), msg);
        let err = Message::Response(Response {
            id: 2,
            result: Err(ErrorObject::cancelled()),
        });
        assert_eq!(parse(&err.to_line()), err);
    }
}
