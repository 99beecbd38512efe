//! What users read, held as snapshots: a consent screen, errors with their hints, and `--json`
//! output. A change to any of them shows as a diff to review (`cargo insta review`, or
//! `INSTA_UPDATE=always`), never as a silently rewritten sentence.

use crate::common;
use common::claude::claude_corpus;
use common::{Sealed, ok, regex_escape, text, yep, yep_with_stdin};
use std::path::Path;

/// `insta` settings that hide what differs between runs: the test's temp dir, the sealed home,
/// hashes and times.
fn stable(tmp: &Path) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex_escape(tmp.to_str().unwrap()), "[TMP]");
    settings.add_filter(
        &regex_escape(Sealed::get().home().to_str().unwrap()),
        "[USER_HOME]",
    );
    settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[HASH]");
    settings.add_filter(r"\b[0-9a-f]{40}\b", "[COMMIT]");
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]");
    settings.add_filter(r"\b\d+(\.\d+)? ?(ms|s)\b", "[DURATION]");
    settings
}

#[test]
fn a_claude_plugins_consent_screen_and_the_list_that_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let corpus = claude_corpus(tmp.path());
    let plugin = corpus.join("plugins/commit-commands");
    // Refused at the prompt: the screen is all that happens.
    let refused = yep_with_stdin(&home, &["install", plugin.to_str().unwrap()], "n\n");
    assert!(!refused.status.success());
    let installed = yep(&home, &["install", plugin.to_str().unwrap(), "--yes"]);
    ok(&installed);
    let listed = ok(&yep(&home, &["list", "--json"]));
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("claude_consent_refused", text(&refused.stderr));
        insta::assert_snapshot!("claude_consent_yes", text(&installed.stderr));
        insta::assert_snapshot!("list_json", listed);
    });
}

#[test]
fn errors_say_what_failed_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let unstartable = yep(
        &home,
        &["mcp", "add", "broken", "--", "/nonexistent/mcp-server"],
    );
    assert!(!unstartable.status.success());
    let kept = yep(
        &home,
        &[
            "mcp",
            "add",
            "broken",
            "--keep",
            "--",
            "/nonexistent/mcp-server",
        ],
    );
    ok(&kept);
    let mcp_list = ok(&yep(&home, &["mcp", "list", "--json"]));
    let no_such = yep(&home, &["doctor", "nosuch"]);
    assert!(!no_such.status.success());
    let bad_grant = yep(&home, &["grant", "broken", "net:"]);
    assert!(!bad_grant.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("mcp_add_unstartable", text(&unstartable.stderr));
        insta::assert_snapshot!("mcp_add_kept", text(&kept.stdout) + &text(&kept.stderr));
        insta::assert_snapshot!("mcp_list_json", mcp_list);
        insta::assert_snapshot!("doctor_no_such", text(&no_such.stderr));
        insta::assert_snapshot!("grant_malformed", text(&bad_grant.stderr));
    });
}

/// A package with `tools` and the manifest's own grant of `example.com`.
fn notes_package(dir: &Path, tools: &[&str], version: &str) -> std::path::PathBuf {
    let tools: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| serde_json::json!({"name": t, "description": format!("{t} a note"), "inputSchema": {"type": "object"}}))
        .collect();
    yep_test_support::Package::at(dir)
        .manifest(&serde_json::json!({
            "name": "notes",
            "version": version,
            "yolop": {"capabilityServer": {"command": "notes-server"}, "tools": tools},
            "sandbox": {"net": ["example.com"]},
        }))
        .into_dir()
}

#[test]
fn the_approval_screens_of_a_grant_a_revoke_and_an_update() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("notes");
    notes_package(&src, &["read"], "1.0.0");
    ok(&yep(&home, &["install", src.to_str().unwrap(), "--yes"]));
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let read = format!("read:{}", data.display());
    // No terminal to ask at: the screen, then why nothing was granted.
    let unasked = yep(&home, &["grant", "notes", &read]);
    assert!(!unasked.status.success());
    let granted = ok(&yep(&home, &["grant", "notes", &read, "--yes", "--json"]));
    let again = ok(&yep(&home, &["grant", "notes", "net:example.com"]));
    let own = yep(&home, &["revoke", "notes", "net:example.com"]);
    assert!(!own.status.success());
    // A new version that widens: its diff is asked about, and `--locked` refuses it.
    notes_package(&src, &["read", "delete"], "1.1.0");
    let locked = yep(&home, &["update", "notes", "--locked"]);
    assert!(!locked.status.success());
    let update = yep_with_stdin(&home, &["update", "notes"], "n\n");
    assert!(!update.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("grant_unasked", text(&unasked.stderr));
        insta::assert_snapshot!("grant_json", granted);
        insta::assert_snapshot!("grant_nothing_new", again);
        insta::assert_snapshot!("revoke_the_manifests_own", text(&own.stderr));
        insta::assert_snapshot!("update_locked", text(&locked.stderr));
        insta::assert_snapshot!("update_widens_refused", text(&update.stderr));
    });
}
