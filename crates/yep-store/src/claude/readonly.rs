//! The Bash command lines Claude Code runs with no permission rule because they only read: a
//! few `git` subcommands, each with the flags that cannot write, as Claude Code's own table
//! lists them (its `git diff`, `git log`, … `safeFlags`, read from Claude Code 2.1.328). A
//! command's `` !`cmd` `` inline lines that are read-only run without `allowed-tools` saying so,
//! as in Claude Code; everything else still needs them.
//!
//! Kept narrower than Claude Code's table: only `git status`, `diff`, `log`, `show`, `branch`
//! (listing), `rev-parse` and `remote` (`-v`); no `git diff --no-index` (it reads files
//! outside the repository); and a word with anything a shell would expand or redirect (quotes,
//! `$`, globs, `>`, a leading `~`) is never read-only, nor a command led by an assignment
//! (`GIT_EXTERNAL_DIFF=x git diff`).

use super::shell::{Subcommand, subcommands};

/// Whether a flag takes a value, and which.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Text,
    Number,
}
use Takes::{Nothing, Number, Text};

/// Which operands (words that are not flags) a read-only command may have.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operands {
    /// Revisions and paths: any.
    Any,
    /// None at all.
    None,
    /// Only once `-l`/`--list` asked for a listing (`git branch x` makes a branch).
    WhenListing,
}

