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

use crate::claude::{MarketplacePin, Overrides};
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

impl Entry {
    /// What the entry says of its plugin, for [`crate::claude::ClaudePlugin::load`]: its
    /// name (which wins over the plugin's own), version, description and components.
    pub fn overrides(&self) -> Overrides {
        let mut entry = serde_json::Map::new();
        entry.insert("name".into(), Value::String(self.name.clone()));
        for (key, value) in [
            ("version", &self.version),
            ("description", &self.description),
        ] {
            if let Some(value) = value {
                entry.insert(key.into(), Value::String(value.clone()));
            }
        }
        entry.extend(self.components.clone());
        Overrides::from_marketplace_entry(&Value::Object(entry))
    }
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
            Ok(EntrySource::Git {
                url: git_url(repository_url(url)?)?,
                rev,
                subdir,
            })
        }
        Some(other) => Err(format!(
            "its source is `{}`, which yep does not fetch (a path, github, url or git-subdir)",
            text::escape(other)
        )),
        None if source.is_null() => Err("it has no `source`".into()),
        None => Err(
            "its `source` is neither a path nor an object with a `source` kind (github, url or git-subdir)"
                .into(),
        ),
    }
}

/// The repository a `url` or `git-subdir` source names, as a URL git takes: a URL as it is,
/// an absolute path as the local repository it is (`file://`), and `owner/repo` as GitHub's.
/// A path is never sent to the network: one that is relative, starts with `~` or is a
/// directory here is refused, saying what to write instead.
fn repository_url(url: String) -> Result<String, String> {
    if url.contains("://") || url.starts_with("git@") {
        return Ok(url);
    }
    let shown = text::escape(&url);
    if url.starts_with('/') {
        return match Path::new(&url).is_dir() {
            true => Ok(format!("file://{url}")),
            false => Err(format!(
                "its `url` {shown:?} is a local path with no repository there"
            )),
        };
    }
    if url.starts_with('~') {
        return Err(format!(
            "its `url` {shown:?} is a path under `~`, which yep does not expand: write the repository's absolute path"
        ));
    }
    if url.starts_with('.') || Path::new(&url).exists() {
        return Err(format!(
            "its `url` {shown:?} is a relative path: a plugin in the marketplace is a `source` string (\"./plugins/x\"), a local repository an absolute path, and a GitHub one `owner/repo` or its URL"
        ));
    }
    // `owner/repo`: how `git-subdir` (and some `url`s) name a GitHub repository.
    let owner_repo = url.split('/').count() == 2
        && url.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        });
    match owner_repo {
        true => Ok(format!("https://github.com/{url}.git")),
        false => Err(format!(
            "its `url` {shown:?} is neither a git URL, an absolute path nor GitHub's `owner/repo`"
        )),
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

/// The longest chain of renames followed (`a` → `b` → `c`); a loop ends there too.
const MAX_RENAMES: usize = 8;

/// A plugin of an added marketplace, resolved to what `yep install` fetches.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Where its files are: a directory, or a git repository (and `subdir` in it).
    pub source: SourceSpec,
    pub subdir: Option<String>,
    /// What its entry adds to its files.
    pub overrides: Overrides,
    /// What the lock records of where it was listed.
    pub pin: MarketplacePin,
    /// The name asked for, when the catalogue says the plugin is now called otherwise.
    pub renamed_from: Option<String>,
}

/// `plugin` as the added marketplace `market` lists it, or `None` when no marketplace of that
/// name is added.
pub fn resolve(home: &Home, plugin: &str, market: &str) -> Result<Option<Resolved>, StoreError> {
    match registered(home)?.into_iter().find(|r| r.name == market) {
        Some(registered) => resolve_in(&registered, plugin).map(Some),
        None => Ok(None),
    }
}

/// The added marketplaces whose catalogue lists `plugin` (by its name now, not a rename), by
/// name: what a bare `yep install <plugin>` looks at before crates.io. A catalogue that cannot
/// be read is passed over.
pub fn offering(home: &Home, plugin: &str) -> Result<Vec<String>, StoreError> {
    Ok(registered(home)?
        .into_iter()
        .filter(|r| read(&r.root).is_ok_and(|m| m.entries.iter().any(|e| e.name == plugin)))
        .map(|r| r.name)
        .collect())
}

