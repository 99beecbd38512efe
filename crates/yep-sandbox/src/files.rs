//! A directory of a workspace in which a server may keep regular files of its own, and nothing
//! else (zot's `.zot/`).

use std::path::Path;

/// Where in its workspace a zot extension keeps files of its own (zot's scratchpad:
/// `.zot/scratchpad-notes.jsonl`). zot also finds a project's extensions there, in
/// `.zot/extensions/`, and runs them: [`own_files`] never opens a directory of it.
pub const ZOT_FILES: &str = ".zot";

/// At most this many entries of a [`Place::files`](crate::Place::files) directory are looked
/// at; past it, it is not opened.
const MAX_FILES_ENTRIES: usize = 4096;

/// Why a [`Place::files`](crate::Place::files) directory was not opened ([`own_files`]); its
/// text is a clause ("holds extensions, a directory").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesWithheld {
    #[error("could not be made or read: {0}")]
    Io(#[from] std::io::Error),
    #[error("is a link")]
    Link,
    #[error("is not a directory")]
    NotADirectory,
    #[error("holds more than {MAX_FILES_ENTRIES} entries")]
    TooMany,
    /// An entry that is not a regular file: its name (escaped), and what it is.
    #[error("holds {0}, {1}")]
    Holds(String, &'static str),
}

/// Whether a server may keep regular files in `dir` (a [`Place::files`](crate::Place::files)
/// directory): made when missing, and opened only while it is a directory of regular files
/// alone. A directory or a link in it could be (or lead to) what other code reads or runs (zot
/// runs the extensions in `.zot/extensions/`), and the rule on `dir` would reach beneath it.
pub fn own_files(dir: &Path) -> Result<(), FilesWithheld> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(std::fs::create_dir(dir)?);
        }
        Err(e) => return Err(e.into()),
        Ok(meta) if meta.file_type().is_symlink() => return Err(FilesWithheld::Link),
        Ok(meta) if !meta.is_dir() => return Err(FilesWithheld::NotADirectory),
        Ok(_) => {}
    }
    for (n, entry) in std::fs::read_dir(dir)?.enumerate() {
        if n >= MAX_FILES_ENTRIES {
            return Err(FilesWithheld::TooMany);
        }
        let entry = entry?;
        let kind = entry.file_type()?;
        let what = match (kind.is_file(), kind.is_dir(), kind.is_symlink()) {
            (true, _, _) => continue,
            (_, true, _) => "a directory",
            (_, _, true) => "a link",
            _ => "neither a file nor a directory",
        };
        let name = yep_store::text::escape(&entry.file_name().to_string_lossy()).into_owned();
        return Err(FilesWithheld::Holds(name, what));
    }
    Ok(())
}
