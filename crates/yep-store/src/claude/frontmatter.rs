//! The YAML frontmatter of a command, skill or agent file, read as far as yep needs it: a
//! `key: value` per line, lists written `[a, b]` or as `- item` lines, quotes taken off.
//! A block scalar (`description: >`) is its lines joined; anything fancier (nested maps) is
//! skipped: the fields yep reads are all scalars or lists.

use std::collections::BTreeMap;

/// One frontmatter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Scalar(String),
    List(Vec<String>),
}

/// A markdown file split into its frontmatter fields and its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontmatter {
    pub fields: BTreeMap<String, Value>,
    /// The text after the closing `---` (all of it when there is no frontmatter).
    pub body: String,
}

impl Frontmatter {
    /// Split `text`. A file that does not open with a `---` line has no frontmatter; one whose
    /// block never closes is read as all body, as Claude Code reads it.
    pub fn parse(text: &str) -> Frontmatter {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.split_inclusive('\n');
        let opening = lines.next().unwrap_or_default();
        if opening.trim_end() != "---" {
            return Frontmatter {
                fields: BTreeMap::new(),
                body: text.to_string(),
            };
        }
        let mut block = Vec::new();
        let mut consumed = opening.len();
        let mut closed = false;
        for line in lines {
            consumed += line.len();
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            block.push(line.trim_end_matches(['\n', '\r']));
        }
        if !closed {
            return Frontmatter {
                fields: BTreeMap::new(),
                body: text.to_string(),
            };
        }
        Frontmatter {
            fields: fields(&block),
            body: text[consumed..].to_string(),
        }
    }

    /// A scalar field (the first item of a list), empty taken as absent.
    pub fn scalar(&self, key: &str) -> Option<&str> {
        match self.fields.get(key)? {
            Value::Scalar(s) => Some(s.as_str()),
            Value::List(items) => items.first().map(String::as_str),
        }
        .filter(|s| !s.is_empty())
    }

    /// The `allowed-tools` rules (or any rule list): a YAML list of rules, or one string of
    /// rules separated by commas or spaces outside parentheses.
    pub fn rules(&self, key: &str) -> Vec<String> {
        match self.fields.get(key) {
            None => Vec::new(),
            Some(Value::List(items)) => items
                .iter()
                .flat_map(|i| super::rules::split_rules(i))
                .collect(),
            Some(Value::Scalar(s)) => super::rules::split_rules(s),
        }
    }
}

fn fields(block: &[&str]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < block.len() {
        let line = block[i];
        i += 1;
        // Only top-level keys: an indented line or a comment belongs to something else.
        if line.starts_with([' ', '\t', '#', '-']) || line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_string();
        let value = value.trim();
        if matches!(value, "|" | ">" | "|-" | ">-" | "|+" | ">+") {
            // A block scalar: its indented lines, joined (folded or not, one line is enough
            // for what yep shows).
            let mut lines = Vec::new();
            while i < block.len() && (block[i].starts_with([' ', '\t']) || block[i].is_empty()) {
                lines.push(block[i].trim());
                i += 1;
            }
            let text = lines
                .into_iter()
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            out.insert(key, Value::Scalar(text));
        } else if value.is_empty() {
            // A block list, `- item` lines below; anything else indented is skipped.
            let mut items = Vec::new();
            while i < block.len() && block[i].starts_with([' ', '\t', '-']) {
                if let Some(item) = block[i].trim_start().strip_prefix('-') {
                    items.push(unquote(item.trim()).to_string());
                }
                i += 1;
            }
            out.insert(key, Value::List(items));
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            let items = split_outside_parens(inner, |c| c == ',')
                .into_iter()
                .map(|s| unquote(s.trim()).to_string())
                .filter(|s| !s.is_empty())
                .collect();
            out.insert(key, Value::List(items));
        } else {
            out.insert(key, Value::Scalar(unquote(value).to_string()));
        }
    }
    out
}

/// A YAML scalar without its quotes (`'…'` or `"…"`).
fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

/// `s` cut at every separator that is not inside parentheses.
pub(crate) fn split_outside_parens(s: &str, is_sep: impl Fn(char) -> bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && is_sep(c) => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_lists_come_in_either_spelling() {
        let inline = Frontmatter::parse(
            "---\ndescription: An example\nallowed-tools: [Read, Glob, \"Bash(git add:*)\"]\n---\nbody\n",
        );
        assert_eq!(inline.scalar("description"), Some("An example"));
        assert_eq!(
            inline.rules("allowed-tools"),
            ["Read", "Glob", "Bash(git add:*)"]
        );
        assert_eq!(inline.body, "body\n");

        let block = Frontmatter::parse(
            "---\nallowed-tools:\n  - Read\n  - 'Bash(git status:*)'\nname: x\n---\n",
        );
        assert_eq!(block.rules("allowed-tools"), ["Read", "Bash(git status:*)"]);
        assert_eq!(block.scalar("name"), Some("x"));

        let comma =
            Frontmatter::parse("---\nallowed-tools: Bash(git add:*), Bash(gh pr create:*)\n---\n");
        assert_eq!(
            comma.rules("allowed-tools"),
            ["Bash(git add:*)", "Bash(gh pr create:*)"]
        );
        let folded = Frontmatter::parse(
            "---\ndescription: >\n  Reviews a change\n  line by line\nname: r\n---\n",
        );
        assert_eq!(
            folded.scalar("description"),
            Some("Reviews a change line by line")
        );
        assert_eq!(folded.scalar("name"), Some("r"));
        let spaces = Frontmatter::parse("---\nallowed-tools: Bash(git add *) Read\n---\n");
        assert_eq!(spaces.rules("allowed-tools"), ["Bash(git add *)", "Read"]);
    }

    #[test]
    fn a_file_without_a_closed_frontmatter_block_is_all_body() {
        let none = Frontmatter::parse("# Title\n---\n");
        assert!(none.fields.is_empty());
        assert_eq!(none.body, "# Title\n---\n");
        let open = Frontmatter::parse("---\ndescription: x\nno end\n");
        assert!(open.fields.is_empty());
        assert_eq!(open.scalar("description"), None);
        let crlf = Frontmatter::parse("---\r\ndescription: 'quoted: yes'\r\n---\r\nb");
        assert_eq!(crlf.scalar("description"), Some("quoted: yes"));
        assert_eq!(crlf.body, "b");
    }
}
