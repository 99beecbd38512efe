//! `yep manifest sync`: write what a server's handlers say of their tools (argument schemas,
//! output schemas, descriptions) into `plugin.json`, editing only those values so every other
//! field and the file's layout stay as written.

use super::json_edit::{Edits, Node, Style, indent_at, parse};
use serde_json::Value;
use std::path::Path;
use yep_host::Manifest;
use yep_host::capability::OfferedTool;
use yep_tools::doctor::drift::{Drift, drift};

/// The manifest's text brought in line with `served`, and every difference found: those it
/// wrote, and the declared tools no longer served (reported, never dropped).
pub fn sync(
    text: &str,
    path: &Path,
    manifest: &Manifest,
    served: &[OfferedTool],
) -> Result<(String, Vec<Drift>), String> {
    let found = drift(manifest, served);
    if found.iter().all(|d| matches!(d, Drift::Unserved { .. })) {
        return Ok((text.to_string(), found));
    }
    let root = parse(text).map_err(|e| format!("{}: {e}", path.display()))?;
    let facet = root
        .member("yolop")
        .map(|m| &m.value)
        .ok_or_else(|| format!("{}: no `yolop` object", path.display()))?;
    let style = Style::of(text);
    let mut edits = Edits::default();
    let tools = facet.member("tools").map(|m| &m.value);
    let by_name = |name: &str| served.iter().find(|s| s.name == name);
    for item in tools.map(Node::items).unwrap_or_default() {
        let Some(name) = item
            .member("name")
            .and_then(|m| serde_json::from_str::<String>(&text[m.value.start..m.value.end]).ok())
        else {
            continue;
        };
        let Some(s) = by_name(&name) else { continue };
        for d in found.iter().filter(|d| d.tool() == name) {
            let (key, value) = match d {
                Drift::Schema { .. } => ("schema", s.schema.clone()),
                Drift::OutputSchema { .. } => ("output_schema", s.output_schema.clone()),
                Drift::Description { .. } => {
                    ("description", s.description.clone().map(Value::from))
                }
                Drift::New { .. } | Drift::Unserved { .. } => continue,
            };
            if let Some(value) = value {
                edits.set_member(text, &style, item, key, &value);
            }
        }
    }
    let new: Vec<&OfferedTool> = found
        .iter()
        .filter_map(|d| match d {
            Drift::New { tool } => by_name(tool),
            _ => None,
        })
        .collect();
    if !new.is_empty() {
        add_tools(text, &style, facet, tools, &new, &mut edits);
    }
    let after = edits.apply(text);
    // What is written must be a valid manifest (a served tool name no manifest may declare
    // stops it here) that is now in sync.
    let synced = Manifest::parse(&after, path).map_err(|e| {
        format!("the synced manifest would not be valid, so nothing was written: {e}")
    })?;
    // A served schema that does not compile would refuse every call: not written.
    let written = |tool: &str| {
        found
            .iter()
            .any(|d| d.tool() == tool && matches!(d, Drift::Schema { .. } | Drift::New { .. }))
    };
    let broken: Vec<String> = yep_host::tool_args::ToolSchemas::from_manifest(&synced)
        .invalid()
        .into_iter()
        .filter(|(tool, _)| written(tool))
        .map(|(tool, why)| format!("`{tool}`: {why}"))
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "the server's schema is not valid JSON Schema, so nothing was written: {}",
            broken.join("; ")
        ));
    }
    let left: Vec<Drift> = drift(&synced, served)
        .into_iter()
        .filter(|d| !matches!(d, Drift::Unserved { .. }))
        .collect();
    if !left.is_empty() {
        return Err(format!(
            "internal error: the synced manifest still differs ({left:?}); nothing was written"
        ));
    }
    Ok((after, found))
}

/// A served tool as a manifest entry: name first, then what the server says of it.
fn entry(t: &OfferedTool) -> Vec<(&'static str, Value)> {
    let mut members = vec![("name", Value::from(t.name.clone()))];
    if let Some(d) = t.description.as_ref().filter(|d| !d.is_empty()) {
        members.push(("description", Value::from(d.clone())));
    }
    if let Some(s) = &t.schema {
        members.push(("schema", s.clone()));
    }
    if let Some(s) = &t.output_schema {
        members.push(("output_schema", s.clone()));
    }
    members
}

