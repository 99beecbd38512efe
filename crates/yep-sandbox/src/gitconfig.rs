//! The git configuration a sandboxed process sees: a sanitised copy of the user's, passed as
//! `GIT_CONFIG_GLOBAL`.
//!
//! The sandbox keeps the home closed, `~/.gitconfig` with it, and git treats a config file it
//! may not read as fatal ("unknown error occurred while reading the configuration files"), so
//! every server that runs git would fail on a machine with a `~/.gitconfig`. Opening the file
//! itself is no answer: it may hold secrets (a token in a `url` base, `http.extraHeader`, a
//! tool's `[github] token`), name a credential helper that hands out the user's passwords, and
//! include other files the sandbox keeps closed (git fails on those too).
//!
//! So the host writes a copy into the process's private temp dir at each spawn ([`env`](fn@env)):
//! the XDG file (`$XDG_CONFIG_HOME/git/config`, else `~/.config/git/config`) then
//! `~/.gitconfig`, as git reads them, each entry kept only when [`verdict`] allows it. It keeps
//! what tells git who the user is and how to behave; it leaves out every section it does not
//! know, anything that can hold or reach a credential, and every key that names a program for
//! git to run. Included files, `core.excludesFile` and `core.attributesFile` (and the XDG
//! `ignore` and `attributes` files git reads by default) are copied beside it, sanitised
//! likewise, and the entries point at the copies. The parser follows git's own
//! (`config.c`: `git_parse_source`, `get_base_var`, `parse_value`); what git would refuse as a
//! bad line is left out.

use std::path::{Path, PathBuf};

/// The most bytes of one file copied; a bigger one is left out.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The most files copied beside the config (includes, ignore and attributes files).
pub const MAX_FILES: usize = 32;

/// How deep includes are followed (git's own limit).
pub const MAX_INCLUDE_DEPTH: usize = 10;

/// What becomes of one entry ([`verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Copied as written.
    Keep,
    /// Left out.
    Drop,
    /// A file it names (`include.path`, `includeIf.<cond>.path`): copied, sanitised, and the
    /// entry points at the copy.
    Include,
    /// `core.excludesFile`: copied as it is, and the entry points at the copy.
    Excludes,
    /// `core.attributesFile`: likewise.
    Attributes,
}

/// Sections copied (with the keys [`verdict`] leaves out of them): who the user is, and how
/// git behaves. Any other (`credential`, `gpg`, `filter`, `sendemail`, `remote`, a tool's own
/// such as `github`) is left out.
const SECTIONS: &[&str] = &[
    "advice",
    "alias",
    "am",
    "apply",
    "author",
    "blame",
    "branch",
    "checkout",
    "clone",
    "color",
    "column",
    "commit",
    "committer",
    "core",
    "diff",
    "feature",
    "fetch",
    "format",
    "fsck",
    "gc",
    "grep",
    "http",
    "i18n",
    "include",
    "includeif",
    "index",
    "init",
    "interactive",
    "log",
    "merge",
    "notes",
    "pack",
    "protocol",
    "pull",
    "push",
    "rebase",
    "rerere",
    "safe",
    "stash",
    "status",
    "submodule",
    "tag",
    "transfer",
    "url",
    "user",
    "versionsort",
    "worktree",
];

/// Keys of copied sections that name a program for git to run, or a file outside what the
/// sandbox reads: left out.
const PROGRAMS: &[(&str, &str)] = &[
    ("core", "sshcommand"),
    ("core", "fsmonitor"),
    ("core", "hookspath"),
    ("core", "editor"),
    ("core", "pager"),
    ("core", "askpass"),
    ("core", "gitproxy"),
    ("diff", "external"),
    ("diff", "tool"),
    ("diff", "guitool"),
    ("merge", "tool"),
    ("merge", "guitool"),
    ("init", "templatedir"),
    ("commit", "template"),
    ("interactive", "difffilter"),
];

