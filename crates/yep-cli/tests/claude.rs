//! Claude Code, Codex and Agent Plugins packages in the store: Anthropic's official plugins
//! (the corpus, `common::claude`) install from their directories and from git, running
//! nothing, pinned in the lock, their hooks and commands on the consent screen; a widening
//! update asks again. (Running them is the host's, and comes with it.)

mod common;

use common::claude::claude_corpus;
use common::{git, ok, text, yep_with_stdin};
use serde_json::Value;
use std::path::Path;

fn yep(home: &Path, args: &[&str]) -> std::process::Output {
    yep_with_stdin(home, args, "")
}

/// Install `dir` with `--yes --json`: the one package's report, and what went to stderr.
fn install_saying(home: &Path, dir: &Path) -> (Value, String) {
    let out = yep(home, &["install", dir.to_str().unwrap(), "--yes", "--json"]);
    let reports: Value = serde_json::from_str(&ok(&out)).unwrap();
    (reports[0].clone(), text(&out.stderr))
}

fn install(home: &Path, dir: &Path) -> Value {
    install_saying(home, dir).0
}

#[test]
fn each_corpus_plugin_installs_from_its_directory_pinned_and_shown_running_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let plugins = claude_corpus(tmp.path()).join("plugins");
    for name in [
        "code-review",
        "commit-commands",
        "example-plugin",
        "explanatory-output-style",
        "learning-output-style",
        "security-guidance",
    ] {
        let (report, said) = install_saying(&home, &plugins.join(name));
        if name == "example-plugin" {
            // Its server is listed, never reached at install (mcp.example.com serves nothing).
            assert!(
                said.contains("MCP server example-plugin__example-server: not started"),
                "{said}"
            );
        }
        assert_eq!(report["name"], name);
        assert_eq!(report["outcome"], "installed", "{report}");
        let summary = report["summary"].as_str().unwrap();
        assert!(summary.contains("installing ran nothing"), "{summary}");
    }
    let lock = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    assert_eq!(lock.matches("[extensions.claude]").count(), 6, "{lock}");
    // What each shows before it is approved.
    let shown = |name: &str| {
        let report = install(&home, &plugins.join(name));
        report["summary"].as_str().unwrap().to_string()
    };
    let guidance = shown("security-guidance");
    assert!(
        guidance.contains("PostToolUse on Edit|Write|MultiEdit|NotebookEdit")
            && guidance.contains("sg-python.sh")
            && guidance.contains("fails open")
            && guidance.contains("hooks run shell commands with your files on every matching call"),
        "{guidance}"
    );
    let commit = shown("commit-commands");
    assert!(
        commit.contains("/commit-commands:commit runs") && commit.contains("`git status`"),
        "{commit}"
    );
    let example = shown("example-plugin");
    assert!(
        example.contains("example-server") || example.contains("mcp "),
        "{example}"
    );
    // Nothing ran: the hooks' state directory was never made, and no log was written.
    assert!(
        !home.join("logs").exists()
            || std::fs::read_dir(home.join("logs"))
                .unwrap()
                .next()
                .is_none()
    );
    // It is installed, and stays disabled until the host runs plugins.
    let enabled = yep(&home, &["enable", "security-guidance"]);
    assert_eq!(enabled.status.code(), Some(1));
    assert!(
        text(&enabled.stderr).contains("is a Claude Code plugin: this yep installs and pins it"),
        "{}",
        text(&enabled.stderr)
    );
    // A directory of only a marketplace entry (an LSP server) is no package on its own.
    let lsp = yep(
        &home,
        &[
            "install",
            plugins.join("rust-analyzer-lsp").to_str().unwrap(),
            "--yes",
        ],
    );
    assert_eq!(lsp.status.code(), Some(1));
    assert!(
        text(&lsp.stderr).contains("has no plugin.json"),
        "{}",
        text(&lsp.stderr)
    );
}

/// A plugin of our own: a manifest-less Claude Code layout with a command and a hook.
fn plugin(dir: &Path, hook_command: &str, extra_hook: bool) {
    std::fs::create_dir_all(dir.join("commands")).unwrap();
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(
        dir.join("commands/tidy.md"),
        "---\ndescription: tidy up\nallowed-tools: Bash(git status:*)\n---\nStatus: !`git status`\n",
    )
    .unwrap();
    let mut hooks = serde_json::json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": hook_command}]}
    ]}});
    if extra_hook {
        hooks["hooks"]["SessionStart"] =
            serde_json::json!([{"hooks": [{"type": "command", "command": "touch started"}]}]);
    }
    std::fs::write(dir.join("hooks/hooks.json"), hooks.to_string()).unwrap();
}

#[test]
fn a_manifestless_plugin_from_git_is_named_for_its_directory_and_a_new_hook_asks_again() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("tidy");
    let marker = tmp.path().join("ran");
    plugin(&repo, &format!("touch '{}'", marker.display()), false);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one hook"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}", repo.display());
    let out = ok(&yep(
        &home,
        &["install", &format!("{url}@{first}"), "--yes", "--json"],
    ));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report[0]["name"], "tidy");
    assert!(!marker.exists(), "installing ran a hook");
    // A second hook widens: the update asks, `--locked` refuses, and nothing changes without
    // consent.
    plugin(&repo, &format!("touch '{}'", marker.display()), true);
    git(&repo, &["commit", "-qam", "two hooks"]);
    let before = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    let locked = yep(&home, &["update", "tidy", "--locked"]);
    assert_eq!(locked.status.code(), Some(1), "{}", text(&locked.stderr));
    let asked = yep(&home, &["update", "tidy"]);
    assert_eq!(asked.status.code(), Some(1), "{}", text(&asked.stderr));
    let said = text(&asked.stderr);
    assert!(
        said.contains("SessionStart") && said.contains("touch started"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("extensions.lock")).unwrap(),
        before
    );
    let updated = ok(&yep(&home, &["update", "tidy", "--yes"]));
    assert!(updated.contains("updated tidy"), "{updated}");
    assert!(!marker.exists() && !home.join("extensions/tidy/started").exists());
}
