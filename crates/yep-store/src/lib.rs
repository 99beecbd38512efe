//! The package store: one home directory holds the approved packages, the lock, the settings,
//! the secrets and the logs. Every mutation takes a file lock on the home and commits through a
//! journal, so a crash (even `kill -9`) leaves the home fully as before or fully as after.
//!
//! No processes (beyond `git`) and no async runtime: the CLI and an embedding agent call it
//! directly. It draws nothing either: an install reports its steps and downloads to the
//! caller's [`Progress`].
//!
//! Also here, because the store is where they are enforced: [`manifest`], the `plugin.json` a
//! user approves, and [`text`], the escaping of anything a package says before a terminal
//! sees it.

pub mod claude;
pub mod code;
pub mod config;
pub mod fetch;
pub mod fsutil;
pub mod grants;
pub mod hash;
pub mod launcher;
pub mod lockfile;
pub mod manifest;
pub mod marketplace;
pub mod mcp;
pub mod progress;
pub mod settings;
pub mod source;
pub mod state;
pub mod summary;
pub mod text;
pub mod tooltext;
pub mod verify;
pub mod zot;

use crate::manifest::{MANIFEST_FILE, Manifest, ManifestError};
use fetch::{FetchError, Registry};
use fsutil::{MODE_DEFAULT, remove_tree, write_atomic};
use lockfile::{LockBinary, LockEntry, LockSource, Lockfile};
pub use progress::{Progress, ProgressEvent};
use serde::{Deserialize, Serialize};
use source::SourceSpec;
use std::path::{Path, PathBuf};
use summary::{ContributionDiff, config_fields, diff};

/// The home directory and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

/// Why a store operation failed. Nothing on disk changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A bare name that names no crate on the registry under any name it may mean.
    #[error(
        "no extension `{}` on crates.io (tried {}){}{}",
        text::escape(name),
        tried.join(" and "),
        match installed_from {
            Some(from) => format!(
                "; the installed `{}` is from {}: `yep update {}` takes it from there again",
                text::escape(name),
                text::escape(from),
                text::escape(name)
            ),
            None => String::new(),
        },
        if *directory_here {
            format!(
                "; a bare name means crates.io, so to install the directory `{}` here, write `./{}`",
                text::escape(name),
                text::escape(name)
            )
        } else {
            String::new()
        }
    )]
    NotOnRegistry {
        name: String,
        tried: Vec<String>,
        /// A package directory of that name is in the current directory.
        directory_here: bool,
        /// Where the installed extension of that name came from, when there is one.
        installed_from: Option<String>,
    },
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Lock(#[from] lockfile::LockError),
    /// What `yep install` was given is not a source.
    #[error(transparent)]
    Source(#[from] source::SourceError),
    /// A name that is not an extension name (names reach paths).
    #[error("{0:?} is not an extension name (A-Z a-z 0-9 _ -)")]
    BadName(String),
    /// A directory given as a package has no manifest.
    #[error(
        "{} has no {MANIFEST_FILE} (nor a zot extension.json, nor a Claude Code, Codex or Agent Plugins plugin)",
        dir.display()
    )]
    NoManifest { dir: PathBuf },
    /// A zot extension could not be run to read what it registers: `source` is the runner's
    /// error (the host's `ZotProbeError`).
    #[error("failed to run zot extension `{name}` to read what it registers: {source}")]
    ZotRun {
        name: String,
        source: zot::ProbeFailure,
    },
    /// A zot extension changed its own files when it was run to read what it registers.
    #[error(
        "failed to run zot extension `{name}` to read what it registers: it changed its own files when run; a package that rewrites itself cannot be pinned (keep state in hello_ack.data_dir)"
    )]
    ZotRewrote { name: String },
    /// A zot extension's `go run` could not be built at install.
    #[error(
        "failed to build zot extension `{name}` (its exec is `go run`, built once at install): {output}"
    )]
    ZotBuild { name: String, output: String },
    /// A zot extension, and no way here to run it.
    #[error(
        "`{0}` is a zot extension (extension.json): installing one runs it once to read what it registers, and this program has no runner for that"
    )]
    NoZotRunner(String),
    /// A zot extension whose `extension.json` turns it off (`"enabled": false`), which zot
    /// never starts: it cannot be enabled until that says true.
    #[error(
        "`{name}` is off in its extension.json (\"enabled\": false): zot does not start it, and yep does not enable it"
    )]
    ZotDisabled { name: String },
    /// An update's manifest names another extension than the one installed.
    #[error("the update of `{name}` now calls itself `{now}`")]
    Renamed { name: String, now: String },
    /// The name, and a `; did you mean …` suffix when an installed name is close.
    #[error("no extension named `{0}` is installed{1}")]
    NotInstalled(String, String),
    #[error("not approved: {0}")]
    Declined(String),
    #[error("--locked: {0}")]
    Locked(String),
    /// The name is taken by a package from another origin; replacing it needs `--replace`.
    #[error(
        "`{name}` is already installed from {installed}; refusing to replace it with {offered}"
    )]
    SourceChanged {
        name: String,
        installed: String,
        offered: String,
    },
    /// A file of the home (`settings.toml`, `connections.toml`) could not be read.
    #[error("failed to read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A TOML file of the home does not parse.
    #[error("failed to parse {}: {error}", path.display())]
    Parse {
        path: PathBuf,
        error: Box<toml_edit::TomlError>,
    },
    /// A file of the home could not be written.
    #[error("failed to write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A user-level MCP server that cannot be added as given.
    #[error("{0}")]
    McpServer(String),
    /// A plugin marketplace that cannot be added or read.
    #[error("{0}")]
    Marketplace(String),
    /// The code a workspace's `.claude` hooks run from the workspace cannot be pinned, so they
    /// cannot be approved.
    #[error("yep cannot pin the code its hooks run from the workspace: {0}")]
    HookCode(#[source] code::CodeError),
    /// `<plugin>@<marketplace>`: the catalogue's renames say the plugin is gone (renamed to
    /// nothing).
    #[error(
        "plugin `{}` is gone from marketplace `{}`: its catalogue renames it to nothing",
        text::escape(plugin),
        text::escape(marketplace)
    )]
    PluginGone { plugin: String, marketplace: String },
    /// `<plugin>@<marketplace>`: the catalogue has no such plugin, or skips its entry (why).
    #[error(
        "{}; `yep marketplace list {}` lists what it offers",
        match skipped {
            Some(why) => format!(
                "marketplace `{}` lists `{}`, but yep cannot install it: {why}",
                text::escape(marketplace),
                text::escape(plugin)
            ),
            None => format!(
                "marketplace `{}` has no plugin `{}`",
                text::escape(marketplace),
                text::escape(plugin)
            ),
        },
        text::escape(marketplace)
    )]
    NotInMarketplace {
        plugin: String,
        marketplace: String,
        /// Why the entry was skipped when the catalogue was read (escaped).
        skipped: Option<String>,
    },
    /// A marketplace entry's relative source leads out of the marketplace (through a link).
    #[error(
        "the source of `{}` in marketplace `{}`, \"{}\", leaves the marketplace",
        text::escape(plugin),
        text::escape(marketplace),
        text::escape(path)
    )]
    OutsideMarketplace {
        plugin: String,
        marketplace: String,
        path: String,
    },
    /// A package whose approval runs nothing (a Claude Code plugin of LSP servers): enabling
    /// it would start nothing.
    #[error(
        "`{name}` offers only {offers}, which yep does not run: enabling it would run nothing, so it stays disabled (installed and pinned)"
    )]
    RunsNothing { name: String, offers: String },
    /// An MCP server's tool list past a cap on what may be approved.
    #[error(
        "MCP server `{}`: its tool list cannot be approved: {cap}",
        crate::text::escape(server)
    )]
    McpToolList {
        server: String,
        /// Told in the message, so not chained as a source.
        cap: mcp::ListCap,
    },
    /// A key of a TOML file of the home that must be a table is something else.
    #[error("`{key}` in {} is not a table", path.display())]
    NotATable { path: PathBuf, key: String },
    /// A secrets file others could read could not be made owner-only.
    #[error("failed to restrict {}: {error}", path.display())]
    Restrict {
        path: PathBuf,
        error: std::io::Error,
    },
    /// An extension has no config field of that name.
    #[error(
        "`{extension}` has no config field `{field}` (fields: {})",
        or_none(known)
    )]
    UnknownField {
        extension: String,
        field: String,
        known: Vec<String>,
    },
    /// A plain field was given as a secret.
    #[error(
        "`{field}` of `{extension}` is not a secret; set it with `yep config set {extension} {field} <value>`"
    )]
    NotSecret { extension: String, field: String },
    /// A secret field was given as a plain value.
    #[error(
        "`{field}` of `{extension}` is a secret: set it with `yep secret set {extension} {field}` (it is never taken on the command line)"
    )]
    IsSecret { extension: String, field: String },
    /// A value does not parse as its field's declared type.
    #[error("config field `{field}` wants a {expected}: {error}")]
    FieldType {
        field: String,
        expected: String,
        error: serde_json::Error,
    },
    /// A config value TOML cannot hold.
    #[error("config field `{field}`: TOML has no null; remove the key instead")]
    NullValue { field: String },
    /// The config breaks the manifest's `config_schema`: one line per problem.
    #[error("invalid config for `{extension}`:\n  {}", problems.join("\n  "))]
    InvalidConfig {
        extension: String,
        problems: Vec<String>,
    },
    /// One answer for a field breaks its schema (said in one line, fit to ask again with).
    #[error("{}", problems.join("; "))]
    AnswerRefused {
        field: String,
        problems: Vec<String>,
    },
    /// An answer for a selector field is not one of its values.
    #[error("{answer:?} is not one of: {}", options.join(", "))]
    NotAnOption {
        field: String,
        answer: String,
        options: Vec<String>,
    },
    /// The manifest's `config_schema` is not a JSON Schema.
    #[error("the config_schema of `{extension}` is not a valid JSON Schema: {message}")]
    BadSchema { extension: String, message: String },
    /// Any other file-system step; `context` says what was attempted.
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
}

