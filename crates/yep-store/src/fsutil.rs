//! File-system steps that must not leave half-written state: atomic writes, tree copies.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Write `bytes` to `path` atomically (temp file in the same directory, fsync, rename), and
/// only if the content differs. Returns whether it wrote.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|()| true)
}

/// Make a rename in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Copy a package tree, skipping `.git` directories; symlinks are copied as links, and the copy
/// is refused (see [`check_links`]) when one is absolute or leaves the package.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    copy_entries(from, to)?;
    // Judged on the copy, which is ours: the source may change while it is read.
    check_links(to)
}

fn copy_entries(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        let (src, dst) = (entry.path(), to.join(&name));
        if kind.is_dir() {
            if name == ".git" {
                continue;
            }
            copy_entries(&src, &dst)?;
        } else if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else {
            // `fs::copy` keeps the permission bits, so an executable `bin/` stays executable.
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Refuse a package (`root`) holding a symlink whose target is absolute, climbs out of the
/// package (resolved lexically from the link's directory), or resolves through another of its
/// links: the package's behaviour would then live in files outside it, which neither the
/// content hash nor drift checks see. `.git` directories are skipped, as the hash skips them.
pub fn check_links(root: &Path) -> std::io::Result<()> {
    check_links_in(root, root)
}

fn check_links_in(root: &Path, dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                check_links_in(root, &path)?;
            }
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&path)?;
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let is_link = |p: &Path| {
                root.join(p)
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
            };
            if let Some(escape) = link_escape(rel, &target, is_link) {
                let why = match escape {
                    LinkEscape::Outside => {
                        format!("it points outside the package (to {})", target.display())
                    }
                    LinkEscape::Through(via) => format!(
                        "it resolves through another link of the package ({} via {})",
                        target.display(),
                        via.display()
                    ),
                };
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("refusing the symlink {}: {why}", rel.display()),
                ));
            }
        }
    }
    Ok(())
}

/// How a symlink leaves its package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LinkEscape {
    /// Its target is absolute, or climbs above the package root.
    Outside,
    /// Its target passes through this other link of the package before its last component,
    /// so it resolves through that link's target instead of where it reads.
    Through(PathBuf),
}

/// Resolve `target` lexically from the directory of the link at `rel` (relative to the package
/// root), and say how it leaves the package, if it does. `is_link` says whether a path of the
/// package (relative to its root) is itself a link: on disk, or in an archive being unpacked.
pub(crate) fn link_escape(
    rel: &Path,
    target: &Path,
    is_link: impl Fn(&Path) -> bool,
) -> Option<LinkEscape> {
    use std::path::Component;
    if target.is_absolute() {
        return Some(LinkEscape::Outside);
    }
    let mut here: PathBuf = rel.parent().map(Path::to_path_buf).unwrap_or_default();
    let parts: Vec<Component> = target.components().collect();
    for (i, c) in parts.iter().enumerate() {
        match c {
            Component::Normal(part) => here.push(part),
            Component::ParentDir => {
                if !here.pop() {
                    return Some(LinkEscape::Outside);
                }
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Some(LinkEscape::Outside),
        }
        if i + 1 < parts.len() && !here.as_os_str().is_empty() && is_link(&here) {
            return Some(LinkEscape::Through(here));
        }
    }
    None
}

/// Create `dir` (and its parents), then make it owner-only (0700) if group or others may
/// enter it: logs and an extension's data can hold what its server would not show anyone.
/// Whether a failure to tighten a directory that already existed matters is the caller's to
/// say: [`make_private`] is the second half on its own.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    make_private(dir)
}

/// Make `dir` owner-only (0700) if group or others may enter it.
pub fn make_private(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// Remove a directory tree if it exists.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_that_leave_the_package_are_refused_and_inner_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pkg");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/s"), "x").unwrap();
        let link = |at: &str, to: &str| std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        link("bin/s", "../lib/s");
        link("bin/dot", ".");
        check_links(&root).unwrap();
        for (at, to, why) in [
            ("bin/abs", "/etc/passwd", "points outside"),
            ("bin/up", "../../outside", "points outside"),
            ("bin/via", "dot/../../x", "through another link"),
        ] {
            link(at, to);
            let err = check_links(&root).unwrap_err().to_string();
            assert!(
                err.contains(&format!("refusing the symlink {at}")) && err.contains(why),
                "{err}"
            );
            let copy = dir.path().join(format!("copy-{}", at.replace('/', "-")));
            let err = copy_tree(&root, &copy).unwrap_err().to_string();
            assert!(err.contains(at), "{err}");
            std::fs::remove_file(root.join(at)).unwrap();
        }
    }
}
