//! Outbound HTTP in the fake host: a request goes to the test's server, in
//! this process, as agentrt would send it: only to a destination the test
//! granted, without the headers the host owns, with its secret
//! placeholders filled in for the destinations each secret is bound to,
//! its redirects followed (each hop checked, a secret's header dropped for
//! a hop it is not bound to), and the secrets' values scrubbed from the
//! response the plugin reads.

use std::rc::Rc;

use crate::abi;
use crate::json::Value;
use crate::testing::{Reply, SentRequest};

/// What a test set up for outbound requests.
pub(crate) struct Setup {
    /// The destinations granted.
    pub allow: Vec<String>,
    /// (name, value, destinations) of each secret.
    pub secrets: Vec<(String, String, Vec<String>)>,
    pub server: Option<Rc<dyn Fn(&SentRequest) -> Reply>>,
}

/// A URL or a destination, as the policy reads it.
struct Place {
    scheme: String,
    host: String,
    wildcard: bool,
    port: u16,
    path: String,
    query: String,
}

impl Place {
    /// Reads "scheme://host[:port][/path][?query]", "*." before a
    /// destination's host.
    fn parse(text: &str) -> Option<Place> {
        let (scheme, rest) = text.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let end = rest.find(|c| c == '/' || c == '?').unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        if authority.contains('@') {
            return None;
        }
        let default = if scheme == "https" { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']')?;
            match after.strip_prefix(':') {
                Some(p) => (host, p.parse().ok()?),
                None if after.is_empty() => (host, default),
                None => return None,
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse().ok()?),
                None => (authority, default),
            }
        };
        let (wildcard, host) = match host.strip_prefix("*.") {
            Some(h) => (true, h),
            None => (false, host),
        };
        if host.is_empty() {
            return None;
        }
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        Some(Place {
            scheme,
            host: host.to_ascii_lowercase(),
            wildcard,
            port,
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            query: query.into(),
        })
    }

    /// Whether this destination allows a request to `t`.
    fn allows(&self, t: &Place) -> bool {
        let host = if self.wildcard {
            t.host.ends_with(&format!(".{}", self.host))
        } else {
            t.host == self.host
        };
        let prefix = if self.path == "/" {
            ""
        } else {
            self.path.as_str()
        };
        let path = prefix.is_empty()
            || t.path == prefix
            || (t.path.starts_with(prefix)
                && (prefix.ends_with('/') || t.path[prefix.len()..].starts_with('/')));
        self.scheme == t.scheme && self.port == t.port && host && path
    }

    fn origin(&self) -> String {
        let default = if self.scheme == "https" { 443 } else { 80 };
        if self.port == default {
            format!("{}://{}", self.scheme, self.host)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }

    fn url(&self) -> String {
        let mut u = format!("{}{}", self.origin(), self.path);
        if !self.query.is_empty() {
            u.push('?');
            u.push_str(&self.query);
        }
        u
    }
}

/// The headers a plugin may not set.
const HOST_OWNED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
    "accept-encoding",
    "http2-settings",
];

type Refusal = (i32, String);

fn refuse(code: i32, msg: impl Into<String>) -> Refusal {
    (code, msg.into())
}

