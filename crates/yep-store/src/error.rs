//! [`StoreError`]: why a store operation failed, each variant saying it in the user's terms.

use crate::manifest::{MANIFEST_FILE, ManifestError};
use crate::{code, fetch::FetchError, lockfile, mcp, source, text, zot};
use std::path::PathBuf;

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
    /// A switch (`--hook`, `--server`, `--command`) that names nothing the package declares;
    /// `declared` is what it does declare of that kind.
    #[error(
        "`{}` declares no {} `{}`; {}",
        text::escape(name),
        kind.word(),
        text::escape(item),
        if declared.is_empty() {
            format!("it declares no {}", kind.word())
        } else {
            format!("its {}s: {}", kind.word(), text::escape(&declared.join(", ")))
        }
    )]
    NotDeclared {
        name: String,
        kind: crate::components::Component,
        item: String,
        declared: Vec<String>,
    },
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
    /// A bare name that several added marketplaces list: which one is meant is the user's to
    /// say.
    #[error(
        "`{}` is listed by the marketplaces {}: say which one, as `yep install {}@<marketplace>`",
        text::escape(plugin),
        marketplaces.iter().map(|m| format!("`{}`", text::escape(m))).collect::<Vec<_>>().join(" and "),
        text::escape(plugin)
    )]
    ListedInSeveral {
        plugin: String,
        marketplaces: Vec<String>,
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
    #[error("config field `{field}` wants {expected} (as JSON), and `{given}` is not one")]
    FieldType {
        field: String,
        /// The type with its article: "an integer", "a boolean".
        expected: String,
        /// What was given, escaped.
        given: String,
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
    /// A brokered secret's binding does not read ([`crate::broker::Binding::validate`]).
    #[error("extension `{extension}`: the brokered secret `{field}`: {why}")]
    Broker {
        extension: String,
        field: String,
        why: String,
    },
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

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |error| StoreError::Io { context, error }
}
