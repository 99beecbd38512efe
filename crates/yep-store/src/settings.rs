//! `settings.toml` (what is enabled) and `connections.toml` (secrets), edited in place with
//! `toml_edit` so the user's comments and other keys survive.

use super::StoreError;
use super::fsutil::{MODE_DEFAULT, MODE_PRIVATE, write_atomic};
use std::path::Path;
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

/// The capability ref of an extension.
pub fn capability_ref(name: &str) -> String {
    format!("ext:{name}")
}

/// A TOML file of the home; an absent one reads as empty.
pub(crate) fn load(path: &Path) -> Result<DocumentMut, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => {
            return Err(StoreError::Read {
                path: path.to_path_buf(),
                error,
            });
        }
    };
    text.parse::<DocumentMut>()
        .map_err(|error| StoreError::Parse {
            path: path.to_path_buf(),
            error: Box::new(error),
        })
}

/// Write a file of the home atomically with `mode` (only when its content changes).
pub(crate) fn store(path: &Path, doc: &DocumentMut, mode: u32) -> Result<(), StoreError> {
    write_atomic(path, doc.to_string().as_bytes(), mode)
        .map(drop)
        .map_err(|error| StoreError::Write {
            path: path.to_path_buf(),
            error,
        })
}

fn refs(doc: &DocumentMut) -> Vec<String> {
    doc.get("capabilities")
        .and_then(Item::as_array_of_tables)
        .map(|tables| {
            tables
                .iter()
                .filter_map(|t| t.get("ref").and_then(|r| r.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A top-level string setting (`sandbox = "best-effort"`), if `settings.toml` has one.
pub fn top_level(path: &Path, key: &str) -> Result<Option<String>, StoreError> {
    let doc = load(path)?;
    Ok(doc.get(key).and_then(|v| v.as_str()).map(String::from))
}

/// A top-level setting as written, whatever its type: a string's value (`"10m"` is `10m`), or
/// any other value's TOML text (`0`, `true`), so a reader can refuse a value of the wrong type
/// rather than take it as absent. `None` when `settings.toml` has no such key, or it is a
/// table.
pub fn top_level_text(path: &Path, key: &str) -> Result<Option<String>, StoreError> {
    let doc = load(path)?;
    Ok(doc
        .get(key)
        .and_then(Item::as_value)
        .map(|v| match v.as_str() {
            Some(text) => text.to_string(),
            // Without its comments and spacing: the value alone.
            None => v.clone().decorated("", "").to_string(),
        }))
}

/// What `settings.toml`'s `[audit]` table says: whether the host keeps the audit trail
/// (`enabled`, on unless set to `false`) and whether it refuses tool arguments and results
/// that carry credentials (`block_secrets`, off unless set to `true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditSettings {
    pub enabled: bool,
    pub block_secrets: bool,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: true,
            block_secrets: false,
        }
    }
}

/// The `[audit]` settings; a key that is absent or not a boolean keeps its default.
pub fn audit(path: &Path) -> Result<AuditSettings, StoreError> {
    let doc = load(path)?;
    let table = doc.get("audit");
    let flag = |key: &str| table.and_then(|t| t.get(key)).and_then(Item::as_bool);
    let default = AuditSettings::default();
    Ok(AuditSettings {
        enabled: flag("enabled").unwrap_or(default.enabled),
        block_secrets: flag("block_secrets").unwrap_or(default.block_secrets),
    })
}

/// The extensions `settings.toml` enables.
pub fn enabled(path: &Path) -> Result<Vec<String>, StoreError> {
    let doc = load(path)?;
    Ok(refs(&doc)
        .into_iter()
        .filter_map(|r| r.strip_prefix("ext:").map(String::from))
        .collect())
}

/// Enable or disable an extension. Returns whether anything changed.
pub fn set_enabled(path: &Path, name: &str, on: bool) -> Result<bool, StoreError> {
    let mut doc = load(path)?;
    let want = capability_ref(name);
    let present = refs(&doc).contains(&want);
    if present == on {
        return Ok(false);
    }
    if on {
        if doc
            .get("capabilities")
            .and_then(Item::as_array_of_tables)
            .is_none()
        {
            doc.insert("capabilities", Item::ArrayOfTables(ArrayOfTables::new()));
        }
        let mut table = Table::new();
        table.insert("ref", value(want));
        if let Some(tables) = doc
            .get_mut("capabilities")
            .and_then(Item::as_array_of_tables_mut)
        {
            tables.push(table);
        }
    } else if let Some(tables) = doc
        .get_mut("capabilities")
        .and_then(Item::as_array_of_tables_mut)
    {
        tables.retain(|t| t.get("ref").and_then(|r| r.as_str()) != Some(want.as_str()));
    }
    store(path, &doc, MODE_DEFAULT)?;
    Ok(true)
}

/// Whether extension `name`'s hooks fail closed: `hooks_fail = "closed"` in its
/// `[[capabilities]]` entry, set by `yep enable <name> --fail-closed`. A hook that crashes,
/// hangs or cannot start then blocks the call, whatever its manifest says.
pub fn fails_closed(path: &Path, name: &str) -> Result<bool, StoreError> {
    let doc = load(path)?;
    let want = capability_ref(name);
    Ok(doc
        .get("capabilities")
        .and_then(Item::as_array_of_tables)
        .is_some_and(|tables| {
            tables.iter().any(|t| {
                t.get("ref").and_then(|r| r.as_str()) == Some(want.as_str())
                    && t.get("hooks_fail").and_then(|v| v.as_str()) == Some("closed")
            })
        }))
}

/// Set whether enabled extension `name`'s hooks fail closed ([`fails_closed`]). Returns
/// whether anything changed; an extension that is not enabled has no entry to mark.
pub fn set_fails_closed(path: &Path, name: &str, closed: bool) -> Result<bool, StoreError> {
    let mut doc = load(path)?;
    let want = capability_ref(name);
    let Some(entry) = doc
        .get_mut("capabilities")
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|tables| {
            tables
                .iter_mut()
                .find(|t| t.get("ref").and_then(|r| r.as_str()) == Some(want.as_str()))
        })
    else {
        return Ok(false);
    };
    let was = entry.get("hooks_fail").and_then(|v| v.as_str()) == Some("closed");
    if was == closed {
        return Ok(false);
    }
    if closed {
        entry.insert("hooks_fail", value("closed"));
    } else {
        entry.remove("hooks_fail");
    }
    store(path, &doc, MODE_DEFAULT)?;
    Ok(true)
}

/// An extension's plain (non-secret) config: the `[config."ext:<name>"]` table of
/// `settings.toml`, as JSON. `null` when there is none.
pub fn config(path: &Path, name: &str) -> Result<serde_json::Value, StoreError> {
    let doc = load(path)?;
    let Some(table) = doc
        .get("config")
        .and_then(|c| c.get(capability_ref(name).as_str()))
        .and_then(Item::as_table_like)
    else {
        return Ok(serde_json::Value::Null);
    };
    let mut out = serde_json::Map::new();
    for (key, item) in table.iter() {
        if let Some(v) = item.as_value() {
            out.insert(key.to_string(), toml_value_to_json(v));
        }
    }
    Ok(serde_json::Value::Object(out))
}

fn toml_value_to_json(v: &toml_edit::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        toml_edit::Value::String(s) => J::String(s.value().clone()),
        toml_edit::Value::Integer(i) => J::from(*i.value()),
        toml_edit::Value::Float(f) => {
            serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Number)
        }
        toml_edit::Value::Boolean(b) => J::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => J::String(d.value().to_string()),
        toml_edit::Value::Array(a) => J::Array(a.iter().map(toml_value_to_json).collect()),
        toml_edit::Value::InlineTable(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value_to_json(v)))
                .collect(),
        ),
    }
}