/// `plugin` as `registered`'s catalogue lists it, following its renames: a relative source
/// is a directory of the marketplace (of a git one, its repository at its commit) that must
/// stay inside it; a git source is that repository, at its `sha` (else its `ref`).
pub fn resolve_in(registered: &Registered, plugin: &str) -> Result<Resolved, StoreError> {
    let market = read(&registered.root)?;
    let marketplace = registered.name.clone();
    let mut name = plugin.to_string();
    for _ in 0..MAX_RENAMES {
        if market.entries.iter().any(|e| e.name == name) {
            break;
        }
        match market.renames.get(&name) {
            None => break,
            Some(None) => {
                return Err(StoreError::PluginGone {
                    plugin: name,
                    marketplace,
                });
            }
            Some(Some(new)) => name = new.clone(),
        }
    }
    let Some(entry) = market.entries.iter().find(|e| e.name == name) else {
        let prefix = format!("{}: ", text::escape(&name));
        let skipped = market
            .skipped
            .iter()
            .find(|why| why.starts_with(&prefix))
            .cloned();
        return Err(StoreError::NotInMarketplace {
            plugin: name,
            marketplace,
            skipped,
        });
    };
    let subdir_of = |path: &str| (path != ".").then(|| path.to_string());
    let (source, subdir) = match &entry.source {
        EntrySource::Path(path) => match (&registered.rev, SourceSpec::parse(&registered.source)) {
            // The marketplace's own repository, at the commit its checkout holds.
            (Some(rev), Ok(SourceSpec::Git { url, .. })) => (
                SourceSpec::Git {
                    url,
                    rev: Some(rev.clone()),
                },
                subdir_of(path),
            ),
            _ => (
                SourceSpec::Path(inside_root(registered, &entry.name, path)?),
                None,
            ),
        },
        EntrySource::Git { url, rev, subdir } => (
            SourceSpec::Git {
                url: url.clone(),
                rev: rev.clone(),
            },
            subdir.as_deref().and_then(subdir_of),
        ),
    };
    let overrides = entry.overrides();
    Ok(Resolved {
        source,
        subdir,
        pin: MarketplacePin::new(&marketplace, &entry.name, &overrides),
        overrides,
        renamed_from: (name != plugin).then(|| plugin.to_string()),
    })
}

/// The directory `path` of a local marketplace, refused when it leads out of it (through a
/// link: `..` never reaches here). One that is missing is left for the copy to say so.
fn inside_root(registered: &Registered, plugin: &str, path: &str) -> Result<PathBuf, StoreError> {
    let dir = registered.root.join(path);
    let Ok(real) = dir.canonicalize() else {
        return Ok(dir);
    };
    let root = registered
        .root
        .canonicalize()
        .map_err(|error| StoreError::Read {
            path: registered.root.clone(),
            error,
        })?;
    if !real.starts_with(&root) {
        return Err(StoreError::OutsideMarketplace {
            plugin: plugin.to_string(),
            marketplace: registered.name.clone(),
            path: path.to_string(),
        });
    }
    Ok(real)
}

/// Bring a git marketplace's checkout to the newest commit of what it was added from (the
/// ref it was added at, else the default branch); a local one is read in place, so it is as
/// it is. The caller holds the home's lock.
pub(crate) fn refresh(home: &Home, registered: &Registered) -> Result<Registered, StoreError> {
    let (Some(old), Ok(SourceSpec::Git { url, rev })) =
        (&registered.rev, SourceSpec::parse(&registered.source))
    else {
        return Ok(registered.clone());
    };
    // Its checkout is moved aside and replaced: never for a name that leads out of the home
    // (settings.toml may be planted).
    if !usable_name(&registered.name) {
        return Err(StoreError::BadName(registered.name.clone()));
    }
    let dir = home.root.join("marketplaces");
    let staged = dir.join(".adding");
    let write = |path: &Path| {
        let path = path.to_path_buf();
        move |error| StoreError::Write { path, error }
    };
    crate::fsutil::remove_tree(&staged).map_err(write(&staged))?;
    std::fs::create_dir_all(&staged).map_err(write(&staged))?;
    let checkout = staged.join("checkout");
    let swap = || -> Result<Registered, StoreError> {
        let commit = crate::fetch::fetch_git(&url, rev.as_deref(), &checkout)?;
        if &commit == old {
            return Ok(registered.clone());
        }
        let market = read(&checkout)?;
        if market.name != registered.name {
            return Err(invalid(format!(
                "marketplace `{}` now calls itself `{}` at {url}; `yep marketplace remove {}` and add it again to take it",
                registered.name, market.name, registered.name
            )));
        }
        let dest = checkout_dir(home, &registered.name);
        let previous = dir.join(".previous");
        crate::fsutil::remove_tree(&previous).map_err(write(&previous))?;
        if dest.symlink_metadata().is_ok() {
            std::fs::rename(&dest, &previous).map_err(write(&dest))?;
        }
        std::fs::rename(&checkout, &dest).map_err(write(&dest))?;
        set_rev(home, &registered.name, &commit)?;
        let _ = crate::fsutil::remove_tree(&previous);
        Ok(Registered {
            rev: Some(commit),
            root: dest,
            ..registered.clone()
        })
    };
    let refreshed = swap();
    let _ = crate::fsutil::remove_tree(&staged);
    refreshed
}