fn or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |error| StoreError::Io { context, error }
}

/// Holds the home's file lock; released on drop.
pub struct HomeLock {
    _file: std::fs::File,
}

/// A commit in progress, written before any rename so recovery can finish it.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    /// `(from, to)` renames, each done only while `from` exists and `to` does not.
    renames: Vec<(PathBuf, PathBuf)>,
    /// The lock file's new content.
    lock: String,
    /// Removed after the renames and the lock write.
    cleanup: Vec<PathBuf>,
}

/// What the caller decides when shown a summary (and, on update, a diff).
pub trait Approver {
    /// `diff` is `None` for a first install. Return true to go ahead.
    fn approve(&mut self, summary: &str, diff: Option<&ContributionDiff>) -> bool;

    /// Before a first install runs a package to learn what it registers (a zot extension):
    /// `what` says what runs and where. Return true to run it. By default, asked as a summary.
    fn approve_run(&mut self, what: &str) -> bool {
        self.approve(what, None)
    }
}

/// A fetched package's manifest, before anything of it runs.
enum Package {
    Yep(Box<Manifest>),
    /// A zot extension; `shown` is its `extension.json` as the user knows it.
    Zot {
        extension: Box<zot::ZotManifest>,
        shown: PathBuf,
    },
    /// A Claude Code, Codex or Agent Plugins package, approved as it reads (nothing runs).
    Claude(Box<claude::approve::Approval>),
}

impl Package {
    fn name(&self) -> &str {
        match self {
            Package::Yep(m) => &m.name,
            Package::Zot { extension, .. } => &extension.name,
            Package::Claude(approval) => &approval.manifest.name,
        }
    }
}

/// Read the manifest of a fetched package in `root`; errors name it as the user knows it,
/// not the scratch copy.
///
/// Through a marketplace (`via`), it is a plugin, read with what its entry adds, which may
/// be all of it.
fn read_package(
    source: &SourceSpec,
    lock_source: &LockSource,
    root: &Path,
    via: Option<&marketplace::Resolved>,
) -> Result<Package, StoreError> {
    let zot = zot::is_zot_package(root);
    let kind = claude::plugin_kind(root).filter(|_| !zot);
    if kind.is_some() || via.is_some() {
        let shown = match source {
            SourceSpec::Path(p) => p.clone(),
            _ => PathBuf::from(lock_source.to_string()),
        };
        let what = match via {
            Some(found) => format!(
                "plugin `{}` of marketplace `{}`",
                text::escape(&found.pin.entry),
                text::escape(&found.pin.name)
            ),
            None => kind
                .unwrap_or(claude::PluginKind::Claude)
                .label()
                .to_string(),
        };
        let invalid = |message: String| ManifestError::Invalid {
            path: shown.clone(),
            message: format!("{what}: {message}"),
        };
        // A plugin that names itself nowhere takes its directory's name as the user knows it.
        let known_as = match lock_source {
            LockSource::Git { url, subdir, .. } => subdir
                .as_deref()
                .unwrap_or(url)
                .trim_end_matches('/')
                .rsplit(['/', ':'])
                .next()
                .map(|n| n.trim_end_matches(".git").to_string()),
            _ => shown.file_name().map(|n| n.to_string_lossy().into_owned()),
        };
        let overrides = claude::Overrides {
            fallback_name: known_as,
            fields: via.map(|f| f.overrides.fields.clone()).unwrap_or_default(),
        };
        let plugin =
            claude::ClaudePlugin::load(root, &overrides).map_err(|e| invalid(e.to_string()))?;
        let mut approval = plugin.approved().map_err(|e| invalid(e.to_string()))?;
        approval.pin.marketplace = via.map(|f| f.pin.clone());
        return Ok(Package::Claude(Box::new(approval)));
    }
    let file = if zot {
        zot::ZOT_MANIFEST_FILE
    } else {
        MANIFEST_FILE
    };
    let shown = match source {
        SourceSpec::Path(p) => p.join(file),
        _ => PathBuf::from(format!("{lock_source}: {file}")),
    };
    if !zot {
        return Ok(Package::Yep(Box::new(
            Manifest::load(root).map_err(|e| e.relabel(shown))?,
        )));
    }
    let extension = zot::ZotManifest::load(root).map_err(|e| e.relabel(shown.clone()))?;
    extension
        .check_exec(root)
        .map_err(|message| ManifestError::Invalid {
            path: shown.clone(),
            message,
        })?;
    Ok(Package::Zot {
        extension: Box::new(extension),
        shown,
    })
}

/// Approve everything (`--yes`).
pub struct AlwaysYes;
impl Approver for AlwaysYes {
    fn approve(&mut self, _: &str, _: Option<&ContributionDiff>) -> bool {
        true
    }
}

/// Runs zot extensions at install and update to read what they register ([`zot::Probe`]).
#[derive(Clone)]
pub struct ZotRunner(pub std::sync::Arc<dyn zot::Probe>);

impl std::fmt::Debug for ZotRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZotRunner")
    }
}

/// Install options.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// Reference a local directory in place instead of copying it.
    pub link: bool,
    /// Allow a package from another origin to take an installed name. It is approved afresh,
    /// the old package's secrets, config and data are dropped, and it is left disabled.
    pub replace: bool,
    /// Where downloads and steps are reported.
    pub progress: Progress,
    /// How a zot extension is run to read its registrations; without it, one is refused.
    pub zot: Option<ZotRunner>,
    /// The package's directory inside a git repository (a git source only).
    pub subdir: Option<String>,
}

