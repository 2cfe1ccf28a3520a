//! A secret's value in the forms the host scrubs from what a plugin reads
//! and looks for in what a request sends where the secret is not bound
//! (plugins/abi/secretform, `Encoders`): as it is; as a JSON string with
//! and without HTML escaping and with non-ASCII as `\u` escapes; quoted as
//! Go's `%q` and `%+q` write it; escaped for a URL's query, a path segment
//! and a path; and in base64, both alphabets, with and without padding.
//! The values in plugins/abi/testdata/secretforms, of every class of
//! character a secret may hold, have the same forms here as there. One
//! difference is left: Go's `%q` escapes a code point Unicode has not
//! assigned, which is written here as it is (a secret holding one is
//! still scrubbed in its other forms).

use crate::abi;

/// The shortest and longest a secret's value may be, as the host holds
/// it (hostapi/egress's MinSecretBytes, abi::MAX_SECRET_BYTES).
const MIN_SECRET_BYTES: usize = 8;

/// Says what is wrong with a secret, as the host says it when an operator
/// gives it one (hostapi/egress's checkSecret); `None` if nothing.
pub(crate) fn check_secret(name: &str, value: &str) -> Option<String> {
    let valid_name = !name.is_empty()
        && name.len() <= abi::MAX_SECRET_NAME_BYTES
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if !valid_name {
        return Some(format!(
            "secret name {:?}: want 1 to {} letters, digits and _, not starting with a digit",
            name,
            abi::MAX_SECRET_NAME_BYTES
        ));
    }
    if value.len() < MIN_SECRET_BYTES {
        return Some(format!("secret {}: its value has {} bytes; a secret has at least {}, so that scrubbing it from answers garbles nothing else", name, value.len(), MIN_SECRET_BYTES));
    }
    if value.len() > abi::MAX_SECRET_BYTES {
        return Some(format!(
            "secret {}: its value is over {} bytes",
            name,
            abi::MAX_SECRET_BYTES
        ));
    }
    if value.contains(abi::SECRET_PREFIX) {
        return Some(format!(
            "secret {}: its value holds a secret placeholder",
            name
        ));
    }
    for c in value.chars() {
        if (c as u32) < 0x20 || c == '\u{7f}' {
            return Some(format!("secret {}: its value holds a control character (a trailing newline?), which a header cannot carry", name));
        }
        if ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{2028}' || c == '\u{2029}' {
            return Some(format!("secret {}: its value holds U+{:04X}, a control or line-breaking character, which a header cannot carry", name, c as u32));
        }
    }
    if value.starts_with(' ') || value.ends_with(' ') {
        return Some(format!("secret {}: its value begins or ends with a space, which a receiver trims from a header", name));
    }
    None
}

/// The distinct forms of `value`.
pub(crate) fn forms(value: &str) -> Vec<String> {
    let all = [
        value.to_string(),
        json(value, true),
        json(value, false),
        json_ascii(value),
        go_quote(value, false),
        go_quote(value, true),
        url_escape(value, Escape::Query),
        url_escape(value, Escape::PathSegment),
        url_escape(value, Escape::Path),
        base64(value.as_bytes(), STD, true),
        base64(value.as_bytes(), STD, false),
        base64(value.as_bytes(), URL, true),
        base64(value.as_bytes(), URL, false),
    ];
    let mut out: Vec<String> = Vec::new();
    for f in all {
        if !f.is_empty() && !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// A JSON string's text as Go's encoding/json writes it, without quotes:
/// '"' and '\' escaped, and with `html`, '<', '>' and '&' as \u escapes.
/// (A secret holds no control character, U+2028 or U+2029.)
fn json(v: &str, html: bool) -> String {
    let mut out = String::new();
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// A JSON string's text of ASCII only, as Python's json.dumps writes it:
/// '"' and '\' escaped, every character past ASCII as \u escapes (a
/// UTF-16 surrogate pair past U+FFFF).
fn json_ascii(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", u));
                }
            }
        }
    }
    out
}

/// `v` as Go's strconv.Quote (`ascii`: QuoteToASCII) writes it, without
/// quotes.
fn go_quote(v: &str, ascii: bool) -> String {
    let mut out = String::new();
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii() || (!ascii && go_printable(c)) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out
}

/// Whether Go's strconv.IsPrint takes `c`, past ASCII, as printable:
/// not a space other than ' ' (Zs), a format character (Cf), a private
/// use one (Co) or a noncharacter, as Unicode 15 (Go 1.21 to 1.26) lists
/// them. (Controls, U+2028 and U+2029 are not in a secret; code points
/// not assigned are taken as printable here, not in Go.)
fn go_printable(c: char) -> bool {
    const NOT: &[(u32, u32)] = &[
        (0x00a0, 0x00a0),
        (0x00ad, 0x00ad),
        (0x0600, 0x0605),
        (0x061c, 0x061c),
        (0x06dd, 0x06dd),
        (0x070f, 0x070f),
        (0x0890, 0x0891),
        (0x08e2, 0x08e2),
        (0x1680, 0x1680),
        (0x180e, 0x180e),
        (0x2000, 0x200f),
        (0x2028, 0x202f),
        (0x205f, 0x2064),
        (0x2066, 0x206f),
        (0x3000, 0x3000),
        (0xd800, 0xf8ff),
        (0xfdd0, 0xfdef),
        (0xfeff, 0xfeff),
        (0xfff9, 0xfffb),
        (0x110bd, 0x110bd),
        (0x110cd, 0x110cd),
        (0x13430, 0x1343f),
        (0x1bca0, 0x1bca3),
        (0x1d173, 0x1d17a),
        (0xe0001, 0xe0001),
        (0xe0020, 0xe007f),
        (0xf0000, 0x10ffff),
    ];
    let n = c as u32;
    if n & 0xfffe == 0xfffe {
        return false; // U+FFFE and U+FFFF of every plane
    }
    !NOT.iter().any(|&(lo, hi)| (lo..=hi).contains(&n))
}

