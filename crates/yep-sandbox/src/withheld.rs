//! What no grant and no workspace opens: the user's home whole, credentials, yep homes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The path a `read:` or `write:` grant names, as the sandbox opens it: `~/` is the home.
/// `None` for `~/` with no home. (The store's reading of a grant: one meaning for both.)
pub use yep_store::grants::grant_path;

/// Whether yep may make the missing directory `path` for a `write:` grant: it is inside the
/// user's home (never the home itself), and neither in nor holding credentials
/// (`CREDENTIALS`) or a yep home (`yep_home`, and those [`protect`]ed). Anywhere else a
/// missing path is the user's to make.
pub fn may_make_for_grant(path: &Path, yep_home: &Path) -> bool {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return false;
    };
    let near = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    homes.push(yep_home.to_path_buf());
    homes.push(yep_store::Home::resolve(None).root);
    path.is_absolute()
        && path.starts_with(&home)
        && path != home
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        && !CREDENTIALS.iter().any(|c| near(path, &home.join(c)))
        && !homes.iter().any(|h| near(path, h))
}

/// Whether `path` is in a yep home (the default one, or one [`protect`]ed).
pub(crate) fn in_yep_home(path: &Path) -> bool {
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    homes.push(yep_store::Home::resolve(None).root);
    homes.iter().any(|h| path.starts_with(h))
}

/// Whether `dir` is the root, the user's home, or a directory that holds the home: a rule on
/// it would open everything the profile keeps out.
pub(crate) fn holds_home(dir: &Path) -> bool {
    holds_home_real(&dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// [`holds_home`] for a path whose links are already resolved.
pub(crate) fn holds_home_real(real: &Path) -> bool {
    real == Path::new("/") || real_home().is_some_and(|h| h.starts_with(real))
}

/// Directories of the user's home that hold credentials: a workspace that holds one, or is
/// inside one, is never opened to a server.
pub(crate) const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
    ".terraform.d",
];

/// yep homes this process serves ([`protect`]): never opened to a server by way of its
/// workspace.
pub(crate) static PROTECTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Keep `dir` (a yep home: its secrets, its lock, its packages) out of every server's
/// workspace. The host calls it for the home it serves; an embedder with more homes calls it
/// for each.
pub fn protect(dir: &Path) {
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut protected = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    if !protected.contains(&real) {
        protected.push(real);
    }
}

/// How much of a workspace a server may be opened to ([`workspace_access`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkspaceAccess {
    /// All of it: an ordinary project directory (its real path).
    Whole(PathBuf),
    /// All of it but the yep homes it holds: these parts, and why, as a clause.
    Parts(Vec<PathBuf>, String),
    /// None of it, and why, as a clause ("is your home directory").
    Nothing(String),
}

/// How much of `workspace` a server may be opened to:
/// - nothing when it is the root or holds the user's home, is inside a yep home, or holds or
///   is inside a credentials directory (`CREDENTIALS`): what it holds besides is not known
///   to be safe;
/// - all but the yep homes it holds ([`protect`]ed ones and the default one) when it holds
///   one: every entry beside the path down to each;
/// - else all of it.
pub fn workspace_access(workspace: &Path) -> WorkspaceAccess {
    let real = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    if real == Path::new("/") {
        return WorkspaceAccess::Nothing("is the root of the filesystem".into());
    }
    let home = real_home();
    if let Some(home) = home.as_deref().filter(|h| h.starts_with(&real)) {
        return WorkspaceAccess::Nothing(match home == real {
            true => "is your home directory".into(),
            false => "holds your home directory".into(),
        });
    }
    let near = |dir: &Path| real.starts_with(dir) || dir.starts_with(&real);
    if let Some(c) = home
        .iter()
        .flat_map(|h| CREDENTIALS.iter().map(move |c| h.join(c)))
        .find(|c| near(c))
    {
        return WorkspaceAccess::Nothing(format!(
            "holds or is in {}, which holds credentials",
            c.display()
        ));
    }
    let mut homes = PROTECTED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let default_home = yep_store::Home::resolve(None).root;
    homes.push(default_home.canonicalize().unwrap_or(default_home));
    if let Some(inside) = homes.iter().find(|h| real.starts_with(h)) {
        return WorkspaceAccess::Nothing(format!("is in yep's home ({})", inside.display()));
    }
    let held: Vec<PathBuf> = homes.into_iter().filter(|h| h.starts_with(&real)).collect();
    match held.first() {
        None => WorkspaceAccess::Whole(real),
        Some(first) => {
            let why = format!("holds yep's home ({})", first.display());
            WorkspaceAccess::Parts(all_but(&real, &held, 0), why)
        }
    }
}

/// Why `workspace` is not opened to a server whole (the shared host serves no such
/// workspace); `None` for an ordinary project directory.
pub fn workspace_withheld(workspace: &Path) -> Option<String> {
    match workspace_access(workspace) {
        WorkspaceAccess::Whole(_) => None,
        WorkspaceAccess::Parts(_, why) | WorkspaceAccess::Nothing(why) => Some(why),
    }
}

/// What of `dir` (a real path) rules may open so that none reaches any of `held`: each entry
/// of `dir` that holds none of them, and the same, in turn, of each that does. An entry that
/// is a link is judged by where it leads, as the rule on it would be.
fn all_but(dir: &Path, held: &[PathBuf], depth: usize) -> Vec<PathBuf> {
    // Deeper than any real home; what is past it stays closed.
    if depth > 32 {
        return Vec::new();
    }
    let mut open = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if held.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        match held.iter().any(|h| h.starts_with(&real)) {
            true if real.starts_with(dir) => open.extend(all_but(&real, held, depth + 1)),
            // A link out of the directory toward a home: not followed.
            true => {}
            false => open.push(path),
        }
    }
    open
}

/// `$HOME` with its links resolved. A spawn asks a few dozen times, so the answer is kept
/// for the value it was found from (one resolved, not one that failed to).
pub(crate) fn real_home() -> Option<PathBuf> {
    static KNOWN: Mutex<Option<(std::ffi::OsString, PathBuf)>> = Mutex::new(None);
    let home = std::env::var_os("HOME")?;
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, real)) = known.as_ref().filter(|(from, _)| *from == home) {
        return Some(real.clone());
    }
    match Path::new(&home).canonicalize() {
        Ok(real) => {
            *known = Some((home, real.clone()));
            Some(real)
        }
        Err(_) => Some(PathBuf::from(home)),
    }
}
