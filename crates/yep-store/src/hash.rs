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
//!
//! Files are read as package content is read ([`crate::fsutil::open_regular`]): a FIFO or a
//! device swapped in for a file is refused, never waited on.

use crate::fsutil::{Links, open_regular};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn content_hash(dir: &Path) -> std::io::Result<String> {
    content_hash_excluding(dir, &[])
}

/// The content hash with some relative paths left out: a prebuilt binary placed after
/// approval is pinned on its own.
///
/// Names are hashed by their raw bytes (a name that is not UTF-8 is hashed as it is, never
/// replaced by U+FFFD, so two names cannot collide and every file's bytes count); a UTF-8 name
/// hashes exactly as yolop hashes it. Files are read through their real paths.
pub fn content_hash_excluding(dir: &Path, skip: &[&str]) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    for e in entries(dir)?
        .iter()
        .filter(|e| !skip.iter().any(|s| s.as_bytes() == e.rel.as_slice()))
    {
        hasher.update(&e.rel);
        hasher.update([0u8]);
        if e.link {
            let target = std::fs::read_link(&e.path)?;
            let target = raw_bytes(target.as_os_str());
            hasher.update(u64::MAX.to_le_bytes());
            hasher.update((target.len() as u64).to_le_bytes());
            hasher.update(target);
            continue;
        }
        // A link was listed as a link: a file that is one now was swapped since.
        let (file, len) = open_regular(&e.path, Links::Refuse)?;
        hasher.update(len.to_le_bytes());
        hash_exactly(file, len, &e.path, &mut hasher)?;
    }
    Ok(format!("sha256:{}", hex(&hasher.finalize())))
}

/// Feed `file`'s `len` bytes to `hasher`, a buffer at a time; a file that is not `len` bytes
/// long by its end changed while it was read.
fn hash_exactly(
    file: std::fs::File,
    len: u64,
    path: &Path,
    hasher: &mut Sha256,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut reader = file.take(len.saturating_add(1));
    let mut seen = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        seen += n as u64;
        hasher.update(&buf[..n]);
    }
    if seen != len {
        return Err(std::io::Error::other(format!(
            "{} changed while it was read ({len} bytes, then {seen})",
            path.display()
        )));
    }
    Ok(())
}

/// SHA-256 of the regular file at `path` (a link is followed), as lowercase hex: a prebuilt
/// binary's pin. Read a buffer at a time, never whole; a FIFO or a device is refused.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let (file, len) = open_regular(path, Links::Follow)?;
    let mut hasher = Sha256::new();
    hash_exactly(file, len, path, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

/// One file or link of a package, as the content hash sees it.
pub(crate) struct Entry {
    /// Its `/`-joined relative name, in raw bytes.
    pub(crate) rel: Vec<u8>,
    pub(crate) path: PathBuf,
    pub(crate) link: bool,
}

/// Every file and link under `dir` (skipping `.git`), sorted by raw relative name.
pub(crate) fn entries(dir: &Path) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    collect(dir, Vec::new(), &mut out)?;
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// A name's bytes as the file system holds them.
#[cfg(unix)]
fn raw_bytes(name: &std::ffi::OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes()
}

#[cfg(not(unix))]
fn raw_bytes(name: &std::ffi::OsStr) -> &[u8] {
    name.as_encoded_bytes()
}

fn collect(dir: &Path, prefix: Vec<u8>, out: &mut Vec<Entry>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let kind = entry.file_type()?;
        let mut rel = prefix.clone();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(raw_bytes(&name));
        if kind.is_dir() {
            if name != ".git" {
                collect(&entry.path(), rel, out)?;
            }
        } else if kind.is_file() || kind.is_symlink() {
            out.push(Entry {
                rel,
                path: entry.path(),
                link: kind.is_symlink(),
            });
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
    fn a_name_that_is_not_utf8_is_hashed_by_its_bytes_and_its_file_counts() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        let raw = std::ffi::OsStr::from_bytes(b"bin/\xff.py");
        std::fs::write(dir.path().join(raw), b"real").unwrap();
        std::fs::write(dir.path().join("bin/\u{FFFD}.py"), b"twin").unwrap();
        let mut expect = Vec::new();
        for (path, data) in [
            (&b"bin/\xef\xbf\xbd.py"[..], &b"twin"[..]),
            (b"bin/\xff.py", b"real"),
        ] {
            expect.extend_from_slice(path);
            expect.push(0);
            expect.extend_from_slice(&(data.len() as u64).to_le_bytes());
            expect.extend_from_slice(data);
        }
        let before = content_hash(dir.path()).unwrap();
        assert_eq!(before, format!("sha256:{}", sha256_hex(&expect)));
        std::fs::write(dir.path().join(raw), b"edit").unwrap();
        assert_ne!(
            content_hash(dir.path()).unwrap(),
            before,
            "the \\xff file counts"
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
