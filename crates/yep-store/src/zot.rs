//! A zot extension package: its `extension.json` (zot extension protocol v1), read as zot reads
//! it, held to yep's rules where they are stricter (the name), and how its `exec` resolves.
//! The wire itself is yep-host's zot dialect.

use crate::manifest::{
    CapabilityServer, CommandDef, Facet, HookDef, HookEvent, MAX_NAME_LEN, Manifest, ManifestError,
    OnError, ToolDef, model_accepts_tool_name, valid_item_name, valid_name,
};
use crate::text::escape;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file every zot extension directory has.
pub const ZOT_MANIFEST_FILE: &str = "extension.json";

/// A zot `extension.json`, read as zot's Go decoder reads it (see [`ZotManifest::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZotManifest {
    /// The identity (logs, notes, the panel owner), whatever the directory is called and
    /// whatever the extension's `hello` says. Required (missing is empty, and refused).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    /// What to run; absent for a theme-only or skills-only bundle, which is not spawned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Informational: shown in startup errors.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// zot's own switch (`zot ext enable/disable` rewrite it): false, and zot never starts it.
    /// yep neither runs it at install nor enables nor starts it (yep's own enable state, for
    /// the rest, lives in its settings).
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// Directories or `SKILL.md` paths, relative to the manifest and inside its directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Every other key (`permissions`, `env`…), as written: zot reads none of them and
    /// neither does yep, but they are kept so the install summary can say so.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ignored: BTreeMap<String, Value>,
}

fn enabled_by_default() -> bool {
    true
}

/// The keys zot's `Manifest` struct reads (and `skills`, which its current host reads).
const KNOWN_KEYS: [&str; 8] = [
    "name",
    "version",
    "exec",
    "args",
    "language",
    "description",
    "enabled",
    "skills",
];

/// Whether a JSON key names `known` (ASCII lowercase) as Go's `encoding/json` matches struct
/// fields: case-insensitively, with Unicode simple folding (so `ſ` is an `s` and the Kelvin
/// sign a `k`).
fn folds_to(key: &str, known: &str) -> bool {
    let mut key = key.chars();
    for k in known.chars() {
        let folded = match key.next() {
            Some('\u{17f}') => 's',
            Some('\u{212a}') => 'k',
            Some(c) => c.to_ascii_lowercase(),
            None => return false,
        };
        if folded != k {
            return false;
        }
    }
    key.next().is_none()
}

/// A JSON object's members in the order they are written, duplicates kept.
struct Members(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The members of an `extension.json` object as zot's decoder sees them: each known key (in
/// any case) under its own name, the last one written winning; `null` the default for `args`,
/// `skills` and `enabled` (nil in Go) and no change for a string, as Go leaves it; unknown
/// keys as they are.
fn normalise(members: Vec<(String, Value)>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in members {
        match KNOWN_KEYS.iter().find(|k| folds_to(&key, k)) {
            None => {
                out.insert(key, value);
            }
            Some(&known) if value.is_null() => {
                if matches!(known, "args" | "skills" | "enabled") {
                    out.remove(known);
                }
            }
            Some(&known) => {
                out.insert(known.to_string(), value);
            }
        }
    }
    out
}

/// Where the program yep builds for a zot extension's `go run` is kept, in its package: added
/// after the package is hashed, and pinned on its own (as a prebuilt binary is).
pub const GO_BUILT: &str = ".yep-build/server";

/// A zot extension's `go run`: the local package it builds and the program's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoRun {
    pub package: String,
    pub args: Vec<String>,
}

impl GoRun {
    /// Build it from the extension's directory `root` into `out`, with the user's Go and its
    /// settings (module proxy, caches), as `go run` would before each start.
    pub fn build(&self, root: &Path, out: &Path) -> Result<(), String> {
        let go = crate::launcher::on_path("go").ok_or("go is not on PATH")?;
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        let out_text = out.to_string_lossy();
        crate::launcher::run_logged(
            &go,
            &["build", "-o", &out_text, "--", &self.package],
            root,
            &[],
            &out.with_extension("log"),
        )
        .map(drop)
    }
}

