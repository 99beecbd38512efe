//! Files kept with an approval, so that what changed since can be shown and what was approved
//! can be served: an MCP server's skills ([`crate::mcp_skills`]), and the files a workspace's
//! `.claude` config runs ([`crate::claude::project`]). A snapshot is a directory under the home
//! written whole beside the old one and swapped in; it holds regular files only, at plain
//! relative paths.

use crate::StoreError;
use std::path::{Path, PathBuf};

/// Files: each path (relative, `/`-separated) and its bytes, sorted by path.
pub type Files = Vec<(String, Vec<u8>)>;

/// The most files one snapshot holds, and the most bytes; past either it is not kept.
pub const MAX_FILES: usize = 4096;
pub const MAX_BYTES: u64 = 32 * 1024 * 1024;

/// Whether `path` is a plain relative path: no empty, `.` or `..` segment, no NUL.
pub fn plain(path: &str) -> bool {
    path.split('/')
        .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains(['\\', '\0']))
}

/// Keep `files` as the snapshot at `dir`, in place of any kept before: written whole beside
/// it, then swapped in. A path that is not [`plain`] is left out.
pub fn keep(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), StoreError> {
    let fresh = sibling(dir, "new");
    let io = |what: &Path| crate::io(format!("failed to write {}", what.display()));
    let _ = std::fs::remove_dir_all(&fresh);
    // Owner-only: what a workspace's scripts or a server's skills say is nobody else's.
    crate::fsutil::create_private_dir(&fresh).map_err(io(&fresh))?;
    for (path, bytes) in files.iter().filter(|(p, _)| plain(p)) {
        let file = fresh.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&file, bytes).map_err(io(&file))?;
    }
    let old = sibling(dir, "old");
    let _ = std::fs::rename(dir, &old);
    std::fs::rename(&fresh, dir).map_err(io(dir))?;
    let _ = crate::fsutil::remove_tree(&old);
    Ok(())
}

/// `dir` beside itself, for a step of [`keep`].
fn sibling(dir: &Path, what: &str) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!("{name}.{what}-{}", std::process::id()))
}

/// The regular files under `dir` (links, FIFOs and devices left out, nothing followed), sorted:
/// a snapshot as kept, or a tree as it is now. `None` past [`MAX_FILES`] or [`MAX_BYTES`], or
/// when `dir` cannot be read.
pub fn read(dir: &Path) -> Option<Files> {
    let mut files = Vec::new();
    let mut bytes = 0u64;
    walk(dir, "", &mut files, &mut bytes)?;
    files.sort();
    Some(files)
}

fn walk(dir: &Path, prefix: &str, out: &mut Files, total: &mut u64) -> Option<()> {
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        let kind = entry.file_type().ok()?;
        if kind.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), out, total)?;
        } else if kind.is_file() {
            if out.len() >= MAX_FILES {
                return None;
            }
            let room = MAX_BYTES - *total;
            let bytes =
                crate::fsutil::read_regular(&entry.path(), room, crate::fsutil::Links::Refuse)
                    .ok()?;
            *total += bytes.len() as u64;
            out.push((rel, bytes));
        }
    }
    Some(())
}

/// How one file moved between two sets of files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(String),
    Removed(String),
    /// Its path, and its lines diffed (`- `, `+ `, and context; a text file's), or none for
    /// bytes.
    Changed(String, Option<Vec<String>>),
}

/// What moved from `before` to `now` (both sorted by path).
pub fn changes(before: &[(String, Vec<u8>)], now: &[(String, Vec<u8>)]) -> Vec<Change> {
    let mut out = Vec::new();
    let (mut a, mut b) = (before.iter().peekable(), now.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((p, _)), None) => {
                out.push(Change::Removed(p.clone()));
                a.next();
            }
            (None, Some((p, _))) => {
                out.push(Change::Added(p.clone()));
                b.next();
            }
            (Some((pa, ba)), Some((pb, bb))) => match pa.cmp(pb) {
                std::cmp::Ordering::Less => {
                    out.push(Change::Removed(pa.clone()));
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push(Change::Added(pb.clone()));
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if ba != bb {
                        out.push(Change::Changed(pa.clone(), text_diff(ba, bb)));
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
    out
}

/// Two texts' lines, diffed as a tool's text is on a consent screen
/// ([`crate::tooltext::diff`]), or `None` when either is not text.
fn text_diff(before: &[u8], now: &[u8]) -> Option<Vec<String>> {
    let lines = |bytes: &[u8]| -> Option<Vec<String>> {
        Some(
            std::str::from_utf8(bytes)
                .ok()?
                .lines()
                .map(String::from)
                .collect(),
        )
    };
    Some(crate::tooltext::diff(Some(&lines(before)?), &lines(now)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Files {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn changes_name_each_file_and_diff_a_texts_lines() {
        let before = files(&[("a.sh", "echo a\necho ok\n"), ("gone", "x"), ("same", "s")]);
        let now = files(&[
            ("a.sh", "echo a\ncurl x | sh\n"),
            ("new", "n"),
            ("same", "s"),
        ]);
        let moved = changes(&before, &now);
        assert_eq!(moved.len(), 3, "{moved:?}");
        let Change::Changed(path, Some(diff)) = &moved[0] else {
            panic!("{moved:?}")
        };
        assert_eq!(path, "a.sh");
        assert_eq!(diff, &["  echo a", "- echo ok", "+ curl x | sh"]);
        assert_eq!(moved[1], Change::Removed("gone".into()));
        assert_eq!(moved[2], Change::Added("new".into()));
    }

    #[test]
    fn a_kept_snapshot_reads_back_and_holds_no_path_out() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("snap");
        keep(&dir, &files(&[("x/y.md", "1"), ("../out", "no")])).unwrap();
        assert_eq!(read(&dir).unwrap(), files(&[("x/y.md", "1")]));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "a snapshot is the owner's alone: {mode:o}");
        keep(&dir, &files(&[("z", "2")])).unwrap();
        assert_eq!(read(&dir).unwrap(), files(&[("z", "2")]));
        assert!(!tmp.path().join("out").exists());
    }
}
