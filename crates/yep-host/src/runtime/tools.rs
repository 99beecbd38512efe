//! The tools the model sees: [`ToolDefinition`], the names the extensions' and MCP servers'
//! tools get in the table (collisions, never-defer budgets), and listing and searching them.

use super::{ExtensionHost, Loaded, MCP_PREFIX, mcp};
use crate::health::HealthEvent;
use crate::store::Home;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// At most this many tools per extension are always loaded; the rest are deferred.
pub(crate) const NEVER_DEFER_BUDGET: usize = 8;

/// A tool the model can see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The name to call it by (`<ext>__<tool>` after a collision).
    pub name: String,
    /// The extension's own name for it.
    pub tool: String,
    pub extension: String,
    pub description: String,
    pub schema: Value,
    /// Always in the model's context.
    pub never_defer: bool,
    /// Found through `search_tools`.
    pub deferred: bool,
    /// The schema of its structured result, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints about what it does (an MCP tool's `annotations`), when it gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// An MCP server's tool: `extension` is the server's name.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mcp: bool,
}

/// The name of the meta-tool [`ToolDefinition::search_tools`] describes and
/// [`ExtensionHost::dispatch_search_tools`] answers. Put it in
/// [`HostOptions::builtins`](super::HostOptions::builtins) when you offer it, so no extension
/// tool takes the name.
pub const SEARCH_TOOLS: &str = "search_tools";

impl ToolDefinition {
    /// The argument schema; an object with no properties when the manifest gave none.
    pub fn parameters(&self) -> Value {
        if self.schema.is_object() {
            self.schema.clone()
        } else {
            serde_json::json!({"type": "object", "properties": {}})
        }
    }

    /// As OpenAI's Chat Completions and Responses APIs take a function tool.
    pub fn to_openai(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            }
        })
    }

    /// As Anthropic's Messages API takes a tool.
    pub fn to_anthropic(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters(),
        })
    }

    /// The `search_tools` meta-tool, for a model that sees only the always-loaded tools: it
    /// finds deferred tools by words of their name and description.
    pub fn search_tools() -> ToolDefinition {
        ToolDefinition {
            name: SEARCH_TOOLS.into(),
            tool: SEARCH_TOOLS.into(),
            extension: String::new(),
            description: "Find more tools: deferred tools whose name or description mentions every word of the query. Call one by the name returned.".into(),
            schema: serde_json::json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "words to look for"}},
                "required": ["query"],
            }),
            never_defer: true,
            deferred: false,
            output_schema: None,
            annotations: None,
            mcp: false,
        }
    }
}

/// The loaded extensions' tools, in enable order: named by [`tool_name`] (the name added to
/// `taken`), each extension's first never-defer ones within [`NEVER_DEFER_BUDGET`]. A tool
/// whose argument schema is not valid JSON Schema, and a refused name, are told in `warnings`.
pub(super) fn extension_tools(
    loaded: &[Arc<Loaded>],
    taken: &mut BTreeSet<String>,
    warnings: &mut Vec<HealthEvent>,
) -> Vec<ToolDefinition> {
    let names: Vec<&str> = loaded.iter().map(|l| l.name.as_str()).collect();
    let mut tools = Vec::new();
    for l in loaded {
        let mut budget = NEVER_DEFER_BUDGET;
        for (tool, why) in l.ext.spec().tool_schemas.invalid() {
            warnings.push(HealthEvent::RefusedTool {
                extension: l.name.clone(),
                tool: tool.to_string(),
                message: format!(
                    "extension `{}`: calls to tool `{tool}` are refused: its argument schema is not valid JSON Schema: {why}",
                    l.name
                ),
            });
        }
        for t in &l.manifest.yolop.tools {
            let Some(name) = tool_name(&names, taken, &l.name, &t.name, warnings) else {
                continue;
            };
            let never_defer = t.never_defer && budget > 0;
            if never_defer {
                budget -= 1;
            }
            tools.push(ToolDefinition {
                name,
                tool: t.name.clone(),
                extension: l.name.clone(),
                description: t.description.clone(),
                schema: t.schema.clone(),
                never_defer,
                deferred: !never_defer,
                output_schema: t.output_schema.clone(),
                annotations: None,
                mcp: false,
            });
        }
    }
    tools
}

