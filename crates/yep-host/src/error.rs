//! Rendering an error with its causes, each cause once.

/// The messages of `err` and its `source()` chain, outermost first, each cause once: a cause
/// whose text is already part of a message before it (an error that prints its source as
/// well as chaining it) is left out.
pub fn causes(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !out.iter().any(|shown| shown.contains(&text)) {
            out.push(text);
        }
        next = e.source();
    }
    out
}

/// `err` and its causes on one line, `message: cause: cause`.
pub fn report(err: &(dyn std::error::Error + 'static)) -> String {
    causes(err).join(": ")
}

/// A call's failure as one line: `error` and its causes, control characters escaped (server
/// text in it is escaped already; a tool name is the model's), then its server's `log` unless
/// the error names one itself.
pub(crate) fn failure(
    error: &(dyn std::error::Error + 'static),
    log: Option<&std::path::Path>,
) -> String {
    let mut out = crate::text::escape_controls(&report(error)).into_owned();
    if let Some(log) = log
        && !error.to_string().contains("; log: ")
    {
        out.push_str(&format!(" (log: {})", log.display()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to open {path}")]
    struct Opening {
        path: String,
        source: std::io::Error,
    }

    /// The legacy shape: the message prints the source it also chains.
    #[derive(Debug, thiserror::Error)]
    #[error("failed to load: {source}")]
    struct Loading {
        source: Opening,
    }

    #[test]
    fn each_cause_appears_once() {
        let err = Loading {
            source: Opening {
                path: "plugin.json".into(),
                source: std::io::Error::other("permission denied"),
            },
        };
        assert_eq!(
            causes(&err),
            [
                "failed to load: failed to open plugin.json",
                "permission denied"
            ]
        );
        assert_eq!(
            report(&err),
            "failed to load: failed to open plugin.json: permission denied"
        );
    }
}
