//! A zot extension package: its `extension.json` (zot extension protocol v1), read as zot reads
//! it, held to yep's rules where they are stricter (the name), and how its `exec` resolves.
//! The wire itself is yep-host's zot dialect.

use crate::manifest::{MAX_NAME_LEN, ManifestError, valid_name};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// The file every zot extension directory has.
pub const ZOT_MANIFEST_FILE: &str = "extension.json";

/// A zot `extension.json`. Unknown fields are ignored, as zot ignores them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZotManifest {
    /// The identity (logs, notes, the panel owner), whatever the directory is called and
    /// whatever the extension's `hello` says.
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
    /// zot's own switch (`zot ext enable/disable`); yep's enable state lives in its settings.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// Directories or `SKILL.md` paths, relative to the manifest and inside its directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
}

fn enabled_by_default() -> bool {
    true
}

/// Where a zot `exec` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exec {
    /// A file: absolute as written, or relative to the extension directory.
    Path(PathBuf),
    /// A bare name, looked up on `$PATH` (`node`, `npx`, `python3`, `go`).
    OnPath(String),
}

impl ZotManifest {
    /// Read `dir/extension.json`.
    pub fn load(dir: &Path) -> Result<ZotManifest, ManifestError> {
        let path = dir.join(ZOT_MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|error| ManifestError::Read {
            path: path.clone(),
            error,
        })?;
        ZotManifest::parse(&text, &path)
    }

    /// Parse and check an `extension.json` read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<ZotManifest, ManifestError> {
        crate::manifest::parse_checked(text, path, ZotManifest::validate)
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
            if !stays_inside(skill) {
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

    /// Where `exec` points, for an extension installed in `dir`.
    pub fn exec_in(&self, dir: &Path) -> Option<Exec> {
        self.exec.as_deref().map(|exec| resolve_exec(exec, dir))
    }
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

/// A relative path with no `..`, root or prefix: it cannot leave the directory it is read in.
fn stays_inside(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
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
