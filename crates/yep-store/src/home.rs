//! The home directory: where each of its files is, its mutation lock, and the verbs that
//! change an installed extension's standing (enable, disable, remove).

use crate::components::{Component, Declared};
use crate::fsutil::remove_tree;
use crate::journal::Journal;
use crate::lockfile::Lockfile;
use crate::{StoreError, claude, grants, io, settings, zot};
use std::path::PathBuf;

/// The home directory and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

/// Holds the home's file lock; released on drop.
pub struct HomeLock {
    _file: std::fs::File,
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

    /// The audit trail: one JSON object per line for each tool call, sandbox denial and
    /// egress decision the host saw (rotated to `audit.jsonl.1` … `.3` as it grows).
    pub fn audit_path(&self) -> PathBuf {
        self.root.join("audit.jsonl")
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
    pub(crate) fn read_lock(&self) -> Result<Option<HomeLock>, StoreError> {
        if self.root.join(".lock").exists() || self.journal_path().exists() {
            self.lock().map(Some)
        } else {
            Ok(None)
        }
    }

    /// `name` is neither in the lock nor anywhere a crashed commit could still bring it from:
    /// a verb that needs it installed fails before it takes the lock (and creates the home).
    pub(crate) fn surely_not_installed(&self, name: &str) -> bool {
        !self.journal_path().exists()
            && self.lockfile().is_ok_and(|l| l.get(name).is_none())
            && self.package_dir(name).symlink_metadata().is_err()
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
            && entry.is_some_and(|e| e.kind().speaks_zot())
            && zot::ZotManifest::load(&self.package_dir(name)).is_ok_and(|m| !m.enabled)
        {
            return Err(StoreError::ZotDisabled {
                name: name.to_string(),
            });
        }
        settings::set_enabled(&self.settings_path(), name, on)
    }

    /// Switch `item`, a `kind` of installed extension `name`, off (`on` false) or on again,
    /// whether or not the extension is enabled. Returns whether anything changed. An item it
    /// does not declare is refused, naming what it declares; one switched off that an update
    /// took away may still be switched on.
    pub fn set_component(
        &self,
        name: &str,
        kind: Component,
        item: &str,
        on: bool,
    ) -> Result<bool, StoreError> {
        check_name(name)?;
        if self.surely_not_installed(name) {
            return Err(self.not_installed(name));
        }
        let _lock = self.lock()?;
        let lock = self.lockfile()?;
        let entry = lock.get(name).ok_or_else(|| self.not_installed(name))?;
        let manifest = match entry.approved() {
            Some(m) => m,
            None => self.package_manifest(entry)?,
        };
        let declared = Declared::of(&manifest, entry.claude.as_ref());
        let path = self.settings_path();
        let was_off = settings::off(&path, name)?.set(kind).contains(item);
        let undoable = on && was_off;
        if !(declared.has(kind, item) || undoable) {
            return Err(StoreError::NotDeclared {
                name: name.to_string(),
                kind,
                item: item.to_string(),
                declared: declared.list(kind).to_vec(),
            });
        }
        settings::set_off(&path, name, kind, item, !on)
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
    pub(crate) fn forget_state(&self, name: &str) -> Result<(), StoreError> {
        settings::set_enabled(&self.settings_path(), name, false)?;
        settings::remove_config(&self.settings_path(), name)?;
        settings::remove_off(&self.settings_path(), name)?;
        settings::remove_secrets(&self.connections_path(), name)?;
        // What it wrote for itself (tokens, caches) is its own too.
        remove_tree(&self.data_dir(name)).map_err(io(format!(
            "failed to remove {}",
            self.data_dir(name).display()
        )))?;
        Ok(())
    }
}

/// Names reach paths (`extensions/<name>`): only manifest-valid names are accepted.
pub(crate) fn check_name(name: &str) -> Result<(), StoreError> {
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
