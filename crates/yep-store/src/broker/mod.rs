//! Brokered secrets: a secret a server holds only as a placeholder, which its egress proxy
//! swaps for the value in requests to the hosts the secret belongs to, and nowhere else.
//!
//! A secret field is brokered when the user bound it to hosts (`yep secret set <ext> <field>
//! --for api.github.com`, kept beside the value in `connections.toml` under
//! `[ext:<name>.broker.<field>]`) or its manifest's `config_schema` declares it
//! (`"broker": {"hosts": ["api.github.com"], "header": "Authorization", "format": "Bearer {}"}`
//! on the field, shown at install and pinned with the manifest). The user's binding wins.
//!
//! The server's environment gets the placeholder ([`placeholder`]): `yep_ph_` and 32 hex
//! digits, unique per secret and per home (a keyed hash of the extension and field under a
//! random key of the home's), so it says nothing of the value and is no use in another
//! home. The value stays in `connections.toml` and the host's memory.

pub mod binding;

pub use binding::Binding;

use crate::config::{self, Secret};
use crate::settings::{self, capability_ref};
use crate::summary::config_fields;
use crate::{Home, StoreError};
use std::io::Read;
use std::path::{Path, PathBuf};
use toml_edit::{Item, Table, value};

/// A secret as a server's egress proxy needs it: what the server holds, the value, and
/// where it may go. `Debug` never shows the value.
#[derive(Debug, Clone)]
pub struct Brokered {
    /// The config field.
    pub field: String,
    /// The environment variable the server finds it in, when the field maps to one.
    pub env: Option<String>,
    /// What the server holds in its place.
    pub placeholder: String,
    pub value: Secret,
    pub binding: Binding,
}

/// A server's brokered secrets, and where its proxy's CA is kept: what its egress proxy
/// needs to broker them (`yep_sandbox::egress`).
#[derive(Debug, Clone)]
pub struct Broker {
    /// The home's broker directory ([`dir`]).
    pub ca_dir: PathBuf,
    /// The secrets the server holds as placeholders.
    pub secrets: Vec<Brokered>,
}

/// The directory of the home's broker state: the placeholder key and the CA the egress
/// proxy terminates TLS with. Owner-only, in the home, which no sandbox reaches.
pub fn dir(home: &Home) -> PathBuf {
    home.root.join("broker")
}

/// The placeholder a server holds for secret `field` of extension `ext` in `home`.
pub fn placeholder(home: &Home, ext: &str, field: &str) -> Result<String, StoreError> {
    let key = key(&dir(home))?;
    let mut input = key;
    input.extend_from_slice(ext.as_bytes());
    input.push(0);
    input.extend_from_slice(field.as_bytes());
    let digest = crate::hash::sha256_hex(&input);
    Ok(format!("yep_ph_{}", &digest[..32]))
}

/// Whether `text` holds something shaped like a placeholder (`yep_ph_` and 32 hex digits).
pub fn holds_placeholder(text: &str) -> bool {
    text.match_indices("yep_ph_").any(|(at, _)| {
        let rest = &text.as_bytes()[at + 7..];
        rest.len() >= 32 && rest[..32].iter().all(u8::is_ascii_hexdigit)
    })
}

/// The home's placeholder key: 32 random bytes in `<dir>/key`, made at first use.
fn key(dir: &Path) -> Result<Vec<u8>, StoreError> {
    let path = dir.join("key");
    // A regular file of the home, read bounded: a planted link or FIFO is no key (it is
    // replaced), and never hangs or floods the read.
    let read = |path: &Path| crate::fsutil::read_regular(path, 32, crate::fsutil::Links::Refuse);
    if let Ok(bytes) = read(&path)
        && bytes.len() == 32
    {
        return Ok(bytes);
    }
    crate::fsutil::create_private_dir(dir).map_err(crate::error::io(format!(
        "failed to create {}",
        dir.display()
    )))?;
    let mut bytes = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(crate::error::io("failed to read /dev/urandom"))?;
    crate::fsutil::write_atomic(&path, &bytes, crate::fsutil::MODE_PRIVATE).map_err(
        crate::error::io(format!("failed to write {}", path.display())),
    )?;
    // Two first uses at once: whichever write landed is the key.
    read(&path).map_err(crate::error::io(format!(
        "failed to read {}",
        path.display()
    )))
}

/// The bindings the user made for extension `name` (`[ext:<name>.broker.<field>]`).
pub fn user_bindings(
    home: &Home,
    name: &str,
) -> Result<std::collections::BTreeMap<String, Binding>, StoreError> {
    bindings_in(home, &capability_ref(name))
}

