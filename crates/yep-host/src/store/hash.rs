//! The package content hash, byte for byte as yolop computes it.
//!
//! Walk the package's files (skipping `.git` directories), take relative paths with `/`, sort
//! them, and hash `path ‖ 0x00 ‖ length as u64 little-endian ‖ bytes` for each file with
//! SHA-256; render `sha256:<hex>`.
//!
//! yolop hashes files only. A symlink counts too, so that pointing it elsewhere changes the
//! hash: it is sorted in with the files and hashed as `path ‖ 0x00 ‖ u64::MAX ‖ target length
//! as u64 little-endian ‖ target bytes` (no file has `u64::MAX` bytes, so the two cannot be
//! confused). A package without links hashes exactly as yolop hashes it.

use sha2::{Digest, Sha256};
use std::path::Path;

pub fn content_hash(dir: &Path) -> std::io::Result<String> {
    content_hash_excluding(dir, &[])
}

/// The content hash with some relative paths left out: a prebuilt binary placed after
/// approval is pinned on its own.
pub fn content_hash_excluding(dir: &Path, skip: &[&str]) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.retain(|f| !skip.contains(&f.as_str()));
    files.sort();
    let mut hasher = Sha256::new();
    for rel in &files {
        let path = dir.join(rel);
        hasher.update(rel.as_bytes());
        hasher.update([0u8]);
        if path.symlink_metadata()?.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?;
            let target = target.as_os_str().as_encoded_bytes();
            hasher.update(u64::MAX.to_le_bytes());
            hasher.update((target.len() as u64).to_le_bytes());
            hasher.update(target);
            continue;
        }
        let bytes = std::fs::read(path)?;
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("sha256:{}", hex(&hasher.finalize())))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                collect(root, &path, out)?;
            }
        } else if kind.is_file() || kind.is_symlink() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let parts: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
    Ok(())
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a byte string, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_covers_paths_lengths_and_bytes_and_skips_git() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("plugin.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("bin/s"), b"x").unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), b"ref").unwrap();
        // The same bytes, assembled by hand.
        let mut expect = Vec::new();
        for (path, data) in [("bin/s", &b"x"[..]), ("plugin.json", &b"{}"[..])] {
            expect.extend_from_slice(path.as_bytes());
            expect.push(0);
            expect.extend_from_slice(&(data.len() as u64).to_le_bytes());
            expect.extend_from_slice(data);
        }
        assert_eq!(
            content_hash(dir.path()).unwrap(),
            format!("sha256:{}", sha256_hex(&expect))
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_links_target_counts_in_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"1").unwrap();
        std::fs::write(dir.path().join("b"), b"1").unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("s")).unwrap();
        let to_a = content_hash(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("s")).unwrap();
        std::os::unix::fs::symlink("b", dir.path().join("s")).unwrap();
        let to_b = content_hash(dir.path()).unwrap();
        assert_ne!(to_a, to_b, "repointing a link changes the hash");
        std::fs::remove_file(dir.path().join("s")).unwrap();
        assert_ne!(content_hash(dir.path()).unwrap(), to_b);
    }
}
