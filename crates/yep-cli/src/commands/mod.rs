//! One module per verb.

pub mod audit;
pub mod call;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod grant;
pub mod hooks;
pub mod host;
pub mod install;
pub mod manage;
pub mod manifest;
pub mod marketplace;
pub mod mcp;
pub mod new;
mod prompt;
pub mod session;

use std::path::{Path, PathBuf};
use yep_store::lockfile::LockEntry;
use yep_store::source::looks_like_path;
use yep_store::{Home, StoreError, zot};

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

/// What a package directory holds, told apart as `yep install` tells them.
pub enum PackageKind {
    /// A YEP package: `plugin.json` (or a crate's `[package.metadata.yolop]`).
    Yep,
    /// A zot extension: `extension.json` and no `plugin.json`.
    Zot,
}

/// The package directory `dir` names (absolute) and its kind, or why it is none.
pub fn package_dir(dir: &Path) -> anyhow::Result<(PathBuf, PackageKind)> {
    let package = std::fs::canonicalize(dir).map_err(|e| {
        anyhow::anyhow!(
            "{} is neither an installed extension nor a package directory: {e}",
            dir.display()
        )
    })?;
    if !zot::is_zot_package(&package)
        && let Some(kind) = yep_store::claude::plugin_kind(&package)
    {
        anyhow::bail!(
            "{} is a {}: it has no server of its own to call or grade; `yep install {}` shows and pins its hooks, commands and skills",
            package.display(),
            kind.label(),
            dir.display()
        );
    }
    let kind = package_kind(&package)?;
    Ok((package, kind))
}

/// The kind of package in `dir`, or that it is none.
fn package_kind(dir: &Path) -> Result<PackageKind, StoreError> {
    if zot::is_zot_package(dir) {
        Ok(PackageKind::Zot)
    } else if dir.join(yep_store::manifest::MANIFEST_FILE).exists()
        || dir.join("Cargo.toml").is_file()
    {
        Ok(PackageKind::Yep)
    } else {
        Err(StoreError::NoManifest {
            dir: dir.to_path_buf(),
        })
    }
}
