//! The bits of Go's string semantics that the Go example's answers depend
//! on, for arbitrary bytes (a Go string is any bytes; a client may upload
//! any file, even into work/):
//!
//! - [`runes`]: how Go decodes a string into runes, one invalid byte at a
//!   time;
//! - [`lossy`]: how Go's encoding/json makes a string valid UTF-8 (the Go
//!   kit encodes results with it): each invalid byte becomes U+FFFD, where
//!   Rust's `String::from_utf8_lossy` replaces a truncated sequence by one;
//! - [`quote`]: `strconv.Quote`, which `fmt`'s `%q` uses.

/// The runes of `b` as Go's `for range` and `utf8.DecodeRune` see them: a
/// character, or `Err(byte)` for a byte that does not begin a valid UTF-8
/// sequence (which Go decodes as U+FFFD, one byte wide). Both languages
/// agree on what is valid UTF-8.
pub fn runes(b: &[u8]) -> Runes<'_> {
    Runes {
        chars: "".chars(),
        rest: b,
    }
}

/// The iterator of [`runes`].
pub struct Runes<'a> {
    chars: std::str::Chars<'a>,
    rest: &'a [u8],
}

impl<'a> Iterator for Runes<'a> {
    type Item = Result<char, u8>;

    fn next(&mut self) -> Option<Result<char, u8>> {
        loop {
            if let Some(c) = self.chars.next() {
                return Some(Ok(c));
            }
            let rest: &'a [u8] = self.rest;
            let (&first, tail) = rest.split_first()?;
            let valid = match std::str::from_utf8(rest) {
                Ok(s) => s,
                Err(e) if e.valid_up_to() == 0 => {
                    self.rest = tail;
                    return Some(Err(first));
                }
                Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
            };
            self.rest = &rest[valid.len()..];
            self.chars = valid.chars();
        }
    }
}

/// `b` as valid UTF-8 the way Go's encoding/json makes it: every invalid
/// byte becomes U+FFFD.
pub fn lossy(b: &[u8]) -> String {
    runes(b).map(|r| r.unwrap_or('\u{FFFD}')).collect()
}

/// `b` double-quoted as Go's `strconv.Quote` (and so `fmt`'s `%q`) does:
/// Go escapes, `\xff` for an invalid byte, and `\u`/`\U` escapes for the
/// runes that Go's `strconv.IsPrint` says are not printable.
pub fn quote(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len() + 2);
    out.push('"');
    for r in runes(b) {
        let c = match r {
            Ok(c) => c,
            Err(byte) => {
                push_hex(&mut out, "\\x", byte as u32, 2);
                continue;
            }
        };
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ if is_print(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\0'..='\u{1f}' | '\u{7f}' => push_hex(&mut out, "\\x", c as u32, 2),
            '\u{80}'..='\u{ffff}' => push_hex(&mut out, "\\u", c as u32, 4),
            _ => push_hex(&mut out, "\\U", c as u32, 8),
        }
    }
    out.push('"');
    out
}

