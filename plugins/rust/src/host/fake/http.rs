//! Outbound HTTP in the fake host: a request goes to the test's server, in
//! this process, as agentrt would send it (hostapi/egress): only to a
//! destination the test granted, read as the host reads it
//! (destination.rs); without the headers the host owns, and within the
//! host's bounds on headers, bodies and the requests of one call (each
//! redirect followed counted); with its secret placeholders filled in for
//! the destinations each secret is bound to; its redirects followed as Go's
//! client follows them (each hop checked, a secret's header dropped for a
//! hop it is not bound to, no Referer); refused when any hop would carry a
//! secret's value, in any form the host scrubs, toward a destination the
//! secret is not bound to; and every secret's value scrubbed from what the
//! plugin reads (scrub.rs).

use std::rc::Rc;

use super::destination::{parse_target, Destination, Target};
use super::scrub::{forms, holds_form, Scrubber};
use crate::abi;
use crate::json::Value;

/// A request as the test's server gets it: the secrets filled in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentRequest {
    pub method: String,
    /// The absolute URL.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl SentRequest {
    /// The first value of the header `name` (in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The URL's path and query ("/v1/chat?x=1").
    pub fn path(&self) -> &str {
        let rest = self.url.splitn(2, "://").nth(1).unwrap_or("");
        rest.find('/').map_or("/", |i| &rest[i..])
    }

    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Value {
        crate::json::parse(&String::from_utf8_lossy(&self.body)).unwrap_or(Value::Null)
    }
}

/// What the test's server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// An answer of `status` with no header and no body.
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A 200 with `text` (text/plain).
    pub fn text(text: &str) -> Reply {
        Reply::new(200)
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(text)
    }

    /// A 200 with `value` as JSON.
    pub fn json(value: &Value) -> Reply {
        Reply::new(200)
            .header("Content-Type", "application/json")
            .body(value.to_json())
    }

    /// A redirect of `status` (301, 302, 303, 307, 308) to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::new(status).header("Location", location)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = body.into();
        self
    }
}

/// A secret the host holds: its name, its value, where it may be sent,
/// and the forms of its value the host looks for.
pub(crate) struct Secret {
    pub name: String,
    pub value: String,
    pub destinations: Vec<Destination>,
    forms: Vec<String>,
}

impl Secret {
    pub fn new(name: &str, value: &str, destinations: Vec<Destination>) -> Secret {
        Secret {
            name: name.to_string(),
            value: value.to_string(),
            destinations,
            forms: forms(value),
        }
    }

    fn bound(&self, t: &Target) -> bool {
        self.destinations.iter().any(|d| d.allows(t))
    }
}

/// What a test set up for outbound requests.
pub(crate) struct Setup {
    /// The destinations granted.
    pub allow: Vec<Destination>,
    pub secrets: Vec<Secret>,
    pub server: Option<Rc<dyn Fn(&SentRequest) -> Reply>>,
    /// The requests one handler call may make, each redirect followed
    /// counted.
    pub max_requests: usize,
}

/// agentrt's default bounds on a request's body and a response's
/// (hostapi/egress's DefaultLimits) and on the requests of one call.
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;
pub(crate) const MAX_RESPONSE_BYTES: usize = 8 << 20;
pub(crate) const MAX_REQUESTS: usize = 32;

/// The headers a request sends that Go's client drops on a redirect to
/// another host (and not a subdomain of the first), and those it drops
/// with the body.
const SENSITIVE: &[&str] = &["authorization", "www-authenticate", "cookie", "cookie2"];
const ABOUT_THE_BODY: &[&str] = &[
    "content-encoding",
    "content-language",
    "content-location",
    "content-type",
];

type Refusal = (i32, String);

fn refuse(code: i32, msg: impl Into<String>) -> Refusal {
    (code, msg.into())
}

/// One header as the plugin wrote it, with the secrets its value names.
struct Header {
    name: String,
    value: String,
    secrets: Vec<String>,
}