/// Where a zot `exec` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exec {
    /// A file: absolute as written, or relative to the extension directory.
    Path(PathBuf),
    /// A bare name, looked up on `$PATH` (`node`, `npx`, `python3`, `go`).
    OnPath(String),
}

impl Exec {
    /// What to spawn: the path, or the bare name for `$PATH`.
    pub fn program(self) -> String {
        match self {
            Exec::Path(path) => path.to_string_lossy().into_owned(),
            Exec::OnPath(name) => name,
        }
    }
}

impl ZotManifest {
    /// Read `dir/extension.json`.
    pub fn load(dir: &Path) -> Result<ZotManifest, ManifestError> {
        let path = dir.join(ZOT_MANIFEST_FILE);
        let text = crate::manifest::read_manifest_text(&path)?;
        ZotManifest::parse(&text, &path)
    }

    /// Parse and check an `extension.json` read from `path`, as leniently as zot's Go decoder
    /// reads it: keys in any case, the last of a duplicate winning, `null` for the default,
    /// unknown keys kept (in [`ZotManifest::ignored`]). A value of the wrong type is an error,
    /// as it is in zot.
    pub fn parse(text: &str, path: &Path) -> Result<ZotManifest, ManifestError> {
        let invalid = |message| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let Members(members) = crate::manifest::parse_checked(text, path, |_| Ok(()))?;
        let manifest: ZotManifest =
            serde_path_to_error::deserialize(Value::Object(normalise(members))).map_err(|e| {
                let at = e.path().to_string();
                invalid(format!("`{}`: {}", crate::text::escape(&at), e.inner()))
            })?;
        manifest.validate().map_err(invalid)?;
        Ok(manifest)
    }

    /// The keys zot and yep ignore, as written (escape them before they are shown).
    pub fn ignored_keys(&self) -> Vec<&str> {
        self.ignored.keys().map(String::as_str).collect()
    }

    fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("zot extension `name` is missing or empty".into());
        }
        // zot takes any non-empty name; yep's names are also file names, settings keys and
        // the `<ext>__` tool prefix.
        if !valid_name(&self.name) {
            return Err(format!(
                "zot extension name \"{}\" is not one yep can use: names are A-Z a-z 0-9 _ -, at most {MAX_NAME_LEN} characters (rename it in extension.json)",
                crate::text::escape(&self.name)
            ));
        }
        if self.exec.as_deref().is_some_and(str::is_empty) {
            return Err(
                "`exec` is empty (leave it out for a theme-only or skills-only bundle)".into(),
            );
        }
        for skill in &self.skills {
            if !crate::fsutil::stays_inside(skill) {
                return Err(format!(
                    "skill path \"{}\" must be relative and stay inside the extension directory",
                    crate::text::escape(skill)
                ));
            }
        }
        Ok(())
    }

    /// Whether there is a process to run (a theme-only or skills-only bundle has none).
    pub fn spawns(&self) -> bool {
        self.exec.is_some()
    }

    /// Its `go run <local package> [args…]`, which yep builds once at install and then runs
    /// as a program ([`GO_BUILT`]); `None` for any other `exec`, or a `go run` with build
    /// flags or a package elsewhere, which runs as written.
    pub fn go_run(&self) -> Option<GoRun> {
        let exec = self.exec.as_deref()?;
        if Path::new(exec).file_name()? != "go" {
            return None;
        }
        let (run, rest) = self.args.split_first()?;
        let (package, args) = rest.split_first()?;
        let local = package == "." || package.starts_with("./");
        if run != "run" || !local || !crate::fsutil::stays_inside(package) {
            return None;
        }
        Some(GoRun {
            package: package.clone(),
            args: args.to_vec(),
        })
    }

    /// Where `exec` points, for an extension installed in `dir`.
    pub fn exec_in(&self, dir: &Path) -> Option<Exec> {
        self.exec.as_deref().map(|exec| resolve_exec(exec, dir))
    }

    /// Refuse an `exec` that is a whole command line (`"go run ."`) naming no program, with
    /// the fix: zot runs `exec` as one program name, through no shell and unsplit, so it would
    /// never start. One that names a real file, spaces and all, is that file.
    pub fn check_exec(&self, dir: &Path) -> Result<(), String> {
        let Some(exec) = self.exec.as_deref() else {
            return Ok(());
        };
        let Some(fix) = crate::manifest::command_line_fix("exec", exec, &self.args) else {
            return Ok(());
        };
        let found = match resolve_exec(exec, dir) {
            Exec::Path(path) => path.is_file(),
            // As a session looks for it: the package's `bin/`, then `$PATH`.
            Exec::OnPath(name) => {
                dir.join("bin").join(&name).is_file()
                    || std::env::var_os("PATH").is_some_and(|paths| {
                        std::env::split_paths(&paths).any(|d| d.join(&name).is_file())
                    })
            }
        };
        if found {
            return Ok(());
        }
        Err(format!(
            "`exec` is a whole command line (\"{}\"), and no program has that name: zot runs `exec` as one program, with no shell and nothing split, so put the program alone in `exec` and the rest in `args`: {fix}",
            crate::text::escape(exec)
        ))
    }
}

