//! zot's framing for the connection: which line is a response and which is unasked, and how
//! the host's answers and cancels are written.

use super::frames;
use super::frames::ToExtension;
use crate::capability::RemoteError;
use crate::rpc::{Codec, Frame, Id, Malformed};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What a zot frame is, read before the rest of it.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(rename = "type", default)]
    kind: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
}

/// zot's framing: responses by their `id` (host ids are decimal strings), everything else
/// unasked (the extension's `call_tool` too: the router answers it, by zot's own rules).
#[derive(Default)]
pub(super) struct ZotCodec {
    /// The extension said it takes `tool_cancel`.
    pub(super) tool_cancel: AtomicBool,
    /// A line was read: past the first, a malformed line is skipped, as zot skips it.
    past_first: AtomicBool,
}

impl Codec for ZotCodec {
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
        let first = !self.past_first.swap(true, Ordering::AcqRel);
        // The frame's `type` and `id` first: an answer then passes on as the extension wrote
        // it, and only a frame the host acts on is read whole.
        let typed = serde_json::from_slice::<Head>(line)
            .map_err(|e| match e.classify() {
                serde_json::error::Category::Data => {
                    "a frame must be a JSON object with a string `type`".to_string()
                }
                _ => format!("malformed json frame: {e}"),
            })
            .and_then(|head| match head.kind {
                Some(Value::String(kind)) => Ok((kind, head.id)),
                _ => Err("a frame must be a JSON object with a string `type`".to_string()),
            });
        let whole = || serde_json::from_slice::<Value>(line).map_err(Malformed::new);
        let (kind, id) = match typed {
            // The first line is the hello's, whatever it is: never a response or a request.
            Ok((kind, _)) if first => {
                return Ok(Frame::Notification {
                    method: kind,
                    params: whole()?,
                });
            }
            Ok(typed) => typed,
            // The first line must be the hello: the handshake hears what it was instead.
            Err(why) if first => {
                return Ok(Frame::Notification {
                    method: why,
                    params: Value::String(crate::rpc::stray_preview(line)),
                });
            }
            Err(why) => return Err(Malformed::new(why)),
        };
        Ok(match kind.as_str() {
            "tool_result" | "command_response" | "event_intercept_response" => {
                let Some(Value::String(id)) = id else {
                    return Err(Malformed::new(format!(
                        "a `{kind}` frame needs a string `id`"
                    )));
                };
                Frame::Response {
                    id: Id::Str(id.into()),
                    result: Ok(serde_json::from_slice(line).map_err(Malformed::new)?),
                }
            }
            _ => Frame::Notification {
                method: kind,
                params: whole()?,
            },
        })
    }

    fn id(&self, _n: u64) -> Id {
        // Opaque decimal strings, unique within the host (not only per extension).
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Id::Str(NEXT.fetch_add(1, Ordering::Relaxed).to_string().into())
    }

    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
        let id = id_text(id);
        let (name, content, is_error) = match result {
            Ok(v) => (
                v["name"].as_str().unwrap_or_default().to_string(),
                serde_json::from_value(v["content"].clone()).unwrap_or_default(),
                v["is_error"].as_bool().unwrap_or(false),
            ),
            Err(e) => (
                String::new(),
                vec![frames::ContentBlock::text(e.message)],
                true,
            ),
        };
        ToExtension::ToolResult {
            id,
            name,
            content,
            is_error,
            truncated: false,
        }
        .line()
    }

    fn cancel(&self, id: &Id, _fresh: Id) -> Option<String> {
        // Only to extensions that said they take it; an id that is not a tool call's is
        // ignored by the extension, as zot requires.
        self.tool_cancel
            .load(Ordering::Acquire)
            .then(|| ToExtension::ToolCancel { id: id_text(id) }.line())
    }
}

/// An id as zot writes it: the bare string.
pub(super) fn id_text(id: &Id) -> String {
    match id {
        Id::Str(s) => s.to_string(),
        Id::Num(n) => n.to_string(),
    }
}