/// Update options.
#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// Refuse any change to the lock (`--locked`).
    pub locked: bool,
    /// Where downloads and steps are reported.
    pub progress: Progress,
    /// How a zot extension is run to read its registrations again.
    pub zot: Option<ZotRunner>,
}

/// What an install or update did.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub name: String,
    pub version: Option<String>,
    pub source: String,
    pub content_hash: String,
    /// First install, updated, or unchanged.
    pub outcome: Outcome,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<ContributionDiff>,
    /// The prebuilt binary step, when the manifest names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The keys of a zot extension's `extension.json` that zot and yep ignore (escaped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// A zot extension whose `extension.json` says `"enabled": false`: not run, and not
    /// enabled until it says true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled_in_manifest: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Installed,
    Updated,
    /// A package from another origin took the name (`--replace`); nothing of the old one's
    /// secrets, config or enablement was kept.
    Replaced,
    Unchanged,
}

/// One row of `yep list`.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub name: String,
    pub version: Option<String>,
    pub description: String,
    pub source: String,
    pub enabled: bool,
    pub content_hash: String,
    /// The package changed on disk since it was approved.
    pub drifted: bool,
    /// How it changed, and what to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    pub server_command: Option<String>,
    pub server_resolves: bool,
    pub tools: Vec<String>,
    pub contributes: Vec<String>,
    /// The LSP servers a Claude Code plugin declares, recorded and not run (yep has no LSP
    /// client).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lsp_servers: Vec<String>,
    /// The marketplace it was installed through, and its entry there (`entry@marketplace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<String>,
    /// What its approval grants beyond the sandbox's default profile (`workspace write`,
    /// `net port 8080`); empty for none.
    pub sandbox: Vec<String>,
    pub config: Vec<ConfigStatus>,
    /// Trace events the last session dropped (trace extensions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_dropped: Option<u64>,
    /// Its server: `configured` (not running), `started`, `idle` (stopped for want of use; it
    /// starts again on next use) or `failed` (see [`state::run_state`]).
    pub state: &'static str,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A config field's state: set or not, never its value.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStatus {
    pub name: String,
    pub secret: bool,
    pub required: bool,
    pub set: bool,
}

impl Home {
    /// `--home`, else `$YEP_HOME`, else `<config dir>/yep`.
    pub fn resolve(flag: Option<PathBuf>) -> Home {
        let root = flag
            .or_else(|| {
                std::env::var_os("YEP_HOME")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .or_else(|| dirs::config_dir().map(|d| d.join("yep")))
            .unwrap_or_else(|| PathBuf::from(".yep"));
        Home { root }
    }

    pub fn extensions_dir(&self) -> PathBuf {
        self.root.join("extensions")
    }

    pub fn package_dir(&self, name: &str) -> PathBuf {
        self.extensions_dir().join(name)
    }

    pub fn lock_path(&self) -> PathBuf {
        self.root.join("extensions.lock")
    }

    pub fn settings_path(&self) -> PathBuf {
        self.root.join("settings.toml")
    }

    pub fn connections_path(&self) -> PathBuf {
        self.root.join("connections.toml")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.logs_dir().join(format!("{name}.log"))
    }

    /// Where an extension keeps state it writes: outside its package, whose content is hashed.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.join("data").join(name)
    }

    fn journal_path(&self) -> PathBuf {
        self.root.join(".journal.json")
    }

    fn scratch_dir(&self) -> PathBuf {
        self.extensions_dir().join(".scratch")
    }

    /// Take the home's mutation lock (blocking until another `yep` lets go), then finish or
    /// discard whatever a crashed run left behind.
    pub fn lock(&self) -> Result<HomeLock, StoreError> {
        std::fs::create_dir_all(&self.root)
            .map_err(io(format!("failed to create {}", self.root.display())))?;
        let path = self.root.join(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(format!("failed to open {}", path.display())))?;
        file.lock()
            .map_err(io(format!("failed to lock {}", path.display())))?;
        let guard = HomeLock { _file: file };
        self.recover()?;
        Ok(guard)
    }

    /// The mutation lock for a command that only reads: taken (waiting for a writer, finishing
    /// what a crashed one left) only where a writer has been, so reading a home that does not
    /// exist yet, or one nothing was written to, writes nothing to it.
    fn read_lock(&self) -> Result<Option<HomeLock>, StoreError> {
        if self.root.join(".lock").exists() || self.journal_path().exists() {
            self.lock().map(Some)
        } else {
            Ok(None)
        }
    }

    /// `name` is neither in the lock nor anywhere a crashed commit could still bring it from:
    /// a verb that needs it installed fails before it takes the lock (and creates the home).
    fn surely_not_installed(&self, name: &str) -> bool {
        !self.journal_path().exists()
            && self.lockfile().is_ok_and(|l| l.get(name).is_none())
            && self.package_dir(name).symlink_metadata().is_err()
    }

    /// Roll a journaled commit forward; drop uncommitted scratch.
    fn recover(&self) -> Result<(), StoreError> {
        let journal = self.journal_path();
        if let Ok(text) = std::fs::read_to_string(&journal) {
            match serde_json::from_str::<Journal>(&text) {
                // A journal only ever names paths this store made under `extensions/`; one
                // naming anything else was planted or corrupted, and is never acted on.
                Ok(ref j) if let Some(bad) = self.journal_escape(j) => {
                    tracing::warn!(
                        "discarding {}: it names {}, outside {}",
                        journal.display(),
                        bad.display(),
                        self.extensions_dir().display()
                    );
                    let _ = std::fs::remove_file(&journal);
                }
                Ok(j) => self.apply(&j)?,
                // A torn journal was never committed (it is written atomically, so this is
                // only a stray temp); nothing it describes happened.
                Err(_) => {
                    let _ = std::fs::remove_file(&journal);
                }
            }
        }
        // Never through a planted `extensions -> elsewhere` link.
        if self
            .extensions_dir()
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            tracing::warn!(
                "not cleaning {}: {} is a symlink",
                self.scratch_dir().display(),
                self.extensions_dir().display()
            );
            return Ok(());
        }
        remove_tree(&self.scratch_dir()).map_err(io("failed to clean up scratch"))
    }

