//! A workspace's own Claude Code config (`.claude/settings.json` and `settings.local.json`
//! hooks, `.claude/commands/`, `.claude/skills/`, `.claude/agents/`) as a package named
//! [`PROJECT`]: read and approved as a plugin is, and, like a workspace's `.mcp.json`, run
//! only once `yep trust project` has pinned it for that workspace, with the code its hooks
//! run from the workspace ([`crate::code::hooks_code`]: `sh tools/g.sh` pins `tools/`). A
//! change to either asks again.

use super::{Approval, ClaudePin, ClaudePlugin, Overrides};
use crate::code::WorkspaceCode;
use crate::text::escape;
use crate::{Home, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The name a workspace's Claude Code config runs under (`/project:<command>`): no package may
/// be installed under it.
pub const PROJECT: &str = "project";

/// The settings files whose `hooks` count, in the order Claude Code merges them.
const SETTINGS: [&str; 2] = ["settings.json", "settings.local.json"];

/// The directories of `.claude` whose files a project's approval covers.
const PARTS: [&str; 4] = ["commands", "skills", "agents", "hooks"];

/// A workspace's Claude Code config, read and approved.
#[derive(Debug, Clone)]
pub struct Project {
    /// `<workspace>/.claude`: its package directory.
    pub dir: PathBuf,
    pub approval: Approval,
    /// Covers what the approval says and every file of its parts: a change is another hash.
    pub hash: String,
    /// What its hooks' command lines name in the workspace outside its parts, pinned.
    pub code: WorkspaceCode,
}

/// Why a workspace's config may not run as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unapproved {
    /// It was never approved for this workspace.
    Never,
    /// Its hooks, commands, skills or agents are not what was approved.
    Changed,
    /// The code its hooks run from the workspace is not what was approved; `unpinned` when
    /// the approval was given before yep pinned that code.
    Code { paths: Vec<String>, unpinned: bool },
}

impl Unapproved {
    /// How a sentence that says the config is "not approved" ends, saying why.
    pub fn since(&self) -> String {
        match self {
            Unapproved::Never => String::new(),
            Unapproved::Changed => " since they changed".into(),
            Unapproved::Code {
                paths,
                unpinned: false,
            } => format!(
                " since the code they run from the workspace changed ({})",
                escape(&paths.join(", "))
            ),
            Unapproved::Code {
                paths,
                unpinned: true,
            } => format!(
                " with the code they run from the workspace ({}): they were approved before yep pinned it",
                escape(&paths.join(", "))
            ),
        }
    }
}

impl Project {
    /// Why it may not run against `pin`, or `None` when its approval stands.
    pub fn unapproved(&self, pin: Option<&ProjectPin>) -> Option<Unapproved> {
        let Some(pin) = pin else {
            return Some(Unapproved::Never);
        };
        if pin.hash != self.hash {
            return Some(Unapproved::Changed);
        }
        (pin.code != self.code.hash).then(|| Unapproved::Code {
            paths: self.code.paths.clone(),
            unpinned: pin.code.is_none(),
        })
    }
}

/// What the lock pins of one workspace's config (`[[projects]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectPin {
    /// The workspace, canonical.
    pub workspace: String,
    pub hash: String,
    /// The manifest it was approved as, JSON.
    pub approved_manifest: String,
    pub claude: ClaudePin,
    /// The hash of the code its hooks run from the workspace ([`Project::code`]), when they
    /// name any. A pin written before yep pinned that code has none, and approves none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The workspace's Claude Code config, when it has one that gives yep anything to run; `None`
