//! `pre_tool_use` and `post_tool_use` around every tool call, for the subscriptions the
//! manifests approved.

use super::{ExtensionHost, Loaded};
use crate::manifest::{HookEvent, OnError};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use yep_protocol::HookFireParams;

/// What the pre hooks decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PreDecision {
    /// Go ahead, with these arguments (rewritten by the extensions listed, in order).
    Allow {
        args: Value,
        rewritten_by: Vec<String>,
    },
    /// Do not run the tool.
    Block {
        extension: String,
        reason: String,
        user_message: Option<String>,
    },
}

/// `*` is the only wildcard; the pattern is anchored at both ends.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The subscriptions of `loaded` for this event and tool: `(timeout, on_error)` each.
fn subscriptions(loaded: &Loaded, event: HookEvent, tool: &str) -> Vec<(Duration, OnError)> {
    loaded
        .manifest
        .yolop
        .hooks
        .iter()
        .filter(|h| h.event == event && glob_matches(&h.tool_name_glob, tool))
        .map(|h| (Duration::from_millis(h.timeout_ms), h.on_error))
        .collect()
}

impl ExtensionHost {
    /// Fire `pre_tool_use` for `tool` on every matching subscription, in enable order. Each
    /// extension sees the previous one's rewrite; the first block wins. A tool nobody
    /// subscribed to costs no RPC.
    pub async fn pre_tool_use(&self, tool: &str, args: Value) -> PreDecision {
        let mut args = args;
        let mut rewritten_by = Vec::new();
        for loaded in self.loaded() {
            for (timeout, on_error) in subscriptions(&loaded, HookEvent::PreToolUse, tool) {
                let params = HookFireParams {
                    event: "pre_tool_use".into(),
                    tool_name: tool.into(),
                    args: args.clone(),
                    result: None,
                };
                // The bound covers starting the server too (a backoff or a slow handshake).
                let fired =
                    match tokio::time::timeout(timeout, loaded.ext.fire_hook(&params, timeout))
                        .await
                    {
                        Ok(Ok(d)) => Ok(d),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!(
                            "timed out after {} ms (including start-up)",
                            timeout.as_millis()
                        )),
                    };
                match fired {
                    Ok(d) if d.block => {
                        let reason = if d.reason.is_empty() {
                            format!("blocked by extension `{}`", loaded.name)
                        } else {
                            d.reason
                        };
                        return PreDecision::Block {
                            extension: loaded.name.clone(),
                            reason,
                            user_message: d.user_message,
                        };
                    }
                    Ok(d) => {
                        if let Some(new) = d.modified_args {
                            args = new;
                            rewritten_by.push(loaded.name.clone());
                        }
                    }
                    Err(err) if on_error == OnError::Block => {
                        return PreDecision::Block {
                            extension: loaded.name.clone(),
                            reason: format!(
                                "extension `{}` hook failed ({err}); it is set to block on error",
                                loaded.name
                            ),
                            user_message: None,
                        };
                    }
                    Err(err) => {
                        tracing::warn!(extension = %loaded.name, "pre_tool_use hook failed, continuing: {err}")
                    }
                }
            }
        }
        PreDecision::Allow { args, rewritten_by }
    }

    /// Fire `post_tool_use` in the background: observers only, never awaited by the caller.
    /// `result` is the tool's value, or its error message.
    pub fn post_tool_use(&self, tool: &str, args: &Value, result: Result<&Value, &str>) {
        let result = match result {
            Ok(v) => v.clone(),
            Err(message) => json!({ "error": message }),
        };
        for loaded in self.loaded() {
            for (timeout, _) in subscriptions(&loaded, HookEvent::PostToolUse, tool) {
                let params = HookFireParams {
                    event: "post_tool_use".into(),
                    tool_name: tool.into(),
                    args: args.clone(),
                    result: Some(result.clone()),
                };
                let loaded = Arc::clone(&loaded);
                tokio::spawn(async move {
                    if let Err(err) = loaded.ext.fire_hook(&params, timeout).await {
                        tracing::warn!(extension = %loaded.name, "post_tool_use hook failed: {err}");
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs_use_only_star_and_are_anchored() {
        assert!(glob_matches("*", "bash"));
        assert!(glob_matches("git_*", "git_commit"));
        assert!(!glob_matches("git_*", "my_git_commit"));
        assert!(glob_matches("*_file", "read_file"));
        assert!(glob_matches("a*b*c", "a_x_b_y_c"));
        assert!(!glob_matches("a*b*c", "a_x_c"));
        assert!(glob_matches("bash", "bash"));
        assert!(!glob_matches("bash", "bash2"));
        assert!(glob_matches("ba?h", "ba?h"), "`?` is literal");
        assert!(!glob_matches("ab*ba", "aba"), "the ends must not overlap");
    }
}
