//! Claude Code permission rules (`Bash(git status:*)`, `Read`), as `allowed-tools` and a hook's
//! `if` write them, and whether one allows a command line.

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

/// Whether any of `rules` lets the Bash tool run `command`.
pub fn any_allows(rules: &[PermissionRule], command: &str) -> bool {
    rules.iter().any(|r| r.allows_command(command))
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
}