/// Set one plain config field under `[config."ext:<name>"]`, keeping everything else.
pub fn set_config(
    path: &Path,
    name: &str,
    field: &str,
    new: &serde_json::Value,
) -> Result<(), StoreError> {
    let mut doc = load(path)?;
    if doc.get("config").and_then(Item::as_table).is_none() {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("config", Item::Table(t));
    }
    let config = doc
        .get_mut("config")
        .and_then(Item::as_table_mut)
        .ok_or_else(|| not_a_table(path, "config"))?;
    let key = capability_ref(name);
    if config.get(&key).and_then(Item::as_table).is_none() {
        config.insert(&key, Item::Table(Table::new()));
    }
    let table = config
        .get_mut(&key)
        .and_then(Item::as_table_mut)
        .ok_or_else(|| not_a_table(path, &format!("config.\"{key}\"")))?;
    let value = json_to_toml(new).ok_or_else(|| StoreError::NullValue {
        field: field.to_string(),
    })?;
    table.insert(field, Item::Value(value));
    store(path, &doc, MODE_DEFAULT)
}

fn not_a_table(path: &Path, key: &str) -> StoreError {
    StoreError::NotATable {
        path: path.to_path_buf(),
        key: key.to_string(),
    }
}

/// `None` for a null anywhere inside: TOML has none.
fn json_to_toml(v: &serde_json::Value) -> Option<toml_edit::Value> {
    use serde_json::Value as J;
    Some(match v {
        J::String(s) => s.as_str().into(),
        J::Bool(b) => (*b).into(),
        J::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        J::Array(items) => {
            let mut a = toml_edit::Array::new();
            for item in items {
                a.push(json_to_toml(item)?);
            }
            toml_edit::Value::Array(a)
        }
        J::Object(map) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, item) in map {
                t.insert(k, json_to_toml(item)?);
            }
            toml_edit::Value::InlineTable(t)
        }
        J::Null => return None,
    })
}

