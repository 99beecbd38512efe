//! The committed schema artifacts are what the types generate, and they cover yolop's.

use serde_json::Value;
use std::path::PathBuf;

fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// yolop-yep 0.5.0's published artifacts, copied verbatim (see the README beside them).
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/yolop-yep-v1")
        .join(name)
}

fn read_json(path: PathBuf) -> Value {
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn committed_schema_files_are_up_to_date() {
    for (name, contents) in yep_protocol::schema::artifacts() {
        let path = repo_file(&format!("schema/yep/v1/{name}"));
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == contents,
            "{} is stale; run: cargo run -p yep-protocol --features schema --bin yep-schema-gen",
            path.display()
        );
    }
}

/// Every property of `reference` must exist in `ours` (recursively through `properties`).
fn assert_covers(path: &str, reference: &Value, ours: &Value) {
    let Some(props) = reference.get("properties").and_then(Value::as_object) else {
        return;
    };
    let our_props = ours.get("properties").and_then(Value::as_object);
    for (field, ref_schema) in props {
        let ours = our_props
            .and_then(|p| p.get(field))
            .unwrap_or_else(|| panic!("{path}.{field} is in yolop's schema but not ours"));
        for key in ["type", "default", "format"] {
            if let Some(want) = ref_schema.get(key) {
                assert_eq!(
                    ours.get(key),
                    Some(want),
                    "{path}.{field}: `{key}` differs from yolop's"
                );
            }
        }
        if let Some(want) = ref_schema.get("$ref") {
            assert_eq!(
                ours.get("$ref"),
                Some(want),
                "{path}.{field}: `$ref` differs"
            );
        }
    }
    let required = |v: &Value| -> Vec<Value> {
        v.get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        required(reference),
        required(ours),
        "{path}: required fields differ from yolop's"
    );
}

#[test]
fn our_schema_covers_every_message_and_def_of_the_reference() {
    let reference = read_json(fixture("schema.json"));
    let ours = yep_protocol::schema::schema_json();
    for (method, entry) in reference["messages"].as_object().unwrap() {
        let mine = ours["messages"]
            .get(method)
            .unwrap_or_else(|| panic!("message {method} missing from our schema"));
        for part in ["params", "result"] {
            if entry.get(part).is_some() {
                assert_eq!(
                    mine.get(part),
                    entry.get(part),
                    "{method}.{part} refers to a different type"
                );
            }
        }
    }
    for (name, def) in reference["$defs"].as_object().unwrap() {
        let mine = ours["$defs"]
            .get(name)
            .unwrap_or_else(|| panic!("$defs.{name} missing from our schema"));
        assert_covers(name, def, mine);
        if let Some(variants) = def.get("enum") {
            assert_eq!(
                mine.get("enum"),
                Some(variants),
                "$defs.{name}: enum values differ"
            );
        }
    }
    for key in ["capability_params", "error"] {
        assert_eq!(ours.get(key), reference.get(key), "top-level {key} differs");
    }
}

#[test]
fn our_meta_lists_every_reference_method_with_its_direction() {
    let reference = read_json(fixture("meta.json"));
    let ours = yep_protocol::meta::meta_json();
    for m in reference["methods"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let mine = ours["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("method {name} missing from our meta"));
        assert_eq!(mine["direction"], m["direction"], "{name} direction");
    }
    for token in reference["capabilities"].as_array().unwrap() {
        assert!(
            ours["capabilities"].as_array().unwrap().contains(token),
            "capability {token} missing"
        );
    }
}

/// `docs/protocol.md`, the reference for authors in other languages, names every method and
/// every payload type the schema has (regenerate its tables: `python3 scripts/gen-protocol-doc.py`).
#[test]
fn the_protocol_doc_covers_every_method_and_payload() {
    let doc = std::fs::read_to_string(repo_file("docs/protocol.md")).unwrap();
    for m in yep_protocol::meta::METHODS {
        assert!(
            doc.contains(&format!("`{}`", m.name)),
            "docs/protocol.md does not mention method `{}`",
            m.name
        );
    }
    let schema = yep_protocol::schema::schema_json();
    for (name, def) in schema["$defs"].as_object().unwrap() {
        assert!(
            doc.contains(&format!("### `{name}`")),
            "docs/protocol.md has no section for `{name}`"
        );
        for field in def
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(f, _)| f)
        {
            assert!(
                doc.contains(&format!("| `{field}` |")),
                "docs/protocol.md does not list `{name}.{field}`"
            );
        }
    }
}
