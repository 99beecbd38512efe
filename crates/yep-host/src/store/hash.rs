//! The package content hash, byte for byte as yolop computes it.
//!
//! Walk the package's files (skipping `.git` directories), take relative paths with `/`, sort
//! them, and hash `path ‖ 0x00 ‖ length as u64 little-endian ‖ bytes` for each file with
//! SHA-256; render `sha256:<hex>`.

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
        let bytes = std::fs::read(dir.join(rel))?;
        hasher.update(rel.as_bytes());
        hasher.update([0u8]);
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
        } else if kind.is_file() {
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
}
