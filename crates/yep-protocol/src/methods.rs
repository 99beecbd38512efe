//! Method names and the typed method enums, one per direction and kind.
//!
//! Each enum has an `Unknown` arm so a newer peer's method parses instead of failing; the
//! receiver answers an unknown request with -32601 and ignores an unknown notification.

use crate::types::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

pub const INITIALIZE: &str = "initialize";
pub const INITIALIZED: &str = "initialized";
pub const TOOL_CALL: &str = "tool/call";
pub const TOOL_UPDATE: &str = "tool/update";
pub const CANCEL: &str = "cancel";
pub const PROMPT_CONTRIBUTION: &str = "prompt/contribution";
pub const HOOK_FIRE: &str = "hook/fire";
pub const COMMAND_EXECUTE: &str = "command/execute";
pub const CONFIG_CHANGED: &str = "config/changed";
pub const WORKSPACE_CHANGED: &str = "workspace/changed";
pub const TRACE_EVENT: &str = "trace/event";
pub const UI_ASK: &str = "ui/ask";
pub const STATUS_CHANGED: &str = "status/changed";
pub const LOG: &str = "log";
pub const SHUTDOWN: &str = "shutdown";
pub const EXIT: &str = "exit";

/// Parse params leniently: absent (`null`) params are the type's default.
fn params<T: DeserializeOwned + Default>(params: Value) -> Result<T, serde_json::Error> {
    if params.is_null() {
        Ok(T::default())
    } else {
        serde_json::from_value(params)
    }
}

macro_rules! method_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($variant:ident $(($payload:ty))? = $method:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum $name {
            $($variant $(($payload))?,)*
            /// A method this version does not know, carried verbatim.
            Unknown { method: String, params: Value },
        }

        impl $name {
            /// Type a method and its params. A known method with params of the wrong shape is
            /// an error (answer -32602); an unknown method is `Unknown`.
            pub fn parse(method: &str, raw: Value) -> Result<Self, serde_json::Error> {
                Ok(match method {
                    $($method => method_enum!(@parse $variant raw $(($payload))?),)*
                    _ => $name::Unknown { method: method.to_string(), params: raw },
                })
            }

            /// [`Self::parse`], from the params' text as [`crate::RawMessage`] borrows it.
            /// Absent params read as `null`; the params' text is read through, without
            /// building a `Value` for it first.
            pub fn parse_raw(method: &str, raw: Option<&RawValue>) -> Result<Self, serde_json::Error> {
                let Some(raw) = raw else {
                    return Self::parse_de(method, Value::Null);
                };
                let mut text = serde_json::Deserializer::from_str(raw.get());
                let parsed = Self::parse_de(method, &mut text)?;
                text.end()?;
                Ok(parsed)
            }

            /// [`Self::parse_raw`], the params read straight from `params` (as a line is
            /// parsed in one pass: [`HostRequest::parse_line`]). `null` params are the type's
            /// default, as there.
            pub fn parse_de<'de, D: serde::Deserializer<'de>>(method: &str, params: D) -> Result<Self, D::Error> {
                Ok(match method {
                    $($method => method_enum!(@parse_de $variant params $(($payload))?),)*
                    _ => $name::Unknown {
                        method: method.to_string(),
                        params: <Value as serde::Deserialize>::deserialize(params)?,
                    },
                })
            }

            /// The wire method name.
            pub fn method(&self) -> &str {
                match self {
                    $(method_enum!(@pat $name $variant $(($payload))?) => $method,)*
                    $name::Unknown { method, .. } => method,
                }
            }

            /// The params as a JSON value (`null` for bare methods).
            pub fn params(&self) -> Value {
                match self {
                    $(method_enum!(@bind $name $variant p $(($payload))?) => method_enum!(@value p $(($payload))?),)*
                    $name::Unknown { params, .. } => params.clone(),
                }
            }
        }
    };
    (@parse $variant:ident $raw:ident ($payload:ty)) => { Self::$variant(params::<$payload>($raw)?) };
    (@parse $variant:ident $raw:ident) => { Self::$variant };
    (@parse_de $variant:ident $d:ident ($payload:ty)) => {
        Self::$variant(<Option<$payload> as serde::Deserialize>::deserialize($d)?.unwrap_or_default())
    };
    (@parse_de $variant:ident $d:ident) => {{
        <serde::de::IgnoredAny as serde::Deserialize>::deserialize($d)?;
        Self::$variant
    }};
    (@pat $name:ident $variant:ident ($payload:ty)) => { $name::$variant(_) };
    (@pat $name:ident $variant:ident) => { $name::$variant };
    (@bind $name:ident $variant:ident $p:ident ($payload:ty)) => { $name::$variant($p) };
    (@bind $name:ident $variant:ident $p:ident) => { $name::$variant };
    (@value $p:ident ($payload:ty)) => { serde_json::to_value($p).unwrap_or(Value::Null) };
    (@value $p:ident) => { Value::Null };
}