#[derive(Clone, Copy, PartialEq)]
enum Escape {
    Query,
    PathSegment,
    Path,
}

/// `v` escaped as Go's net/url escapes a query component (QueryEscape),
/// a path segment (PathEscape) or a path (URL.EscapedPath).
fn url_escape(v: &str, mode: Escape) -> String {
    let mut out = String::new();
    for &c in v.as_bytes() {
        let keep = c.is_ascii_alphanumeric()
            || b"-_.~".contains(&c)
            || match mode {
                Escape::Query => false,
                Escape::PathSegment => b"$&+:=@".contains(&c),
                Escape::Path => b"$&+,/:;=@".contains(&c),
            };
        if keep {
            out.push(c as char);
        } else if c == b' ' && mode == Escape::Query {
            out.push('+');
        } else {
            out.push_str(&format!("%{:02X}", c));
        }
    }
    out
}

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `data` in base64 of `alphabet`, with or without padding.
fn base64(data: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// Replaces every form of each secret's value with its placeholder, the
/// longest form first where several start at one place.
pub(crate) struct Scrubber {
    /// (form, placeholder), the longest form first.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Scrubber {
    /// A scrubber of `secrets`, as (name, value).
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Scrubber {
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (name, value) in secrets {
            let placeholder = format!("{}{}{}", abi::SECRET_PREFIX, name, abi::SECRET_SUFFIX);
            for f in forms(value) {
                if !pairs.iter().any(|(g, _)| g == f.as_bytes()) {
                    pairs.push((f.into_bytes(), placeholder.clone().into_bytes()));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
        Scrubber { pairs }
    }

    /// `data` scrubbed.
    pub fn bytes(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        let mut i = 0;
        'next: while i < data.len() {
            for (form, placeholder) in &self.pairs {
                if data[i..].starts_with(form) {
                    out.extend_from_slice(placeholder);
                    i += form.len();
                    continue 'next;
                }
            }
            out.push(data[i]);
            i += 1;
        }
        out
    }

    /// `text` scrubbed.
    pub fn text(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.bytes(text.as_bytes())).into_owned()
    }
}

/// Whether `data` holds one of `forms`.
pub(crate) fn holds_form(data: &[u8], forms: &[String]) -> bool {
    forms.iter().any(|f| {
        let f = f.as_bytes();
        data.windows(f.len()).any(|w| w == f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each form as Go writes it (the strings are Go's own output for
    /// these values: encoding/json, strconv, net/url, encoding/base64).
    #[test]
    fn forms_are_gos_encoders() {
        let v = "k\"<é>\\&/ ;,?😀+";
        let f = forms(v);
        for want in [
            v,
            "k\\\"\\u003cé\\u003e\\\\\\u0026/ ;,?😀+",
            "k\\\"<é>\\\\&/ ;,?😀+",
            "k\\\"<\\u00e9>\\\\&/ ;,?\\ud83d\\ude00+",
            "k\\\"<\\u00e9>\\\\&/ ;,?\\U0001f600+",
            "k%22%3C%C3%A9%3E%5C%26%2F+%3B%2C%3F%F0%9F%98%80%2B",
            "k%22%3C%C3%A9%3E%5C&%2F%20%3B%2C%3F%F0%9F%98%80+",
            "k%22%3C%C3%A9%3E%5C&/%20;,%3F%F0%9F%98%80+",
            "ayI8w6k+XCYvIDssP/CfmIAr",
            "ayI8w6k-XCYvIDssP_CfmIAr",
        ] {
            assert!(f.contains(&want.to_string()), "{:?} not in {:?}", want, f);
        }
        assert_eq!(base64(b"ab", STD, true), "YWI=");
        assert_eq!(base64(b"ab", STD, false), "YWI");
        assert_eq!(base64(b"a", URL, true), "YQ==");
    }

    /// Every value of plugins/abi/testdata/secretforms, whose forms the Go
    /// package's test holds to secretform.Of, has the same forms here, in
    /// the same order.
    #[test]
    fn every_shared_value_has_the_forms_the_host_scrubs() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../abi/testdata/secretforms");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
        let mut n = 0;
        for line in text.lines() {
            let case = crate::json::parse(line).expect("a JSON object a line");
            let value = case["value"].as_str().expect("a value");
            let want: Vec<String> = case["forms"]
                .as_array()
                .expect("forms")
                .iter()
                .map(|f| f.as_str().expect("a form").to_string())
                .collect();
            assert_eq!(forms(value), want, "the forms of {:?}", value);
            n += 1;
        }
        assert!(n >= 10, "{} values", n);
    }

    #[test]
    fn the_longest_form_is_scrubbed_first() {
        let s = Scrubber::new([("K", "sk-0123456789")]);
        let b64 = base64(b"sk-0123456789", STD, true);
        assert_eq!(
            s.text(&format!("a sk-0123456789 b {} c", b64)),
            "a {{secret:K}} b {{secret:K}} c"
        );
    }
}
