//! zot's frames, one JSON object per line with a `type`, and the host's reading of them: what
//! an extension may send ([`FromExtension`]), what the host sends (`ToExtension`), and how a
//! tool's content blocks reach the model (`model_content`), each as zot does it. Unknown
//! fields are ignored and unknown frame types are kept as [`FromExtension::Unknown`] (zot
//! logs and skips them).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version in `hello_ack`; it has never changed.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// One content block of a tool result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContentBlock {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mime_type: String,
    /// Base64 (images).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// `markdown` is a display hint on text blocks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub format: String,
}

impl ContentBlock {
    pub(crate) fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock {
            kind: "text".into(),
            text: text.into(),
            ..ContentBlock::default()
        }
    }
}

/// A panel an extension opens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PanelSpec {
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub lines: Vec<String>,
    #[serde(default)]
    pub footer: String,
}

impl From<PanelSpec> for crate::capability::Panel {
    fn from(p: PanelSpec) -> Self {
        crate::capability::Panel {
            id: p.id,
            title: p.title,
            lines: p.lines,
            footer: p.footer,
        }
    }
}

/// A frame from an extension.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromExtension {
    Hello {
        name: String,
        #[serde(default)]
        version: String,
        #[serde(default)]
        capabilities: Vec<String>,
    },
    RegisterCommand {
        name: String,
        #[serde(default)]
        description: String,
    },
    RegisterTool {
        name: String,
        #[serde(default)]
        description: String,
        /// The argument schema (a JSON object); anything else skips the tool, not the frame.
        #[serde(default)]
        schema: Option<Value>,
        #[serde(default)]
        output_schema: Option<Value>,
        #[serde(default)]
        exposure: String,
        #[serde(default)]
        deferred: bool,
        #[serde(default)]
        interactive: bool,
        #[serde(default)]
        replay: String,
    },
    Subscribe {
        #[serde(default)]
        events: Vec<String>,
        #[serde(default)]
        intercept: Vec<String>,
    },
    Ready,
    ToolResult {
        id: String,
        #[serde(default)]
        content: Vec<ContentBlock>,
        #[serde(default)]
        is_error: bool,
        #[serde(default)]
        activate_tools: Vec<String>,
        #[serde(default)]
        structured_content: Option<Value>,
    },
    CommandResponse {
        id: String,
        #[serde(default)]
        action: String,
        #[serde(default)]
        prompt: String,
        #[serde(default)]
        tool_name: String,
        #[serde(default)]
        tool_args: Option<Value>,
        #[serde(default)]
        insert: String,
        #[serde(default)]
        display: String,
        #[serde(default)]
        open_panel: Option<PanelSpec>,
        #[serde(default)]
        error: String,
    },
    EventInterceptResponse {
        id: String,
        #[serde(default)]
        block: bool,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        modified_args: Option<Value>,
        #[serde(default)]
        replace_text: Option<String>,
        #[serde(default)]
        system_prompt: Option<Value>,
    },
    CallTool {
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        args: Option<Value>,
        #[serde(default)]
        parent_id: Option<String>,
    },
    CallToolCancel {
        id: String,
    },
    Notify {
        #[serde(default)]
        level: String,
        #[serde(default)]
        message: String,
    },
    ClearNotes,
    Submit {
        #[serde(default)]
        text: String,
    },
    SubmitSlash {
        #[serde(default)]
        text: String,
    },
    OpenPanel {
        panel: PanelSpec,
    },
    PanelRender {
        panel_id: String,
        #[serde(default)]
        title: String,
        #[serde(default)]
        lines: Vec<String>,
        #[serde(default)]
        footer: String,
    },
    PanelClose {
        panel_id: String,
    },
    ShutdownAck,
    /// A `type` this host does not know: zot logs it and reads on.
    #[serde(skip)]
    Unknown {
        kind: String,
    },
}

/// Why a line is not a frame: zot logs it, records a diagnostic and reads on (except for the
/// first line, which must be `hello`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    #[error("malformed json frame: {0}")]
    Json(String),
    #[error("a frame must be a JSON object with a string `type`")]
    NoType,
    #[error("malformed `{kind}` frame: {message}")]
    Fields { kind: String, message: String },
}

impl FromExtension {
    /// Read one line.
    pub fn parse(line: &[u8]) -> Result<FromExtension, FrameError> {
        let value: Value =
            serde_json::from_slice(line).map_err(|e| FrameError::Json(e.to_string()))?;
        FromExtension::from_value(value)
    }

