//! A Bash command line cut into the simple commands it runs, as Claude Code cuts one before it
//! matches permission rules (a hook's `if`, a command's `allowed-tools`) against it: at `&&`,
//! `||`, `;`, `|`, `|&`, `&` and newlines, and into the commands of subshells (`( … )`), command
//! substitutions (`$( … )`, backticks, also inside double quotes) and process substitutions
//! (`<( … )`, `>( … )`). Quotes are respected (an `&&` inside them separates nothing),
//! comments are dropped, and each command loses its variable assignments (`FOO=1 rm …` is
//! `rm …`) and the reserved words that lead it (`then rm …`, `! rm …`, `{ rm …`); its process
//! wrappers (`timeout 10 rm …`, `nice rm …`, and `sudo rm …` for a guard) are seen through.
//!
//! Not a shell: it never expands anything. A line it cannot read for certain (an unclosed
//! quote or substitution, nesting past [`MAX_DEPTH`]) gives `None`, and each caller takes the
//! safe side: a guard fires, a permission is refused.

/// The deepest nesting of subshells and substitutions read.
pub const MAX_DEPTH: usize = 64;

/// One simple command of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subcommand {
    /// Its words as written (quotes kept), one space apart.
    pub text: String,
    /// Its words as the shell passes them (quotes and escapes removed), one space apart.
    pub plain: String,
    /// The command its process wrappers run (`WRAPPERS`: `timeout 10 rm x` runs `rm x`),
    /// written and plain, when it has any: what Claude Code also matches rules against.
    pub unwrapped: Option<(String, String)>,
    /// The command past the wrappers that also change who runs it (`sudo`, `doas`), when
    /// that differs from [`Subcommand::unwrapped`]: for a guard only, never to allow it.
    pub escalated: Option<(String, String)>,
    /// Whether variable assignments led it (`GIT_EXTERNAL_DIFF=x git diff`), which the words
    /// above leave out: they can change what it does.
    pub assigns: bool,
}

impl Subcommand {
    /// Its spellings an allowing rule may match: as written, plain, and past its wrappers.
    pub fn allow_forms(&self) -> impl Iterator<Item = &str> {
        [&self.text, &self.plain]
            .into_iter()
            .map(String::as_str)
            .chain(
                self.unwrapped
                    .iter()
                    .flat_map(|(t, p)| [t.as_str(), p.as_str()]),
            )
    }

    /// Its spellings a guard fires on: those, and past `sudo` and `doas` too.
    pub fn guard_forms(&self) -> impl Iterator<Item = &str> {
        self.allow_forms().chain(
            self.escalated
                .iter()
                .flat_map(|(t, p)| [t.as_str(), p.as_str()]),
        )
    }
}

/// Programs that run the command after them, and how many of their own words (past the name)
/// to skip first: Claude Code's list (`timeout`, `time`, `nice`, `nohup`, `stdbuf`,
/// `command`, `builtin`, `noglob`, a flagless `xargs`) with `env` and `exec`. Their options
/// are skipped, with the value of those that take one as the next word.
const WRAPPERS: &[(&str, &[&str])] = &[
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("time", &[]),
    ("nice", &["-n", "--adjustment"]),
    ("nohup", &[]),
    (
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
    ),
    ("command", &[]),
    ("builtin", &[]),
    ("noglob", &[]),
    ("xargs", &[]),
    (
        "env",
        &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
    ),
    ("exec", &["-a"]),
];

/// Wrappers that also change who runs the command: stripped for a guard only.
const ESCALATING: &[(&str, &[&str])] = &[
    (
        "sudo",
        &["-u", "-g", "-h", "-p", "-C", "-D", "-U", "-r", "-t", "-T"],
    ),
    ("doas", &["-u", "-C"]),
];

