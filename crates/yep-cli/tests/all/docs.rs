//! What the docs say holds: every relative link in `README.md` and `docs/*.md` leads to a file
//! inside the repository, and the zot extension `docs/zot.md` shows runs as written, through
//! the CLI.

use crate::common;
use common::{ok, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `README.md` and every `docs/*.md`.
fn doc_files() -> Vec<PathBuf> {
    let root = repo();
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The lines of `doc` outside fenced code blocks, with their numbers.
fn prose(doc: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// Where the docs point: each markdown link's target (`[text](target)`), and each path in
/// backticks that names a markdown file (`` `docs/mcp.md` ``), the way these docs also refer to
/// one another. A backticked path is a link in all but syntax, so it must lead somewhere too.
fn targets(line: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        // `[text](path "title")`: the path is the first word.
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        found.push((target.to_string(), true));
        rest = &after[end..];
    }
    for (i, span) in line.split('`').enumerate() {
        let path = span.split('#').next().unwrap_or_default();
        if i % 2 == 1 && path.ends_with(".md") && path.contains('/') && !path.contains(' ') {
            found.push((span.to_string(), false));
        }
    }
    found
}

/// GitHub's anchor for each heading of `doc`: lowercased, inline markup and punctuation
/// dropped (but `-` and `_`), spaces as `-`; a repeated one gets `-1`, `-2`, ….
fn anchors(doc: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for (_, line) in prose(doc) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let title = heading.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen
            .iter()
            .filter(|s| **s == slug || s.starts_with(&format!("{slug}-")))
            .count();
        seen.push(match count {
            0 => slug,
            n => format!("{slug}-{n}"),
        });
    }
    seen
}

#[test]
fn every_relative_link_in_the_docs_leads_to_a_file_inside_the_repository() {
    let root = repo();
    let mut broken = Vec::new();
    for file in doc_files() {
        let doc = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for (n, line) in prose(&doc) {
            for (target, markdown) in targets(line) {
                // A URI of any scheme (`https://`, an MCP `skill://…`) is no file.
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let base = file.parent().unwrap();
                // A markdown link is relative to its file; a backticked path is written from
                // the repository's root (or, failing that, from its file).
                let candidates = match (path.is_empty(), markdown) {
                    (true, _) => vec![file.clone()],
                    (false, true) => vec![base.join(path)],
                    (false, false) => vec![root.join(path), base.join(path)],
                };
                let resolved = candidates
                    .iter()
                    .find_map(|c| c.canonicalize().ok())
                    .filter(|p| p.starts_with(&root));
                let Some(resolved) = resolved else {
                    broken.push(format!(
                        "{shown}:{n}: `{target}` is not a file in the repository"
                    ));
                    continue;
                };
                if let Some(anchor) = anchor.filter(|_| resolved.is_file()) {
                    let linked = std::fs::read_to_string(&resolved).unwrap();
                    if !anchors(&linked).iter().any(|a| a == anchor) {
                        broken.push(format!(
                            "{shown}:{n}: `{target}`: no heading has the anchor #{anchor}"
                        ));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_what_it_should() {
    // Its own parts, so that a check that passes is not one that looks at nothing.
    let line = "see [the wire](zot.md#the-wire \"t\"), `docs/mcp.md` and `../out/side.md`, \
                not `plugin.json` or [web](https://example.com)";
    assert_eq!(
        targets(line),
        [
            ("zot.md#the-wire".to_string(), true),
            ("https://example.com".to_string(), true),
            ("docs/mcp.md".to_string(), false),
            ("../out/side.md".to_string(), false),
        ]
    );
    assert_eq!(
        anchors("# A title\n## In `yep session --json`\n```\n# not a heading\n```\n## A title\n"),
        ["a-title", "in-yep-session---json", "a-title-1"]
    );
}

/// The fenced block right after `<!-- zot-example: FILE -->` in `doc`: one file of the example.
fn example(doc: &str, file: &str) -> String {
    example_marked(doc, "zot-example", file)
}

/// The fenced block after `<!-- <kind>: <file> -->` in `doc`.
fn example_marked(doc: &str, kind: &str, file: &str) -> String {
    let marker = format!("<!-- {kind}: {file} -->");
    let at = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("the doc has no {marker}"));
    let rest = &doc[at + marker.len()..];
    let fence = rest.find("```").unwrap();
    assert!(
        rest[..fence].trim().is_empty(),
        "a fenced block must follow {marker}"
    );
    let body = &rest[fence..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n```").unwrap();
    format!("{}\n", &body[..end])
}

#[test]
fn the_zot_extension_in_docs_zot_md_runs_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/zot.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("src");
    let dir = src.join("wordcount");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["wordcount.py", "extension.json"] {
        std::fs::write(dir.join(file), example(&doc, file)).unwrap();
    }
    let yep = |args: &[&str], stdin: &str| common::yep_in(&src, &home, args, stdin);

    // Its directory, called as the doc calls it: the tool answers.
    let out = yep(
        &[
            "call",
            "./wordcount",
            "count_words",
            r#"{"text": "one two three"}"#,
        ],
        "",
    );
    let result: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "3 words"}], "is_error": false,
            "structured_content": {"words": 3}})
    );
    // The doctor finds nothing to fault in what it wrote.
    let out = yep(&["doctor", "./wordcount", "--json"], "");
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(report["ok"], true, "{report:#}");
    for check in ["hello", "ready", "intercepts", "stdout", "frames"] {
        assert_eq!(
            common::doctor_check(&report, check)["status"],
            "pass",
            "{check}: {report:#}"
        );
    }

    // Installed and enabled: its command is listed and runs, its tool keeps count, and its
    // guard refuses what it should and nothing else.
    ok(&yep(&["install", "./wordcount", "--yes"], ""));
    ok(&yep(&["enable", "wordcount"], ""));
    let out = yep(
        &["session", "--json"],
        concat!(
            "commands\n",
            "call count_words {\"text\": \"a b c d\"}\n",
            "command /wordcount:words\n",
            "pre bash {\"command\": \"rm -rf /\"}\n",
            "pre bash {\"command\": \"ls\"}\n",
            "quit\n"
        ),
    );
    let replies: Vec<Value> = ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("warning").is_none())
        .collect();
    assert_eq!(
        replies[0]["commands"],
        json!([{"name": "wordcount:words", "description": "How many words so far"}]),
        "{replies:?}"
    );
    assert_eq!(
        replies[1]["result"]["content"][0]["text"], "4 words",
        "{replies:?}"
    );
    assert_eq!(
        replies[2],
        json!({"success": true, "message": "4 words counted so far"})
    );
    assert_eq!(replies[3]["decision"], "block", "{replies:?}");
    assert_eq!(replies[3]["reason"], "wordcount refuses rm -rf");
    assert_eq!(replies[4]["decision"], "allow", "{replies:?}");
    // What it printed to stderr is in its log.
    let log = std::fs::read_to_string(home.join("logs/wordcount.log")).unwrap();
    assert!(log.contains("wordcount: connected to yep-"), "{log}");
}

#[test]
fn the_marketplace_plugin_in_docs_plugins_md_installs_and_runs_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/plugins.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    for file in [
        "shop/.claude-plugin/marketplace.json",
        "shop/plugins/careful/.claude-plugin/plugin.json",
        "shop/plugins/careful/hooks/hooks.json",
        "shop/plugins/careful/hooks/guard.sh",
        "shop/plugins/careful/commands/greet.md",
    ] {
        let path = tmp.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, example_marked(&doc, "plugin-example", file)).unwrap();
    }
    let yep = |args: &[&str], stdin: &str| common::yep_in(tmp.path(), &home, args, stdin);
    // The commands as the doc gives them (with --yes: no terminal to approve at).
    ok(&yep(&["marketplace", "add", "./shop"], ""));
    assert!(ok(&yep(&["marketplace", "list", "shop"], "")).contains("careful"));
    let installed = yep(&["install", "careful@shop", "--yes"], "");
    let shown = text(&installed.stderr);
    assert!(
        shown.contains("PreToolUse on Bash") && shown.contains("guard.sh"),
        "{shown}"
    );
    ok(&installed);
    ok(&yep(&["enable", "careful"], ""));
    // The session the doc shows (as JSON: no terminal here).
    let out = yep(
        &["session", "--json"],
        "command careful:greet Ada\nrun Bash {\"command\": \"rm -rf /tmp/x\"}\nquit\n",
    );
    let said: Vec<Value> = ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("warning").is_none())
        .collect();
    assert_eq!(said[0]["message"], "Say hello to Ada.\n", "{said:?}");
    assert_eq!(
        said[1]["blocked"],
        json!({"extension": "careful", "reason": "rm -rf is not run here", "user_message": null})
    );
    for line in [
        "Say hello to Ada.",
        "blocked by `careful`: rm -rf is not run here",
    ] {
        assert!(doc.contains(line), "docs/plugins.md no longer shows {line}");
    }
}

/// The README's `yep` commands, each line of its `sh` blocks as written, in order, in one home
/// and one directory. A placeholder (`<name>`, `<plugin>@<marketplace>`, `<dir | git-url>`)
/// becomes `nothing`, a name nothing has, and a URL a directory that is not there; an optional
/// `[…]` is left out, and of `a|b|c` the first is taken. Every line must name a verb and
/// flags the CLI has (no usage error, exit 2); a line with no placeholder must succeed. The
/// registry is a closed port: nothing reaches crates.io.
#[test]
fn the_readmes_commands_run_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let env = [
        ("YEP_SPARSE_INDEX", "http://127.0.0.1:9/index/"),
        ("YEP_CRATE_DOWNLOAD", "http://127.0.0.1:9/dl/{crate}"),
    ];
    let mut ran = 0;
    for (n, line) in shell_lines(&readme) {
        for command in line.split("&&").map(str::trim) {
            let Some(args) = command.strip_prefix("yep ") else {
                continue;
            };
            let (args, placeholders) = as_run(args);
            let words: Vec<&str> = args.split_whitespace().collect();
            let out = common::yep_at(Some(&cwd), &home, &words, "", &env);
            let said = format!(
                "README.md:{n}: yep {args}\n{}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
            assert_ne!(out.status.code(), Some(2), "a usage error: {said}");
            if !placeholders {
                assert!(out.status.success(), "{said}");
            }
            ran += 1;
        }
    }
    assert!(ran >= 20, "only {ran} commands found in the README");
}

/// Each line of `doc`'s `sh` blocks, with its number, its comment taken off.
fn shell_lines(doc: &str) -> Vec<(usize, String)> {
    let mut in_sh = false;
    let mut out = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            in_sh = !in_sh && lang.trim() == "sh";
            continue;
        }
        if in_sh {
            // A comment starts at ` #` (no `#` inside the commands themselves).
            let code = line.split(" #").next().unwrap_or(line).trim();
            if !code.is_empty() {
                out.push((n + 1, code.to_string()));
            }
        }
    }
    out
}

/// `args` as the test runs it (see [`the_readmes_commands_run_as_written`]), and whether it
/// had a placeholder.
fn as_run(args: &str) -> (String, bool) {
    let mut out = String::new();
    let mut placeholders = false;
    let mut rest = args;
    while let Some(i) = rest.find(['<', '[']) {
        out.push_str(&rest[..i]);
        let close = if rest.as_bytes()[i] == b'<' { '>' } else { ']' };
        let Some(end) = rest[i..].find(close) else {
            break;
        };
        // `<dir | git-url[@rev]>`: the `]` inside is the placeholder's own.
        let end = match close {
            '>' => end,
            _ => rest[i..].find(']').unwrap_or(end),
        };
        if close == '>' {
            out.push_str("nothing");
            placeholders = true;
        }
        rest = &rest[i + end + 1..];
        // A `]` left over from `[@rev]>`.
        rest = rest.strip_prefix(']').unwrap_or(rest);
    }
    out.push_str(rest);
    let words: Vec<String> = out
        .split_whitespace()
        .map(|w| {
            let w = w.split('|').next().unwrap_or(w).trim_matches('\'');
            match w.contains("://") {
                true => "./no-such-directory".to_string(),
                false => w.to_string(),
            }
        })
        .collect();
    (words.join(" "), placeholders)
}

#[test]
fn a_readme_line_is_run_with_its_placeholders_filled() {
    assert_eq!(
        as_run("install <dir | git-url[@rev]> --yes"),
        ("install nothing --yes".into(), true)
    );
    assert_eq!(
        as_run("install <plugin>@<marketplace>"),
        ("install nothing@nothing".into(), true)
    );
    assert_eq!(
        as_run("manifest sync ./weather [--check] [--json]"),
        ("manifest sync ./weather".into(), false)
    );
    assert_eq!(
        as_run("new weather --lang python|typescript|rust --hook 'pre_tool_use:*'"),
        (
            "new weather --lang python --hook pre_tool_use:*".into(),
            false
        )
    );
    assert_eq!(
        as_run("marketplace add https://github.com/<owner>/<marketplace>"),
        ("marketplace add ./no-such-directory".into(), true)
    );
    assert_eq!(as_run("update [name]"), ("update".into(), false));
}
