//! File-system steps that must not leave half-written state (atomic writes, tree copies), and
//! reads of package files that cannot hang (a FIFO, a device) or run without end.

use std::io::{Read, Write};
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

/// The file that names what a path install leaves out, as `.gitignore` does (and beside it).
pub const YEPIGNORE: &str = ".yepignore";

/// Copy a package from a directory as [`copy_tree`] does, but without what its own
/// `.gitignore` and [`YEPIGNORE`] files leave out (at any depth; not those above it, nor the
/// user's global ones, so the same directory installs the same everywhere): a Rust package's
/// `target/` stays behind. What the package's manifests name (`bin/server`, a hook's script)
/// is copied even when ignored, so that an ignored build output the manifest runs still
/// works. The bytes copied.
pub fn copy_package(from: &Path, to: &Path) -> std::io::Result<u64> {
    let walk = ignore::WalkBuilder::new(from)
        .standard_filters(false)
        .git_ignore(true)
        .require_git(false)
        .add_custom_ignore_filename(YEPIGNORE)
        .parents(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    std::fs::create_dir_all(to)?;
    let mut total = 0;
    for entry in walk {
        let entry = entry.map_err(std::io::Error::other)?;
        let rel = entry
            .path()
            .strip_prefix(from)
            .map_err(std::io::Error::other)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        total += copy_one(entry.path(), &to.join(rel))?;
    }
    for named in named_paths(from) {
        let dst = to.join(named.strip_prefix(from).map_err(std::io::Error::other)?);
        if std::fs::symlink_metadata(&dst).is_err() {
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // A directory named is copied whole, as it is.
            match std::fs::symlink_metadata(&named)?.is_dir() {
                true => copy_entries(&named, &dst)?,
                false => total += copy_one(&named, &dst)?,
            }
        }
    }
    // Judged on the copy, which is ours: the source may change while it is read.
    check_links(to)?;
    Ok(total)
}

/// Copy one entry of a package: a directory whole (as [`copy_tree`]), a link as a link, a
/// regular file with its mode. The bytes of a file copied.
fn copy_one(src: &Path, dst: &Path) -> std::io::Result<u64> {
    let kind = std::fs::symlink_metadata(src)?.file_type();
    if kind.is_dir() {
        std::fs::create_dir_all(dst)?;
        Ok(0)
    } else if kind.is_symlink() {
        #[cfg(unix)]
        std::os::unix::fs::symlink(std::fs::read_link(src)?, dst)?;
        Ok(0)
    } else {
        copy_file(src, dst)?;
        Ok(std::fs::metadata(dst)?.len())
    }
}

/// The files and directories inside `root` that its manifests name as paths (each word of a
/// string value, `./` and a `${...}/` root variable taken off): what a package runs, copied
/// even when an ignore file leaves it out.
fn named_paths(root: &Path) -> Vec<std::path::PathBuf> {
    const MANIFESTS: [&str; 6] = [
        "plugin.json",
        ".claude-plugin/plugin.json",
        ".codex-plugin/plugin.json",
        ".mcp.json",
        "hooks/hooks.json",
        "manifest.json",
    ];
    fn strings<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::String(s) => out.push(s),
            serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let Ok(real_root) = root.canonicalize() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for manifest in MANIFESTS {
        let Ok(text) = read_regular_string(&root.join(manifest), 1 << 20, Links::Refuse) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let mut values = Vec::new();
        strings(&value, &mut values);
        for word in values.iter().flat_map(|v| v.split_whitespace()) {
            let word = word.trim_matches(['"', '\'']);
            let word = match word.strip_prefix("${") {
                Some(rest) => rest.split_once("}/").map_or("", |(_, path)| path),
                None => word.strip_prefix("./").unwrap_or(word),
            };
            if word.is_empty() || !stays_inside(word) {
                continue;
            }
            let path = root.join(word);
            let inside = path
                .canonicalize()
                .is_ok_and(|real| real.starts_with(&real_root) && real != real_root);
            if inside && !found.contains(&path) {
                found.push(path);
            }
        }
    }
    found
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
            copy_file(&src, &dst)?;
        }
    }
    Ok(())
}

/// Copy one regular file of a package, keeping its permission bits (an executable `bin/`
/// stays executable). Anything else (a FIFO, a socket, a device) is refused, never opened
/// for a read that would wait forever: a package holds files, directories and links.
fn copy_file(src: &Path, dst: &Path) -> std::io::Result<()> {
    let (mut from, _) = open_regular(src, Links::Refuse)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(from.metadata()?.permissions().mode() & 0o7777);
    }
    let mut to = options.open(dst)?;
    std::io::copy(&mut from, &mut to)?;
    // The mode given at creation is cut by the umask; `fs::copy` set it whole.
    to.set_permissions(from.metadata()?.permissions())
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