/// `http` keys copied: how it connects, never who it is (`extraHeader`, `cookieFile`,
/// `sslKey`, `sslCert`, `proxy` may each carry a credential).
const HTTP_KEPT: &[&str] = &[
    "sslverify",
    "sslcainfo",
    "sslcapath",
    "sslbackend",
    "sslversion",
    "version",
    "postbuffer",
    "lowspeedlimit",
    "lowspeedtime",
    "followredirects",
    "maxrequests",
];

/// Whether the entry `key` (lowercase) of section `section` (lowercase) and subsection `sub`,
/// with `value` (`None` for a bare key), is copied.
pub fn verdict(section: &str, sub: Option<&[u8]>, key: &str, value: Option<&[u8]>) -> Verdict {
    if !SECTIONS.contains(&section) || PROGRAMS.contains(&(section, key)) {
        return Verdict::Drop;
    }
    match (section, sub, key) {
        ("include", None, "path") | ("includeif", Some(_), "path") if value.is_some() => {
            Verdict::Include
        }
        ("include" | "includeif", _, _) => Verdict::Drop,
        ("core", _, "excludesfile") if value.is_some() => Verdict::Excludes,
        ("core", _, "attributesfile") if value.is_some() => Verdict::Attributes,
        ("core", _, "excludesfile" | "attributesfile") => Verdict::Drop,
        // Drivers (`[diff "lfs"] textconv`, `[merge "x"] driver`) run programs; per-URL http
        // settings carry headers and cookies.
        ("diff" | "merge" | "http", Some(_), _) => Verdict::Drop,
        ("http", None, k) if !HTTP_KEPT.contains(&k) => Verdict::Drop,
        // A shell alias runs a program.
        ("alias", _, _) if value.is_none_or(|v| v.trim_ascii_start().starts_with(b"!")) => {
            Verdict::Drop
        }
        // A base with a user or a token in it (`https://ada:ghp_…@github.com/`).
        ("url", None, _) => Verdict::Drop,
        ("url", Some(base), _) if has_userinfo(base) || value.is_some_and(has_userinfo) => {
            Verdict::Drop
        }
        _ => Verdict::Keep,
    }
}

/// Whether `url` names a user (and maybe a password) before its host: `scheme://user@host`.
/// The scp form (`git@github.com:x`) names the ssh user only, no secret.
fn has_userinfo(url: &[u8]) -> bool {
    let Some(at) = url.windows(3).position(|w| w == b"://") else {
        return false;
    };
    let rest = &url[at + 3..];
    let authority = rest.split(|&b| b == b'/').next().unwrap_or(rest);
    authority.contains(&b'@')
}

/// One piece of a config file as git parses it.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    /// `[section]`, `[section "sub"]` or `[section.sub]`: its text as written.
    Header {
        raw: Vec<u8>,
        section: String,
        sub: Option<Vec<u8>>,
    },
    /// `key = value` or a bare `key`: its text as written (continuation lines included, no
    /// final newline), its name in lowercase, and its value as git reads it.
    Entry {
        raw: Vec<u8>,
        key: String,
        value: Option<Vec<u8>>,
    },
    /// What git would refuse: left out, and so are the entries after a bad header, up to the
    /// next good one.
    Bad { header: bool },
}

/// `text` split into [`Item`]s, as git reads it.
fn parse(text: &[u8]) -> Vec<Item> {
    let text: Vec<u8> = {
        let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
        // git reads `\r\n` as `\n`.
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
                i += 1;
                continue;
            }
            out.push(text[i]);
            i += 1;
        }
        out
    };
    let mut items = Vec::new();
    let mut i = 0;
    let to_eol = |i: usize| {
        text[i..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |n| i + n)
    };
    while i < text.len() {
        let c = text[i];
        if c == b'\n' || c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' || c == b';' {
            i = to_eol(i);
        } else if c == b'[' {
            match header(&text, i) {
                Some((item, end)) => {
                    items.push(item);
                    i = end;
                }
                None => {
                    items.push(Item::Bad { header: true });
                    i = to_eol(i);
                }
            }
        } else if c.is_ascii_alphabetic() {
            match entry(&text, i) {
                Some((item, end)) => {
                    items.push(item);
                    i = end;
                }
                None => {
                    items.push(Item::Bad { header: false });
                    i = to_eol(i);
                }
            }
        } else {
            items.push(Item::Bad { header: false });
            i = to_eol(i);
        }
    }
    items
}

