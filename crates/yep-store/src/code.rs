//! The code a workspace's MCP server runs from inside the workspace, and a hash that pins it:
//! approving `python3 tools/srv.py` approves `tools/srv.py` as it is, so a `git pull` that
//! changes it asks again before it runs.
//!
//! What is pinned is what the command line names inside the workspace: the command when it
//! is a path (or the workspace's `bin/<command>`, which the host runs first), each argument
//! that names a file, each argument that names a package directory (one holding a
//! [`PACKAGE_MARKERS`] file), and the module `python -m <module>` runs. The workspace itself
//! (`.`) is never pinned whole: it is most often the directory a server serves.
//!
//! Nothing is followed out of the workspace: a link is pinned by where it resolves, and its
//! target's bytes only when that is inside the workspace. Reads are capped
//! ([`MAX_CODE_FILES`], [`MAX_CODE_BYTES`]); a device or a FIFO is refused, never read.

use crate::manifest::McpServer;
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};

/// The most files one server's pinned code may hold.
pub const MAX_CODE_FILES: usize = 4096;

/// The most bytes one server's pinned code may hold.
pub const MAX_CODE_BYTES: u64 = 32 * 1024 * 1024;

/// A directory holding one of these is a package: named by an argument, it is pinned whole.
pub const PACKAGE_MARKERS: [&str; 14] = [
    "package.json",
    "index.js",
    "index.mjs",
    "index.cjs",
    "index.ts",
    "pyproject.toml",
    "setup.py",
    "__init__.py",
    "__main__.py",
    "go.mod",
    "Cargo.toml",
    "deno.json",
    "deno.jsonc",
    "main.go",
];

/// Directories left out of a pinned package: what a clone does not carry and tools rewrite
/// on their own (a cache of compiled bytecode would otherwise unpin it at every run).
pub const SKIPPED_DIRS: [&str; 8] = [
    ".git",
    "__pycache__",
    "node_modules",
    ".venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
];

/// The code a workspace's server runs from the workspace, pinned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceCode {
    /// What is pinned, relative to the workspace as the command line names it, sorted; a
    /// directory ends in `/`. Empty when it names nothing in the workspace.
    pub paths: Vec<String>,
    /// `sha256:<hex>` of their names, kinds, link resolutions and bytes; none when `paths` is
    /// empty.
    pub hash: Option<String>,
}

/// Why the code a server runs from the workspace could not be pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    #[error(
        "`{}` holds more than {MAX_CODE_FILES} files to pin",
        crate::text::escape(path)
    )]
    TooManyFiles { path: String },
    #[error(
        "`{}` holds more than {MAX_CODE_BYTES} bytes to pin",
        crate::text::escape(path)
    )]
    TooLarge { path: String },
    #[error(
        "`{}` is neither a file, a directory nor a link",
        crate::text::escape(path)
    )]
    NotAFile { path: String },
    /// The I/O error's text: kept as text so the outcome compares and clones.
    #[error("failed to read `{}`: {message}", crate::text::escape(path))]
    Read { path: String, message: String },
}

/// The code `server` runs from `workspace` (already canonical), pinned.
pub fn workspace_code(server: &McpServer, workspace: &Path) -> Result<WorkspaceCode, CodeError> {
    let mut named: Vec<(String, PathBuf)> = Vec::new();
    for path in named_paths(server, workspace) {
        let rel = relative(&path, workspace);
        if !named.iter().any(|(r, _)| *r == rel) {
            named.push((rel, path));
        }
    }
    named.sort();
    if named.is_empty() {
        return Ok(WorkspaceCode {
            paths: Vec::new(),
            hash: None,
        });
    }
    let mut pin = Pinning {
        hasher: Sha256::new(),
        files: 0,
        bytes: 0,
    };
    let mut paths = Vec::new();
    for (rel, path) in &named {
        pin.hasher.update(b"named\0");
        pin.hasher.update(rel.as_bytes());
        pin.hasher.update([0u8]);
        let is_dir = pin.named(rel, path, workspace)?;
        paths.push(if is_dir {
            format!("{rel}/")
        } else {
            rel.clone()
        });
    }
    Ok(WorkspaceCode {
        paths,
        hash: Some(format!(
            "sha256:{}",
            crate::hash::hex(&pin.hasher.finalize())
        )),
    })
}

