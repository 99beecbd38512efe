//! One module per verb.

pub mod call;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod install;
pub mod manage;
pub mod manifest;
pub mod mcp;
pub mod new;
mod prompt;
pub mod session;

use std::path::{Path, PathBuf};
use yep_store::Home;
use yep_store::lockfile::LockEntry;
use yep_store::source::looks_like_path;

/// What a verb's `<dir | name>` argument names.
pub enum Target {
    /// An installed extension (its package lives in the home).
    Installed(Box<LockEntry>),
    /// A package directory.
    Dir(PathBuf),
}

/// Resolve `<dir | name>`: an installed name wins over a same-named directory here unless it is
/// spelled as a path; a bare name that is neither installed nor a directory here is a typo
/// (the error says which installed name is close), never a path.
pub fn resolve_target(home: &Home, target: &str) -> anyhow::Result<Target> {
    let dir = Path::new(target);
    if !(looks_like_path(target) && dir.is_dir())
        && let Some(entry) = home.lockfile()?.get(target).cloned()
    {
        return Ok(Target::Installed(Box::new(entry)));
    }
    if !looks_like_path(target) && !dir.is_dir() {
        return Err(home.not_installed(target).into());
    }
    Ok(Target::Dir(dir.to_path_buf()))
}