/// One read-only command: its leading words, its flags, its operands.
struct ReadOnly {
    command: &'static [&'static str],
    flags: &'static [&'static [(&'static str, Takes)]],
    operands: Operands,
    /// `-<n>` limits the count (`git log -10`).
    count_shorthand: bool,
}

const REFS: &[(&str, Takes)] = &[
    ("--all", Nothing),
    ("--branches", Nothing),
    ("--tags", Nothing),
    ("--remotes", Nothing),
];
const DATES: &[(&str, Takes)] = &[
    ("--since", Text),
    ("--after", Text),
    ("--until", Text),
    ("--before", Text),
];
const LOG_SHAPE: &[(&str, Takes)] = &[
    ("--oneline", Nothing),
    ("--graph", Nothing),
    ("--decorate", Nothing),
    ("--no-decorate", Nothing),
    ("--date", Text),
    ("--relative-date", Nothing),
];
const COUNT: &[(&str, Takes)] = &[("--max-count", Number), ("-n", Number)];
const STATS: &[(&str, Takes)] = &[
    ("--stat", Nothing),
    ("--numstat", Nothing),
    ("--shortstat", Nothing),
    ("--name-only", Nothing),
    ("--name-status", Nothing),
];
const COLOR: &[(&str, Takes)] = &[("--color", Nothing), ("--no-color", Nothing)];
const PATCH: &[(&str, Takes)] = &[
    ("--patch", Nothing),
    ("-p", Nothing),
    ("--no-patch", Nothing),
    ("--no-ext-diff", Nothing),
    ("-s", Nothing),
];
const PEOPLE: &[(&str, Takes)] = &[("--author", Text), ("--committer", Text), ("--grep", Text)];

const STATUS: &[(&str, Takes)] = &[
    ("--short", Nothing),
    ("-s", Nothing),
    ("--branch", Nothing),
    ("-b", Nothing),
    ("--porcelain", Nothing),
    ("--long", Nothing),
    ("--verbose", Nothing),
    ("-v", Nothing),
    ("--untracked-files", Text),
    ("-u", Text),
    ("--ignored", Nothing),
    ("--ignore-submodules", Text),
    ("--column", Nothing),
    ("--no-column", Nothing),
    ("--ahead-behind", Nothing),
    ("--no-ahead-behind", Nothing),
    ("--renames", Nothing),
    ("--no-renames", Nothing),
    ("--find-renames", Text),
    ("-M", Text),
];

const DIFF: &[(&str, Takes)] = &[
    ("--dirstat", Nothing),
    ("--summary", Nothing),
    ("--patch-with-stat", Nothing),
    ("--word-diff", Nothing),
    ("--word-diff-regex", Text),
    ("--color-words", Nothing),
    ("--no-renames", Nothing),
    ("--no-ext-diff", Nothing),
    ("--check", Nothing),
    ("--ws-error-highlight", Text),
    ("--full-index", Nothing),
    ("--binary", Nothing),
    ("--abbrev", Number),
    ("--break-rewrites", Nothing),
    ("--find-renames", Nothing),
    ("--find-copies", Nothing),
    ("--find-copies-harder", Nothing),
    ("--irreversible-delete", Nothing),
    ("--diff-algorithm", Text),
    ("--histogram", Nothing),
    ("--patience", Nothing),
    ("--minimal", Nothing),
    ("--ignore-space-at-eol", Nothing),
    ("--ignore-space-change", Nothing),
    ("--ignore-all-space", Nothing),
    ("--ignore-blank-lines", Nothing),
    ("--inter-hunk-context", Number),
    ("--function-context", Nothing),
    ("--exit-code", Nothing),
    ("--quiet", Nothing),
    ("--cached", Nothing),
    ("--staged", Nothing),
    ("--pickaxe-regex", Nothing),
    ("--pickaxe-all", Nothing),
    ("--relative", Text),
    ("--diff-filter", Text),
    ("-p", Nothing),
    ("-u", Nothing),
    ("-s", Nothing),
    ("-M", Nothing),
    ("-C", Nothing),
    ("-B", Nothing),
    ("-D", Nothing),
    ("-l", Nothing),
    ("-S", Text),
    ("-G", Text),
    ("-O", Text),
    ("-R", Nothing),
];

const LOG: &[(&str, Takes)] = &[
    ("--abbrev-commit", Nothing),
    ("--full-history", Nothing),
    ("--dense", Nothing),
    ("--sparse", Nothing),
    ("--simplify-merges", Nothing),
    ("--ancestry-path", Nothing),
    ("--source", Nothing),
    ("--first-parent", Nothing),
    ("--merges", Nothing),
    ("--no-merges", Nothing),
    ("--reverse", Nothing),
    ("--walk-reflogs", Nothing),
    ("--skip", Number),
    ("--max-age", Number),
    ("--min-age", Number),
    ("--no-min-parents", Nothing),
    ("--no-max-parents", Nothing),
    ("--follow", Nothing),
    ("--no-walk", Nothing),
    ("--left-right", Nothing),
    ("--cherry-mark", Nothing),
    ("--cherry-pick", Nothing),
    ("--boundary", Nothing),
    ("--topo-order", Nothing),
    ("--date-order", Nothing),
    ("--author-date-order", Nothing),
    ("--pretty", Text),
    ("--format", Text),
    ("--diff-filter", Text),
    ("-S", Text),
    ("-G", Text),
    ("--pickaxe-regex", Nothing),
    ("--pickaxe-all", Nothing),
];

const SHOW: &[(&str, Takes)] = &[
    ("--abbrev-commit", Nothing),
    ("--word-diff", Nothing),
    ("--word-diff-regex", Text),
    ("--color-words", Nothing),
    ("--pretty", Text),
    ("--format", Text),
    ("--first-parent", Nothing),
    ("--raw", Nothing),
    ("--diff-filter", Text),
    ("-m", Nothing),
    ("--quiet", Nothing),
];

const BRANCH: &[(&str, Takes)] = &[
    ("-l", Nothing),
    ("--list", Nothing),
    ("-a", Nothing),
    ("--all", Nothing),
    ("-r", Nothing),
    ("--remotes", Nothing),
    ("-v", Nothing),
    ("-vv", Nothing),
    ("--verbose", Nothing),
    ("--color", Nothing),
    ("--no-color", Nothing),
    ("--column", Nothing),
    ("--no-column", Nothing),
    ("--abbrev", Number),
    ("--no-abbrev", Nothing),
    ("--contains", Text),
    ("--no-contains", Text),
    ("--points-at", Text),
    ("--sort", Text),
    ("--show-current", Nothing),
    ("-i", Nothing),
    ("--ignore-case", Nothing),
];

const REV_PARSE: &[(&str, Takes)] = &[
    ("--verify", Nothing),
    ("--short", Text),
    ("--abbrev-ref", Nothing),
    ("--symbolic", Nothing),
    ("--symbolic-full-name", Nothing),
    ("--show-toplevel", Nothing),
    ("--show-cdup", Nothing),
    ("--show-prefix", Nothing),
    ("--git-dir", Nothing),
    ("--git-common-dir", Nothing),
    ("--absolute-git-dir", Nothing),
    ("--is-inside-work-tree", Nothing),
    ("--is-inside-git-dir", Nothing),
    ("--is-bare-repository", Nothing),
    ("--is-shallow-repository", Nothing),
];

const REMOTE: &[(&str, Takes)] = &[("-v", Nothing), ("--verbose", Nothing)];

/// Every read-only command.
const COMMANDS: &[ReadOnly] = &[
    ReadOnly {
        command: &["git", "status"],
        flags: &[STATUS],
        operands: Operands::Any,
        count_shorthand: false,
    },
    ReadOnly {
        command: &["git", "diff"],
        flags: &[STATS, COLOR, DIFF],
        operands: Operands::Any,
        count_shorthand: false,
    },
    ReadOnly {
        command: &["git", "log"],
        flags: &[
            LOG_SHAPE, REFS, DATES, COUNT, STATS, COLOR, PATCH, PEOPLE, LOG,
        ],
        operands: Operands::Any,
        count_shorthand: true,
    },
    ReadOnly {
        command: &["git", "show"],
        flags: &[LOG_SHAPE, STATS, COLOR, PATCH, SHOW],
        operands: Operands::Any,
        count_shorthand: false,
    },
    ReadOnly {
        command: &["git", "branch"],
        flags: &[BRANCH],
        operands: Operands::WhenListing,
        count_shorthand: false,
    },
    ReadOnly {
        command: &["git", "rev-parse"],
        flags: &[REV_PARSE],
        operands: Operands::Any,
        count_shorthand: false,
    },
    ReadOnly {
        command: &["git", "remote"],
        flags: &[REMOTE],
        operands: Operands::None,
        count_shorthand: false,
    },
];

/// Whether every simple command of the Bash line `line` only reads (`COMMANDS`). A line that
/// cannot be read for certain, or has no command, is not.
pub fn is_read_only(line: &str) -> bool {
    match subcommands(line) {
        Some(parts) if !parts.is_empty() => parts.iter().all(reads_only),
        _ => false,
    }
}

/// Whether the simple command `part` is one of [`COMMANDS`] with only flags it lists.
fn reads_only(part: &Subcommand) -> bool {
    if part.assigns || !part.text.split(' ').all(plain_word) {
        return false;
    }
    let words: Vec<&str> = part.text.split(' ').collect();
    let Some(entry) = COMMANDS
        .iter()
        .find(|e| words.len() >= e.command.len() && words[..e.command.len()] == *e.command)
    else {
        return false;
    };
    let flag = |name: &str| {
        entry
            .flags
            .iter()
            .flat_map(|f| f.iter())
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
    };
    let mut rest = words[entry.command.len()..].iter();
    let mut listing = false;
    let mut operands_only = false;
    while let Some(&word) = rest.next() {
        if operands_only || !word.starts_with('-') || word == "-" {
            let allowed = match entry.operands {
                Operands::Any => true,
                Operands::None => false,
                Operands::WhenListing => listing,
            };
            if !allowed {
                return false;
            }
            continue;
        }
        if word == "--" {
            operands_only = true;
            continue;
        }
        if entry.count_shorthand && word[1..].bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let (name, attached) = match word.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (word, None),
        };
        let value = match (flag(name), attached) {
            (None, _) | (Some(Nothing), Some(_)) => return false,
            (Some(Nothing), None) => None,
            (Some(_), Some(value)) => Some(value),
            (Some(_), None) => match rest.next() {
                Some(&value) => Some(value),
                None => return false,
            },
        };
        if name == "-l" || name == "--list" {
            listing = true;
        }
        if let Some(value) = value {
            let fits = match flag(name) {
                Some(Number) => !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()),
                _ if name == "--pretty" || name == "--format" => safe_format(value),
                // A sort key can ask for a signature, which runs gpg.
                _ => !signs(value),
            };
            if !fits {
                return false;
            }
        }
    }
    true
}

