//! Claude Code's official plugins (`../shared/interop/claude-plugins`, or
//! `$YEP_CLAUDE_INTEROP`): seven plugins and the official marketplace's catalogue.

use std::path::{Path, PathBuf};

/// The corpus, copied to `dir` with its files writable (shared/ is read-only in CI).
pub fn claude_corpus(dir: &Path) -> PathBuf {
    let from = std::env::var_os("YEP_CLAUDE_INTEROP")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/claude-plugins")
        });
    assert!(
        from.join(".claude-plugin/marketplace.json").is_file(),
        "Claude Code's plugins are not at {} (set YEP_CLAUDE_INTEROP to a checkout of github.com/anthropics/claude-plugins-official)",
        from.display()
    );
    let root = dir.join("claude-plugins");
    super::copy_tree(&from, &root);
    root
}
