//! The conformance corpus (`conformance/` at the repository root): golden transcripts of the
//! YEP and zot wires in both directions, the small language their expected frames are written
//! in, and their replay over any pair of byte streams. `conformance/run.py` is the same
//! format's language-neutral runner; `yep doctor --conformance` replays the YEP server-side
//! transcripts compiled in here against a package's server. `conformance/README.md` is the
//! format's definition.

use crate::framing::{Frame as Line, LineBuffer};
use crate::manifest::{HookEvent, Manifest};
use crate::supervisor::{ServerSpec, SupervisorOptions};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The variables bound so far (`$var:NAME`), by name.
pub type Bindings = BTreeMap<String, Value>;

/// The longest line read from the peer: the wire's own cap.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// How long an awaited frame may take, unless the transcript says (`timeout_ms`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The YEP server-side transcripts as committed (name, text): what `yep doctor
/// --conformance` replays, those any server must pass first. A test holds this list to the
/// directory.
pub const YEP_SERVER: &[(&str, &str)] = &[
    (
        "initialize",
        include_str!("../../../conformance/yep/server/initialize.json"),
    ),
    (
        "unknown-tool",
        include_str!("../../../conformance/yep/server/unknown-tool.json"),
    ),
    (
        "unknown-method",
        include_str!("../../../conformance/yep/server/unknown-method.json"),
    ),
    (
        "malformed-line",
        include_str!("../../../conformance/yep/server/malformed-line.json"),
    ),
    (
        "shutdown",
        include_str!("../../../conformance/yep/server/shutdown.json"),
    ),
    (
        "stdin-eof",
        include_str!("../../../conformance/yep/server/stdin-eof.json"),
    ),
    (
        "tool-call",
        include_str!("../../../conformance/yep/server/tool-call.json"),
    ),
    (
        "progress",
        include_str!("../../../conformance/yep/server/progress.json"),
    ),
    (
        "cancel",
        include_str!("../../../conformance/yep/server/cancel.json"),
    ),
    (
        "hook-answers",
        include_str!("../../../conformance/yep/server/hook-answers.json"),
    ),
    (
        "hook",
        include_str!("../../../conformance/yep/server/hook.json"),
    ),
    (
        "ui-ask",
        include_str!("../../../conformance/yep/server/ui-ask.json"),
    ),
    (
        "command",
        include_str!("../../../conformance/yep/server/command.json"),
    ),
    (
        "dynamic-prompt",
        include_str!("../../../conformance/yep/server/dynamic-prompt.json"),
    ),
];

/// The YEP server-side transcripts, parsed.
pub fn yep_server() -> Result<Vec<Transcript>, TranscriptError> {
    YEP_SERVER
        .iter()
        .map(|(name, text)| Transcript::parse(name, text))
        .collect()
}

/// The wire a transcript speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Yep,
    Zot,
}

/// Which side of the wire is under test; the runner plays the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A server (an SDK's, a package's): the runner plays the host.
    Server,
    /// A host: the runner plays the server the host spawns.
    Host,
}

/// One golden transcript.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The file's stem.
    pub name: String,
    pub wire: Wire,
    pub peer: Side,
    pub description: String,
    /// What a server's manifest must declare for the transcript to apply to it.
    pub requires: Requires,
    /// Methods (YEP) or types (zot) of frames without an id the peer may send at any point.
    pub allow: Vec<String>,
    /// How long an awaited frame may take, when the transcript says.
    pub timeout: Option<Duration>,
    pub steps: Vec<Step>,
    /// Host-side: the manifest facet the host under test is given for the runner's server.
    pub manifest: Option<Value>,
    /// Host-side: what the host's embedder does, in order, and what comes of it.
    pub actions: Vec<Value>,
}

/// One step of a transcript.
#[derive(Debug, Clone)]
pub enum Step {
    /// A frame to write (its `$var:NAME`s replaced).
    Send(Value),
    /// A line to write as it is: not necessarily a frame.
    SendRaw(String),
    /// Frames the peer must write next, in order or (`unordered`) in any order.
    Expect { frames: Vec<Value>, unordered: bool },
    /// End the peer's input.
    Close,
    /// The peer's output must end.
    ExpectEof,
}

/// What a server's manifest must declare for a transcript to apply to it.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct Requires {
    pub tools: Vec<String>,
    /// Hook events (`pre_tool_use`, `post_tool_use`) it subscribes to.
    pub hooks: Vec<String>,
    pub commands: Vec<String>,
    pub ui_ask: bool,
    pub dynamic_prompt: bool,
}

