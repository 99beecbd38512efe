//! The package manifest, `plugin.json` with a `yolop` facet: what a user approves.
//!
//! Read exactly as yolop reads it (lenient at the top level and in the facet, strict where
//! yolop is strict), without executing anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const MANIFEST_FILE: &str = "plugin.json";

/// The largest manifest read (`plugin.json`, `extension.json`, a crate's `Cargo.toml`); a
/// longer one is refused, as a FIFO or a device in its place is (see
/// [`crate::fsutil::read_regular`]).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// The text of the manifest at `path`, read as package content is read: a regular file (a
/// link to one inside the package is followed) of at most [`MAX_MANIFEST_BYTES`].
pub(crate) fn read_manifest_text(path: &Path) -> Result<String, ManifestError> {
    crate::fsutil::read_regular_string(path, MAX_MANIFEST_BYTES, crate::fsutil::Links::Follow)
        .map_err(|error| ManifestError::Read {
            path: path.to_path_buf(),
            error,
        })
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub yolop: Facet,
    /// What the package asks of the OS sandbox beyond its default profile: a top-level key,
    /// which yolop ignores, approved and pinned with the rest.
    #[serde(default, skip_serializing_if = "SandboxGrants::is_empty")]
    pub sandbox: SandboxGrants,
}

pub use crate::grants::{LimitGrants, SandboxGrants};

/// The `yolop` block.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Facet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(
        rename = "capabilityServer",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub capability_server: Option<CapabilityServer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<Value>,
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    #[serde(default)]
    pub prompt: bool,
    #[serde(default)]
    pub dynamic_prompt: bool,
    #[serde(rename = "mcpServers", default)]
    pub mcp_servers: BTreeMap<String, McpServer>,
    #[serde(default)]
    pub hooks: Vec<HookDef>,
    #[serde(default)]
    pub commands: Vec<CommandDef>,
    #[serde(default)]
    pub status: bool,
    #[serde(default)]
    pub skills: bool,
    #[serde(default)]
    pub ui_ask: bool,
    #[serde(default)]
    pub trace: bool,
}

impl Facet {
    /// Whether it contributes anything a session runs or shows (a manifest an author writes
    /// must).
    pub fn contributes(&self) -> bool {
        !self.tools.is_empty()
            || self.prompt
            || self.dynamic_prompt
            || !self.mcp_servers.is_empty()
            || !self.hooks.is_empty()
            || !self.commands.is_empty()
            || self.status
            || self.skills
            || self.trace
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapabilityServer {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binaries: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "object_schema")]
    pub schema: Value,
    #[serde(default)]
    pub never_defer: bool,
    /// The schema of its structured result, when it declares one (zot's `output_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

fn object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    #[serde(rename = "type", default = "stdio")]
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn stdio() -> String {
    "stdio".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    #[default]
    Warn,
    Block,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookDef {
    pub event: HookEvent,
    #[serde(default = "match_all")]
    pub tool_name_glob: String,
    #[serde(default = "default_hook_timeout")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub on_error: OnError,
}

impl HookDef {
    /// `timeout_ms`, clamped to the host's maximum: a hook never holds a call longer.
    pub fn effective_timeout_ms(&self) -> u64 {
        hook_timeout(self.timeout_ms).as_millis() as u64
    }
}

/// A hook's `timeout_ms`, clamped to [`MAX_HOOK_TIMEOUT_MS`].
pub fn hook_timeout(timeout_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(timeout_ms.min(MAX_HOOK_TIMEOUT_MS))
}

fn match_all() -> String {
    "*".into()
}

fn default_hook_timeout() -> u64 {
    5000
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub args: Vec<CommandArg>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandArg {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
}

/// Why a manifest was refused. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    #[error("failed to read manifest {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("failed to parse manifest {path}: {message} at line {line} column {column}")]
    Syntax {
        path: PathBuf,
        message: String,
        line: usize,
        column: usize,
    },
    #[error("invalid manifest {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ManifestError {
    /// The same error, naming `path` (what the user knows) instead of where it was read.
    pub fn relabel(self, path: PathBuf) -> ManifestError {
        match self {
            ManifestError::Read { error, .. } => ManifestError::Read { path, error },
            ManifestError::Syntax {
                message,
                line,
                column,
                ..
            } => ManifestError::Syntax {
                path,
                message,
                line,
                column,
            },
            ManifestError::Invalid { message, .. } => ManifestError::Invalid { path, message },
        }
    }
}

impl Manifest {
    /// Read and validate `<dir>/plugin.json`.
    ///
    /// A crate without `plugin.json` may carry the facet in its `Cargo.toml` instead, as
    /// `[package.metadata.yolop]`; the package's name, version and description fill in the rest.
    pub fn load(dir: &Path) -> Result<Manifest, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let cargo = dir.join("Cargo.toml");
        if !path.exists() && cargo.is_file() {
            return Self::from_cargo_toml(&cargo);
        }
        let text = read_manifest_text(&path)?;
        Self::parse(&text, &path)
    }

    /// Read `[package.metadata.yolop]` from a crate's `Cargo.toml`.
    pub fn from_cargo_toml(path: &Path) -> Result<Manifest, ManifestError> {
        let text = read_manifest_text(path)?;
        let doc: toml::Value = toml::from_str(&text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((0, 0));
            ManifestError::Syntax {
                path: path.to_path_buf(),
                message: e.message().to_string(),
                line,
                column,
            }
        })?;
        let invalid = |message: &str| ManifestError::Invalid {
            path: path.to_path_buf(),
            message: message.to_string(),
        };
        let package = doc
            .get("package")
            .ok_or_else(|| invalid("no [package] table"))?;
        let facet = package
            .get("metadata")
            .and_then(|m| m.get("yolop"))
            .ok_or_else(|| invalid("no plugin.json beside it and no [package.metadata.yolop]"))?;
        let str_of = |v: Option<&toml::Value>| v.and_then(toml::Value::as_str).map(String::from);
        let crate_name = str_of(package.get("name")).unwrap_or_default();
        let name = str_of(facet.get("name")).unwrap_or_else(|| {
            crate_name
                .trim_start_matches("yep-extension-")
                .trim_start_matches("yolop-extension-")
                .to_string()
        });
        let manifest = serde_json::json!({
            "name": name,
            "description": str_of(package.get("description")).unwrap_or_default(),
            "version": str_of(package.get("version")),
            "yolop": serde_json::to_value(facet).map_err(|e| invalid(&e.to_string()))?,
        });
        Self::parse(&manifest.to_string(), path)
    }