method_enum! {
    /// Requests the host sends to a server.
    HostRequest {
        Initialize(InitializeParams) = INITIALIZE,
        ToolCall(ToolCallParams) = TOOL_CALL,
        Cancel(CancelParams) = CANCEL,
        PromptContribution = PROMPT_CONTRIBUTION,
        HookFire(HookFireParams) = HOOK_FIRE,
        CommandExecute(CommandExecuteParams) = COMMAND_EXECUTE,
        ConfigChanged(ConfigChangedParams) = CONFIG_CHANGED,
        Shutdown = SHUTDOWN,
    }
}

method_enum! {
    /// Notifications the host sends to a server.
    HostNotification {
        Initialized = INITIALIZED,
        TraceEvent(TraceEventParams) = TRACE_EVENT,
        WorkspaceChanged(WorkspaceChangedParams) = WORKSPACE_CHANGED,
        Exit = EXIT,
    }
}

method_enum! {
    /// Requests a server sends to the host (reverse requests).
    ServerRequest {
        UiAsk(UiAskParams) = UI_ASK,
    }
}

method_enum! {
    /// Notifications a server sends to the host.
    ServerNotification {
        ToolUpdate(ToolUpdateParams) = TOOL_UPDATE,
        StatusChanged(StatusChangedParams) = STATUS_CHANGED,
        Log(LogParams) = LOG,
    }
}

impl HostRequest {
    /// A request line in one pass: its params go straight into their type, not first into
    /// text that is then parsed again. This takes the line as every host writes it, `method`
    /// before `params`; `None` for anything else (a response, a notification, params before
    /// the method, a malformed line or params of the wrong shape), which
    /// [`crate::RawMessage::parse`] and [`HostRequest::parse_raw`] then read, with their
    /// errors. What both read, they read alike.
    pub fn parse_line(line: &[u8]) -> Option<(u64, HostRequest)> {
        // Checked whole first: bytes that are not UTF-8 in a field it skips would pass a
        // reading of bytes unseen, where the two-pass reading refuses the line.
        let text = std::str::from_utf8(line).ok()?;
        let OnePass(id, request) = serde_json::from_str(text).ok()?;
        Some((id, request))
    }
}

/// A request line read by [`HostRequest::parse_line`].
struct OnePass(u64, HostRequest);

impl<'de> serde::Deserialize<'de> for OnePass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(OnePassVisitor)
    }
}

struct OnePassVisitor;

/// The params of `method`, as a seed.
struct ParamsOf<'m>(&'m str);

impl<'de> serde::de::DeserializeSeed<'de> for ParamsOf<'_> {
    type Value = HostRequest;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<HostRequest, D::Error> {
        HostRequest::parse_de(self.0, d)
    }
}