/// The header that starts at `text[start]` (`[`), and where it ends.
fn header(text: &[u8], start: usize) -> Option<(Item, usize)> {
    let mut i = start + 1;
    let mut name = String::new();
    while let Some(&c) = text.get(i) {
        if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' {
            name.push(c.to_ascii_lowercase() as char);
            i += 1;
        } else {
            break;
        }
    }
    if name.is_empty() || name.starts_with('.') || name.ends_with('.') {
        return None;
    }
    let (section, sub) = match text.get(i)? {
        b']' => {
            i += 1;
            match name.split_once('.') {
                // The old form: `[section.sub]`, its subsection in lowercase.
                Some((section, sub)) => (section.to_string(), Some(sub.as_bytes().to_vec())),
                None => (name, None),
            }
        }
        c if c.is_ascii_whitespace() && *c != b'\n' && !name.contains('.') => {
            while text.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
                i += 1;
            }
            if text.get(i) != Some(&b'"') {
                return None;
            }
            i += 1;
            let mut sub = Vec::new();
            loop {
                match *text.get(i)? {
                    b'\n' => return None,
                    b'"' => break,
                    b'\\' => {
                        let next = *text.get(i + 1)?;
                        if next == b'\n' {
                            return None;
                        }
                        sub.push(next);
                        i += 2;
                    }
                    c => {
                        sub.push(c);
                        i += 1;
                    }
                }
            }
            i += 1;
            if text.get(i) != Some(&b']') {
                return None;
            }
            i += 1;
            (name, Some(sub))
        }
        _ => return None,
    };
    let raw = text[start..i].to_vec();
    Some((Item::Header { raw, section, sub }, i))
}

/// The entry that starts at `text[start]` (a letter), and where it ends (past its newline).
fn entry(text: &[u8], start: usize) -> Option<(Item, usize)> {
    let mut i = start;
    let mut key = String::new();
    while let Some(&c) = text.get(i) {
        if c.is_ascii_alphanumeric() || c == b'-' {
            key.push(c.to_ascii_lowercase() as char);
            i += 1;
        } else {
            break;
        }
    }
    while text.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
        i += 1;
    }
    match text.get(i) {
        None | Some(b'\n') => {
            let raw = text[start..i].to_vec();
            let end = (i + 1).min(text.len());
            Some((
                Item::Entry {
                    raw,
                    key,
                    value: None,
                },
                end,
            ))
        }
        Some(b'=') => {
            let (value, eol) = value(text, i + 1)?;
            let raw = text[start..eol].to_vec();
            let end = (eol + 1).min(text.len());
            Some((
                Item::Entry {
                    raw,
                    key,
                    value: Some(value),
                },
                end,
            ))
        }
        Some(_) => None,
    }
}

/// The value that starts at `text[start]` (past the `=`), as git's `parse_value` reads it, and
/// where its last line ends (its newline, or the end of the text). `None` for what git refuses:
/// an unknown escape, or a quote still open at the end of the line.
fn value(text: &[u8], start: usize) -> Option<(Vec<u8>, usize)> {
    let (mut quote, mut comment, mut space) = (false, false, 0usize);
    let mut out = Vec::new();
    let mut i = start;
    loop {
        let Some(&c) = text.get(i) else {
            return (!quote).then_some((out, i));
        };
        i += 1;
        if c == b'\n' {
            return (!quote).then_some((out, i - 1));
        }
        if comment {
            continue;
        }
        if c.is_ascii_whitespace() && !quote {
            if !out.is_empty() {
                space += 1;
            }
            continue;
        }
        if !quote && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        out.extend(std::iter::repeat_n(b' ', space));
        space = 0;
        match c {
            b'\\' => {
                let escaped = match *text.get(i)? {
                    b'\n' => {
                        i += 1;
                        continue;
                    }
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'n' => b'\n',
                    b'\\' => b'\\',
                    b'"' => b'"',
                    _ => return None,
                };
                i += 1;
                out.push(escaped);
            }
            b'"' => quote = !quote,
            c => out.push(c),
        }
    }
}

