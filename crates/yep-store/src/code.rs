//! The code a workspace's MCP server, or its `.claude` project's hooks, run from inside the
//! workspace, and a hash that pins it: approving `python3 tools/srv.py` approves
//! `tools/srv.py`, and the `tools/helper.py` it imports, as they are, so a `git pull` that
//! changes either asks again before it runs.
//!
//! What is pinned is what the command line names inside the workspace: the command when it
//! is a path (or the workspace's `bin/<command>`, which the host runs first), each argument
//! that names a file, each argument that names a package directory (one holding a
//! [`PACKAGE_MARKERS`] file), and the module `python -m <module>` runs; for a hook's shell
//! command line, each of its words that does. A script among them (the command, a
//! [`CODE_EXTENSIONS`] file, an executable) brings its directory, pinned whole, recursively:
//! what it imports by a relative name lives there, and a directory holding a script is code.
//! The workspace itself (`.`) is never pinned whole: it is most often the directory a server
//! serves, and writes to. For a script at its top, its top's code files and importable
//! packages ([`TOP_PACKAGE_MARKERS`]) are pinned instead.
//!
//! Nothing is followed out of the workspace: a link is pinned by where it resolves, and its
//! target's bytes only when that is inside the workspace. Reads are capped
//! ([`MAX_CODE_FILES`], [`MAX_CODE_BYTES`]); a device or a FIFO is refused, never read.

use crate::claude::hooks::CommandHook;
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

/// A file named so is code run as a script (an executable is too): its directory holds what
/// it may load, pinned with it. Python's extension modules and sourceless bytecode are
/// imported by name as its sources are.
pub const CODE_EXTENSIONS: [&str; 25] = [
    "py", "pyw", "pyc", "so", "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "node", "wasm",
    "sh", "bash", "zsh", "rb", "pl", "pm", "php", "lua", "go", "jl", "r",
];

/// A directory at the top of the workspace holding one of these is a package a script beside
/// it imports by its name (`import pkg`, `require('./pkg')`): pinned whole with the script.
pub const TOP_PACKAGE_MARKERS: [&str; 5] = [
    "__init__.py",
    "index.js",
    "index.mjs",
    "index.cjs",
    "index.ts",
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
    let mut named = Vec::new();
    if let Some(command) = server.command.as_deref().filter(|c| !c.is_empty()) {
        // The command: a path, or a bare name the host looks up in the workspace's `bin/` first.
        program(&mut named, workspace, command, "bin");
        arguments(
            &mut named,
            workspace,
            server.args.iter().map(String::as_str),
        );
    }
    pin(named, workspace)
}

/// The code the command hooks `hooks` of the workspace's `.claude` project run from
/// `workspace` (already canonical), pinned: every word of a hook's command line that names a
/// file or a package in the workspace (`sh tools/g.sh`, `"$CLAUDE_PROJECT_DIR"/tools/g.sh`,
/// a bare name found in `.claude/bin/`, which a hook's `PATH` holds first), with what a
/// script among them may load (`pin`).
pub fn hooks_code(hooks: &[CommandHook], workspace: &Path) -> Result<WorkspaceCode, CodeError> {
    let root = workspace.join(".claude").to_string_lossy().into_owned();
    let vars = [
        (
            "CLAUDE_PROJECT_DIR",
            workspace.to_string_lossy().into_owned(),
        ),
        ("CLAUDE_PLUGIN_ROOT", root.clone()),
        ("PLUGIN_ROOT", root),
    ];
    let mut named = Vec::new();
    for hook in hooks {
        if hook.args.is_empty() {
            let words = shell_words(&hook.command, &vars);
            for word in words.iter().filter(|w| !w.contains('/')) {
                let bin = inside(workspace, &format!(".claude/bin/{word}")).filter(|p| exists(p));
                named.extend(bin.map(|path| Named { path, script: true }));
            }
            arguments(&mut named, workspace, words.iter().map(String::as_str));
        } else {
            let fill = |s: &str| {
                let mut s = s.to_string();
                for (name, value) in &vars {
                    s = s.replace(&format!("${{{name}}}"), value);
                }
                s
            };
            program(&mut named, workspace, &fill(&hook.command), ".claude/bin");
            let args: Vec<String> = hook.args.iter().map(|a| fill(a)).collect();
            arguments(&mut named, workspace, args.iter().map(String::as_str));
        }
    }
    pin(named, workspace)
}

/// A path a command line names inside the workspace, and whether it is a script: code run
/// as a program, whose directory holds what it may load.
struct Named {
    path: PathBuf,
    script: bool,
}

/// `command`, run as a program: a path, or a bare name looked up in `bin` of the workspace.
fn program(out: &mut Vec<Named>, workspace: &Path, command: &str, bin: &str) {
    let path = if command.contains('/') {
        inside(workspace, command).filter(|p| exists(p))
    } else {
        inside(workspace, &format!("{bin}/{command}")).filter(|p| p.is_file())
    };
    out.extend(path.map(|path| Named { path, script: true }));
}