/// Append `new` to the facet's `tools` array, or give the facet one.
fn add_tools(
    text: &str,
    style: &Style,
    facet: &Node,
    tools: Option<&Node>,
    new: &[&OfferedTool],
    edits: &mut Edits,
) {
    let render = |t: &OfferedTool, base: &str, one_line: bool| {
        style.render_object(&entry(t), base, one_line)
    };
    match tools.and_then(|t| t.items().last().map(|last| (t, last))) {
        Some((array, last)) => {
            let one_line = style.compact() || !text[array.start..array.end].contains('\n');
            let base = indent_at(text, last.start);
            let added: String = new
                .iter()
                .map(|t| {
                    if one_line {
                        let (sep, _) = style.separators();
                        format!("{sep}{}", render(t, "", true))
                    } else {
                        format!(",\n{base}{}", render(t, base, false))
                    }
                })
                .collect();
            edits.insert(last.end, added);
        }
        None => {
            // No array, or an empty one: the facet's `tools` member is (re)written whole.
            edits.set_member_with(text, style, facet, "tools", &|base, one_line| {
                if one_line {
                    let items: Vec<String> = new.iter().map(|t| render(t, "", true)).collect();
                    let (sep, _) = style.separators();
                    return format!("[{}]", items.join(sep));
                }
                let inner = format!("{base}{}", style.unit());
                let items: Vec<String> = new
                    .iter()
                    .map(|t| format!("{inner}{}", render(t, &inner, false)))
                    .collect();
                format!("[\n{}\n{base}]", items.join(",\n"))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served(name: &str, schema: Value, description: &str) -> OfferedTool {
        OfferedTool {
            description: Some(description.into()),
            schema: Some(schema),
            ..OfferedTool::named(name)
        }
    }

    const STALE: &str = r#"{
  "name": "wx",
  "version": "0.1.0",
  "description": "weather",
  "yolop": {
    "capabilityServer": { "command": "bin/wx-server" },
    "tools": [
      {
        "name": "forecast",
        "description": "The weather",
        "schema": { "type": "object", "properties": { "city": { "type": "string" } } },
        "never_defer": true
      },
      { "name": "gone" }
    ],
    "status": true
  },
  "engines": { "yolop": ">=0.11" }
}
"#;

    #[test]
    fn a_stale_manifest_gets_the_served_schemas_and_nothing_else_moves() {
        let path = Path::new("plugin.json");
        let manifest = Manifest::parse(STALE, path).unwrap();
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}}, "required": ["city"]});
        let tools = [
            served("forecast", schema.clone(), "The weather"),
            served("alerts", json!({"type": "object"}), "Weather alerts"),
        ];
        let (after, changes) = sync(STALE, path, &manifest, &tools).unwrap();
        assert_eq!(
            after,
            r#"{
  "name": "wx",
  "version": "0.1.0",
  "description": "weather",
  "yolop": {
    "capabilityServer": { "command": "bin/wx-server" },
    "tools": [
      {
        "name": "forecast",
        "description": "The weather",
        "schema": {
          "properties": {
            "city": {
              "type": "string"
            },
            "days": {
              "default": 3,
              "type": "integer"
            }
          },
          "required": [
            "city"
          ],
          "type": "object"
        },
        "never_defer": true
      },
      { "name": "gone" },
      {
        "name": "alerts",
        "description": "Weather alerts",
        "schema": {
          "type": "object"
        }
      }
    ],
    "status": true
  },
  "engines": { "yolop": ">=0.11" }
}
"#
        );
        assert_eq!(
            changes,
            vec![
                Drift::Schema {
                    tool: "forecast".into(),
                    detail: "the code takes `days` too; which arguments are required changed"
                        .into()
                },
                Drift::Unserved {
                    tool: "gone".into()
                },
                Drift::New {
                    tool: "alerts".into()
                },
            ]
        );
        // Once in sync, a second run changes nothing.
        let synced = Manifest::parse(&after, path).unwrap();
        let (again, changes) = sync(&after, path, &synced, &tools).unwrap();
        assert_eq!(again, after);
        assert_eq!(changes.len(), 1, "{changes:?}");
    }

    #[test]
    fn a_served_schema_that_does_not_compile_is_not_written() {
        let path = Path::new("plugin.json");
        let manifest = Manifest::parse(STALE, path).unwrap();
        let tools = [served("forecast", json!({"type": 5}), "The weather")];
        let err = sync(STALE, path, &manifest, &tools).unwrap_err();
        assert!(
            err.contains("`forecast`") && err.contains("not valid JSON Schema"),
            "{err}"
        );
    }

    #[test]
    fn a_compact_manifest_stays_compact_and_a_missing_tools_array_is_made() {
        let text = r#"{"name":"wx","yolop":{"capabilityServer":{"command":"x"},"status":true}}"#;
        let path = Path::new("plugin.json");
        let manifest = Manifest::parse(text, path).unwrap();
        let tools = [served("t", json!({"type": "object"}), "")];
        let (after, _) = sync(text, path, &manifest, &tools).unwrap();
        assert_eq!(
            after,
            r#"{"name":"wx","yolop":{"capabilityServer":{"command":"x"},"status":true,"tools":[{"name":"t","schema":{"type":"object"}}]}}"#
        );
    }
}
