//! The JSON the host takes from a plugin (a result, an artifact's meta)
//! must be an I-JSON message (RFC 7493), as agentrt stores and serves only
//! JSON every client reads alike (protocol.CheckJSON, whose errors these
//! are, word for word): valid UTF-8, no `\u` escape that leaves a lone
//! surrogate, no two members of an object with the same name (compared as
//! decoded), numbers at most 400 bytes long and within the range of a
//! double, nested at most 100 deep. The kit's own writer keeps all but
//! two: a [`Value::Object`](crate::json::Value) can hold a name twice, and
//! a [`Number`](crate::json::Number) can be read from text such as `1e400`.

/// How deeply arrays and objects may nest (protocol.MaxJSONDepth).
const MAX_DEPTH: usize = 100;
/// The longest text of a number (protocol.MaxJSONNumberBytes).
const MAX_NUMBER_BYTES: usize = 400;

/// Why `b` is not one I-JSON value the host takes, `None` if it is.
pub(crate) fn check(b: &[u8]) -> Option<String> {
    let mut c = Checker {
        b,
        i: 0,
        path: Vec::new(),
    };
    c.space();
    if c.i == b.len() {
        return Some("no JSON value".into());
    }
    if let Err(e) = c.value(0) {
        return Some(e);
    }
    c.space();
    if c.i < b.len() {
        if std::str::from_utf8(&b[c.i..]).is_err() && utf8_len(&b[c.i..]).is_none() {
            return Some(format!("invalid UTF-8 at byte {}", c.i));
        }
        return Some(format!("data after the JSON value at byte {}", c.i));
    }
    None
}

/// Where a value is: a member's name or an array's index.
enum Step {
    Name(String),
    Index(usize),
}

struct Checker<'a> {
    b: &'a [u8],
    i: usize,
    path: Vec<Step>,
}