/// Whether a read follows a symbolic link at the last component of its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Read what the link points at (the caller has checked where that is, or does not
    /// mind). Still refused unless the target is a regular file.
    Follow,
    /// Refuse a link: the caller read the directory and expects a file there.
    Refuse,
}

/// What sits at a path that is not a regular file, as a refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    Directory,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Symlink,
    Other,
}

impl FileKind {
    fn of(kind: std::fs::FileType) -> FileKind {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if kind.is_fifo() {
                return FileKind::Fifo;
            }
            if kind.is_socket() {
                return FileKind::Socket;
            }
            if kind.is_char_device() {
                return FileKind::CharDevice;
            }
            if kind.is_block_device() {
                return FileKind::BlockDevice;
            }
        }
        if kind.is_dir() {
            FileKind::Directory
        } else if kind.is_symlink() {
            FileKind::Symlink
        } else {
            FileKind::Other
        }
    }
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a named pipe (FIFO)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Symlink => "a symbolic link",
            FileKind::Other => "not a file",
        })
    }
}

/// Why [`read_regular`] or [`open_regular`] would not read a file. It reaches the caller as
/// the inner error of an [`std::io::Error`] (`InvalidInput` for the wrong kind of file,
/// `InvalidData` past the cap): `err.get_ref()` and `downcast_ref` tell them apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    #[error("refusing to read {}: it is {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: FileKind },
    #[error("refusing to read {}: it is over the {cap}-byte limit", path.display())]
    TooLarge { path: PathBuf, cap: u64 },
}

impl From<Refused> for std::io::Error {
    fn from(refused: Refused) -> Self {
        let kind = match refused {
            Refused::NotRegular { .. } => std::io::ErrorKind::InvalidInput,
            Refused::TooLarge { .. } => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, refused)
    }
}

/// `path` opened for reading if it is a regular file, and its length then. Nothing else is
/// opened for long, nor waited on: the kind is checked before the open, the open does not
/// block (a FIFO with no writer would wait forever otherwise) and takes no terminal, and the
/// kind is checked again on the open file (`fstat`), so a file swapped for a FIFO in between
/// is refused too. With [`Links::Refuse`] a link at the last component is refused.
pub fn open_regular(path: &Path, links: Links) -> std::io::Result<(std::fs::File, u64)> {
    let not_regular = |kind| Refused::NotRegular {
        path: path.to_path_buf(),
        kind,
    };
    let before = match links {
        Links::Follow => std::fs::metadata(path)?,
        Links::Refuse => std::fs::symlink_metadata(path)?,
    };
    if !before.is_file() {
        return Err(not_regular(FileKind::of(before.file_type())).into());
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = match links {
            Links::Follow => 0,
            Links::Refuse => libc::O_NOFOLLOW,
        };
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // Swapped since the check: say for what, when it can be told.
        Err(e) => {
            let now = match links {
                Links::Follow => std::fs::metadata(path),
                Links::Refuse => std::fs::symlink_metadata(path),
            };
            return Err(match now {
                Ok(meta) if !meta.is_file() => not_regular(FileKind::of(meta.file_type())).into(),
                _ => e,
            });
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(FileKind::of(meta.file_type())).into());
    }
    Ok((file, meta.len()))
}

/// The bytes of `path` if it is a regular file of at most `cap` bytes ([`open_regular`]):
/// a FIFO, a device, a socket or a directory is refused at once, and a longer file after
/// `cap + 1` bytes at most (it may grow while it is read).
pub fn read_regular(path: &Path, cap: u64, links: Links) -> std::io::Result<Vec<u8>> {
    let too_large = || Refused::TooLarge {
        path: path.to_path_buf(),
        cap,
    };
    let (file, len) = open_regular(path, links)?;
    if len > cap {
        return Err(too_large().into());
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large().into());
    }
    Ok(bytes)
}

/// [`read_regular`], as UTF-8 text.
pub fn read_regular_string(path: &Path, cap: u64, links: Links) -> std::io::Result<String> {
    String::from_utf8(read_regular(path, cap, links)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text: {}", path.display(), e.utf8_error()),
        )
    })
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