/// An entry as git reads it: section, subsection, key (lowercase) and value.
pub type Entry = (String, Option<Vec<u8>>, String, Option<Vec<u8>>);

/// Every entry of `text` git would read (the fuzz target's check of what [`sanitise`] wrote).
pub fn entries(text: &[u8]) -> Vec<Entry> {
    let mut current: Option<(String, Option<Vec<u8>>)> = None;
    let mut out = Vec::new();
    for item in parse(text) {
        match item {
            Item::Header { section, sub, .. } => current = Some((section, sub)),
            Item::Bad { header: true } => current = None,
            Item::Bad { header: false } => {}
            Item::Entry { key, value, .. } => {
                if let Some((section, sub)) = &current {
                    out.push((section.clone(), sub.clone(), key, value));
                }
            }
        }
    }
    out
}

/// `value` as a quoted config value.
fn quoted(value: &[u8]) -> Vec<u8> {
    let mut out = vec![b'"'];
    for &b in value {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            b => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// `text` (a config file whose directory is `dir`) with only what [`verdict`] keeps. A file it
/// names is handed to `copy` with the verdict, its path resolved (`~/` as the home,
/// relative as from `dir`); `copy` answers the path to point at instead, or `None` to leave
/// the entry out. An `includeIf "gitdir:./…"` is made absolute (its `./` is the directory of
/// the file it was written in, which the copy is not in).
pub fn sanitise(
    text: &[u8],
    dir: &Path,
    home: Option<&Path>,
    copy: &mut dyn FnMut(Verdict, PathBuf) -> Option<PathBuf>,
) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    // The header entries are under (`None` after a bad one: they are left out), and the one
    // last written.
    let mut current: Option<(Vec<u8>, String, Option<Vec<u8>>)> = None;
    let mut written: Option<Vec<u8>> = None;
    for item in parse(text) {
        let (raw, key, value) = match item {
            Item::Header { raw, section, sub } => {
                current = header_for(raw, section, sub, dir);
                continue;
            }
            Item::Bad { header } => {
                if header {
                    current = None;
                }
                continue;
            }
            Item::Entry { raw, key, value } => (raw, key, value),
        };
        let Some((header, section, sub)) = &current else {
            continue;
        };
        let line = match verdict(section, sub.as_deref(), &key, value.as_deref()) {
            // Trailing blanks mean nothing to git (a quote open there is an error, and so is
            // an escaped blank), and a lone `\r` would read as a line end once copied.
            Verdict::Keep => raw.trim_ascii_end().to_vec(),
            Verdict::Drop => continue,
            kind => {
                let named = Path::new(std::ffi::OsStr::from_bytes(value.as_deref().unwrap_or(b"")));
                let resolved = match (named.strip_prefix("~"), home) {
                    (Ok(rest), Some(home)) if named.as_os_str().as_bytes().starts_with(b"~/") => {
                        home.join(rest)
                    }
                    (Ok(_), _) => continue,
                    (Err(_), _) if named.is_absolute() => named.to_path_buf(),
                    // An excludes or attributes file relative to where git runs: not followed.
                    (Err(_), _) if kind != Verdict::Include => continue,
                    (Err(_), _) => dir.join(named),
                };
                let Some(to) = copy(kind, resolved) else {
                    continue;
                };
                let mut line = key.clone().into_bytes();
                line.extend_from_slice(b" = ");
                line.extend(quoted(to.as_os_str().as_bytes()));
                line
            }
        };
        if written.as_ref() != Some(header) {
            out.extend_from_slice(header);
            out.push(b'\n');
            written = Some(header.clone());
        }
        out.push(b'\t');
        out.extend_from_slice(&line);
        out.push(b'\n');
    }
    out
}

/// The header entries are copied under: as written, but an `includeIf "gitdir:./…"` made
/// absolute from `dir`. `None` for one that cannot be written back.
fn header_for(
    raw: Vec<u8>,
    section: String,
    sub: Option<Vec<u8>>,
    dir: &Path,
) -> Option<(Vec<u8>, String, Option<Vec<u8>>)> {
    use std::os::unix::ffi::OsStrExt;
    let relative = sub.as_deref().and_then(|s| {
        ["gitdir:./", "gitdir/i:./"].iter().find_map(|p| {
            s.strip_prefix(p.as_bytes())
                .map(|rest| (&p[..p.len() - 2], rest))
        })
    });
    let Some((condition, rest)) = relative.filter(|_| section == "includeif") else {
        return Some((raw, section, sub));
    };
    let mut sub = condition.as_bytes().to_vec();
    sub.extend_from_slice(dir.as_os_str().as_bytes());
    sub.push(b'/');
    sub.extend_from_slice(rest);
    if sub.contains(&b'\n') {
        return None;
    }
    let mut raw = b"[includeIf \"".to_vec();
    for &b in &sub {
        if b == b'"' || b == b'\\' {
            raw.push(b'\\');
        }
        raw.push(b);
    }
    raw.extend_from_slice(b"\"]");
    Some((raw, section, Some(sub)))
}

/// Where the copy goes and what has been copied so far.
struct Copier {
    dir: PathBuf,
    home: Option<PathBuf>,
    files: usize,
    excludes: bool,
    attributes: bool,
}

impl Copier {
    /// `path` read, if it is a regular file of at most [`MAX_FILE_BYTES`].
    fn read(path: &Path) -> Option<Vec<u8>> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return None;
        }
        std::fs::read(path).ok()
    }

    /// Write `bytes` as a new owner-only file `name` of the copy's directory.
    fn write(&self, name: &str, bytes: &[u8]) -> Option<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .ok()?;
        file.write_all(bytes).ok()?;
        Some(path)
    }

    /// The config file at `path` (whose text is `text`), sanitised, its files copied.
    fn config(&mut self, text: &[u8], path: &Path, depth: usize) -> Vec<u8> {
        let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let home = self.home.clone();
        sanitise(text, &dir, home.as_deref(), &mut |kind, named| {
            self.file(kind, &named, depth)
        })
    }

    /// A copy of the file an entry names, for the entry to point at.
    fn file(&mut self, kind: Verdict, named: &Path, depth: usize) -> Option<PathBuf> {
        match kind {
            Verdict::Excludes => self.excludes = true,
            Verdict::Attributes => self.attributes = true,
            _ => {}
        }
        if self.files >= MAX_FILES || (kind == Verdict::Include && depth >= MAX_INCLUDE_DEPTH) {
            return None;
        }
        let text = Copier::read(named)?;
        self.files += 1;
        let n = self.files;
        match kind {
            Verdict::Include => {
                let sanitised = self.config(&text, named, depth + 1);
                self.write(&format!("include-{n}"), &sanitised)
            }
            Verdict::Excludes => self.write(&format!("ignore-{n}"), &text),
            Verdict::Attributes => self.write(&format!("attributes-{n}"), &text),
            Verdict::Keep | Verdict::Drop => None,
        }
    }
}

