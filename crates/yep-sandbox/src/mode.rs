//! How hard the host insists on the sandbox ([`Mode`]), as settings.toml and `$YEP_SANDBOX` name it.

/// How hard the host insists on the sandbox: `sandbox = "…"` in settings.toml.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Refuse to start what the kernel cannot contain in full.
    Required,
    /// Apply what the kernel supports, and say what it does not.
    #[default]
    BestEffort,
    /// No sandbox: processes run with the user's rights.
    Off,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Required => "required",
            Mode::BestEffort => "best-effort",
            Mode::Off => "off",
        })
    }
}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(text: &str) -> Result<Mode, UnknownMode> {
        match text {
            "required" => Ok(Mode::Required),
            "best-effort" => Ok(Mode::BestEffort),
            "off" => Ok(Mode::Off),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}

/// A sandbox mode that is none of the three.
#[derive(Debug, thiserror::Error)]
#[error(
    "sandbox mode {:?} is not one of required, best-effort, off",
    yep_store::text::escape(.0)
)]
pub struct UnknownMode(pub String);
