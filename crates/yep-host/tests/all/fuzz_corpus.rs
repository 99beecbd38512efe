//! Replays every fuzz corpus file and every crash found (`fuzz/corpus/<target>/`,
//! `fuzz/artifacts/<target>/`) through the target bodies in `yep_host::fuzzing`, on stable, so a
//! fixed crash stays fixed without nightly or libFuzzer.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("list a fuzz dir").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, body: fn(&[u8])) -> usize {
    let mut n = 0;
    for kind in ["corpus", "artifacts"] {
        for file in files(&fuzz_dir().join(kind).join(target)) {
            // A fuzzer running beside this test may reduce its corpus away under it.
            let Ok(data) = std::fs::read(&file) else {
                continue;
            };
            let run = std::panic::catch_unwind(|| body(&data));
            assert!(
                run.is_ok(),
                "fuzz target {target} fails on {}",
                file.display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn every_fuzz_target_has_a_committed_seed_corpus() {
    for (target, _) in yep_host::fuzzing::TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let seeds = files(&dir)
            .iter()
            .filter(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .count();
        assert!(seeds > 0, "no seed corpus in {}", dir.display());
        let declared =
            std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("read fuzz/Cargo.toml");
        assert!(
            declared.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml declares no target {target}"
        );
    }
}

macro_rules! replays {
    ($($(#[$attr:meta])* $test:ident: $target:ident,)*) => {$(
        $(#[$attr])*
        #[test]
        fn $test() {
            assert!(replay(stringify!($target), |data| yep_host::fuzzing::run(stringify!($target), data)) > 0);
        }
    )*};
}

replays! {
    the_wire_corpus_and_crashes_replay_clean: wire,
    the_manifest_corpus_and_crashes_replay_clean: manifest,
    the_zot_manifest_corpus_and_crashes_replay_clean: zot_manifest,
    the_claude_plugin_corpus_and_crashes_replay_clean: claude_plugin,
    the_cargo_manifest_corpus_and_crashes_replay_clean: cargo_manifest,
    the_lockfile_corpus_and_crashes_replay_clean: lockfile,
    the_settings_corpus_and_crashes_replay_clean: settings,
    the_gitconfig_corpus_and_crashes_replay_clean: gitconfig,
    #[cfg(feature = "fetch")]
    the_unpack_corpus_and_crashes_replay_clean: unpack,
}
