//! Where what a server says of its tools (the schemas and descriptions its handlers derive)
//! differs from its manifest. `yep doctor` fails on it; `yep manifest sync` writes it back.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use yep_host::capability::OfferedTool;
use yep_host::manifest::Manifest;

/// One difference between a served tool and the manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Drift {
    /// The served argument schema differs from the declared one; `detail` says how.
    Schema { tool: String, detail: String },
    /// The served output schema differs (or is not declared).
    OutputSchema { tool: String },
    /// The served description differs.
    Description { tool: String },
    /// Served, but not declared: a session withholds it.
    New { tool: String },
    /// Declared, but not served this run.
    Unserved { tool: String },
}

impl Drift {
    pub fn tool(&self) -> &str {
        match self {
            Drift::Schema { tool, .. }
            | Drift::OutputSchema { tool }
            | Drift::Description { tool }
            | Drift::New { tool }
            | Drift::Unserved { tool } => tool,
        }
    }
}

/// Every difference, in manifest order then served order. A tool that says nothing of its
/// schema or description (a raw handler) is compared by name only.
pub fn drift(manifest: &Manifest, served: &[OfferedTool]) -> Vec<Drift> {
    let mut out = Vec::new();
    for declared in &manifest.yolop.tools {
        let Some(s) = served.iter().find(|s| s.name == declared.name) else {
            out.push(Drift::Unserved {
                tool: declared.name.clone(),
            });
            continue;
        };
        if let Some(schema) = &s.schema
            && schema != &declared.schema
        {
            out.push(Drift::Schema {
                tool: declared.name.clone(),
                detail: how_schemas_differ(&declared.schema, schema),
            });
        }
        if let Some(output) = &s.output_schema
            && Some(output) != declared.output_schema.as_ref()
        {
            out.push(Drift::OutputSchema {
                tool: declared.name.clone(),
            });
        }
        if let Some(description) = s.description.as_deref().filter(|d| !d.is_empty())
            && description != declared.description
        {
            out.push(Drift::Description {
                tool: declared.name.clone(),
            });
        }
    }
    for s in served {
        if manifest.tool(&s.name).is_none() {
            out.push(Drift::New {
                tool: s.name.clone(),
            });
        }
    }
    out
}

fn properties(schema: &Value) -> BTreeSet<&str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// At most this many argument names are listed in one message.
const SHOWN: usize = 10;

/// What changed between two argument schemas, as an author reads it: the arguments added,
/// removed and changed, or just that it differs.
pub fn how_schemas_differ(declared: &Value, served: &Value) -> String {
    let (old, new) = (properties(declared), properties(served));
    // The names are the server's words, shown in a terminal: escaped, and only so many.
    let list = |names: Vec<&str>| {
        let mut shown: Vec<String> = names
            .iter()
            .take(SHOWN)
            .map(|n| format!("`{}`", yep_host::text::escape(n)))
            .collect();
        if names.len() > SHOWN {
            shown.push(format!("{} more", names.len() - SHOWN));
        }
        shown.join(", ")
    };
    let mut parts = Vec::new();
    let added: Vec<&str> = new.difference(&old).copied().collect();
    let removed: Vec<&str> = old.difference(&new).copied().collect();
    let changed: Vec<&str> = old
        .intersection(&new)
        .copied()
        .filter(|p| declared["properties"][p] != served["properties"][p])
        .collect();
    if !added.is_empty() {
        parts.push(format!("the code takes {} too", list(added)));
    }
    if !removed.is_empty() {
        parts.push(format!("no longer takes {}", list(removed)));
    }
    if !changed.is_empty() {
        parts.push(format!("{} changed", list(changed)));
    }
    if declared.get("required") != served.get("required") {
        parts.push("which arguments are required changed".into());
    }
    if parts.is_empty() {
        "the schema differs".into()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_names_from_a_server_are_escaped_and_bounded() {
        let declared = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let mut props = serde_json::Map::new();
        props.insert("city".into(), json!({"type": "integer"}));
        props.insert("x\nFAIL  tools  fake row\u{1b}[2J".into(), json!({}));
        for i in 0..30 {
            props.insert(format!("p{i:02}"), json!({}));
        }
        let served = json!({"type": "object", "properties": props});
        let said = how_schemas_differ(&declared, &served);
        assert!(!said.contains('\n') && !said.contains('\u{1b}'), "{said:?}");
        assert!(said.contains("21 more"), "{said}");
        assert!(said.contains("`city` changed"), "{said}");
    }
}