/// Record the commit marketplace `name`'s checkout now holds.
fn set_rev(home: &Home, name: &str, rev: &str) -> Result<(), StoreError> {
    let path = home.settings_path();
    let mut doc = settings::load(&path)?;
    let Some(entry) = doc
        .get_mut(TABLE)
        .and_then(|t| t.get_mut(name))
        .and_then(Item::as_table_mut)
    else {
        return Err(StoreError::NotATable {
            path,
            key: format!("{TABLE}.{name}"),
        });
    };
    entry.insert("rev", value(rev));
    settings::store(&path, &doc, MODE_DEFAULT)
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
    fn an_entry_resolves_to_its_source_with_what_it_adds_and_a_rename_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".claude-plugin")).unwrap();
        let catalogue = json!({"name": "m", "renames": {"old": "lsp", "gone": null}, "plugins": [
            {"name": "lsp", "source": "./plugins/lsp", "version": "1.0.0", "strict": false,
                "lspServers": {"ra": {"command": "rust-analyzer"}}, "homepage": "x"},
            {"name": "sub", "source": {"source": "git-subdir", "url": "o/r", "path": "p/sub",
                "ref": "main", "sha": "abc"}},
        ]});
        std::fs::write(tmp.path().join(CATALOGUES[0]), catalogue.to_string()).unwrap();
        let from_git = Registered {
            name: "m".into(),
            source: "https://example.com/m.git@v1".into(),
            rev: Some("c0ffee".into()),
            root: tmp.path().to_path_buf(),
        };
        // Of a git marketplace: its own repository, at the commit its checkout holds.
        let lsp = resolve_in(&from_git, "old").unwrap();
        assert_eq!(
            lsp.source,
            SourceSpec::Git {
                url: "https://example.com/m.git".into(),
                rev: Some("c0ffee".into())
            }
        );
        assert_eq!(lsp.subdir.as_deref(), Some("plugins/lsp"));
        assert_eq!(lsp.renamed_from.as_deref(), Some("old"));
        assert_eq!(lsp.pin.entry, "lsp");
        let mut added: Vec<&str> = lsp.overrides.fields.keys().map(String::as_str).collect();
        added.sort();
        assert_eq!(added, ["lspServers", "name", "version"]);
        assert_eq!(lsp.pin.overrides(), lsp.overrides);
        // A git-subdir source: the commit wins over the ref.
        let sub = resolve_in(&from_git, "sub").unwrap();
        assert_eq!(
            sub.source,
            SourceSpec::Git {
                url: "https://github.com/o/r.git".into(),
                rev: Some("abc".into())
            }
        );
        assert_eq!(sub.subdir.as_deref(), Some("p/sub"));
        assert!(matches!(
            resolve_in(&from_git, "gone"),
            Err(StoreError::PluginGone { .. })
        ));
        assert!(matches!(
            resolve_in(&from_git, "none"),
            Err(StoreError::NotInMarketplace { skipped: None, .. })
        ));
        // Of a local one: the directory itself.
        let local = Registered {
            rev: None,
            source: tmp.path().display().to_string(),
            ..from_git
        };
        let lsp = resolve_in(&local, "lsp").unwrap();
        assert_eq!(lsp.source, SourceSpec::Path(tmp.path().join("plugins/lsp")));
        assert_eq!(lsp.subdir, None);
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