    /// A line already read as JSON.
    pub(crate) fn from_value(value: Value) -> Result<FromExtension, FrameError> {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or(FrameError::NoType)?
            .to_string();
        match serde_json::from_value::<FromExtension>(value) {
            Ok(frame) => Ok(frame),
            Err(e) if e.to_string().starts_with("unknown variant") => {
                Ok(FromExtension::Unknown { kind })
            }
            Err(e) => Err(FrameError::Fields {
                kind,
                message: e.to_string(),
            }),
        }
    }
}

/// A frame the host sends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ToExtension {
    /// Always the host's first frame.
    HelloAck {
        protocol_version: u32,
        capabilities: Vec<String>,
        zot_version: String,
        provider: String,
        model: String,
        cwd: String,
        extension_dir: String,
        data_dir: String,
    },
    CommandInvoked {
        id: String,
        name: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        args: String,
    },
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
    ToolCancel {
        id: String,
    },
    /// Asks an extension that intercepts `event` whether it may go ahead; `fields` are the
    /// event's (`tool_name` and `tool_args`, `step`, `text`, `system_prompt`, …).
    EventIntercept {
        id: String,
        event: String,
        #[serde(flatten)]
        fields: serde_json::Map<String, Value>,
    },
    /// An observed lifecycle event; `fields` are its payload with `event`, `session_id`,
    /// `cwd` and `sequence`.
    Event {
        #[serde(flatten)]
        fields: serde_json::Map<String, Value>,
    },
    /// The answer to an extension's `call_tool`.
    ToolResult {
        id: String,
        name: String,
        content: Vec<ContentBlock>,
        is_error: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    PanelKey {
        panel_id: String,
        key: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        text: String,
    },
    PanelClose {
        panel_id: String,
    },
    Shutdown,
}

impl ToExtension {
    /// The frame as one line, without its newline.
    pub(crate) fn line(&self) -> String {
        serde_json::to_string(self).expect("host frames always serialize")
    }
}

/// A tool's content as zot hands it to the model: empty text blocks are dropped; an image whose
/// data is not base64 adds an error note and makes the result an error; a block of another
/// type becomes a text note; nothing at all becomes `(extension returned no content)`.
/// Returns the blocks and whether the result is an error.
pub(crate) fn model_content(
    blocks: Vec<ContentBlock>,
    is_error: bool,
    extension: &str,
) -> (Vec<ContentBlock>, bool) {
    let mut is_error = is_error;
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block.kind.as_str() {
            "text" if block.text.is_empty() => {}
            "text" => out.push(block),
            "image" if is_base64(&block.data) => out.push(block),
            "image" => {
                is_error = true;
                out.push(ContentBlock::text(format!(
                    "[invalid image data from extension {extension}]"
                )));
            }
            other => out.push(ContentBlock::text(format!(
                "[unknown block type {other:?} from extension {extension}]"
            ))),
        }
    }
    if out.is_empty() {
        out.push(ContentBlock::text("(extension returned no content)"));
    }
    (out, is_error)
}

/// The zot lifecycle event a host trace event is: zot's own names as they are, and the YEP
/// trace names that mean the same thing.
pub(crate) fn zot_event(event_type: &str) -> Option<&'static str> {
    if let Some(name) = crate::store::zot::EVENTS.iter().find(|e| **e == event_type) {
        return Some(name);
    }
    Some(match event_type {
        "session.started" => "session_start",
        "session.ended" | "session.completed" => "session_end",
        "turn.started" => "turn_start",
        "turn.completed" => "turn_end",
        "tool.started" => "tool_call",
        "tool.completed" => "tool_result",
        "output.message.completed" => "assistant_message",
        _ => return None,
    })
}