/// when it has none.
pub fn read(workspace: &Path) -> Result<Option<Project>, StoreError> {
    let dir = workspace.join(".claude");
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut hooks = Map::new();
    // What the settings hold that yep does not apply, said on the consent screen.
    let mut ignored = Vec::new();
    for file in SETTINGS {
        let path = dir.join(file);
        if !path.is_file() {
            continue;
        }
        let text = crate::fsutil::read_regular_string(
            &path,
            super::MAX_PART_BYTES,
            crate::fsutil::Links::Refuse,
        )
        .map_err(crate::io(format!("failed to read {}", path.display())))?;
        let settings: Value = serde_json::from_str(&text).map_err(|e| {
            StoreError::Marketplace(format!(
                "{} is not JSON: {}",
                path.display(),
                escape(&e.to_string())
            ))
        })?;
        if settings.get("permissions").is_some() {
            ignored.push(format!(
                ".claude/{file} `permissions`: Claude Code's own rules for its tools, not applied \
                 by yep (its sandbox and hooks are)"
            ));
        }
        // Each event's matchers add up, the local file's after the shared one's.
        for (event, groups) in settings["hooks"].as_object().into_iter().flatten() {
            let merged = hooks
                .entry(event.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let (Value::Array(all), Value::Array(more)) = (merged, groups) {
                all.extend(more.iter().cloned());
            }
        }
    }
    let mut fields = Map::new();
    fields.insert("name".into(), Value::from(PROJECT));
    fields.insert(
        "description".into(),
        Value::from("this workspace's Claude Code hooks, commands and skills"),
    );
    if !hooks.is_empty() {
        fields.insert("hooks".into(), Value::Object(hooks));
    }
    let overrides = Overrides {
        fields,
        fallback_name: Some(PROJECT.into()),
    };
    let plugin = match ClaudePlugin::load(&dir, &overrides) {
        Ok(plugin) => plugin,
        // No hooks in its settings and no component directory: what else is there (hookify's
        // `hookify.*.local.md` rules, a settings file of permissions) is nothing yep runs.
        Err(super::ClaudeError::NotAPlugin { .. }) => return Ok(None),
        Err(e) => return Err(StoreError::Marketplace(e.to_string())),
    };
    let mut approval = match plugin.approved() {
        Ok(approval) => approval,
        // Nothing of it runs (no hooks, commands or skills): there is nothing to approve.
        Err(super::ApproveError::NothingYepRuns { .. }) => return Ok(None),
        Err(e) => return Err(StoreError::Marketplace(e.to_string())),
    };
    approval.notes.extend(ignored);
    let hash = hash_of(&dir, &approval)?;
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let code =
        crate::code::hooks_code(&approval.pin.hooks, &canonical).map_err(StoreError::HookCode)?;
    Ok(Some(Project {
        dir,
        approval,
        hash,
        code,
    }))
}

/// The hash of what `approval` says and of every file under the parts of `dir`.
fn hash_of(dir: &Path, approval: &Approval) -> Result<String, StoreError> {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&approval.manifest).unwrap_or_default());
    hasher.update(serde_json::to_vec(&approval.pin).unwrap_or_default());
    for part in PARTS {
        let path = dir.join(part);
        if path.is_dir() {
            let hash = crate::hash::content_hash(&path)
                .map_err(crate::io(format!("failed to read {}", path.display())))?;
            hasher.update(part.as_bytes());
            hasher.update(hash.as_bytes());
        }
    }
    Ok(format!("sha256:{}", crate::hash::hex(&hasher.finalize())))
}

