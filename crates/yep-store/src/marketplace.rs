//! Plugin marketplaces: catalogues of Claude Code (and Codex) plugins, as
//! `.claude-plugin/marketplace.json` describes them, added to the home with
//! `yep marketplace add`. Each is a table under `[marketplaces]` in `settings.toml`: where it
//! came from and, for a git one, the commit its checkout under `<home>/marketplaces/<name>`
//! holds. A local one is read in place.
//!
//! A catalogue is read leniently, as Claude Code reads it, and bounded: the file is at most
//! [`MAX_FILE`] bytes and [`MAX_ENTRIES`] entries; an entry whose name yep cannot use as a
//! package name, or whose source it cannot fetch, is listed as skipped with the reason, never
//! silently dropped.

use crate::fsutil::MODE_DEFAULT;
use crate::settings;
use crate::source::SourceSpec;
use crate::{Home, StoreError, text};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml_edit::{Item, Table, value};

/// The `settings.toml` table that holds them.
const TABLE: &str = "marketplaces";

/// Where a marketplace's catalogue is, under its root: Claude Code's, then Codex's.
pub const CATALOGUES: [&str; 2] = [
    ".claude-plugin/marketplace.json",
    ".agents/plugins/marketplace.json",
];

/// The largest catalogue read (the official one is about 170 KB).
pub const MAX_FILE: u64 = 4 * 1024 * 1024;

/// The most entries read from one catalogue; past it the rest are skipped, and said.
pub const MAX_ENTRIES: usize = 2000;

/// The component fields an entry may carry inline (merged over the plugin's own manifest, or
/// the whole of it with `strict: false`).
pub const COMPONENTS: [&str; 7] = [
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "lspServers",
    "outputStyles",
];

/// A catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct Marketplace {
    pub name: String,
    pub description: Option<String>,
    pub owner: Option<String>,
    pub entries: Vec<Entry>,
    /// Old plugin names and what they are called now (`None`: gone).
    pub renames: BTreeMap<String, Option<String>>,
    /// Entries not taken, each with why.
    pub skipped: Vec<String>,
}

/// One plugin in a catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub description: Option<String>,
    pub version: Option<String>,
    pub category: Option<String>,
    pub source: EntrySource,
    /// `false`: the entry is the plugin's whole definition, its own manifest set aside.
    pub strict: bool,
    /// Its inline components ([`COMPONENTS`]), as written.
    pub components: serde_json::Map<String, Value>,
}

/// Where an entry's plugin is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntrySource {
    /// A directory inside the marketplace, relative to its root.
    Path(String),
    /// A git repository at a commit (`sha`) or ref, and the directory in it (`git-subdir`,
    /// and `url` with a `path`).
    Git {
        url: String,
        rev: Option<String>,
        subdir: Option<String>,
    },
}

impl std::fmt::Display for EntrySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntrySource::Path(path) => write!(f, "{path}"),
            EntrySource::Git { url, rev, subdir } => {
                write!(f, "{url}")?;
                if let Some(subdir) = subdir {
                    write!(f, " ({subdir})")?;
                }
                if let Some(rev) = rev {
                    write!(f, " @ {}", &rev[..rev.len().min(12)])?;
                }
                Ok(())
            }
        }
    }
}

fn invalid(message: String) -> StoreError {
    StoreError::Marketplace(message)
}

/// Whether `name` may name a marketplace or be installed from one: what a package name may
/// be (it reaches paths).
fn usable_name(name: &str) -> bool {
    crate::manifest::valid_name(name)
}

/// The catalogue under `root`, read.
pub fn read(root: &Path) -> Result<Marketplace, StoreError> {
    let Some(file) = CATALOGUES
        .iter()
        .map(|c| root.join(c))
        .find(|p| p.is_file())
    else {
        return Err(invalid(format!(
            "{} has no {} (nor {})",
            root.display(),
            CATALOGUES[0],
            CATALOGUES[1]
        )));
    };
    let text = crate::fsutil::read_regular_string(&file, MAX_FILE, crate::fsutil::Links::Refuse)
        .map_err(|error| StoreError::Read {
            path: file.clone(),
            error,
        })?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("failed to parse {}: {e}", file.display())))?;
    parse(&json).map_err(|why| invalid(format!("{}: {why}", file.display())))
}

