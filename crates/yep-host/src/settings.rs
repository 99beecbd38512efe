//! What the home's settings say for the runtime: the sandbox mode its servers run under
//! ([`sandbox_mode`]). The sandbox crate takes a mode and reads no settings; this is where one
//! is read. An embedder passes it in [`crate::SupervisorOptions::sandbox`]
//! ([`crate::SupervisorOptions::for_home`] does both).

use std::path::PathBuf;

use yep_sandbox::{Mode, UnknownMode};

/// The mode when neither the home nor `$YEP_SANDBOX` names one: everything the kernel can
/// enforce, and a warning for what it cannot.
pub(crate) const UNSET_MODE: Mode = Mode::BestEffort;

/// The mode for `home`: `$YEP_SANDBOX` when set, else its `sandbox` setting, else
/// `UNSET_MODE`.
pub fn sandbox_mode(home: &crate::store::Home) -> Result<Mode, ModeError> {
    if let Some(text) = std::env::var_os("YEP_SANDBOX").filter(|v| !v.is_empty()) {
        return text
            .to_string_lossy()
            .parse()
            .map_err(|e| ModeError::Env(Box::new(e)));
    }
    match crate::store::settings::top_level(&home.settings_path(), "sandbox")
        .map_err(|e| ModeError::Settings(Box::new(e)))?
    {
        Some(text) => text.parse().map_err(|e| ModeError::Setting {
            path: home.settings_path(),
            error: e,
        }),
        None => Ok(UNSET_MODE),
    }
}

/// Why the sandbox mode could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModeError {
    #[error("$YEP_SANDBOX: {0}")]
    Env(Box<UnknownMode>),
    #[error("{}: `sandbox`: {error}", .path.display())]
    Setting { path: PathBuf, error: UnknownMode },
    #[error(transparent)]
    Settings(Box<crate::store::StoreError>),
}

/// [`sandbox_mode`], or `required` when the settings cannot say which: never weaker than what
/// the user may have meant (the CLI says why once, at start).
pub fn sandbox_mode_or_required(home: &crate::store::Home) -> Mode {
    sandbox_mode(home).unwrap_or(Mode::Required)
}