/// Forget an extension's plain config (`[config."ext:<name>"]` in `settings.toml`).
pub fn remove_config(path: &Path, name: &str) -> Result<bool, StoreError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = load(path)?;
    let removed = doc
        .get_mut("config")
        .and_then(Item::as_table_mut)
        .and_then(|t| t.remove(&capability_ref(name)))
        .is_some();
    if removed {
        store(path, &doc, MODE_DEFAULT)?;
    }
    Ok(removed)
}

/// What of extension `name` the user switched off: `[off."ext:<name>"]`, whose `hooks`,
/// `servers` and `commands` are arrays of names. Absent (an older settings file), or of the
/// wrong shape (a planted one), nothing is off; an entry that is not a string is skipped.
pub fn off(path: &Path, name: &str) -> Result<crate::components::Off, StoreError> {
    use crate::components::{Component, Off};
    let doc = load(path)?;
    let mut off = Off::default();
    let Some(table) = doc
        .get("off")
        .and_then(|t| t.get(capability_ref(name).as_str()))
        .and_then(Item::as_table_like)
    else {
        return Ok(off);
    };
    for kind in [Component::Hook, Component::Server, Component::Command] {
        let items = table
            .get(kind.key())
            .and_then(Item::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from));
        off.set_mut(kind).extend(items);
    }
    Ok(off)
}

/// Switch `item` (a `kind` of extension `name`) off, or on again. Returns whether anything
/// changed; the table of an extension nothing of which is off is dropped.
pub fn set_off(
    path: &Path,
    name: &str,
    kind: crate::components::Component,
    item: &str,
    switched_off: bool,
) -> Result<bool, StoreError> {
    let mut now = off(path, name)?;
    let changed = match switched_off {
        true => now.set_mut(kind).insert(item.to_string()),
        false => now.set_mut(kind).remove(item),
    };
    if !changed {
        return Ok(false);
    }
    let mut doc = load(path)?;
    if doc.get("off").and_then(Item::as_table).is_none() {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("off", Item::Table(t));
    }
    let tables = doc
        .get_mut("off")
        .and_then(Item::as_table_mut)
        .ok_or_else(|| not_a_table(path, "off"))?;
    let key = capability_ref(name);
    if now.is_empty() {
        tables.remove(&key);
    } else {
        let mut table = Table::new();
        for kind in [
            crate::components::Component::Hook,
            crate::components::Component::Server,
            crate::components::Component::Command,
        ] {
            let set = now.set(kind);
            if !set.is_empty() {
                let array: toml_edit::Array = set.iter().map(String::as_str).collect();
                table.insert(kind.key(), value(array));
            }
        }
        tables.insert(&key, Item::Table(table));
    }
    store(path, &doc, MODE_DEFAULT)?;
    Ok(true)
}

