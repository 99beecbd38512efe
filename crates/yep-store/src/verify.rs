//! Whether an installed package is still what was approved. The manifest is compared with the
//! approved one every time; the full content hash is checked through a cache keyed by each
//! file's size, mtime, ctime and inode, so an unchanged package costs a walk, not a read.

use super::Home;
use super::hash;
use super::lockfile::LockEntry;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Files changed this recently may change again within the same timestamp tick, unseen by
/// the fingerprint; such a package is hashed again next time instead of cached.
const RACY: Duration = Duration::from_secs(2);

impl Home {
    /// Why `entry`'s installed files are no longer what was approved, or `None`.
    pub fn drift_of(&self, entry: &LockEntry) -> Option<String> {
        let why = check(self, entry).err()?;
        Some(format!(
            "`{}` changed since it was approved ({why}); run `yep update {}` to review",
            entry.name, entry.name
        ))
    }

    fn verified_path(&self, name: &str) -> std::path::PathBuf {
        self.root.join("state").join(format!("{name}.verified"))
    }
}

fn check(home: &Home, entry: &LockEntry) -> Result<(), String> {
    let dir = home.package_dir(&entry.name);
    if let Some(approved) = entry.approved() {
        let on_disk = home
            .package_manifest(entry)
            .map_err(|e| format!("its manifest: {e}"))?;
        if serde_json::to_value(&on_disk).ok() != serde_json::to_value(&approved).ok() {
            return Err(format!(
                "{} differs from the approved manifest",
                entry.manifest_file()
            ));
        }
    }
    let (fingerprint, newest) =
        fingerprint(&dir).map_err(|e| format!("failed to read {}: {e}", dir.display()))?;
    let key = {
        let mut h = Sha256::new();
        h.update(entry.content_hash.as_bytes());
        h.update([0]);
        if let Some(b) = &entry.binary {
            h.update(b.path.as_bytes());
            h.update([0]);
            h.update(b.sha256.as_bytes());
        }
        h.update([0]);
        h.update(fingerprint);
        hash::hex(&h.finalize())
    };
    let cache = home.verified_path(&entry.name);
    // The cache is a hex digest; anything longer, or not a file, is not one.
    let cached = super::fsutil::read_regular_string(&cache, 256, super::fsutil::Links::Refuse);
    if cached.is_ok_and(|k| k.trim() == key) {
        return Ok(());
    }
    let skip: Vec<&str> = entry.binary.iter().map(|b| b.path.as_str()).collect();
    let now = hash::content_hash_excluding(&dir, &skip)
        .map_err(|e| format!("failed to hash {}: {e}", dir.display()))?;
    if now != entry.content_hash {
        return Err(format!("content {} → {now}", entry.content_hash));
    }
    if let Some(b) = &entry.binary {
        let sha256 = hash::sha256_file(&dir.join(&b.path))
            .map_err(|e| format!("its prebuilt binary {}: {e}", b.path))?;
        if sha256 != b.sha256 {
            return Err(format!("its prebuilt binary {} differs", b.path));
        }
    }
    if newest.is_some_and(|t| t + RACY < SystemTime::now()) {
        let _ = super::fsutil::write_atomic(&cache, key.as_bytes(), super::fsutil::MODE_DEFAULT);
    }
    Ok(())
}

/// A digest of every file's and link's path, size, mtime, ctime and inode (the entries the
/// content hash reads), and the newest change time seen.
pub(crate) fn fingerprint(dir: &Path) -> std::io::Result<([u8; 32], Option<SystemTime>)> {
    let mut newest = None;
    let mut h = Sha256::new();
    for e in hash::entries(dir)? {
        let meta = std::fs::symlink_metadata(&e.path)?;
        let (ctime, row) = stamp(&meta);
        newest = newest.max(Some(ctime));
        h.update(&e.rel);
        h.update([0]);
        h.update(row.as_bytes());
        h.update([b'\n']);
    }
    Ok((h.finalize().into(), newest))
}

#[cfg(unix)]
fn stamp(meta: &std::fs::Metadata) -> (SystemTime, String) {
    use std::os::unix::fs::MetadataExt;
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec().max(0) as u32);
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    (
        ctime.max(modified),
        format!(
            "{} {} {}.{} {}.{} {}",
            meta.len(),
            meta.file_type().is_symlink(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino()
        ),
    )
}

#[cfg(not(unix))]
fn stamp(meta: &std::fs::Metadata) -> (SystemTime, String) {
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    (modified, format!("{} {:?}", meta.len(), modified))
}