/// A catalogue's JSON, read.
pub fn parse(json: &Value) -> Result<Marketplace, String> {
    let string = |v: &Value| v.as_str().map(str::to_string);
    let name = json["name"].as_str().ok_or("it has no `name`")?.to_string();
    if !usable_name(&name) {
        return Err(format!(
            "{:?} is not a marketplace name yep can use (A-Z a-z 0-9 _ -)",
            text::escape(&name)
        ));
    }
    let plugins = json["plugins"]
        .as_array()
        .ok_or("it has no `plugins` list")?;
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    for (i, plugin) in plugins.iter().enumerate() {
        if i >= MAX_ENTRIES {
            skipped.push(format!(
                "{} more entries past the first {MAX_ENTRIES}",
                plugins.len() - MAX_ENTRIES
            ));
            break;
        }
        match entry(plugin) {
            Ok(entry) => entries.push(entry),
            Err(why) => skipped.push(why),
        }
    }
    let renames = json["renames"]
        .as_object()
        .map(|r| {
            r.iter()
                .map(|(old, new)| (old.clone(), string(new)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Marketplace {
        name,
        description: string(&json["description"])
            .or_else(|| string(&json["metadata"]["description"])),
        owner: string(&json["owner"]["name"]),
        entries,
        renames,
        skipped,
    })
}

/// One entry, or why it is skipped.
fn entry(plugin: &Value) -> Result<Entry, String> {
    let string = |v: &Value| v.as_str().map(str::to_string);
    let Some(name) = plugin["name"].as_str() else {
        return Err("an entry without a `name`".into());
    };
    let shown = text::escape(name);
    if !usable_name(name) {
        return Err(format!(
            "{shown:?}: not a name yep can install under (A-Z a-z 0-9 _ -)"
        ));
    }
    let source = source(&plugin["source"]).map_err(|why| format!("{shown}: {why}"))?;
    let components = COMPONENTS
        .iter()
        .filter_map(|c| Some((c.to_string(), plugin.get(*c)?.clone())))
        .collect();
    Ok(Entry {
        name: name.to_string(),
        description: string(&plugin["description"]),
        version: string(&plugin["version"]),
        category: string(&plugin["category"]),
        source,
        strict: plugin["strict"].as_bool().unwrap_or(true),
        components,
    })
}

/// An entry's `source`, or why yep cannot fetch it.
fn source(source: &Value) -> Result<EntrySource, String> {
    let string = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    if let Some(path) = source.as_str() {
        return inside(path).map(EntrySource::Path);
    }
    // A commit wins over a ref when both are given.
    let rev = string(&source["sha"]).or_else(|| string(&source["ref"]));
    if rev.as_deref().is_some_and(|r| r.starts_with('-')) {
        return Err("a `ref` or `sha` that starts with `-`".into());
    }
    let subdir = match string(&source["path"]) {
        Some(path) => Some(inside(&path)?),
        None => None,
    };
    let git_url = |url: String| -> Result<String, String> {
        match SourceSpec::parse(&url) {
            Ok(SourceSpec::Git { .. }) => Ok(url),
            _ => Err(format!("{:?} is not a git URL", text::escape(&url))),
        }
    };
    match source["source"].as_str() {
        Some("github") => {
            let repo = string(&source["repo"]).ok_or("a `github` source without `repo`")?;
            let valid = repo.split('/').count() == 2
                && repo
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
                && !repo.contains("..");
            if !valid {
                return Err(format!("{:?} is not `owner/repo`", text::escape(&repo)));
            }
            Ok(EntrySource::Git {
                url: format!("https://github.com/{repo}.git"),
                rev,
                subdir,
            })
        }
        Some("url") | Some("git-subdir") => {
            let url = string(&source["url"]).ok_or("a git source without `url`")?;
            // `git-subdir` may name a GitHub repository as `owner/repo`.
            let url = match url.contains("://") || url.starts_with("git@") {
                true => url,
                false => format!("https://github.com/{url}.git"),
            };
            Ok(EntrySource::Git {
                url: git_url(url)?,
                rev,
                subdir,
            })
        }
        Some(other) => Err(format!(
            "its source is `{}`, which yep does not fetch (a path, github, url or git-subdir)",
            text::escape(other)
        )),
        None => Err("it has no `source`".into()),
    }
}

/// `path`, when it stays inside the directory it is relative to (no `..`, not absolute), as
/// a relative path (`.` for the directory itself).
fn inside(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("an empty path".into());
    }
    let trimmed = path.trim_start_matches("./");
    let leaves = Path::new(trimmed).is_absolute()
        || Path::new(trimmed)
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)));
    match (leaves, trimmed) {
        (true, _) => Err(format!(
            "{:?} leaves the directory it is relative to",
            text::escape(path)
        )),
        (false, "") => Ok(".".into()),
        (false, t) => Ok(t.into()),
    }
}