    /// Parse and validate manifest text; `path` is only used in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        parse_checked(text, path, |m: &Manifest| {
            m.validate()?;
            match m.yolop.contributes() {
                true => Ok(()),
                false => Err("extension declares no contributions; nothing to contribute".into()),
            }
        })
    }

    /// [`Manifest::parse`] for a manifest yep made and approved (the lock's, a plugin's)
    /// rather than one an author wrote: every check holds but the one that it contributes
    /// something, since a package whose only parts yep does not run (a Claude Code plugin
    /// of LSP servers) is installed, and pinned, with a facet that runs nothing.
    pub fn parse_approval(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        parse_checked(text, path, Manifest::validate)
    }

    fn validate(&self) -> Result<(), String> {
        if !valid_name(&self.name) {
            return Err(format!(
                "name \"{}\" must be non-empty and use only A-Z a-z 0-9 _ -, at most {MAX_NAME_LEN} characters",
                crate::text::escape(&self.name)
            ));
        }
        self.sandbox.validate()?;
        let f = &self.yolop;
        if let Some(v) = &f.protocol_version
            && !yep_protocol::version_compatible(v)
        {
            return Err(format!(
                "protocol_version {v:?} is incompatible with this host ({})",
                yep_protocol::PROTOCOL_VERSION
            ));
        }
        if let Some(server) = &f.capability_server
            && server.command.trim().is_empty()
        {
            return Err("capabilityServer.command is empty".into());
        }
        if self.name.contains("__") {
            return Err(format!(
                "name \"{}\" must not contain `__`: it separates an extension from its tool in qualified tool names",
                self.name
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &f.tools {
            check_model_tool_name(&self.name, &t.name)?;
            if !seen.insert(("tool", t.name.as_str())) {
                return Err(format!("tool `{}` is declared twice", t.name));
            }
        }
        for c in &f.commands {
            check_item_name("command", &c.name)?;
            if !seen.insert(("command", c.name.as_str())) {
                return Err(format!("command `{}` is declared twice", c.name));
            }
            for a in &c.args {
                check_item_name(&format!("command {} argument", c.name), &a.name)?;
            }
        }
        for name in f.mcp_servers.keys() {
            check_item_name("MCP server", name)?;
        }
        if let Some(props) = f
            .config_schema
            .as_ref()
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
        {
            for (name, prop) in props {
                check_item_name("config field", name)?;
                if let Some(env) = prop.get("env")
                    && !env.as_str().is_some_and(valid_env_name)
                {
                    return Err(format!(
                        "config field {name}: env {} must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most {MAX_NAME_LEN} characters)",
                        crate::text::escape(&env.to_string())
                    ));
                }
                if let Some(broker) = prop.get("broker") {
                    let binding =
                        serde_json::from_value::<crate::broker::binding::Binding>(broker.clone())
                            .map_err(|e| format!("config field {name}: broker: {e}"))?;
                    let secret = prop.get("secret").and_then(Value::as_bool) == Some(true);
                    binding
                        .validate()
                        .and_then(|()| match secret && !binding.in_env {
                            true => Ok(()),
                            false => Err("only a secret field is brokered, to hosts".into()),
                        })
                        .map_err(|why| format!("config field {name}: broker: {why}"))?;
                }
            }
        }
        if f.hooks.len() > MAX_HOOKS {
            return Err(format!(
                "{} hook subscriptions, over the cap of {MAX_HOOKS} per extension",
                f.hooks.len()
            ));
        }
        for h in &f.hooks {
            if !valid_glob(&h.tool_name_glob) {
                return Err(format!(
                    "hook tool_name_glob {:?} must use only A-Z a-z 0-9 _ . - and *, at most {MAX_NAME_LEN} characters",
                    crate::text::escape(&h.tool_name_glob)
                ));
            }
        }
        Ok(())
    }

    /// The tool definition for `name`, if the manifest declares it.
    pub fn tool(&self, name: &str) -> Option<&ToolDef> {
        self.yolop.tools.iter().find(|t| t.name == name)
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The longest name a manifest may give an extension, tool, command, config field or MCP server.
pub const MAX_NAME_LEN: usize = 64;

/// The most hook subscriptions one extension may declare.
pub const MAX_HOOKS: usize = 16;

/// The longest a hook may hold a tool call, whatever its `timeout_ms` says.
pub const MAX_HOOK_TIMEOUT_MS: u64 = 30_000;

/// An extension name: `[A-Za-z0-9_-]+`, at most [`MAX_NAME_LEN`].
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A tool, command, config field or MCP server name: `[A-Za-z0-9_.-]+`, at most
/// [`MAX_NAME_LEN`]. Nothing in it can move a cursor, forge a line or look like another name.
pub fn valid_item_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn check_item_name(kind: &str, name: &str) -> Result<(), String> {
    if valid_item_name(name) {
        return Ok(());
    }
    Err(format!(
        "{kind} name \"{}\" must be non-empty and use only A-Z a-z 0-9 _ . -, at most {MAX_NAME_LEN} characters",
        crate::text::escape(name)
    ))
}

/// What the model APIs take as a tool name (OpenAI and Anthropic: `[A-Za-z0-9_-]{1,64}`).
pub fn model_accepts_tool_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A tool of extension `ext` must keep a name the model APIs take, also as the `<ext>__<tool>`
/// a name collision registers it under.
fn check_model_tool_name(ext: &str, tool: &str) -> Result<(), String> {
    if !model_accepts_tool_name(tool) {
        return Err(format!(
            "tool name \"{}\" must be non-empty and use only A-Z a-z 0-9 _ -, at most {MAX_NAME_LEN} characters (what OpenAI and Anthropic take as a tool name)",
            crate::text::escape(tool)
        ));
    }
    let qualified = ext.len() + 2 + tool.len();
    if qualified > MAX_NAME_LEN {
        return Err(format!(
            "tool name \"{tool}\" is too long to qualify: after a name collision it is registered as `{ext}__{tool}`, {qualified} characters, over the {MAX_NAME_LEN} model APIs take"
        ));
    }
    Ok(())
}

fn valid_env_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_glob(glob: &str) -> bool {
    !glob.is_empty()
        && glob.len() <= MAX_NAME_LEN
        && glob
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' || b == b'*')
}

/// serde_json appends " at line L column C"; the error carries those as fields.
/// JSON `text` read from `path` as a `T`, then held to `validate`: a syntax error names the
/// line and column, a refusal says why.
/// A server's command that is a whole command line (`go run .`, `python3 main.py`) written the
/// way it runs: nothing splits a command and no shell runs it, so the program goes alone in
/// `key` (`exec` for a zot extension, `command` elsewhere) and the rest in `args`, before the
/// arguments already there: `"exec": "go", "args": ["run", "."]`, escaped for a terminal.
/// `None` when the command has no white space in it.
pub fn command_line_fix(key: &str, command: &str, args: &[String]) -> Option<String> {
    let mut words = command.split_whitespace();
    let program = words.next()?;
    if program == command {
        return None;
    }
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let args: Vec<String> = words
        .chain(args.iter().map(String::as_str))
        .map(quote)
        .collect();
    let fix = if args.is_empty() {
        format!("\"{key}\": {}", quote(program))
    } else {
        format!(
            "\"{key}\": {}, \"args\": [{}]",
            quote(program),
            args.join(", ")
        )
    };
    Some(crate::text::escape(&fix).into_owned())
}

pub(crate) fn parse_checked<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    validate: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, ManifestError> {
    let value: T = serde_json::from_str(text).map_err(|e| ManifestError::Syntax {
        path: path.to_path_buf(),
        message: strip_position(&e.to_string()),
        line: e.line(),
        column: e.column(),
    })?;
    validate(&value).map_err(|message| ManifestError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(value)
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Server → host facets the manifest must declare before the host honours them (D4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// `ui_ask`: the server may ask the user questions. Otherwise `ui/ask` is answered
    /// `cancelled`.
    pub ui_ask: bool,
    /// `status`: the server may push `status/changed`. Otherwise the push is only logged.
    pub status: bool,
    /// The server may run the host's tools (zot's `call_tool`, pinned at install). Otherwise
    /// such a call is refused.
    pub call_tools: bool,
}

impl Grants {
    /// Everything granted: for tests and tools that run a trusted server directly.
    pub const ALL: Grants = Grants {
        ui_ask: true,
        status: true,
        call_tools: true,
    };

    pub fn from_manifest(manifest: &Manifest) -> Grants {
        Grants {
            ui_ask: manifest.yolop.ui_ask,
            status: manifest.yolop.status,
            call_tools: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("/pkg/plugin.json"))
    }

    #[test]
    fn a_minimal_tool_manifest_parses_with_defaults() {
        let m = parse(r#"{"name":"x","yolop":{"capabilityServer":{"command":"x-server"},"tools":[{"name":"t"}],"hooks":[{"event":"pre_tool_use"}]}}"#).unwrap();
        assert_eq!(
            m.yolop.tools[0].schema,
            serde_json::json!({"type": "object"})
        );
        assert_eq!(m.yolop.hooks[0].tool_name_glob, "*");
        assert_eq!(m.yolop.hooks[0].timeout_ms, 5000);
        assert_eq!(m.yolop.hooks[0].on_error, OnError::Warn);
    }

    #[test]
    fn a_cargo_toml_facet_is_a_manifest_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"yolop-extension-weather\"\nversion = \"0.2.0\"\ndescription = \"forecasts\"\n\n[package.metadata.yolop]\ntrace = true\ncapabilityServer = { command = \"weather\" }\n",
        )
        .unwrap();
        let m = Manifest::load(dir.path()).unwrap();
        assert_eq!(m.name, "weather");
        assert_eq!(m.version.as_deref(), Some("0.2.0"));
        assert!(m.yolop.trace);
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        let err = Manifest::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("Cargo.toml") && err.contains("[package.metadata.yolop]"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_name_the_file_line_and_column() {
        let err = parse("{\n  \"name\": \"x\"\n  \"yolop\": {}\n}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/pkg/plugin.json"), "{err}");
        assert!(err.contains("line 3 column 3"), "{err}");
    }

    #[test]
    fn bad_names_no_contributions_and_wrong_majors_are_refused() {
        let bad_name = parse(r#"{"name":"a b","yolop":{"prompt":true}}"#)
            .unwrap_err()
            .to_string();
        assert!(bad_name.contains("A-Z a-z 0-9"), "{bad_name}");
        let empty = parse(r#"{"name":"a","yolop":{}}"#).unwrap_err().to_string();
        assert!(empty.contains("declares no contributions"), "{empty}");
        let major = parse(r#"{"name":"a","yolop":{"protocol_version":"2.0","prompt":true}}"#)
            .unwrap_err()
            .to_string();
        assert!(major.contains("incompatible"), "{major}");
        let hook = parse(r#"{"name":"a","yolop":{"hooks":[{"event":"pre_tool_use","extra":1}]}}"#)
            .unwrap_err()
            .to_string();
        assert!(hook.contains("unknown field"), "{hook}");
    }

    #[test]
    fn names_outside_the_charset_or_too_long_are_manifest_errors() {
        let with = |facet: &str| parse(&format!(r#"{{"name":"a","yolop":{facet}}}"#));
        for (facet, kind) in [
            (r#"{"tools":[{"name":"x\u001b[2J"}]}"#, "tool name"),
            (r#"{"tools":[{"name":""}]}"#, "tool name"),
            (r#"{"tools":[{"name":"two\nlines"}]}"#, "tool name"),
            (r#"{"tools":[{"name":"<b>bold</b>"}]}"#, "tool name"),
            (r#"{"tools":[{"name":"sun\u2600"}]}"#, "tool name"),
            (r#"{"commands":[{"name":"go fast"}]}"#, "command name"),
            (
                r#"{"mcpServers":{"a b":{"command":"x"}}}"#,
                "MCP server name",
            ),
            (
                r#"{"prompt":true,"config_schema":{"properties":{"k\u001b[1A":{"type":"string"}}}}"#,
                "config field name",
            ),
            (
                r#"{"prompt":true,"config_schema":{"properties":{"k":{"type":"string","env":"A=B"}}}}"#,
                "environment variable name",
            ),
            (
                r#"{"hooks":[{"event":"pre_tool_use","tool_name_glob":"a\u001bb"}]}"#,
                "tool_name_glob",
            ),
            (
                r#"{"prompt":true,"config_schema":{"properties":{"k":{"type":"string","secret":true,"broker":{"hosts":["*"]}}}}}"#,
                "broker",
            ),
            (
                r#"{"prompt":true,"config_schema":{"properties":{"k":{"type":"string","broker":{"hosts":["a.b"]}}}}}"#,
                "only a secret field",
            ),
            (
                r#"{"prompt":true,"config_schema":{"properties":{"k":{"type":"string","secret":true,"broker":{"hosts":["a.b"],"extra":1}}}}}"#,
                "broker",
            ),
        ] {
            let err = with(facet).unwrap_err().to_string();
            assert!(err.contains(kind), "{facet}: {err}");
            assert!(!err.contains('\x1b') && !err.contains('\n'), "{err:?}");
        }
        let long = "t".repeat(MAX_NAME_LEN + 1);
        let err = with(&format!(r#"{{"tools":[{{"name":"{long}"}}]}}"#)).unwrap_err();
        assert!(err.to_string().contains("at most 64"), "{err}");
        let fine = with(
            r#"{"tools":[{"name":"lsp_definition-2_x"}],"mcpServers":{"git.hub":{"command":"x"}}}"#,
        );
        assert!(fine.is_ok(), "{fine:?}");
    }

    #[test]
    fn tool_names_are_ones_model_apis_accept_also_when_qualified() {
        let tool = |ext: &str, name: &str| {
            parse(&format!(
                r#"{{"name":"{ext}","yolop":{{"tools":[{{"name":"{name}"}}]}}}}"#
            ))
        };
        let err = tool("ext", "lsp.definition").unwrap_err().to_string();
        assert!(err.contains("use only A-Z a-z 0-9 _ -,"), "{err}");
        for refused in ["read file", "a/b"] {
            let err = tool("ext", refused).unwrap_err().to_string();
            assert!(err.contains("tool name"), "{refused}: {err}");
        }
        let at_cap = "t".repeat(MAX_NAME_LEN - 5);
        assert!(tool("ext", &at_cap).is_ok());
        let err = tool("ext", &format!("{at_cap}x")).unwrap_err().to_string();
        assert!(
            err.contains("registered as `ext__t") && err.contains("65 characters"),
            "{err}"
        );
        assert!(model_accepts_tool_name("read_file-2"));
        assert!(!model_accepts_tool_name(""));
    }

    #[test]
    fn hook_subscriptions_are_capped_and_their_timeout_clamped() {
        let hooks = |n: usize| {
            let list = vec![r#"{"event":"pre_tool_use","timeout_ms":86400000}"#; n].join(",");
            parse(&format!(r#"{{"name":"a","yolop":{{"hooks":[{list}]}}}}"#))
        };
        let ok = hooks(MAX_HOOKS).unwrap();
        assert_eq!(
            ok.yolop.hooks[0].effective_timeout_ms(),
            MAX_HOOK_TIMEOUT_MS
        );
        let err = hooks(MAX_HOOKS + 1).unwrap_err().to_string();
        assert!(err.contains("over the cap of 16"), "{err}");
    }

    #[test]
    fn double_underscore_names_and_duplicates_are_refused() {
        let err = parse(r#"{"name":"a__b","yolop":{"prompt":true}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not contain `__`"), "{err}");
        let err = parse(r#"{"name":"a","yolop":{"tools":[{"name":"x"},{"name":"x"}]}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tool `x` is declared twice"), "{err}");
        let err = parse(r#"{"name":"a","yolop":{"commands":[{"name":"go"},{"name":"go"}]}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("command `go` is declared twice"), "{err}");
    }
}