/// How many leading words of `words` are wrappers (from `wrappers`) with their options and
/// arguments.
fn wrapped(words: &[Word], wrappers: &[(&str, &[&str])]) -> usize {
    let mut at = 0;
    while let Some(&(name, valued)) = words
        .get(at)
        .and_then(|w| wrappers.iter().find(|(n, _)| *n == w.plain))
    {
        at += 1;
        // `xargs` only bare: with options it is a program of its own.
        if name == "xargs" && words.get(at).is_some_and(|w| w.plain.starts_with('-')) {
            return at - 1;
        }
        // `command -v x` asks, it runs nothing.
        if name == "command"
            && words
                .get(at)
                .is_some_and(|w| w.plain.starts_with("-v") || w.plain.starts_with("-V"))
        {
            return at - 1;
        }
        while let Some(word) = words.get(at).filter(|w| w.plain.starts_with('-')) {
            at += 1;
            if word.plain == "--" {
                break;
            }
            if valued.contains(&word.plain.as_str()) {
                at += 1;
            }
        }
        // `env` takes assignments, `timeout` a duration.
        if name == "env" {
            at += words[at.min(words.len())..]
                .iter()
                .take_while(|w| is_assignment(&w.raw))
                .count();
        }
        if name == "timeout" && at < words.len() {
            at += 1;
        }
    }
    at.min(words.len())
}

/// The simple commands `line` runs, outermost first within each level; `None` when it cannot
/// be read for certain.
pub fn subcommands(line: &str) -> Option<Vec<Subcommand>> {
    let chars: Vec<char> = line.chars().collect();
    let mut scan = Scan {
        chars: &chars,
        at: 0,
        found: Vec::new(),
    };
    scan.level(None, 0)?;
    Some(scan.found)
}

/// What ends a nested level.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    Paren,
    Backtick,
}

/// A word being read: as written, and as the shell passes it.
#[derive(Default)]
struct Word {
    raw: String,
    plain: String,
}

struct Scan<'a> {
    chars: &'a [char],
    at: usize,
    found: Vec<Subcommand>,
}