/// Whether `word` (as written) is passed as it stands: no quotes, escapes, expansions, globs
/// or redirections, and no `~` where a shell would expand it.
fn plain_word(word: &str) -> bool {
    let chars_ok = word.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '_' | '.' | '/' | ':' | '=' | ',' | '+' | '@' | '%' | '^' | '-' | '~'
            )
    });
    chars_ok
        && !word.is_empty()
        && !word.starts_with('~')
        && !word.contains("=~")
        && !word.contains(":~")
}

/// Whether a `--pretty`/`--format` value is a built-in format or a format string that asks for
/// no signature: a bare name that is not built in may be a configured alias.
fn safe_format(value: &str) -> bool {
    const BUILT_IN: [&str; 7] = [
        "oneline", "short", "medium", "full", "fuller", "email", "raw",
    ];
    let string =
        value.starts_with("format:") || value.starts_with("tformat:") || value.contains('%');
    (BUILT_IN.contains(&value) || string) && !signs(value)
}

/// Whether a format or sort key asks for a commit's signature (which runs gpg to check it).
fn signs(value: &str) -> bool {
    value.contains("signature")
        || ["%G", "%-G", "%+G", "% G"]
            .iter()
            .any(|g| value.contains(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_git_lines_are_read_only() {
        for line in [
            "git status",
            "git status --short",
            "git diff HEAD",
            "git diff --cached --stat -- src/main.rs",
            "git diff HEAD~1..HEAD",
            "git branch --show-current",
            "git branch -a -v",
            "git branch --list feat",
            "git log --oneline -10",
            "git log -n 5 --format=%h:%s",
            "git log --pretty=oneline main..HEAD",
            "git show HEAD --stat",
            "git rev-parse --show-toplevel",
            "git remote -v",
            "git status && git diff HEAD",
            "git log --oneline | git status",
        ] {
            assert!(is_read_only(line), "{line:?} should be read-only");
        }
    }

    #[test]
    fn lines_that_can_write_or_cannot_be_read_for_certain_are_not() {
        for line in [
            "git branch -D x",
            "git branch new-branch",
            "git branch -m a b",
            "git diff --output=out",
            "git diff > out",
            "git diff >out",
            "git diff 2>&1",
            "git status; touch x",
            "git status && rm -rf x",
            "git log | tee out",
            "git diff --no-index a b",
            "git diff --ext-diff",
            "git diff --color=always",
            "git log --format=%G?",
            "git log --show-signature",
            "git log --pretty=myalias",
            "git log -n x",
            "git -c core.pager=x diff",
            "GIT_EXTERNAL_DIFF=x git diff",
            "git diff $X",
            "git diff 'a b'",
            "git diff ~/x",
            "git diff $(touch x)",
            "git remote add o url",
            "git commit -m x",
            "git stash",
            "git log \"open",
            "",
            "ls",
        ] {
            assert!(!is_read_only(line), "{line:?} should not be read-only");
        }
    }
}
