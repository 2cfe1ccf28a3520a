//! A call's log limit, as agentrt keeps it (protocol's `Call.Log` and
//! `Call.Progress`): log lines and progress reports count against it, each
//! as a record of its text as stored (a JSON string without HTML escaping,
//! invalid UTF-8 as U+FFFD) plus 64 bytes. A line that would put the log
//! over the limit fills it: it is dropped, the log says so once, and every
//! later line and report is refused. A report that would put it over is
//! dropped and refused, and leaves the log as it was.

use super::State;
use crate::abi;

/// agentrt's default log limit of a call (`--max-log`).
pub(crate) const DEFAULT_MAX_LOG: usize = 64 << 10;

/// What a record costs beyond its text.
const OVERHEAD: usize = 64;

fn max_log(s: &State) -> usize {
    if s.max_log > 0 {
        s.max_log
    } else {
        DEFAULT_MAX_LOG
    }
}

/// Counts a log line of `msg`, or says why the host refuses it: past the
/// limit, the log is full and says so.
pub(super) fn count_line(s: &mut State, msg: &[u8]) -> Result<(), String> {
    let max = max_log(s);
    if s.log_full {
        return Err(format!("the log limit of {} bytes was reached", max));
    }
    let size = log_record_size(msg);
    if s.log_bytes + size > max {
        s.log_full = true;
        s.logs.push((
            abi::LEVEL_WARN,
            format!("log limit of {} bytes reached; later lines dropped", max),
        ));
        return Err(format!("the log limit of {} bytes was reached", max));
    }
    s.log_bytes += size;
    Ok(())
}

/// Counts a progress report of `msg` and `output`, or says why the host
/// refuses it.
pub(super) fn count_progress(s: &mut State, msg: &[u8], output: &[u8]) -> Result<(), String> {
    let max = max_log(s);
    if s.log_full {
        return Err(format!("the log limit of {} bytes was reached", max));
    }
    // As agentrt says it: the least the report could take when that is
    // already too much, else what it takes.
    let mut size = OVERHEAD + msg.len() + output.len();
    if s.log_bytes + size <= max {
        size = log_record_size(msg) + log_record_size(output) - OVERHEAD;
    }
    if s.log_bytes + size > max {
        return Err(format!(
            "a progress report of {} bytes would put the call over its log limit of {} bytes",
            size, max
        ));
    }
    s.log_bytes += size;
    Ok(())
}

/// What a record of `text` counts against a log limit, as agentrt counts
/// it: 64 bytes, plus the text as a JSON string without HTML escaping (a
/// quote, a backslash and \b \f \n \r \t take 2 bytes, another control
/// character 6, U+2028 and U+2029 6), each byte that is not UTF-8 counted
/// as U+FFFD (3 bytes).
pub(crate) fn log_record_size(mut text: &[u8]) -> usize {
    let mut n = OVERHEAD;
    loop {
        let (valid, invalid) = match std::str::from_utf8(text) {
            Ok(s) => (s, 0),
            Err(e) => {
                let valid = std::str::from_utf8(&text[..e.valid_up_to()]).unwrap_or("");
                let bad = e.error_len().unwrap_or(text.len() - e.valid_up_to());
                (valid, bad)
            }
        };
        for c in valid.chars() {
            n += match c {
                '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                c if (c as u32) < 0x20 => 6,
                '\u{2028}' | '\u{2029}' => 6,
                c => c.len_utf8(),
            };
        }
        // Each byte of an invalid sequence is one U+FFFD where agentrt
        // decodes it (Go's utf8.DecodeRune takes one byte at a time).
        n += 3 * invalid;
        if invalid == 0 {
            return n;
        }
        text = &text[valid.len() + invalid..];
    }
}

/// `text` as agentrt keeps it: each run of bytes that are not UTF-8
/// replaced by one U+FFFD (Go's bytes.ToValidUTF8).
pub(crate) fn valid_text(mut text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    loop {
        match std::str::from_utf8(text) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let valid = std::str::from_utf8(&text[..e.valid_up_to()]).unwrap_or("");
                if !valid.is_empty() {
                    out.push_str(valid);
                    in_run = false;
                }
                if !in_run {
                    out.push('\u{FFFD}');
                    in_run = true;
                }
                let bad = e.error_len().unwrap_or(text.len() - e.valid_up_to());
                text = &text[e.valid_up_to() + bad..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_counts_its_text_as_stored() {
        let cases: &[(&[u8], usize)] = &[
            (b"", 0),
            (b"plain", 5),
            (b"\"\\\n\r\t\x08\x0c", 14),
            (b"\x00\x1f", 12),
            (b"\x7f<>&", 4),
            ("\u{2028}\u{2029}".as_bytes(), 12),
            ("é€😀".as_bytes(), 9),
            (b"\xff\xfe", 6),
            (b"a\xe2\x82b", 8),
            (b"\xed\xa0\x80", 9),
        ];
        for (text, size) in cases {
            assert_eq!(log_record_size(text), 64 + size, "{:?}", text);
        }
    }

    #[test]
    fn each_run_of_invalid_bytes_is_one_replacement() {
        assert_eq!(valid_text(b"plain"), "plain");
        assert_eq!(valid_text(b"\xff\xfe"), "\u{FFFD}");
        assert_eq!(valid_text(b"a\xe2\x82b\xff"), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(valid_text(b"\xed\xa0\x80x"), "\u{FFFD}x");
        assert_eq!(valid_text("é\u{2028}".as_bytes()), "é\u{2028}");
    }
}
