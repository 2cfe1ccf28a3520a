//! Where the fake host lets outbound requests go: a port of the host's
//! reading of destinations and URLs (plugins/abi/destination.go, whose top
//! comment says why each rule is there), so that a plugin's test is
//! refused what agentrt would refuse, with the same words.
//!
//! A destination (a grant, a secret's binding) is
//! `scheme://host[:port][/path-prefix]`, `*.` before a name for its
//! subdomains, and must be written in its one canonical spelling: scheme
//! and host in lower case, an IPv6 address in brackets as RFC 5952 writes
//! it, no port when it is the scheme's, a path's escapes as RFC 3986
//! normalises them. A request's URL may write the scheme and host in any
//! case, an IPv6 address in any form and the scheme's port out; it is
//! sent in the canonical form. Refused in both: a host with a ':' outside
//! brackets, a host ending in a number that is not an IPv4 address in
//! dotted decimal, an empty label, a port with a leading zero, user
//! information, a fragment, "." and ".." segments, an escaped '/' or '\',
//! and characters RFC 3986 does not allow. The shared cases in
//! plugins/abi/testdata/destinations hold the two readings to one truth.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::abi;

/// An absolute http or https URL as the policy reads it and the host
/// sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub scheme: String,
    /// In lower case: a name, an IPv4 address, or an IPv6 address
    /// (without brackets) as RFC 5952 writes it.
    pub host: String,
    pub port: u16,
    /// The escaped path as given, "/" at least.
    pub path: String,
    /// The escaped query as given, without its '?'.
    pub query: String,
}

/// A place outbound requests may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    pub scheme: String,
    pub host: String,
    pub wildcard: bool,
    pub port: u16,
    /// A prefix of whole segments; "" for every path.
    pub path: String,
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" {
        443
    } else {
        80
    }
}

/// A host and its port, the port only when it is not the scheme's, an
/// IPv6 address in brackets.
fn host_port(host: &str, port: u16, scheme: &str) -> String {
    let mut s = if host.contains(':') {
        format!("[{}]", host)
    } else {
        host.to_string()
    };
    if port != default_port(scheme) {
        s.push_str(&format!(":{}", port));
    }
    s
}

impl Target {
    /// The URL as the host sends it.
    pub fn url(&self) -> String {
        let mut s = format!("{}{}", self.origin(), self.path);
        if !self.query.is_empty() {
            s.push('?');
            s.push_str(&self.query);
        }
        s
    }

    /// The target without its path and query.
    pub fn origin(&self) -> String {
        format!(
            "{}://{}",
            self.scheme,
            host_port(&self.host, self.port, &self.scheme)
        )
    }
}

impl Destination {
    /// The destination as [`parse_destination`] reads it.
    pub fn spelling(&self) -> String {
        let host = if self.wildcard {
            format!("*.{}", self.host)
        } else {
            self.host.clone()
        };
        format!(
            "{}://{}{}",
            self.scheme,
            host_port(&host, self.port, &self.scheme),
            self.path
        )
    }

    /// Whether a request to `t` may go here.
    pub fn allows(&self, t: &Target) -> bool {
        let host = if self.wildcard {
            t.host.ends_with(&format!(".{}", self.host)) && !t.host.contains(':')
        } else {
            t.host == self.host
        };
        self.scheme == t.scheme && self.port == t.port && host && path_covers(&self.path, &t.path)
    }
}

/// Whether the path prefix `prefix` holds `path`: its segments are
/// `path`'s first.
fn path_covers(prefix: &str, path: &str) -> bool {
    if prefix.is_empty() || path == prefix {
        return true;
    }
    if !path.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/') || path.as_bytes()[prefix.len()] == b'/'
}

/// Reads an absolute http or https URL, refusing what the host will not
/// send or could read two ways (abi.ParseTarget).
pub(crate) fn parse_target(raw: &str) -> Result<Target, String> {
    let u = parse_web_url(raw, false)?;
    let t = Target {
        scheme: u.scheme,
        host: u.host,
        port: u.port,
        path: u.path,
        query: u.query,
    };
    if t.url().len() > abi::MAX_URL_BYTES {
        return Err(format!(
            "the URL is over {} bytes as it is sent",
            abi::MAX_URL_BYTES
        ));
    }
    Ok(t)
}

/// Reads a destination, in its canonical spelling only
/// (abi.ParseDestination); the error says how to write another spelling.
pub(crate) fn parse_destination(s: &str) -> Result<Destination, String> {
    let u = parse_web_url(s, true)?;
    Ok(Destination {
        scheme: u.scheme,
        host: u.host,
        wildcard: u.wildcard,
        port: u.port,
        path: u.path,
    })
}

struct WebUrl {
    scheme: String,
    host: String,
    wildcard: bool,
    port: u16,
    path: String,
    query: String,
}

