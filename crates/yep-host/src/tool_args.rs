//! Tool arguments checked against the `schema` the manifest declares, before a call reaches
//! the server. Each tool's schema is compiled once, when its server's spec is built from the
//! manifest; a call costs one `is_valid` walk, and messages are built only when it fails.
//!
//! A schema that does not compile (not JSON Schema, or a `$ref` the host cannot resolve) is
//! the package's bug: its tool is refused with a message saying so, rather than called
//! unchecked, so a package cannot opt out of the check by declaring a broken schema.

use crate::manifest::Manifest;
use crate::text::escape;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many problems are named in one error.
const MAX_PROBLEMS: usize = 5;
/// Each problem is cut to this many characters (it can quote a large argument).
const MAX_PROBLEM_CHARS: usize = 200;

enum Compiled {
    Valid(Box<jsonschema::Validator>),
    Invalid(String),
}

/// The compiled argument schema of every tool a manifest declares. Cheap to clone; the
/// default (no tools) checks nothing.
#[derive(Clone, Default)]
pub struct ToolSchemas {
    tools: Arc<HashMap<String, Compiled>>,
}

impl std::fmt::Debug for ToolSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_list().entries(names).finish()
    }
}

/// Why arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// The arguments break the schema: one line per problem, each naming the field and rule.
    Invalid(Vec<String>),
    /// The tool's own schema does not compile.
    BadSchema(String),
}

impl ToolSchemas {
    /// Compile the schema of each tool `manifest` declares.
    pub fn from_manifest(manifest: &Manifest) -> ToolSchemas {
        let tools = manifest
            .yolop
            .tools
            .iter()
            .map(|t| {
                let compiled = match jsonschema::validator_for(&t.schema) {
                    Ok(v) => Compiled::Valid(Box::new(v)),
                    Err(e) => Compiled::Invalid(cut(&escape(&e.to_string()))),
                };
                (t.name.clone(), compiled)
            })
            .collect();
        ToolSchemas {
            tools: Arc::new(tools),
        }
    }

    /// The tools whose schema does not compile, with why.
    pub fn invalid(&self) -> Vec<(String, String)> {
        let mut out: Vec<_> = self
            .tools
            .iter()
            .filter_map(|(name, c)| match c {
                Compiled::Invalid(why) => Some((name.clone(), why.clone())),
                Compiled::Valid(_) => None,
            })
            .collect();
        out.sort();
        out
    }

    /// Check `args` for `tool`. A tool with no schema here (not declared) passes: whether it
    /// may be called at all is decided elsewhere.
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), ArgsError> {
        match self.tools.get(tool) {
            None => Ok(()),
            Some(Compiled::Invalid(why)) => Err(ArgsError::BadSchema(why.clone())),
            Some(Compiled::Valid(v)) if v.is_valid(args) => Ok(()),
            Some(Compiled::Valid(v)) => Err(ArgsError::Invalid(problems(v, args))),
        }
    }
}

/// What is wrong with `args`, one line per error, each naming where (a JSON pointer into the
/// arguments) and the rule broken.
fn problems(validator: &jsonschema::Validator, args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for e in validator.iter_errors(args) {
        if out.len() == MAX_PROBLEMS {
            more += 1;
            continue;
        }
        let path = e.instance_path().to_string();
        let line = match e.kind() {
            ValidationErrorKind::Required { property } => {
                let field = property.as_str().map_or(property.to_string(), String::from);
                in_object(&path, format!("`{field}` is required"))
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => in_object(
                &path,
                format!(
                    "{} not allowed (additionalProperties)",
                    unexpected
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            _ => {
                let at = if path.is_empty() { "arguments" } else { &path };
                format!("{at}: {e} ({})", e.kind().keyword())
            }
        };
        out.push(cut(&escape(&line)));
    }
    // The validator's order follows the schema's keywords; sorted, a message is stable.
    out.sort();
    if more > 0 {
        out.push(format!("and {more} more"));
    }
    out
}

/// A problem of the object at `path`: the top-level arguments need no prefix.
fn in_object(path: &str, problem: String) -> String {
    if path.is_empty() {
        problem
    } else {
        format!("{path}: {problem}")
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_PROBLEM_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn schemas(tools: &str) -> ToolSchemas {
        let text = format!(
            r#"{{"name":"t","yolop":{{"capabilityServer":{{"command":"x"}},"tools":{tools}}}}}"#
        );
        ToolSchemas::from_manifest(&Manifest::parse(&text, Path::new("plugin.json")).unwrap())
    }

    #[test]
    fn a_missing_required_field_is_named() {
        let s = schemas(
            r#"[{"name":"echo","schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]"#,
        );
        assert_eq!(
            s.check("echo", &json!({})),
            Err(ArgsError::Invalid(vec!["`text` is required".into()]))
        );
        assert_eq!(s.check("echo", &json!({"text": "hi"})), Ok(()));
    }

    #[test]
    fn a_wrong_type_names_the_field_and_the_rule() {
        let s = schemas(
            r#"[{"name":"count","schema":{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}}]"#,
        );
        assert_eq!(
            s.check("count", &json!({"n": "x", "extra": 1})),
            Err(ArgsError::Invalid(vec![
                r#"/n: "x" is not of type "integer" (type)"#.into(),
                "`extra` not allowed (additionalProperties)".into(),
            ]))
        );
        assert_eq!(
            s.check("count", &json!([1])),
            Err(ArgsError::Invalid(vec![
                r#"arguments: [1] is not of type "object" (type)"#.into()
            ]))
        );
    }

    #[test]
    fn a_tool_without_a_schema_takes_an_object() {
        let s = schemas(r#"[{"name":"free"}]"#);
        assert_eq!(s.check("free", &json!({"anything": [1, 2]})), Ok(()));
        assert!(matches!(
            s.check("free", &json!("text")),
            Err(ArgsError::Invalid(_))
        ));
        assert_eq!(s.check("undeclared", &json!("text")), Ok(()));
    }

    #[test]
    fn an_invalid_schema_refuses_its_tool_only() {
        let s = schemas(
            r#"[{"name":"bad","schema":{"type":"no-such-type"}},{"name":"good","schema":{"type":"object"}}]"#,
        );
        assert!(matches!(
            s.check("bad", &json!({})),
            Err(ArgsError::BadSchema(_))
        ));
        assert_eq!(s.check("good", &json!({})), Ok(()));
        assert_eq!(
            s.invalid().into_iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["bad"]
        );
    }

    #[test]
    fn problems_are_bounded_and_escaped() {
        let props: Vec<String> = (0..9).map(|i| format!("\"f{i}\"")).collect();
        let s = schemas(&format!(
            r#"[{{"name":"many","schema":{{"type":"object","required":[{}]}}}},{{"name":"s","schema":{{"type":"object","properties":{{"v":{{"type":"integer"}}}}}}}}]"#,
            props.join(",")
        ));
        let Err(ArgsError::Invalid(lines)) = s.check("many", &json!({})) else {
            panic!("expected invalid");
        };
        assert_eq!(lines.len(), MAX_PROBLEMS + 1);
        assert_eq!(lines.last().unwrap(), "and 4 more");
        let Err(ArgsError::Invalid(lines)) =
            s.check("s", &json!({"v": format!("\u{1b}[2J{}", "x".repeat(500))}))
        else {
            panic!("expected invalid");
        };
        assert!(!lines[0].contains('\u{1b}'), "{lines:?}");
        assert!(
            lines[0].chars().count() <= MAX_PROBLEM_CHARS + 1,
            "{lines:?}"
        );
    }
}