/// The MCP servers' tools, each approved one as it is now (deferred, named by
/// [`mcp::tool_name`]; one whose name is in `taken` is refused), the rest withheld with a
/// warning in `warnings`. A running server's withheld tools are noted in the home.
pub(super) fn mcp_tools(
    home: &Home,
    mcp: &[Arc<mcp::McpEntry>],
    taken: &mut BTreeSet<String>,
    warnings: &mut Vec<HealthEvent>,
) -> Vec<ToolDefinition> {
    let mut tools = Vec::new();
    for entry in mcp {
        let server = &entry.source.name;
        let (offered, withheld) = entry.tools();
        if entry.ext.is_running() {
            let said: Vec<String> = withheld.iter().map(ToString::to_string).collect();
            let source = &entry.source;
            crate::store::mcp::note_withheld(home, server, &source.origin, &said);
        }
        for change in withheld {
            warnings.push(HealthEvent::Warning {
                extension: Some(server.clone()),
                message: format!(
                    "MCP server `{}`: {change}: withheld until `yep trust {}`",
                    crate::text::escape(server),
                    crate::text::escape(server)
                ),
            });
        }
        for t in offered {
            let name = mcp::tool_name(server, &t.name);
            if !taken.insert(name.clone()) {
                warnings.push(HealthEvent::RefusedTool {
                    extension: server.clone(),
                    tool: t.name.clone(),
                    message: format!(
                        "MCP server `{}`: tool `{}` would be `{name}`, which is taken; refusing it",
                        crate::text::escape(server),
                        crate::text::escape(&t.name)
                    ),
                });
                continue;
            }
            tools.push(ToolDefinition {
                name,
                tool: t.name,
                extension: server.clone(),
                description: t.description.unwrap_or_default(),
                schema: t.input_schema,
                never_defer: false,
                deferred: true,
                output_schema: t.output_schema,
                annotations: t.annotations,
                mcp: true,
            });
        }
    }
    tools
}

impl ExtensionHost {
    /// Every tool, with its extension and whether it is always loaded or deferred (a
    /// deferred tool a tool result activated is loaded from then on).
    pub fn tools(&self) -> Vec<ToolDefinition> {
        let mut tools = self.snapshot().tools.clone();
        let activated = self
            .core
            .events
            .activated
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !activated.is_empty() {
            for t in tools.iter_mut().filter(|t| t.deferred) {
                if activated.contains(&(t.extension.clone(), t.tool.clone())) {
                    t.deferred = false;
                }
            }
        }
        tools
    }

    /// Deferred tools whose name or description mentions every word of `query`.
    pub fn search_tools(&self, query: &str) -> Vec<ToolDefinition> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.tools()
            .into_iter()
            .filter(|t| t.deferred)
            .filter(|t| {
                let hay = format!("{} {} {}", t.name, t.extension, t.description).to_lowercase();
                words.iter().all(|w| hay.contains(w.as_str()))
            })
            .collect()
    }

    /// Answer a call of the [`ToolDefinition::search_tools`] meta-tool: `{"tools": [{name,
    /// description, schema}]}` for the deferred tools matching `args.query`.
    pub fn dispatch_search_tools(&self, args: &Value) -> Value {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let found: Vec<Value> = self
            .search_tools(query)
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "description": t.description,
                    "schema": t.parameters(),
                })
            })
            .collect();
        serde_json::json!({ "tools": found })
    }
}

/// The name `tool` of extension `ext` is registered under, or `None` when it is refused; the
/// name is added to `taken`. First come, first served in enable order, after the builtins. The
/// `<ext>__` prefix belongs to the loaded extension `ext`: another extension's tool spelled that
/// way is qualified too, so it cannot take the name a collision gives `ext`'s own tool. A
/// qualified name that is taken as well is refused, so every registered name is unique and a
/// warning never points at a name that calls someone else.
fn tool_name(
    loaded: &[&str],
    taken: &mut BTreeSet<String>,
    ext: &str,
    tool: &str,
    warnings: &mut Vec<HealthEvent>,
) -> Option<String> {
    let foreign = loaded.iter().find(|&&other| {
        other != ext
            && tool
                .strip_prefix(other)
                .is_some_and(|rest| rest.starts_with("__"))
    });
    let mcp = tool.starts_with(MCP_PREFIX);
    if foreign.is_none() && !mcp && !taken.contains(tool) {
        taken.insert(tool.to_string());
        return Some(tool.to_string());
    }
    let why = match foreign {
        Some(other) => format!("is in extension `{other}`'s `{other}__` namespace"),
        None if mcp => format!("is in the MCP servers' `{MCP_PREFIX}` namespace"),
        None => "collides with an existing tool".to_string(),
    };
    let qualified = format!("{ext}__{tool}");
    // An extension named `mcp` would qualify its names into the MCP servers' namespace.
    if !qualified.starts_with(MCP_PREFIX) && taken.insert(qualified.clone()) {
        warnings.push(HealthEvent::Warning {
            extension: Some(ext.to_string()),
            message: format!("tool `{tool}` of `{ext}` {why}; registered as `{qualified}`"),
        });
        Some(qualified)
    } else {
        warnings.push(HealthEvent::RefusedTool {
            extension: ext.to_string(),
            tool: tool.to_string(),
            message: match qualified.starts_with(MCP_PREFIX) {
                true => format!(
                    "tool `{tool}` of `{ext}` {why}, and `{qualified}` is in the MCP servers' `{MCP_PREFIX}` namespace; refusing it"
                ),
                false => format!(
                    "tool `{tool}` of `{ext}` {why}, and `{qualified}` is taken too; refusing it"
                ),
            },
        });
        None
    }
}