/// The user's config directory, as git finds it: `$XDG_CONFIG_HOME`, else `~/.config`.
fn users_config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute())
                .map(|h| h.join(".config"))
        })
}

/// The environment that hands a sandboxed process (whose private temp dir is `tmp`, and which
/// is granted `grants`) the sanitised copy, written by [`write_copy`]: `GIT_CONFIG_GLOBAL`,
/// which git reads instead of `~/.gitconfig` and the XDG file; and `XDG_CONFIG_HOME`, a
/// private directory holding only the copy (as `git/config`), for libraries that read git's
/// files themselves (GitPython takes the author of a commit from there). Not
/// `XDG_CONFIG_HOME` when a grant opens something in the user's own config directory
/// (`read:~/.config/gh`), but for a yep home: the program granted it would look for it there.
/// Nothing when the user has no git configuration.
pub fn env(
    tmp: &Path,
    grants: &yep_store::manifest::SandboxGrants,
) -> Vec<(&'static str, PathBuf)> {
    let Some(config) = write_copy(tmp) else {
        return Vec::new();
    };
    let mut env = vec![("GIT_CONFIG_GLOBAL", config)];
    let users = users_config_dir();
    let granted_there = users.is_some_and(|dir| {
        grants
            .read
            .iter()
            .chain(&grants.write)
            .filter_map(|p| super::grant_path(p))
            // What yep installed for it is found by its path, never through the variable.
            .any(|p| p.starts_with(&dir) && !super::in_yep_home(&p))
    });
    if !granted_there {
        env.push(("XDG_CONFIG_HOME", tmp.join("config")));
    }
    env
}