/// Sends the request `message` (with `body`) as agentrt would and returns
/// the response's message and body, or the code and message agentrt would
/// give the plugin. `count` counts one more request of the call, or
/// refuses it past the call's limit.
pub(crate) fn send(
    setup: Option<&Setup>,
    message: &Value,
    mut body: Vec<u8>,
    count: &mut dyn FnMut(usize) -> Result<(), Refusal>,
) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let setup =
        setup.ok_or_else(|| refuse(abi::ERR_NOT_ALLOWED, "outbound HTTP is not available here"))?;
    count(setup.max_requests)?;
    let mut method = message["method"].as_str().unwrap_or("GET").to_string();
    if !["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].contains(&method.as_str()) {
        return Err(refuse(
            abi::ERR_INVALID,
            format!("the method {:?} is not one agentrt sends", method),
        ));
    }
    let url = message["url"].as_str().unwrap_or("");
    let mut target = parse_target(url).map_err(|e| refuse(abi::ERR_INVALID, e))?;
    if body.len() > MAX_REQUEST_BYTES {
        return Err(refuse(
            abi::ERR_LIMIT,
            format!(
                "the request's body of {} bytes is over the limit of {} bytes",
                body.len(),
                MAX_REQUEST_BYTES
            ),
        ));
    }
    let given = message["headers"].as_array().cloned().unwrap_or_default();
    if given.len() > abi::MAX_HTTP_HEADERS {
        return Err(refuse(
            abi::ERR_INVALID,
            format!(
                "the request has {} headers, over the limit of {}",
                given.len(),
                abi::MAX_HTTP_HEADERS
            ),
        ));
    }
    let mut headers = Vec::new();
    let mut sent = 0;
    for h in given {
        let name = h["name"].as_str().unwrap_or("").to_string();
        let value = h["value"].as_str().unwrap_or("").to_string();
        if let Some(why) = check_request_header(&name, &value) {
            return Err(refuse(abi::ERR_INVALID, why));
        }
        let secrets = secret_names(&value)
            .map_err(|why| refuse(abi::ERR_INVALID, format!("the value of {}: {}", name, why)))?;
        // As the host: bounded as it would be sent, before a secret is
        // filled in, each placeholder counted as the longest secret.
        let n = name.len()
            + value.len()
            + secrets
                .iter()
                .map(|s| {
                    abi::MAX_SECRET_BYTES
                        - abi::SECRET_PREFIX.len()
                        - s.len()
                        - abi::SECRET_SUFFIX.len()
                })
                .sum::<usize>();
        if n > abi::MAX_HTTP_HEADER_BYTES {
            return Err(refuse(abi::ERR_INVALID, format!("the header {} is over {} bytes with each of its {} secret placeholders counted as {} bytes (the longest a secret may be)", name, abi::MAX_HTTP_HEADER_BYTES, secrets.len(), abi::MAX_SECRET_BYTES)));
        }
        sent += n;
        if sent > abi::MAX_HTTP_HEADERS_BYTES {
            return Err(refuse(abi::ERR_INVALID, format!("the request's headers are over {} bytes together, each secret placeholder counted as {} bytes (the longest a secret may be)", abi::MAX_HTTP_HEADERS_BYTES, abi::MAX_SECRET_BYTES)));
        }
        headers.push(Header {
            name,
            value,
            secrets,
        });
    }
    if !setup.allow.iter().any(|d| d.allows(&target)) {
        return Err(refuse(
            abi::ERR_NOT_ALLOWED,
            format!(
                "{}{} is not a destination granted to this agent{}",
                target.origin(),
                target.path,
                granted_list(setup)
            ),
        ));
    }
    let no_redirects = message["no_redirects"].as_bool().unwrap_or(false);
    let max_response = match message["max_response_bytes"].as_u64() {
        Some(n) if n > 0 && (n as usize) < MAX_RESPONSE_BYTES => n as usize,
        _ => MAX_RESPONSE_BYTES,
    };
    let first_host = target.host.clone();
    let (mut stripped, mut body_dropped) = (false, false);
    let scrubber = Scrubber::new(
        setup
            .secrets
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_str())),
    );
    for hop in 0..=abi::MAX_HTTP_REDIRECTS {
        let server = setup
            .server
            .as_ref()
            .ok_or_else(|| refuse(abi::ERR_IO, "no server answers: call Host::serve_http"))?;
        let mut sent = SentRequest {
            method: method.clone(),
            url: target.url(),
            headers: Vec::new(),
            body: body.clone(),
        };
        for h in &headers {
            let lower = h.name.to_ascii_lowercase();
            if !h.secrets.is_empty() {
                match expand(setup, h, &target) {
                    Ok(v) => sent.headers.push((h.name.clone(), v)),
                    Err(msg) if hop == 0 => return Err(refuse(abi::ERR_NOT_ALLOWED, msg)),
                    Err(_) => {}
                }
            } else if hop == 0
                || !(lower == "referer"
                    || (stripped && SENSITIVE.contains(&lower.as_str()))
                    || (body_dropped && ABOUT_THE_BODY.contains(&lower.as_str())))
            {
                sent.headers.push((h.name.clone(), h.value.clone()));
            }
        }
        if sent.header("user-agent").is_none() {
            sent.headers.push(("User-Agent".into(), "agentrt".into()));
        }
        check_outgoing(setup, &sent, &target)?;
        let reply = server(&sent);
        if reply.body.len() > max_response {
            return Err(refuse(
                abi::ERR_LIMIT,
                format!(
                    "the response's body of {} bytes is over the limit of {} bytes",
                    reply.body.len(),
                    max_response
                ),
            ));
        }
        let location = reply
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        // Go's client follows these, when they say where to.
        let follows = [301, 302, 303, 307, 308].contains(&reply.status);
        if no_redirects || !follows || location.is_empty() {
            return Ok(answer(&scrubber, reply, &target));
        }
        if hop == abi::MAX_HTTP_REDIRECTS {
            break;
        }
        count(setup.max_requests)?;
        let next = resolve(&target, &location);
        target = parse_target(&next).map_err(|e| {
            refuse(
                abi::ERR_NOT_ALLOWED,
                format!("a redirect to a URL agentrt does not send: {}", e),
            )
        })?;
        if !setup.allow.iter().any(|d| d.allows(&target)) {
            return Err(refuse(
                abi::ERR_NOT_ALLOWED,
                format!(
                    "a redirect to {}{}, which is not a destination granted to this agent{}",
                    target.origin(),
                    target.path,
                    granted_list(setup)
                ),
            ));
        }
        let host = &target.host;
        if host != &first_host && !host.ends_with(&format!(".{}", first_host)) {
            stripped = true;
        }
        if reply.status != 307 && reply.status != 308 {
            if method != "GET" && method != "HEAD" {
                method = "GET".into();
            }
            body.clear();
            body_dropped = true;
        }
    }
    Err(refuse(
        abi::ERR_LIMIT,
        format!(
            "the request was redirected more than {} times",
            abi::MAX_HTTP_REDIRECTS
        ),
    ))
}

