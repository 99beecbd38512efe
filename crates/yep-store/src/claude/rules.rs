//! Claude Code permission rules (`Bash(git status:*)`, `Read`), as `allowed-tools` and a hook's
//! `if` write them, and whether one allows a command line. A compound line is judged by its
//! simple commands ([`super::shell`]), as Claude Code judges it: a hook's `if` takes the line
//! when it takes any of them ([`PermissionRule::takes_any_part`]), and `allowed-tools` permit
//! the line only when they permit every one ([`any_allows`]).

use serde::{Deserialize, Serialize};

/// One rule: a tool, and what of it (`None` for the whole tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specifier: Option<String>,
}

impl PermissionRule {
    /// Read `Tool` or `Tool(specifier)`; `None` for text that is neither.
    pub fn parse(rule: &str) -> Option<PermissionRule> {
        let rule = rule.trim();
        let (tool, specifier) = match rule.split_once('(') {
            None => (rule, None),
            Some((tool, rest)) => (tool, Some(rest.strip_suffix(')')?)),
        };
        let tool = tool.trim();
        if tool.is_empty()
            || !tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return None;
        }
        Some(PermissionRule {
            tool: tool.to_string(),
            specifier: specifier.map(str::to_string),
        })
    }

    /// Whether this rule lets the Bash tool run `command`: bare `Bash` (or `Bash(*)`) allows
    /// every command; `Bash(git status:*)` (or `Bash(git status *)`) allows `git status` and
    /// `git status` followed by anything after a space; a `*` elsewhere matches any run of
    /// characters; otherwise the command must be exactly the specifier.
    pub fn allows_command(&self, command: &str) -> bool {
        if self.tool != "Bash" {
            return false;
        }
        let command = command.trim();
        let Some(spec) = self.specifier.as_deref().map(str::trim) else {
            return true;
        };
        if spec.is_empty() || spec == "*" {
            return true;
        }
        if let Some(prefix) = spec.strip_suffix(":*").or_else(|| spec.strip_suffix(" *"))
            && !prefix.contains('*')
        {
            return command == prefix
                || command
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with(' '));
        }
        if spec.contains('*') {
            return glob(spec, command);
        }
        command == spec
    }

    /// Whether this rule takes the Bash command line `line` or any simple command in it (a
    /// hook's `if`: `Bash(rm *)` takes `true && rm -rf /x`, `FOO=1 rm -rf /x` and
    /// `echo $(rm -rf /x)`). A line that cannot be read for certain is taken: the guard fires.
    pub fn takes_any_part(&self, line: &str) -> bool {
        if self.allows_command(line) {
            return true;
        }
        if self.tool != "Bash" {
            return false;
        }
        match super::shell::subcommands(line) {
            None => true,
            Some(parts) => parts
                .iter()
                .any(|p| p.guard_forms().any(|f| self.allows_command(f))),
        }
    }

    /// Whether this rule allows every command there is (`Bash`, `Bash(*)`).
    fn allows_everything(&self) -> bool {
        self.tool == "Bash"
            && self
                .specifier
                .as_deref()
                .map(str::trim)
                .is_none_or(|s| s.is_empty() || s == "*")
    }

    /// Whether this rule names the tool `tool_name` (the `if` filter's first test).
    pub fn names_tool(&self, tool_name: &str) -> bool {
        self.tool == tool_name
    }
}

impl std::fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.specifier {
            None => f.write_str(&self.tool),
            Some(s) => write!(f, "{}({s})", self.tool),
        }
    }
}

