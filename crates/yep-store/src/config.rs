//! An extension's config: plain fields in `settings.toml`, secrets in `connections.toml`
//! (0600), validated together against the manifest's `config_schema`. Secrets reach a server
//! only as injected env, never in `initialize.config`, a listing or a log.

use super::fsutil::MODE_PRIVATE;
use super::settings::{self, capability_ref};
use super::summary::{ConfigField, config_fields};
use super::{Home, StoreError};
use crate::manifest::Manifest;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use toml_edit::{Item, Table, value};

/// A credential. Never printed: `Debug` and `Display` show `Secret(***)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that needs it: the server's environment.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Make sure `connections.toml` is owner-only, repairing it if not. A symlink is never
/// followed: its target is not ours to chmod (the next write replaces the link with a file).
pub(crate) fn guard_mode(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.file_type().is_symlink() {
            tracing::warn!(
                "{} is a symlink; leaving its target's mode alone",
                path.display()
            );
        } else if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "{} was readable by others; restricting it to its owner",
                path.display()
            );
            // Through a handle opened without following links, so a link swapped in since
            // the check is refused rather than followed.
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o600)))
                .map_err(|error| StoreError::Restrict {
                    path: path.to_path_buf(),
                    error,
                })?;
        }
    }
    Ok(())
}

/// The secrets stored for an extension (empty values count as unset).
pub fn secrets(home: &Home, name: &str) -> Result<BTreeMap<String, Secret>, StoreError> {
    let path = home.connections_path();
    guard_mode(&path)?;
    let doc = settings::load(&path)?;
    let mut out = BTreeMap::new();
    if let Some(table) = doc.get(&capability_ref(name)).and_then(Item::as_table_like) {
        for (k, v) in table.iter() {
            if let Some(s) = v.as_str().filter(|s| !s.trim().is_empty()) {
                out.insert(k.to_string(), Secret::new(s));
            }
        }
    }
    Ok(out)
}

/// Store one secret in `connections.toml` (0600).
pub fn set_secret(
    home: &Home,
    manifest: &Manifest,
    field: &str,
    secret: &Secret,
) -> Result<(), StoreError> {
    let f = field_of(manifest, field)?;
    if !f.secret {
        return Err(StoreError::NotSecret {
            extension: manifest.name.clone(),
            field: field.to_string(),
        });
    }
    let path = home.connections_path();
    // Read, modify and write under the home lock: two writers must not lose each other's keys.
    let _lock = home.lock()?;
    guard_mode(&path)?;
    let mut doc = settings::load(&path)?;
    let key = capability_ref(&manifest.name);
    if doc.get(&key).and_then(Item::as_table).is_none() {
        doc.insert(&key, Item::Table(Table::new()));
    }
    if let Some(table) = doc.get_mut(&key).and_then(Item::as_table_mut) {
        table.insert(field, value(secret.expose()));
    }
    settings::store(&path, &doc, MODE_PRIVATE)
}

fn field_of(manifest: &Manifest, field: &str) -> Result<ConfigField, StoreError> {
    config_fields(manifest)
        .into_iter()
        .find(|f| f.name == field)
        .ok_or_else(|| StoreError::UnknownField {
            extension: manifest.name.clone(),
            field: field.to_string(),
            known: config_fields(manifest)
                .into_iter()
                .map(|f| f.name)
                .collect(),
        })
}

/// Parse a command-line value by the field's declared type.
pub fn parse_value(manifest: &Manifest, field: &str, raw: &str) -> Result<Value, StoreError> {
    field_of(manifest, field)?;
    let ty = manifest
        .yolop
        .config_schema
        .as_ref()
        .and_then(|s| s.pointer(&format!("/properties/{field}/type")))
        .and_then(Value::as_str)
        .unwrap_or("string");
    Ok(match ty {
        "integer" | "number" | "boolean" | "array" | "object" | "null" => serde_json::from_str(raw)
            .map_err(|_| StoreError::FieldType {
                field: field.to_string(),
                expected: match ty {
                    "integer" | "array" | "object" => format!("an {ty}"),
                    "null" => "null".to_string(),
                    _ => format!("a {ty}"),
                },
                given: crate::text::escape(&crate::summary::shorten(raw, 80)).into_owned(),
            })?,
        _ => Value::String(raw.to_string()),
    })
}