/// The intercepts zot defines, in the order they are shown.
pub const INTERCEPTS: [&str; 4] = [
    "tool_call",
    "turn_start",
    "assistant_message",
    "before_agent_start",
];

/// The lifecycle events zot's current host emits.
pub const EVENTS: [&str; 14] = [
    "session_start",
    "session_end",
    "user_prompt_submit",
    "turn_start",
    "turn_end",
    "tool_call",
    "tool_result",
    "tool_confirmation_requested",
    "permission_decision",
    "assistant_message",
    "pre_compact",
    "post_compact",
    "subagent_start",
    "subagent_stop",
];

/// The hello capability that widens what an extension may do: running the host's tools.
/// (`tool_cancel` only asks to be told of cancels, and is not pinned.)
pub const CALL_TOOL: &str = "call_tool";

/// What a zot extension registered in its first run, beyond its tools and commands (which
/// the approved manifest holds): pinned in the lock at install, and the most a later run may
/// have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZotPin {
    /// Intercepts it subscribed to ([`INTERCEPTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intercepts: Vec<String>,
    /// Lifecycle events it observes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// Hello capabilities that widen what it may do ([`CALL_TOOL`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Its tools that wait on the user, so have no deadline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interactive: Vec<String>,
}

impl ZotPin {
    pub fn intercepts(&self, intercept: &str) -> bool {
        self.intercepts.iter().any(|i| i == intercept)
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// How `new` differs from this approved pin, as diff lines; true when it widens.
    pub fn diff(&self, new: &ZotPin) -> (Vec<String>, bool) {
        let mut lines = Vec::new();
        let mut widened = false;
        let mut set = |kind: &str, before: &[String], after: &[String]| {
            for added in after.iter().filter(|a| !before.contains(a)) {
                lines.push(format!("+ {kind} {}", escape(added)));
                widened = true;
            }
            for removed in before.iter().filter(|b| !after.contains(b)) {
                lines.push(format!("- {kind} {}", escape(removed)));
            }
        };
        set("intercept", &self.intercepts, &new.intercepts);
        set("event", &self.events, &new.events);
        set("capability", &self.capabilities, &new.capabilities);
        set("interactive tool", &self.interactive, &new.interactive);
        (lines, widened)
    }
}

/// What one run of a zot extension registered: its tools, commands and the rest of its pin.
#[derive(Debug, Clone, Default)]
pub struct Registrations {
    pub tools: Vec<ToolDef>,
    pub commands: Vec<CommandDef>,
    pub pin: ZotPin,
}

/// Why a [`Probe`] could not run an extension: the runner's own error type (the host's is
/// `yep_host::probe::ZotProbeError`), boxed, since the store cannot name it.
pub type ProbeFailure = Box<dyn std::error::Error + Send + Sync>;

/// Runs a zot extension once, as a session would start it, to learn what it registers; then
/// stops it. The store has no processes of its own: the host crate provides this
/// (`yep_host::probe::ZotProbe`).
pub trait Probe: Send + Sync {
    /// Run the extension `manifest` describes from `dir`, with `data_dir` as its data
    /// directory. The error says why, naming the extension, its exec and its log.
    fn probe(
        &self,
        manifest: &ZotManifest,
        dir: &Path,
        data_dir: &Path,
    ) -> Result<Registrations, ProbeFailure>;
}

impl ZotManifest {
    /// The manifest yep approves for this extension with these registrations: its server is
    /// `exec`, its tools and commands are the registered ones (a name yep cannot take is
    /// left out, and said in the returned notes), a `tool_call` intercept is a `*` pre hook,
    /// observed events are the trace grant, and notes are its status.
    pub fn approved(&self, reg: &Registrations) -> Result<(Manifest, Vec<String>), String> {
        let mut notes = Vec::new();
        let mut tools = Vec::new();
        for t in &reg.tools {
            if valid_item_name(&t.name) && model_accepts_tool_name(&t.name) {
                tools.push(t.clone());
            } else {
                notes.push(format!(
                    "tool \"{}\" left out: not a name model APIs accept (A-Z a-z 0-9 _ -)",
                    escape(&t.name)
                ));
            }
        }
        let mut commands = Vec::new();
        for c in &reg.commands {
            if valid_item_name(&c.name) {
                commands.push(c.clone());
            } else {
                notes.push(format!(
                    "command \"{}\" left out: not a name yep can show (A-Z a-z 0-9 _ . -)",
                    escape(&c.name)
                ));
            }
        }
        let hooks = if reg.pin.intercepts("tool_call") {
            vec![HookDef {
                event: HookEvent::PreToolUse,
                tool_name_glob: "*".into(),
                timeout_ms: 5000,
                on_error: OnError::Warn,
            }]
        } else {
            Vec::new()
        };
        let manifest = Manifest {
            name: self.name.clone(),
            description: self.description.clone(),
            version: Some(self.version.clone()).filter(|v| !v.is_empty()),
            yolop: Facet {
                capability_server: self.exec.as_ref().map(|exec| CapabilityServer {
                    command: exec.clone(),
                    args: self.args.clone(),
                    binaries: None,
                }),
                tools,
                commands,
                hooks,
                prompt: reg.pin.intercepts("before_agent_start"),
                status: self.spawns(),
                skills: !self.skills.is_empty(),
                trace: !reg.pin.events.is_empty(),
                ..Facet::default()
            },
            // A zot extension's grants are the user's to give (`yep grant`), never its own.
            sandbox: Default::default(),
        };
        // The same checks a plugin.json gets (duplicates, sizes, a bundle with nothing in it).
        let text = serde_json::to_string(&manifest).map_err(|e| e.to_string())?;
        let manifest =
            Manifest::parse(&text, Path::new(ZOT_MANIFEST_FILE)).map_err(|e| match e {
                ManifestError::Invalid { message, .. } => message,
                other => other.to_string(),
            })?;
        Ok((manifest, notes))
    }
}

/// Whether `dir` holds a zot extension rather than a YEP package (`extension.json` and no
/// `plugin.json`).
pub fn is_zot_package(dir: &Path) -> bool {
    dir.join(ZOT_MANIFEST_FILE).is_file() && !dir.join(crate::manifest::MANIFEST_FILE).exists()
}

/// Resolve `exec` as zot does: absolute as is; exactly `.` or `..`, or starting with `./` or
/// `../`, relative to `dir`; any other value with a path separator, relative to `dir`; else a
/// bare name on `$PATH`.
pub fn resolve_exec(exec: &str, dir: &Path) -> Exec {
    let path = Path::new(exec);
    if path.is_absolute() {
        return Exec::Path(path.to_path_buf());
    }
    if exec.contains(std::path::MAIN_SEPARATOR) || exec.contains('/') || exec == "." || exec == ".."
    {
        return Exec::Path(dir.join(path));
    }
    Exec::OnPath(exec.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<ZotManifest, String> {
        ZotManifest::parse(json, Path::new("x/extension.json")).map_err(|e| e.to_string())
    }

    #[test]
    fn exec_resolves_as_zot_resolves_it() {
        let dir = Path::new("/home/u/ext/clock");
        let at = |p: &str| Exec::Path(PathBuf::from(p));
        assert_eq!(resolve_exec("/usr/bin/node", dir), at("/usr/bin/node"));
        assert_eq!(
            resolve_exec("./bin/clock", dir),
            at("/home/u/ext/clock/./bin/clock")
        );
        assert_eq!(
            resolve_exec("../shared/run", dir),
            at("/home/u/ext/clock/../shared/run")
        );
        assert_eq!(resolve_exec(".", dir), at("/home/u/ext/clock/."));
        assert_eq!(resolve_exec("..", dir), at("/home/u/ext/clock/.."));
        assert_eq!(
            resolve_exec("bin/clock", dir),
            at("/home/u/ext/clock/bin/clock")
        );
        assert_eq!(resolve_exec("node", dir), Exec::OnPath("node".into()));
        assert_eq!(resolve_exec("python3", dir), Exec::OnPath("python3".into()));
        // A dot alone in a name is not a path: still looked up on $PATH.
        assert_eq!(resolve_exec("run.sh", dir), Exec::OnPath("run.sh".into()));
    }

    #[test]
    fn a_manifest_reads_as_zot_writes_it_and_unknown_fields_are_ignored() {
        let m = parse(
            r#"{"name": "todo-panel", "version": "0.1.0", "exec": "./todo", "language": "go",
                "description": "a todo list", "future_field": {"x": 1}}"#,
        )
        .unwrap();
        assert_eq!(m.name, "todo-panel");
        assert!(m.enabled, "enabled defaults to true");
        assert!(m.spawns());
        assert_eq!(
            m.exec_in(Path::new("/e")),
            Some(Exec::Path(PathBuf::from("/e/./todo")))
        );
        let bundle = parse(r#"{"name": "skills", "skills": ["skills/review"]}"#).unwrap();
        assert!(!bundle.spawns(), "a skills-only bundle is not spawned");
        assert_eq!(bundle.exec_in(Path::new("/e")), None);
    }

    #[test]
    fn unknown_keys_are_kept_as_written_and_never_read() {
        let m = parse(
            r#"{"name": "x", "exec": "node", "permissions": ["fs", "net"], "env": {"A": "1"},
                "Timeout": null, "future_field": {"x": 1}}"#,
        )
        .unwrap();
        assert_eq!(
            m.ignored_keys(),
            ["Timeout", "env", "future_field", "permissions"]
        );
        assert_eq!(m.ignored["permissions"], serde_json::json!(["fs", "net"]));
        assert_eq!(m.exec.as_deref(), Some("node"));
        assert!(
            parse(r#"{"name": "x", "exec": "node"}"#)
                .unwrap()
                .ignored
                .is_empty()
        );
    }

    /// Go's `encoding/json`, which zot decodes `extension.json` with: keys match in any case
    /// (Unicode simple folding), the last duplicate wins, `null` is nil for a slice or a
    /// pointer (so `enabled` is true again) and no change for a string.
    #[test]
    fn a_manifest_reads_as_gos_decoder_reads_it() {
        let m = parse(
            r#"{"NAME": "x", "Exec": "python3", "ARGS": ["a.py"], "Language": "python",
                "Version": "1", "DESCRIPTION": "d", "Enabled": false, "\u017fkills": ["s"]}"#,
        )
        .unwrap();
        assert_eq!(
            (m.name.as_str(), m.exec.as_deref(), m.args.as_slice()),
            ("x", Some("python3"), ["a.py".to_string()].as_slice())
        );
        assert_eq!((m.language.as_str(), m.version.as_str()), ("python", "1"));
        assert_eq!((m.description.as_str(), m.enabled), ("d", false));
        assert_eq!(m.skills, ["s"]);
        assert!(m.ignored.is_empty(), "{:?}", m.ignored);
        // The Kelvin sign is a `k` to Go, too.
        assert_eq!(
            parse(r#"{"name": "x", "exec": "n", "s\u212aills": ["s"]}"#)
                .unwrap()
                .skills,
            ["s"]
        );

        // The last of a duplicate wins, whatever its case.
        let m = parse(
            r#"{"name": "x", "exec": "node", "EXEC": "deno", "args": ["a"], "Args": ["b"],
                "enabled": true, "enabled": false}"#,
        )
        .unwrap();
        assert_eq!(
            (m.exec.as_deref(), m.args.as_slice()),
            (Some("deno"), ["b".to_string()].as_slice())
        );
        assert!(!m.enabled);

        // null: the default for a list and for `enabled`; a string keeps what it had.
        let m = parse(
            r#"{"name": "x", "exec": "node", "exec": null, "version": null, "args": ["a"],
                "args": null, "enabled": false, "enabled": null, "language": null,
                "description": null, "skills": null}"#,
        )
        .unwrap();
        assert_eq!(m.exec.as_deref(), Some("node"));
        assert!(m.args.is_empty() && m.skills.is_empty() && m.enabled);
        assert_eq!((m.version.as_str(), m.language.as_str()), ("", ""));
        // null for the name is no name at all.
        assert!(
            parse(r#"{"name": null, "exec": "node"}"#)
                .unwrap_err()
                .contains("missing or empty")
        );

        // A value of the wrong type is an error, as in Go, naming where it is.
        for (json, at) in [
            (r#"{"name": "x", "exec": "node", "args": "a.py"}"#, "`args`"),
            (
                r#"{"name": "x", "exec": "node", "Version": 1}"#,
                "`version`",
            ),
            (
                r#"{"name": "x", "exec": "node", "args": ["a", 2]}"#,
                "`args[1]`",
            ),
            (
                r#"{"name": "x", "exec": "node", "enabled": "no"}"#,
                "`enabled`",
            ),
        ] {
            let err = parse(json).unwrap_err();
            assert!(
                err.contains(at) && err.contains("invalid type"),
                "{json}: {err}"
            );
        }
        assert!(parse("[]").unwrap_err().contains("expected an object"));
    }

    #[test]
    fn an_exec_that_is_a_whole_command_line_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let check = |json: &str| parse(json).unwrap().check_exec(dir.path());
        let err = check(r#"{"name": "x", "exec": "go run ."}"#).unwrap_err();
        assert!(
            err.contains("whole command line (\"go run .\")")
                && err.ends_with(r#""exec": "go", "args": ["run", "."]"#),
            "{err}"
        );
        // Arguments already in `args` come after the ones split off.
        let err =
            check(r#"{"name": "x", "exec": "python3  -u", "args": ["main.py"]}"#).unwrap_err();
        assert!(
            err.ends_with(r#""exec": "python3", "args": ["-u", "main.py"]"#),
            "{err}"
        );
        let err = check(r#"{"name": "x", "exec": "node ./index.js"}"#).unwrap_err();
        assert!(
            err.ends_with(r#""exec": "node", "args": ["./index.js"]"#),
            "{err}"
        );
        let err = check(r#"{"name": "x", "exec": "run\u001b[2J now"}"#).unwrap_err();
        assert!(!err.contains('\u{1b}'), "{err:?}");
        // A file whose name has a space in it is that file; a plain name is never refused here.
        std::fs::write(dir.path().join("my tool"), "").unwrap();
        assert!(check(r#"{"name": "x", "exec": "./my tool"}"#).is_ok());
        assert!(check(r#"{"name": "x", "exec": "no-such-program"}"#).is_ok());
        assert!(check(r#"{"name": "x", "skills": ["s"]}"#).is_ok());
    }

    #[test]
    fn names_yep_cannot_use_and_escaping_skills_are_refused_clearly() {
        let err = parse(r#"{"name": "my ext.v2", "exec": "node"}"#).unwrap_err();
        assert!(
            err.contains("zot extension name \"my ext.v2\" is not one yep can use")
                && err.contains("rename it in extension.json"),
            "{err}"
        );
        let err = parse(r#"{"name": "evil\u001b[2J", "exec": "node"}"#).unwrap_err();
        assert!(!err.contains('\u{1b}'), "{err:?}");
        assert!(
            parse(r#"{"name": "", "exec": "node"}"#)
                .unwrap_err()
                .contains("missing or empty")
        );
        assert!(parse(r#"{"exec": "node"}"#).is_err(), "name is required");
        assert!(
            parse(r#"{"name": "x", "exec": ""}"#)
                .unwrap_err()
                .contains("`exec` is empty")
        );
        for skill in ["../outside", "/etc", "a/../../b", ""] {
            let json = serde_json::json!({"name": "x", "skills": [skill]}).to_string();
            assert!(
                parse(&json)
                    .unwrap_err()
                    .contains("must be relative and stay inside"),
                "{skill}"
            );
        }
        assert!(parse(r#"{"name": "x", "skills": ["./skills/a/SKILL.md"]}"#).is_ok());
    }
}
