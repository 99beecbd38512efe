//! Untrusted text made safe for a terminal.
//!
//! Anything a package or a server says (manifest strings, progress, log lines, errors,
//! questions) may carry escape sequences that redraw a consent screen, or bidi controls that
//! reorder what is shown. Before a terminal sees such text, every control character becomes a
//! visible escape: `\x1b`, `\r`, `\u{202e}`.

use std::borrow::Cow;
use std::fmt::Write;

/// Invisible characters that reorder or hide text (bidi embeddings, overrides and isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Characters a reader does not see: Unicode format characters (general category `Cf`: soft
/// hyphen, zero-width space and joiners, bidi controls, word joiner, BOM, tag characters...)
/// and the other default-ignorable code points (variation selectors, Hangul fillers, the
/// combining grapheme joiner). The ranges follow Unicode 15.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Whether [`mark_invisible`] marks `c`: a control character (C0, DEL, C1: escape sequences,
/// carriage returns, tabs, newlines), a bidi control, an [`is_invisible`] character, or a line
/// or paragraph separator.
fn marked(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_invisible(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Untrusted text for a person to review before approving it (a tool's description, say):
/// every character that would act on the terminal, reorder the text or stay unseen is written
/// as a visible marker, `<U+202E>`, `<U+200B>`, `<U+001B>`, `<U+000A>`; the rest is kept as it
/// is, so what is read is what the model reads.
pub fn mark_invisible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(marked) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if marked(c) {
            let _ = write!(out, "<U+{:04X}>", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char, keep_newlines: bool) -> bool {
    if keep_newlines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control() || is_bidi_control(c)
}

/// Escape what [`needs_escape`] names. Characters past U+00FF are written `\u{202e}`, or
/// `\u202e` when `json` (the form JSON reads back as the same character).
fn escape_with(s: &str, keep_newlines: bool, json: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !needs_escape(c, keep_newlines) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            '\t' => out.write_str("\\t"),
            c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32),
            c if json => write!(out, "\\u{:04x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// One line of untrusted text: every control character, newlines included, escaped.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_with(s, false, false)
}

/// Untrusted text that may span lines (a log, a stderr tail): newlines and tabs stay,
/// every other control character is escaped.
pub fn escape_multiline(s: &str) -> Cow<'_, str> {
    escape_with(s, true, false)
}

/// The last resort before a terminal: C0 and C1 controls other than newline and tab escaped,
/// and bidi controls written as `\u202e`, so a JSON document (which never holds a raw control,
/// and may hold a bidi control only inside a string) stays valid JSON.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape_with(s, true, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_make_every_control_character_visible() {
        assert_eq!(escape("plain text"), "plain text");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape("x\ny\rz\tw"), "x\\ny\\rz\\tw");
        assert_eq!(escape("\u{9b}31m"), "\\x9b31m");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("\x7f"), "\\x7f");
        assert_eq!(escape_multiline("a\nb\x1b]0;t\x07"), "a\nb\\x1b]0;t\\x07");
        let json = escape_controls("{\"a\":\"x\u{202e}y\"}\n");
        assert_eq!(json, "{\"a\":\"x\\u202ey\"}\n");
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["a"], "x\u{202e}y", "the same JSON");
        assert_eq!(escape_controls("a\x1bb\n"), "a\\x1bb\n");
    }

    #[test]
    fn marking_makes_controls_bidi_and_zero_width_characters_visible() {
        assert!(matches!(mark_invisible("plain, ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            mark_invisible("a\u{202e}b\u{200b}c\x1b[31md\te\r\nf\u{2028}g\u{e0041}\u{9b}"),
            "a<U+202E>b<U+200B>c<U+001B>[31md<U+0009>e<U+000D><U+000A>f<U+2028>g<U+E0041><U+009B>"
        );
        assert_eq!(
            mark_invisible("soft\u{ad}hy\u{2066}x\u{feff}"),
            "soft<U+00AD>hy<U+2066>x<U+FEFF>"
        );
    }
}
