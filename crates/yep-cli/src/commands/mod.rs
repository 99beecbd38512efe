//! One module per verb.

pub mod call;
pub mod demo;
mod prompt;

use std::path::PathBuf;

/// `--home`, else `$YEP_HOME`, else `<config dir>/yep`.
pub fn home(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("YEP_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .or_else(|| dirs::config_dir().map(|d| d.join("yep")))
    .unwrap_or_else(|| PathBuf::from(".yep"))
}