/// The length of the UTF-8 character `b` starts with, `None` when it
/// starts with none.
fn utf8_len(b: &[u8]) -> Option<usize> {
    let n = match b.first()? {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let s = b.get(..n)?;
    std::str::from_utf8(s).ok().map(|_| n)
}

impl<'a> Checker<'a> {
    fn space(&mut self) {
        while self.i < self.b.len() && b" \t\n\r".contains(&self.b[self.i]) {
            self.i += 1;
        }
    }

    /// The error for the byte at `i` where the grammar wants `expected`,
    /// or for the bytes there if they are not UTF-8.
    fn malformed(&self, i: usize, expected: &str) -> String {
        let found = match self.b.get(i..) {
            Some(rest) if !rest.is_empty() => match utf8_len(rest) {
                None => return format!("invalid UTF-8 at byte {}", i),
                Some(n) => {
                    let c = std::str::from_utf8(&rest[..n])
                        .unwrap()
                        .chars()
                        .next()
                        .unwrap();
                    if c.is_control() {
                        format!("U+{:04X}", c as u32)
                    } else if c == '\'' || c == '\\' {
                        format!("'\\{}'", c)
                    } else {
                        format!("'{}'", c)
                    }
                }
            },
            _ => "the end of the input".to_string(),
        };
        format!(
            "malformed JSON at byte {}: expected {}, found {}",
            i, expected, found
        )
    }

    /// The path of the value being read, as the host writes it: a.b[3],
    /// a["a b"]; "the top level" for the whole value.
    fn where_(&self) -> String {
        let mut p = String::new();
        for s in &self.path {
            match s {
                Step::Index(n) => p.push_str(&format!("[{}]", n)),
                Step::Name(name) if identifier(name) => {
                    if !p.is_empty() {
                        p.push('.');
                    }
                    p.push_str(name);
                }
                Step::Name(name) if name.chars().count() > 40 => {
                    let head: String = name.chars().take(40).collect();
                    p.push_str(&format!("[{}…]", quote(&head)));
                }
                Step::Name(name) => p.push_str(&format!("[{}]", quote(name))),
            }
        }
        if p.is_empty() {
            return "the top level".into();
        }
        if p.len() > 200 {
            let mut cut = p.len() - 200;
            while !p.is_char_boundary(cut) {
                cut += 1;
            }
            p = format!("…{}", &p[cut..]);
        }
        p
    }

    fn value(&mut self, depth: usize) -> Result<(), String> {
        let c = match self.b.get(self.i) {
            Some(&c) => c,
            None => return Err(self.malformed(self.i, "a value")),
        };
        match c {
            b'{' | b'[' if depth == MAX_DEPTH => Err(format!(
                "nested deeper than {} levels at byte {}",
                MAX_DEPTH, self.i
            )),
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.malformed(self.i, "a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), String> {
        self.i += 1;
        self.space();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut names: Vec<String> = Vec::new();
        loop {
            if self.b.get(self.i) != Some(&b'"') {
                return Err(self.malformed(self.i, "a string as an object key"));
            }
            let at = self.i;
            let name = self.string()?;
            let duplicate = names.contains(&name);
            self.path.push(Step::Name(name.clone()));
            if duplicate {
                return Err(format!("duplicate member name at {} (byte {}): the names in one object must differ (I-JSON, RFC 7493)", self.where_(), at));
            }
            names.push(name);
            self.space();
            if self.b.get(self.i) != Some(&b':') {
                return Err(self.malformed(self.i, "':' after an object key"));
            }
            self.i += 1;
            self.space();
            self.value(depth + 1)?;
            self.path.pop();
            self.space();
            match self.b.get(self.i) {
                Some(b',') => {
                    self.i += 1;
                    self.space();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.malformed(self.i, "',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), String> {
        self.i += 1;
        self.space();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(());
        }
        let mut n = 0;
        loop {
            self.path.push(Step::Index(n));
            self.value(depth + 1)?;
            self.path.pop();
            self.space();
            match self.b.get(self.i) {
                Some(b',') => {
                    self.i += 1;
                    self.space();
                    n += 1;
                }
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.malformed(self.i, "',' or ']'")),
            }
        }
    }

    fn literal(&mut self, lit: &str) -> Result<(), String> {
        for (j, &c) in lit.as_bytes().iter().enumerate() {
            if self.b.get(self.i + j) != Some(&c) {
                return Err(self.malformed(self.i + j, &format!("the literal {}", lit)));
            }
        }
        self.i += lit.len();
        Ok(())
    }

    /// Checks the string whose quote is at `i`, returns it decoded and
    /// moves past it.
    fn string(&mut self) -> Result<String, String> {
        let mut out = String::new();
        self.i += 1;
        loop {
            let c = match self.b.get(self.i) {
                Some(&c) => c,
                None => return Err(self.malformed(self.i, "'\"' to end the string")),
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => self.escape(&mut out)?,
                c if c < 0x20 => {
                    return Err(format!(
                    "malformed JSON at byte {}: unescaped control character U+{:04X} in a string",
                    self.i, c
                ))
                }
                _ => match utf8_len(&self.b[self.i..]) {
                    None => return Err(format!("invalid UTF-8 at byte {}", self.i)),
                    Some(n) => {
                        out.push_str(std::str::from_utf8(&self.b[self.i..self.i + n]).unwrap());
                        self.i += n;
                    }
                },
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let at = self.i;
        let simple = match self.b.get(at + 1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let r = self.hex4(at + 2)?;
                if !(0xd800..=0xdfff).contains(&r) {
                    out.push(char::from_u32(r).unwrap());
                    self.i = at + 6;
                    return Ok(());
                }
                if r < 0xdc00
                    && self.b.get(at + 6) == Some(&b'\\')
                    && self.b.get(at + 7) == Some(&b'u')
                {
                    if let Ok(low) = self.hex4(at + 8) {
                        if (0xdc00..=0xdfff).contains(&low) {
                            let c = 0x10000 + ((r - 0xd800) << 10) + (low - 0xdc00);
                            out.push(char::from_u32(c).unwrap());
                            self.i = at + 12;
                            return Ok(());
                        }
                    }
                }
                return Err(format!(
                    "a \\u escape at byte {} is a lone surrogate (\\u{})",
                    at,
                    String::from_utf8_lossy(&self.b[at + 2..at + 6])
                ));
            }
            _ => {
                return Err(self.malformed(at + 1, "one of \" \\ / b f n r t u after '\\'"));
            }
        };
        out.push(simple);
        self.i = at + 2;
        Ok(())
    }

    /// The value of the four hex digits at `i`.
    fn hex4(&self, i: usize) -> Result<u32, String> {
        let mut v = 0;
        for n in 0..4 {
            match self.b.get(i + n).and_then(|&c| (c as char).to_digit(16)) {
                Some(d) => v = v << 4 | d,
                None => return Err(self.malformed(i + n, "four hex digits after \\u")),
            }
        }
        Ok(v)
    }

    fn digits(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
    }

    fn number(&mut self) -> Result<(), String> {
        let start = self.i;
        let digit = |c: Option<&u8>| c.map_or(false, |c| c.is_ascii_digit());
        if self.b[self.i] == b'-' {
            self.i += 1;
            if !digit(self.b.get(self.i)) {
                return Err(self.malformed(self.i, "a digit after '-'"));
            }
        }
        if self.b[self.i] == b'0' {
            self.i += 1;
            if digit(self.b.get(self.i)) {
                return Err(self.malformed(self.i, "no digit after a leading 0"));
            }
        } else {
            self.digits();
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if !digit(self.b.get(self.i)) {
                return Err(self.malformed(self.i, "a digit after '.'"));
            }
            self.digits();
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digit(self.b.get(self.i)) {
                return Err(self.malformed(self.i, "a digit in the exponent"));
            }
            self.digits();
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).unwrap();
        if text.len() > MAX_NUMBER_BYTES {
            return Err(format!("number too long at {} (byte {}): {} bytes, over the {} a number may take; send it as a string (I-JSON, RFC 7493)", self.where_(), start, text.len(), MAX_NUMBER_BYTES));
        }
        if text.parse::<f64>().map_or(true, f64::is_infinite) {
            return Err(format!("number out of range at {} (byte {}): it is beyond ±1.7976931348623157e308, the largest IEEE 754 double (I-JSON, RFC 7493)", self.where_(), start));
        }
        Ok(())
    }
}

/// Whether a member name reads unquoted in a path.
fn identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 40
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// `s` quoted as Go's strconv.Quote writes it, for the characters a
/// member name has.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What a member of a result decodes into, for the check of its names.
#[derive(Clone, Copy)]
enum Inner {
    /// Nothing decoded by name (a string, a free-form value).
    Nothing,
    /// An object of these fields.
    Object(&'static [(&'static str, Inner)]),
    /// An array of objects of these fields.
    Array(&'static [(&'static str, Inner)]),
}

use Inner::Nothing;

/// The fields of each handler's result, as the host decodes them
/// (abi.StepResult, TaskResult and PlannedStep, ArtifactResult and
/// ArtifactReplace, DownloadResult): additional_output and
/// additional_input are free-form, their names kept as they are.
const STEP_RESULT: &[(&str, Inner)] = &[
    ("output", Nothing),
    ("additional_output", Nothing),
    ("name", Nothing),
    ("is_last", Nothing),
    ("error", Nothing),
];
const PLANNED_STEP: &[(&str, Inner)] = &[
    ("name", Nothing),
    ("input", Nothing),
    ("additional_input", Nothing),
];
const TASK_RESULT: &[(&str, Inner)] = &[("steps", Inner::Array(PLANNED_STEP)), ("error", Nothing)];
const ARTIFACT_REPLACE: &[(&str, Inner)] = &[("uri", Nothing), ("workspace_path", Nothing)];
const ARTIFACT_RESULT: &[(&str, Inner)] = &[
    ("reject", Nothing),
    ("replace", Inner::Object(ARTIFACT_REPLACE)),
    ("error", Nothing),
];
const DOWNLOAD_RESULT: &[(&str, Inner)] = &[("default", Nothing), ("error", Nothing)];

/// Why the host refuses `result`, the result of `handler` ("step",
/// "task", "artifact", "download"), for a member named as one of the
/// result's fields only in another case (`"OUTPUT"` for `output`), which
/// Go's decoder would read as the field and every other reader as another
/// name, or for a result that is not an object (protocol/wire, in its
/// words); `None` if neither. `result` is I-JSON ([`check`]).
pub(crate) fn check_names(result: &[u8], handler: &str) -> Option<String> {
    let fields = match handler {
        crate::abi::HANDLER_STEP => STEP_RESULT,
        crate::abi::HANDLER_TASK => TASK_RESULT,
        crate::abi::HANDLER_ARTIFACT => ARTIFACT_RESULT,
        crate::abi::HANDLER_DOWNLOAD => DOWNLOAD_RESULT,
        _ => return None,
    };
    match crate::json::parse(std::str::from_utf8(result).ok()?) {
        Ok(value) if value.is_object() => names_in(&value, fields, ""),
        _ => Some("it is not a JSON object".into()),
    }
}

fn names_in(v: &crate::json::Value, fields: &[(&str, Inner)], at: &str) -> Option<String> {
    let members = match v {
        crate::json::Value::Object(m) => m,
        _ => return None,
    };
    for (name, value) in members {
        let (field, inner) = match fields.iter().find(|(f, _)| folds_to(name, f)) {
            Some(&(f, inner)) => (f, inner),
            None => continue,
        };
        if name != field {
            let place = if at.is_empty() {
                String::new()
            } else {
                format!(" in {}", at)
            };
            return Some(format!(
                "{}{}: member names are case-sensitive; did you mean {}?",
                quote_ascii(name),
                place,
                quote(field)
            ));
        }
        let here = if at.is_empty() {
            field.to_string()
        } else {
            format!("{}.{}", at, field)
        };
        let why = match (inner, value) {
            (Inner::Object(f), _) => names_in(value, f, &here),
            (Inner::Array(f), crate::json::Value::Array(items)) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| names_in(item, f, &format!("{}[{}]", here, i))),
            _ => None,
        };
        if why.is_some() {
            return why;
        }
    }
    None
}

/// Whether `name` is `field` (ASCII lower case and '_') folded for case
/// as Go folds it (bytes.EqualFold): besides ASCII, the Kelvin sign
/// U+212A folds to k and the long s U+017F to s.
fn folds_to(name: &str, field: &str) -> bool {
    let mut want = field.chars();
    for c in name.chars() {
        let c = match c {
            '\u{212a}' => 'k',
            '\u{17f}' => 's',
            c => c.to_ascii_lowercase(),
        };
        if want.next() != Some(c) {
            return false;
        }
    }
    want.next().is_none()
}

/// `s` quoted as Go's %+q writes it: what is not printable ASCII as an
/// escape.
fn quote_ascii(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{check, check_names};
    use std::fs;
    use std::path::PathBuf;

    /// Every case of plugins/abi/testdata/results, which agentrt's own
    /// test holds to its reading (protocol/wire), is read here the same
    /// way: refused by set_result, failing the call as it is decoded, or
    /// taken, in the same words.
    #[test]
    fn every_shared_result_case_is_read_as_agentrt_reads_it() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../abi/testdata/results");
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
        let mut n = 0;
        let mut wrong = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let parts: Vec<&str> = line.splitn(3, '\t').collect();
            assert_eq!(parts.len(), 3, "{:?}", line);
            let (handler, result) = (parts[0], parts[1].as_bytes());
            let got = match (check(result), check_names(result, handler)) {
                (Some(why), _) => format!("refused: {}", why),
                (None, Some(why)) => format!("invalid: {}", why),
                (None, None) => "ok".to_string(),
            };
            if got != parts[2] {
                wrong.push(format!(
                    "{} {}: {:?}, agentrt {:?}",
                    handler, parts[1], got, parts[2]
                ));
            }
            n += 1;
        }
        assert!(n >= 40, "{} cases", n);
        assert!(
            wrong.is_empty(),
            "{} of {} read otherwise:\n{}",
            wrong.len(),
            n,
            wrong.join("\n")
        );
    }

    #[test]
    fn what_the_host_refuses_is_refused_with_its_words() {
        let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
        let long = format!("[{}]", "1".repeat(401));
        // Word for word what protocol.CheckJSON says of each.
        let rfc = " (I-JSON, RFC 7493)";
        let dup = format!(": the names in one object must differ{}", rfc);
        let range = format!(
            ": it is beyond ±1.7976931348623157e308, the largest IEEE 754 double{}",
            rfc
        );
        for (json, want) in [
            (r#"{"a":1,"a":2}"#, format!("duplicate member name at a (byte 7){}", dup)),
            (r#"{"a":{"b c":1,"b\u0020c":2}}"#, format!("duplicate member name at a[\"b c\"] (byte 14){}", dup)),
            (r#"{"x":[1,1e400]}"#, format!("number out of range at x[1] (byte 8){}", range)),
            ("-1.8e308", format!("number out of range at the top level (byte 0){}", range)),
            (long.as_str(), format!("number too long at [0] (byte 1): 401 bytes, over the 400 a number may take; send it as a string{}", rfc)),
            (r#"["\ud800"]"#, "a \\u escape at byte 2 is a lone surrogate (\\ud800)".to_string()),
            (r#""\udc00\ud800""#, "a \\u escape at byte 1 is a lone surrogate (\\udc00)".to_string()),
            ("\"a\u{1}\"", "malformed JSON at byte 2: unescaped control character U+0001 in a string".to_string()),
            (deep.as_str(), "nested deeper than 100 levels at byte 100".to_string()),
            ("", "no JSON value".to_string()),
            ("{} {}", "data after the JSON value at byte 3".to_string()),
            ("{\"a\":tru}", "malformed JSON at byte 8: expected the literal true, found '}'".to_string()),
            ("[1,]", "malformed JSON at byte 3: expected a value, found ']'".to_string()),
            ("[01]", "malformed JSON at byte 2: expected no digit after a leading 0, found '1'".to_string()),
        ] {
            let got = check(json.as_bytes()).unwrap_or_default();
            assert_eq!(got, want, "{:?}", json);
        }
        assert_eq!(
            check(b"[\"\xff\"]").as_deref(),
            Some("invalid UTF-8 at byte 2")
        );
        let at_the_limit = format!("{}{}", "[".repeat(100), "]".repeat(100));
        for json in [
            r#"{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}"#,
            "1.7976931348623157e308",
            "1e-400",
            r#""\ud83d\ude00 é""#,
            at_the_limit.as_str(),
        ] {
            assert_eq!(check(json.as_bytes()), None, "{:?}", json);
        }
    }
}