impl Scan<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    /// Read commands up to `close` (or the end, at the top), consuming the closer.
    fn level(&mut self, close: Option<Close>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut words: Vec<Word> = Vec::new();
        let mut word = Word::default();
        loop {
            let Some(c) = self.peek(0) else {
                // The end of the line: only the top level may end here.
                self.end_word(&mut words, &mut word);
                self.end_command(&mut words);
                return close.is_none().then_some(());
            };
            match c {
                ')' if close == Some(Close::Paren) => {
                    self.at += 1;
                    self.end_word(&mut words, &mut word);
                    self.end_command(&mut words);
                    return Some(());
                }
                '`' if close == Some(Close::Backtick) => {
                    self.at += 1;
                    self.end_word(&mut words, &mut word);
                    self.end_command(&mut words);
                    return Some(());
                }
                ' ' | '\t' => {
                    self.at += 1;
                    self.end_word(&mut words, &mut word);
                }
                // A `)` with no `(` (a `case` pattern) ends a command, as a separator would.
                '\n' | ';' | ')' => {
                    self.at += 1;
                    self.end_word(&mut words, &mut word);
                    self.end_command(&mut words);
                }
                '|' => {
                    self.at += 1;
                    if matches!(self.peek(0), Some('|' | '&')) {
                        self.at += 1;
                    }
                    self.end_word(&mut words, &mut word);
                    self.end_command(&mut words);
                }
                '&' => {
                    // `>&2`, `<&0` and `&>file` redirect; `&&` and a lone `&` separate.
                    let redirect = word.raw.ends_with(['>', '<']) || self.peek(1) == Some('>');
                    if redirect {
                        self.at += 1;
                        word.raw.push('&');
                        word.plain.push('&');
                        continue;
                    }
                    self.at += 1;
                    if self.peek(0) == Some('&') {
                        self.at += 1;
                    }
                    self.end_word(&mut words, &mut word);
                    self.end_command(&mut words);
                }
                '#' if word.raw.is_empty() => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '(' => {
                    // At a word's start a subshell, after `$`, `<` or `>` a substitution:
                    // either way its commands are commands of the line.
                    if word.raw.is_empty() {
                        self.at += 1;
                        self.level(Some(Close::Paren), depth + 1)?;
                    } else {
                        self.nested(Close::Paren, depth, &mut word)?;
                    }
                }
                '`' => self.nested(Close::Backtick, depth, &mut word)?,
                '\'' => self.single_quoted(&mut word)?,
                '"' => {
                    self.at += 1;
                    word.raw.push('"');
                    self.double_quoted(&mut word, depth)?;
                }
                '\\' => self.escaped(&mut word),
                c => {
                    self.at += 1;
                    word.raw.push(c);
                    word.plain.push(c);
                }
            }
        }
    }

    /// A single-quoted string, at its opening quote: `$'…'` takes backslash escapes; `'…'`
    /// takes nothing.
    fn single_quoted(&mut self, word: &mut Word) -> Option<()> {
        let escapes = word.raw.ends_with('$');
        if escapes {
            word.plain.pop();
        }
        self.at += 1;
        word.raw.push('\'');
        loop {
            let c = self.peek(0)?;
            self.at += 1;
            word.raw.push(c);
            if c == '\'' {
                return Some(());
            }
            if c == '\\' && escapes {
                let next = self.peek(0)?;
                self.at += 1;
                word.raw.push(next);
                word.plain.push(next);
                continue;
            }
            word.plain.push(c);
        }
    }

    /// A backslash outside quotes: the next character as itself.
    fn escaped(&mut self, word: &mut Word) {
        self.at += 1;
        match self.peek(0) {
            // A line continuation joins the lines.
            Some('\n') => self.at += 1,
            Some(next) => {
                self.at += 1;
                word.raw.push('\\');
                word.raw.push(next);
                word.plain.push(next);
            }
            None => word.raw.push('\\'),
        }
    }

    /// The rest of a double-quoted string, its opening quote read: substitutions in it run.
    fn double_quoted(&mut self, word: &mut Word, depth: usize) -> Option<()> {
        loop {
            let c = self.peek(0)?;
            match c {
                '"' => {
                    self.at += 1;
                    word.raw.push('"');
                    return Some(());
                }
                '\\' => {
                    self.at += 1;
                    let next = self.peek(0)?;
                    self.at += 1;
                    if next == '\n' {
                        continue;
                    }
                    word.raw.push('\\');
                    word.raw.push(next);
                    if !matches!(next, '$' | '`' | '"' | '\\') {
                        word.plain.push('\\');
                    }
                    word.plain.push(next);
                }
                '(' if word.raw.ends_with('$') => self.nested(Close::Paren, depth, word)?,
                '`' => self.nested(Close::Backtick, depth, word)?,
                c => {
                    self.at += 1;
                    word.raw.push(c);
                    word.plain.push(c);
                }
            }
        }
    }

    /// The nested level opening at the current character (a substitution), its commands
    /// read as the line's; its text, as written, goes into `word` both ways.
    fn nested(&mut self, close: Close, depth: usize, word: &mut Word) -> Option<()> {
        let start = self.at;
        self.at += 1;
        self.level(Some(close), depth + 1)?;
        let written: String = self.chars[start..self.at].iter().collect();
        word.raw.push_str(&written);
        word.plain.push_str(&written);
        Some(())
    }

    fn end_word(&mut self, words: &mut Vec<Word>, word: &mut Word) {
        if !word.raw.is_empty() {
            words.push(std::mem::take(word));
        }
    }

    /// `words` as one command, past its assignments and leading reserved words.
    fn end_command(&mut self, words: &mut Vec<Word>) {
        let taken = std::mem::take(words);
        let mut skip = 0;
        let mut assigns = false;
        while let Some(w) = taken.get(skip) {
            let assignment = is_assignment(&w.raw);
            if !(assignment || LEADING_WORDS.contains(&w.raw.as_str())) {
                break;
            }
            assigns |= assignment;
            skip += 1;
            // `time -p`: the keyword's one option.
            if w.raw == "time" && taken.get(skip).is_some_and(|o| o.raw == "-p") {
                skip += 1;
            }
        }
        let kept = &taken[skip..];
        if kept.is_empty() || (kept.len() == 1 && CLOSING_WORDS.contains(&kept[0].raw.as_str())) {
            return;
        }
        let join = |words: &[Word], f: fn(&Word) -> &str| {
            words.iter().map(f).collect::<Vec<_>>().join(" ")
        };
        let both = |words: &[Word]| (join(words, |w| &w.raw), join(words, |w| &w.plain));
        let safe = wrapped(kept, WRAPPERS);
        let unwrapped = (safe > 0 && safe < kept.len()).then(|| both(&kept[safe..]));
        let mut all = safe;
        loop {
            let more = wrapped(&kept[all..], ESCALATING);
            let past = wrapped(&kept[all + more..], WRAPPERS);
            if more + past == 0 {
                break;
            }
            all += more + past;
        }
        let escalated = (all > safe && all < kept.len()).then(|| both(&kept[all..]));
        let (text, plain) = both(kept);
        self.found.push(Subcommand {
            text,
            plain,
            unwrapped,
            escalated,
            assigns,
        });
    }
}

