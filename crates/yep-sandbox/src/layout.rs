//! Install layouts: the toolchain a program runs on and the install root it belongs to
//! (a `node_modules` tree, a venv, a cargo root's `bin`, a Go binary's directory).

use std::path::{Path, PathBuf};

use crate::*;

/// The install root of a program: `…/bin/x` → `…`; a program beside its files → their
/// directory. `None` for `/`. Of a `cargo install` root (a cargo home: `/usr/local/cargo`),
/// only `bin`: the rest holds the registry's credentials.
pub(crate) fn prefix(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let root = match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin") if dir.parent().is_some_and(is_cargo_root) => dir,
        Some("bin" | "sbin" | "shims") => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    (root != Path::new("/")).then(|| root.to_path_buf())
}

/// Whether `dir` is where `cargo install` puts programs (`dir/bin`), a cargo home above all.
fn is_cargo_root(dir: &Path) -> bool {
    [
        ".crates.toml",
        ".crates2.json",
        "credentials.toml",
        "credentials",
    ]
    .iter()
    .any(|f| dir.join(f).is_file())
}

/// The install roots `path` belongs to by its layout, as given and with its links resolved:
/// what a server started from it (or naming it) reads whole.
/// - The outermost `node_modules` above it: Node loads a package's siblings from there
///   (`node_modules/.bin/x` → `../pkg/dist/index.js` imports `@scope/sdk`), and a pnpm
///   store nests inside it.
/// - The venv above it (the directory with `pyvenv.cfg`: a virtualenv, a pipx or uv tool's
///   venv), and the base interpreter's install it names (`home = …/bin`), when that holds
///   a Python.
///
/// A `cargo install` root gives only its `bin` ([`prefix`]), and a Go binary its own
/// directory ([`toolchain`]). Never one that [`may_open`] refuses.
pub(crate) fn install_roots(path: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let real = path.canonicalize().ok();
    for p in std::iter::once(path).chain(real.as_deref()) {
        if let Some(tree) = p
            .ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last()
        {
            roots.push(tree.to_path_buf());
        }
        if let Some(venv) = p
            .ancestors()
            .skip(1)
            .find(|a| a.join("pyvenv.cfg").is_file())
        {
            roots.push(venv.to_path_buf());
            roots.extend(venv_base(venv));
        }
    }
    roots.sort();
    roots.dedup();
    roots.retain(|r| may_open(r, home));
    roots
}

/// The install of the Python a venv was made from, by its `pyvenv.cfg`'s `home` (the
/// interpreter's directory): `…/bin` → `…`. Only a directory that holds a Python: the file
/// is the venv's, not the user's word.
fn venv_base(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let dir = cfg.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    let python = ["python3", "python"]
        .iter()
        .map(|p| dir.join(p))
        .find(|p| dir.is_absolute() && p.is_file())?;
    prefix(&python)
}

/// Whether a rule on `dir` keeps out what the profile keeps out: never the root, the home or
/// a directory holding it (`home`, links resolved), a credentials directory or one that holds
/// or is in one ([`CREDENTIALS`]), or a directory holding a yep home ([`protect`]).
fn may_open(dir: &Path, home: Option<&Path>) -> bool {
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if real == Path::new("/") || home.is_some_and(|h| h.starts_with(&real)) {
        return false;
    }
    let near = |c: &Path| real.starts_with(c) || c.starts_with(&real);
    if home.is_some_and(|h| CREDENTIALS.iter().any(|c| near(&h.join(c)))) {
        return false;
    }
    let homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    !homes.iter().any(|h| h.starts_with(&real))
}

/// A toolchain's own directory in the home, by the variable that moves it and its usual place.
const HOME_TOOLCHAINS: &[(&str, &str)] = &[
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
    ("VOLTA_HOME", ".volta"),
    ("ASDF_DATA_DIR", ".asdf"),
    ("RUSTUP_HOME", ".rustup"),
    ("BUN_INSTALL", ".bun"),
    ("DENO_INSTALL", ".deno"),
];