impl Requires {
    /// What `manifest` lacks of these, one phrase each (``tool `count` ``); empty when the
    /// transcript applies.
    pub fn unmet(&self, manifest: &Manifest) -> Vec<String> {
        let f = &manifest.yolop;
        let mut lacks = Vec::new();
        for tool in &self.tools {
            if manifest.tool(tool).is_none() {
                lacks.push(format!("tool `{tool}`"));
            }
        }
        for hook in &self.hooks {
            let event = match hook.as_str() {
                "pre_tool_use" => Some(HookEvent::PreToolUse),
                "post_tool_use" => Some(HookEvent::PostToolUse),
                _ => None,
            };
            if !f.hooks.iter().any(|h| Some(h.event) == event) {
                lacks.push(format!("a `{hook}` hook"));
            }
        }
        for command in &self.commands {
            if !f.commands.iter().any(|c| &c.name == command) {
                lacks.push(format!("command `{command}`"));
            }
        }
        if self.ui_ask && !f.ui_ask {
            lacks.push("`ui_ask`".into());
        }
        if self.dynamic_prompt && !f.dynamic_prompt {
            lacks.push("`dynamic_prompt`".into());
        }
        lacks
    }
}

/// A transcript that is itself wrong: not the peer's fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TranscriptError(String);

fn invalid(message: impl Into<String>) -> TranscriptError {
    TranscriptError(message.into())
}

impl Transcript {
    /// Parse transcript `name` from its JSON text, checking every step and pattern.
    pub fn parse(name: &str, text: &str) -> Result<Transcript, TranscriptError> {
        let fail = |why: String| invalid(format!("transcript {name}: {why}"));
        let doc: Value = serde_json::from_str(text).map_err(|e| fail(format!("not JSON: {e}")))?;
        let Value::Object(doc) = doc else {
            return Err(fail("a transcript is an object with `steps`".into()));
        };
        let wire = match doc.get("wire").and_then(Value::as_str) {
            Some("yep") => Wire::Yep,
            Some("zot") => Wire::Zot,
            _ => return Err(fail("`wire` must be \"yep\" or \"zot\"".into())),
        };
        let peer = match doc.get("peer").and_then(Value::as_str) {
            Some("server") => Side::Server,
            Some("host") => Side::Host,
            _ => return Err(fail("`peer` must be \"server\" or \"host\"".into())),
        };
        let strings = |key: &str| -> Result<Vec<String>, TranscriptError> {
            match doc.get(key) {
                None => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|_| fail(format!("`{key}` must be an array of strings"))),
            }
        };
        let requires = match doc.get("requires") {
            None => Requires::default(),
            Some(v) => {
                serde_json::from_value(v.clone()).map_err(|e| fail(format!("`requires`: {e}")))?
            }
        };
        let timeout = match doc.get("timeout_ms") {
            None => None,
            Some(v) => {
                Some(Duration::from_millis(v.as_u64().ok_or_else(|| {
                    fail("`timeout_ms` must be a whole number".into())
                })?))
            }
        };
        let Some(Value::Array(raw_steps)) = doc.get("steps") else {
            return Err(fail("a transcript is an object with `steps`".into()));
        };
        let mut steps = Vec::with_capacity(raw_steps.len());
        for (i, step) in raw_steps.iter().enumerate() {
            steps.push(parse_step(step).map_err(|why| fail(format!("step {}: {why}", i + 1)))?);
        }
        let actions = match doc.get("actions") {
            None => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(fail("`actions` must be an array".into())),
        };
        Ok(Transcript {
            name: name.to_string(),
            wire,
            peer,
            description: doc
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            requires,
            allow: strings("allow")?,
            timeout,
            steps,
            manifest: doc.get("manifest").cloned(),
            actions,
        })
    }

    /// Read and parse the transcript at `path`; its name is the file's stem.
    pub fn load(path: &std::path::Path) -> Result<Transcript, TranscriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("failed to read {}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Transcript::parse(&name, &text)
    }
}

const STEP_KINDS: [&str; 5] = ["send", "send_raw", "expect", "close", "expect_eof"];