/// Names the granted destinations for a refusal, as the host does.
fn granted_list(setup: &Setup) -> String {
    if setup.allow.is_empty() {
        return " (none is: call Host::allow_http)".into();
    }
    let names: Vec<String> = setup.allow.iter().map(Destination::spelling).collect();
    format!(" (granted: {})", names.join(", "))
}

/// Says why a plugin may not send a header, as abi.CheckRequestHeader:
/// its name a token and not one the host owns, its value one line to
/// every reader (no control character but tab, C1 and NEL U+0085 among
/// them, no U+2028 or U+2029; a str is UTF-8 already), within
/// MAX_HTTP_HEADER_BYTES.
fn check_request_header(name: &str, value: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a header has no name".into());
    }
    if name.len() + value.len() > abi::MAX_HTTP_HEADER_BYTES {
        return Some(format!(
            "a header is over {} bytes",
            abi::MAX_HTTP_HEADER_BYTES
        ));
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
    {
        return Some("a header name holds a character a name may not".into());
    }
    let lower = name.to_ascii_lowercase();
    if let Some(why) = host_owned(&lower) {
        return Some(format!("the header {} is refused: {}", name, why));
    }
    for c in value.chars() {
        if ((c as u32) < 0x20 && c != '\t') || c == '\u{7f}' {
            return Some(format!(
                "the value of {} holds a control character (a line break?)",
                name
            ));
        }
        if ('\u{80}'..='\u{9f}').contains(&c) {
            return Some(format!("the value of {} holds a control character (U+0080 to U+009F; U+0085 is a line break)", name));
        }
        if c == '\u{2028}' || c == '\u{2029}' {
            return Some(format!(
                "the value of {} holds a line or paragraph separator (U+2028, U+2029)",
                name
            ));
        }
    }
    None
}

/// Why the host owns the header `lower`, if it does.
fn host_owned(lower: &str) -> Option<&'static str> {
    Some(match lower {
        "host" => "the host sets Host from the URL",
        "connection" | "keep-alive" | "te" | "trailer" | "transfer-encoding" | "upgrade"
        | "http2-settings" => "a hop-by-hop header is the host's",
        "content-length" => "the host sets Content-Length from the body",
        "expect" => "the host sends the body without waiting to be asked",
        "accept-encoding" => "the host asks for the encodings it decodes",
        l if l.starts_with("proxy-") => "a proxy header is refused",
        _ => return None,
    })
}

