//! The language a transcript's expected frames are written in (`$any`, `$string`, `$var:NAME`,
//! `$absent`, `$includes`, `$prefix`, `$$…`): checking a pattern or a frame to send, matching a
//! frame against a pattern, and filling in a frame to send.

use super::{Bindings, TranscriptError, invalid, preview};
use serde_json::{Map, Value};

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
pub(super) fn check_template(t: &Value, path: &str) -> Result<(), TranscriptError> {
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