/// What the toolchain a program runs on needs: to read where it lives (a pyenv Python, a
/// venv, an nvm Node, a rustup toolchain, each directory on `PATH` a shebang's `env` may look
/// in), and to write the caches its launchers fill (`npx`'s `~/.npm`, `go run`'s build and
/// module caches). In the home, only those directories: never the home itself, and of
/// `~/.cargo` only `bin` (its credentials stay out).
pub(crate) fn toolchain(program: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut read = Vec::new();
    let mut write = Vec::new();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"));
    let in_home = |p: &Path| home.as_ref().is_some_and(|h| p.starts_with(h));
    let roots: Vec<PathBuf> = HOME_TOOLCHAINS
        .iter()
        .filter_map(|(var, dir)| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(dir)))
        })
        .filter(|d| d.is_absolute() && d.is_dir())
        .collect();
    // `real` is `p` with its links resolved, when they could be.
    let mut place = |p: &Path, real: Option<&Path>| {
        if holds_home_real(real.unwrap_or(p)) {
            // `$HOME` itself on `PATH`: its programs are not worth the whole home.
        } else if let Some(root) = roots.iter().find(|r| p.starts_with(r)) {
            read.push(root.clone());
        } else if in_home(p) {
            // A directory of programs in the home (`~/.cargo/bin`, `~/.local/bin`): itself.
            read.push(
                if p.is_dir() {
                    p
                } else {
                    p.parent().unwrap_or(p)
                }
                .to_path_buf(),
            );
        } else if let Some(root) = prefix(p) {
            read.push(root);
        }
    };
    // Each path resolved once: a spawn reads every directory on `PATH`.
    let mut place_both = |p: &Path| {
        let real = p.canonicalize().ok();
        place(p, real.as_deref());
        if let Some(real) = &real {
            place(real, Some(real));
        }
    };
    place_both(program);
    let mut path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    // A directory listed twice (a shell profile run twice) is looked at once.
    let mut seen = std::collections::HashSet::new();
    path.retain(|d| seen.insert(d.clone()));
    for dir in path {
        if dir.is_absolute() && dir.is_dir() {
            place_both(&dir);
        }
    }
    // Where the user told the interpreters and npm to look for modules (an SDK checked out, a
    // global npm prefix): each directory by itself.
    for var in [
        "PYTHONPATH",
        "NODE_PATH",
        "npm_config_prefix",
        "NPM_CONFIG_PREFIX",
    ] {
        if let Some(paths) = std::env::var_os(var) {
            read.extend(std::env::split_paths(&paths).filter(|d| d.is_absolute() && d.is_dir()));
        }
    }
    // cargo's and rustc's proxies in `~/.cargo/bin` run the toolchains of rustup's home.
    if let Some(h) = &home {
        // A pip `--user` install (the MCP SDK, say) lives in `~/.local/lib/pythonX.Y`.
        if let Ok(entries) = std::fs::read_dir(h.join(".local/lib")) {
            read.extend(entries.flatten().map(|e| e.path()).filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python"))
            }));
        }
        let launcher = program.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(launcher, "npx" | "npm" | "pnpm" | "pnpx" | "yarn" | "bunx") {
            write.push(h.join(".npm"));
        }
    }
    if program.file_name().and_then(|n| n.to_str()) == Some("go") {
        write.extend(go_caches(home.as_deref()));
    }
    read.sort();
    read.dedup();
    read.retain(|r| !holds_home(r));
    (read, write)
}

/// Where `go` keeps what `go run` builds and downloads, as it finds them itself (which the
/// child sees too: [`ENV_ALLOWED`] passes the variables): `$GOCACHE`, else
/// `~/.cache/go-build`; `$GOMODCACHE`, else the first `$GOPATH` entry's `pkg/mod`, else
/// `~/go/pkg/mod`. Each is made when missing, as `go` would make it: a rule on a path that
/// does not exist lets nothing be written there.
fn go_caches(home: Option<&Path>) -> Vec<PathBuf> {
    let set = |var| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let build = set("GOCACHE").or_else(|| home.map(|h| h.join(".cache/go-build")));
    let modules = set("GOMODCACHE").or_else(|| {
        let gopath = std::env::var_os("GOPATH")
            .and_then(|p| std::env::split_paths(&p).find(|d| !d.as_os_str().is_empty()))
            .or_else(|| home.map(|h| h.join("go")))?;
        Some(gopath.join("pkg/mod"))
    });
    let caches: Vec<PathBuf> = [build, modules]
        .into_iter()
        .flatten()
        // go refuses a relative cache itself; never the home or what holds it.
        .filter(|d| d.is_absolute() && !holds_home(d))
        .collect();
    for dir in &caches {
        let _ = std::fs::create_dir_all(dir);
    }
    caches
}