/// The `event` frame for `name`: the payload's fields, then `event`, `session_id`, `cwd` and
/// `sequence` (which win over the payload's). An observed tool result is held to the
/// observation bounds.
pub(crate) fn event_frame(
    name: &str,
    data: &Value,
    session_id: &str,
    cwd: &str,
    sequence: u64,
) -> ToExtension {
    let mut fields = match data {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    fields.insert("event".into(), Value::from(name));
    fields.insert("session_id".into(), Value::from(session_id));
    fields.insert("cwd".into(), Value::from(cwd));
    fields.insert("sequence".into(), Value::from(sequence));
    if let Some(result) = fields.get_mut("result")
        && let Some(content) = result.get("content").cloned()
        && let Ok(blocks) = serde_json::from_value::<Vec<ContentBlock>>(content)
    {
        let (blocks, truncated) = bound_content(blocks);
        result["content"] = serde_json::to_value(blocks).unwrap_or_default();
        if truncated {
            result["truncated"] = Value::Bool(true);
        }
    }
    ToExtension::Event { fields }
}

/// The most bytes of text, base64 and MIME types in one `call_tool` result or observation.
pub(crate) const MAX_RESULT_BYTES: usize = 256 * 1024;
/// The most blocks in one.
pub(crate) const MAX_RESULT_BLOCKS: usize = 128;

/// A host tool's result as zot content: its `content` blocks when it has them (what a zot or
/// MCP-shaped tool answers), else the value as one text block (a string as itself, anything
/// else as JSON).
pub(crate) fn host_content(value: &Value) -> Vec<ContentBlock> {
    if let Some(blocks) = value
        .get("content")
        .and_then(|c| serde_json::from_value::<Vec<ContentBlock>>(c.clone()).ok())
        .filter(|b| !b.is_empty())
    {
        return blocks;
    }
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    vec![ContentBlock::text(text)]
}

/// Hold `blocks` to [`MAX_RESULT_BYTES`] and [`MAX_RESULT_BLOCKS`]: text is cut at a UTF-8
/// boundary, an image that does not fit whole is dropped. Returns whether anything was cut.
pub(crate) fn bound_content(blocks: Vec<ContentBlock>) -> (Vec<ContentBlock>, bool) {
    let mut left = MAX_RESULT_BYTES;
    let mut truncated = blocks.len() > MAX_RESULT_BLOCKS;
    let mut out = Vec::with_capacity(blocks.len().min(MAX_RESULT_BLOCKS));
    for mut block in blocks.into_iter().take(MAX_RESULT_BLOCKS) {
        let size = block.text.len() + block.data.len() + block.mime_type.len();
        if size <= left {
            left -= size;
            out.push(block);
            continue;
        }
        truncated = true;
        if block.kind == "text" && left > 0 {
            let mut cut = left.min(block.text.len());
            while !block.text.is_char_boundary(cut) {
                cut -= 1;
            }
            block.text.truncate(cut);
            left -= cut;
            out.push(block);
        }
    }
    (out, truncated)
}

/// Standard base64 with padding, as Go's `StdEncoding` decodes it.
fn is_base64(data: &str) -> bool {
    let bytes = data.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = bytes
        .strip_suffix(b"==")
        .or_else(|| bytes.strip_suffix(b"="))
        .unwrap_or(bytes);
    body.iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<FromExtension, FrameError> {
        FromExtension::parse(v.to_string().as_bytes())
    }

    #[test]
    fn results_are_held_to_256_kib_and_128_blocks_cutting_text_at_a_char_boundary() {
        let (small, cut) = bound_content(vec![ContentBlock::text("hi")]);
        assert_eq!((small.len(), cut), (1, false));
        let many = (0..200)
            .map(|i| ContentBlock::text(i.to_string()))
            .collect();
        let (blocks, cut) = bound_content(many);
        assert_eq!((blocks.len(), cut), (MAX_RESULT_BLOCKS, true));
        // 'é' is two bytes: a cut never lands inside one.
        let big = "é".repeat(MAX_RESULT_BYTES);
        let image = ContentBlock {
            kind: "image".into(),
            data: "QUJD".into(),
            mime_type: "image/png".into(),
            ..ContentBlock::default()
        };
        let (blocks, cut) = bound_content(vec![ContentBlock::text(big), image]);
        assert!(cut);
        assert_eq!(blocks.len(), 1, "the image no longer fits and is dropped");
        assert_eq!(blocks[0].text.len(), MAX_RESULT_BYTES);
        assert!(blocks[0].text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_host_result_becomes_its_content_blocks_or_one_text_block() {
        let zot = json!({"content": [{"type": "text", "text": "4"}], "is_error": false});
        assert_eq!(host_content(&zot), vec![ContentBlock::text("4")]);
        assert_eq!(
            host_content(&json!("plain")),
            vec![ContentBlock::text("plain")]
        );
        assert_eq!(
            host_content(&json!({"n": 1})),
            vec![ContentBlock::text("{\"n\":1}")]
        );
    }

    #[test]
    fn frames_read_as_zot_writes_them_old_and_new() {
        // The old SDK: no capabilities, registrations with only the old fields.
        assert_eq!(
            parse(json!({"type": "hello", "name": "clock", "version": "0.1"})).unwrap(),
            FromExtension::Hello {
                name: "clock".into(),
                version: "0.1".into(),
                capabilities: vec![],
            }
        );
        let FromExtension::RegisterTool {
            name,
            schema,
            exposure,
            ..
        } = parse(json!({
            "type": "register_tool", "name": "now", "schema": {"type": "object"},
            "exposure": "deferred", "some_future_field": 1
        }))
        .unwrap()
        else {
            panic!()
        };
        assert_eq!((name.as_str(), exposure.as_str()), ("now", "deferred"));
        assert_eq!(schema, Some(json!({"type": "object"})));
        assert_eq!(
            parse(json!({"type": "ready"})).unwrap(),
            FromExtension::Ready
        );
        assert_eq!(
            parse(json!({"type": "tool_result", "id": "7", "content": [{"type": "text", "text": "12:00"}]})).unwrap(),
            FromExtension::ToolResult {
                id: "7".into(),
                content: vec![ContentBlock::text("12:00")],
                is_error: false,
                activate_tools: vec![],
                structured_content: None,
            }
        );
    }

    #[test]
    fn what_is_not_a_frame_is_told_apart_from_a_frame_of_a_new_kind() {
        assert_eq!(
            parse(json!({"type": "hologram", "x": 1})).unwrap(),
            FromExtension::Unknown {
                kind: "hologram".into()
            }
        );
        assert!(matches!(
            FromExtension::parse(b"not json"),
            Err(FrameError::Json(_))
        ));
        assert_eq!(parse(json!({"name": "x"})), Err(FrameError::NoType));
        assert_eq!(parse(json!(["hello"])), Err(FrameError::NoType));
        assert!(matches!(
            parse(json!({"type": "hello"})),
            Err(FrameError::Fields { kind, .. }) if kind == "hello"
        ));
    }

    #[test]
    fn host_frames_are_one_line_each_with_their_type() {
        let ack = ToExtension::HelloAck {
            protocol_version: PROTOCOL_VERSION,
            capabilities: vec!["call_tool".into()],
            zot_version: "yep".into(),
            provider: String::new(),
            model: String::new(),
            cwd: "/work".into(),
            extension_dir: "/ext".into(),
            data_dir: "/data".into(),
        };
        let line: Value = serde_json::from_str(&ack.line()).unwrap();
        assert_eq!(line["type"], "hello_ack");
        assert_eq!(line["protocol_version"], 1);
        assert_eq!(line["capabilities"], json!(["call_tool"]));
        let call = ToExtension::ToolCall {
            id: "1".into(),
            name: "now".into(),
            args: json!({}),
        };
        assert_eq!(
            call.line(),
            r#"{"type":"tool_call","id":"1","name":"now","args":{}}"#
        );
        assert_eq!(ToExtension::Shutdown.line(), r#"{"type":"shutdown"}"#);
        assert!(!ack.line().contains('\n'));
    }

    #[test]
    fn content_reaches_the_model_as_zot_maps_it() {
        let image = |data: &str| ContentBlock {
            kind: "image".into(),
            mime_type: "image/png".into(),
            data: data.into(),
            ..ContentBlock::default()
        };
        let (blocks, is_error) = model_content(
            vec![
                ContentBlock::text(""),
                ContentBlock::text("hi"),
                image("aGk="),
            ],
            false,
            "e",
        );
        assert_eq!(blocks, [ContentBlock::text("hi"), image("aGk=")]);
        assert!(!is_error);
        let (blocks, is_error) = model_content(vec![image("not base64!")], false, "e");
        assert!(is_error, "bad base64 makes the result an error");
        assert!(
            blocks[0]
                .text
                .contains("invalid image data from extension e")
        );
        let odd = ContentBlock {
            kind: "audio".into(),
            ..ContentBlock::default()
        };
        let (blocks, _) = model_content(vec![odd], false, "e");
        assert_eq!(
            blocks[0].text,
            "[unknown block type \"audio\" from extension e]"
        );
        let (blocks, is_error) = model_content(vec![], true, "e");
        assert_eq!(
            blocks,
            [ContentBlock::text("(extension returned no content)")]
        );
        assert!(is_error, "an error stays an error");
        assert!(is_base64("") && is_base64("QUJD") && is_base64("QQ=="));
        assert!(!is_base64("QQ=") && !is_base64("Q===") && !is_base64("QU=D"));
    }
}