impl<'de> serde::de::Visitor<'de> for OnePassVisitor {
    type Value = OnePass;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a request object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OnePass, A::Error> {
        use serde::de::Error;
        use std::borrow::Cow;
        let (mut id, mut method, mut request) = (None, None::<Cow<'de, str>>, None);
        // The envelope's other fields, skipped here but read by `RawMessage::parse`, which
        // refuses them twice.
        let (mut result, mut error) = (false, false);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                // As `RawMessage::parse` reads it: only a whole non-negative number is an id.
                "id" if id.is_none() => {
                    let raw: &'de RawValue = map.next_value()?;
                    id = Some(raw.get().parse::<u64>().map_err(A::Error::custom)?);
                }
                "method" if method.is_none() => method = Some(map.next_value()?),
                "params" if request.is_none() => match &method {
                    Some(m) => request = Some(map.next_value_seed(ParamsOf(m))?),
                    None => return Err(A::Error::custom("params before the method")),
                },
                "result" if !result => {
                    result = true;
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                "error" if !error => {
                    error = true;
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                "id" | "method" | "params" | "result" | "error" => {
                    return Err(A::Error::custom("a duplicate field"));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let id = id.ok_or_else(|| A::Error::custom("no id"))?;
        let method = method.ok_or_else(|| A::Error::custom("no method"))?;
        let request = match request {
            Some(request) => request,
            None => HostRequest::parse_raw(&method, None).map_err(A::Error::custom)?,
        };
        Ok(OnePass(id, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_methods_parse_typed_and_unknown_ones_are_carried() {
        let req = HostRequest::parse("tool/call", json!({"name": "echo", "args": {"text": "hi"}}))
            .unwrap();
        assert!(matches!(&req, HostRequest::ToolCall(p) if p.name == "echo"));
        assert_eq!(req.method(), "tool/call");
        assert_eq!(
            HostRequest::parse("shutdown", Value::Null).unwrap(),
            HostRequest::Shutdown
        );
        let unknown = HostRequest::parse("frobnicate", json!([1])).unwrap();
        assert_eq!(unknown.method(), "frobnicate");
        assert_eq!(unknown.params(), json!([1]));
    }

    /// The one-pass reading of a request line takes what a host writes and agrees with the
    /// two-pass one wherever it answers; the rest it leaves to that one.
    #[test]
    fn a_request_line_read_in_one_pass_reads_as_in_two() {
        let two_pass = |line: &str| match crate::RawMessage::parse(line.as_bytes()) {
            Ok(crate::RawMessage::Request { id, method, params }) => {
                HostRequest::parse_raw(&method, params)
                    .ok()
                    .map(|r| (id, r))
            }
            _ => None,
        };
        let taken = [
            r#"{"id":7,"method":"tool/call","params":{"tool_call_id":"e-1","name":"echo","args":{"text":"a\"b\n"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#,
            r#"{"id":2,"method":"shutdown","params":{"ignored":[1,2]}}"#,
            r#"{"id":3,"method":"cancel","params":null}"#,
            r#"{"id":4,"method":"cancel"}"#,
            r#"{"id":5,"method":"frob\u006eicate","params":[1,{"x":null}]}"#,
            r#"{"id":6,"method":"prompt/contribution","result":1}"#,
            r#" {"method":"hook/fire","id":8,"params":{"event":"pre_tool_use","tool_name":"bash","args":{}}} "#,
        ];
        for line in taken {
            let one = HostRequest::parse_line(line.as_bytes());
            assert!(one.is_some(), "not taken in one pass: {line}");
            assert_eq!(one, two_pass(line), "{line}");
        }
        let left = [
            r#"{"params":{"id":1},"id":9,"method":"cancel"}"#,
            r#"{"id":"9","method":"shutdown"}"#,
            r#"{"id":-1,"method":"shutdown"}"#,
            r#"{"id":1.5,"method":"shutdown"}"#,
            r#"{"id":null,"method":"shutdown"}"#,
            r#"{"method":"initialized"}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"id":1,"method":"cancel","params":{"id":"x"}}"#,
            r#"{"id":1,"method":"shutdown","method":"cancel"}"#,
            r#"{"id":1,"id":2,"method":"shutdown"}"#,
            // Found by the wire fuzz target: envelope fields the one-pass reading skips, twice.
            r#"{"id":10,"method":"initi","result":0,"result":{}}"#,
            r#"{"id":10,"method":"initi","error":0,"error":{}}"#,
            r#"{"id":1,"method":"shutdown"} x"#,
            r#"{"id":1,"method":"tool/call","params":{"name":"echo""#,
            r#"[1]"#,
        ];
        for line in left {
            assert_eq!(HostRequest::parse_line(line.as_bytes()), None, "{line}");
        }
        // Bytes that are not UTF-8, in a field both readings skip (found by the wire fuzz
        // target): the two-pass reading refuses the line, so the one-pass one leaves it.
        let line = b"{\"id\":11,\"method\":\"hook/fire\",\"params\":{\"event\":\"pre_tool_use\",\"tool_name\":\"x\",\"\":\"\xbc\xbc1.0\"},\"x\":\"\xff\"}";
        assert!(crate::RawMessage::parse(line).is_err());
        assert_eq!(HostRequest::parse_line(line), None);
    }

    #[test]
    fn absent_params_default_and_wrong_shapes_are_errors() {
        assert!(matches!(
            HostRequest::parse("cancel", Value::Null).unwrap(),
            HostRequest::Cancel(CancelParams { id: 0 })
        ));
        assert!(HostRequest::parse("cancel", json!({"id": "x"})).is_err());
        assert!(matches!(
            ServerNotification::parse("log", json!({"message": "m"})).unwrap(),
            ServerNotification::Log(_)
        ));
    }

    #[test]
    fn params_parse_the_same_from_their_text() {
        let raw = |v: &Value| RawValue::from_string(v.to_string()).unwrap();
        for (method, params) in [
            (
                "tool/call",
                json!({"name": "echo", "args": {"text": "hi", "n": [1, 2.5, null]}}),
            ),
            ("cancel", json!({"id": 7})),
            ("shutdown", Value::Null),
            (
                "initialize",
                json!({"protocolVersion": "1.0", "config": {"k": "v"}}),
            ),
            ("frobnicate", json!([1, {"a": "b"}])),
        ] {
            let text = (!params.is_null()).then(|| raw(&params));
            assert_eq!(
                HostRequest::parse_raw(method, text.as_deref()).unwrap(),
                HostRequest::parse(method, params.clone()).unwrap(),
                "{method}"
            );
        }
        assert!(HostRequest::parse_raw("cancel", Some(&raw(&json!({"id": "x"})))).is_err());
        assert_eq!(
            HostNotification::parse_raw("exit", None).unwrap(),
            HostNotification::Exit
        );
    }
}