fn push_hex(out: &mut String, prefix: &str, n: u32, digits: u32) {
    out.push_str(prefix);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (4 * i) & 0xf) as usize] as char);
    }
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols
/// and the ASCII space.
fn is_print(c: char) -> bool {
    let c = c as u32;
    if c < 0x80 {
        return (0x20..0x7f).contains(&c);
    }
    // Walk the code points where printability changes.
    let mut at = 0x80;
    let mut print = false;
    let mut i = 0;
    while i < GO_PRINT_CHANGES.len() {
        let mut delta = 0;
        let mut shift = 0;
        loop {
            let b = GO_PRINT_CHANGES[i];
            i += 1;
            delta |= u32::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
        at += delta;
        if c < at {
            return print;
        }
        print = !print;
    }
    print
}

/// Where Go's `strconv.IsPrint` changes, from U+0080 (not printable) up:
/// each change as the LEB128 varint of its distance from the previous one.
/// Generated with Go 1.26 (Unicode 15.0) by
///
/// ```go
/// prev, in := rune(0x80), false
/// for r := rune(0x80); r <= unicode.MaxRune+1; r++ {
///     if p := r <= unicode.MaxRune && strconv.IsPrint(r); p != in {
///         for d := uint32(r - prev); ; d >>= 7 {
///             if d < 0x80 {
///                 out = append(out, byte(d))
///                 break
///             }
///             out = append(out, byte(d)|0x80)
///         }
///         prev, in = r, p
///     }
/// }
/// ```
#[rustfmt::skip]
static GO_PRINT_CHANGES: [u8; 1503] = [
    33, 12, 1, 202, 5, 2, 6, 4, 7, 1, 1, 1, 20, 1, 141, 3, 1, 38, 2, 50, 2, 3, 1, 55,
    8, 27, 4, 6, 17, 22, 1, 192, 1, 1, 48, 2, 59, 2, 101, 14, 59, 2, 49, 2, 15, 1, 28, 2,
    1, 1, 11, 5, 31, 9, 74, 1, 161, 1, 1, 8, 2, 2, 2, 22, 1, 7, 1, 1, 3, 4, 2, 9,
    2, 2, 2, 4, 8, 1, 4, 2, 1, 5, 2, 25, 2, 3, 1, 6, 4, 2, 2, 22, 1, 7, 1, 2,
    1, 2, 1, 2, 2, 1, 1, 5, 4, 2, 2, 3, 3, 1, 7, 4, 1, 1, 7, 17, 10, 3, 1, 9,
    1, 3, 1, 22, 1, 7, 1, 2, 1, 5, 2, 10, 1, 3, 1, 3, 2, 1, 15, 4, 2, 12, 7, 7,
    1, 3, 1, 8, 2, 2, 2, 22, 1, 7, 1, 2, 1, 5, 2, 9, 2, 2, 2, 3, 7, 3, 4, 2,
    1, 5, 2, 18, 10, 2, 1, 6, 3, 3, 1, 4, 3, 2, 1, 1, 1, 2, 3, 2, 3, 3, 3, 12,
    4, 5, 3, 3, 1, 4, 2, 1, 6, 1, 14, 21, 5, 13, 1, 3, 1, 23, 1, 16, 2, 9, 1, 3,
    1, 4, 7, 2, 1, 3, 2, 1, 2, 4, 2, 10, 7, 22, 1, 3, 1, 23, 1, 10, 1, 5, 2, 9,
    1, 3, 1, 4, 7, 2, 6, 2, 1, 4, 2, 10, 1, 3, 12, 13, 1, 3, 1, 51, 1, 3, 1, 6,
    4, 16, 2, 26, 1, 3, 1, 18, 3, 24, 1, 9, 1, 1, 2, 7, 3, 1, 4, 6, 1, 1, 1, 8,
    6, 10, 2, 3, 12, 58, 4, 29, 37, 2, 1, 1, 1, 5, 1, 24, 1, 1, 1, 23, 2, 5, 1, 1,
    1, 7, 1, 10, 2, 4, 32, 72, 1, 36, 4, 39, 1, 36, 1, 15, 1, 13, 37, 198, 1, 1, 1, 5,
    1, 2, 249, 2, 1, 4, 2, 7, 1, 1, 1, 4, 2, 41, 1, 4, 2, 33, 1, 4, 2, 7, 1, 1,
    1, 4, 2, 15, 1, 57, 1, 4, 2, 67, 2, 32, 3, 26, 6, 86, 2, 6, 2, 128, 5, 1, 28, 3,
    89, 7, 22, 9, 24, 9, 20, 12, 13, 1, 3, 1, 2, 12, 94, 2, 10, 6, 10, 6, 14, 1, 11, 6,
    89, 7, 43, 5, 70, 10, 31, 1, 12, 4, 12, 4, 1, 3, 42, 2, 5, 11, 44, 4, 26, 6, 11, 3,
    62, 2, 65, 1, 29, 2, 11, 6, 10, 6, 14, 2, 31, 49, 77, 3, 47, 1, 116, 8, 60, 3, 15, 3,
    60, 7, 43, 2, 11, 8, 43, 5, 150, 4, 2, 6, 2, 38, 2, 6, 2, 8, 1, 1, 1, 1, 1, 1,
    1, 31, 2, 53, 1, 15, 1, 14, 2, 6, 1, 19, 2, 3, 1, 9, 17, 24, 8, 47, 17, 2, 2, 27,
    1, 13, 3, 33, 15, 33, 15, 140, 1, 4, 151, 5, 25, 11, 21, 148, 14, 2, 32, 1, 221, 2, 5, 45,
    1, 1, 5, 1, 2, 56, 7, 2, 14, 24, 9, 7, 1, 7, 1, 7, 1, 7, 1, 7, 1, 7, 1, 7,
    1, 7, 1, 126, 34, 26, 1, 89, 12, 214, 1, 26, 12, 5, 63, 1, 86, 2, 103, 5, 43, 1, 94, 1,
    84, 12, 47, 1, 237, 228, 1, 3, 55, 9, 220, 2, 20, 184, 1, 8, 203, 1, 5, 2, 1, 1, 1, 5,
    24, 59, 3, 10, 6, 56, 8, 70, 8, 12, 6, 116, 11, 30, 3, 78, 1, 11, 4, 33, 1, 55, 9, 14,
    2, 10, 2, 103, 24, 28, 10, 6, 2, 6, 2, 6, 9, 7, 1, 7, 1, 60, 4, 126, 2, 10, 6, 164,
    87, 12, 23, 4, 49, 132, 66, 238, 2, 2, 106, 38, 7, 12, 5, 5, 26, 1, 5, 1, 1, 1, 2, 1,
    2, 1, 125, 16, 189, 3, 2, 54, 7, 1, 32, 42, 6, 51, 1, 19, 1, 4, 4, 5, 1, 135, 1, 4,
    190, 1, 3, 6, 2, 6, 2, 6, 2, 3, 3, 7, 1, 7, 13, 2, 2, 12, 1, 26, 1, 19, 1, 2,
    1, 15, 2, 14, 34, 123, 5, 3, 4, 45, 3, 88, 1, 13, 3, 1, 47, 46, 130, 1, 29, 3, 49, 15,
    28, 4, 36, 9, 30, 5, 43, 5, 30, 1, 37, 4, 14, 42, 158, 1, 2, 10, 6, 36, 4, 36, 4, 40,
    8, 52, 11, 12, 1, 15, 1, 7, 1, 2, 1, 11, 1, 15, 1, 7, 1, 2, 67, 183, 2, 9, 22, 10,
    8, 24, 6, 1, 42, 1, 9, 69, 6, 2, 1, 1, 44, 1, 2, 3, 1, 2, 23, 1, 72, 8, 9, 48,
    19, 1, 2, 5, 33, 3, 27, 5, 1, 64, 56, 4, 20, 2, 50, 1, 2, 5, 8, 1, 3, 1, 29, 2,
    3, 4, 10, 7, 9, 7, 64, 32, 39, 4, 12, 9, 54, 3, 29, 2, 27, 5, 26, 7, 4, 12, 7, 80,
    73, 55, 51, 13, 51, 7, 46, 8, 10, 166, 2, 31, 1, 42, 1, 3, 2, 2, 75, 43, 8, 42, 22, 26,
    38, 28, 20, 23, 9, 78, 4, 36, 9, 62, 1, 5, 13, 25, 7, 10, 6, 53, 1, 18, 8, 39, 9, 96,
    1, 20, 11, 18, 1, 47, 62, 7, 1, 1, 1, 4, 1, 15, 1, 11, 6, 59, 5, 10, 6, 4, 1, 8,
    2, 2, 2, 22, 1, 7, 1, 2, 1, 5, 1, 10, 2, 2, 2, 3, 2, 1, 6, 1, 5, 7, 2, 7,
    3, 5, 139, 1, 92, 1, 5, 30, 72, 8, 10, 166, 1, 54, 2, 38, 34, 69, 11, 10, 6, 13, 19, 58,
    6, 10, 54, 27, 2, 15, 4, 23, 185, 1, 60, 100, 83, 12, 8, 2, 1, 2, 8, 1, 2, 1, 30, 1,
    2, 2, 12, 9, 10, 70, 8, 2, 46, 2, 11, 27, 72, 8, 83, 13, 73, 7, 10, 246, 1, 9, 1, 45,
    1, 14, 10, 29, 3, 32, 2, 22, 1, 14, 73, 7, 1, 2, 1, 44, 3, 1, 1, 2, 1, 9, 8, 10,
    6, 6, 1, 2, 1, 37, 1, 2, 1, 6, 7, 10, 182, 2, 25, 7, 17, 1, 41, 3, 28, 86, 1, 15,
    50, 13, 155, 7, 102, 111, 1, 5, 11, 196, 1, 204, 20, 99, 13, 176, 8, 16, 22, 170, 31, 199, 4, 185,
    67, 185, 4, 7, 31, 1, 10, 4, 81, 1, 10, 6, 30, 2, 6, 10, 70, 10, 10, 1, 7, 1, 21, 5,
    19, 176, 5, 91, 101, 75, 4, 57, 7, 17, 64, 5, 11, 2, 14, 248, 47, 8, 214, 9, 42, 9, 231, 69,
    4, 1, 7, 1, 2, 1, 163, 2, 15, 1, 29, 3, 2, 1, 14, 4, 8, 140, 3, 132, 18, 107, 5, 13,
    3, 9, 7, 10, 2, 4, 224, 36, 46, 2, 23, 9, 116, 60, 246, 1, 10, 39, 2, 74, 8, 112, 21, 70,
    122, 20, 12, 20, 12, 87, 9, 25, 135, 1, 85, 1, 71, 1, 2, 2, 1, 2, 2, 2, 4, 1, 12, 1,
    1, 1, 7, 1, 65, 1, 4, 2, 8, 1, 7, 1, 28, 1, 4, 1, 5, 1, 1, 3, 7, 1, 212, 2,
    2, 164, 2, 2, 190, 5, 15, 5, 1, 15, 208, 8, 31, 6, 6, 213, 1, 7, 1, 17, 2, 7, 1, 2,
    1, 5, 5, 62, 33, 1, 112, 45, 3, 14, 2, 10, 4, 2, 192, 2, 31, 17, 58, 5, 1, 208, 3, 42,
    230, 5, 7, 1, 4, 1, 2, 1, 15, 1, 197, 1, 2, 16, 41, 76, 4, 10, 4, 2, 145, 6, 68, 76,
    61, 194, 1, 4, 1, 27, 1, 2, 1, 1, 2, 1, 1, 10, 1, 4, 1, 1, 1, 1, 6, 1, 4, 1,
    1, 1, 1, 1, 1, 3, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1,
    2, 4, 1, 7, 1, 4, 1, 4, 1, 1, 1, 10, 1, 17, 5, 3, 1, 5, 1, 17, 52, 2, 142, 2,
    44, 4, 100, 12, 15, 2, 15, 1, 15, 1, 37, 10, 174, 1, 56, 29, 13, 44, 4, 9, 7, 2, 14, 6,
    154, 1, 216, 7, 4, 17, 3, 13, 3, 119, 4, 95, 6, 12, 4, 1, 15, 12, 4, 56, 8, 10, 6, 40,
    8, 30, 2, 2, 78, 212, 2, 12, 14, 2, 13, 3, 9, 7, 46, 1, 7, 8, 14, 4, 9, 7, 9, 7,
    147, 1, 1, 55, 37, 10, 134, 8, 224, 205, 2, 32, 186, 32, 6, 222, 1, 2, 130, 45, 14, 177, 58, 159,
    24, 158, 4, 226, 11, 203, 38, 5, 224, 32, 208, 186, 43, 240, 1,
];

#[cfg(test)]
mod tests {
    use super::*;

    // Go's answers, from Go 1.26: strconv.Quote(s), and s through
    // encoding/json (json.Marshal, then json.Unmarshal). The first
    // GO_QUOTE cases are runes on both sides of every tenth of the 1420
    // changes of printability.
    const GO_QUOTE: &[(&[u8], &str)] = &[
        (b"\xc2\xa0\xc2\xa1\xce\x8d\xce\x8e\xd6\x90\xd6\x91\xdb\x9d\xdb\x9e\xe0\xa0\xaf\xe0\xa0\xb0\xe0\xa2\x97\xe0\xa2\x98\xe0\xa6\xa9\xe0\xa6\xaa\xe0\xa7\x8a\xe0\xa7\x8b", "\"\\u00a0\u{a1}\\u038d\u{38e}\\u0590\u{591}\\u06dd\u{6de}\\u082f\u{830}\\u0897\u{898}\\u09a9\u{9aa}\\u09ca\u{9cb}\""),
        (b"\xe0\xa8\x80\xe0\xa8\x81\xe0\xa8\xb1\xe0\xa8\xb2\xe0\xa9\x86\xe0\xa9\x87\xe0\xa9\xa5\xe0\xa9\xa6\xe0\xaa\xa9\xe0\xaa\xaa\xe0\xab\x8a\xe0\xab\x8b\xe0\xac\x80\xe0\xac\x81\xe0\xac\xb1\xe0\xac\xb2", "\"\\u0a00\u{a01}\\u0a31\u{a32}\\u0a46\u{a47}\\u0a65\u{a66}\\u0aa9\u{aaa}\\u0aca\u{acb}\\u0b00\u{b01}\\u0b31\u{b32}\""),
        (b"\xe0\xad\x94\xe0\xad\x95\xe0\xae\x84\xe0\xae\x85\xe0\xae\x9d\xe0\xae\x9e\xe0\xaf\x85\xe0\xaf\x86\xe0\xaf\xbf\xe0\xb0\x80\xe0\xb1\x85\xe0\xb1\x86\xe0\xb1\x9f\xe0\xb1\xa0\xe0\xb2\xa9\xe0\xb2\xaa", "\"\\u0b54\u{b55}\\u0b84\u{b85}\\u0b9d\u{b9e}\\u0bc5\u{bc6}\\u0bff\u{c00}\\u0c45\u{c46}\\u0c5f\u{c60}\\u0ca9\u{caa}\""),
        (b"\xe0\xb3\x94\xe0\xb3\x95\xe0\xb3\xbf\xe0\xb4\x80\xe0\xb5\x93\xe0\xb5\x94\xe0\xb6\xb2\xe0\xb6\xb3\xe0\xb7\x95\xe0\xb7\x96\xe0\xb8\xbe\xe0\xb8\xbf\xe0\xba\xa4\xe0\xba\xa5\xe0\xbb\x8f\xe0\xbb\x90", "\"\\u0cd4\u{cd5}\\u0cff\u{d00}\\u0d53\u{d54}\\u0db2\u{db3}\\u0dd5\u{dd6}\\u0e3e\u{e3f}\\u0ea4\u{ea5}\\u0ecf\u{ed0}\""),
        (b"\xe0\xbe\x98\xe0\xbe\x99\xe1\x83\x8c\xe1\x83\x8d\xe1\x89\x99\xe1\x89\x9a\xe1\x8a\xb7\xe1\x8a\xb8\xe1\x8c\x91\xe1\x8c\x92\xe1\x8f\xb7\xe1\x8f\xb8\xe1\x9c\x9e\xe1\x9c\x9f\xe1\x9d\xbf\xe1\x9e\x80", "\"\\u0f98\u{f99}\\u10cc\u{10cd}\\u1259\u{125a}\\u12b7\u{12b8}\\u1311\u{1312}\\u13f7\u{13f8}\\u171e\u{171f}\\u177f\u{1780}\""),
        (b"\xe1\xa0\x9f\xe1\xa0\xa0\xe1\xa4\xaf\xe1\xa4\xb0\xe1\xa6\xaf\xe1\xa6\xb0\xe1\xa9\xbe\xe1\xa9\xbf\xe1\xad\x8f\xe1\xad\x90\xe1\xb2\x8f\xe1\xb2\x90\xe1\xbc\x9f\xe1\xbc\xa0\xe1\xbd\x9c\xe1\xbd\x9d", "\"\\u181f\u{1820}\\u192f\u{1930}\\u19af\u{19b0}\\u1a7e\u{1a7f}\\u1b4f\u{1b50}\\u1c8f\u{1c90}\\u1f1f\u{1f20}\\u1f5c\u{1f5d}\""),
        (b"\xe1\xbf\x95\xe1\xbf\x96\xe2\x80\xaf\xe2\x80\xb0\xe2\x83\x8f\xe2\x83\x90\xe2\xad\xb5\xe2\xad\xb6\xe2\xb4\xaf\xe2\xb4\xb0\xe2\xb6\xaf\xe2\xb6\xb0\xe2\xb7\x97\xe2\xb7\x98\xe2\xbf\xaf\xe2\xbf\xb0", "\"\\u1fd5\u{1fd6}\\u202f\u{2030}\\u20cf\u{20d0}\\u2b75\u{2b76}\\u2d2f\u{2d30}\\u2daf\u{2db0}\\u2dd7\u{2dd8}\\u2fef\u{2ff0}\""),
        (b"\xe3\x84\xb0\xe3\x84\xb1\xea\x93\x8f\xea\x93\x90\xea\x9f\x94\xea\x9f\x95\xea\xa3\x8d\xea\xa3\x8e\xea\xa7\x9d\xea\xa7\x9e\xea\xab\x9a\xea\xab\x9b\xea\xac\xa7\xea\xac\xa8\xed\x9e\xaf\xed\x9e\xb0", "\"\\u3130\u{3131}\\ua4cf\u{a4d0}\\ua7d4\u{a7d5}\\ua8cd\u{a8ce}\\ua9dd\u{a9de}\\uaada\u{aadb}\\uab27\u{ab28}\\ud7af\u{d7b0}\""),
        (b"\xef\xac\x92\xef\xac\x93\xef\xad\x82\xef\xad\x83\xef\xb7\xaf\xef\xb7\xb0\xef\xb9\xb5\xef\xb9\xb6\xef\xbf\x99\xef\xbf\x9a\xf0\x90\x80\x8c\xf0\x90\x80\x8d\xf0\x90\x81\xbf\xf0\x90\x82\x80\xf0\x90\x86\x9f\xf0\x90\x86\xa0", "\"\\ufb12\u{fb13}\\ufb42\u{fb43}\\ufdef\u{fdf0}\\ufe75\u{fe76}\\uffd9\u{ffda}\\U0001000c\u{1000d}\\U0001007f\u{10080}\\U0001019f\u{101a0}\""),
        (b"\xf0\x90\x8b\xbf\xf0\x90\x8c\x80\xf0\x90\x8f\x87\xf0\x90\x8f\x88\xf0\x90\x93\xbf\xf0\x90\x94\x80\xf0\x90\x96\x93\xf0\x90\x96\x94\xf0\x90\x97\xbf\xf0\x90\x98\x80\xf0\x90\x9e\xb1\xf0\x90\x9e\xb2\xf0\x90\xa0\xbb\xf0\x90\xa0\xbc\xf0\x90\xa3\xb3\xf0\x90\xa3\xb4", "\"\\U000102ff\u{10300}\\U000103c7\u{103c8}\\U000104ff\u{10500}\\U00010593\u{10594}\\U000105ff\u{10600}\\U000107b1\u{107b2}\\U0001083b\u{1083c}\\U000108f3\u{108f4}\""),
        (b"\xf0\x90\xa6\xbb\xf0\x90\xa6\xbc\xf0\x90\xa8\x98\xf0\x90\xa8\x99\xf0\x90\xaa\xbf\xf0\x90\xab\x80\xf0\x90\xad\xb7\xf0\x90\xad\xb8\xf0\x90\xb2\xbf\xf0\x90\xb3\x80\xf0\x90\xba\xaa\xf0\x90\xba\xab\xf0\x90\xbe\xaf\xf0\x90\xbe\xb0\xf0\x91\x82\xbd\xf0\x91\x82\xbe", "\"\\U000109bb\u{109bc}\\U00010a18\u{10a19}\\U00010abf\u{10ac0}\\U00010b77\u{10b78}\\U00010cbf\u{10cc0}\\U00010eaa\u{10eab}\\U00010faf\u{10fb0}\\U000110bd\u{110be}\""),
        (b"\xf0\x91\x85\x8f\xf0\x91\x85\x90\xf0\x91\x89\xbf\xf0\x91\x8a\x80\xf0\x91\x8a\xaf\xf0\x91\x8a\xb0\xf0\x91\x8c\x92\xf0\x91\x8c\x93\xf0\x91\x8d\x86\xf0\x91\x8d\x87\xf0\x91\x8d\xa5\xf0\x91\x8d\xa6\xf0\x91\x93\x8f\xf0\x91\x93\x90\xf0\x91\x99\x9f\xf0\x91\x99\xa0", "\"\\U0001114f\u{11150}\\U0001127f\u{11280}\\U000112af\u{112b0}\\U00011312\u{11313}\\U00011346\u{11347}\\U00011365\u{11366}\\U000114cf\u{114d0}\\U0001165f\u{11660}\""),
        (b"\xf0\x91\x9c\xaf\xf0\x91\x9c\xb0\xf0\x91\xa4\x8b\xf0\x91\xa4\x8c\xf0\x91\xa5\x8f\xf0\x91\xa5\x90\xf0\x91\xa9\x8f\xf0\x91\xa9\x90\xf0\x91\xb0\xb7\xf0\x91\xb0\xb8\xf0\x91\xb3\xbf\xf0\x91\xb4\x80\xf0\x91\xb4\xbe\xf0\x91\xb4\xbf\xf0\x91\xb6\x8f\xf0\x91\xb6\x90", "\"\\U0001172f\u{11730}\\U0001190b\u{1190c}\\U0001194f\u{11950}\\U00011a4f\u{11a50}\\U00011c37\u{11c38}\\U00011cff\u{11d00}\\U00011d3e\u{11d3f}\\U00011d8f\u{11d90}\""),
        (b"\xf0\x91\xbc\x91\xf0\x91\xbc\x92\xf0\x92\x8f\xbf\xf0\x92\x90\x80\xf0\x93\x90\xbf\xf0\x93\x91\x80\xf0\x96\xa9\xad\xf0\x96\xa9\xae\xf0\x96\xad\x8f\xf0\x96\xad\x90\xf0\x96\xbb\xbf\xf0\x96\xbc\x80\xf0\x96\xbf\xbf\xf0\x97\x80\x80\xf0\x9a\xbf\xbc\xf0\x9a\xbf\xbd", "\"\\U00011f11\u{11f12}\\U000123ff\u{12400}\\U0001343f\u{13440}\\U00016a6d\u{16a6e}\\U00016b4f\u{16b50}\\U00016eff\u{16f00}\\U00016fff\u{17000}\\U0001affc\u{1affd}\""),
        (b"\xf0\x9b\x85\xa3\xf0\x9b\x85\xa4\xf0\x9b\xb2\x8f\xf0\x9b\xb2\x90\xf0\x9c\xbf\xbf\xf0\x9d\x80\x80\xf0\x9d\x8a\xbf\xf0\x9d\x8b\x80\xf0\x9d\x91\x95\xf0\x9d\x91\x96\xf0\x9d\x92\xad\xf0\x9d\x92\xae\xf0\x9d\x94\x8c\xf0\x9d\x94\x8d\xf0\x9d\x95\x85\xf0\x9d\x95\x86", "\"\\U0001b163\u{1b164}\\U0001bc8f\u{1bc90}\\U0001cfff\u{1d000}\\U0001d2bf\u{1d2c0}\\U0001d455\u{1d456}\\U0001d4ad\u{1d4ae}\\U0001d50c\u{1d50d}\\U0001d545\u{1d546}\""),
        (b"\xf0\x9d\xaa\x9a\xf0\x9d\xaa\x9b\xf0\x9e\x80\x87\xf0\x9e\x80\x88\xf0\x9e\x82\x8e\xf0\x9e\x82\x8f\xf0\x9e\x8a\x8f\xf0\x9e\x8a\x90\xf0\x9e\x9f\xa7\xf0\x9e\x9f\xa8\xf0\x9e\xa3\xbf\xf0\x9e\xa4\x80\xf0\x9e\xb7\xbf\xf0\x9e\xb8\x80\xf0\x9e\xb8\xa8\xf0\x9e\xb8\xa9", "\"\\U0001da9a\u{1da9b}\\U0001e007\u{1e008}\\U0001e08e\u{1e08f}\\U0001e28f\u{1e290}\\U0001e7e7\u{1e7e8}\\U0001e8ff\u{1e900}\\U0001edff\u{1ee00}\\U0001ee28\u{1ee29}\""),
        (b"\xf0\x9e\xb9\x86\xf0\x9e\xb9\x87\xf0\x9e\xb9\x93\xf0\x9e\xb9\x94\xf0\x9e\xb9\x9e\xf0\x9e\xb9\x9f\xf0\x9e\xb9\xb3\xf0\x9e\xb9\xb4\xf0\x9e\xba\xa0\xf0\x9e\xba\xa1\xf0\x9f\x80\xaf\xf0\x9f\x80\xb0\xf0\x9f\x83\xbf\xf0\x9f\x84\x80\xf0\x9f\x89\x9f\xf0\x9f\x89\xa0", "\"\\U0001ee46\u{1ee47}\\U0001ee53\u{1ee54}\\U0001ee5e\u{1ee5f}\\U0001ee73\u{1ee74}\\U0001eea0\u{1eea1}\\U0001f02f\u{1f030}\\U0001f0ff\u{1f100}\\U0001f25f\u{1f260}\""),
        (b"\xf0\x9f\x9d\xba\xf0\x9f\x9d\xbb\xf0\x9f\xa1\x8f\xf0\x9f\xa1\x90\xf0\x9f\xa9\x9f\xf0\x9f\xa9\xa0\xf0\x9f\xab\x8d\xf0\x9f\xab\x8e\xf0\x9f\xaf\xaf\xf0\x9f\xaf\xb0\xf0\xac\xba\xaf\xf0\xac\xba\xb0", "\"\\U0001f77a\u{1f77b}\\U0001f84f\u{1f850}\\U0001fa5f\u{1fa60}\\U0001facd\u{1face}\\U0001fbef\u{1fbf0}\\U0002ceaf\u{2ceb0}\""),
        (b"", "\"\""),
        (b"plain", "\"plain\""),
        (b"\"q\" \\ ' `", "\"\\\"q\\\" \\\\ ' `\""),
        (b"\x07\x08\x0c\x0a\x0d\x09\x0b\x00\x1b\x7f ~", "\"\\a\\b\\f\\n\\r\\t\\v\\x00\\x1b\\x7f ~\""),
        (b"\xff\xfe", "\"\\xff\\xfe\""),
        (b"a\xe2\x82b\xed\xa0\x80c\xf0\x9f\x98", "\"a\\xe2\\x82b\\xed\\xa0\\x80c\\xf0\\x9f\\x98\""),
        (b"\xc2\xa0\xc2\xad\xcd\xb8\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf\xef\xbf\xbd\xf4\x8f\xbf\xbf\xf3\xa0\x80\x81\xf3\xb0\x80\x80", "\"\\u00a0\\u00ad\\u0378\\u2028\\u2029\\ufeff\u{fffd}\\U0010ffff\\U000e0001\\U000f0000\""),
        (b"\xc3\xa9 \xc4\xb0 \xe2\x84\xaa \xef\xac\x81 \xf0\x9f\x98\x80 \xf0\x9f\x8f\xbb", "\"\u{e9} \u{130} \u{212a} \u{fb01} \u{1f600} \u{1f3fb}\""),
        (b"\xc0\x80 \xf4\x90\x80\x80 \xef\xbf\xbd", "\"\\xc0\\x80 \\xf4\\x90\\x80\\x80 \u{fffd}\""),
    ];
    const GO_JSON: &[(&[u8], &str)] = &[
        (b"", ""),
        (b"plain", "plain"),
        (b"\"q\" \\ ' `", "\"q\" \\ ' `"),
        (b"\x07\x08\x0c\x0a\x0d\x09\x0b\x00\x1b\x7f ~", "\u{7}\u{8}\u{c}\u{a}\u{d}\u{9}\u{b}\u{0}\u{1b}\u{7f} ~"),
        (b"\xff\xfe", "\u{fffd}\u{fffd}"),
        (b"a\xe2\x82b\xed\xa0\x80c\xf0\x9f\x98", "a\u{fffd}\u{fffd}b\u{fffd}\u{fffd}\u{fffd}c\u{fffd}\u{fffd}\u{fffd}"),
        (b"\xc2\xa0\xc2\xad\xcd\xb8\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf\xef\xbf\xbd\xf4\x8f\xbf\xbf\xf3\xa0\x80\x81\xf3\xb0\x80\x80", "\u{a0}\u{ad}\u{378}\u{2028}\u{2029}\u{feff}\u{fffd}\u{10ffff}\u{e0001}\u{f0000}"),
        (b"\xc3\xa9 \xc4\xb0 \xe2\x84\xaa \xef\xac\x81 \xf0\x9f\x98\x80 \xf0\x9f\x8f\xbb", "\u{e9} \u{130} \u{212a} \u{fb01} \u{1f600} \u{1f3fb}"),
        (b"\xc0\x80 \xf4\x90\x80\x80 \xef\xbf\xbd", "\u{fffd}\u{fffd} \u{fffd}\u{fffd}\u{fffd}\u{fffd} \u{fffd}"),
    ];

    #[test]
    fn quotes_as_go() {
        for (s, want) in GO_QUOTE {
            assert_eq!(quote(s), *want, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn replaces_invalid_utf8_as_go() {
        for (s, want) in GO_JSON {
            assert_eq!(lossy(s), *want, "{:?}", s);
        }
    }

    #[test]
    fn decodes_runes_as_go() {
        let got: Vec<Result<char, u8>> =
            runes(b"a\xe2\x82\xc4\xb0\xff\xed\xa0\x80\xf0\x9f\x98\x80").collect();
        assert_eq!(
            got,
            [
                Ok('a'),
                Err(0xe2),
                Err(0x82),
                Ok('İ'),
                Err(0xff),
                Err(0xed),
                Err(0xa0),
                Err(0x80),
                Ok('😀')
            ]
        );
        assert_eq!(runes(b"").count(), 0);
    }

    #[test]
    fn the_table_ends_where_unicode_does() {
        let mut at = 0x80;
        let mut changes = 0;
        let mut i = 0;
        while i < GO_PRINT_CHANGES.len() {
            let (mut delta, mut shift) = (0, 0);
            loop {
                let b = GO_PRINT_CHANGES[i];
                i += 1;
                delta |= u32::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    break;
                }
            }
            assert!(delta > 0);
            at += delta;
            changes += 1;
        }
        assert_eq!(changes, 1420);
        assert!(at < 0x110000);
        assert!(!is_print('\u{10FFFF}'));
    }
}
