//! The shape of a tool's arguments: their keys and JSON types, recursively, never a value.
//! `{"path": "a.txt", "opts": {"n": 3}}` is `{"path":"string","opts":{"n":"number"}}`; an
//! array is the shape of its first item (`["mixed"]` when its items differ in type). Bounded,
//! since it runs on the call's path: past [`MAX_DEPTH`] levels or [`MAX_NODES`] values the
//! rest is `"…"`, and a key longer than [`MAX_KEY`] bytes is cut.

use serde_json::Value;
use serde_json::value::RawValue;

/// How deep the shape goes.
const MAX_DEPTH: usize = 6;

/// How many values the shape describes in all.
const MAX_NODES: usize = 64;

/// The longest key kept whole, in bytes.
const MAX_KEY: usize = 64;

/// How many of an array's items are looked at to tell whether their types differ.
const ITEMS_COMPARED: usize = 16;

/// The shape of `value`, as JSON text.
pub fn shape(value: &Value) -> Box<RawValue> {
    let mut out = String::with_capacity(64);
    let mut left = MAX_NODES;
    write(&mut out, value, 0, &mut left);
    RawValue::from_string(out).unwrap_or_else(|_| unknown())
}

/// The shape of what could not be described (never expected: every shape is valid JSON).
fn unknown() -> Box<RawValue> {
    RawValue::from_string("\"…\"".to_string()).expect("a JSON string")
}

/// A value's JSON type, as the shape names it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn write(out: &mut String, value: &Value, depth: usize, left: &mut usize) {
    if *left == 0 || depth >= MAX_DEPTH && matches!(value, Value::Array(_) | Value::Object(_)) {
        out.push_str("\"…\"");
        return;
    }
    *left -= 1;
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if *left == 0 {
                    out.push_str(if i == 0 {
                        "\"…\":\"…\""
                    } else {
                        ",\"…\":\"…\""
                    });
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                push_key(out, key);
                out.push(':');
                write(out, item, depth + 1, left);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            if let Some(first) = items.first() {
                let kind = type_name(first);
                let mixed = items
                    .iter()
                    .take(ITEMS_COMPARED)
                    .any(|i| type_name(i) != kind);
                match mixed {
                    true => out.push_str("\"mixed\""),
                    false => write(out, first, depth + 1, left),
                }
            }
            out.push(']');
        }
        scalar => {
            out.push('"');
            out.push_str(type_name(scalar));
            out.push('"');
        }
    }
}

/// `key` as a JSON string, cut to [`MAX_KEY`] bytes (at a character boundary, marked `…`).
fn push_key(out: &mut String, key: &str) {
    let cut = match key.len() > MAX_KEY {
        true => {
            let mut end = MAX_KEY;
            while !key.is_char_boundary(end) {
                end -= 1;
            }
            Some(&key[..end])
        }
        false => None,
    };
    let kept = cut.unwrap_or(key);
    // Serialising a string to a `String` cannot fail.
    let quoted = serde_json::to_string(kept).unwrap_or_default();
    match cut {
        Some(_) => {
            out.push_str(&quoted[..quoted.len() - 1]);
            out.push_str("…\"");
        }
        None => out.push_str(&quoted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(value: Value) -> Value {
        serde_json::from_str(shape(&value).get()).unwrap()
    }

    #[test]
    fn keys_and_types_are_kept_and_no_value_is() {
        let args = json!({"path": "/etc/secret-file", "opts": {"n": 3, "deep": true, "x": null}});
        assert_eq!(
            shown(args.clone()),
            json!({"path": "string", "opts": {"n": "number", "deep": "boolean", "x": "null"}})
        );
        let text = shape(&args).get().to_string();
        assert!(
            !text.contains("secret-file") && !text.contains('3'),
            "{text}"
        );
    }

    #[test]
    fn an_array_is_the_shape_of_its_items() {
        assert_eq!(
            shown(json!({"files": [{"name": "a"}, {"name": "b"}]})),
            json!({"files": [{"name": "string"}]})
        );
        assert_eq!(shown(json!({"xs": [1, "two"]})), json!({"xs": ["mixed"]}));
        assert_eq!(shown(json!({"xs": []})), json!({"xs": []}));
        assert_eq!(shown(json!("just text")), json!("string"));
    }

    #[test]
    fn deep_or_wide_arguments_are_cut_and_stay_valid_json() {
        let mut deep = json!(1);
        for _ in 0..20 {
            deep = json!({ "d": deep });
        }
        let text = shape(&deep).get().to_string();
        assert_eq!(text.matches("\"d\"").count(), MAX_DEPTH, "{text}");
        assert!(text.contains('…'));
        let wide: serde_json::Map<String, Value> =
            (0..1000).map(|i| (format!("k{i}"), json!(i))).collect();
        let text = shape(&Value::Object(wide)).get().to_string();
        assert!(text.matches("\"k").count() < MAX_NODES, "{text}");
        let long = "é".repeat(100);
        let text = shape(&json!({ long: 1 })).get().to_string();
        assert!(text.len() < 100 && text.contains('…'), "{text}");
    }
}