/// A marketplace added to the home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub name: String,
    /// As given to `yep marketplace add`.
    pub source: String,
    /// The commit of a git one's checkout.
    pub rev: Option<String>,
    /// Where its catalogue is read: the directory given, or the checkout.
    pub root: PathBuf,
}

/// Where a git marketplace's checkout is.
fn checkout_dir(home: &Home, name: &str) -> PathBuf {
    home.root.join("marketplaces").join(name)
}

/// Add the marketplace at `source` (a directory, read in place, or a git URL `[@rev]`,
/// checked out into the home), under the name its catalogue gives. A name already added is
/// refused.
pub fn add(home: &Home, source: &str) -> Result<(Registered, Marketplace), StoreError> {
    let spec = SourceSpec::parse(source)?;
    let _lock = home.lock()?;
    let staged = home.root.join("marketplaces").join(".adding");
    let write = |path: &Path| {
        let path = path.to_path_buf();
        move |error| StoreError::Write { path, error }
    };
    let (root, rev, shown) = match spec {
        SourceSpec::Path(dir) => {
            let dir = dir.canonicalize().map_err(|error| StoreError::Read {
                path: dir.clone(),
                error,
            })?;
            let shown = dir.display().to_string();
            (dir, None, shown)
        }
        SourceSpec::Git { url, rev } => {
            // Under the home's lock: no other `add` shares the staging directory.
            crate::fsutil::remove_tree(&staged).map_err(write(&staged))?;
            std::fs::create_dir_all(&staged).map_err(write(&staged))?;
            let commit = crate::fetch::fetch_git(&url, rev.as_deref(), &staged.join("checkout"))?;
            (staged.join("checkout"), Some(commit), source.to_string())
        }
        _ => {
            return Err(invalid(format!(
                "{:?} is not a directory or a git URL (`https://…[@rev]`, `file://…`)",
                text::escape(source)
            )));
        }
    };
    let added = register(home, &root, rev, shown);
    let _ = crate::fsutil::remove_tree(&staged);
    added
}

/// Record the catalogue at `root` (moved into the home when it is a git checkout, `rev`).
fn register(
    home: &Home,
    root: &Path,
    rev: Option<String>,
    shown: String,
) -> Result<(Registered, Marketplace), StoreError> {
    let market = read(root)?;
    let name = market.name.clone();
    let path = home.settings_path();
    let mut doc = settings::load(&path)?;
    if doc.get(TABLE).is_none() {
        doc.insert(TABLE, Item::Table(Table::new()));
    }
    let Some(table) = doc.get_mut(TABLE).and_then(Item::as_table_mut) else {
        return Err(StoreError::NotATable {
            path,
            key: TABLE.into(),
        });
    };
    if table.contains_key(&name) {
        return Err(invalid(format!(
            "a marketplace named `{name}` is already added (`yep marketplace remove {name}` first)"
        )));
    }
    let root = match &rev {
        Some(_) => {
            let dest = checkout_dir(home, &name);
            let failed = |error| StoreError::Write {
                path: dest.clone(),
                error,
            };
            crate::fsutil::remove_tree(&dest).map_err(failed)?;
            std::fs::rename(root, &dest).map_err(failed)?;
            dest
        }
        None => root.to_path_buf(),
    };
    let mut entry = Table::new();
    entry.insert("source", value(shown.as_str()));
    if let Some(rev) = &rev {
        entry.insert("rev", value(rev.as_str()));
    }
    table.insert(&name, Item::Table(entry));
    settings::store(&path, &doc, MODE_DEFAULT)?;
    let registered = Registered {
        name,
        source: shown,
        rev,
        root,
    };
    Ok((registered, market))
}

