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
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::write(&target, std::fs::read(entry.path()).unwrap()).unwrap();
            }
        }
    }
    let root = dir.join("claude-plugins");
    copy(&from, &root);
    root
}