/// The paths inside `workspace` that `server`'s command line names as code.
fn named_paths(server: &McpServer, workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Some(command) = server.command.as_deref().filter(|c| !c.is_empty()) else {
        return out;
    };
    // The command: a path, or a bare name the host looks up in the workspace's `bin/` first.
    let program = if command.contains('/') {
        inside(workspace, command).filter(|p| exists(p))
    } else {
        inside(workspace, &format!("bin/{command}")).filter(|p| p.is_file())
    };
    out.extend(program);
    let mut args = server.args.iter().peekable();
    while let Some(arg) = args.next() {
        if arg == "-m" {
            // `python -m pkg.mod`: the top package (or module) it imports first.
            if let Some(module) = args.next() {
                let top = module.split('.').next().unwrap_or_default();
                if !top.is_empty() && !top.contains('/') {
                    let found = inside(workspace, top)
                        .filter(|p| p.is_dir())
                        .or_else(|| inside(workspace, &format!("{top}.py")));
                    out.extend(found.filter(|p| exists(p)));
                }
            }
            continue;
        }
        if arg.starts_with('-') || arg.is_empty() {
            continue;
        }
        let Some(path) = inside(workspace, arg) else {
            continue;
        };
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                if PACKAGE_MARKERS
                    .iter()
                    .any(|m| std::fs::symlink_metadata(path.join(m)).is_ok())
                {
                    out.push(path);
                }
            }
            Ok(_) => out.push(path),
            Err(_) => {}
        }
    }
    out
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// `text` (relative to `workspace`, or absolute) as a path strictly inside `workspace`,
/// lexically: `..` is resolved against the path before it, never the file system; the
/// workspace itself is not inside it.
fn inside(workspace: &Path, text: &str) -> Option<PathBuf> {
    if text.contains('\0') {
        return None;
    }
    let joined = workspace.join(text);
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    (out.starts_with(workspace) && out != workspace).then_some(out)
}

/// `path` relative to `workspace` (which it is inside), `/`-joined.
fn relative(path: &Path, workspace: &Path) -> String {
    path.strip_prefix(workspace)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// A hash being made, and what it has read so far.
struct Pinning {
    hasher: Sha256,
    files: usize,
    bytes: u64,
}

impl Pinning {
    /// Pin `path` (named `rel`), following a link only to where it resolves inside
    /// `workspace`. Whether what it pinned is a directory.
    fn named(&mut self, rel: &str, path: &Path, workspace: &Path) -> Result<bool, CodeError> {
        let real = match path.canonicalize() {
            Ok(real) => real,
            Err(e) => {
                // A dangling link is pinned by its target text; anything else is an error.
                let link = std::fs::read_link(path).map_err(|_| read_error(rel, &e))?;
                self.hasher.update(b"dangling\0");
                self.hasher.update(link.to_string_lossy().as_bytes());
                self.hasher.update([0u8]);
                return Ok(false);
            }
        };
        if real != path {
            // Where it resolves is part of what was approved.
            self.hasher.update(b"resolves\0");
            self.hasher.update(real.to_string_lossy().as_bytes());
            self.hasher.update([0u8]);
        }
        if !real.starts_with(workspace) {
            // Outside the workspace: its place is pinned, its bytes are not read.
            return Ok(false);
        }
        let meta = std::fs::metadata(&real).map_err(|e| read_error(rel, &e))?;
        if meta.is_dir() {
            self.dir(rel, &real, rel)?;
            Ok(true)
        } else if meta.is_file() {
            self.file(rel, &real, rel)?;
            Ok(false)
        } else {
            Err(CodeError::NotAFile { path: rel.into() })
        }
    }

    /// Every file and link under `dir` (named `rel`), in name order, links not followed,
    /// [`SKIPPED_DIRS`] left out. `named` is what the command line named, for errors.
    fn dir(&mut self, rel: &str, dir: &Path, named: &str) -> Result<(), CodeError> {
        let mut entries: Vec<(Vec<u8>, std::fs::DirEntry)> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| read_error(rel, &e))? {
            let entry = entry.map_err(|e| read_error(rel, &e))?;
            if entries.len() + self.files >= MAX_CODE_FILES {
                return Err(CodeError::TooManyFiles { path: named.into() });
            }
            entries.push((raw(&entry.file_name()).to_vec(), entry));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, entry) in entries {
            let child = format!("{rel}/{}", String::from_utf8_lossy(&name));
            let kind = entry.file_type().map_err(|e| read_error(&child, &e))?;
            self.hasher.update(b"entry\0");
            self.hasher.update(&name);
            self.hasher.update([0u8]);
            if kind.is_dir() {
                if SKIPPED_DIRS.iter().any(|s| s.as_bytes() == name.as_slice()) {
                    continue;
                }
                self.hasher.update(b"dir\0");
                self.dir(&child, &entry.path(), named)?;
                self.hasher.update(b"end\0");
            } else if kind.is_symlink() {
                let target =
                    std::fs::read_link(entry.path()).map_err(|e| read_error(&child, &e))?;
                self.hasher.update(b"link\0");
                self.hasher.update(raw(target.as_os_str()));
                self.hasher.update([0u8]);
            } else if kind.is_file() {
                self.file(&child, &entry.path(), named)?;
            } else {
                // A FIFO, socket or device in a package is pinned by its kind alone.
                self.hasher.update(b"special\0");
            }
        }
        Ok(())
    }

    /// The bytes of regular file `path` (named `rel`), opened without following a link and
    /// without blocking on a FIFO, read no further than the cap.
    fn file(&mut self, rel: &str, path: &Path, named: &str) -> Result<(), CodeError> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        self.files += 1;
        if self.files > MAX_CODE_FILES {
            return Err(CodeError::TooManyFiles { path: named.into() });
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| read_error(rel, &e))?;
        let meta = file.metadata().map_err(|e| read_error(rel, &e))?;
        if !meta.is_file() {
            return Err(CodeError::NotAFile { path: rel.into() });
        }
        let room = MAX_CODE_BYTES - self.bytes;
        let mut bytes = Vec::new();
        file.take(room + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| read_error(rel, &e))?;
        if bytes.len() as u64 > room {
            return Err(CodeError::TooLarge { path: named.into() });
        }
        self.bytes += bytes.len() as u64;
        self.hasher.update(b"file\0");
        self.hasher.update((bytes.len() as u64).to_le_bytes());
        self.hasher.update(&bytes);
        Ok(())
    }
}

