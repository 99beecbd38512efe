//! Edit a JSON document in place: find where each value sits, then replace or insert members
//! by byte range, so everything not edited (key order, spacing, line breaks) stays as written.
//! The document was already parsed by serde_json; this only finds the spans.

use serde_json::Value;

/// A value in the document and where it sits (`start..end`, bytes).
#[derive(Debug)]
pub struct Node {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    Scalar,
}

#[derive(Debug)]
pub struct Member {
    pub key: String,
    /// Where the key's opening quote is.
    pub key_start: usize,
    pub value: Node,
}

impl Node {
    pub fn member(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Object(members) => members.iter().find(|m| m.key == key),
            _ => None,
        }
    }

    pub fn members(&self) -> &[Member] {
        match &self.kind {
            Kind::Object(members) => members,
            _ => &[],
        }
    }

    pub fn items(&self) -> &[Node] {
        match &self.kind {
            Kind::Array(items) => items,
            _ => &[],
        }
    }
}

/// The spans of `text`, a JSON document.
pub fn parse(text: &str) -> Result<Node, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    let node = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing text at byte {}", p.i));
    }
    Ok(node)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", b as char, self.i))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > 256 {
            return Err("nested too deep".into());
        }
        self.ws();
        let start = self.i;
        let kind = match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let key_start = self.i;
                        self.string()?;
                        let key: String = serde_json::from_str(&self.text[key_start..self.i])
                            .map_err(|e| format!("a bad key at byte {key_start}: {e}"))?;
                        self.eat(b':')?;
                        let value = self.value(depth + 1)?;
                        members.push(Member {
                            key,
                            key_start,
                            value,
                        });
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(format!("expected `,` or `}}` at byte {}", self.i)),
                        }
                    }
                }
                Kind::Object(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(format!("expected `,` or `]` at byte {}", self.i)),
                        }
                    }
                }
                Kind::Array(items)
            }
            Some(b'"') => {
                self.string()?;
                Kind::Scalar
            }
            Some(_) => {
                while self.i < self.s.len()
                    && !matches!(
                        self.s[self.i],
                        b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
                if self.i == start {
                    return Err(format!("expected a value at byte {start}"));
                }
                Kind::Scalar
            }
            None => return Err("unexpected end of the document".into()),
        };
        Ok(Node {
            start,
            end: self.i,
            kind,
        })
    }

    fn string(&mut self) -> Result<(), String> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(format!("expected a string at byte {}", self.i));
        }
        self.i += 1;
        while let Some(&b) = self.s.get(self.i) {
            self.i += 1;
            match b {
                b'\\' => self.i += 1,
                b'"' => return Ok(()),
                _ => {}
            }
        }
        Err("an unterminated string".into())
    }
}

/// How the document is laid out: its indent unit, or none for a one-line document.
#[derive(Debug, Clone)]
pub struct Style {
    indent: Option<String>,
    /// A one-line document written with a space after `:` and `,`.
    spaced: bool,
}

impl Style {
    /// The first indented line's leading whitespace is the unit; a document with no line
    /// breaks inside is written compact.
    pub fn of(text: &str) -> Style {
        let indent = text
            .trim_end()
            .lines()
            .skip(1)
            .map(|l| &l[..l.len() - l.trim_start().len()])
            .find(|w| !w.is_empty())
            .map(str::to_string);
        let spaced = text.contains("\": ");
        Style { indent, spaced }
    }

    /// How members and items are separated on one line: `(",", ":")` or `(", ", ": ")`.
    pub fn separators(&self) -> (&'static str, &'static str) {
        if self.compact() && !self.spaced {
            (",", ":")
        } else {
            (", ", ": ")
        }
    }

    /// `value` as it would sit at a line indented by `base`.
    pub fn render(&self, value: &Value, base: &str) -> String {
        let Some(unit) = &self.indent else {
            return serde_json::to_string(value).unwrap_or_default();
        };
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        if serde::Serialize::serialize(value, &mut ser).is_err() {
            return String::new();
        }
        String::from_utf8_lossy(&out).replace('\n', &format!("\n{base}"))
    }

    /// An object of `members` in this order, at a line indented by `base` (on one line when
    /// `one_line`, as in a compact document).
    pub fn render_object(&self, members: &[(&str, Value)], base: &str, one_line: bool) -> String {
        let key = |k: &str| serde_json::to_string(k).unwrap_or_default();
        let Some(unit) = self.indent.as_deref().filter(|_| !one_line) else {
            let (sep, colon) = self.separators();
            let body: Vec<String> = members
                .iter()
                .map(|(k, v)| {
                    let v = serde_json::to_string(v).unwrap_or_default();
                    format!("{}{colon}{v}", key(k))
                })
                .collect();
            return format!("{{{}}}", body.join(sep));
        };
        let inner = format!("{base}{unit}");
        let body: Vec<String> = members
            .iter()
            .map(|(k, v)| format!("{inner}{}: {}", key(k), self.render(v, &inner)))
            .collect();
        format!("{{\n{}\n{base}}}", body.join(",\n"))
    }

    pub fn unit(&self) -> &str {
        self.indent.as_deref().unwrap_or("")
    }

    pub fn compact(&self) -> bool {
        self.indent.is_none()
    }
}

