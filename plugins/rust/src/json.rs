//! A small JSON module: the [`Value`] tree, a parser ([`parse`]) for the
//! full JSON grammar (RFC 8259) and a compact serializer ([`Value::to_json`]).
//!
//! It is plain Rust with no host calls, so it works (and is tested) on any
//! target. Objects keep their members in order, duplicates included; numbers
//! keep the text they were written with, so that a number passed through a
//! plugin comes out exactly as it came in, however large or precise.
//!
//! ```
//! use agentrt::json::{self, Value};
//!
//! let v = json::parse(r#"{"words": 3, "tags": ["a", "b"]}"#).unwrap();
//! assert_eq!(v["words"].as_i64(), Some(3));
//! assert_eq!(v["tags"][1].as_str(), Some("b"));
//! assert!(v["missing"].is_null());
//!
//! let out = Value::object().with("count", 2).with("ok", true);
//! assert_eq!(out.to_json(), r#"{"count":2,"ok":true}"#);
//! ```

use std::fmt;
use std::ops::Index;
use std::str::FromStr;

mod typed;
pub use typed::{field, FromValue, ToValue};

/// The deepest nesting of arrays and objects [`parse`] accepts; deeper input
/// is refused rather than overflowing the plugin's stack.
///
/// agentrt's own decoder (Go's encoding/json) refuses request bodies nested
/// deeper than 10 000 levels, so this accepts whatever the host can send. A
/// level costs the parser about 80 bytes of the 1 MiB stack a Rust wasm32
/// module gets; dropping, cloning or serializing a value recurses as deep.
pub const MAX_DEPTH: usize = 10_240;

/// A JSON value.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    /// An object's members in their order. A key may repeat; [`Value::get`]
    /// sees the last one, as most JSON decoders do.
    Object(Vec<(String, Value)>),
}

static NULL: Value = Value::Null;

impl Value {
    /// An empty object, to fill with [`Value::with`] or [`Value::insert`].
    pub fn object() -> Value {
        Value::Object(Vec::new())
    }

    /// Returns the object with `key` set to `value` (replacing an existing
    /// member of that name), for building objects in one expression.
    ///
    /// # Panics
    ///
    /// If `self` is not an object.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Value {
        self.insert(key, value);
        self
    }

    /// Sets the member `key` of an object to `value` and returns the value it
    /// replaces, if any. A new key is added at the end.
    ///
    /// # Panics
    ///
    /// If `self` is not an object.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        let key = key.into();
        let value = value.into();
        match self {
            Value::Object(members) => {
                if let Some(slot) = members.iter_mut().rev().find(|(k, _)| same_key(k, &key)) {
                    return Some(std::mem::replace(&mut slot.1, value));
                }
                members.push((key, value));
                None
            }
            _ => panic!("agentrt::json::Value::insert on a value that is not an object"),
        }
    }

    /// The member `key` of an object (the last one if it repeats); `None`
    /// for a missing key or a value that is not an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(k, _)| same_key(k, key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Takes the member `key` out of an object, leaving `Null` in its place
    /// (the last one if it repeats); `Null` for a missing key or a value
    /// that is not an object.
    pub fn take(&mut self, key: &str) -> Value {
        match self {
            Value::Object(members) => match members.iter_mut().rev().find(|(k, _)| same_key(k, key)) {
                Some((_, v)) => std::mem::take(v),
                None => Value::Null,
            },
            _ => Value::Null,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// A number as an `f64` (rounded to the nearest, as JSON decoders do).
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().map(Number::as_f64)
    }

    /// A number that is a whole number within `i64`'s range.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }

    /// A number that is a whole number within `u64`'s range.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(Number::as_u64)
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Vec<(String, Value)>> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The value as compact JSON text.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// Appends the value as compact JSON text to `out`.
    pub fn write_json(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => out.push_str(n.as_str()),
            Value::String(s) => write_string(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
        }
    }
}