/// Set one plain field, validating the whole config first. Refuses secret fields.
pub fn set_plain(
    home: &Home,
    manifest: &Manifest,
    field: &str,
    new: Value,
) -> Result<Value, StoreError> {
    let f = field_of(manifest, field)?;
    if f.secret {
        return Err(StoreError::IsSecret {
            extension: manifest.name.clone(),
            field: field.to_string(),
        });
    }
    // Read, validate and write under the home lock: two writers must not lose each other's keys.
    let _lock = home.lock()?;
    let mut plain = settings::config(&home.settings_path(), &manifest.name)?;
    if !plain.is_object() {
        plain = Value::Object(Map::new());
    }
    plain[field] = new;
    let secrets = secrets(home, &manifest.name)?;
    validate(manifest, &plain, &secrets, false)?;
    settings::set_config(&home.settings_path(), &manifest.name, field, &plain[field])?;
    Ok(plain)
}

/// Validate plain config plus secrets against `config_schema`. With `complete`, missing
/// required fields are errors too; without it (while setting fields one by one) they are not.
pub fn validate(
    manifest: &Manifest,
    plain: &Value,
    secrets: &BTreeMap<String, Secret>,
    complete: bool,
) -> Result<(), StoreError> {
    let problems = problems(manifest, plain, secrets, complete)?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StoreError::InvalidConfig {
            extension: manifest.name.clone(),
            problems,
        })
    }
}

/// What `validate` finds wrong, one line per problem, each naming its field and rule.
fn problems(
    manifest: &Manifest,
    plain: &Value,
    secrets: &BTreeMap<String, Secret>,
    complete: bool,
) -> Result<Vec<String>, StoreError> {
    let Some(schema) = manifest.yolop.config_schema.as_ref() else {
        return Ok(Vec::new());
    };
    let mut schema = schema.clone();
    if !complete && let Some(obj) = schema.as_object_mut() {
        obj.remove("required");
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| StoreError::BadSchema {
        extension: manifest.name.clone(),
        message: e.to_string(),
    })?;
    // Secrets take part by presence only; their values never reach a message.
    let mut instance = match plain {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for name in secrets.keys() {
        instance.insert(name.clone(), Value::String("********".into()));
    }
    let instance = Value::Object(instance);
    let secret_fields: Vec<String> = config_fields(manifest)
        .into_iter()
        .filter(|f| f.secret)
        .map(|f| f.name)
        .collect();
    let problems: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| {
            let path = e.instance_path().to_string();
            let field = path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("")
                .to_string();
            let rule = e.kind().keyword().to_string();
            let message = if secret_fields.contains(&field) {
                e.masked().to_string()
            } else {
                e.to_string()
            };
            if field.is_empty() {
                format!("{message} ({rule})")
            } else {
                format!("config field `{field}`: {message} ({rule})")
            }
        })
        .collect();
    Ok(problems)
}

/// Check one typed answer for a plain field on its own: one of its `enum` values, parsed by its
/// type, then held to its schema. The error says why in a line fit to ask again with
/// ([`StoreError::NotAnOption`], [`StoreError::FieldType`], [`StoreError::AnswerRefused`]).
pub fn check_answer(manifest: &Manifest, field: &str, raw: &str) -> Result<Value, StoreError> {
    let options = options(manifest, field);
    if !options.is_empty() && !options.iter().any(|o| o == raw) {
        return Err(StoreError::NotAnOption {
            field: field.to_string(),
            answer: raw.to_string(),
            options,
        });
    }
    let value = parse_value(manifest, field, raw)?;
    let alone = serde_json::json!({ field: value.clone() });
    let problems = problems(manifest, &alone, &BTreeMap::new(), false)?;
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(StoreError::AnswerRefused {
            field: field.to_string(),
            problems,
        })
    }
}