/// The marketplaces added to the home, by name.
pub fn registered(home: &Home) -> Result<Vec<Registered>, StoreError> {
    let path = home.settings_path();
    if !path.exists() {
        return Ok(Vec::new());
    }
    let doc = settings::load(&path)?;
    let Some(table) = doc.get(TABLE).and_then(Item::as_table) else {
        return Ok(Vec::new());
    };
    let mut all = Vec::new();
    for (name, item) in table.iter() {
        let Some(source) = item.get("source").and_then(Item::as_str) else {
            continue;
        };
        let rev = item.get("rev").and_then(Item::as_str).map(str::to_string);
        let root = match &rev {
            Some(_) => checkout_dir(home, name),
            None => PathBuf::from(source),
        };
        all.push(Registered {
            name: name.to_string(),
            source: source.to_string(),
            rev,
            root,
        });
    }
    Ok(all)
}

/// Remove marketplace `name` (and a git one's checkout). Whether it was there. What was
/// installed from it stays installed.
pub fn remove(home: &Home, name: &str) -> Result<bool, StoreError> {
    if !usable_name(name) {
        return Err(StoreError::BadName(name.to_string()));
    }
    let _lock = home.lock()?;
    let removed = settings::remove_entry(&home.settings_path(), TABLE, name)?;
    if removed {
        let dest = checkout_dir(home, name);
        crate::fsutil::remove_tree(&dest).map_err(|error| StoreError::Write {
            path: dest.clone(),
            error,
        })?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_source_kind_is_read_and_one_that_leaves_or_cannot_be_fetched_is_skipped() {
        let market = parse(&json!({
            "name": "m",
            "owner": {"name": "o"},
            "renames": {"old": "new", "gone": null},
            "plugins": [
                {"name": "a", "source": "./plugins/a"},
                {"name": "b", "source": {"source": "github", "repo": "o/b", "sha": "abc"}},
                {"name": "c", "source": {"source": "url", "url": "https://x.test/c.git", "ref": "main", "sha": "0123"}},
                {"name": "d", "source": {"source": "git-subdir", "url": "o/d", "path": "plugins/d"}},
                {"name": "e", "source": "../outside"},
                {"name": "f", "source": {"source": "npm", "package": "f"}},
                {"name": "g h", "source": "./g"},
                {"name": "i", "source": {"source": "git-subdir", "url": "o/i", "path": "/etc"}},
                {"name": "j", "strict": false, "source": "./j", "lspServers": {"x": {"command": "x"}}},
            ],
        }))
        .unwrap();
        let names: Vec<&str> = market.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "j"]);
        assert_eq!(
            market.entries[0].source,
            EntrySource::Path("plugins/a".into())
        );
        assert_eq!(
            market.entries[1].source,
            EntrySource::Git {
                url: "https://github.com/o/b.git".into(),
                rev: Some("abc".into()),
                subdir: None
            }
        );
        // The commit wins over the ref.
        assert!(
            matches!(&market.entries[2].source, EntrySource::Git { rev: Some(r), .. } if r == "0123")
        );
        assert_eq!(
            market.entries[3].source,
            EntrySource::Git {
                url: "https://github.com/o/d.git".into(),
                rev: None,
                subdir: Some("plugins/d".into())
            }
        );
        assert!(!market.entries[4].strict);
        assert!(market.entries[4].components.contains_key("lspServers"));
        assert_eq!(market.skipped.len(), 4, "{:?}", market.skipped);
        assert!(market.skipped[0].contains("leaves"), "{:?}", market.skipped);
        assert!(market.skipped[1].contains("`npm`"), "{:?}", market.skipped);
        assert_eq!(market.renames["gone"], None);
        assert_eq!(market.renames["old"].as_deref(), Some("new"));
    }

    #[test]
    fn a_catalogue_without_a_name_or_a_list_is_refused_and_text_is_escaped() {
        assert!(parse(&json!({"plugins": []})).is_err());
        assert!(parse(&json!({"name": "m"})).is_err());
        let market = parse(&json!({"name": "m", "plugins": [
            {"name": "x\u{1b}[2J", "source": "./x"},
        ]}))
        .unwrap();
        assert!(
            !market.skipped[0].contains('\u{1b}'),
            "{:?}",
            market.skipped
        );
    }
}