/// The names of the secret placeholders in a header value, or why they
/// are malformed (abi.SecretNames).
fn secret_names(value: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find(abi::SECRET_PREFIX) {
        rest = &rest[i + abi::SECRET_PREFIX.len()..];
        let j = rest.find(abi::SECRET_SUFFIX).ok_or_else(|| {
            format!(
                "a secret placeholder is not closed with {}",
                abi::SECRET_SUFFIX
            )
        })?;
        let name = &rest[..j];
        let valid = !name.is_empty()
            && name.len() <= abi::MAX_SECRET_NAME_BYTES
            && !name.as_bytes()[0].is_ascii_digit()
            && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        if !valid {
            return Err(
                "a secret placeholder names no valid secret (1 to 64 letters, digits and _)".into(),
            );
        }
        names.push(name.to_string());
        rest = &rest[j + abi::SECRET_SUFFIX.len()..];
    }
    Ok(names)
}

/// A header's value with its placeholders filled in for `t`, or which
/// secret is not held for it (the same words whether the secret is not
/// held at all or held for other destinations).
fn expand(setup: &Setup, h: &Header, t: &Target) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = h.value.as_str();
    while let Some(i) = rest.find(abi::SECRET_PREFIX) {
        out.push_str(&rest[..i]);
        rest = &rest[i + abi::SECRET_PREFIX.len()..];
        let j = rest.find(abi::SECRET_SUFFIX).unwrap(); // secret_names checked it
        let name = &rest[..j];
        match setup.secrets.iter().find(|s| s.name == name && s.bound(t)) {
            Some(s) => out.push_str(&s.value),
            None => {
                return Err(format!(
                    "no secret {} is held for {}{} (Host::secret)",
                    name,
                    t.origin(),
                    t.path
                ))
            }
        }
        rest = &rest[j + abi::SECRET_SUFFIX.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Refuses a request to `t` that holds, in its URL (as it is and
/// decoded), a header or its body, a form of the value of a secret that
/// is not bound to `t` (hostapi/egress/outgoing.go).
fn check_outgoing(setup: &Setup, req: &SentRequest, t: &Target) -> Result<(), Refusal> {
    for s in setup.secrets.iter().filter(|s| !s.bound(t)) {
        let url = req.url.as_bytes();
        let mut where_ = "";
        if holds_form(url, &s.forms)
            || holds_form(&unescape(url, false), &s.forms)
            || holds_form(&unescape(url, true), &s.forms)
        {
            where_ = "its URL";
        } else if holds_form(&req.body, &s.forms) {
            where_ = "its body";
        }
        let mut header = String::new();
        if where_.is_empty() {
            for (name, value) in &req.headers {
                if holds_form(name.as_bytes(), &s.forms) {
                    header = "a header's name".into();
                }
                if holds_form(value.as_bytes(), &s.forms) {
                    header = format!("its header {}", name);
                }
            }
            where_ = &header;
        }
        if !where_.is_empty() {
            return Err(refuse(abi::ERR_NOT_ALLOWED, format!("the request to {}{} holds, in {}, the value of a secret that is not bound to that destination: agentrt sends a secret only where the operator bound it", t.origin(), t.path, where_)));
        }
    }
    Ok(())
}

/// `s` with its %XX escapes decoded (and, for a query, '+' as a space).
fn unescape(s: &[u8], query: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match s[i] {
            b'%' if i + 2 < s.len() => match (hex(s[i + 1]), hex(s[i + 2])) {
                (Some(a), Some(b)) => {
                    out.push((a * 16 + b) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if query => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// The URL a redirect's Location names, resolved against `base` as Go's
/// url.URL.Parse resolves a reference (RFC 3986 §5.2), its dot segments
/// removed.
fn resolve(base: &Target, loc: &str) -> String {
    let loc = loc.split('#').next().unwrap_or("");
    let scheme_end = loc.find(':').filter(|&i| {
        i > 0
            && loc.as_bytes()[0].is_ascii_alphabetic()
            && loc[..i]
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
    });
    let (prefix, rest) = match scheme_end {
        Some(i) => match loc[i + 1..].strip_prefix("//") {
            Some(r) => {
                let end = r.find(|c| c == '/' || c == '?').unwrap_or(r.len());
                (format!("{}//{}", &loc[..=i], &r[..end]), &r[end..])
            }
            None => return loc.to_string(),
        },
        None => match loc.strip_prefix("//") {
            Some(r) => {
                let end = r.find(|c| c == '/' || c == '?').unwrap_or(r.len());
                (format!("{}://{}", base.scheme, &r[..end]), &r[end..])
            }
            None => (base.origin(), loc),
        },
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let relative = scheme_end.is_none() && !loc.starts_with("//");
    let path = if relative {
        resolve_path(&base.path, path)
    } else {
        resolve_path("", path)
    };
    let query = match query {
        Some(q) => format!("?{}", q),
        None if relative && rest.is_empty() && !base.query.is_empty() => {
            format!("?{}", base.query)
        }
        None => String::new(),
    };
    format!("{}{}{}", prefix, path, query)
}

/// Go's net/url resolvePath: `reference` against `base`, with "." and
/// ".." segments removed.
fn resolve_path(base: &str, reference: &str) -> String {
    let full = if reference.is_empty() {
        base.to_string()
    } else if !reference.starts_with('/') {
        let i = base.rfind('/').map_or(0, |i| i + 1);
        format!("{}{}", &base[..i], reference)
    } else {
        reference.to_string()
    };
    if full.is_empty() {
        return String::new();
    }
    let mut dst = String::from("/");
    let mut first = true;
    let mut last = "";
    for elem in full.split('/') {
        last = elem;
        if elem == "." {
            first = false;
            continue;
        }
        if elem == ".." {
            let s = dst[1..].to_string();
            dst = String::from("/");
            match s.rfind('/') {
                None => first = true,
                Some(i) => dst.push_str(&s[..i]),
            }
        } else {
            if !first {
                dst.push('/');
            }
            dst.push_str(elem);
            first = false;
        }
    }
    if last == "." || last == ".." {
        dst.push('/');
    }
    if dst.len() > 1 && dst.as_bytes()[1] == b'/' {
        dst.remove(0);
    }
    dst
}

/// A header's name as Go's http.Header writes it: "content-type" is
/// "Content-Type".
fn canonical_name(name: &str) -> String {
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
    {
        return name.to_string();
    }
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// The response as the plugin reads it: the secrets scrubbed, headers in
/// name order with their names in canonical form, and, when scrubbing
/// changed the body, its Content-Length the scrubbed body's.
fn answer(scrubber: &Scrubber, reply: Reply, t: &Target) -> (Vec<u8>, Vec<u8>) {
    let body = scrubber.bytes(&reply.body);
    let changed = body.len() != reply.body.len();
    let mut headers: Vec<(String, String)> = reply
        .headers
        .iter()
        .map(|(n, v)| (canonical_name(n), v.clone()))
        .collect();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let headers: Vec<Value> = headers
        .iter()
        .map(|(n, v)| {
            let v = if changed && n == "Content-Length" {
                body.len().to_string()
            } else {
                scrubber.text(v)
            };
            Value::object()
                .with("name", scrubber.text(n))
                .with("value", v)
        })
        .collect();
    let meta = Value::object()
        .with("status", reply.status)
        .with("headers", headers)
        .with("body_size", body.len())
        .with("url", scrubber.text(&t.url()));
    (meta.to_json().into_bytes(), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_resolves_as_gos_client_resolves_it() {
        let base = parse_target("https://api.test/v1/a/b?q=1").unwrap();
        for (loc, want) in [
            ("https://other.test/x", "https://other.test/x"),
            ("//other.test/x?y", "https://other.test/x?y"),
            ("/c", "https://api.test/c"),
            ("c", "https://api.test/v1/a/c"),
            ("../c", "https://api.test/v1/c"),
            ("../../../../c", "https://api.test/c"),
            ("./", "https://api.test/v1/a/"),
            ("?z=2", "https://api.test/v1/a/b?z=2"),
            ("", "https://api.test/v1/a/b?q=1"),
            ("https://api.test/a/./b/../c", "https://api.test/a/c"),
            ("c#frag", "https://api.test/v1/a/c"),
        ] {
            assert_eq!(resolve(&base, loc), want, "{:?}", loc);
        }
    }

    #[test]
    fn escapes_are_decoded_as_a_path_and_as_a_query() {
        assert_eq!(unescape(b"a%2Fb+c%zz%4", false), b"a/b+c%zz%4");
        assert_eq!(unescape(b"a%2fb+c", true), b"a/b c");
    }
}
