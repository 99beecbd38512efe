//! `--block-secrets`: the credential shapes a tool's arguments or result may not carry. One
//! set of patterns, compiled once, run in one linear pass over each string; what it finds is
//! named by its shape, never shown.

use regex::RegexSet;
use serde::Serialize;
use serde_json::Value;
use std::sync::LazyLock;

/// One credential shape: its id (as the audit trail writes it), what it is called, and the
/// prefix that shows it (`ghp_…`).
struct Shape {
    id: &'static str,
    name: &'static str,
    hint: &'static str,
    pattern: &'static str,
}

/// The shapes, most specific first: the first that matches names what was found.
/// `(?-u:\b)` is an ASCII word boundary, which keeps the scan on the fast engines.
const SHAPES: &[Shape] = &[
    Shape {
        id: "aws_access_key_id",
        name: "an AWS access key id",
        hint: "AKIA…",
        pattern: r"(?-u:\b)AKIA[0-9A-Z]{16}(?-u:\b)",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "ghp_…",
        pattern: r"(?-u:\b)ghp_[A-Za-z0-9]{36}",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "gho_…",
        pattern: r"(?-u:\b)gho_[A-Za-z0-9]{36}",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "ghu_…",
        pattern: r"(?-u:\b)ghu_[A-Za-z0-9]{36}",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "ghs_…",
        pattern: r"(?-u:\b)ghs_[A-Za-z0-9]{36}",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "ghr_…",
        pattern: r"(?-u:\b)ghr_[A-Za-z0-9]{36}",
    },
    Shape {
        id: "github_token",
        name: "a GitHub token",
        hint: "github_pat_…",
        pattern: r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,}",
    },
    Shape {
        id: "private_key",
        name: "a PEM private key",
        hint: "-----BEGIN … PRIVATE KEY-----",
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    },
    Shape {
        id: "slack_token",
        name: "a Slack token",
        hint: "xox…-",
        pattern: r"(?-u:\b)xox[abpr]-[A-Za-z0-9-]{10,}",
    },
    Shape {
        id: "google_api_key",
        name: "a Google API key",
        hint: "AIza…",
        pattern: r"(?-u:\b)AIza[0-9A-Za-z_-]{35}",
    },
    Shape {
        id: "anthropic_api_key",
        name: "an Anthropic API key",
        hint: "sk-ant-…",
        pattern: r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}",
    },
    Shape {
        id: "openai_api_key",
        name: "an OpenAI-style API key",
        hint: "sk-…",
        pattern: r"(?-u:\b)sk-[A-Za-z0-9_-]{20,}",
    },
];

/// Every shape's pattern, compiled once, on first use.
static SET: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(SHAPES.iter().map(|s| s.pattern)).expect("the credential patterns compile")
});

/// Where a credential was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carrier {
    /// In what the tool was to be called with: the call is refused before it runs.
    Arguments,
    /// In what the tool answered: the answer is withheld.
    Result,
}

/// A credential shape found in a tool's arguments or result: which shape, and where. Its
/// text is the refusal, naming the shape and never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretFound {
    /// The shape's id: `github_token`, `aws_access_key_id`, `private_key`, ….
    pub shape: &'static str,
    #[serde(rename = "in")]
    pub carrier: Carrier,
    #[serde(skip)]
    name: &'static str,
    #[serde(skip)]
    hint: &'static str,
}

impl std::fmt::Display for SecretFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, verb, way) = match self.carrier {
            Carrier::Arguments => ("the arguments", "carry", "to tools"),
            Carrier::Result => ("the result", "carries", "from tools"),
        };
        write!(
            f,
            "blocked: {what} {verb} what looks like {} ({}); yep --block-secrets refuses to pass credentials {way}",
            self.name, self.hint
        )
    }
}

/// The first shape `text` carries, if any.
fn find(text: &str, carrier: Carrier) -> Option<SecretFound> {
    let first = SET.matches(text).into_iter().next()?;
    let shape = &SHAPES[first];
    Some(SecretFound {
        shape: shape.id,
        carrier,
        name: shape.name,
        hint: shape.hint,
    })
}

/// The first credential shape in any string (key or value) of `value`.
pub fn find_in_value(value: &Value, carrier: Carrier) -> Option<SecretFound> {
    match value {
        Value::String(text) => find(text, carrier),
        Value::Array(items) => items.iter().find_map(|i| find_in_value(i, carrier)),
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| find(k, carrier).or_else(|| find_in_value(v, carrier))),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

/// The first credential shape in `text` (a result as JSON text, read as written).
pub fn find_in_text(text: &str, carrier: Carrier) -> Option<SecretFound> {
    find(text, carrier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(text: &str) -> Option<&'static str> {
        find_in_text(text, Carrier::Arguments).map(|f| f.shape)
    }

    #[test]
    fn every_known_shape_is_found() {
        let token = format!("ghp_{}", "a1B2".repeat(9));
        for (text, shape) in [
            ("key AKIAIOSFODNN7EXAMPLE here", "aws_access_key_id"),
            (token.as_str(), "github_token"),
            (&format!("gho_{}", "x".repeat(36)), "github_token"),
            (&format!("ghs_{}", "x".repeat(36)), "github_token"),
            (&format!("github_pat_{}", "A_1".repeat(10)), "github_token"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", "private_key"),
            ("-----BEGIN PRIVATE KEY-----", "private_key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", "private_key"),
            ("xoxb-1234567890-abcdef", "slack_token"),
            (&format!("AIza{}", "9".repeat(35)), "google_api_key"),
            (
                &format!("sk-ant-api03-{}", "z".repeat(30)),
                "anthropic_api_key",
            ),
            (&format!("sk-proj-{}", "Q".repeat(40)), "openai_api_key"),
        ] {
            assert_eq!(found(text), Some(shape), "{text}");
        }
    }

    #[test]
    fn look_alikes_are_not_secrets() {
        for text in [
            "AKIA short",
            "ghp_tooshort",
            "-----BEGIN PUBLIC KEY-----",
            "task-assessment-of-the-whole-thing-here",
            "xoxo-hugs",
            "a normal sentence with sk- in it",
        ] {
            assert_eq!(found(text), None, "{text}");
        }
    }

    #[test]
    fn the_refusal_names_the_shape_and_never_the_value() {
        let token = format!("ghp_{}", "Z".repeat(36));
        let args = json!({"cmd": "push", "env": {"TOKEN": token}});
        let hit = find_in_value(&args, Carrier::Arguments).unwrap();
        let said = hit.to_string();
        assert_eq!(
            said,
            "blocked: the arguments carry what looks like a GitHub token (ghp_…); yep --block-secrets refuses to pass credentials to tools"
        );
        assert!(!said.contains(&token));
        let key_named = json!({ token.clone(): 1 });
        assert!(find_in_value(&key_named, Carrier::Arguments).is_some());
        assert!(find_in_value(&json!({"n": 1, "s": "fine"}), Carrier::Arguments).is_none());
    }

    #[test]
    fn a_large_clean_input_is_scanned_in_one_pass() {
        let big = "the quick brown fox ".repeat(100_000);
        assert_eq!(found(&big), None);
        let tail = format!("{big}AKIAIOSFODNN7EXAMPLE");
        assert_eq!(found(&tail), Some("aws_access_key_id"));
    }
}