/// `value["key"]`: the member, or `Null` when it is missing or `value` is
/// not an object. Never panics.
impl Index<&str> for Value {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

/// `value[i]`: the array's item, or `Null` when it is out of range or `value`
/// is not an array. Never panics.
impl Index<usize> for Value {
    type Output = Value;
    fn index(&self, i: usize) -> &Value {
        match self {
            Value::Array(items) => items.get(i).unwrap_or(&NULL),
            _ => &NULL,
        }
    }
}

/// Formats the value as compact JSON.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl FromStr for Value {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Value, ParseError> {
        parse(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::String(s.clone())
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Value {
        Value::Number(n)
    }
}

/// A finite float becomes a number; NaN and the infinities, which JSON
/// cannot express, become `null`.
impl From<f64> for Value {
    fn from(f: f64) -> Value {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

macro_rules! value_from_integer {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(Number::from(n))
            }
        }
    )*};
}
value_from_integer!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::Array(items)
    }
}

/// `None` becomes `null`.
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// A JSON number, kept as the text it was written with (always valid JSON
/// number syntax). Two numbers are equal when their text is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Number(String);

impl Number {
    /// A finite float as a number (in the shortest text that reads back as
    /// the same float); `None` for NaN and the infinities.
    pub fn from_f64(f: f64) -> Option<Number> {
        if f.is_finite() {
            Some(Number(f.to_string()))
        } else {
            None
        }
    }

    /// The number's JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The number as the nearest `f64` (an infinity past `f64`'s range).
    pub fn as_f64(&self) -> f64 {
        self.0.parse().unwrap_or(f64::NAN)
    }

    /// The number as an `i64` when it is a whole number in range, whether
    /// written `3`, `3.0` or `3e0`.
    pub fn as_i64(&self) -> Option<i64> {
        if let Ok(n) = self.0.parse::<i64>() {
            return Some(n);
        }
        let f = self.as_f64();
        // 2^63 is exactly representable; every f64 below it in magnitude that
        // is whole converts exactly.
        if f.fract() == 0.0
            && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f)
        {
            Some(f as i64)
        } else {
            None
        }
    }

    /// The number as a `u64` when it is a whole number in range.
    pub fn as_u64(&self) -> Option<u64> {
        if let Ok(n) = self.0.parse::<u64>() {
            return Some(n);
        }
        let f = self.as_f64();
        if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) {
            Some(f as u64)
        } else {
            None
        }
    }
}

macro_rules! number_from_integer {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            fn from(n: $t) -> Number {
                Number(n.to_string())
            }
        }
    )*};
}
number_from_integer!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);

/// Parses JSON number text (`-12.5e3`); anything else is an error.
impl FromStr for Number {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Number, ParseError> {
        let mut p = Parser {
            text: s,
            bytes: s.as_bytes(),
            pos: 0,
            depth: 0,
        };
        let n = p.number()?;
        if p.pos != s.len() {
            return Err(p.error("unexpected character after a number"));
        }
        Ok(n)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why [`parse`] refused its input, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The byte offset in the input where the problem was found.
    pub offset: usize,
    /// What is wrong, e.g. "expected ',' or '}'".
    pub reason: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Parses one JSON value, with optional whitespace around it.
///
/// Strings may use every escape, `\uXXXX` surrogate pairs included; an
/// unpaired surrogate (which no Rust string can hold) becomes U+FFFD, as Go's
/// encoding/json does. Nesting deeper than [`MAX_DEPTH`] is an error.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    p.skip_whitespace();
    let v = p.value()?;
    p.skip_whitespace();
    if p.pos != p.bytes.len() {
        return Err(p.error("unexpected data after the JSON value"));
    }
    Ok(v)
}

/// Whether two keys are the same: `a == b`, but comparing eight bytes at a
/// time where the standard library's comparison (compiler_builtins' memcmp
/// on wasm32) takes a turn of its loop for each byte.
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while a.len() - i >= 8 {
        if word(&a[i..]) != word(&b[i..]) {
            return false;
        }
        i += 8;
    }
    word(&a[i..]) == word(&b[i..])
}