/// What `args` name inside the workspace: each file (a script when it looks like code), each
/// package directory, the module `-m <module>` runs, and the file or package of an option's
/// `--opt=<path>`.
fn arguments<'a>(out: &mut Vec<Named>, workspace: &Path, args: impl Iterator<Item = &'a str>) {
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        if arg == "-m" {
            // `python -m pkg.mod`: the top package (or module) it imports first.
            if let Some(module) = args.next() {
                let top = module.split('.').next().unwrap_or_default();
                if !top.is_empty() && !top.contains('/') {
                    let found = inside(workspace, top)
                        .filter(|p| p.is_dir())
                        .or_else(|| inside(workspace, &format!("{top}.py")));
                    out.extend(
                        found
                            .filter(|p| exists(p))
                            .map(|path| Named { path, script: true }),
                    );
                }
            }
            continue;
        }
        let arg = match arg.strip_prefix('-') {
            // `--require=./hook.js`: the value may name code too.
            Some(option) => match option.split_once('=') {
                Some((_, value)) => value,
                None => continue,
            },
            None => arg,
        };
        if arg.is_empty() {
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
                    out.push(Named {
                        path,
                        script: false,
                    });
                }
            }
            Ok(_) => {
                let script = is_script(&path);
                out.push(Named { path, script });
            }
            Err(_) => {}
        }
    }
}

/// Whether the file at `path` looks like code run as a script: a [`CODE_EXTENSIONS`] name,
/// or an executable.
fn is_script(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    code_extension(path)
        || std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn code_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| CODE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// `named` with what its scripts may load, pinned. A script's directory is pinned whole (its
/// sibling modules, and theirs), where it is named and where it resolves to: but the
/// workspace itself never is (it is most often what a server serves, and where it writes),
/// so for a script at its top, the top's code files ([`CODE_EXTENSIONS`]) and importable
/// packages ([`TOP_PACKAGE_MARKERS`]) are pinned instead.
fn pin(named: Vec<Named>, workspace: &Path) -> Result<WorkspaceCode, CodeError> {
    let mut all: Vec<PathBuf> = Vec::new();
    for Named { path, script } in named {
        if script {
            let real = path.canonicalize().ok();
            let dirs = [
                path.parent().map(Path::to_path_buf),
                real.as_deref()
                    .and_then(Path::parent)
                    .map(Path::to_path_buf),
            ];
            for dir in dirs.into_iter().flatten() {
                if dir == workspace {
                    top_code(workspace, &mut all)?;
                } else if dir.starts_with(workspace) {
                    all.push(dir);
                }
            }
        }
        all.push(path);
    }
    let mut named: Vec<(String, PathBuf)> = Vec::new();
    for path in all {
        let rel = relative(&path, workspace);
        if !named.iter().any(|(r, _)| *r == rel) {
            named.push((rel, path));
        }
    }
    // A file or directory in a directory pinned whole needs no pin of its own; a link there is
    // pinned by its text, so one named is kept for where it resolves, and a FIFO named is kept
    // to be refused.
    let whole: Vec<String> = named
        .iter()
        .filter(|(_, p)| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .map(|(r, _)| format!("{r}/"))
        .collect();
    named.retain(|(rel, path)| {
        let covered = whole.iter().any(|dir| {
            rel.strip_prefix(dir.as_str())
                .is_some_and(|rest| !rest.split('/').any(|part| SKIPPED_DIRS.contains(&part)))
        });
        !covered || std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
    });
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

/// The code at the top of `workspace` a script there may load: its files of a
/// [`CODE_EXTENSIONS`] name and its directories holding a [`TOP_PACKAGE_MARKERS`] file.
fn top_code(workspace: &Path, out: &mut Vec<PathBuf>) -> Result<(), CodeError> {
    let unread = |e: std::io::Error| read_error(".", &e);
    let mut found = 0;
    for entry in std::fs::read_dir(workspace).map_err(unread)? {
        let path = entry.map_err(unread)?.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let code = if meta.is_dir() || meta.is_symlink() && path.is_dir() {
            TOP_PACKAGE_MARKERS
                .iter()
                .any(|m| std::fs::symlink_metadata(path.join(m)).is_ok())
        } else {
            code_extension(&path)
        };
        if code {
            found += 1;
            if found > MAX_CODE_FILES {
                return Err(CodeError::TooManyFiles { path: ".".into() });
            }
            out.push(path);
        }
    }
    Ok(())
}

/// The words of shell command line `line` as `sh` would split them, quotes removed and
/// `vars` filled in (`$NAME`, `${NAME}`). A word holding any other expansion (another
/// variable, `$(…)`, a backquote, a glob, `~`) is left out, and so is the target of a
/// redirection (`> log`: written, not run) and a comment.
fn shell_words(line: &str, vars: &[(&str, String)]) -> Vec<String> {
    let mut words = Words::default();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.end(),
            '\n' | ';' | '&' | '|' | '(' | ')' => {
                words.end();
                words.target = false;
            }
            '<' | '>' => {
                // `2>`: the digits name the stream; what follows is written or read, not run.
                if words.word.chars().all(|d| d.is_ascii_digit()) {
                    words.word.clear();
                    words.started = false;
                }
                words.end();
                while chars
                    .next_if(|n| matches!(n, '<' | '>' | '&' | '|'))
                    .is_some()
                {}
                words.target = true;
            }
            '#' if !words.started => while chars.next_if(|n| *n != '\n').is_some() {},
            '\'' => {
                words.started = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    words.word.push(q);
                }
            }
            '"' => {
                words.started = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.next_if(|n| matches!(n, '"' | '\\' | '$' | '`')) {
                            Some(n) => words.word.push(n),
                            None => words.word.push('\\'),
                        },
                        '$' => expand(&mut chars, vars, &mut words),
                        '`' => words.unknown = true,
                        other => words.word.push(other),
                    }
                }
            }
            '\\' => {
                words.started = true;
                words.word.extend(chars.next());
            }
            '$' => {
                words.started = true;
                expand(&mut chars, vars, &mut words);
            }
            '`' | '*' | '?' | '[' => {
                words.started = true;
                words.unknown = true;
            }
            '~' if !words.started => {
                words.started = true;
                words.unknown = true;
            }
            other => {
                words.started = true;
                words.word.push(other);
            }
        }
    }
    words.end();
    words.out
}

