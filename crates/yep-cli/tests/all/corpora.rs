//! Where the tests get the interop corpora (zot's examples, Claude Code's plugins):
//! `scripts/interop.sh`, which `scripts/test` runs. Beside a checkout with `../shared` it names
//! `../shared/interop`; in a clone from GitHub, which has none, it clones the pinned commits
//! once into the peers cache. Here local bare repositories stand in for GitHub.

use crate::common;

use common::{copy_tree, git, text};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The corpus `var` names, else `../shared/interop/<folder>`.
fn corpus(var: &str, folder: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/interop").join(folder))
}

/// A bare repository at `bare` with `from`'s files in one commit (and a later commit that adds
/// a file the pin must not see): the pinned commit's hash.
fn bare_repository(from: &Path, work: &Path, bare: &Path) -> String {
    copy_tree(from, work);
    git(work, &["init", "-q"]);
    git(work, &["add", "-A"]);
    git(work, &["commit", "-qm", "corpus"]);
    let pinned = git(work, &["rev-parse", "HEAD"]);
    std::fs::write(work.join("LATER"), "not pinned").unwrap();
    git(work, &["add", "-A"]);
    git(work, &["commit", "-qm", "later"]);
    git(
        work.parent().unwrap(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    pinned
}

/// `scripts/interop.sh <peers>` with `env`: its lines, as (variable, directory), and stderr.
#[allow(clippy::disallowed_methods)] // the script the README's test command runs
fn interop(peers: &Path, env: &[(&str, &str)]) -> (Vec<(String, String)>, String) {
    let mut command = std::process::Command::new(repo().join("scripts/interop.sh"));
    command.arg(peers);
    for var in ["YEP_ZOT_INTEROP", "YEP_CLAUDE_INTEROP"] {
        command.env_remove(var);
    }
    let out = command.envs(env.iter().copied()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = text(&out.stdout)
        .lines()
        .map(|l| {
            let (var, dir) = l.split_once('=').unwrap();
            (var.to_string(), dir.to_string())
        })
        .collect();
    (lines, text(&out.stderr))
}

#[test]
fn without_shared_beside_the_checkout_the_pinned_corpora_are_cloned_once() {
    let tmp = tempfile::tempdir().unwrap();
    let zot_bare = tmp.path().join("zot.git");
    let zot = bare_repository(
        &corpus("YEP_ZOT_INTEROP", "zot"),
        &tmp.path().join("zot-work"),
        &zot_bare,
    );
    let claude_bare = tmp.path().join("claude.git");
    let claude = bare_repository(
        &corpus("YEP_CLAUDE_INTEROP", "claude-plugins"),
        &tmp.path().join("claude-work"),
        &claude_bare,
    );
    let peers = tmp.path().join("peers");
    let nowhere = tmp.path().join("no-shared");
    let env = [
        ("YEP_SHARED_INTEROP", nowhere.to_str().unwrap()),
        ("YEP_ZOT_GIT", zot_bare.to_str().unwrap()),
        ("YEP_ZOT_COMMIT", zot.as_str()),
        ("YEP_CLAUDE_PLUGINS_GIT", claude_bare.to_str().unwrap()),
        ("YEP_CLAUDE_PLUGINS_COMMIT", claude.as_str()),
    ];
    let (lines, said) = interop(&peers, &env);
    let zot_dir = peers.join("interop/zot");
    let claude_dir = peers.join("interop/claude-plugins");
    assert_eq!(
        lines,
        [
            ("YEP_ZOT_INTEROP".into(), zot_dir.display().to_string()),
            (
                "YEP_CLAUDE_INTEROP".into(),
                claude_dir.display().to_string()
            ),
        ]
    );
    assert!(said.contains("cloning"), "{said}");
    // The pinned commit, with the paths the tests read, and nothing after it.
    assert_eq!(git(&zot_dir, &["rev-parse", "HEAD"]), zot);
    assert!(zot_dir.join("examples/extensions/clock").is_dir());
    assert!(zot_dir.join("pkg/zotext").is_dir());
    assert!(!zot_dir.join("LATER").exists());
    assert_eq!(git(&claude_dir, &["rev-parse", "HEAD"]), claude);
    assert!(claude_dir.join(".claude-plugin/marketplace.json").is_file());
    assert!(claude_dir.join("plugins/commit-commands").is_dir());

    // Once: a second run clones nothing.
    let (again, said) = interop(&peers, &env);
    assert_eq!(again, lines);
    assert!(!said.contains("cloning"), "{said}");

    // With ../shared beside the checkout, that is what is named; an override wins over both.
    let shared = tmp.path().join("shared");
    std::fs::create_dir_all(shared.join("zot")).unwrap();
    std::fs::create_dir_all(shared.join("claude-plugins")).unwrap();
    let mut env_shared = env;
    env_shared[0].1 = shared.to_str().unwrap();
    let (named, _) = interop(&peers, &env_shared);
    assert_eq!(named[0].1, shared.join("zot").display().to_string());
    let mut with_override = env_shared.to_vec();
    with_override.push(("YEP_CLAUDE_INTEROP", "/elsewhere/claude"));
    let (named, _) = interop(&peers, &with_override);
    assert_eq!(named[1].1, "/elsewhere/claude");

    // A commit the repository does not have fails, saying so.
    #[allow(clippy::disallowed_methods)]
    let failed = std::process::Command::new(repo().join("scripts/interop.sh"))
        .arg(tmp.path().join("peers2"))
        .env_remove("YEP_ZOT_INTEROP")
        .envs(env.iter().copied())
        .env("YEP_ZOT_COMMIT", "0".repeat(40))
        .output()
        .unwrap();
    assert!(!failed.status.success());
    assert!(
        text(&failed.stderr).contains("has no commit"),
        "{}",
        text(&failed.stderr)
    );
}
