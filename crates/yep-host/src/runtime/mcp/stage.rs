//! Staging a launcher server's package (`npx -y`, `uvx`) for the run that lists its tools:
//! the approved install, or a new one.

use super::{McpProbeError, McpSource, Package, log_stem};
use crate::store::Home;
use crate::store::launcher::{self, InstallError, Installed};

/// A launcher server's package made ready for the run that lists its tools: installed now, or
/// the install its approval holds already.
#[derive(Debug, Default)]
pub struct Staged {
    pub install: Option<Installed>,
    pub as_written: bool,
    /// Installed by this staging: gone again if nothing approves it.
    pub fresh: bool,
}

impl Staged {
    pub fn package(&self) -> Package<'_> {
        Package {
            install: self.install.as_ref(),
            as_written: self.as_written,
        }
    }

    /// Remove what this staging installed, when nothing approved it.
    pub fn discard(self, home: &Home) {
        if let (true, Some(install)) = (self.fresh, &self.install) {
            let dir = install.path(home);
            let _ = crate::store::fsutil::remove_tree(&dir);
            let _ = std::fs::remove_file(dir.with_extension("unapproved"));
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// What [`stage`] does with a launcher server's package.
#[derive(Debug, Clone, Default)]
pub struct StageOptions {
    /// Keep the launcher as written (`Some(true)`), install for it (`Some(false)`), or as its
    /// approval says (`None`).
    pub as_written: Option<bool>,
    /// Resolve and install again even when the approved install is intact (`yep update`).
    pub reinstall: bool,
    pub progress: crate::store::progress::Progress,
}

/// Make ready the package `source`'s launcher fetches (nothing for another server): the
/// approved install when its definition is unchanged and its files intact, else a new install
/// of what the definition asks for.
pub async fn stage(
    home: &Home,
    source: &McpSource,
    opts: &StageOptions,
) -> Result<Staged, McpProbeError> {
    let Some(launched) = source.launched() else {
        return Ok(Staged::default());
    };
    let pin = crate::store::mcp::pin(home, &source.name, &source.origin)
        .ok()
        .flatten();
    let as_written = opts
        .as_written
        .unwrap_or_else(|| pin.as_ref().is_some_and(|p| p.as_written));
    if as_written {
        return Ok(Staged {
            as_written,
            ..Staged::default()
        });
    }
    let spec = crate::store::mcp::spec_hash(source.definition(), &source.origin);
    let kept = pin
        .filter(|p| !opts.reinstall && p.spec == spec)
        .and_then(|p| p.install)
        .filter(|i| i.verify(home, &source.name).is_ok());
    if let Some(install) = kept {
        return Ok(Staged {
            install: Some(install),
            ..Staged::default()
        });
    }
    let (home, stem, progress) = (
        home.clone(),
        log_stem(&source.name, &source.origin),
        opts.progress.clone(),
    );
    let installed =
        tokio::task::spawn_blocking(move || launcher::install(&home, &stem, &launched, &progress))
            .await
            .map_err(|e| McpProbeError::Install(Box::new(InstallError::Io(e.to_string()))))?
            .map_err(|e| McpProbeError::Install(Box::new(e)))?;
    Ok(Staged {
        install: Some(installed),
        fresh: true,
        as_written: false,
    })
}
