//! Outbound HTTP, shaped like the blocking clients of crates.io
//! (`ureq`, `reqwest::blocking`): build a request, `send()` it, read the
//! response.
//!
//! ```no_run
//! use agentrt::http;
//! use agentrt::json::Value;
//!
//! # fn run() -> Result<(), agentrt::Error> {
//! let resp = http::post("https://api.openai.com/v1/chat/completions")
//!     .header("Authorization", &format!("Bearer {}", http::secret("OPENAI_API_KEY")))
//!     .json(&Value::object().with("model", "gpt-4o-mini"))
//!     .send()?;
//! if !resp.is_success() {
//!     return Err(format!("the model answered {}: {}", resp.status(), resp.text()?).into());
//! }
//! let answer = resp.json()?;
//! # Ok(()) }
//! ```
//!
//! The host makes the request (plugins/ABI.md, "Outbound HTTP"): the plugin
//! never opens a socket. It reaches only a destination its manifest asks
//! for (`capabilities.http`) and the operator granted; anything else fails
//! with [`ErrorCode::NotAllowed`](crate::ErrorCode::NotAllowed), and so
//! does an address that is not public (loopback, private, link-local)
//! unless the operator allowed its host. Credentials are the host's: a
//! header value holds a placeholder, [`secret`]`("NAME")`, which the host
//! fills in for the destinations the operator bound the secret to; the
//! plugin never sees the value, and the host scrubs it from what comes
//! back.
//!
//! Errors: [`ErrorCode::NotAllowed`](crate::ErrorCode::NotAllowed) for a
//! destination, an address or a secret not granted;
//! [`ErrorCode::Invalid`](crate::ErrorCode::Invalid) for a malformed
//! request or a header the host owns (`Host`, hop-by-hop, proxy,
//! `Content-Length`, `Expect`, `Accept-Encoding`);
//! [`ErrorCode::Limit`](crate::ErrorCode::Limit) past a size, time or count
//! limit; [`ErrorCode::Io`](crate::ErrorCode::Io) when the network or the
//! server failed. An HTTP error status (404, 500) is a response, not an
//! error.

use std::time::Duration;

use crate::abi;
use crate::error::Error;
use crate::host;
use crate::json::{self, Value};

/// The placeholder of the secret `name` for a header value,
/// `{{secret:NAME}}`.
pub fn secret(name: &str) -> String {
    format!("{}{}{}", abi::SECRET_PREFIX, name, abi::SECRET_SUFFIX)
}

/// An outbound request, built and then [`send`](Request::send)t.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout_ms: i64,
    max_response_bytes: i64,
    no_redirects: bool,
}

/// A request of `method` (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)
/// to `url`, an absolute http or https URL.
pub fn request(method: &str, url: &str) -> Request {
    Request {
        method: method.to_string(),
        url: url.to_string(),
        headers: Vec::new(),
        body: Vec::new(),
        timeout_ms: 0,
        max_response_bytes: 0,
        no_redirects: false,
    }
}

/// A GET request.
pub fn get(url: &str) -> Request {
    request("GET", url)
}

/// A HEAD request.
pub fn head(url: &str) -> Request {
    request("HEAD", url)
}

/// A POST request.
pub fn post(url: &str) -> Request {
    request("POST", url)
}

/// A PUT request.
pub fn put(url: &str) -> Request {
    request("PUT", url)
}

/// A PATCH request.
pub fn patch(url: &str) -> Request {
    request("PATCH", url)
}

/// A DELETE request.
pub fn delete(url: &str) -> Request {
    request("DELETE", url)
}

impl Request {
    /// Adds a header; its value may hold [`secret`] placeholders.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and its Content-Type.
    pub fn json(self, value: &Value) -> Request {
        self.header("Content-Type", "application/json")
            .body(value.to_json())
    }

    /// A time limit for this request lower than the agent's (the host
    /// holds the agent's, and the handler call's, whatever this says).
    pub fn timeout(mut self, limit: Duration) -> Request {
        self.timeout_ms = limit.as_millis().clamp(1, i64::MAX as u128) as i64;
        self
    }

    /// A limit of the response's body lower than the agent's.
    pub fn max_response_bytes(mut self, n: u64) -> Request {
        self.max_response_bytes = n.min(i64::MAX as u64) as i64;
        self
    }

    /// Makes a redirect the response instead of following it.
    pub fn no_redirects(mut self) -> Request {
        self.no_redirects = true;
        self
    }