/// Reads a request's URL (`grant` false) or a destination (`grant` true)
/// by the same rules (abi's parseWebURL).
fn parse_web_url(raw: &str, grant: bool) -> Result<WebUrl, String> {
    let what = if grant { "the destination" } else { "the URL" };
    if raw.len() > abi::MAX_URL_BYTES {
        return Err(format!("{} is over {} bytes", what, abi::MAX_URL_BYTES));
    }
    if let Some(why) = url_chars(raw) {
        return Err(format!("{} {}", what, why));
    }
    if grant && raw.contains(|c| c == '?' || c == '#') {
        return Err("a destination has no query or fragment".into());
    }
    if raw.contains('#') {
        return Err("the URL has a fragment (#…), which is never sent: leave it out".into());
    }
    let (scheme, rest) =
        match raw.split_once("://") {
            Some(pair) => pair,
            None if grant => return Err(
                "want a destination such as https://api.example.com or https://*.example.com/v1"
                    .into(),
            ),
            None => return Err("the URL is not absolute: want http://… or https://…".into()),
        };
    let lower = scheme.to_ascii_lowercase();
    if lower != "http" && lower != "https" {
        return Err(if grant {
            "a destination's scheme is http or https".into()
        } else {
            "the URL's scheme is not http or https".into()
        });
    }
    if grant && scheme != lower {
        return Err(format!("write the scheme in lower case: {}", lower));
    }
    let end = rest.find(|c| c == '/' || c == '?').unwrap_or(rest.len());
    let (mut authority, rest) = rest.split_at(end);
    let mut wildcard = false;
    if grant {
        if let Some(a) = authority.strip_prefix("*.") {
            wildcard = true;
            authority = a;
        }
    }
    let (host, port, canonical) = parse_authority(authority, wildcard)?;
    if grant && !canonical {
        let shown = if wildcard {
            format!("*.{}", host)
        } else {
            host.clone()
        };
        return Err(format!(
            "write the host as {} (a name in lower case, an IPv6 address as RFC 5952 writes it)",
            host_port(&shown, default_port(&lower), &lower)
        ));
    }
    let port = match port {
        0 => default_port(&lower),
        p if grant && p == default_port(&lower) => {
            return Err(format!("leave the port out: {} is {}'s", p, lower))
        }
        p => p,
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut path = path.to_string();
    if !path.is_empty() {
        check_path(&path)?;
    }
    if grant && path == "/" {
        path.clear();
    } else if grant {
        canonical_escapes(&path)?;
    } else if path.is_empty() {
        path.push('/');
    }
    Ok(WebUrl {
        scheme: lower,
        host,
        wildcard,
        port,
        path,
        query: query.to_string(),
    })
}

/// What is wrong with the characters of a URL: each is printable ASCII
/// that RFC 3986 allows, and each '%' starts an escape.
fn url_chars(s: &str) -> Option<String> {
    if s.bytes()
        .any(|c| c <= b' ' || c >= 0x7f || b"\"<>\\^`{|}".contains(&c))
    {
        return Some(
            "holds a character a URL may not (percent-encode it; secrets go in headers)".into(),
        );
    }
    let b = s.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'%'
            && (i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit())
        {
            return Some("has a '%' that starts no escape".into());
        }
    }
    None
}

/// Checks that a destination's path writes each escape as RFC 3986
/// normalises it: hex digits in upper case, no escape of an unreserved
/// character.
fn canonical_escapes(s: &str) -> Result<(), String> {
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        let esc = &rest[i..i + 3];
        rest = &rest[i + 3..];
        let c = u8::from_str_radix(&esc[1..], 16).unwrap_or(0);
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            return Err(format!(
                "write the path's {} as {} (it needs no escape)",
                esc, c as char
            ));
        }
        if esc != esc.to_ascii_uppercase() {
            return Err(format!(
                "write the path's {} as {}",
                esc,
                esc.to_ascii_uppercase()
            ));
        }
    }
    Ok(())
}

/// Reads host[:port] as abi's parseAuthority: the host in canonical form,
/// the port (0 when none is given), and whether the host was written
/// canonically.
fn parse_authority(s: &str, wildcard: bool) -> Result<(String, u16, bool), String> {
    if s.contains('@') {
        return Err(
            "user information (user@) is refused: put credentials in a header, with a secret"
                .into(),
        );
    }
    let host;
    let canonical;
    let port_text;
    if let Some(v6) = s.strip_prefix('[') {
        let end = v6
            .find(']')
            .ok_or_else(|| "the IPv6 address has no closing ']'".to_string())?;
        let written = &v6[..end];
        let a: Ipv6Addr = written
            .parse()
            .map_err(|_| "the host is not an IPv6 address (without a zone)".to_string())?;
        if wildcard {
            return Err("a wildcard (*.) is for names, not addresses".into());
        }
        host = ipv6_string(&a);
        canonical = host == written;
        let after = &v6[end + 1..];
        if !after.is_empty() && !after.starts_with(':') {
            return Err("the host has something after its IPv6 address".into());
        }
        port_text = after.strip_prefix(':');
    } else {
        let (h, p) = match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        if p.map_or(false, |p| p.contains(':')) {
            return Err(
                "the host holds a ':' (an IPv6 address is written in brackets: [::1])".into(),
            );
        }
        let lower = h.to_ascii_lowercase();
        check_host_name(&lower, wildcard)?;
        canonical = lower == h;
        host = lower;
        port_text = p;
    }
    let mut port = 0;
    if let Some(p) = port_text {
        port = match p.parse::<u16>() {
            Ok(n) if n >= 1 && p.as_bytes()[0] != b'0' && p.as_bytes()[0].is_ascii_digit() => n,
            _ => {
                return Err(
                    "the port is not a number from 1 to 65535 (without leading zeros)".into(),
                )
            }
        };
    }
    Ok((host, port, canonical))
}

