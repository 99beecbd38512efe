//! `yep marketplace`: Claude Code's official catalogue read from the corpus, and one of our
//! own from a git repository; bounded and escaped.

mod common;

use common::claude::claude_corpus;
use common::{git, ok, text, yep_with_stdin};
use serde_json::{Value, json};
use std::path::Path;

fn yep(home: &Path, args: &[&str]) -> std::process::Output {
    yep_with_stdin(home, args, "")
}

#[test]
fn the_official_marketplace_is_added_in_place_and_lists_every_entry_with_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let corpus = claude_corpus(tmp.path());
    let added = ok(&yep(
        &home,
        &["marketplace", "add", corpus.to_str().unwrap(), "--json"],
    ));
    let added: Value = serde_json::from_str(&added).unwrap();
    assert_eq!(added["name"], "claude-plugins-official");
    // Every entry is taken or skipped with its reason: none is lost.
    let listed = ok(&yep(
        &home,
        &["marketplace", "list", "claude-plugins-official", "--json"],
    ));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let entries = listed["entries"].as_array().unwrap();
    let skipped = listed["skipped"].as_array().unwrap();
    assert_eq!(entries.len() + skipped.len(), 286, "{skipped:?}");
    assert!(entries.len() >= 280, "{skipped:?}");
    let entry = |name: &str| {
        entries
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no entry {name}"))
            .clone()
    };
    assert_eq!(
        entry("commit-commands")["source"],
        json!({"path": "plugins/commit-commands"})
    );
    let lsp = entry("rust-analyzer-lsp");
    assert_eq!(lsp["strict"], false);
    assert_eq!(lsp["components"], json!(["lspServers"]));
    let subdir = entry("42crunch-api-security-testing");
    assert_eq!(
        subdir["source"],
        json!({"git": "https://github.com/42Crunch-AI/claude-plugins.git",
            "rev": "30287f5e3f122a646d1ac5ca3ab96e130c52a3ad", "subdir": "plugins/api-security-testing"})
    );
    // Read in place: nothing of it was copied into the home.
    assert!(!home.join("marketplaces/claude-plugins-official").exists());
    let human = ok(&yep(&home, &["marketplace", "list"]));
    assert!(
        human.starts_with("claude-plugins-official  ") && human.contains(" plugins  "),
        "{human}"
    );
    let again = yep(&home, &["marketplace", "add", corpus.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already added"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn a_git_marketplace_is_checked_out_into_the_home_at_its_commit_and_removed_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("market");
    std::fs::create_dir_all(repo.join(".claude-plugin")).unwrap();
    let catalogue = json!({
        "name": "ours",
        "owner": {"name": "us"},
        "plugins": [
            {"name": "tidy", "source": "./plugins/tidy", "description": "first line\u{1b}[2J\nsecond"},
            {"name": "bad\u{1b}]0;owned\u{7}", "source": "./x"},
            {"name": "away", "source": "../../etc"},
        ],
    });
    std::fs::write(
        repo.join(".claude-plugin/marketplace.json"),
        catalogue.to_string(),
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "catalogue"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}", repo.display());
    let said = ok(&yep(&home, &["marketplace", "add", &url]));
    assert!(
        said.starts_with("added marketplace ours (1 plugins, 2 skipped)"),
        "{said}"
    );
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{7}'),
        "{said:?}"
    );
    assert!(said.contains("leaves the directory"), "{said}");
    let checkout = home.join("marketplaces/ours");
    assert!(checkout.join(".claude-plugin/marketplace.json").is_file());
    let listed: Value =
        serde_json::from_str(&ok(&yep(&home, &["marketplace", "list", "--json"]))).unwrap();
    assert_eq!(listed[0]["rev"], commit.as_str());
    assert_eq!(listed[0]["plugins"], 1);
    let plugins = ok(&yep(&home, &["marketplace", "list", "ours"]));
    assert!(plugins.starts_with("tidy  first line"), "{plugins:?}");
    assert!(!plugins.contains('\u{1b}'), "{plugins:?}");
    ok(&yep(&home, &["marketplace", "remove", "ours"]));
    assert!(!checkout.exists());
    let gone = yep(&home, &["marketplace", "list", "ours"]);
    assert!(!gone.status.success());
    assert!(text(&gone.stderr).contains("no marketplace named `ours`"));
}