/// Reserved words that may lead a command and run nothing themselves.
const LEADING_WORDS: [&str; 10] = [
    "!", "{", "if", "then", "else", "elif", "do", "while", "until", "time",
];

/// Reserved words that close a compound command, alone where a command would be.
const CLOSING_WORDS: [&str; 4] = ["}", "fi", "done", "esac"];

/// Whether `word` (as written) assigns a variable: `NAME=…` or `NAME+=…`.
fn is_assignment(word: &str) -> bool {
    let name_len = word
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let starts_well = word
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    let rest = &word[name_len..];
    starts_well && (rest.starts_with('=') || rest.starts_with("+="))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands of `line`, as written.
    fn texts(line: &str) -> Vec<String> {
        subcommands(line)
            .unwrap_or_else(|| panic!("{line:?} reads"))
            .into_iter()
            .map(|s| s.text)
            .collect()
    }

    /// What each command of `line` runs past its wrappers, for a guard.
    fn guarded(line: &str) -> Vec<String> {
        subcommands(line)
            .unwrap()
            .into_iter()
            .map(|s| s.guard_forms().last().unwrap().to_string())
            .collect()
    }

    #[test]
    fn process_wrappers_are_seen_through_and_sudo_only_by_a_guard() {
        for line in [
            "timeout 10 rm -rf /x",
            "timeout -s KILL -k 5 10s rm -rf /x",
            "nice -n 5 rm -rf /x",
            "nice -5 nohup rm -rf /x",
            "stdbuf -oL -e 0 rm -rf /x",
            "time -p nohup rm -rf /x",
            "command rm -rf /x",
            "builtin rm -rf /x",
            "noglob rm -rf /x",
            "xargs rm -rf /x",
            "env -u BAR FOO=1 rm -rf /x",
            "exec -a x rm -rf /x",
            "sudo -u root nice rm -rf /x",
            "doas timeout 3 rm -rf /x",
        ] {
            assert_eq!(guarded(line), ["rm -rf /x"], "{line:?}");
        }
        let parts = subcommands("sudo rm -rf /x").unwrap();
        assert!(parts[0].unwrapped.is_none(), "{parts:?}");
        assert!(!parts[0].allow_forms().any(|f| f == "rm -rf /x"));
        // Not wrappers: xargs with options, command -v, a wrapper alone.
        for line in ["xargs -0 rm", "command -v rm", "timeout 10", "nohup"] {
            let parts = subcommands(line).unwrap();
            assert!(
                parts[0].unwrapped.is_none() && parts[0].escalated.is_none(),
                "{line:?}: {parts:?}"
            );
        }
    }

    #[test]
    fn every_operator_and_newline_separates_commands() {
        for line in [
            "true && rm -rf /x/y",
            "true || rm -rf /x/y",
            "true; rm -rf /x/y",
            "true | rm -rf /x/y",
            "true |& rm -rf /x/y",
            "true & rm -rf /x/y",
            "true\nrm -rf /x/y",
            "true;rm -rf /x/y",
            "true&&rm -rf /x/y",
        ] {
            assert_eq!(texts(line), ["true", "rm -rf /x/y"], "{line:?}");
        }
        assert_eq!(
            texts("  git   status  ;; ;\n\n"),
            ["git status"],
            "blanks are one space, empty commands none"
        );
        assert_eq!(texts(""), Vec::<String>::new());
    }

    #[test]
    fn subshells_and_substitutions_give_their_commands_too() {
        assert_eq!(texts("(rm -rf /x/y)"), ["rm -rf /x/y"]);
        assert_eq!(
            texts("(cd a && rm -rf /x/y) | cat"),
            ["cd a", "rm -rf /x/y", "cat"]
        );
        assert_eq!(
            texts("echo $(rm -rf /x/y)"),
            ["rm -rf /x/y", "echo $(rm -rf /x/y)"]
        );
        assert_eq!(
            texts("echo `rm -rf /x/y`"),
            ["rm -rf /x/y", "echo `rm -rf /x/y`"]
        );
        assert_eq!(
            texts("echo \"now: $(rm -rf /x/y) and `id`\""),
            ["rm -rf /x/y", "id", "echo \"now: $(rm -rf /x/y) and `id`\""]
        );
        assert_eq!(
            texts("diff <(ls a) >(tee b)"),
            ["ls a", "tee b", "diff <(ls a) >(tee b)"]
        );
        assert_eq!(
            texts("echo $(echo $(rm -rf /x/y))"),
            [
                "rm -rf /x/y",
                "echo $(rm -rf /x/y)",
                "echo $(echo $(rm -rf /x/y))"
            ]
        );
        assert_eq!(
            texts("{ rm -rf /x/y; }"),
            ["rm -rf /x/y"],
            "a group's braces are not commands"
        );
        assert_eq!(
            texts("if true; then rm -rf /x/y; else ! ls; fi"),
            ["true", "rm -rf /x/y", "ls"]
        );
        assert_eq!(
            texts("for f in a b; do rm $f; done"),
            ["for f in a b", "rm $f"]
        );
    }

    #[test]
    fn quotes_and_escapes_separate_nothing() {
        assert_eq!(texts("echo 'a && b; c'"), ["echo 'a && b; c'"]);
        assert_eq!(texts("echo \"a || b | c\""), ["echo \"a || b | c\""]);
        assert_eq!(texts("echo a\\;b \\&\\& c"), ["echo a\\;b \\&\\& c"]);
        assert_eq!(
            texts("echo 'it''s' $'a\\'b;c'"),
            ["echo 'it''s' $'a\\'b;c'"]
        );
        assert_eq!(texts("echo '$(rm -rf /x/y)'"), ["echo '$(rm -rf /x/y)'"]);
        let plain = subcommands("'r'm -rf \"/x\"/y\\ z").unwrap();
        assert_eq!(plain[0].plain, "rm -rf /x/y z");
        assert_eq!(texts("git status \\\n --short"), ["git status --short"]);
    }

    #[test]
    fn assignments_and_leading_words_are_stripped_and_redirections_kept() {
        assert_eq!(texts("FOO=1 rm -rf /x/y"), ["rm -rf /x/y"]);
        assert_eq!(texts("A=1 B+=\"x y\" _c= rm -rf /x/y"), ["rm -rf /x/y"]);
        assert_eq!(texts("FOO=1"), Vec::<String>::new());
        assert_eq!(texts("time rm -rf /x/y"), ["rm -rf /x/y"]);
        assert_eq!(
            texts("rm a=b"),
            ["rm a=b"],
            "only leading ones are assignments"
        );
        assert_eq!(texts("1A=x ls"), ["1A=x ls"]);
        assert_eq!(
            texts("ls >&2 2>&1 &>/dev/null"),
            ["ls >&2 2>&1 &>/dev/null"]
        );
        assert_eq!(texts("ls # && rm -rf /x/y\nid"), ["ls", "id"]);
        assert_eq!(texts("echo a#b"), ["echo a#b"]);
    }

    #[test]
    fn what_cannot_be_read_for_certain_is_none() {
        for line in [
            "echo 'open",
            "echo \"open",
            "echo $(rm -rf /x/y",
            "echo `rm",
            "echo \"$(rm\"",
            "echo $'a\\",
        ] {
            assert_eq!(subcommands(line), None, "{line:?}");
        }
        let deep = format!(
            "{}rm{}",
            "(".repeat(MAX_DEPTH + 2),
            ")".repeat(MAX_DEPTH + 2)
        );
        assert_eq!(subcommands(&deep), None);
        let fine = format!("{}rm{}", "(".repeat(8), ")".repeat(8));
        assert_eq!(texts(&fine), ["rm"]);
    }
}