/// The command that sets `field` of `name` by hand: `yep secret set` for a secret (never on
/// the command line), else `yep config set` with the `enum` values or `<value>`.
pub fn set_command(manifest: &Manifest, field: &str) -> String {
    let name = &manifest.name;
    let secret = config_fields(manifest)
        .iter()
        .any(|f| f.name == field && f.secret);
    if secret {
        return format!("yep secret set {name} {field}");
    }
    let options = options(manifest, field);
    let value = if options.is_empty() {
        "<value>".to_string()
    } else {
        format!("<{}>", options.join("|"))
    };
    format!("yep config set {name} {field} {value}")
}

/// The plain config as stored, secret fields stripped: what `initialize.config` carries.
pub fn plain(home: &Home, manifest: &Manifest) -> Result<Value, StoreError> {
    let mut plain = settings::config(&home.settings_path(), &manifest.name)?;
    if let Value::Object(map) = &mut plain {
        for f in config_fields(manifest).iter().filter(|f| f.secret) {
            map.remove(&f.name);
        }
    }
    Ok(plain)
}

/// What a server gets: `initialize.config` (plain fields only, secrets stripped) and the env
/// to inject (secret fields with `env`, and plain fields with `env`). Creates its data dir.
pub fn server_inputs(
    home: &Home,
    manifest: &Manifest,
) -> Result<(Value, Vec<(String, String)>), StoreError> {
    let plain = plain(home, manifest)?;
    let secrets = secrets(home, &manifest.name)?;
    let fields = config_fields(manifest);
    let mut env = Vec::new();
    for f in &fields {
        let Some(var) = &f.env else { continue };
        let value = if f.secret {
            secrets.get(&f.name).map(|s| s.expose().to_string())
        } else {
            plain.get(&f.name).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        if let Some(value) = value {
            env.push((var.clone(), value));
        }
    }
    env.extend(data_env(home, &manifest.name)?);
    Ok((plain, env))
}

/// The env that keeps an installed extension's writes outside its package, whose content is
/// checked against the approval at every session start: `YEP_DATA_DIR` (created owner-only)
/// and Python's bytecode cache under it.
pub fn data_env(home: &Home, name: &str) -> Result<Vec<(String, String)>, StoreError> {
    let data = home.data_dir(name);
    super::fsutil::create_private_dir(&data).map_err(|error| StoreError::Io {
        context: format!("failed to create {}", data.display()),
        error,
    })?;
    Ok(vec![
        ("YEP_DATA_DIR".into(), data.display().to_string()),
        (
            "PYTHONPYCACHEPREFIX".into(),
            data.join(".pycache").display().to_string(),
        ),
    ])
}

/// Required fields with no value yet, in schema order.
pub fn missing_required(home: &Home, manifest: &Manifest) -> Result<Vec<ConfigField>, StoreError> {
    let plain = settings::config(&home.settings_path(), &manifest.name)?;
    let secrets = secrets(home, &manifest.name)?;
    Ok(config_fields(manifest)
        .into_iter()
        .filter(|f| f.required)
        .filter(|f| {
            if f.secret {
                !secrets.contains_key(&f.name)
            } else {
                plain.get(&f.name).is_none_or(Value::is_null)
            }
        })
        .collect())
}

/// The `enum` values of a field, if it is a selector.
pub fn options(manifest: &Manifest, field: &str) -> Vec<String> {
    manifest
        .yolop
        .config_schema
        .as_ref()
        .and_then(|s| s.pointer(&format!("/properties/{field}/enum")))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A field's description, for prompts.
pub fn description(manifest: &Manifest, field: &str) -> Option<String> {
    manifest
        .yolop
        .config_schema
        .as_ref()
        .and_then(|s| s.pointer(&format!("/properties/{field}/description")))
        .and_then(Value::as_str)
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
    }
}