/// The whitespace a line starts with, for the line holding byte `at`.
pub fn indent_at(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// Edits by byte range, applied together.
#[derive(Default)]
pub struct Edits(Vec<(usize, usize, String)>);

impl Edits {
    pub fn replace(&mut self, start: usize, end: usize, text: String) {
        self.0.push((start, end, text));
    }

    pub fn insert(&mut self, at: usize, text: String) {
        self.0.push((at, at, text));
    }

    /// Set `key` of `object` to `value`: its value replaced where it has one, else a member
    /// added after the last, laid out like its siblings.
    pub fn set_member(
        &mut self,
        text: &str,
        style: &Style,
        object: &Node,
        key: &str,
        value: &Value,
    ) {
        self.set_member_with(text, style, object, key, &|base, one_line| {
            if one_line {
                serde_json::to_string(value).unwrap_or_default()
            } else {
                style.render(value, base)
            }
        });
    }

    /// [`Edits::set_member`] with the value rendered by `render(base indent, on one line)`.
    pub fn set_member_with(
        &mut self,
        text: &str,
        style: &Style,
        object: &Node,
        key: &str,
        render: &dyn Fn(&str, bool) -> String,
    ) {
        let one_line = style.compact() || !text[object.start..object.end].contains('\n');
        if let Some(m) = object.member(key) {
            let base = indent_at(text, m.key_start);
            self.replace(m.value.start, m.value.end, render(base, one_line));
            return;
        }
        let name = serde_json::to_string(key).unwrap_or_default();
        match object.members().last() {
            Some(last) if one_line => {
                let (sep, colon) = style.separators();
                let v = render("", true);
                self.insert(last.value.end, format!("{sep}{name}{colon}{v}"));
            }
            Some(last) => {
                let base = indent_at(text, last.key_start);
                let v = render(base, false);
                self.insert(last.value.end, format!(",\n{base}{name}: {v}"));
            }
            None => {
                let base = indent_at(text, object.start);
                let inner = format!("{base}{}", style.unit());
                let v = render(&inner, style.compact());
                let body = if style.compact() {
                    let (_, colon) = style.separators();
                    format!("{{{name}{colon}{v}}}")
                } else {
                    format!("{{\n{inner}{name}: {v}\n{base}}}")
                };
                self.replace(object.start, object.end, body);
            }
        }
    }

    /// `text` with every edit applied (line breaks as the document writes them). Edits must
    /// not overlap.
    pub fn apply(mut self, text: &str) -> String {
        self.0.sort_by_key(|(start, end, _)| (*start, *end));
        if text.contains("\r\n") {
            for (_, _, replacement) in &mut self.0 {
                *replacement = replacement.replace("\r\n", "\n").replace('\n', "\r\n");
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end, replacement) in self.0 {
            out.push_str(&text[at..start]);
            out.push_str(&replacement);
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spans_find_every_member_and_item() {
        let text = r#"{ "a": [1, {"b": "x\"y"}], "c": null }"#;
        let root = parse(text).unwrap();
        let a = root.member("a").unwrap();
        assert_eq!(&text[a.value.start..a.value.end], r#"[1, {"b": "x\"y"}]"#);
        let b = a.value.items()[1].member("b").unwrap();
        assert_eq!(&text[b.value.start..b.value.end], r#""x\"y""#);
        assert_eq!(root.member("c").unwrap().value.end, text.len() - 2);
        assert!(parse("{\"a\": 1,}").is_err());
        assert!(parse("[1] 2").is_err());
    }

    #[test]
    fn a_member_is_replaced_or_added_in_the_documents_layout() {
        let text = "{\n    \"name\": \"t\",\n    \"schema\": {\"type\": \"object\"}\n}\n";
        let root = parse(text).unwrap();
        let style = Style::of(text);
        let mut edits = Edits::default();
        edits.set_member(text, &style, &root, "schema", &json!({"type": "string"}));
        edits.set_member(text, &style, &root, "description", &json!("d"));
        assert_eq!(
            edits.apply(text),
            "{\n    \"name\": \"t\",\n    \"schema\": {\n        \"type\": \"string\"\n    },\n    \"description\": \"d\"\n}\n"
        );
        // A one-line object stays on one line; a compact document stays compact.
        let text = r#"{"name":"t"}"#;
        let root = parse(text).unwrap();
        let mut edits = Edits::default();
        edits.set_member(text, &Style::of(text), &root, "x", &json!([1]));
        assert_eq!(edits.apply(text), r#"{"name":"t","x":[1]}"#);
        // One line written with spaces keeps them.
        let text = r#"{ "name": "t" }"#;
        let root = parse(text).unwrap();
        let mut edits = Edits::default();
        edits.set_member(text, &Style::of(text), &root, "x", &json!(1));
        assert_eq!(edits.apply(text), r#"{ "name": "t", "x": 1 }"#);
    }

    #[test]
    fn a_crlf_document_keeps_its_line_breaks() {
        let text = "{\r\n  \"name\": \"t\",\r\n  \"s\": {}\r\n}\r\n";
        let root = parse(text).unwrap();
        let mut edits = Edits::default();
        edits.set_member(
            text,
            &Style::of(text),
            &root,
            "s",
            &json!({"type": "object"}),
        );
        let after = edits.apply(text);
        assert_eq!(
            after,
            "{\r\n  \"name\": \"t\",\r\n  \"s\": {\r\n    \"type\": \"object\"\r\n  }\r\n}\r\n"
        );
    }
}