/// Sends the request `message` (with `body`) as agentrt would and returns
/// the response's message and body, or the code and message agentrt would
/// give the plugin.
pub(crate) fn send(
    setup: Option<&Setup>,
    message: &Value,
    mut body: Vec<u8>,
) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let mut method = message["method"].as_str().unwrap_or("GET").to_string();
    if !["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].contains(&method.as_str()) {
        return Err(refuse(
            abi::ERR_INVALID,
            format!("the method {:?} is not one agentrt sends", method),
        ));
    }
    let url = message["url"].as_str().unwrap_or("");
    if url.contains(abi::SECRET_PREFIX) || url.contains(' ') {
        return Err(refuse(
            abi::ERR_INVALID,
            "the URL holds a character a URL may not (secrets go in headers)",
        ));
    }
    let mut target = Place::parse(url).ok_or_else(|| {
        refuse(
            abi::ERR_INVALID,
            "the URL is not an absolute http or https URL",
        )
    })?;
    let mut headers = Vec::new();
    for h in message["headers"].as_array().cloned().unwrap_or_default() {
        let name = h["name"].as_str().unwrap_or("").to_string();
        let value = h["value"].as_str().unwrap_or("").to_string();
        let lower = name.to_ascii_lowercase();
        if name.is_empty() || HOST_OWNED.contains(&lower.as_str()) || lower.starts_with("proxy-") {
            return Err(refuse(
                abi::ERR_INVALID,
                format!("the header {} is refused: the host owns it", name),
            ));
        }
        // As the host's CheckRequestHeader: one line to every reader, so no
        // control character but tab (C0, DEL and C1, NEL U+0085 among them)
        // and no U+2028 or U+2029 (a str is UTF-8 already).
        if value
            .chars()
            .any(|c| (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}')
        {
            return Err(refuse(
                abi::ERR_INVALID,
                format!(
                    "the value of {} holds a control character or line break",
                    name
                ),
            ));
        }
        headers.push((name, value));
    }
    let setup = match setup {
        Some(s) => s,
        None => {
            return Err(refuse(
                abi::ERR_NOT_ALLOWED,
                "no destination is granted: call Host::allow_http",
            ))
        }
    };
    let no_redirects = message["no_redirects"].as_bool().unwrap_or(false);
    for hop in 0..=abi::MAX_HTTP_REDIRECTS {
        if !setup
            .allow
            .iter()
            .filter_map(|d| Place::parse(d))
            .any(|d| d.allows(&target))
        {
            return Err(refuse(
                abi::ERR_NOT_ALLOWED,
                format!(
                    "{}{} is not a destination granted to this agent (Host::allow_http)",
                    target.origin(),
                    target.path
                ),
            ));
        }
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
        for (name, value) in &headers {
            match expand(setup, value, &target) {
                Ok(v) => sent.headers.push((name.clone(), v)),
                Err(msg) if hop == 0 => return Err(refuse(abi::ERR_NOT_ALLOWED, msg)),
                Err(_) => {}
            }
        }
        let reply = server(&sent);
        let location = reply
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.clone());
        let redirect = (300..400).contains(&reply.status) && reply.status != 304;
        match location {
            Some(loc) if redirect && !no_redirects => {
                let next = if loc.starts_with('/') {
                    format!("{}{}", target.origin(), loc)
                } else {
                    loc
                };
                target = Place::parse(&next).ok_or_else(|| {
                    refuse(
                        abi::ERR_NOT_ALLOWED,
                        "a redirect to a URL agentrt does not send",
                    )
                })?;
                if reply.status != 307 && reply.status != 308 && method != "HEAD" {
                    method = "GET".into();
                    body.clear();
                }
            }
            _ => return Ok(answer(setup, reply, &target)),
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

/// A header value with its placeholders filled in for `t`, or which
/// secret is not held for it.
fn expand(setup: &Setup, value: &str, t: &Place) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find(abi::SECRET_PREFIX) {
        out.push_str(&rest[..i]);
        rest = &rest[i + abi::SECRET_PREFIX.len()..];
        let j = rest
            .find(abi::SECRET_SUFFIX)
            .ok_or_else(|| "a secret placeholder is not closed".to_string())?;
        let name = &rest[..j];
        let held = setup.secrets.iter().find(|(n, _, dests)| {
            n == name
                && dests
                    .iter()
                    .filter_map(|d| Place::parse(d))
                    .any(|d| d.allows(t))
        });
        match held {
            Some((_, v, _)) => out.push_str(v),
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

/// The response as the plugin reads it, the secrets scrubbed.
fn answer(setup: &Setup, reply: Reply, t: &Place) -> (Vec<u8>, Vec<u8>) {
    let scrub = |data: &[u8]| {
        let mut data = data.to_vec();
        for (name, value, _) in &setup.secrets {
            let placeholder = format!("{}{}{}", abi::SECRET_PREFIX, name, abi::SECRET_SUFFIX);
            data = replace(&data, value.as_bytes(), placeholder.as_bytes());
        }
        data
    };
    let text = |v: &str| String::from_utf8_lossy(&scrub(v.as_bytes())).into_owned();
    let body = scrub(&reply.body);
    let mut headers = reply.headers.clone();
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let headers: Vec<Value> = headers
        .iter()
        .map(|(n, v)| {
            Value::object()
                .with("name", n.as_str())
                .with("value", text(v))
        })
        .collect();
    let meta = Value::object()
        .with("status", reply.status)
        .with("headers", headers)
        .with("body_size", body.len())
        .with("url", text(&t.url()));
    (meta.to_json().into_bytes(), body)
}

/// `data` with every `from` replaced by `to`.
fn replace(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}