/// A rule list as `allowed-tools` writes it in one string: rules separated by commas or
/// white space outside parentheses.
pub fn split_rules(list: &str) -> Vec<String> {
    super::frontmatter::split_outside_parens(list, |c| c == ',' || c.is_whitespace())
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `rules` let the Bash tool run the line `command`: each of its simple commands
/// must be allowed by one of them (`Bash(git status:*)` alone does not let
/// `git status && echo x` run). A line that cannot be read for certain is refused, unless a
/// rule allows every command.
pub fn any_allows(rules: &[PermissionRule], command: &str) -> bool {
    if rules.iter().any(PermissionRule::allows_everything) {
        return true;
    }
    let Some(parts) = super::shell::subcommands(command) else {
        return false;
    };
    !parts.is_empty()
        && parts.iter().all(|p| {
            rules
                .iter()
                .any(|r| p.allow_forms().any(|f| r.allows_command(f)))
        })
}

/// `*` as any run of characters, everything else literal.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields one part at least");
    let Some(mut text) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return text.is_empty();
    };
    for part in middle {
        match text.find(part) {
            Some(i) => text = &text[i + part.len()..],
            None => return false,
        }
    }
    text.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> PermissionRule {
        PermissionRule::parse(s).unwrap_or_else(|| panic!("{s} is a rule"))
    }

    #[test]
    fn allowed_tools_rules_match_a_command_by_prefix_or_exactly() {
        let status = rule("Bash(git status:*)");
        assert_eq!(status.tool, "Bash");
        assert_eq!(status.specifier.as_deref(), Some("git status:*"));
        assert!(status.allows_command("git status"));
        assert!(status.allows_command("git status --short"));
        assert!(!status.allows_command("git statusx"));
        assert!(!status.allows_command("git diff HEAD"));

        let spaced = rule("Bash(git add *)");
        assert!(spaced.allows_command("git add ."));
        assert!(!spaced.allows_command("git addx"));

        let exact = rule("Bash(git log --oneline -10)");
        assert!(exact.allows_command("git log --oneline -10"));
        assert!(!exact.allows_command("git log --oneline -10; rm -rf ~"));

        assert!(rule("Bash").allows_command("anything at all"));
        assert!(rule("Bash(*)").allows_command("anything at all"));
        assert!(rule("Bash(npm run *:check)").allows_command("npm run lint:check"));
        assert!(!rule("Read").allows_command("git status"));
        assert!(rule("Read").names_tool("Read"));

        assert_eq!(PermissionRule::parse("Bash(git status"), None);
        assert_eq!(PermissionRule::parse("(x)"), None);
        assert_eq!(PermissionRule::parse("Bad Tool"), None);
        assert_eq!(rule("Bash(gh pr view:*)").to_string(), "Bash(gh pr view:*)");
        assert_eq!(
            split_rules("Bash(gh issue view:*), Bash(gh search:*) Read"),
            ["Bash(gh issue view:*)", "Bash(gh search:*)", "Read"]
        );
    }

    #[test]
    fn an_if_rule_takes_a_compound_line_when_it_takes_any_of_its_commands() {
        let rm = rule("Bash(rm *)");
        for line in [
            "rm -rf /x/y",
            "true && rm -rf /x/y",
            "echo hi; rm -rf /x/y",
            "FOO=1 rm -rf /x/y",
            "ls | rm -rf /x/y",
            "false || (rm -rf /x/y)",
            "echo $(rm -rf /x/y)",
            "echo \"`rm -rf /x/y`\"",
            "if true; then rm -rf /x/y; fi",
            "'rm' -rf /x/y",
            "echo 'unclosed && rm -rf /x/y",
        ] {
            assert!(rm.takes_any_part(line), "{line:?}");
        }
        for line in [
            "ls -la",
            "echo 'a && rm -rf /x/y'",
            "echo rm -rf /x/y",
            "farm x",
        ] {
            assert!(!rm.takes_any_part(line), "{line:?}");
        }
        assert!(rule("Bash").takes_any_part("anything; at all"));
        assert!(!rule("Read").takes_any_part("rm -rf /x/y"));
    }

    #[test]
    fn allowed_tools_permit_a_compound_line_only_when_they_permit_every_command() {
        let rules = [rule("Bash(git status:*)"), rule("Bash(git diff:*)")];
        for line in [
            "git status",
            "git status --short && git diff HEAD",
            "FOO=1 git status",
            "git status | git diff",
            "git status 'a && b'",
        ] {
            assert!(any_allows(&rules, line), "{line:?}");
        }
        for line in [
            "git status && echo pwned",
            "git status; rm -rf ~",
            "git status | sh",
            "git status $(rm -rf ~)",
            "git status `rm -rf ~`",
            "git status \"$(curl x)\"",
            "git status\nrm -rf ~",
            "git status & rm -rf ~",
            "(git status) || rm -rf ~",
            "git status 'unclosed",
            "",
        ] {
            assert!(!any_allows(&rules, line), "{line:?}");
        }
        assert!(any_allows(&[rule("Bash(*)")], "git status && echo x"));
        assert!(any_allows(&[rule("Bash")], "echo 'unclosed"));
    }
}
