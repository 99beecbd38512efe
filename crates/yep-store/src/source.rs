//! What `yep install <source>` accepts: a directory, a git URL, a crate, or a bare name.

use std::path::PathBuf;

/// Why a source spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    #[error("{0:?} is not a crate name")]
    CrateName(String),
    /// Never passed on, where `git` (or anything else) would read it as an option.
    #[error("{0:?} is not a source: it starts with `-`")]
    Option(String),
    /// `--subdir` names a directory inside a repository: a git source only.
    #[error("a subdirectory is taken only from a git source (`<git-url>[@rev] --subdir <path>`)")]
    SubdirNotGit,
    #[error(
        "{0:?} is not a directory, a git URL (`https://…[@rev]`, `file://…`), `crates.io:<crate>[@version]` or an extension name"
    )]
    Unrecognised(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A local package directory (copied, or referenced in place with `--link`).
    Path(PathBuf),
    /// `<url>[@rev]`: https, ssh or file URLs, cloned with the system `git`.
    Git { url: String, rev: Option<String> },
    /// `crates.io:<crate>[@version]`.
    Crate {
        name: String,
        version: Option<String>,
    },
    /// `<name>[@version]`: `yep-extension-<name>`, else `yolop-extension-<name>`, on crates.io.
    Bare {
        name: String,
        version: Option<String>,
    },
}

/// `name@version` → (name, Some(version)).
fn split_version(spec: &str) -> (String, Option<String>) {
    match spec.rsplit_once('@') {
        Some((name, version)) if !version.is_empty() => {
            (name.to_string(), Some(version.to_string()))
        }
        _ => (spec.trim_end_matches('@').to_string(), None),
    }
}

fn valid_crate_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl SourceSpec {
    pub fn parse(spec: &str) -> Result<SourceSpec, SourceError> {
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix("crates.io:") {
            let (name, version) = split_version(rest);
            if !valid_crate_name(&name) {
                return Err(SourceError::CrateName(name));
            }
            return Ok(SourceSpec::Crate { name, version });
        }
        if spec.starts_with('-') {
            // Never let a source reach `git` (or anything else) as an option.
            return Err(SourceError::Option(spec.to_string()));
        }
        if spec.contains("://") || spec.starts_with("git@") {
            // The rev follows the last `@`, unless that `@` is part of the URL itself
            // (`https://user@host/…`, `git@host:…`).
            let (url, rev) = match spec.rsplit_once('@') {
                Some((url, rev))
                    if !rev.is_empty()
                        && !rev.contains('/')
                        && !rev.contains(':')
                        && (url.contains("://") || url.starts_with("git@")) =>
                {
                    (url.to_string(), Some(rev.to_string()))
                }
                _ => (spec.to_string(), None),
            };
            return Ok(SourceSpec::Git { url, rev });
        }
        // Only what looks like a path is one: a bare name means the registry, even when a
        // directory of that name happens to be in the current directory.
        if looks_like_path(spec) {
            let path = PathBuf::from(spec);
            if path.is_dir() {
                return Ok(SourceSpec::Path(path));
            }
        }
        let (name, version) = split_version(spec);
        if valid_crate_name(&name) && !spec.contains('/') {
            return Ok(SourceSpec::Bare { name, version });
        }
        Err(SourceError::Unrecognised(spec.to_string()))
    }

    /// The crates a bare name may mean, in the order they are tried.
    pub fn candidates(name: &str) -> Vec<String> {
        if name.starts_with("yep-extension-") || name.starts_with("yolop-extension-") {
            vec![name.to_string()]
        } else {
            vec![
                format!("yep-extension-{name}"),
                format!("yolop-extension-{name}"),
            ]
        }
    }
}

/// `./x`, `../x`, `/x`, `~/x`, `x/y`, `.`: a path, never a registry name.
pub fn looks_like_path(spec: &str) -> bool {
    spec.contains('/')
        || spec.contains(std::path::MAIN_SEPARATOR)
        || spec.starts_with('.')
        || spec.starts_with('~')
}

/// The extension name a crate name implies: `yep-extension-<name>` and
/// `yolop-extension-<name>` mean `<name>`; any other crate means itself.
pub fn implied_name(crate_name: &str) -> &str {
    crate_name
        .strip_prefix("yep-extension-")
        .or_else(|| crate_name.strip_prefix("yolop-extension-"))
        .unwrap_or(crate_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_by_shape() {
        assert_eq!(
            SourceSpec::parse("crates.io:yolop-extension-logfire@0.2.1").unwrap(),
            SourceSpec::Crate {
                name: "yolop-extension-logfire".into(),
                version: Some("0.2.1".into())
            }
        );
        assert_eq!(
            SourceSpec::parse("file:///tmp/repo@abc123").unwrap(),
            SourceSpec::Git {
                url: "file:///tmp/repo".into(),
                rev: Some("abc123".into())
            }
        );
        assert_eq!(
            SourceSpec::parse("https://example.com/x.git").unwrap(),
            SourceSpec::Git {
                url: "https://example.com/x.git".into(),
                rev: None
            }
        );
        assert_eq!(
            SourceSpec::parse("https://user@example.com/x.git").unwrap(),
            SourceSpec::Git {
                url: "https://user@example.com/x.git".into(),
                rev: None
            }
        );
        assert_eq!(
            SourceSpec::parse("git@github.com:o/r.git").unwrap(),
            SourceSpec::Git {
                url: "git@github.com:o/r.git".into(),
                rev: None
            }
        );
        assert_eq!(
            SourceSpec::parse("git@github.com:o/r.git@v1").unwrap(),
            SourceSpec::Git {
                url: "git@github.com:o/r.git".into(),
                rev: Some("v1".into())
            }
        );
        assert_eq!(
            SourceSpec::parse("logfire@0.2").unwrap(),
            SourceSpec::Bare {
                name: "logfire".into(),
                version: Some("0.2".into())
            }
        );
        assert!(SourceSpec::parse("./no/such/dir").is_err());
        assert!(SourceSpec::parse("--upload-pack=touch x;://h/r").is_err());
        assert_eq!(
            SourceSpec::candidates("logfire"),
            ["yep-extension-logfire", "yolop-extension-logfire"]
        );
    }
}