/// A relative path with no `..`, root or prefix: it cannot leave the directory it is read in
/// (a package path a manifest names: zot's skills, a Claude plugin's components).
pub fn stays_inside(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path).components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_copy_leaves_out_what_it_ignores_but_what_its_manifests_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("pkg"), tmp.path().join("copy"));
        for dir in ["target/debug", "assets/icons", "sub/build"] {
            std::fs::create_dir_all(from.join(dir)).unwrap();
        }
        std::fs::write(from.join(".gitignore"), "/target\nassets/\n").unwrap();
        std::fs::write(from.join("sub/.yepignore"), "build\n").unwrap();
        std::fs::write(from.join("target/debug/big"), "x").unwrap();
        std::fs::write(from.join("assets/icons/a.png"), "png").unwrap();
        std::fs::write(from.join("sub/build/out"), "o").unwrap();
        std::fs::write(from.join("sub/keep"), "k").unwrap();
        // The manifest names the ignored `assets` directory (and a path out, which is not one).
        std::fs::write(
            from.join("plugin.json"),
            r#"{"name": "p", "icons": "${CLAUDE_PLUGIN_ROOT}/assets", "x": "../outside"}"#,
        )
        .unwrap();
        copy_package(&from, &to).unwrap();
        assert!(
            to.join("assets/icons/a.png").is_file(),
            "a named directory is copied whole"
        );
        assert!(to.join("sub/keep").is_file() && to.join("plugin.json").is_file());
        assert!(!to.join("target").exists() && !to.join("sub/build").exists());
    }

    /// `read` run on a thread of its own, or `None` when it has not returned within 10 s (it
    /// hangs: the test fails instead of waiting with it).
    fn within<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).ok()
    }

    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    }

    fn refusal(err: &std::io::Error) -> &Refused {
        err.get_ref()
            .and_then(|e| e.downcast_ref::<Refused>())
            .unwrap_or_else(|| panic!("not a refusal: {err}"))
    }

    #[test]
    fn a_regular_file_up_to_the_cap_is_read_and_a_longer_one_refused_naming_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SKILL.md");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(
            read_regular(&path, 10, Links::Refuse).unwrap(),
            b"0123456789"
        );
        assert_eq!(
            read_regular_string(&path, 64, Links::Follow).unwrap(),
            "0123456789"
        );
        let err = read_regular(&path, 9, Links::Follow).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            matches!(refusal(&err), Refused::TooLarge { cap: 9, .. }),
            "{err}"
        );
        let said = err.to_string();
        assert!(
            said.contains("9-byte limit") && said.contains("SKILL.md"),
            "{said}"
        );
        let missing = read_regular(&dir.path().join("nope"), 9, Links::Follow).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once_whoever_holds_it_open() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("SKILL.md");
        mkfifo(&fifo);
        let path = fifo.clone();
        let read = within(move || read_regular(&path, 1024, Links::Follow));
        let err = read.expect("the read of a FIFO hung").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            matches!(
                refusal(&err),
                Refused::NotRegular {
                    kind: FileKind::Fifo,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("named pipe (FIFO)"), "{err}");
        // A writer that never writes nor closes: the open is still refused, not waited on.
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let read = within(move || open_regular(&fifo, Links::Refuse).map(drop));
        assert!(read.expect("the open of a FIFO hung").is_err());
        drop(writer);
    }

    #[cfg(unix)]
    #[test]
    fn a_package_holding_a_fifo_is_refused_when_copied_not_waited_on() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pkg");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/srv"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("bin/srv"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let copy = dir.path().join("copy");
        copy_tree(&root, &copy).unwrap();
        assert_eq!(mode(&copy.join("bin/srv")), 0o755, "still executable");
        assert_eq!(std::fs::read(copy.join("bin/srv")).unwrap(), b"#!/bin/sh\n");
        mkfifo(&root.join("bin/pipe"));
        let to = dir.path().join("copy-2");
        let err = within(move || copy_tree(&root, &to))
            .expect("copying a FIFO hung")
            .unwrap_err();
        assert!(
            matches!(
                refusal(&err),
                Refused::NotRegular {
                    kind: FileKind::Fifo,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("bin/pipe"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn directories_devices_sockets_and_refused_links_are_named_for_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = dir.path().join("link");
        std::fs::write(dir.path().join("target"), "t").unwrap();
        std::os::unix::fs::symlink("target", &link).unwrap();
        for (path, links, kind, said) in [
            (
                dir.path().to_path_buf(),
                Links::Follow,
                FileKind::Directory,
                "a directory",
            ),
            (
                PathBuf::from("/dev/zero"),
                Links::Follow,
                FileKind::CharDevice,
                "a character device",
            ),
            (socket, Links::Follow, FileKind::Socket, "a socket"),
            (
                link.clone(),
                Links::Refuse,
                FileKind::Symlink,
                "a symbolic link",
            ),
        ] {
            let shown = path.display().to_string();
            let err = within(move || read_regular(&path, 1 << 20, links))
                .expect("the read hung")
                .unwrap_err();
            match refusal(&err) {
                Refused::NotRegular { kind: k, .. } => assert_eq!(*k, kind, "{err}"),
                other => panic!("{other}"),
            }
            let err = err.to_string();
            assert!(err.contains(said) && err.contains(&shown), "{err}");
        }
        // Followed, a link to a regular file reads as the file.
        assert_eq!(read_regular(&link, 8, Links::Follow).unwrap(), b"t");
    }

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
