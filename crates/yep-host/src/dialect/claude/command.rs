//! A Claude Code slash command (`commands/<name>.md`, a skill invoked as one), expanded as
//! Claude Code expands it when it is invoked:
//! - `$ARGUMENTS` is the argument text; `$ARGUMENTS[N]` and `$N` its words, from 0, quoted
//!   as a shell quotes them (a missing one stays as written, `\$1` is a literal `$1`). A body
//!   without `$ARGUMENTS` given arguments gets them appended (`ARGUMENTS: …`);
//! - each `` !`cmd` `` (at the start of a line or after a space) runs, when its command's
//!   `allowed-tools` permit it, and its output takes its place; one not permitted is not run,
//!   and the text says so;
//! - each `@path` naming a regular file inside the workspace attaches that file, bounded.
//!
//! Running a command is the caller's ([`expand`] takes how): the dialect runs them contained,
//! in the workspace, with [`crate::process::run_to_end`].

use std::future::Future;
use std::path::Path;

/// The most bytes of one file an `@path` attaches.
pub(crate) const MAX_ATTACHED_FILE: u64 = 256 * 1024;

/// The most bytes all of a command's `@path`s attach together.
pub(crate) const MAX_ATTACHED: u64 = 1024 * 1024;

/// `body` with its argument placeholders replaced by `arguments`.
pub(crate) fn substitute(body: &str, arguments: &str) -> String {
    let words = shlex::split(arguments)
        .unwrap_or_else(|| arguments.split_whitespace().map(String::from).collect());
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut saw_arguments = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        // `\$` is a literal `$`.
        if rest[..at].ends_with('\\') {
            out.push_str(&rest[..at - 1]);
            out.push('$');
            rest = &rest[at + 1..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            saw_arguments = true;
            // `$ARGUMENTS[N]`.
            let indexed = tail
                .strip_prefix('[')
                .and_then(|t| t.split_once(']'))
                .and_then(|(n, after)| Some((n.parse::<usize>().ok()?, after, n.len() + 2)));
            match indexed {
                Some((n, _, len)) if n < words.len() => {
                    out.push_str(&words[n]);
                    rest = &after["ARGUMENTS".len() + len..];
                }
                Some((_, _, len)) => {
                    out.push_str(&rest[at..at + 1 + "ARGUMENTS".len() + len]);
                    rest = &after["ARGUMENTS".len() + len..];
                }
                None => {
                    out.push_str(arguments);
                    rest = tail;
                }
            }
        } else if digits > 0 {
            let n: usize = after[..digits].parse().unwrap_or(usize::MAX);
            match words.get(n) {
                Some(word) => out.push_str(word),
                None => out.push_str(&rest[at..at + 1 + digits]),
            }
            rest = &after[digits..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !saw_arguments && !arguments.trim().is_empty() {
        out.push_str("\n\nARGUMENTS: ");
        out.push_str(arguments);
    }
    out
}

/// The inline commands of `text`, in order: each `` !`cmd` `` at the start of a line or after
/// whitespace, as (the whole span, the command).
pub(crate) fn inline_commands(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("!`").map(|i| from + i) {
        let starts = at == 0
            || text[..at]
                .chars()
                .next_back()
                .is_some_and(char::is_whitespace);
        let close = text[at + 2..].find('`').map(|i| at + 2 + i);
        match (starts, close) {
            (true, Some(close)) if !text[at + 2..close].contains('\n') => {
                found.push((at..close + 1, text[at + 2..close].to_string()));
                from = close + 1;
            }
            _ => from = at + 2,
        }
    }
    found
}

/// How an inline command went, to stand in its place.
pub(crate) enum Ran {
    /// Its output (stdout and stderr, as the caller bounded them).
    Output(String),
    /// It could not run, or failed: why.
    Failed(String),
}

/// `body` expanded for `arguments`: placeholders replaced, then each inline command run by
/// `run` when `permits` it (in order, one at a time), its output in its place. Output is not
/// scanned again.
pub(crate) async fn expand<P, R, F>(body: &str, arguments: &str, permits: P, run: R) -> String
where
    P: Fn(&str) -> bool,
    R: Fn(String) -> F,
    F: Future<Output = Ran>,
{
    let text = substitute(body, arguments);
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (span, command) in inline_commands(&text) {
        out.push_str(&text[last..span.start]);
        let said = match permits(&command) {
            true => match run(command.clone()).await {
                Ran::Output(output) => output.trim_end().to_string(),
                Ran::Failed(why) => format!("[`{command}` failed: {why}]"),
            },
            false => {
                format!(
                    "[not run: `{command}` is not read-only, and this command's allowed-tools do not permit it]"
                )
            }
        };
        out.push_str(&said);
        last = span.end;
    }
    out.push_str(&text[last..]);
    out
}

/// `text` with the files its `@path`s name attached after it, each as
/// `<file path="…">…</file>`: only regular files inside `workspace` (none reached through a
/// link out of it), at most [`MAX_ATTACHED_FILE`] each and [`MAX_ATTACHED`] in all. An
/// `@path` that names nothing attachable stays as written, and attaches nothing.
pub(crate) fn attach_files(text: &str, workspace: &Path) -> String {
    let Ok(root) = workspace.canonicalize() else {
        return text.to_string();
    };
    let mut attached = String::new();
    let mut total = 0u64;
    let mut seen = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        // Punctuation that ends a sentence is not part of the path.
        let path = path.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
        if path.is_empty() || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        let Ok(full) = root.join(path).canonicalize() else {
            continue;
        };
        if !full.starts_with(&root) {
            continue;
        }
        let left = MAX_ATTACHED.saturating_sub(total).min(MAX_ATTACHED_FILE);
        let read = crate::store::fsutil::read_regular_string(
            &full,
            left,
            crate::store::fsutil::Links::Refuse,
        );
        let Ok(content) = read else {
            continue;
        };
        total += content.len() as u64;
        attached.push_str(&format!(
            "\n<file path=\"{}\">\n{}\n</file>",
            crate::text::escape(path),
            content
        ));
    }
    format!("{text}{attached}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_the_text_and_its_words_from_zero() {
        assert_eq!(
            substitute("fix $ARGUMENTS now", "issue 12"),
            "fix issue 12 now"
        );
        assert_eq!(
            substitute(
                "pr $0 at $1, by $2; $3 stays",
                "123 \"high priority\" alice"
            ),
            "pr 123 at high priority, by alice; $3 stays\n\nARGUMENTS: 123 \"high priority\" alice"
        );
        assert_eq!(
            substitute(
                "first $ARGUMENTS[0], missing $ARGUMENTS[5], all: $ARGUMENTS",
                "a b"
            ),
            "first a, missing $ARGUMENTS[5], all: a b"
        );
        assert_eq!(
            substitute("costs \\$1 and $ here", ""),
            "costs $1 and $ here"
        );
        // Nothing given, nothing appended.
        assert_eq!(substitute("plain", "  "), "plain");
    }

    #[test]
    fn inline_commands_are_found_only_where_claude_code_finds_them() {
        let text =
            "- status: !`git status`\n!`ls -a` and a!`not this` and `!`nor this`\n!`open\nline`";
        let found: Vec<String> = inline_commands(text).into_iter().map(|(_, c)| c).collect();
        assert_eq!(found, ["git status", "ls -a"]);
    }

    #[tokio::test]
    async fn a_permitted_command_runs_in_place_and_another_is_said_not_run() {
        let body = "Status: !`git status`\nDiff: !`git diff HEAD`\nArgs: $ARGUMENTS";
        let expanded = expand(
            body,
            "x",
            |c| c.starts_with("git status"),
            |c| async move { Ran::Output(format!("ran {c}\n")) },
        )
        .await;
        assert_eq!(
            expanded,
            "Status: ran git status\nDiff: [not run: `git diff HEAD` is not read-only, and this command's allowed-tools do not permit it]\nArgs: x"
        );
        let failed = expand(
            "!`false`",
            "",
            |_| true,
            |_| async { Ran::Failed("exit status 1".into()) },
        )
        .await;
        assert_eq!(failed, "[`false` failed: exit status 1]");
        // Output is not scanned again.
        let once = expand(
            "!`echo`",
            "",
            |_| true,
            |_| async { Ran::Output("!`rm -rf /`".into()) },
        )
        .await;
        assert_eq!(once, "!`rm -rf /`");
    }

    #[test]
    fn only_regular_files_inside_the_workspace_are_attached() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(dir.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        std::fs::write(ws.join("big"), vec![b'x'; (MAX_ATTACHED_FILE + 1) as usize]).unwrap();
        let text = "see @src/main.rs, @../secret @link @big @missing and @src/main.rs";
        let attached = attach_files(text, &ws);
        assert!(attached.starts_with(text));
        assert_eq!(
            &attached[text.len()..],
            "\n<file path=\"src/main.rs\">\nfn main() {}\n</file>"
        );
        assert!(!attached.contains("s3cret"));
    }
}