/// An IPv6 address as RFC 5952 writes it, as Go's netip does: an
/// IPv4-mapped address as ::ffff:a.b.c.d, otherwise groups in lower-case
/// hex without leading zeros and the longest run of two or more zero
/// groups (the first of equal runs) as "::".
fn ipv6_string(a: &Ipv6Addr) -> String {
    let seg = a.segments();
    if seg[..5] == [0, 0, 0, 0, 0] && seg[5] == 0xffff {
        let o = a.octets();
        return format!("::ffff:{}", Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    let (mut best, mut best_len) = (8, 0);
    let mut i = 0;
    while i < 8 {
        let mut j = i;
        while j < 8 && seg[j] == 0 {
            j += 1;
        }
        if j - i > best_len && j - i >= 2 {
            best = i;
            best_len = j - i;
        }
        i = j.max(i + 1);
    }
    let hex = |s: &[u16]| {
        s.iter()
            .map(|g| format!("{:x}", g))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len == 0 {
        return hex(&seg);
    }
    format!("{}::{}", hex(&seg[..best]), hex(&seg[best + best_len..]))
}

/// Checks a name or an IPv4 address, in lower case (abi's checkHostName).
fn check_host_name(host: &str, wildcard: bool) -> Result<(), String> {
    if host.is_empty() {
        return Err("there is no host".into());
    }
    if host.len() > 253 {
        return Err("the host is over 253 bytes".into());
    }
    let labels: Vec<&str> = host.split('.').collect();
    for l in &labels {
        if l.is_empty() {
            return Err("the host has an empty label (a leading, trailing or double dot)".into());
        }
        if !l
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
        {
            return Err("the host holds a character a host name may not (write an international name in punycode, xn--…)".into());
        }
    }
    let last = labels[labels.len() - 1];
    let hex_number = last
        .strip_prefix("0x")
        .map_or(false, |h| h.bytes().all(|c| c.is_ascii_hexdigit()));
    let number = last.bytes().all(|c| c.is_ascii_digit());
    if !hex_number && !number {
        return Ok(());
    }
    if is_dotted_decimal(host) {
        if wildcard {
            return Err("a wildcard (*.) is for names, not addresses".into());
        }
        return Ok(());
    }
    Err("the host ends in a number but is not an IPv4 address in dotted decimal".into())
}

/// Whether `s` is an IPv4 address in dotted decimal as Go's netip reads
/// one: four numbers from 0 to 255, without leading zeros.
fn is_dotted_decimal(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
                && p.parse::<u16>().map_or(false, |n| n <= 255)
        })
}

/// Checks an escaped path: it starts with '/', no segment is "." or ".."
/// (also escaped, also before a ';'), and no '/' or '\' is escaped.
fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("the path does not start with /".into());
    }
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") {
        return Err("the path has an escaped / or \\ (%2F, %5C)".into());
    }
    for seg in path[1..].split('/') {
        let seg = seg.split(';').next().unwrap_or("");
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        if seg == "." || seg == ".." {
            return Err("the path has a . or .. segment".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// Every case of plugins/abi/testdata/destinations, which the Go
    /// package's test holds to its reading, is read here the same way:
    /// the same canonical spelling, or the same refusal in the same words.
    #[test]
    fn every_shared_case_is_read_as_the_host_reads_it() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../abi/testdata/destinations");
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
            let got = match parts[0] {
                "grant" => parse_destination(parts[1]).map(|d| d.spelling()),
                "target" => parse_target(parts[1]).map(|t| t.url()),
                other => panic!("reader {:?}", other),
            };
            let got = got.unwrap_or_else(|e| format!("error: {}", e));
            if got != parts[2] {
                wrong.push(format!(
                    "{} {:?}: {:?}, the host {:?}",
                    parts[0], parts[1], got, parts[2]
                ));
            }
            n += 1;
        }
        assert!(n > 1000, "{} cases", n);
        assert!(
            wrong.is_empty(),
            "{} of {} read otherwise:\n{}",
            wrong.len(),
            n,
            wrong[..wrong.len().min(20)].join("\n")
        );
    }
}
