//! The install journal: every mutation of the home is written down before its first rename,
//! so a crash (even `kill -9`) is finished by the next lock, or never happened.

use crate::fsutil::{self, MODE_DEFAULT, remove_tree, write_atomic};
use crate::{Home, StoreError, io};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A commit in progress, written before any rename so recovery can finish it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// `(from, to)` renames, each done only while `from` exists and `to` does not.
    pub(crate) renames: Vec<(PathBuf, PathBuf)>,
    /// The lock file's new content.
    pub(crate) lock: String,
    /// Removed after the renames and the lock write.
    pub(crate) cleanup: Vec<PathBuf>,
}

impl Home {
    pub(crate) fn journal_path(&self) -> PathBuf {
        self.root.join(".journal.json")
    }

    fn scratch_dir(&self) -> PathBuf {
        self.extensions_dir().join(".scratch")
    }

    /// Roll a journaled commit forward; drop uncommitted scratch.
    pub(crate) fn recover(&self) -> Result<(), StoreError> {
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
    pub(crate) fn commit(&self, j: Journal) -> Result<(), StoreError> {
        let text =
            serde_json::to_string(&j).map_err(|e| io("failed to write the journal")(e.into()))?;
        write_atomic(&self.journal_path(), text.as_bytes(), MODE_DEFAULT)
            .map_err(io("failed to write the journal"))?;
        self.apply(&j)
    }

    /// Drop a scratch directory, unless a journal still needs what it holds: an interrupted
    /// commit is finished by the next recovery, from there.
    pub(crate) fn discard(&self, scratch: &Path) {
        if !self.journal_path().exists() {
            let _ = remove_tree(scratch);
        }
    }

    /// A fresh scratch directory on the home's file system (renames stay atomic).
    pub(crate) fn scratch(&self) -> Result<PathBuf, StoreError> {
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
}