    /// The first path of `j` that is not a plain path below `extensions/` (no `..`, no `.`,
    /// no symlink on the way from the home root down, `extensions/` itself included), if any.
    fn journal_escape<'a>(&self, j: &'a Journal) -> Option<&'a Path> {
        let base = self.extensions_dir();
        let is_link = |p: &Path| {
            p.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        };
        let base_linked = is_link(&base);
        let ok = |p: &Path| {
            if base_linked {
                return false;
            }
            let Ok(rel) = p.strip_prefix(&base) else {
                return false;
            };
            let parts: Vec<_> = rel.components().collect();
            !parts.is_empty()
                && parts
                    .iter()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
                && rel
                    .ancestors()
                    .skip(1)
                    .filter(|a| !a.as_os_str().is_empty())
                    .all(|a| !is_link(&base.join(a)))
        };
        j.renames
            .iter()
            .flat_map(|(from, to)| [from, to])
            .chain(&j.cleanup)
            .map(PathBuf::as_path)
            .find(|p| !ok(p))
    }

    fn apply(&self, j: &Journal) -> Result<(), StoreError> {
        for (from, to) in &j.renames {
            if from.symlink_metadata().is_ok() && to.symlink_metadata().is_err() {
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(io(format!("failed to create {}", parent.display())))?;
                }
                std::fs::rename(from, to).map_err(io(format!(
                    "failed to move {} to {}",
                    from.display(),
                    to.display()
                )))?;
            }
        }
        write_atomic(&self.lock_path(), j.lock.as_bytes(), MODE_DEFAULT)
            .map_err(io("failed to write the lock"))?;
        let _ = fsutil::sync_dir(&self.extensions_dir());
        std::fs::remove_file(self.journal_path())
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(io("failed to remove the journal"))?;
        for path in &j.cleanup {
            if path
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                let _ = std::fs::remove_file(path);
            } else {
                let _ = remove_tree(path);
            }
        }
        Ok(())
    }

    /// Journal, then apply.
    fn commit(&self, j: Journal) -> Result<(), StoreError> {
        let text =
            serde_json::to_string(&j).map_err(|e| io("failed to write the journal")(e.into()))?;
        write_atomic(&self.journal_path(), text.as_bytes(), MODE_DEFAULT)
            .map_err(io("failed to write the journal"))?;
        self.apply(&j)
    }

    /// Drop a scratch directory, unless a journal still needs what it holds: an interrupted
    /// commit is finished by the next recovery, from there.
    fn discard(&self, scratch: &Path) {
        if !self.journal_path().exists() {
            let _ = remove_tree(scratch);
        }
    }

    pub fn lockfile(&self) -> Result<Lockfile, StoreError> {
        Ok(Lockfile::load(&self.lock_path())?)
    }

    /// Pin what the user grants `name` (in `workspace`, for a workspace's MCP server) beyond
    /// its manifest, replacing what was granted before; none removes it.
    pub fn set_granted(
        &self,
        name: &str,
        workspace: Option<&str>,
        grants: grants::SandboxGrants,
    ) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let mut lock = self.lockfile()?;
        lock.set_granted(name, workspace, grants);
        lock.save(&self.lock_path()).map_err(io(format!(
            "failed to write {}",
            self.lock_path().display()
        )))?;
        Ok(())
    }

    /// A fresh scratch directory on the home's file system (renames stay atomic).
    fn scratch(&self) -> Result<PathBuf, StoreError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = self.scratch_dir().join(format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(io(format!("failed to create {}", dir.display())))?;
        Ok(dir)
    }

    /// Install a package from `spec`. Shows the summary through `approver` before anything
    /// is committed; nothing is enabled.
    pub fn install(
        &self,
        spec: &str,
        opts: &InstallOptions,
        approver: &mut dyn Approver,
    ) -> Result<Installed, StoreError> {
        let source = SourceSpec::parse(spec)?;
        let _lock = self.lock()?;
        // `<plugin>@<marketplace>` when a marketplace of that name is added; else the
        // crates.io `<name>@<version>` it always was.
        let via = match &source {
            SourceSpec::Bare {
                name,
                version: Some(market),
            } => marketplace::resolve(self, name, market)?,
            _ => None,
        };
        if via.is_some() && opts.subdir.is_some() {
            return Err(StoreError::Source(source::SourceError::SubdirNotGit));
        }
        let scratch = self.scratch()?;
        let result = match &via {
            Some(found) => {
                let opts = InstallOptions {
                    subdir: found.subdir.clone(),
                    ..opts.clone()
                };
                self.install_locked(&found.source, &opts, approver, &scratch, None, via.as_ref())
            }
            None => self.install_locked(&source, opts, approver, &scratch, None, None),
        };
        self.discard(&scratch);
        result
    }

    /// Fetch `source` into scratch, check it, ask, commit.
    fn install_locked(
        &self,
        source: &SourceSpec,
        opts: &InstallOptions,
        approver: &mut dyn Approver,
        scratch: &Path,
        update_of: Option<(&LockEntry, bool)>,
        via: Option<&marketplace::Resolved>,
    ) -> Result<Installed, StoreError> {
        let staged = scratch.join("package");
        let (lock_source, package_root) = self.fetch(source, opts, &staged, via.is_some())?;
        let package = read_package(source, &lock_source, &package_root, via)?;
        let name = package.name().to_string();
        check_name(&name)?;
        if let Some((entry, _)) = update_of
            && name != entry.name
        {
            return Err(StoreError::Renamed {
                name: entry.name.clone(),
                now: name,
            });
        }
        // A marketplace may point an entry elsewhere: another origin is another package,
        // installed (with --replace) rather than updated.
        if let Some((entry, _)) = update_of
            && !entry.source.same_origin(&lock_source)
        {
            return Err(StoreError::SourceChanged {
                name,
                installed: entry.source.to_string(),
                offered: lock_source.to_string(),
            });
        }
        let mut lock = self.lockfile()?;
        let previous = lock.get(&name).cloned();
        // A package from another origin that reuses an installed name is a different package,
        // never an update of it: it would inherit the original's approval, secrets and
        // enablement.
        let replacing = match &previous {
            Some(prev) if update_of.is_none() && !prev.source.same_origin(&lock_source) => {
                if !opts.replace {
                    return Err(StoreError::SourceChanged {
                        name,
                        installed: prev.source.to_string(),
                        offered: lock_source.to_string(),
                    });
                }
                true
            }
            _ => false,
        };
        let hash = hash::content_hash(&package_root)
            .map_err(io(format!("failed to hash {}", package_root.display())))?;
        // Only now, with the cheap refusals behind it, may a zot extension run; a first install
        // asks first. What is approved is the bytes hashed above: a run that rewrites them is
        // refused.
        let mut claude_pin = None;
        let mut claude_notes = Vec::new();
        let mut go_built = None;
        let (manifest, zot_pin, zot_notes, zot_ext) = match package {
            Package::Yep(manifest) => (*manifest, None, Vec::new(), None),
            Package::Claude(approval) => {
                let claude::approve::Approval {
                    manifest,
                    pin,
                    notes,
                } = *approval;
                claude_pin = Some(pin);
                claude_notes = notes;
                (manifest, None, Vec::new(), None)
            }
            Package::Zot { extension, shown } => {
                // An installed one that never ran (its manifest turned it off) asks as a
                // first install does, whatever the verb.
                let never_ran = previous.as_ref().is_some_and(|p| p.zot.is_some())
                    && zot::ZotManifest::load(&self.package_dir(&name))
                        .is_ok_and(|m| !m.enabled && m.spawns());
                let first = (update_of.is_none() && (previous.is_none() || replacing)) || never_ran;
                let ask: Option<&mut dyn Approver> = match first {
                    true => Some(&mut *approver),
                    false => None,
                };
                let (manifest, pin, notes, built) =
                    self.run_zot(&extension, &shown, &package_root, opts, scratch, ask)?;
                go_built = built;
                let after = hash::content_hash(&package_root)
                    .map_err(io(format!("failed to hash {}", package_root.display())))?;
                if after != hash {
                    return Err(StoreError::ZotRewrote { name });
                }
                (manifest, Some(pin), notes, Some(extension))
            }
        };
        let dest = self.package_dir(&manifest.name);
        let mut summary = match &claude_pin {
            // Its own screen: each hook's command line, not the `*` its manifest declares.
            Some(pin) => summary::claude_summary(&manifest, pin, &claude_notes),
            None => summary::summary(&manifest),
        };
        if let (Some(pin), Some(ext)) = (&zot_pin, &zot_ext) {
            summary.push('\n');
            summary.push_str(&summary::zot_summary(ext, pin, &zot_notes));
        }
        let ignored: Vec<String> = zot_ext
            .as_ref()
            .map(|ext| {
                ext.ignored_keys()
                    .into_iter()
                    .map(|k| crate::text::escape(k).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        summary.push_str(&format!(
            "\n  source    {}",
            crate::text::escape(&lock_source.to_string())
        ));
        if let Some(found) = via {
            summary.push_str(&format!(
                "\n  listed    in marketplace {} as {}",
                crate::text::escape(&found.pin.name),
                crate::text::escape(&found.pin.entry)
            ));
            if let Some(old) = &found.renamed_from {
                summary.push_str(&format!(
                    "\n            note: `{}` is called `{}` there now, so it installs as `{}`",
                    crate::text::escape(old),
                    crate::text::escape(&found.pin.entry),
                    manifest.name
                ));
            }
        }
        if let LockSource::Crate { crate_name, .. } = &lock_source
            && source::implied_name(crate_name) != manifest.name
        {
            summary.push_str(&format!(
                "\n            note: crate `{crate_name}` installs as `{}`, not `{}`",
                manifest.name,
                source::implied_name(crate_name)
            ));
        }
        if let Some(prev) = previous.as_ref().filter(|_| replacing) {
            summary.push_str(&format!(
                "\n  replaces  `{}` from {} (its secrets, config and data are dropped; it stays disabled)",
                manifest.name,
                crate::text::escape(&prev.source.to_string())
            ));
        }
        let installed = |outcome, diff, binary| Installed {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            source: lock_source.to_string(),
            content_hash: hash.clone(),
            outcome,
            summary: summary.clone(),
            diff,
            binary,
            ignored: ignored.clone(),
            disabled_in_manifest: zot_ext.as_ref().is_some_and(|ext| !ext.enabled),
        };
        // Same approved bytes from the same source: nothing to do.
        // (The installed copy counts too: one rewritten in place is restored from the source.)
        // A zot extension's registrations can change with the same bytes (a fetched
        // dependency, the environment): the same pin too.
        let same_claude = previous.as_ref().and_then(|p| p.claude.as_ref()) == claude_pin.as_ref();
        let same_pin = same_claude
            && (zot_pin.is_none()
                || (prev_pin(&previous) == zot_pin.as_ref()
                    && previous
                        .as_ref()
                        .and_then(LockEntry::approved)
                        .is_some_and(|m| {
                            serde_json::to_value(m).ok() == serde_json::to_value(&manifest).ok()
                        })));
        if let Some(prev) = &previous
            && prev.content_hash == hash
            && prev.source == lock_source
            && same_pin
            && dest.symlink_metadata().is_ok()
            && (prev.is_linked() || self.drift_of(prev).is_none())
        {
            return Ok(installed(Outcome::Unchanged, None, None));
        }
        // A linked package changes in place: judge it against what was approved, not its files.
        let diff = match &previous {
            Some(_) if replacing => None,
            Some(prev) => prev
                .approved()
                .or_else(|| Manifest::load(&dest).ok())
                .map(|old| {
                    let mut d = diff(&old, &manifest);
                    // What only a zot pin holds (intercepts, events, capabilities).
                    if let Some(new) = &zot_pin {
                        let (lines, widened) = prev.zot.clone().unwrap_or_default().diff(new);
                        d.lines.extend(lines);
                        d.widened |= widened;
                    }
                    // What only a Claude plugin's pin holds (hook command lines, inline
                    // commands, allowed-tools rules).
                    if let Some(new) = &claude_pin {
                        let (lines, widened) = match &prev.claude {
                            Some(old) => old.diff(new),
                            None => (vec![format!("+ {} parts", new.kind.label())], true),
                        };
                        d.lines.extend(lines);
                        d.widened |= widened;
                    }
                    d
                }),
            None => None,
        };
        // Restoring the approved bytes leaves the lock as it is, so `--locked` allows it.
        if let Some((entry, true)) = update_of
            && (entry.content_hash != hash || !same_pin)
        {
            return Err(StoreError::Locked(format!(
                "`{}` would change ({} → {}); the lock stays as it is",
                manifest.name,
                previous.as_ref().map_or("?", |p| p.content_hash.as_str()),
                hash
            )));
        }
        let needs_consent = match &diff {
            None => true,
            Some(d) => d.widened,
        };
        if needs_consent && !approver.approve(&summary, diff.as_ref()) {
            let what = if update_of.is_some() {
                "updated"
            } else {
                "installed"
            };
            return Err(StoreError::Declined(format!(
                "`{}` was not {what}",
                manifest.name
            )));
        }
        if replacing {
            // Before the new bytes land: a crash from here on leaves the old package
            // disabled and without secrets, never the new one holding them.
            self.forget_state(&manifest.name)?;
        }
        // The prebuilt binary goes in after hashing: it is not part of the approved content.
        // So does the program built for a zot extension's `go run`, pinned the same way.
        let (binary, pinned) = if opts.link {
            (None, None)
        } else if let Some(built) = &go_built {
            let path = zot::GO_BUILT.to_string();
            let target = staged.join(&path);
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(io(format!("failed to create {}", dir.display())))?;
            }
            std::fs::copy(built, &target)
                .map_err(io(format!("failed to place {}", target.display())))?;
            let sha256 = hash::sha256_file(&target)
                .map_err(io(format!("failed to hash {}", target.display())))?;
            (
                Some(format!("built `go run` into {path}")),
                Some(LockBinary { path, sha256 }),
            )
        } else {
            self.binary_step(&manifest, &staged, &opts.progress)
        };
        lock.upsert(LockEntry {
            name: manifest.name.clone(),
            source: lock_source.clone(),
            content_hash: hash.clone(),
            version: manifest.version.clone(),
            approved_manifest: Some(serde_json::to_string(&manifest).unwrap_or_default()),
            binary: pinned,
            zot: zot_pin,
            claude: claude_pin,
        });
        let trash = scratch.join("previous");
        let mut renames = Vec::new();
        if dest.symlink_metadata().is_ok() {
            renames.push((dest.clone(), trash.clone()));
        }
        if opts.link {
            // The link itself is staged, so placing it is one rename too.
            let link = scratch.join("link");
            #[cfg(unix)]
            std::os::unix::fs::symlink(&package_root, &link)
                .map_err(io("failed to create the link"))?;
            renames.push((link, dest.clone()));
        } else {
            renames.push((staged.clone(), dest.clone()));
        }
        self.commit(Journal {
            renames,
            lock: lock.render(),
            cleanup: vec![trash],
        })?;
        let outcome = if replacing {
            Outcome::Replaced
        } else if previous.is_some() {
            Outcome::Updated
        } else {
            Outcome::Installed
        };
        Ok(installed(outcome, diff, binary))
    }

    /// A zot extension's approved manifest: `extension.json` with what it registers when run
    /// once (its pin), and notes on registrations yep cannot offer. `ask`, on a first install,
    /// is asked before it runs.
    /// A `go run` extension (not linked) is built first, once asked, into scratch, and run
    /// as that program: the path of what was built comes back, to be pinned with the package.
    #[allow(clippy::type_complexity)]
    fn run_zot(
        &self,
        ext: &zot::ZotManifest,
        shown: &Path,
        root: &Path,
        opts: &InstallOptions,
        scratch: &Path,
        ask: Option<&mut dyn Approver>,
    ) -> Result<(Manifest, zot::ZotPin, Vec<String>, Option<PathBuf>), StoreError> {
        let mut built = None;
        // One its manifest turns off (`"enabled": false`) is never started by zot, and is not
        // run here either: installed with nothing registered, until it says true.
        let registrations = if ext.spawns() && ext.enabled {
            let runner = opts
                .zot
                .as_ref()
                .ok_or_else(|| StoreError::NoZotRunner(ext.name.clone()))?;
            if let Some(approver) = ask {
                let line = std::iter::once(ext.exec.clone().unwrap_or_default())
                    .chain(ext.args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ");
                let dir = shown.parent().unwrap_or(shown).display().to_string();
                let builds = !opts.link && !root.join("bin/go").exists();
                let what = match (ext.go_run(), builds) {
                    (Some(_), true) => format!(
                        "`{}` is a zot extension: installing builds its `{}` once with `go build` (which may download modules), then runs the program in {} once, as a session would, to read what it registers; sessions run that program, pinned, not `go run`",
                        ext.name,
                        crate::text::escape(&line),
                        crate::text::escape(&dir)
                    ),
                    _ => format!(
                        "`{}` is a zot extension: installing runs `{}` in {} once, as a session would, to read what it registers (npx or go run may download or compile)",
                        ext.name,
                        crate::text::escape(&line),
                        crate::text::escape(&dir)
                    ),
                };
                if !approver.approve_run(&what) {
                    return Err(StoreError::Declined(format!("`{}` was not run", ext.name)));
                }
            }
            // `go run .` is built once here, and the program run from then on: no compiler at
            // each start, nor a module cache to reach from the sandbox.
            let mut probed = ext.clone();
            // Not a linked package (the author's, changing in place), nor one that ships its
            // own `go` (the session finds its `bin/` first): that runs as written.
            let own_go = root.join("bin/go").exists();
            if let (Some(run), false, false) = (ext.go_run(), opts.link, own_go) {
                let out = scratch.join("zot-build").join("server");
                let _step = opts
                    .progress
                    .step(format!("building {} with go build", ext.name));
                run.build(root, &out)
                    .map_err(|output| StoreError::ZotBuild {
                        name: ext.name.clone(),
                        output,
                    })?;
                probed.exec = Some(out.to_string_lossy().into_owned());
                probed.args = run.args;
                built = Some(out);
            }
            let _run = opts.progress.step(format!(
                "running {} once to read what it registers",
                ext.name
            ));
            // Its data goes to scratch: nothing of a run before consent is kept.
            let data = scratch.join("zot-data");
            runner
                .0
                .probe(&probed, root, &data)
                .map_err(|source| StoreError::ZotRun {
                    name: ext.name.clone(),
                    source,
                })?
        } else {
            zot::Registrations::default()
        };
        let (manifest, notes) =
            ext.approved(&registrations)
                .map_err(|message| ManifestError::Invalid {
                    path: shown.to_path_buf(),
                    message,
                })?;
        Ok((manifest, registrations.pin, notes, built))
    }

    /// The manifest an installed package has on disk, in the terms it was approved in: a
    /// YEP package's `plugin.json`; a zot extension's `extension.json` with the tools,
    /// commands and pin it was approved with (its registrations are only known by running
    /// it).
    pub fn package_manifest(&self, entry: &LockEntry) -> Result<Manifest, ManifestError> {
        let dir = self.package_dir(&entry.name);
        // A Claude plugin's, read from its files as at install.
        if entry.claude.is_some() {
            let invalid = |message: String| ManifestError::Invalid {
                path: dir.clone(),
                message,
            };
            // With what its marketplace entry added, as recorded.
            let overrides = entry
                .claude
                .as_ref()
                .and_then(|pin| pin.marketplace.as_ref())
                .map(claude::MarketplacePin::overrides)
                .unwrap_or_default();
            let plugin =
                claude::ClaudePlugin::load(&dir, &overrides).map_err(|e| invalid(e.to_string()))?;
            return plugin
                .approved()
                .map(|approval| approval.manifest)
                .map_err(|e| invalid(e.to_string()));
        }
        let Some(pin) = &entry.zot else {
            return Manifest::load(&dir);
        };
        let ext = zot::ZotManifest::load(&dir)?;
        let approved = entry.approved();
        let registrations = zot::Registrations {
            tools: approved
                .as_ref()
                .map(|m| m.yolop.tools.clone())
                .unwrap_or_default(),
            commands: approved
                .as_ref()
                .map(|m| m.yolop.commands.clone())
                .unwrap_or_default(),
            pin: pin.clone(),
        };
        let path = dir.join(zot::ZOT_MANIFEST_FILE);
        ext.approved(&registrations)
            .map(|(manifest, _)| manifest)
            .map_err(|message| ManifestError::Invalid { path, message })
    }

    /// The manifest of installed extension `name`, as [`Home::package_manifest`] reads it.
    pub fn installed_manifest(&self, name: &str) -> Result<Manifest, StoreError> {
        let lock = self.lockfile()?;
        let entry = lock.get(name).ok_or_else(|| self.not_installed(name))?;
        Ok(self.package_manifest(entry)?)
    }

    /// The commands of the installed `name` that resolve nowhere a session looks (the
    /// package's `bin/`, `PATH`, or the path as written): its server's, and each stdio MCP
    /// server's that names no `${VAR}`, with what it is (`server`, `MCP server x`). A session
    /// could not start them.
    pub fn unresolved_commands(&self, name: &str) -> Vec<(String, String)> {
        let Ok(manifest) = self.installed_manifest(name) else {
            return Vec::new();
        };
        let dir = self.package_dir(name);
        let server = manifest
            .yolop
            .capability_server
            .as_ref()
            .map(|s| ("server".to_string(), s.command.clone()));
        let mcp = manifest.yolop.mcp_servers.iter().filter_map(|(n, s)| {
            let command = s.command.clone().filter(|c| !c.contains('$'))?;
            Some((format!("MCP server `{n}`"), command))
        });
        server
            .into_iter()
            .chain(mcp)
            .filter(|(_, command)| !command_resolves(command, &dir))
            .collect()
    }

    /// Fetch into `staged`; returns the lock source and where the package content is. A
    /// directory a marketplace `listed` may hold nothing of its own (its entry describes it).
    fn fetch(
        &self,
        source: &SourceSpec,
        opts: &InstallOptions,
        staged: &Path,
        listed: bool,
    ) -> Result<(LockSource, PathBuf), StoreError> {
        if opts.subdir.is_some() && !matches!(source, SourceSpec::Git { .. }) {
            return Err(StoreError::Source(source::SourceError::SubdirNotGit));
        }
        match source {
            SourceSpec::Path(path) => {
                let abs = std::fs::canonicalize(path)
                    .map_err(io(format!("failed to resolve {}", path.display())))?;
                if !listed
                    && !abs.join(MANIFEST_FILE).is_file()
                    && !zot::is_zot_package(&abs)
                    && claude::plugin_kind(&abs).is_none()
                {
                    return Err(StoreError::NoManifest { dir: abs });
                }
                let lock_source = LockSource::Path {
                    path: abs.display().to_string(),
                    link: opts.link,
                };
                if opts.link {
                    // Referenced in place, so checked in place: no link may lead out of it.
                    fsutil::check_links(&abs)
                        .map_err(io(format!("failed to link {}", abs.display())))?;
                    return Ok((lock_source, abs));
                }
                let _copy = opts.progress.step(format!("copying {}", abs.display()));
                fetch::fetch_path(&abs, staged)?;
                Ok((lock_source, staged.to_path_buf()))
            }
            SourceSpec::Git { url, rev } => {
                let commit = {
                    let _clone = opts.progress.step(format!("cloning {url}"));
                    match &opts.subdir {
                        Some(subdir) => {
                            fetch::fetch_git_subdir(url, rev.as_deref(), subdir, staged)?
                        }
                        None => fetch::fetch_git(url, rev.as_deref(), staged)?,
                    }
                };
                Ok((
                    LockSource::Git {
                        url: url.clone(),
                        rev: commit,
                        subdir: opts.subdir.clone(),
                    },
                    staged.to_path_buf(),
                ))
            }
            SourceSpec::Crate { name, version } => {
                self.fetch_crate(name, version.as_deref(), staged, &opts.progress)
            }
            SourceSpec::Bare { name, version } => {
                for candidate in SourceSpec::candidates(name) {
                    match self.fetch_crate(&candidate, version.as_deref(), staged, &opts.progress) {
                        Err(StoreError::Fetch(FetchError::NotFound(_))) => {}
                        other => return other,
                    }
                }
                Err(StoreError::NotOnRegistry {
                    name: name.clone(),
                    tried: SourceSpec::candidates(name),
                    directory_here: Path::new(name).join(MANIFEST_FILE).is_file(),
                    installed_from: self
                        .lockfile()
                        .ok()
                        .and_then(|lock| lock.get(name).map(|e| e.source.to_string())),
                })
            }
        }
    }

    fn fetch_crate(
        &self,
        name: &str,
        version: Option<&str>,
        staged: &Path,
        progress: &Progress,
    ) -> Result<(LockSource, PathBuf), StoreError> {
        let registry = Registry::from_env();
        let versions = fetch::index_versions(&registry, name, progress)?;
        let picked = fetch::pick_version(name, &versions, version)?;
        fetch::fetch_crate(&registry, name, &picked, staged, progress)?;
        Ok((
            LockSource::Crate {
                crate_name: name.to_string(),
                version: picked.version,
                checksum: picked.checksum,
            },
            staged.to_path_buf(),
        ))
    }

    /// Fetch the prebuilt binary when the manifest names one and the command does not resolve.
    /// Returns what happened, and the binary's pin when one was placed.
    fn binary_step(
        &self,
        manifest: &Manifest,
        package: &Path,
        progress: &Progress,
    ) -> (Option<String>, Option<LockBinary>) {
        let Some(server) = manifest.yolop.capability_server.as_ref() else {
            return (None, None);
        };
        let Some(template) = server.binaries.as_ref() else {
            return (None, None);
        };
        if command_resolves(&server.command, package) {
            return (Some(format!("`{}` already resolves", server.command)), None);
        }
        if server.command.contains('/') {
            return (
                Some(format!(
                    "not fetched: `{}` is a path, so a prebuilt binary cannot stand in for it",
                    server.command
                )),
                None,
            );
        }
        let version = manifest.version.as_deref().unwrap_or("0.0.0");
        match fetch::fetch_binary(
            template,
            &manifest.name,
            version,
            &server.command,
            package,
            progress,
        ) {
            Ok(target) => {
                let path = format!("bin/{}", server.command);
                let pin = hash::sha256_file(&package.join(&path))
                    .ok()
                    .map(|sha256| LockBinary { sha256, path });
                (
                    Some(format!("fetched `{}` for {target}", server.command)),
                    pin,
                )
            }
            Err(e) => (
                Some(format!(
                    "not available ({e}); calls will fail until `{}` is on PATH",
                    server.command
                )),
                None,
            ),
        }
    }

    /// Fetch every (or one) installed package again; commit what changed. A change that widens
    /// the grant needs `approver`; `opts.locked` refuses any change.
    pub fn update(
        &self,
        name: Option<&str>,
        opts: &UpdateOptions,
        approver: &mut dyn Approver,
    ) -> Result<Vec<Installed>, StoreError> {
        let locked = opts.locked;
        if let Some(n) = name
            && self.surely_not_installed(n)
        {
            return Err(self.not_installed(n));
        }
        if name.is_none() && !self.journal_path().exists() && self.lockfile()?.extensions.is_empty()
        {
            return Ok(Vec::new());
        }
        let _lock = self.lock()?;
        let lock = self.lockfile()?;
        let entries: Vec<LockEntry> = match name {
            Some(n) => vec![lock.get(n).cloned().ok_or_else(|| self.not_installed(n))?],
            None => lock.extensions.clone(),
        };
        let mut out = Vec::new();
        // Each git marketplace is brought up to date once, before its first plugin.
        let mut refreshed = Vec::new();
        for entry in entries {
            let (mut source, link, mut subdir) = taken_again(&entry.source);
            let via = match entry.claude.as_ref().and_then(|c| c.marketplace.as_ref()) {
                Some(from) => {
                    Some(self.listed_again(&entry, from, &mut refreshed, &opts.progress)?)
                }
                None => None,
            };
            if let Some(found) = &via {
                source = found.source.clone();
                subdir = found.subdir.clone();
            }
            let install = InstallOptions {
                progress: opts.progress.clone(),
                zot: opts.zot.clone(),
                link,
                subdir,
                ..InstallOptions::default()
            };
            let scratch = self.scratch()?;
            let result = self.install_locked(
                &source,
                &install,
                approver,
                &scratch,
                Some((&entry, locked)),
                via.as_ref(),
            );
            self.discard(&scratch);
            out.push(result?);
        }
        Ok(out)
    }

    /// Where the plugin `entry`, installed through marketplace `from.name`, is listed now:
    /// the marketplace refreshed (once per run, in `refreshed`) and its entry resolved again.
    /// One whose marketplace was removed since is taken again from where it was installed,
    /// with what its entry added then.
    fn listed_again(
        &self,
        entry: &LockEntry,
        from: &claude::MarketplacePin,
        refreshed: &mut Vec<String>,
        progress: &Progress,
    ) -> Result<marketplace::Resolved, StoreError> {
        let Some(mut registered) = marketplace::registered(self)?
            .into_iter()
            .find(|r| r.name == from.name)
        else {
            let (source, _, subdir) = taken_again(&entry.source);
            return Ok(marketplace::Resolved {
                source,
                subdir,
                overrides: from.overrides(),
                pin: from.clone(),
                renamed_from: None,
            });
        };
        if registered.rev.is_some() && !refreshed.contains(&registered.name) {
            let _refresh = progress.step(format!("refreshing marketplace {}", registered.name));
            registered = marketplace::refresh(self, &registered)?;
            refreshed.push(registered.name.clone());
        }
        marketplace::resolve_in(&registered, &from.entry)
    }

    /// Enable or disable an installed extension. Returns whether anything changed.
    pub fn set_enabled(&self, name: &str, on: bool) -> Result<bool, StoreError> {
        check_name(name)?;
        let listed = || {
            settings::enabled(&self.settings_path())
                .unwrap_or_default()
                .iter()
                .any(|n| n == name)
        };
        if self.surely_not_installed(name) && (on || !listed()) {
            return Err(self.not_installed(name));
        }
        let _lock = self.lock()?;
        let lock = self.lockfile()?;
        // Disabling a name that is enabled but no longer installed still cleans it up.
        let entry = lock.get(name);
        if entry.is_none() && (on || !listed()) {
            return Err(self.not_installed(name));
        }
        // A plugin of LSP servers only: nothing of it would run.
        if on
            && let Some(entry) = entry
            && let Some(pin) = &entry.claude
            && entry.approved().is_some_and(|m| !m.yolop.contributes())
        {
            return Err(StoreError::RunsNothing {
                name: name.to_string(),
                offers: pin.not_run(),
            });
        }
        // zot's own switch, in the package: zot never starts one that says false.
        if on
            && entry.is_some_and(|e| e.zot.is_some())
            && zot::ZotManifest::load(&self.package_dir(name)).is_ok_and(|m| !m.enabled)
        {
            return Err(StoreError::ZotDisabled {
                name: name.to_string(),
            });
        }
        settings::set_enabled(&self.settings_path(), name, on)
    }

    /// `name` is not installed: the error, with the closest installed name when one is close.
    pub fn not_installed(&self, name: &str) -> StoreError {
        let installed = self.lockfile().map(|l| l.extensions).unwrap_or_default();
        let closest = installed
            .iter()
            .map(|e| (strsim::damerau_levenshtein(name, &e.name), &e.name))
            .filter(|(d, n)| *d <= 2.max(n.len() / 3))
            .min();
        let hint = closest
            .map(|(_, n)| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        StoreError::NotInstalled(name.to_string(), hint)
    }

    /// Delete a package, its lock entry, its enable entry, its config, its stored secrets and its
    /// data dir.
    pub fn remove(&self, name: &str) -> Result<(), StoreError> {
        check_name(name)?;
        if self.surely_not_installed(name) {
            return Err(self.not_installed(name));
        }
        let _lock = self.lock()?;
        let mut lock = self.lockfile()?;
        let dest = self.package_dir(name);
        if !lock.remove(name) && dest.symlink_metadata().is_err() {
            return Err(self.not_installed(name));
        }
        lock.set_granted(name, None, Default::default());
        let trash = self.scratch()?.join("removed");
        let renames = if dest.symlink_metadata().is_ok() {
            vec![(dest, trash.clone())]
        } else {
            Vec::new()
        };
        // The package and its lock entry go first, atomically; the enable entry and the
        // secrets after (each an idempotent, atomic write), so a crash never leaves an
        // installed package without its secrets.
        self.commit(Journal {
            renames,
            lock: lock.render(),
            cleanup: vec![trash],
        })?;
        self.forget_state(name)
    }

    /// Disable `name` and drop its secrets, plain config and data dir (the caller holds the
    /// lock).
    fn forget_state(&self, name: &str) -> Result<(), StoreError> {
        settings::set_enabled(&self.settings_path(), name, false)?;
        settings::remove_config(&self.settings_path(), name)?;
        settings::remove_secrets(&self.connections_path(), name)?;
        // What it wrote for itself (tokens, caches) is its own too.
        remove_tree(&self.data_dir(name)).map_err(io(format!(
            "failed to remove {}",
            self.data_dir(name).display()
        )))?;
        Ok(())
    }

    /// Everything installed, for `yep list`.
    pub fn list(&self) -> Result<Vec<Listed>, StoreError> {
        let _lock = self.read_lock()?;
        let lock = self.lockfile()?;
        let enabled = settings::enabled(&self.settings_path())?;
        Ok(lock
            .extensions
            .iter()
            .map(|entry| {
                let dir = self.package_dir(&entry.name);
                let (run, failure) = state::run_state(self, &entry.name);
                let mut row = Listed {
                    name: entry.name.clone(),
                    version: entry.version.clone(),
                    description: String::new(),
                    source: entry.source.to_string(),
                    enabled: enabled.contains(&entry.name),
                    content_hash: entry.content_hash.clone(),
                    drifted: false,
                    drift: None,
                    server_command: None,
                    server_resolves: false,
                    tools: Vec::new(),
                    contributes: Vec::new(),
                    lsp_servers: entry
                        .claude
                        .as_ref()
                        .map(|pin| pin.lsp_servers.clone())
                        .unwrap_or_default(),
                    marketplace: entry
                        .claude
                        .as_ref()
                        .and_then(|pin| pin.marketplace.as_ref())
                        .map(|m| format!("{}@{}", m.entry, m.name)),
                    sandbox: Vec::new(),
                    config: Vec::new(),
                    trace_dropped: state::trace_dropped(self, &entry.name),
                    state: run,
                    failure,
                    error: None,
                };
                match self.package_manifest(entry) {
                    Ok(m) => {
                        row.description = m.description.clone();
                        row.server_command = m
                            .yolop
                            .capability_server
                            .as_ref()
                            .map(|s| s.command.clone());
                        row.server_resolves = row
                            .server_command
                            .as_deref()
                            .is_some_and(|c| command_resolves(c, &dir));
                        row.tools = m.yolop.tools.iter().map(|t| t.name.clone()).collect();
                        row.contributes = contributions(&m);
                        match row.lsp_servers.len() {
                            0 => {}
                            1 => row.contributes.push("1 LSP server (not run)".into()),
                            n => row.contributes.push(format!("{n} LSP servers (not run)")),
                        }
                        // The approved grants and the user's: what a session runs it with.
                        row.sandbox = entry
                            .approved()
                            .map_or_else(|| m.sandbox.clone(), |a| a.sandbox)
                            .merged(&lock.granted(&entry.name, None))
                            .lines();
                        row.drift = self.drift_of(entry);
                        row.drifted = row.drift.is_some();
                        let set_secrets = config::secrets(self, &entry.name).unwrap_or_default();
                        let plain = settings::config(&self.settings_path(), &entry.name)
                            .unwrap_or_default();
                        row.config = config_fields(&m)
                            .into_iter()
                            .map(|f| {
                                let set = match f.secret {
                                    true => set_secrets.contains_key(&f.name),
                                    false => plain.get(&f.name).is_some_and(|v| !v.is_null()),
                                };
                                ConfigStatus {
                                    set,
                                    name: f.name,
                                    secret: f.secret,
                                    required: f.required,
                                }
                            })
                            .collect();
                    }
                    Err(e) => row.error = Some(e.to_string()),
                }
                row
            })
            .collect())
    }

    /// An installed package whose files no longer match what was approved: why, and what
    /// to run.
    pub fn drift(&self, name: &str) -> Result<Option<String>, StoreError> {
        let lock = self.lockfile()?;
        let entry = lock.get(name).ok_or_else(|| self.not_installed(name))?;
        Ok(self.drift_of(entry))
    }
}

/// How an installed package's source is fetched again: the spec, whether it is linked, and
/// its directory in a git repository. A git one follows its default branch, a crate its
/// newest version.
fn taken_again(source: &LockSource) -> (SourceSpec, bool, Option<String>) {
    match source {
        LockSource::Path { path, link } => (SourceSpec::Path(PathBuf::from(path)), *link, None),
        LockSource::Git { url, subdir, .. } => (
            SourceSpec::Git {
                url: url.clone(),
                rev: None,
            },
            false,
            subdir.clone(),
        ),
        LockSource::Crate { crate_name, .. } => (
            SourceSpec::Crate {
                name: crate_name.clone(),
                version: None,
            },
            false,
            None,
        ),
    }
}

/// The zot pin of an installed entry, if it is a zot extension.
fn prev_pin(previous: &Option<LockEntry>) -> Option<&zot::ZotPin> {
    previous.as_ref().and_then(|p| p.zot.as_ref())
}

/// Names reach paths (`extensions/<name>`): only manifest-valid names are accepted.
fn check_name(name: &str) -> Result<(), StoreError> {
    // The name a workspace's own Claude Code config runs under.
    if name == claude::project::PROJECT {
        return Err(StoreError::BadName(format!(
            "{name} (reserved for the workspace's own .claude config)"
        )));
    }
    if crate::manifest::valid_name(name) {
        Ok(())
    } else {
        Err(StoreError::BadName(name.to_string()))
    }
}

/// The facets a manifest contributes, as short words.
pub fn contributions(m: &Manifest) -> Vec<String> {
    let f = &m.yolop;
    let mut out = Vec::new();
    let mut count = |n: usize, what: &str| {
        if n > 0 {
            out.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
        }
    };
    count(f.tools.len(), "tool");
    count(f.hooks.len(), "hook");
    count(f.commands.len(), "command");
    count(f.mcp_servers.len(), "mcp server");
    out.extend(summary::flags(m).into_iter().map(String::from));
    out
}

/// Whether a server command resolves the way the runtime will spawn it: the package's `bin/`,
/// a path inside the package, or PATH.
pub fn command_resolves(command: &str, package: &Path) -> bool {
    if command.contains('/') {
        let p = Path::new(command);
        return if p.is_absolute() {
            p.is_file()
        } else {
            package.join(p).is_file()
        };
    }
    if package.join("bin").join(command).is_file() {
        return true;
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(command).is_file()))
}