fn parse_step(step: &Value) -> Result<Step, TranscriptError> {
    let Value::Object(step) = step else {
        return Err(invalid("a step is an object"));
    };
    let kinds: Vec<&str> = STEP_KINDS
        .iter()
        .copied()
        .filter(|k| step.contains_key(*k))
        .collect();
    let [kind] = kinds[..] else {
        return Err(invalid(format!(
            "must have exactly one of {}",
            STEP_KINDS.join(", ")
        )));
    };
    let body = &step[kind];
    Ok(match kind {
        "send" => {
            if !body.is_object() {
                return Err(invalid("sends a frame (an object)"));
            }
            check_template(body, "$")?;
            Step::Send(body.clone())
        }
        "send_raw" => Step::SendRaw(
            body.as_str()
                .ok_or_else(|| invalid("send_raw takes a string"))?
                .to_string(),
        ),
        "expect" => {
            let frames = match body {
                Value::Array(frames) => frames.clone(),
                frame => vec![frame.clone()],
            };
            for frame in &frames {
                if !frame.is_object() {
                    return Err(invalid("expects a frame (an object)"));
                }
                check_pattern(frame)?;
            }
            let unordered = step
                .get("unordered")
                .is_some_and(|u| u.as_bool() == Some(true));
            Step::Expect { frames, unordered }
        }
        "close" => Step::Close,
        _ => Step::ExpectEof,
    })
}

/// Where a pattern and a value part: the path, what was expected there and what was found
/// (`None`: nothing, the member is absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub path: String,
    pub expected: Value,
    pub got: Option<Value>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let got = match &self.got {
            Some(v) => preview(&v.to_string()),
            None => "nothing (absent)".into(),
        };
        write!(
            f,
            "at {}: expected {}, got {got}",
            self.path,
            preview(&self.expected.to_string())
        )
    }
}

/// The operator of an operator object (`{"$includes": …}`), and its argument.
fn operator(p: &Value) -> Option<(&str, &Value)> {
    let Value::Object(m) = p else { return None };
    if m.len() != 1 {
        return None;
    }
    let (key, arg) = m.iter().next()?;
    (key.starts_with('$') && !key.starts_with("$$")).then_some((key.as_str(), arg))
}

/// Whether `v` is of type matcher `name`; `None` when `name` is no type matcher.
fn of_type(name: &str, v: &Value) -> Option<bool> {
    Some(match name {
        "$string" => v.is_string(),
        "$number" => v.is_number(),
        "$integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "$boolean" => v.is_boolean(),
        "$object" => v.is_object(),
        "$array" => v.is_array(),
        _ => return None,
    })
}

/// A `$var:NAME` string's name.
fn var_name(s: &str) -> Option<&str> {
    s.strip_prefix("$var:").filter(|n| !n.is_empty())
}

/// JSON equality: `1` equals `1.0`, `true` is not `1`.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| json_equal(v, w))
        }
        _ => a == b,
    }
}

/// Whether pattern `p` is valid: every `$` string and operator is one the language has.
pub fn check_pattern(p: &Value) -> Result<(), TranscriptError> {
    check_pattern_at(p, "$")
}

