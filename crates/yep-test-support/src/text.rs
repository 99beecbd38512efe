//! What a program wrote, as text, and the checks of what users read.

use std::process::Output;

/// Output bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Its stdout, having checked that it succeeded (else both streams are shown).
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Fails if `text` holds a raw control character (but the newline), a bidi control or a
/// zero-width one: what a terminal would act on, or a reader would not see.
pub fn assert_nothing_hidden(text: &str) {
    for c in text.chars() {
        let hidden = c.is_control() && c != '\n'
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}')
            || matches!(c, '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}');
        assert!(!hidden, "{c:?} in {text}");
    }
}
