//! File-system steps that must not leave half-written state: atomic writes, tree copies.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The mode of a file anyone may read, as `File::create` makes it: the umask decides.
pub const MODE_DEFAULT: u32 = 0o666;
/// The mode of a file that holds secrets: owner-only from its first byte.
pub const MODE_PRIVATE: u32 = 0o600;

/// Write `bytes` to `path` atomically (temp file in the same directory created with `mode`,
/// fsync, rename), and only if the content differs. Returns whether it wrote.
///
/// A [`MODE_PRIVATE`] file ends owner-only even when nothing is written: a same-content file
/// that others may read is restricted in place (through a handle that does not follow links),
/// and a symlink is replaced by a file rather than trusted.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<bool> {
    let private = mode & 0o077 == 0;
    if private {
        if let Some(file) = unchanged_private_file(path, bytes) {
            restrict(&file, mode)?;
            return Ok(false);
        }
    } else if std::fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // A stale temp file (a crashed write) would keep its own mode: it goes first, and the new
    // one must be new, so nothing planted there is written through.
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        let mut file = options.open(&tmp)?;
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

/// `path` opened without following a link, when it is a regular file holding `bytes`.
fn unchanged_private_file(path: &Path, bytes: &[u8]) -> Option<std::fs::File> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Not a link, and never a wait on a fifo planted there.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let mut file = options.open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut current = Vec::new();
    file.read_to_end(&mut current).ok()?;
    (current == bytes).then_some(file)
}

/// Take away whatever `mode` does not grant.
fn restrict(file: &std::fs::File, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let now = file.metadata()?.permissions().mode() & 0o777;
        if now & !mode != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(now & mode))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (file, mode);
    Ok(())
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

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[cfg(unix)]
    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_private_write_ends_owner_only_even_when_the_content_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connections.toml");
        std::fs::write(&path, "a").unwrap();
        chmod(&path, 0o644);
        assert!(
            !write_atomic(&path, b"a", MODE_PRIVATE).unwrap(),
            "the same content is not written again"
        );
        assert_eq!(mode(&path), 0o600);

        // A stale temp file of a crashed write lends the new file neither its mode nor a link.
        let tmp = dir
            .path()
            .join(format!(".connections.toml.tmp-{}", std::process::id()));
        std::fs::write(&tmp, "stale").unwrap();
        chmod(&tmp, 0o644);
        assert!(write_atomic(&path, b"b", MODE_PRIVATE).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"b");
        assert_eq!(mode(&path), 0o600);
        assert!(!tmp.exists());

        // A link holding the same content is replaced by an owner-only file; its target is
        // not ours to chmod.
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "c").unwrap();
        chmod(&target, 0o644);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(write_atomic(&path, b"c", MODE_PRIVATE).unwrap());
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&target), 0o644);
    }

    #[cfg(unix)]
    #[test]
    fn a_default_write_skips_identical_content_and_leaves_the_mode_to_the_umask() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        assert!(write_atomic(&path, b"x", MODE_DEFAULT).unwrap());
        let umask_mode = mode(&path);
        assert_eq!(umask_mode & 0o600, 0o600, "{umask_mode:o}");
        let inode = std::fs::metadata(&path).unwrap().ino();
        assert!(!write_atomic(&path, b"x", MODE_DEFAULT).unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().ino(),
            inode,
            "not replaced"
        );
        assert!(write_atomic(&path, b"y", MODE_DEFAULT).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"y");
        assert_eq!(mode(&path), umask_mode);
    }
}