/// The bindings kept in table `table` of `connections.toml` (`[<table>.broker.<field>]`):
/// an extension's (`ext:<name>`), or a home MCP server's environment (`mcp-env:<name>`).
pub fn bindings_in(
    home: &Home,
    table: &str,
) -> Result<std::collections::BTreeMap<String, Binding>, StoreError> {
    let path = home.connections_path();
    config::guard_mode(&path)?;
    let doc = settings::load(&path)?;
    let mut out = std::collections::BTreeMap::new();
    let table = doc
        .get(table)
        .and_then(|t| t.get("broker"))
        .and_then(Item::as_table_like);
    for (field, item) in table.into_iter().flat_map(|t| t.iter()) {
        // A binding that does not read has no hosts, which nothing accepts: the secret is
        // not given at all (see `brokered`), never given in the clear.
        let binding = inline_to_table(item)
            .and_then(|t| toml::from_str::<Binding>(&t).ok())
            .unwrap_or_default();
        out.insert(field.to_string(), binding);
    }
    Ok(out)
}

/// A binding's TOML item as a document's text, whether written as a table or inline.
fn inline_to_table(item: &Item) -> Option<String> {
    let table = item.as_table_like()?;
    let mut doc = toml_edit::DocumentMut::new();
    for (k, v) in table.iter() {
        doc.insert(k, v.clone());
    }
    Some(doc.to_string())
}

/// Bind secret `field` of extension `name` to `binding` (checked), beside its value.
pub fn bind(home: &Home, name: &str, field: &str, binding: &Binding) -> Result<(), StoreError> {
    bind_in(home, name, &capability_ref(name), field, binding)
}

/// Bind `field` of `owner` (an extension or a home MCP server), whose values are in table
/// `key` of `connections.toml`, to `binding` (checked).
pub fn bind_in(
    home: &Home,
    owner: &str,
    key: &str,
    field: &str,
    binding: &Binding,
) -> Result<(), StoreError> {
    binding.validate().map_err(|why| StoreError::Broker {
        extension: owner.to_string(),
        field: field.to_string(),
        why,
    })?;
    let path = home.connections_path();
    let _lock = home.lock()?;
    config::guard_mode(&path)?;
    let mut doc = settings::load(&path)?;
    let key = key.to_string();
    if doc.get(&key).and_then(Item::as_table).is_none() {
        doc.insert(&key, Item::Table(Table::new()));
    }
    let ext = doc
        .get_mut(&key)
        .and_then(Item::as_table_mut)
        .expect("inserted above");
    if ext.get("broker").and_then(Item::as_table).is_none() {
        let mut broker = Table::new();
        broker.set_implicit(true);
        ext.insert("broker", Item::Table(broker));
    }
    let broker = ext
        .get_mut("broker")
        .and_then(Item::as_table_mut)
        .expect("inserted above");
    let mut t = Table::new();
    let mut hosts = toml_edit::Array::new();
    for h in &binding.hosts {
        hosts.push(h.as_str());
    }
    if !binding.in_env {
        t.insert("hosts", value(hosts));
    }
    if let Some(h) = &binding.header {
        t.insert("header", value(h.as_str()));
    }
    if let Some(f) = &binding.format {
        t.insert("format", value(f.as_str()));
    }
    if binding.in_env {
        t.insert("in_env", value(true));
    }
    broker.insert(field, Item::Table(t));
    settings::store(&path, &doc, crate::fsutil::MODE_PRIVATE)
}

/// The secrets of extension `name` (its manifest `manifest`) that are brokered and set,
/// with their placeholders. A field whose binding is malformed is an error: its value is
/// never given in the clear instead.
pub fn brokered(
    home: &Home,
    manifest: &crate::manifest::Manifest,
) -> Result<Vec<Brokered>, StoreError> {
    let name = &manifest.name;
    let user = user_bindings(home, name)?;
    let secrets = config::secrets(home, name)?;
    let mut out = Vec::new();
    for f in config_fields(manifest).into_iter().filter(|f| f.secret) {
        let Some(binding) = user.get(&f.name).cloned().or(f.broker.clone()) else {
            continue;
        };
        if binding.in_env && binding.validate().is_ok() {
            continue;
        }
        binding.validate().map_err(|why| StoreError::Broker {
            extension: name.clone(),
            field: f.name.clone(),
            why,
        })?;
        let Some(value) = secrets.get(&f.name) else {
            continue;
        };
        out.push(Brokered {
            placeholder: placeholder(home, name, &f.name)?,
            field: f.name,
            env: f.env,
            value: value.clone(),
            binding,
        });
    }
    Ok(out)
}

