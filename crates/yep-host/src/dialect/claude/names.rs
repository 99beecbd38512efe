//! The agent's tool names as Claude Code's hooks know them (`Bash`, `Edit`, `Write`, …), and
//! the argument names they expect: an embedder maps its own in
//! [`HostOptions::claude_tool_names`](crate::runtime::HostOptions::claude_tool_names).

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One host tool as Claude Code names it: its name, and the host's argument names renamed to
/// Claude Code's (`cmd` → `command`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClaudeTool {
    pub name: String,
    /// Host argument name → Claude Code's.
    pub args: BTreeMap<String, String>,
}

impl ClaudeTool {
    /// `name`, with the host's arguments passed as they are.
    pub(crate) fn named(name: &str) -> ClaudeTool {
        ClaudeTool {
            name: name.to_string(),
            args: BTreeMap::new(),
        }
    }

    /// Also rename the host's argument `host` to Claude Code's `claude`.
    #[cfg(test)]
    pub(crate) fn arg(mut self, host: &str, claude: &str) -> ClaudeTool {
        self.args.insert(host.to_string(), claude.to_string());
        self
    }
}

/// The host's tools by Claude Code's names. The default covers the usual lowercase names
/// (`bash` and `shell` are `Bash`, `edit` is `Edit`, `write_file` is `Write`, …); a tool it
/// does not name keeps its own name (MCP tools are `mcp__<server>__<tool>` already, as in
/// Claude Code). Arguments keep the host's names unless a mapping renames them.
#[derive(Debug, Clone)]
pub struct ToolNames(Arc<BTreeMap<String, ClaudeTool>>);

/// The usual lowercase names of the tools Claude Code's hooks match.
const USUAL: [(&str, &str); 19] = [
    ("bash", "Bash"),
    ("shell", "Bash"),
    ("edit", "Edit"),
    ("edit_file", "Edit"),
    ("str_replace", "Edit"),
    ("multiedit", "MultiEdit"),
    ("multi_edit", "MultiEdit"),
    ("write", "Write"),
    ("write_file", "Write"),
    ("read", "Read"),
    ("read_file", "Read"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("webfetch", "WebFetch"),
    ("web_fetch", "WebFetch"),
    ("websearch", "WebSearch"),
    ("web_search", "WebSearch"),
    ("notebook_edit", "NotebookEdit"),
    ("todo_write", "TodoWrite"),
];

impl Default for ToolNames {
    fn default() -> Self {
        ToolNames::none().with_usual()
    }
}

/// A host tool's call as a Claude Code hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen<'a> {
    pub name: String,
    pub input: Value,
    mapping: Option<&'a ClaudeTool>,
}

impl Seen<'_> {
    /// A hook's `updatedInput` with the host's argument names back.
    pub(crate) fn host_input(&self, input: Value) -> Value {
        match (self.mapping, input) {
            (Some(tool), Value::Object(fields)) if !tool.args.is_empty() => {
                Value::Object(renamed(fields, |k| {
                    tool.args
                        .iter()
                        .find(|(_, claude)| *claude == k)
                        .map(|(host, _)| host.clone())
                }))
            }
            (_, input) => input,
        }
    }
}

fn renamed(fields: Map<String, Value>, to: impl Fn(&str) -> Option<String>) -> Map<String, Value> {
    fields
        .into_iter()
        .map(|(k, v)| (to(&k).unwrap_or(k), v))
        .collect()
}

impl ToolNames {
    /// No mapping: every tool keeps its own name.
    pub(crate) fn none() -> ToolNames {
        ToolNames(Arc::new(BTreeMap::new()))
    }

    /// The usual lowercase names added, where not mapped already.
    pub(crate) fn with_usual(self) -> ToolNames {
        let mut map = Arc::unwrap_or_clone(self.0);
        for (host, claude) in USUAL {
            map.entry(host.to_string())
                .or_insert_with(|| ClaudeTool::named(claude));
        }
        ToolNames(Arc::new(map))
    }

    /// Host tool `host` is Claude Code's `tool`.
    #[cfg(test)]
    pub(crate) fn with(self, host: &str, tool: ClaudeTool) -> ToolNames {
        let mut map = Arc::unwrap_or_clone(self.0);
        map.insert(host.to_string(), tool);
        ToolNames(Arc::new(map))
    }

    /// A call of host tool `host` with `args`, as a Claude Code hook sees it.
    pub(crate) fn claude(&self, host: &str, args: &Value) -> Seen<'_> {
        let mapping = self.0.get(host);
        let name = mapping.map_or(host, |t| t.name.as_str()).to_string();
        let input = match (mapping, args) {
            (Some(tool), Value::Object(fields)) if !tool.args.is_empty() => {
                Value::Object(renamed(fields.clone(), |k| tool.args.get(k).cloned()))
            }
            _ => args.clone(),
        };
        Seen {
            name,
            input,
            mapping,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usual_names_map_and_others_keep_their_own() {
        let names = ToolNames::default();
        assert_eq!(names.claude("bash", &json!({})).name, "Bash");
        assert_eq!(names.claude("write_file", &json!({})).name, "Write");
        assert_eq!(
            names.claude("mcp__fs__read", &json!({})).name,
            "mcp__fs__read"
        );
        assert_eq!(names.claude("Bash", &json!({})).name, "Bash");
    }

    #[test]
    fn a_mapping_renames_arguments_both_ways() {
        let names =
            ToolNames::default().with("run", ClaudeTool::named("Bash").arg("cmd", "command"));
        let seen = names.claude("run", &json!({"cmd": "ls", "cwd": "/"}));
        assert_eq!(seen.name, "Bash");
        assert_eq!(seen.input, json!({"command": "ls", "cwd": "/"}));
        assert_eq!(
            seen.host_input(json!({"command": "ls -a", "cwd": "/"})),
            json!({"cmd": "ls -a", "cwd": "/"})
        );
    }
}
