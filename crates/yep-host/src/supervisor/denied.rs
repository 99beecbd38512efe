//! A server's last tool call that a sandbox denial failed, kept beside its log for
//! `yep doctor --sandbox-learn` to make again.

use serde_json::Value;
use std::path::PathBuf;

/// A server's last tool call whose failure came with a sandbox denial: kept beside its log
/// (`<log dir>/<name>.denied.json`, owner-only, its arguments at most [`DeniedCall::MAX_ARGS`]
/// bytes), for `yep doctor --sandbox-learn` to make again outside the sandbox. Arguments may
/// be secret: nothing shows them.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeniedCall {
    /// The tool, by the server's own name for it.
    pub tool: String,
    /// Its arguments (`null` when they were too big to keep).
    #[serde(rename = "arguments")]
    pub args: Value,
    /// Its arguments were more than [`DeniedCall::MAX_ARGS`] bytes, so none were kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_big: bool,
}

/// Arguments can be secrets: Debug shows their size only.
impl std::fmt::Debug for DeniedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeniedCall")
            .field("tool", &self.tool)
            .field("args_bytes", &self.args.to_string().len())
            .finish()
    }
}

impl DeniedCall {
    /// The most bytes of arguments kept (and of a file read back).
    pub const MAX_ARGS: usize = 64 * 1024;

    /// Where server `name`'s last denied call is kept.
    pub fn path(log_dir: &std::path::Path, name: &str) -> PathBuf {
        log_dir.join(format!("{name}.denied.json"))
    }

    /// Keep it as server `name`'s last denied call. Best effort: a call never fails for it.
    pub(crate) fn keep(mut self, log_dir: &std::path::Path, name: &str) {
        if self.args.to_string().len() > DeniedCall::MAX_ARGS {
            self.args = Value::Null;
            self.too_big = true;
        }
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let path = DeniedCall::path(log_dir, name);
        let mode = crate::store::fsutil::MODE_PRIVATE;
        if let Err(e) = crate::store::fsutil::write_atomic(&path, &body, mode) {
            tracing::debug!("failed to keep the denied call of `{name}`: {e}");
        }
    }

    /// Server `name`'s last denied call, if one was kept and reads as one (the file is input:
    /// bounded, and a tool name that is not one is none).
    pub fn last(log_dir: &std::path::Path, name: &str) -> Option<DeniedCall> {
        use std::io::Read;
        let file = std::fs::File::open(DeniedCall::path(log_dir, name)).ok()?;
        let mut text = Vec::new();
        let limit = (DeniedCall::MAX_ARGS + 4096) as u64;
        file.take(limit + 1).read_to_end(&mut text).ok()?;
        if text.len() as u64 > limit {
            return None;
        }
        let call: DeniedCall = serde_json::from_slice(&text).ok()?;
        let valid = !call.tool.is_empty()
            && call.tool.len() <= 256
            && !call.tool.chars().any(char::is_control);
        valid.then_some(call)
    }
}