/// Put each brokered secret's placeholder in place of its value in `env` (the server's
/// environment, as [`config::server_inputs`] made it).
pub fn hide(env: &mut [(String, String)], brokered: &[Brokered]) {
    for b in brokered {
        let Some(var) = &b.env else { continue };
        for (k, v) in env.iter_mut() {
            if k == var {
                *v = b.placeholder.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(hosts: &[&str], header: Option<&str>, format: Option<&str>) -> Binding {
        Binding {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            header: header.map(String::from),
            format: format.map(String::from),
            in_env: false,
        }
    }

    #[test]
    fn a_binding_is_stored_beside_the_value_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path().to_path_buf()));
        let b = binding(
            &["api.github.com"],
            Some("Authorization"),
            Some("Bearer {}"),
        );
        bind(&home, "gh", "TOKEN", &b).unwrap();
        let env = Binding {
            in_env: true,
            ..Binding::default()
        };
        bind(&home, "gh", "OTHER", &env).unwrap();
        let read = user_bindings(&home, "gh").unwrap();
        assert_eq!(read["TOKEN"], b);
        assert_eq!(read["OTHER"], env);
        assert!(bind(&home, "gh", "X", &binding(&[], None, None)).is_err());
        // The value's table still reads as secrets only.
        assert!(config::secrets(&home, "gh").unwrap().is_empty());
    }

    #[test]
    #[cfg(unix)]
    fn a_planted_fifo_or_link_for_the_key_is_replaced_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path().join("home")));
        let broker = super::dir(&home);
        std::fs::create_dir_all(&broker).unwrap();
        let key = broker.join("key");
        let fifo = std::ffi::CString::new(key.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the path it is given.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        // Reading a FIFO no one writes would hang: it is refused and replaced.
        let p = placeholder(&home, "gh", "TOKEN").unwrap();
        assert!(std::fs::metadata(&key).unwrap().is_file());
        assert_eq!(p, placeholder(&home, "gh", "TOKEN").unwrap());
        // A link to a file of 32 bytes elsewhere is not taken as the key.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, [7u8; 32]).unwrap();
        std::fs::remove_file(&key).unwrap();
        std::os::unix::fs::symlink(&outside, &key).unwrap();
        let q = placeholder(&home, "gh", "TOKEN").unwrap();
        assert_ne!(p, q);
        assert_eq!(std::fs::read(&outside).unwrap(), [7u8; 32]);
        assert!(
            !std::fs::symlink_metadata(&key)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn bindings_name_hosts_a_header_and_a_format_with_one_slot() {
        assert!(binding(&["api.github.com"], None, None).validate().is_ok());
        assert!(
            binding(
                &["*.example.com", "a.b:8443"],
                Some("Authorization"),
                Some("Bearer {}")
            )
            .validate()
            .is_ok()
        );
        assert!(binding(&[], None, None).validate().is_err());
        assert!(binding(&["*"], None, None).validate().is_err());
        assert!(binding(&["127.0.0.1:80"], None, None).validate().is_err());
        assert!(binding(&["a.b GET"], None, None).validate().is_err());
        assert!(binding(&["a.b"], Some("X Y"), None).validate().is_err());
        assert!(
            binding(&["a.b"], Some("X"), Some("{} {}"))
                .validate()
                .is_err()
        );
        assert!(
            binding(&["a.b"], None, Some("Bearer {}"))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn placeholders_are_per_secret_and_per_home_and_stable() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (ha, hb) = (
            Home::resolve(Some(a.path().to_path_buf())),
            Home::resolve(Some(b.path().to_path_buf())),
        );
        let p = placeholder(&ha, "gh", "TOKEN").unwrap();
        assert!(p.starts_with("yep_ph_") && p.len() == 39, "{p}");
        assert!(holds_placeholder(&format!("Bearer {p}")));
        assert_eq!(p, placeholder(&ha, "gh", "TOKEN").unwrap());
        assert_ne!(p, placeholder(&ha, "gh", "OTHER").unwrap());
        assert_ne!(p, placeholder(&ha, "gh2", "TOKEN").unwrap());
        assert_ne!(p, placeholder(&hb, "gh", "TOKEN").unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir(&ha).join("key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0);
        }
        assert!(!holds_placeholder("yep_ph_notHex"));
    }
}
