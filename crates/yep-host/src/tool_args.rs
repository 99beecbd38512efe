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
pub(crate) enum ArgsError {
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
    pub(crate) fn check(&self, tool: &str, args: &Value) -> Result<(), ArgsError> {
        match self.tools.get(tool) {
            None => Ok(()),
            Some(Compiled::Invalid(why)) => Err(ArgsError::BadSchema(why.clone())),
            Some(Compiled::Valid(v)) if v.is_valid(args) => Ok(()),
            Some(Compiled::Valid(v)) => Err(ArgsError::Invalid(problems(v, args))),
        }
    }
}

/// Why no arguments could be built for a probe call of a tool ([`probe_args`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeArgsError {
    /// The tool's schema does not compile (every call is refused anyway).
    #[error("its argument schema is not valid JSON Schema: {0}")]
    BadSchema(String),
    /// The simplest value of each required field breaks the schema (a `pattern`, a `oneOf`,
    /// a `$ref`, bounds that leave out the simplest value, …): what it broke.
    #[error("the simplest arguments its schema suggests break it: {}", .0.join("; "))]
    Unsatisfied(Vec<String>),
}

/// The deepest a schema is followed when building probe arguments.
const MAX_PROBE_DEPTH: usize = 32;
/// The longest string, and the longest array, a probe value is made of.
const MAX_PROBE_LEN: u64 = 256;

/// Arguments for a call made only to see that a tool answers (`yep doctor`'s probe), built
/// from its argument `schema`: every required property gets the simplest value its schema
/// allows (its `const`, first `enum` value or `default` when given; else by `type`: `""` or
/// `minLength` letters, the `minimum` or 0, `false`, `null`, `minItems` copies of an item,
/// an object of its own required properties). The result is checked by the validator a call
/// is checked by (`ToolSchemas::check`); when it fails, it is not used and the error says
/// what it broke.
pub fn probe_args(schema: &Value) -> Result<Value, ProbeArgsError> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ProbeArgsError::BadSchema(cut(&escape(&e.to_string()))))?;
    // Arguments are an object, whatever a schema without a `type` suggests.
    let args = match simplest(schema, 0) {
        Value::Object(args) => Value::Object(args),
        _ if schema.get("type").is_none() => Value::Object(serde_json::Map::new()),
        other => other,
    };
    if validator.is_valid(&args) {
        Ok(args)
    } else {
        Err(ProbeArgsError::Unsatisfied(problems(&validator, &args)))
    }
}

/// The simplest value `schema` suggests (see [`probe_args`]); not checked against it.
fn simplest(schema: &Value, depth: usize) -> Value {
    let Some(s) = schema.as_object().filter(|_| depth < MAX_PROBE_DEPTH) else {
        return Value::Null;
    };
    if let Some(v) = s.get("const") {
        return v.clone();
    }
    if let Some(v) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return v.clone();
    }
    if let Some(v) = s.get("default") {
        return v.clone();
    }
    let kind = match s.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(types)) => types.iter().find_map(Value::as_str),
        _ => None,
    };
    let length = |key: &str| s.get(key).and_then(Value::as_u64).unwrap_or(0);
    match kind {
        Some("string") => {
            Value::String("a".repeat(length("minLength").min(MAX_PROBE_LEN) as usize))
        }
        Some(kind @ ("integer" | "number")) => {
            let least = match (s.get("minimum"), s.get("exclusiveMinimum")) {
                (Some(min), _) => min.as_f64(),
                (None, Some(min)) => min.as_f64().map(|m| m + 1.0),
                (None, None) => None,
            };
            match least {
                None => Value::from(0),
                Some(n) if kind == "integer" || n.fract() == 0.0 => Value::from(n.ceil() as i64),
                Some(n) => Value::from(n),
            }
        }
        Some("boolean") => Value::Bool(false),
        Some("array") => {
            let item = s
                .get("items")
                .map_or(Value::Null, |i| simplest(i, depth + 1));
            Value::Array(vec![item; length("minItems").min(MAX_PROBE_LEN) as usize])
        }
        Some("object") => object(s, depth),
        None if s.contains_key("properties") || s.contains_key("required") => object(s, depth),
        // An alternative: its first branch (the check says whether that was enough).
        None => match ["anyOf", "oneOf"]
            .iter()
            .find_map(|k| s.get(*k).and_then(Value::as_array).and_then(|a| a.first()))
        {
            Some(first) => simplest(first, depth + 1),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// An object of `schema`'s required properties, each its simplest value.
fn object(schema: &serde_json::Map<String, Value>, depth: usize) -> Value {
    let properties = schema.get("properties");
    let required = schema.get("required").and_then(Value::as_array);
    let fields = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| {
            let field = properties.and_then(|p| p.get(name));
            let value = field.map_or(Value::Null, |f| simplest(f, depth + 1));
            (name.to_string(), value)
        });
    Value::Object(fields.collect())
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
    fn probe_args_give_each_required_field_its_simplest_value() {
        let schema = json!({"type": "object", "properties": {
            "who": {"type": "string"},
            "n": {"type": "integer", "minimum": 2},
            "ratio": {"type": "number", "exclusiveMinimum": 0.5},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "tag": {"type": ["string", "null"], "minLength": 3},
            "on": {"type": "boolean"},
            "list": {"type": "array", "items": {"type": "integer"}, "minItems": 2},
            "nested": {"type": "object", "properties": {"k": {"const": 7}}, "required": ["k"]},
            "optional": {"type": "string"}
        }, "required": ["who", "n", "ratio", "mode", "tag", "on", "list", "nested"]});
        assert_eq!(
            probe_args(&schema),
            Ok(
                json!({"who": "", "n": 2, "ratio": 1.5, "mode": "fast", "tag": "aaa",
                      "on": false, "list": [0, 0], "nested": {"k": 7}})
            )
        );
        assert_eq!(probe_args(&json!({})), Ok(json!({})));
        assert_eq!(probe_args(&json!({"type": "object"})), Ok(json!({})));
    }

    #[test]
    fn probe_args_that_break_the_schema_say_what_they_broke() {
        let pattern = json!({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}}, "required": ["id"]});
        let Err(ProbeArgsError::Unsatisfied(why)) = probe_args(&pattern) else {
            panic!("a pattern the empty string breaks");
        };
        assert!(why[0].starts_with("/id:"), "{why:?}");
        assert!(matches!(
            probe_args(&json!({"type": "no-such-type"})),
            Err(ProbeArgsError::BadSchema(_))
        ));
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