fn read_error(path: &str, error: &std::io::Error) -> CodeError {
    CodeError::Read {
        path: path.into(),
        message: error.to_string(),
    }
}

/// A name's bytes as the file system holds them.
fn raw(name: &std::ffi::OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stdio(command: &str, args: &[&str]) -> McpServer {
        McpServer {
            transport: "stdio".into(),
            command: Some(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
        }
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        (tmp, ws)
    }

    #[test]
    fn the_script_the_package_and_the_module_named_are_pinned_and_their_edits_are_seen() {
        let (_tmp, ws) = workspace();
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        std::fs::write(ws.join("tools/srv.py"), "print('a')").unwrap();
        std::fs::create_dir_all(ws.join("pkg/__pycache__")).unwrap();
        std::fs::write(ws.join("pkg/__init__.py"), "").unwrap();
        std::fs::write(ws.join("pkg/server.py"), "x = 1").unwrap();
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        std::fs::write(ws.join("docs/a.md"), "# a").unwrap();
        let script = stdio("python3", &["./tools/srv.py", "--port", "1", "docs", "."]);
        let pinned = workspace_code(&script, &ws).unwrap();
        // A data directory and the workspace itself are not code.
        assert_eq!(pinned.paths, ["tools/srv.py"]);
        std::fs::write(ws.join("docs/a.md"), "# b").unwrap();
        assert_eq!(workspace_code(&script, &ws).unwrap(), pinned);
        std::fs::write(ws.join("tools/srv.py"), "print('b')").unwrap();
        assert_ne!(workspace_code(&script, &ws).unwrap().hash, pinned.hash);

        let package = stdio("python3", &["-m", "pkg.server"]);
        let pinned = workspace_code(&package, &ws).unwrap();
        assert_eq!(pinned.paths, ["pkg/"]);
        // Bytecode caches come and go; a module beside the one named is code.
        std::fs::write(ws.join("pkg/__pycache__/server.pyc"), "junk").unwrap();
        assert_eq!(workspace_code(&package, &ws).unwrap(), pinned);
        std::fs::write(ws.join("pkg/util.py"), "y = 2").unwrap();
        assert_ne!(workspace_code(&package, &ws).unwrap().hash, pinned.hash);
        let node = stdio("node", &["pkg"]);
        assert_eq!(workspace_code(&node, &ws).unwrap().paths, ["pkg/"]);

        // A command that is a path, or the workspace's `bin/` one the host runs first.
        std::fs::create_dir_all(ws.join("bin")).unwrap();
        std::fs::write(ws.join("bin/python3"), "#!/bin/sh").unwrap();
        assert_eq!(
            workspace_code(&stdio("python3", &[]), &ws).unwrap().paths,
            ["bin/python3"]
        );
        assert_eq!(
            workspace_code(&stdio("./bin/python3", &[]), &ws)
                .unwrap()
                .paths,
            ["bin/python3"]
        );
        // Nothing of the workspace named: nothing pinned.
        let none = workspace_code(&stdio("npx", &["-y", "@scope/server", "."]), &ws).unwrap();
        assert_eq!(none.paths, Vec::<String>::new());
        assert_eq!(none.hash, None);
        // `..` climbing out is not the workspace's.
        std::fs::write(ws.parent().unwrap().join("elsewhere.py"), "x").unwrap();
        let out = workspace_code(&stdio("python", &["../elsewhere.py"]), &ws).unwrap();
        assert_eq!(out.paths, Vec::<String>::new());
    }

    #[test]
    fn a_link_out_of_the_workspace_is_pinned_by_where_it_points_never_read() {
        let (tmp, ws) = workspace();
        let outside = tmp.path().join("outside.py");
        std::fs::write(&outside, "print('outside')").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("srv.py")).unwrap();
        let server = stdio("python3", &["srv.py"]);
        let pinned = workspace_code(&server, &ws).unwrap();
        assert_eq!(pinned.paths, ["srv.py"]);
        // Its bytes are not the workspace's: not read, not pinned.
        std::fs::write(&outside, "print('changed')").unwrap();
        assert_eq!(workspace_code(&server, &ws).unwrap(), pinned);
        // Pointed elsewhere: another pin.
        let other = tmp.path().join("other.py");
        std::fs::write(&other, "print('outside')").unwrap();
        std::fs::remove_file(ws.join("srv.py")).unwrap();
        std::os::unix::fs::symlink(&other, ws.join("srv.py")).unwrap();
        assert_ne!(workspace_code(&server, &ws).unwrap().hash, pinned.hash);
        // A link inside the workspace is followed to its bytes.
        std::fs::write(ws.join("real.py"), "a").unwrap();
        std::fs::remove_file(ws.join("srv.py")).unwrap();
        std::os::unix::fs::symlink("real.py", ws.join("srv.py")).unwrap();
        let inner = workspace_code(&server, &ws).unwrap();
        std::fs::write(ws.join("real.py"), "b").unwrap();
        assert_ne!(workspace_code(&server, &ws).unwrap().hash, inner.hash);
    }

    #[test]
    fn a_package_past_the_caps_or_a_fifo_is_refused_not_read() {
        let (_tmp, ws) = workspace();
        std::fs::create_dir_all(ws.join("big")).unwrap();
        std::fs::write(ws.join("big/package.json"), "{}").unwrap();
        let file = std::fs::File::create(ws.join("big/blob.js")).unwrap();
        file.set_len(MAX_CODE_BYTES + 1).unwrap();
        let err = workspace_code(&stdio("node", &["big"]), &ws).unwrap_err();
        assert_eq!(err, CodeError::TooLarge { path: "big".into() });
        assert!(
            err.to_string().contains("more than 33554432 bytes"),
            "{err}"
        );

        std::fs::create_dir_all(ws.join("many")).unwrap();
        std::fs::write(ws.join("many/__init__.py"), "").unwrap();
        for i in 0..MAX_CODE_FILES {
            std::fs::write(ws.join(format!("many/m{i}.py")), "").unwrap();
        }
        let err = workspace_code(&stdio("python3", &["-m", "many"]), &ws).unwrap_err();
        assert_eq!(
            err,
            CodeError::TooManyFiles {
                path: "many".into()
            }
        );

        let fifo = ws.join("srv.py");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo only creates the named FIFO.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = workspace_code(&stdio("python3", &["srv.py"]), &ws).unwrap_err();
        assert_eq!(
            err,
            CodeError::NotAFile {
                path: "srv.py".into()
            }
        );
    }
}