/// The first eight bytes of b as a number, zeros for those b lacks.
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// The length of the run of plain string characters that `b` starts with:
/// bytes other than '"', '\\' and control characters. It looks at eight
/// bytes at a time, so that a string costs the sandbox's loop check about
/// once per eight bytes rather than once per byte.
fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while i + 8 <= b.len() {
        let w = word(&b[i..]);
        // A byte's high bit is set in each term when that byte is a quote,
        // a backslash or below 0x20; a borrow can set bits above the first
        // such byte, never below it, so the lowest set bit is exact.
        let quote = w ^ (ONES * b'"' as u64);
        let backslash = w ^ (ONES * b'\\' as u64);
        let special = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | w.wrapping_sub(ONES * 0x20) & !w)
            & HIGHS;
        if special != 0 {
            return i + special.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < b.len() && !(b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20) {
        i += 1;
    }
    i
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, reason: &'static str) -> ParseError {
        ParseError {
            offset: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        // Most calls find none: looked for once before the loop, since in
        // the sandbox every turn of a loop, the first included, costs a
        // check (plugins/README.md, "Loops cost").
        if !matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &'static str, v: Value) -> Result<Value, ParseError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.error("invalid literal (expected true, false or null)"))
        }
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'[') => self.array(),
            Some(b'{') => self.object(),
            Some(_) => Err(self.error("unexpected character (expected a JSON value)")),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.pos += 1; // the '[' or '{'
        Ok(())
    }

    fn array(&mut self) -> Result<Value, ParseError> {
        self.enter()?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if !self.eat(b']') {
            loop {
                self.skip_whitespace();
                items.push(self.value()?);
                self.skip_whitespace();
                if self.eat(b']') {
                    break;
                }
                if !self.eat(b',') {
                    return Err(self.error("expected ',' or ']'"));
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn object(&mut self) -> Result<Value, ParseError> {
        self.enter()?;
        let mut members = Vec::new();
        self.skip_whitespace();
        if !self.eat(b'}') {
            loop {
                self.skip_whitespace();
                if self.peek() != Some(b'"') {
                    return Err(self.error("expected a string key"));
                }
                let key = self.string()?;
                self.skip_whitespace();
                if !self.eat(b':') {
                    return Err(self.error("expected ':'"));
                }
                self.skip_whitespace();
                let value = self.value()?;
                members.push((key, value));
                self.skip_whitespace();
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return Err(self.error("expected ',' or '}'"));
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Object(members))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("expected a digit")),
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(self.error("expected a digit after '.'"));
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        Ok(Number(self.text[start..self.pos].to_string()))
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1; // the opening quote
        let mut out = String::new();
        loop {
            // Copy the run of plain characters in one go. It ends on an ASCII
            // byte, so it is a whole UTF-8 sequence of the input.
            let start = self.pos;
            self.pos += plain_run(&self.bytes[start..]);
            out.push_str(&self.text[start..self.pos]);
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.error("control character in a string (escape it)")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4()?;
                out.push(self.code_point(unit));
                return Ok(());
            }
            _ => return Err(self.error("invalid escape")),
        };
        self.pos += 1;
        out.push(c);
        Ok(())
    }

    /// The character of the \u escape `unit` (its 4 hex digits already
    /// read), consuming the low half that follows a high surrogate.
    fn code_point(&mut self, unit: u32) -> char {
        match unit {
            0xD800..=0xDBFF => {
                let save = self.pos;
                if self.bytes[self.pos..].starts_with(b"\\u") {
                    self.pos += 2;
                    if let Ok(low @ 0xDC00..=0xDFFF) = self.hex4() {
                        let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        return char::from_u32(c).unwrap_or('\u{FFFD}');
                    }
                }
                // Not a pair: the next escape is read on its own.
                self.pos = save;
                '\u{FFFD}'
            }
            0xDC00..=0xDFFF => '\u{FFFD}',
            _ => char::from_u32(unit).unwrap_or('\u{FFFD}'),
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut n = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                _ => return Err(self.error("expected 4 hex digits after \\u")),
            };
            n = n * 16 + u32::from(d);
            self.pos += 1;
        }
        Ok(n)
    }
}

/// Appends `s` as a JSON string literal: `"` and `\` escaped, control
/// characters as `\n`, `\t`, ... or `\u00XX`; everything else as is.
fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escaped.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Value {
        Value::Number(s.parse().unwrap())
    }

    #[test]
    fn parses_every_kind_of_value() {
        let v = parse(" {\"a\": [1, -2.5e+3, true, false, null], \"b\": {\"c\": \"d\"}, \"e\": {}, \"f\": []} ").unwrap();
        let want = Value::Object(vec![
            (
                "a".into(),
                Value::Array(vec![
                    num("1"),
                    num("-2.5e+3"),
                    Value::Bool(true),
                    Value::Bool(false),
                    Value::Null,
                ]),
            ),
            ("b".into(), Value::Object(vec![("c".into(), "d".into())])),
            ("e".into(), Value::object()),
            ("f".into(), Value::Array(vec![])),
        ]);
        assert_eq!(v, want);
    }

    #[test]
    fn parses_scalars_at_top_level() {
        assert_eq!(parse("null").unwrap(), Value::Null);
        assert_eq!(parse("\t\r\ntrue \n").unwrap(), Value::Bool(true));
        assert_eq!(parse("0").unwrap(), num("0"));
        assert_eq!(parse("\"x\"").unwrap(), Value::from("x"));
    }

    #[test]
    fn decodes_string_escapes() {
        let cases: &[(&str, &str)] = &[
            (r#""plain""#, "plain"),
            (r#""q\"b\\s\/""#, "q\"b\\s/"),
            (r#""\b\f\n\r\t""#, "\u{8}\u{c}\n\r\t"),
            (r#""\u0041\u00e9\u4e2D""#, "Aé中"),
            (r#""\u0000""#, "\0"),
            (r#""\ud83d\ude00""#, "😀"),
            (r#""x\uD83D\uDE00y""#, "x😀y"),
            (r#""héllo wörld 😀""#, "héllo wörld 😀"),
            // Unpaired surrogates become U+FFFD, and what follows is kept.
            (r#""\ud800""#, "\u{FFFD}"),
            (r#""\ud800x""#, "\u{FFFD}x"),
            (r#""\udc00\ud800""#, "\u{FFFD}\u{FFFD}"),
            (r#""\ud800\u0041""#, "\u{FFFD}A"),
            (r#""\ud800\n""#, "\u{FFFD}\n"),
            (r#""\ud83d\ud83d\ude00""#, "\u{FFFD}😀"),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(Value::from(*want)), "parse {}", text);
        }
    }

    #[test]
    fn refuses_malformed_input() {
        let cases: &[(&str, &str)] = &[
            ("", "unexpected end of input"),
            ("   ", "unexpected end of input"),
            ("nul", "invalid literal (expected true, false or null)"),
            ("True", "unexpected character (expected a JSON value)"),
            ("[1,]", "unexpected character (expected a JSON value)"),
            ("[1 2]", "expected ',' or ']'"),
            ("{\"a\" 1}", "expected ':'"),
            ("{\"a\":1,}", "expected a string key"),
            ("{a:1}", "expected a string key"),
            ("{\"a\":1 \"b\":2}", "expected ',' or '}'"),
            ("[", "unexpected end of input"),
            ("\"abc", "unterminated string"),
            ("\"a\nb\"", "control character in a string (escape it)"),
            ("\"\\x\"", "invalid escape"),
            ("\"\\u12\"", "expected 4 hex digits after \\u"),
            ("\"\\u12g4\"", "expected 4 hex digits after \\u"),
            ("01", "unexpected data after the JSON value"),
            ("-", "expected a digit"),
            ("+1", "unexpected character (expected a JSON value)"),
            (".5", "unexpected character (expected a JSON value)"),
            ("1.", "expected a digit after '.'"),
            ("1e", "expected a digit in the exponent"),
            ("1e+", "expected a digit in the exponent"),
            ("{} {}", "unexpected data after the JSON value"),
            ("[1]x", "unexpected data after the JSON value"),
        ];
        for (text, reason) in cases {
            match parse(text) {
                Ok(v) => panic!("parse {:?} = {:?}, want an error", text, v),
                Err(e) => assert_eq!(e.reason, *reason, "parse {:?}", text),
            }
        }
        assert_eq!(parse("[1 2]").unwrap_err().offset, 3);
    }

    /// Runs f on a thread with a big stack: the unoptimized test build
    /// needs far more stack per level than a release wasm build.
    fn with_big_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn limits_nesting() {
        with_big_stack(limits_nesting_body);
    }

    fn limits_nesting_body() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep).unwrap_err().reason, "nested too deeply");
        let objects = "{\"a\":".repeat(MAX_DEPTH + 1) + "1" + &"}".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&objects).unwrap_err().reason, "nested too deeply");
        // Depth is nesting, not count: many siblings are fine.
        let wide = format!("[{}[]]", "[],".repeat(10 * MAX_DEPTH));
        assert!(parse(&wide).is_ok());
    }

    #[test]
    fn serializes_with_escapes() {
        let v = Value::from("quote\" backslash\\ slash/ nl\n cr\r tab\t bs\u{8} ff\u{c} nul\0 us\u{1f} del\u{7f} é 😀");
        assert_eq!(
            v.to_json(),
            r#""quote\" backslash\\ slash/ nl\n cr\r tab\t bs\b ff\f nul\u0000 us\u001f del"#
                .to_string()
                + "\u{7f} é 😀\""
        );
    }

    #[test]
    fn round_trips() {
        let texts = [
            r#"{"a":[1,-0,0.5,1e400,-12345678901234567890123,2.5E-3],"b":{"":""},"c":"\u0001\"\\/😀","d":[[],{}],"e":null}"#,
            r#"{"k":1,"k":2}"#,
            r#""\u2028\u2029""#,
        ];
        for text in texts {
            let v = parse(text).unwrap();
            let again = parse(&v.to_json()).unwrap();
            assert_eq!(again, v, "round trip of {}", text);
        }
        // Numbers keep their text exactly.
        assert_eq!(
            parse("[1e400,-12345678901234567890123,1.50]")
                .unwrap()
                .to_json(),
            "[1e400,-12345678901234567890123,1.50]"
        );
        // Escapes are normalised.
        assert_eq!(parse(r#""\/\u0041""#).unwrap().to_json(), r#""/A""#);
    }

    #[test]
    fn accesses_members_and_items() {
        let v = parse(
            r#"{"n":3,"f":2.5,"big":1e3,"neg":-4,"s":"x","b":true,"a":[10,"y"],"dup":1,"dup":2}"#,
        )
        .unwrap();
        assert_eq!(v["n"].as_i64(), Some(3));
        assert_eq!(v["n"].as_u64(), Some(3));
        assert_eq!(v["f"].as_f64(), Some(2.5));
        assert_eq!(v["f"].as_i64(), None);
        assert_eq!(v["big"].as_i64(), Some(1000));
        assert_eq!(v["neg"].as_u64(), None);
        assert_eq!(v["neg"].as_i64(), Some(-4));
        assert_eq!(v["s"].as_str(), Some("x"));
        assert_eq!(v["b"].as_bool(), Some(true));
        assert_eq!(v["a"][0].as_i64(), Some(10));
        assert_eq!(v["a"][1].as_str(), Some("y"));
        assert!(v["a"][2].is_null());
        assert!(v["missing"]["deeper"][0].is_null());
        assert!(v["s"]["x"].is_null());
        assert_eq!(v["dup"].as_i64(), Some(2), "the last duplicate wins");
        assert_eq!(v.as_object().map(Vec::len), Some(9));
    }

    #[test]
    fn converts_numbers() {
        assert_eq!(Value::from(3).to_json(), "3");
        assert_eq!(Value::from(-7i64).to_json(), "-7");
        assert_eq!(Value::from(u64::MAX).to_json(), "18446744073709551615");
        assert_eq!(Value::from(u64::MAX).as_u64(), Some(u64::MAX));
        assert_eq!(Value::from(i64::MIN).as_i64(), Some(i64::MIN));
        assert_eq!(Value::from(0.1).to_json(), "0.1");
        assert_eq!(Value::from(1e21).as_f64(), Some(1e21));
        assert_eq!(Value::from(f64::NAN), Value::Null);
        assert_eq!(Value::from(f64::INFINITY), Value::Null);
        assert!(parse(&Value::from(1e300).to_json()).is_ok());
        assert!(parse(&Value::from(-5e-324).to_json()).is_ok());
        assert_eq!("1.5e3".parse::<Number>().unwrap().as_f64(), 1500.0);
        assert!("1.5e".parse::<Number>().is_err());
        assert!("1 ".parse::<Number>().is_err());
        assert!("NaN".parse::<Number>().is_err());
        assert_eq!("1e19".parse::<Number>().unwrap().as_i64(), None);
        assert_eq!(
            "1e19".parse::<Number>().unwrap().as_u64(),
            Some(10_000_000_000_000_000_000)
        );
    }

    #[test]
    fn builds_objects() {
        let mut v = Value::object()
            .with("a", 1)
            .with("b", "two")
            .with("c", Value::Null)
            .with("a", 3);
        assert_eq!(v.to_json(), r#"{"a":3,"b":"two","c":null}"#);
        assert_eq!(
            v.insert("b", vec![Value::from(true)]),
            Some(Value::from("two"))
        );
        assert_eq!(v.insert("d", None::<String>), None);
        assert_eq!(v.to_json(), r#"{"a":3,"b":[true],"c":null,"d":null}"#);
        assert_eq!(format!("{}", v), v.to_json());
        assert_eq!(
            "[1]".parse::<Value>().unwrap(),
            Value::Array(vec![Value::from(1)])
        );
    }

    #[test]
    #[should_panic(expected = "not an object")]
    fn insert_into_a_non_object_panics() {
        Value::from(1).insert("a", 1);
    }

    #[test]
    fn describes_errors() {
        let e = parse("[1,]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid JSON at byte 3: unexpected character (expected a JSON value)"
        );
    }

    /// The run of plain characters, found eight bytes at a time, ends where
    /// a byte-by-byte look ends it: on each special byte at each offset,
    /// after runs of every length around a word's, and with bytes on both
    /// sides of each special one (0x1f and 0x20, the high bytes of UTF-8).
    #[test]
    fn finds_a_strings_plain_run_as_a_byte_by_byte_look_does() {
        fn by_bytes(b: &[u8]) -> usize {
            b.iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(b.len())
        }
        let fillers: &[u8] = &[b'a', 0x20, 0x21, b'#', b'[', b']', 0x7f, 0x80, 0xc3, 0xff];
        let specials: &[u8] = &[b'"', b'\\', 0x00, 0x01, 0x1f];
        for &fill in fillers {
            for len in 0..=33 {
                let plain = vec![fill; len];
                assert_eq!(plain_run(&plain), len, "{:?}", plain);
                for at in 0..len {
                    for &special in specials {
                        let mut b = plain.clone();
                        b[at] = special;
                        // What follows the first special byte must not move it.
                        for after in at + 1..len {
                            b[after] = specials[(after + at) % specials.len()];
                        }
                        assert_eq!(plain_run(&b), by_bytes(&b), "{:?}", b);
                    }
                }
            }
        }
        // Every byte value, alone, before a plain tail of a word and more.
        for c in 0..=255u8 {
            let mut b = vec![c];
            b.extend_from_slice(b"plain text, longer than a word");
            assert_eq!(plain_run(&b), by_bytes(&b), "byte {:#x}", c);
        }
    }

    #[test]
    fn compares_keys_as_equality_does() {
        let keys = [
            "", "a", "b", "ab", "task_id", "step_id", "task_ic", "additional_input",
            "additional_inpuT", "additional_output", "aaaaaaaa", "aaaaaaab", "é", "e\u{301}",
            "0123456789abcdef0", "0123456789abcdef1",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(same_key(a, b), a == b, "{:?} {:?}", a, b);
            }
        }
    }
}