    /// The request message `http_request` takes.
    pub(crate) fn message(&self) -> Value {
        let mut m = Value::object().with("url", self.url.as_str());
        if !self.method.is_empty() {
            m.insert("method", self.method.as_str());
        }
        if !self.headers.is_empty() {
            let headers: Vec<Value> = self
                .headers
                .iter()
                .map(|(n, v)| {
                    Value::object()
                        .with("name", n.as_str())
                        .with("value", v.as_str())
                })
                .collect();
            m.insert("headers", headers);
        }
        if self.timeout_ms > 0 {
            m.insert("timeout_ms", self.timeout_ms);
        }
        if self.max_response_bytes > 0 {
            m.insert("max_response_bytes", self.max_response_bytes);
        }
        if self.no_redirects {
            m.insert("no_redirects", true);
        }
        m
    }

    /// Sends the request through the host and reads the whole response.
    pub fn send(self) -> Result<Response, Error> {
        host::http_request(self.message().to_json().as_bytes(), &self.body)?;
        let meta = host::http_response()?;
        let meta = host::decode(abi::FUNC_HTTP_RESPONSE, &meta)?;
        let size = meta["body_size"].as_u64().unwrap_or(0) as usize;
        let body = if size == 0 {
            Vec::new()
        } else {
            host::http_response_body(size)?
        };
        Ok(Response::read(&meta, body))
    }
}

/// What answered a request: its status, headers and whole body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    url: String,
}

impl Response {
    /// The response of the message `meta` (http_response's) and `body`.
    pub(crate) fn read(meta: &Value, body: Vec<u8>) -> Response {
        let headers = meta["headers"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|h| {
                        (
                            h["name"].as_str().unwrap_or("").to_string(),
                            h["value"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Response {
            status: meta["status"].as_u64().unwrap_or(0) as u16,
            headers,
            body,
            url: meta["url"].as_str().unwrap_or("").to_string(),
        }
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of the header `name` (in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every header, in name order, each name's values in the order
    /// received.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The body.
    pub fn bytes(&self) -> &[u8] {
        &self.body
    }

    /// The body as UTF-8 text.
    pub fn text(&self) -> Result<String, Error> {
        String::from_utf8(self.body.clone())
            .map_err(|_| Error::new("the response's body is not UTF-8 text"))
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, Error> {
        json::parse(&String::from_utf8_lossy(&self.body))
            .map_err(|e| Error::new(format!("the response's body is not JSON: {}", e)))
    }

    /// The URL that answered: the request's, or its last redirect's.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Fetches the bytes of the task's URI artifact `artifact_id` (an http or
/// https URI) into the workspace file `path`, and returns their size. The
/// host fetches them as a GET of the agent's would be: to a destination
/// the operator granted, within the agent's limits, with no header of the
/// plugin's. Errors are those of [`Request::send`], and
/// [`ErrorCode::NotFound`](crate::ErrorCode::NotFound) for an artifact the
/// task does not have.
pub fn fetch_artifact(artifact_id: &str, path: &str) -> Result<u64, Error> {
    host::artifact_fetch(artifact_id, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_written_as_the_abis_message() {
        let r = post("https://api.test/v1")
            .header("Authorization", &format!("Bearer {}", secret("KEY")))
            .json(&Value::object().with("a", 1))
            .timeout(Duration::from_millis(1500))
            .max_response_bytes(99)
            .no_redirects();
        assert_eq!(
            r.message().to_json(),
            r#"{"url":"https://api.test/v1","method":"POST","headers":[{"name":"Authorization","value":"Bearer {{secret:KEY}}"},{"name":"Content-Type","value":"application/json"}],"timeout_ms":1500,"max_response_bytes":99,"no_redirects":true}"#
        );
        assert_eq!(r.body, br#"{"a":1}"#);
        assert_eq!(
            get("https://a.test").message().to_json(),
            r#"{"url":"https://a.test","method":"GET"}"#
        );
        assert_eq!(
            get("https://a.test")
                .timeout(Duration::from_micros(10))
                .timeout_ms,
            1
        );
    }

    #[test]
    fn a_response_reads_its_headers_in_any_case() {
        let r = Response {
            status: 201,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"hi".to_vec(),
            url: "https://a.test/".into(),
        };
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.header("x-none"), None);
        assert!(r.is_success());
        assert_eq!(r.text().unwrap(), "hi");
        assert!(r.json().is_err());
    }
}