/// Forget what of extension `name` was switched off (it is removed).
pub fn remove_off(path: &Path, name: &str) -> Result<bool, StoreError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = load(path)?;
    let removed = doc
        .get_mut("off")
        .and_then(Item::as_table_mut)
        .and_then(|t| t.remove(&capability_ref(name)))
        .is_some();
    if removed {
        store(path, &doc, MODE_DEFAULT)?;
    }
    Ok(removed)
}

/// Forget an extension's stored secrets (`[ext:<name>]` in `connections.toml`).
pub fn remove_secrets(path: &Path, name: &str) -> Result<bool, StoreError> {
    remove_table(path, &capability_ref(name))
}

/// Remove top-level table `key` of a secrets file (kept owner-only). Whether it was there.
/// Remove entry `name` of table `table` of the settings file at `path` (kept as it was
/// otherwise). Whether it was there.
pub(crate) fn remove_entry(path: &Path, table: &str, name: &str) -> Result<bool, StoreError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = load(path)?;
    let removed = doc
        .get_mut(table)
        .and_then(toml_edit::Item::as_table_mut)
        .and_then(|t| t.remove(name))
        .is_some();
    if removed {
        store(path, &doc, crate::fsutil::MODE_DEFAULT)?;
    }
    Ok(removed)
}

pub(crate) fn remove_table(path: &Path, key: &str) -> Result<bool, StoreError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = load(path)?;
    if doc.remove(key).is_none() {
        return Ok(false);
    }
    store(path, &doc, MODE_PRIVATE)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_trail_is_on_and_secrets_pass_unless_settings_say_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        assert_eq!(audit(&path).unwrap(), AuditSettings::default());
        std::fs::write(&path, "[audit]\nenabled = false\nblock_secrets = true\n").unwrap();
        let said = audit(&path).unwrap();
        assert!(!said.enabled && said.block_secrets);
        std::fs::write(&path, "[audit]\nenabled = \"no\"\n").unwrap();
        assert!(audit(&path).unwrap().enabled, "not a boolean: the default");
    }

    #[test]
    fn a_top_level_value_reads_as_written_whatever_its_type() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        std::fs::write(
            &path,
            "idle_stop = \"10m\"\nn = 0 # zero\nflag = true\n[t]\nk = 1\n",
        )
        .unwrap();
        let read = |key| top_level_text(&path, key).unwrap();
        assert_eq!(read("idle_stop").as_deref(), Some("10m"));
        assert_eq!(read("n").as_deref(), Some("0"));
        assert_eq!(read("flag").as_deref(), Some("true"));
        assert_eq!(read("t"), None);
        assert_eq!(read("absent"), None);
        assert_eq!(top_level(&path, "n").unwrap(), None, "a string only");
    }

    #[test]
    fn plain_config_reads_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        std::fs::write(
            &path,
            "[config.\"ext:w\"]\nregion = \"eu\"\nrequest_timeout_ms = 1500\n",
        )
        .unwrap();
        assert_eq!(
            config(&path, "w").unwrap(),
            serde_json::json!({"region": "eu", "request_timeout_ms": 1500})
        );
        assert_eq!(config(&path, "other").unwrap(), serde_json::Value::Null);
    }

    #[test]
    fn enable_and_disable_keep_comments_and_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        let original = "# my settings\nmodel = \"big\" # keep me\n\n[[capabilities]]\nref = \"builtin:lsp\" # lsp on\n";
        std::fs::write(&path, original).unwrap();
        assert!(set_enabled(&path, "echo", true).unwrap());
        assert!(
            !set_enabled(&path, "echo", true).unwrap(),
            "enabling twice changes nothing"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("# my settings")
                && text.contains("# keep me")
                && text.contains("# lsp on"),
            "{text}"
        );
        assert_eq!(enabled(&path).unwrap(), ["echo"]);
        assert!(set_enabled(&path, "echo", false).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, original);
    }
}