fn check_pattern_at(p: &Value, path: &str) -> Result<(), TranscriptError> {
    if let Value::String(s) = p
        && s.starts_with('$')
        && !s.starts_with("$$")
    {
        let known = s == "$absent"
            || s == "$any"
            || of_type(s, &Value::Null).is_some()
            || var_name(s).is_some();
        return match known {
            true => Ok(()),
            false => Err(invalid(format!("unknown matcher \"{s}\" at {path}"))),
        };
    }
    match (operator(p), p) {
        (Some(("$includes", Value::Array(items))), _) => {
            for (i, item) in items.iter().enumerate() {
                check_pattern_at(item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Some(("$includes", _)), _) => Err(invalid(format!("$includes takes an array, at {path}"))),
        (Some(("$prefix", Value::String(_))), _) => Ok(()),
        (Some(("$prefix", _)), _) => Err(invalid(format!("$prefix takes a string, at {path}"))),
        (Some((op, _)), _) => Err(invalid(format!("unknown matcher {op} at {path}"))),
        (None, Value::Object(m)) => {
            for (k, v) in m {
                check_pattern_at(v, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (None, Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                check_pattern_at(v, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `t`, a frame to send, has only `$var:NAME` and `$$…` for `$` strings.
fn check_template(t: &Value, path: &str) -> Result<(), TranscriptError> {
    match t {
        Value::String(s) if s.starts_with('$') && !s.starts_with("$$") => match var_name(s) {
            Some(_) => Ok(()),
            None => Err(invalid(format!(
                "\"{s}\": only $var:NAME and $$… may be sent, at {path}"
            ))),
        },
        Value::Object(m) => m
            .iter()
            .try_for_each(|(k, v)| check_template(v, &format!("{path}.{k}"))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_template(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

/// Whether `actual` (`None`: absent) matches `pattern`, binding the `$var:NAME`s it meets
/// into `vars` (on success only); else where they part.
pub fn matches(
    pattern: &Value,
    actual: Option<&Value>,
    vars: &mut Bindings,
) -> Result<(), Mismatch> {
    let mut trial = vars.clone();
    match_at(pattern, actual, &mut trial, "$")?;
    *vars = trial;
    Ok(())
}

fn match_at(p: &Value, a: Option<&Value>, vars: &mut Bindings, path: &str) -> Result<(), Mismatch> {
    let miss = || Err(mismatch(path, p, a));
    if let Value::String(s) = p
        && s.starts_with('$')
        && !s.starts_with("$$")
    {
        return match_word(s, p, a, vars, path);
    }
    let Some(a) = a else { return miss() };
    match (operator(p), p) {
        (Some(("$includes", Value::Array(items))), _) => match_includes(p, items, a, vars, path),
        (Some(("$prefix", Value::String(prefix))), _) => match a {
            Value::String(s) if s.starts_with(prefix.as_str()) => Ok(()),
            _ => miss(),
        },
        (Some(_), _) => miss(),
        (None, Value::Object(pattern)) => {
            let Value::Object(actual) = a else {
                return miss();
            };
            match_object(pattern, actual, vars, path)
        }
        (None, Value::Array(pattern)) => {
            let Value::Array(actual) = a else {
                return miss();
            };
            if actual.len() != pattern.len() {
                return miss();
            }
            for (i, (sub, el)) in pattern.iter().zip(actual).enumerate() {
                match_at(sub, Some(el), vars, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (None, Value::String(s)) => match s.strip_prefix('$') {
            // `$$…` is the literal `$…`.
            Some(literal) if a.as_str() == Some(literal) => Ok(()),
            Some(_) => miss(),
            None if json_equal(p, a) => Ok(()),
            None => miss(),
        },
        (None, _) if json_equal(p, a) => Ok(()),
        (None, _) => miss(),
    }
}

/// Where pattern `p` and `a` (`None`: absent) part, at `path`.
fn mismatch(path: &str, p: &Value, a: Option<&Value>) -> Mismatch {
    Mismatch {
        path: path.to_string(),
        expected: p.clone(),
        got: a.cloned(),
    }
}

/// Pattern `p`, the word `s` of the language (`$absent`, `$any`, a type, `$var:NAME`),
/// against `a` at `path`: a `$var:NAME` met the first time is bound into `vars`.
fn match_word(
    s: &str,
    p: &Value,
    a: Option<&Value>,
    vars: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    let miss = || Err(mismatch(path, p, a));
    if s == "$absent" {
        return if a.is_none() { Ok(()) } else { miss() };
    }
    let Some(a) = a else { return miss() };
    if s == "$any" {
        return Ok(());
    }
    if let Some(ok) = of_type(s, a) {
        return if ok { Ok(()) } else { miss() };
    }
    let Some(name) = var_name(s) else {
        // Not in the language (`check_pattern` refuses it): matches nothing.
        return miss();
    };
    match vars.get(name) {
        Some(bound) if json_equal(bound, a) => Ok(()),
        Some(bound) => Err(Mismatch {
            path: path.to_string(),
            expected: bound.clone(),
            got: Some(a.clone()),
        }),
        None => {
            vars.insert(name.to_string(), a.clone());
            Ok(())
        }
    }
}

/// Pattern `p`, `{"$includes": items}`, against `a`: an array with an element of its own for
/// each item.
fn match_includes(
    p: &Value,
    items: &[Value],
    a: &Value,
    vars: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    let Value::Array(elements) = a else {
        return Err(mismatch(path, p, Some(a)));
    };
    let mut used = vec![false; elements.len()];
    for item in items {
        let fit = elements.iter().enumerate().find_map(|(j, el)| {
            if used[j] {
                return None;
            }
            let mut trial = vars.clone();
            match_at(item, Some(el), &mut trial, &format!("{path}[{j}]"))
                .ok()
                .map(|()| (j, trial))
        });
        match fit {
            Some((j, trial)) => {
                used[j] = true;
                *vars = trial;
            }
            None => {
                return Err(Mismatch {
                    path: path.to_string(),
                    expected: serde_json::json!({ "$includes": [item] }),
                    got: Some(a.clone()),
                });
            }
        }
    }
    Ok(())
}

/// An object pattern against object `actual`: each key's pattern against its value (a key
/// ending in `?` may be absent; `$$key` is the literal key `$key`).
fn match_object(
    pattern: &serde_json::Map<String, Value>,
    actual: &serde_json::Map<String, Value>,
    vars: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    for (key, sub) in pattern {
        let (name, optional) = match key.strip_suffix('?') {
            Some(name) => (name, true),
            None => (key.as_str(), false),
        };
        let name = match name.strip_prefix('$') {
            Some(rest) if rest.starts_with('$') => rest,
            _ => name,
        };
        let got = actual.get(name);
        if optional && got.is_none() {
            continue;
        }
        match_at(sub, got, vars, &format!("{path}.{name}"))?;
    }
    Ok(())
}

/// Frame `t` to send: its `$var:NAME`s replaced by their values, `$$…` unescaped.
pub fn substitute(t: &Value, vars: &Bindings) -> Result<Value, TranscriptError> {
    Ok(match t {
        Value::String(s) if s.starts_with("$$") => Value::String(s[1..].to_string()),
        Value::String(s) if s.starts_with('$') => {
            let name = var_name(s)
                .ok_or_else(|| invalid(format!("\"{s}\": only $var:NAME and $$… may be sent")))?;
            vars.get(name)
                .cloned()
                .ok_or_else(|| invalid(format!("\"{s}\" is not bound yet")))?
        }
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                let key = match k.strip_prefix('$') {
                    Some(rest) if rest.starts_with('$') => rest.to_string(),
                    _ => k.clone(),
                };
                out.insert(key, substitute(v, vars)?);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute(v, vars))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// Where and why a replay stopped: the peer did not do what the transcript says (or the
/// transcript could not be followed).
#[derive(Debug, thiserror::Error)]
#[error("{at}: {message}")]
pub struct Failure {
    /// The step (`step 5`, or `step 5, frame 2 of 4` within an expect of several) and its
    /// kind.
    pub at: String,
    /// What happened, then the expected pattern(s) and the frame received, a line each.
    pub message: String,
}

/// A long text cut for a report: the first 300 characters.
fn preview(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// What went wrong on the peer's streams.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("the peer wrote a {0}-byte line, over the {MAX_FRAME_BYTES}-byte cap")]
    TooLong(usize),
    #[error("the peer wrote a line that is not JSON: {0}")]
    NotJson(String),
    #[error("the peer wrote a line that is not a JSON object: {0}")]
    NotObject(String),
    #[error("failed to read from the peer: {0}")]
    Read(std::io::Error),
    #[error("failed to write to the peer: {0}")]
    Write(std::io::Error),
    #[error("the peer's input is closed already")]
    Closed,
}

/// Frames read from the peer, a line each.
struct Frames<R> {
    reader: R,
    lines: LineBuffer,
    eof: bool,
}

enum Next {
    Frame(Value),
    Eof,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    /// The next frame, or the end of the peer's output; a line that is no JSON object fails.
    async fn next(&mut self) -> Result<Next, StreamError> {
        // A line as owned bytes, or the length of one over the cap.
        fn owned(line: Line<'_>) -> Result<Vec<u8>, usize> {
            match line {
                Line::Line(bytes) => Ok(bytes.to_vec()),
                Line::TooLong(n) => Err(n),
            }
        }
        loop {
            let line = match self.lines.next_frame().map(owned) {
                Some(line) => Some(line),
                None if self.eof => self.lines.finish().map(owned),
                None => None,
            };
            match line {
                Some(Err(n)) => {
                    return Err(StreamError::TooLong(n));
                }
                Some(Ok(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {}
                Some(Ok(bytes)) => {
                    let text = String::from_utf8_lossy(&bytes);
                    return match serde_json::from_str::<Value>(&text) {
                        Ok(frame @ Value::Object(_)) => Ok(Next::Frame(frame)),
                        Ok(_) => Err(StreamError::NotObject(preview(&text))),
                        Err(_) => Err(StreamError::NotJson(preview(&text))),
                    };
                }
                None if self.eof => return Ok(Next::Eof),
                None => {
                    let read = self.reader.read_buf(self.lines.buf_mut(16 * 1024)).await;
                    match read {
                        Ok(0) => self.eof = true,
                        Ok(_) => {}
                        Err(e) => return Err(StreamError::Read(e)),
                    }
                }
            }
        }
    }
}

/// A frame with no id whose method (YEP) or type (zot) `allow` names.
fn skippable(frame: &Value, allow: &[String]) -> bool {
    let kind = frame
        .get("method")
        .or_else(|| frame.get("type"))
        .and_then(Value::as_str);
    frame.get("id").is_none() && kind.is_some_and(|k| allow.iter().any(|a| a == k))
}

/// Replay `t` over the peer's output `reader` and input `writer`, with `vars` bound before
/// the first step. `timeout` overrides the transcript's per-frame wait.
pub async fn replay<R, W>(
    t: &Transcript,
    reader: R,
    writer: W,
    mut vars: Bindings,
    timeout: Option<Duration>,
) -> Result<(), Failure>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let timeout = timeout.or(t.timeout).unwrap_or(DEFAULT_TIMEOUT);
    let mut frames = Frames {
        reader,
        lines: LineBuffer::new(MAX_FRAME_BYTES),
        eof: false,
    };
    let mut writer = Some(writer);
    for (n, step) in t.steps.iter().enumerate() {
        let n = n + 1;
        let fail = |kind: &str, message: String| Failure {
            at: format!("step {n} ({kind})"),
            message,
        };
        match step {
            Step::Send(template) => {
                let frame = substitute(template, &vars).map_err(|e| fail("send", e.0))?;
                write_line(&mut writer, &frame.to_string())
                    .await
                    .map_err(|e| fail("send", e.to_string()))?;
            }
            Step::SendRaw(text) => write_line(&mut writer, text)
                .await
                .map_err(|e| fail("send_raw", e.to_string()))?,
            Step::Close => {
                if let Some(mut w) = writer.take() {
                    let _ = w.shutdown().await;
                }
            }
            Step::ExpectEof => expect_eof(&mut frames, timeout, &t.allow)
                .await
                .map_err(|message| fail("expect_eof", message))?,
            Step::Expect {
                frames: wanted,
                unordered,
            } => {
                expect(
                    &mut frames,
                    wanted,
                    *unordered,
                    &mut vars,
                    timeout,
                    &t.allow,
                    n,
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// An `expect_eof` step: the end of the peer's output within `timeout`, skipping only the
/// frames `allow` names; else why not.
async fn expect_eof<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
    timeout: Duration,
    allow: &[String],
) -> Result<(), String> {
    // One deadline for the step: frames it may skip do not push it out.
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let next = tokio::time::timeout_at(deadline, frames.next())
            .await
            .map_err(|_| {
                format!(
                    "the peer's output did not end within {} ms",
                    timeout.as_millis()
                )
            })?
            .map_err(|e| e.to_string())?;
        match next {
            Next::Eof => return Ok(()),
            Next::Frame(f) if skippable(&f, allow) => {}
            Next::Frame(f) => {
                return Err(format!(
                    "expected the end of its output, got {}",
                    preview(&f.to_string())
                ));
            }
        }
    }
}

/// Step `n`, an `expect`: each of `wanted` matched by the peer's next frames (in order, or
/// in any order when `unordered`), binding their `$var:NAME`s into `vars`.
async fn expect<R: AsyncRead + Unpin>(
    frames: &mut Frames<R>,
    wanted: &[Value],
    unordered: bool,
    vars: &mut Bindings,
    timeout: Duration,
    allow: &[String],
    n: usize,
) -> Result<(), Failure> {
    let mut pending: Vec<&Value> = wanted.iter().collect();
    while !pending.is_empty() {
        let at = match wanted.len() {
            1 => format!("step {n} (expect)"),
            len => format!(
                "step {n}, frame {} of {len} (expect)",
                len - pending.len() + 1
            ),
        };
        let candidates = if unordered { pending.len() } else { 1 };
        let expected = || {
            pending[..candidates]
                .iter()
                .map(|p| preview(&p.to_string()))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let fail = |message: String| Failure {
            at: at.clone(),
            message,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = match tokio::time::timeout_at(deadline, frames.next()).await {
                Err(_) => {
                    return Err(fail(format!(
                        "nothing within {} ms; expected {}",
                        timeout.as_millis(),
                        expected()
                    )));
                }
                Ok(next) => next.map_err(|e| fail(e.to_string()))?,
            };
            let frame = match next {
                Next::Eof => {
                    return Err(fail(format!(
                        "the peer's output ended; expected {}",
                        expected()
                    )));
                }
                Next::Frame(frame) => frame,
            };
            let mut misses = Vec::new();
            let mut hit = None;
            for (i, p) in pending[..candidates].iter().enumerate() {
                match matches(p, Some(&frame), vars) {
                    Ok(()) => {
                        hit = Some(i);
                        break;
                    }
                    Err(m) => misses.push((*p, m)),
                }
            }
            if let Some(i) = hit {
                pending.remove(i);
                break;
            }
            if skippable(&frame, allow) {
                continue;
            }
            return Err(fail(mismatch_message(&misses, &frame)));
        }
    }
    Ok(())
}

/// Why `frame` matched none of the candidates: the first miss, then each expected frame
/// (with its miss when there were several) and what was received.
fn mismatch_message(misses: &[(&Value, Mismatch)], frame: &Value) -> String {
    let mut message = misses[0].1.to_string();
    for (p, m) in misses {
        message.push_str(&format!("\n  expected: {}", preview(&p.to_string())));
        if misses.len() > 1 {
            message.push_str(&format!("\n    {m}"));
        }
    }
    message.push_str(&format!("\n  received: {}", preview(&frame.to_string())));
    message
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &mut Option<W>,
    text: &str,
) -> Result<(), StreamError> {
    let Some(w) = writer.as_mut() else {
        return Err(StreamError::Closed);
    };
    let mut line = Vec::with_capacity(text.len() + 1);
    line.extend_from_slice(text.as_bytes());
    line.push(b'\n');
    let written = async {
        w.write_all(&line).await?;
        w.flush().await
    };
    written.await.map_err(StreamError::Write)
}

/// The variables every replay starts with: the workspace and the config the server is
/// given, as `initialize` sends them.
pub fn bindings(spec: &ServerSpec) -> Bindings {
    let mut vars = Bindings::new();
    vars.insert(
        "workspace_root".into(),
        Value::String(spec.workspace_root.to_string_lossy().into_owned()),
    );
    vars.insert("config".into(), spec.config.clone());
    vars
}

/// Replay server-side transcript `t` against a fresh server of `spec`, spawned exactly as
/// the supervisor spawns it under `opts` (its sandbox, env, cwd and log). A failure adds the
/// server's last stderr lines.
pub async fn replay_server(
    t: &Transcript,
    spec: &ServerSpec,
    opts: &SupervisorOptions,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let spawn = spec.spawn_spec(&spec.workspace_root, spec.env.clone(), opts, None);
    let spawned = crate::process::spawn(&spawn).map_err(|e| Failure {
        at: "spawn".into(),
        message: format!("cannot spawn `{}`: {}", spec.command, e.source),
    })?;
    let crate::process::Spawned {
        process,
        stdin,
        stdout,
    } = spawned;
    let outcome = replay(t, stdout, stdin, bindings(spec), timeout).await;
    // Its input is closed by now (the replay owned it): it exits, or is made to.
    let _ = process
        .terminate_in(Duration::from_secs(1), Duration::from_millis(500))
        .await;
    outcome.map_err(|mut failure| {
        let tail = process.stderr.lines();
        let tail = &tail[tail.len().saturating_sub(5)..];
        if !tail.is_empty() {
            failure.message.push_str("\n  its last stderr lines:");
            for line in tail {
                failure
                    .message
                    .push_str(&format!("\n    {}", preview(line)));
            }
        }
        failure
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repo() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn the_matcher_agrees_with_the_shared_cases() {
        let text = std::fs::read_to_string(repo().join("conformance/matching.json")).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let mut wrong = Vec::new();
        for (i, case) in doc["cases"].as_array().unwrap().iter().enumerate() {
            let mut vars: Bindings =
                serde_json::from_value(case.get("bound").cloned().unwrap_or(json!({}))).unwrap();
            let got = match check_pattern(&case["pattern"]) {
                Err(_) => json!("error"),
                Ok(()) => json!(matches(&case["pattern"], Some(&case["value"]), &mut vars).is_ok()),
            };
            let binds_ok = match case.get("binds") {
                Some(binds) if got == json!(true) => json_equal(&json!(vars), binds),
                _ => true,
            };
            if got != case["matches"] || !binds_ok {
                wrong.push(format!(
                    "case {} ({}): got {got}, bindings {vars:?}",
                    i + 1,
                    case["note"]
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_compiled_in_corpus_is_the_directory() {
        let dir = repo().join("conformance/yep/server");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = YEP_SERVER.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "YEP_SERVER must list conformance/yep/server/*.json"
        );
        for t in yep_server().unwrap() {
            assert_eq!((t.wire, t.peer), (Wire::Yep, Side::Server), "{}", t.name);
        }
    }

    #[test]
    fn every_transcript_in_the_corpus_parses() {
        let mut n = 0;
        for sub in ["yep/server", "yep/host", "zot/server", "zot/host"] {
            for entry in std::fs::read_dir(repo().join("conformance").join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let t = Transcript::load(&path).unwrap_or_else(|e| panic!("{e}"));
                let (wire, peer) = sub.split_once('/').unwrap();
                assert_eq!(
                    format!("{:?}", t.wire).to_lowercase(),
                    wire,
                    "{}",
                    path.display()
                );
                assert_eq!(
                    format!("{:?}", t.peer).to_lowercase(),
                    peer,
                    "{}",
                    path.display()
                );
                assert!(
                    !t.description.is_empty(),
                    "{} has no description",
                    path.display()
                );
                n += 1;
            }
        }
        assert!(n >= 30, "only {n} transcripts");
    }

    #[test]
    fn a_send_with_an_unknown_dollar_string_is_refused() {
        let err = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "steps": [{"send": {"id": "$string"}}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("only $var:NAME"), "{err}");
        let err = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "steps": [{"expect": {"id": "$strnig"}}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown matcher"), "{err}");
    }

    #[test]
    fn substitution_fills_bound_variables_and_unescapes() {
        let mut vars = Bindings::new();
        vars.insert("ask".into(), json!(3));
        let sent = substitute(
            &json!({"id": "$var:ask", "text": "$$HOME", "$$ref": [ "$var:ask" ]}),
            &vars,
        )
        .unwrap();
        assert_eq!(sent, json!({"id": 3, "text": "$HOME", "$ref": [3]}));
        assert!(substitute(&json!({"id": "$var:nope"}), &vars).is_err());
    }

    #[tokio::test]
    async fn a_replay_fails_with_the_path_the_expected_frame_and_the_received_one() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "allow": ["log"], "steps": [
                {"send": {"id": 1, "method": "tool/call"}},
                {"expect": {"id": 1, "result": {"echoed": "hello"}}}
            ]}"#,
        )
        .unwrap();
        let peer_out =
            b"{\"method\":\"log\",\"params\":{}}\n{\"id\":1,\"result\":{\"echoed\":\"hi\"}}\n";
        let mut sent = Vec::new();
        let err = replay(&t, &peer_out[..], &mut sent, Bindings::new(), None)
            .await
            .unwrap_err();
        assert_eq!(err.at, "step 2 (expect)");
        assert!(
            err.message
                .starts_with(r#"at $.result.echoed: expected "hello", got "hi""#),
            "{err}"
        );
        assert!(
            err.message
                .contains(r#"received: {"id":1,"result":{"echoed":"hi"}}"#),
            "{err}"
        );
        assert_eq!(sent, b"{\"id\":1,\"method\":\"tool/call\"}\n");
    }

    #[tokio::test]
    async fn unordered_frames_match_in_any_order_and_bind_ids() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "host", "steps": [
                {"expect": [{"id": "$var:a", "method": "a"}, {"id": "$var:b", "method": "b"}], "unordered": true},
                {"send": {"id": "$var:b", "result": {}}},
                {"expect_eof": true}
            ]}"#,
        )
        .unwrap();
        let peer_out = b"{\"id\":7,\"method\":\"b\"}\n\n{\"id\":8,\"method\":\"a\"}\n";
        let mut sent = Vec::new();
        replay(&t, &peer_out[..], &mut sent, Bindings::new(), None)
            .await
            .unwrap();
        assert_eq!(sent, b"{\"id\":7,\"result\":{}}\n");
    }

    #[tokio::test]
    async fn a_peer_that_floods_frames_it_may_skip_still_fails_at_the_timeout() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "yep", "peer": "server", "allow": ["log"], "steps": [{"expect": {"id": 1}}]}"#,
        )
        .unwrap();
        let (mut flood, out) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            while flood.write_all(b"{\"method\":\"log\"}\n").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let err = replay(
            &t,
            out,
            tokio::io::sink(),
            Bindings::new(),
            Some(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
        assert!(err.message.starts_with("nothing within 100 ms"), "{err}");
    }

    #[tokio::test]
    async fn a_frame_that_never_comes_fails_at_the_timeout() {
        let t = Transcript::parse(
            "t",
            r#"{"wire": "zot", "peer": "server", "steps": [{"expect": {"type": "hello"}}]}"#,
        )
        .unwrap();
        let (_keep, quiet) = tokio::io::duplex(64);
        let err = replay(
            &t,
            quiet,
            tokio::io::sink(),
            Bindings::new(),
            Some(Duration::from_millis(50)),
        )
        .await
        .unwrap_err();
        assert!(err.message.starts_with("nothing within 50 ms"), "{err}");
    }
}
