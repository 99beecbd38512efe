//! A tool's answer as it travels from the server's line to the embedder: the JSON text the
//! server wrote, parsed only when something looks inside (a post hook, the embedder).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::OnceLock;

/// A tool's answer. A YEP server's comes as the JSON text it wrote (one copy out of the line,
/// no parse); a wire that hands over a parsed value (MCP through rmcp, zot's mapped content)
/// keeps that. [`ToolResult::json`] is the text (for the model: no serialization when it came
/// as text); [`ToolResult::value`] parses it on first use and keeps the value.
#[derive(Clone)]
pub struct ToolResult {
    raw: Option<Box<RawValue>>,
    parsed: OnceLock<Value>,
}

impl ToolResult {
    /// An answer as the server wrote it.
    pub fn from_raw(raw: Box<RawValue>) -> ToolResult {
        ToolResult {
            raw: Some(raw),
            parsed: OnceLock::new(),
        }
    }

    /// An answer a wire already parsed.
    pub(crate) fn from_value(value: Value) -> ToolResult {
        ToolResult {
            raw: None,
            parsed: OnceLock::from(value),
        }
    }

    /// The answer as JSON text: as the server wrote it, when it came as text.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.raw {
            Some(raw) => Cow::Borrowed(raw.get()),
            None => Cow::Owned(self.value().to_string()),
        }
    }

    /// The answer as a value, parsed on first use (then kept).
    pub fn value(&self) -> &Value {
        self.parsed.get_or_init(|| match &self.raw {
            Some(raw) => parse(raw),
            None => Value::Null,
        })
    }

    /// The answer as a value, without a copy when nothing parsed it yet.
    pub fn into_value(self) -> Value {
        let ToolResult { raw, parsed } = self;
        match (parsed.into_inner(), raw) {
            (Some(value), _) => value,
            (None, Some(raw)) => parse(&raw),
            (None, None) => Value::Null,
        }
    }

    /// Whether it has been parsed (or came parsed): for tests of the pass-through.
    pub fn is_parsed(&self) -> bool {
        self.parsed.get().is_some()
    }

    /// The length of its JSON text, when it came as text.
    pub fn raw_len(&self) -> Option<usize> {
        self.raw.as_ref().map(|raw| raw.get().len())
    }
}

/// `raw` as a value. Text a `RawValue` holds is valid JSON; only nesting past serde_json's
/// depth limit can fail, and then the answer reads as null, as a broken one would.
fn parse(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or_else(|e| {
        tracing::warn!("a tool's answer could not be read: {e}");
        Value::Null
    })
}

impl From<Value> for ToolResult {
    fn from(value: Value) -> Self {
        ToolResult::from_value(value)
    }
}

impl std::fmt::Debug for ToolResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolResult({})", self.json())
    }
}

impl std::fmt::Display for ToolResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.json())
    }
}

impl Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.raw {
            Some(raw) => raw.serialize(serializer),
            None => self.value().serialize(serializer),
        }
    }
}

impl PartialEq for ToolResult {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl PartialEq<Value> for ToolResult {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl<I: serde_json::value::Index> std::ops::Index<I> for ToolResult {
    type Output = Value;

    fn index(&self, index: I) -> &Value {
        &self.value()[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_passes_through_and_is_parsed_only_when_asked() {
        let raw = RawValue::from_string(r#"{"echoed":"hi","n":[1,2]}"#.into()).unwrap();
        let result = ToolResult::from_raw(raw);
        assert_eq!(result.json(), r#"{"echoed":"hi","n":[1,2]}"#);
        assert_eq!(
            serde_json::to_string(&json!({ "r": result })).unwrap(),
            r#"{"r":{"echoed":"hi","n":[1,2]}}"#
        );
        assert!(!result.is_parsed());
        assert_eq!(result["echoed"], "hi");
        assert_eq!(result["n"][1], 2);
        assert!(result.is_parsed());
        assert_eq!(result, json!({"echoed": "hi", "n": [1, 2]}));
        assert_eq!(
            result.clone().into_value(),
            json!({"echoed": "hi", "n": [1, 2]})
        );

        let parsed = ToolResult::from_value(json!("plain"));
        assert_eq!(parsed.json(), r#""plain""#);
        assert_eq!(parsed.raw_len(), None);
        assert_eq!(parsed.into_value(), json!("plain"));
    }
}