/// The canonical form of `workspace`, as pins name it.
/// The files `project`'s approval covers, as they are now, by their paths in `workspace`: its
/// parts (hook scripts, commands, skills, agents) and the code its hooks run from the
/// workspace. Not its settings files: what their hooks say is in the approval's own diff, and
/// a `settings.local.json` may hold tokens (`env`), which no copy in the home should. `None`
/// past the snapshot's caps.
fn project_files(workspace: &Path, project: &Project) -> Option<crate::snapshot::Files> {
    use crate::fsutil::{Links, read_regular};
    let mut files = Vec::new();
    let add_dir = |dir: &Path, prefix: &str, files: &mut crate::snapshot::Files| {
        let found = crate::snapshot::read(dir)?;
        files.extend(found.into_iter().map(|(p, b)| (format!("{prefix}{p}"), b)));
        Some(())
    };
    for part in PARTS {
        let dir = project.dir.join(part);
        if dir.is_dir() {
            add_dir(&dir, &format!(".claude/{part}/"), &mut files)?;
        }
    }
    for path in &project.code.paths {
        match path.strip_suffix('/') {
            Some(dir) => add_dir(&workspace.join(dir), path, &mut files)?,
            None => {
                let bytes = read_regular(
                    &workspace.join(path),
                    crate::snapshot::MAX_BYTES,
                    Links::Refuse,
                )
                .ok()?;
                files.push((path.clone(), bytes));
            }
        }
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    (files.len() <= crate::snapshot::MAX_FILES).then_some(files)
}

fn key(workspace: &Path) -> String {
    workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

impl Home {
    /// The pin of `workspace`'s config, when it was approved.
    pub fn project_pin(&self, workspace: &Path) -> Result<Option<ProjectPin>, StoreError> {
        let key = key(workspace);
        Ok(self
            .lockfile()?
            .projects
            .into_iter()
            .find(|p| p.workspace == key))
    }

    /// Pin `project` as approved for `workspace`, in place of any pin before.
    pub fn trust_project(&self, workspace: &Path, project: &Project) -> Result<(), StoreError> {
        let key = key(workspace);
        let _lock = self.lock()?;
        let mut lock = self.lockfile()?;
        lock.projects.retain(|p| p.workspace != key);
        lock.projects.push(ProjectPin {
            workspace: key,
            hash: project.hash.clone(),
            approved_manifest: serde_json::to_string(&project.approval.manifest)
                .unwrap_or_default(),
            claude: project.approval.pin.clone(),
            code: project.code.hash.clone(),
        });
        // The files approved, kept first (a crash between the two leaves a copy no pin
        // vouches for, never a pin without its copy), so the next change can be shown.
        match project_files(workspace, project) {
            Some(files) => crate::snapshot::keep(&self.project_snapshot_dir(workspace), &files)?,
            None => {
                let _ = crate::fsutil::remove_tree(&self.project_snapshot_dir(workspace));
            }
        }
        lock.save(&self.lock_path()).map_err(crate::io(format!(
            "failed to write {}",
            self.lock_path().display()
        )))?;
        Ok(())
    }

    /// Where the files of `workspace`'s config approval are kept ([`crate::snapshot`]).
    fn project_snapshot_dir(&self, workspace: &Path) -> PathBuf {
        let digest = Sha256::digest(key(workspace).as_bytes());
        let short: String = crate::hash::hex(&digest).chars().take(16).collect();
        self.root.join("cache").join("projects").join(short)
    }

    /// What moved in the files `project` runs since its approval in `workspace` was given: each
    /// settings file, hook script, command, skill and agent, and the code its hooks run from the
    /// workspace. `None` when no copy was kept (an approval from before yep kept one) or the
    /// files are past the snapshot's caps.
    pub fn project_changes(
        &self,
        workspace: &Path,
        project: &Project,
    ) -> Option<Vec<crate::snapshot::Change>> {
        let before = crate::snapshot::read(&self.project_snapshot_dir(workspace))?;
        let now = project_files(workspace, project)?;
        Some(crate::snapshot::changes(&before, &now))
    }

    /// Where `workspace`'s config keeps its state: one data dir per workspace.
    pub fn project_data_dir(&self, workspace: &Path) -> PathBuf {
        let digest = Sha256::digest(key(workspace).as_bytes());
        let short: String = crate::hash::hex(&digest).chars().take(16).collect();
        self.data_dir(PROJECT).join(short)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin_of(workspace: &Path, project: &Project) -> ProjectPin {
        ProjectPin {
            workspace: key(workspace),
            hash: project.hash.clone(),
            approved_manifest: String::new(),
            claude: project.approval.pin.clone(),
            code: project.code.hash.clone(),
        }
    }

    #[test]
    fn the_code_a_hook_runs_is_pinned_and_an_older_pin_approves_none() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        let settings = |command: &str| {
            serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
                "hooks": [{"type": "command", "command": command}]}]}})
            .to_string()
        };
        std::fs::write(ws.join(".claude/settings.json"), settings("sh tools/g.sh")).unwrap();
        std::fs::write(ws.join("tools/g.sh"), "exit 0").unwrap();
        let approved = read(ws).unwrap().unwrap();
        assert_eq!(approved.code.paths, ["tools/"]);
        let pin = pin_of(ws, &approved);
        assert_eq!(approved.unapproved(Some(&pin)), None);
        assert_eq!(approved.unapproved(None), Some(Unapproved::Never));

        std::fs::write(ws.join("tools/g.sh"), "exit 2").unwrap();
        let pulled = read(ws).unwrap().unwrap();
        assert_eq!(pulled.hash, approved.hash, "nothing in .claude changed");
        let why = pulled.unapproved(Some(&pin)).unwrap();
        assert_eq!(
            why,
            Unapproved::Code {
                paths: vec!["tools/".into()],
                unpinned: false
            }
        );
        assert_eq!(
            why.since(),
            " since the code they run from the workspace changed (tools/)"
        );
        let older = ProjectPin { code: None, ..pin };
        assert!(matches!(
            approved.unapproved(Some(&older)),
            Some(Unapproved::Code { unpinned: true, .. })
        ));

        std::fs::write(ws.join(".claude/settings.json"), settings("sh tools/h.sh")).unwrap();
        let changed = read(ws).unwrap().unwrap();
        assert_eq!(changed.unapproved(Some(&older)), Some(Unapproved::Changed));
        assert_eq!(changed.code.hash, None, "tools/h.sh is not there");
    }
}