/// Write the sanitised copy of the user's global git configuration into `dir/config/git/`
/// (`dir` is a sandboxed process's private temp dir, owner-only) and answer its path, for
/// `GIT_CONFIG_GLOBAL`. `None` when the user has none (nor an XDG `ignore` or `attributes`
/// file), or it could not be written: git then finds nothing to read, as with none.
pub fn write_copy(dir: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let xdg = users_config_dir().map(|d| d.join("git"));
    let sources: Vec<PathBuf> = [
        xdg.as_ref().map(|d| d.join("config")),
        home.as_ref().map(|h| h.join(".gitconfig")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let read: Vec<(PathBuf, Vec<u8>)> = sources
        .into_iter()
        .filter_map(|p| Copier::read(&p).map(|text| (p, text)))
        .collect();
    let defaults = [
        xdg.as_ref().map(|d| d.join("ignore")),
        xdg.as_ref().map(|d| d.join("attributes")),
    ];
    if read.is_empty() && !defaults.iter().flatten().any(|p| p.is_file()) {
        return None;
    }
    let mut copier = Copier {
        dir: dir.join("config/git"),
        home,
        files: 0,
        excludes: false,
        attributes: false,
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&copier.dir)
            .ok()?;
    }
    let mut out = Vec::new();
    for (path, text) in &read {
        out.extend(copier.config(text, path, 0));
    }
    // git's defaults, which it would look for in the closed home: pointed at, copied.
    let [ignore, attributes] = defaults;
    for (seen, kind, default, key) in [
        (copier.excludes, Verdict::Excludes, ignore, "excludesFile"),
        (
            copier.attributes,
            Verdict::Attributes,
            attributes,
            "attributesFile",
        ),
    ] {
        use std::os::unix::ffi::OsStrExt;
        let Some(default) = default.filter(|_| !seen) else {
            continue;
        };
        if let Some(copy) = copier.file(kind, &default, 0) {
            out.extend_from_slice(format!("[core]\n\t{key} = ").as_bytes());
            out.extend(quoted(copy.as_os_str().as_bytes()));
            out.push(b'\n');
        }
    }
    copier.write("config", &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(text: &str) -> String {
        let mut copied = Vec::new();
        let out = sanitise(
            text.as_bytes(),
            Path::new("/home/ada"),
            Some(Path::new("/home/ada")),
            &mut |kind, path| {
                copied.push((kind, path.clone()));
                Some(PathBuf::from(format!("/tmp/copy{}", copied.len())))
            },
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn who_the_user_is_and_how_git_behaves_are_kept() {
        let text = "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com ; her address\n[core]\n\tautocrlf = input\n[safe]\n\tdirectory = /srv/repo\n[init] defaultBranch = main\n[alias]\n\tco = checkout\n";
        assert_eq!(
            clean(text),
            "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com ; her address\n[core]\n\tautocrlf = input\n[safe]\n\tdirectory = /srv/repo\n[init]\n\tdefaultBranch = main\n[alias]\n\tco = checkout\n"
        );
    }

    #[test]
    fn credentials_and_programs_are_left_out() {
        let text = r#"
[credential]
	helper = store
[credential "https://example.com"]
	username = ada
[url "https://ada:ghp_token@github.com/"]
	insteadOf = https://github.com/
[url "git@github.com:"]
	insteadOf = gh:
[http]
	extraHeader = Authorization: Bearer planted
	sslVerify = true
[http "https://example.com"]
	sslVerify = false
[github]
	token = planted
[core]
	sshCommand = ssh -i ~/.ssh/other
	fsmonitor = /usr/bin/watchman-hook
	hooksPath = ~/.githooks
	pager = less
	quotePath = false
[alias]
	st = status
	boom = "!sh -c 'cat ~/.ssh/id_ed25519'"
[filter "lfs"]
	clean = git-lfs clean -- %f
[diff "lfs"]
	textconv = cat
[gpg]
	program = /usr/bin/gpg2
[Credential]
	helper = "!f() { echo password=planted; }; f"
"#;
        let out = clean(text);
        assert_eq!(
            out,
            "[url \"git@github.com:\"]\n\tinsteadOf = gh:\n[http]\n\tsslVerify = true\n[core]\n\tquotePath = false\n[alias]\n\tst = status\n",
        );
    }

    #[test]
    fn a_value_that_runs_on_is_kept_whole_and_a_bad_header_hides_what_follows() {
        let text = "[user]\n\tname = Ada \\\n Lovelace\n[credential \"x]\n\thelper = store\n[core]\n\tquotePath = false\n";
        assert_eq!(
            clean(text),
            "[user]\n\tname = Ada \\\n Lovelace\n[core]\n\tquotePath = false\n"
        );
        // A continuation line that looks like a section header is still the value.
        let text = "[user]\n\tname = a\\\n[credential]\n[core]\n\tpager = less\n";
        assert_eq!(clean(text), "[user]\n\tname = a\\\n[credential]\n");
    }

    #[test]
    fn includes_and_the_files_git_reads_point_at_copies() {
        let text = "[include]\n\tpath = ~/.gitconfig.local\n[includeIf \"gitdir:./work/\"]\n\tpath = work.inc\n[core]\n\texcludesFile = ~/.gitignore_global\n\tattributesFile = relative\n";
        assert_eq!(
            clean(text),
            "[include]\n\tpath = \"/tmp/copy1\"\n[includeIf \"gitdir:/home/ada/work/\"]\n\tpath = \"/tmp/copy2\"\n[core]\n\texcludesfile = \"/tmp/copy3\"\n"
        );
    }

    #[test]
    fn values_read_as_git_reads_them() {
        let value = |v: &str| value(v.as_bytes(), 0).map(|(v, _)| String::from_utf8(v).unwrap());
        assert_eq!(value(" a  b # c").as_deref(), Some("a  b"));
        assert_eq!(value(r#" "a # b" "#).as_deref(), Some("a # b"));
        assert_eq!(value(r#" a\tb\\\"c"#).as_deref(), Some("a\tb\\\"c"));
        assert_eq!(value(" \"open\n"), None);
        assert_eq!(value(r" \q"), None);
        assert!(has_userinfo(b"https://ghp_x@github.com/"));
        assert!(!has_userinfo(b"git@github.com:org/"));
        assert!(!has_userinfo(b"https://github.com/a@b"));
    }

    #[test]
    fn sanitising_twice_changes_nothing() {
        let text = "[user]\nname=a\n[core] editor = vim\n\tquotePath\n[color \"diff\"]\n\tmeta = yellow\n[section.Sub]\n\tx = y\n";
        let once = clean(text);
        assert_eq!(clean(&once), once);
        assert_eq!(
            once,
            "[user]\n\tname=a\n[core]\n\tquotePath\n[color \"diff\"]\n\tmeta = yellow\n"
        );
    }
}
