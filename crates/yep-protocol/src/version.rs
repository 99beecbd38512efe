//! Protocol version negotiation: `MAJOR.MINOR`, compatible when the majors match.

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The major component of a `MAJOR.MINOR` version, or `None` when it is empty.
pub fn major(version: &str) -> Option<&str> {
    let major = version.trim().split('.').next().unwrap_or("");
    (!major.is_empty()).then_some(major)
}

/// Whether a peer speaking `version` can talk to us: the majors must match, and an empty
/// version is never compatible.
pub fn version_compatible(version: &str) -> bool {
    major(version).is_some_and(|m| Some(m) == major(PROTOCOL_VERSION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_major_is_compatible_and_others_are_not() {
        assert!(version_compatible("1.0"));
        assert!(version_compatible("1.7"));
        assert!(version_compatible("1"));
        assert!(!version_compatible("2.0"));
        assert!(!version_compatible("0.9"));
        assert!(!version_compatible(""));
        assert!(!version_compatible(".1"));
    }
}
