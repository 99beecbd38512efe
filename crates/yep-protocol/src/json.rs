//! Writing a `Value` as serde_json writes it, byte for byte, faster where a tool result is big.
//!
//! serde_json checks a string for bytes to escape one byte at a time (about 0.35 ns a byte, 23 µs
//! for a 64 KiB result, on each side of a call). Here a string is checked 32 bytes at a time, in
//! a loop the compiler vectorises, and only a chunk that holds a byte to escape is looked into.
//! A string dense with escapes (JSON text inside a string) gains nothing from that, so it is
//! handed to serde_json as it is; so are short ones. Everything but strings is serde_json's own.

use serde_json::Value;

/// Strings shorter than this go to serde_json: the chunked scan pays off only past a few chunks.
const SHORT: usize = 64;

/// How many leading bytes decide whether a string is dense with escapes.
const SAMPLE: usize = 256;

/// More than one byte in this many needing escape (in the sample) counts as dense.
const DENSE: usize = 16;

const CHUNK: usize = 32;
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// `value` as one line of JSON, the same text `serde_json::to_string` makes.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// Append `value`'s JSON text to `out`, the same bytes `serde_json::to_writer` writes.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => serde_json_into(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

fn serde_json_into<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing a number or a string into a Vec cannot fail.
    serde_json::to_writer(&mut *out, value).expect("writing JSON into memory");
}

/// Whether serde_json escapes this byte: a control character, `"` or `\`.
#[inline(always)]
fn escapes(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Each lane's high bit set where its byte may need escaping. The lowest set lane is exact and
/// none is missed; a lane above a set one may be set falsely (a borrow), so each is checked.
#[inline(always)]
fn candidates(x: u64) -> u64 {
    let below = x.wrapping_sub(ONES * 0x20);
    let quote = (x ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES);
    let backslash = (x ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
    // `!x` keeps lanes whose byte is ASCII, as every byte that needs escaping is.
    (below | quote | backslash) & !x & HIGH
}

/// The letter after the backslash for each byte that needs one (`u`: `\u00XX`), as serde_json
/// writes it.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

#[inline(always)]
fn escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPE[b as usize] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[(b >> 4) as usize],
            HEX[(b & 15) as usize],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

/// Whether more than one byte in [`DENSE`] of `sample` needs escaping. Counted a chunk at a
/// time in byte lanes (a chunk's count fits in a byte), the loop the compiler vectorises; a
/// count widened to `usize` per byte took longer than serde_json's whole write.
#[inline(always)]
fn dense(sample: &[u8]) -> bool {
    let count: usize = sample
        .chunks(CHUNK)
        .map(|chunk| usize::from(chunk.iter().fold(0u8, |n, &b| n + u8::from(escapes(b)))))
        .sum();
    count * DENSE > sample.len()
}

/// Append `s` as a JSON string, the same bytes serde_json writes.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.len() < SHORT || dense(&bytes[..bytes.len().min(SAMPLE)]) {
        return serde_json_into(out, s);
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Bytes before `clean` are written (or escaped) already.
    let mut clean = 0;
    let mut chunks = bytes.chunks_exact(CHUNK);
    for (n, chunk) in chunks.by_ref().enumerate() {
        // No early exit inside the chunk: this is the loop that vectorises.
        if !chunk.iter().fold(false, |any, &b| any | escapes(b)) {
            continue;
        }
        for (w, word) in chunk.chunks_exact(8).enumerate() {
            let mut lanes = candidates(u64::from_le_bytes(word.try_into().expect("8 bytes")));
            while lanes != 0 {
                let at = n * CHUNK + w * 8 + (lanes.trailing_zeros() / 8) as usize;
                lanes &= lanes - 1;
                if escapes(bytes[at]) {
                    out.extend_from_slice(&bytes[clean..at]);
                    escape(out, bytes[at]);
                    clean = at + 1;
                }
            }
        }
    }
    let tail = bytes.len() - chunks.remainder().len();
    for (j, &b) in chunks.remainder().iter().enumerate() {
        if escapes(b) {
            out.extend_from_slice(&bytes[clean..tail + j]);
            escape(out, b);
            clean = tail + j + 1;
        }
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same(value: &Value) {
        let ours = to_string(value);
        let theirs = serde_json::to_string(value).unwrap();
        assert!(ours == theirs, "differs from serde_json for {theirs:.200}");
    }

    /// Every byte that needs escaping, and some that look close (DEL, `/`, multi-byte
    /// characters whose continuation bytes have the high bit set), at every offset across a
    /// chunk boundary, in strings long enough to take the chunked path.
    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let specials: Vec<String> = (0u8..0x20)
            .map(|b| char::from(b).to_string())
            .chain(["\"", "\\", "/", "\u{7f}", "é", "€", "😀", "\u{2028}"].map(String::from))
            .collect();
        for special in &specials {
            for offset in 0..(2 * CHUNK + 3) {
                let mut s = "a".repeat(offset);
                s.push_str(special);
                s.push_str(&"b".repeat(3 * CHUNK));
                same(&json!(s));
                // Two in a row, and one last.
                same(&json!(format!("{s}{special}{special}")));
            }
        }
    }

    #[test]
    fn dense_short_and_nested_values_are_written_as_serde_json_writes_them() {
        let pretty = serde_json::to_string_pretty(&json!({"rows": (0..200)
            .map(|i| json!({"id": i, "name": format!("row {i}")}))
            .collect::<Vec<_>>()}))
        .unwrap();
        let clean = "x".repeat(70_000);
        let code = "fn main() {\n    println!(\"hi\");\n}\n".repeat(500);
        same(&json!({
            "pretty": pretty,
            "clean": clean,
            "code": code,
            "short": "a\"b",
            "empty": "",
            "numbers": [0, -1, u64::MAX, i64::MIN, 1.5, -0.0, 1e300],
            "flags": [true, false, null],
            "nested": {"a": [[], {}, [{"b\nkey": "c"}]]},
            "key with \u{1} in it and long enough to take the chunked path, past sixty-four": 1,
        }));
        // A long string whose sample is clean but whose end is dense.
        same(&json!(format!("{}{}", "y".repeat(300), "\"\n".repeat(500))));
    }
}