/// Words being split: the one under way (`""` is one), whether it holds what cannot be
/// known, and whether it is a redirection's target.
#[derive(Default)]
struct Words {
    out: Vec<String>,
    word: String,
    started: bool,
    unknown: bool,
    target: bool,
}

impl Words {
    fn end(&mut self) {
        if !self.started {
            return;
        }
        let word = std::mem::take(&mut self.word);
        if !self.unknown && !self.target && !word.is_empty() {
            self.out.push(word);
        }
        self.started = false;
        self.unknown = false;
        self.target = false;
    }
}

/// After a `$`: `$NAME` or `${NAME}` of `vars` into `word`; anything else makes it unknown.
fn expand(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    vars: &[(&str, String)],
    words: &mut Words,
) {
    let braced = chars.next_if_eq(&'{').is_some();
    let mut name = String::new();
    while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_') {
        name.push(c);
    }
    if braced && chars.next_if_eq(&'}').is_none() {
        words.unknown = true;
        return;
    }
    match vars.iter().find(|(n, _)| *n == name) {
        Some((_, value)) => words.word.push_str(value),
        None => words.unknown = true,
    }
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
        // The script's directory is its code; a data directory and the workspace are not.
        assert_eq!(pinned.paths, ["tools/"]);
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

        // A command that is a path, or the workspace's `bin/` one the host runs first: with
        // its directory.
        std::fs::create_dir_all(ws.join("bin")).unwrap();
        std::fs::write(ws.join("bin/python3"), "#!/bin/sh").unwrap();
        assert_eq!(
            workspace_code(&stdio("python3", &[]), &ws).unwrap().paths,
            ["bin/"]
        );
        assert_eq!(
            workspace_code(&stdio("./bin/python3", &[]), &ws)
                .unwrap()
                .paths,
            ["bin/"]
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

        // A FIFO named is refused, beside a package or in a directory pinned whole.
        std::fs::remove_dir_all(ws.join("many")).unwrap();
        std::fs::create_dir_all(ws.join("tools")).unwrap();
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
        std::fs::rename(&fifo, ws.join("tools/srv.py")).unwrap();
        let err = workspace_code(&stdio("python3", &["tools/srv.py"]), &ws).unwrap_err();
        assert_eq!(
            err,
            CodeError::NotAFile {
                path: "tools/srv.py".into()
            }
        );
    }

    #[test]
    fn what_a_script_imports_beside_it_is_pinned_with_it_and_at_the_top_only_code() {
        let (_tmp, ws) = workspace();
        std::fs::create_dir_all(ws.join("tools/lib/__pycache__")).unwrap();
        std::fs::write(ws.join("tools/srv.py"), "import helper").unwrap();
        std::fs::write(ws.join("tools/helper.py"), "x = 1").unwrap();
        std::fs::write(ws.join("tools/lib/deep.py"), "y = 1").unwrap();
        let server = stdio("python3", &["tools/srv.py"]);
        let pinned = workspace_code(&server, &ws).unwrap();
        assert_eq!(pinned.paths, ["tools/"]);
        std::fs::write(ws.join("tools/lib/__pycache__/deep.pyc"), "junk").unwrap();
        assert_eq!(workspace_code(&server, &ws).unwrap(), pinned);
        for (file, text) in [
            ("tools/helper.py", "x = 2"),
            ("tools/lib/deep.py", "y = 2"),
            ("tools/shadow.so", "\x7fELF"),
        ] {
            let before = workspace_code(&server, &ws).unwrap();
            std::fs::write(ws.join(file), text).unwrap();
            assert_ne!(
                workspace_code(&server, &ws).unwrap().hash,
                before.hash,
                "{file}"
            );
        }

        // At the top: its code files and importable packages, never what it writes or serves.
        std::fs::write(ws.join("srv.py"), "import helper, pkg").unwrap();
        std::fs::write(ws.join("helper.py"), "x = 1").unwrap();
        std::fs::write(ws.join("runs.log"), "").unwrap();
        std::fs::create_dir_all(ws.join("pkg")).unwrap();
        std::fs::write(ws.join("pkg/__init__.py"), "").unwrap();
        std::fs::create_dir_all(ws.join("data")).unwrap();
        let top = stdio("python3", &["srv.py"]);
        let pinned = workspace_code(&top, &ws).unwrap();
        assert_eq!(pinned.paths, ["helper.py", "pkg/", "srv.py"]);
        std::fs::write(ws.join("runs.log"), "ran").unwrap();
        std::fs::write(ws.join("data/x.csv"), "1").unwrap();
        assert_eq!(workspace_code(&top, &ws).unwrap(), pinned);
        std::fs::write(ws.join("helper.py"), "x = 2").unwrap();
        assert_ne!(workspace_code(&top, &ws).unwrap().hash, pinned.hash);
        // A module planted beside it, which the import would pick first, is another pin.
        let pinned = workspace_code(&top, &ws).unwrap();
        std::fs::write(ws.join("helper.cpython-312-x86_64-linux-gnu.so"), "").unwrap();
        assert_ne!(workspace_code(&top, &ws).unwrap().hash, pinned.hash);
    }

    fn hook(command: &str) -> CommandHook {
        CommandHook {
            event: "PreToolUse".into(),
            matcher: None,
            command: command.into(),
            args: Vec::new(),
            timeout_s: None,
            if_rule: None,
            is_async: false,
        }
    }

    #[test]
    fn a_hooks_command_line_is_split_as_sh_would_and_each_workspace_file_it_names_pinned() {
        let vars = [("CLAUDE_PROJECT_DIR", "/w s".to_string())];
        assert_eq!(
            shell_words(
                r#"sh tools/g.sh; "$CLAUDE_PROJECT_DIR"/a\ b.sh 2>/dev/null >> log.txt"#,
                &vars
            ),
            ["sh", "tools/g.sh", "/w s/a b.sh"]
        );
        assert_eq!(
            shell_words(
                "cat $HOME/x `id` *.sh ~/y '$CLAUDE_PROJECT_DIR' ${CLAUDE_PROJECT_DIR}/z # c.sh",
                &vars
            ),
            ["cat", "$CLAUDE_PROJECT_DIR", "/w s/z"]
        );
        assert_eq!(shell_words("a>b|c<d&&e >&2 f", &vars), ["a", "c", "e", "f"]);

        let (_tmp, ws) = workspace();
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        std::fs::write(ws.join("tools/g.sh"), ". tools/lib.sh").unwrap();
        std::fs::write(ws.join("tools/lib.sh"), "true").unwrap();
        std::fs::create_dir_all(ws.join(".claude/bin")).unwrap();
        std::fs::write(ws.join(".claude/bin/check"), "true").unwrap();
        std::fs::write(ws.join("notes.md"), "a").unwrap();
        let hooks = [
            hook("sh tools/g.sh > tools/out.log"),
            hook(r#"check "$CLAUDE_PROJECT_DIR/notes.md" && echo done"#),
        ];
        let pinned = hooks_code(&hooks, &ws).unwrap();
        assert_eq!(pinned.paths, [".claude/bin/", "notes.md", "tools/"]);
        std::fs::write(ws.join("tools/lib.sh"), "false").unwrap();
        assert_ne!(hooks_code(&hooks, &ws).unwrap().hash, pinned.hash);
        // Exec form: the program in `.claude/bin` or at a path, and its arguments.
        let mut exec = hook("${CLAUDE_PROJECT_DIR}/tools/g.sh");
        exec.args = vec!["--x".into()];
        assert_eq!(hooks_code(&[exec], &ws).unwrap().paths, ["tools/"]);
        // Nothing of the workspace: nothing pinned.
        assert_eq!(hooks_code(&[hook("echo hi")], &ws).unwrap().hash, None);
    }
}
