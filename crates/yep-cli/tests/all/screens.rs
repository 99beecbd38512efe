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
