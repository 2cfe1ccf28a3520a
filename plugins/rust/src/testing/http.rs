//! Outbound HTTP in the harness: the plugin's requests reach a server of
//! the test's, in this process, as agentrt would send them (the fake
//! host's `http` module): to the destinations granted with
//! [`Host::allow_http`], with the secrets of [`Host::secret`] filled in
//! for their destinations and scrubbed from what comes back.

use std::rc::Rc;

use super::Host;
use crate::host::fake::{
    check_secret, parse_destination, Reply, Secret, SentRequest, Setup, MAX_REQUESTS,
};

/// What a host was told of outbound HTTP.
#[derive(Clone, Default)]
pub(crate) struct HttpSetup {
    allow: Vec<String>,
    secrets: Vec<(String, String, Vec<String>)>,
    server: Option<Rc<dyn Fn(&SentRequest) -> Reply>>,
}

impl HttpSetup {
    /// The fake host's setup for a call.
    pub(crate) fn setup(&self) -> Rc<Setup> {
        let dests = |list: &[String]| {
            list.iter()
                .map(|d| parse_destination(d).expect("checked by allow_http and secret"))
                .collect()
        };
        Rc::new(Setup {
            allow: dests(&self.allow),
            secrets: self
                .secrets
                .iter()
                .map(|(name, value, to)| Secret::new(name, value, dests(to)))
                .collect(),
            server: self.server.clone(),
            max_requests: MAX_REQUESTS,
        })
    }
}

impl Host {
    /// Grants the plugin a destination, as the operator would
    /// (`https://api.example.com/v1`, `https://*.example.com`); nothing is
    /// granted otherwise. A destination agentrt would refuse to start with
    /// (one not in its one spelling: `HTTPS://`, a port written out that
    /// is the scheme's) panics, saying how to write it.
    pub fn allow_http(&mut self, destination: &str) -> &mut Host {
        if let Err(why) = parse_destination(destination) {
            panic!("allow_http({:?}): {}", destination, why);
        }
        self.http.allow.push(destination.to_string());
        self
    }

    /// Holds the secret `name` for the plugin, to be sent only to
    /// `destinations`. A secret agentrt would refuse (a name that is not
    /// one, a value too short, or holding what a header cannot carry)
    /// panics, as agentrt refuses to start with it.
    pub fn secret(&mut self, name: &str, value: &str, destinations: &[&str]) -> &mut Host {
        if let Some(why) = check_secret(name, value) {
            panic!("secret({:?}, ...): {}", name, why);
        }
        for d in destinations {
            if let Err(why) = parse_destination(d) {
                panic!("secret({:?}, ...): destination {:?}: {}", name, d, why);
            }
        }
        let dests = destinations.iter().map(|d| d.to_string()).collect();
        self.http
            .secrets
            .push((name.to_string(), value.to_string(), dests));
        self
    }

    /// Answers the plugin's outbound requests with `server`.
    pub fn serve_http(&mut self, server: impl Fn(&SentRequest) -> Reply + 'static) -> &mut Host {
        self.http.server = Some(Rc::new(server));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Handlers;
    use crate::{exports, http, ErrorCode, StepResult};

    const KEY: &str = "sk-test-0123456789";

    fn host(step: fn() -> i32) -> Host {
        let mut host = Host::new(Handlers::step_only(step));
        host.allow_http("https://api.test")
            .allow_http("https://other.test")
            .secret("KEY", KEY, &["https://api.test/v1"])
            .serve_http(|req| {
                if req.path() == "/moved" {
                    return Reply::redirect(302, "https://evil.test/");
                }
                if req.path() == "/v1/old" {
                    return Reply::redirect(301, "/v1/new");
                }
                Reply::text(&format!(
                    "{} {} key={} body={}",
                    req.method,
                    req.path(),
                    req.header("authorization").unwrap_or(""),
                    String::from_utf8_lossy(&req.body)
                ))
                .header("X-Echo", req.header("authorization").unwrap_or(""))
            });
        host
    }

    #[test]
    fn a_request_reaches_the_server_with_its_secret_and_comes_back_scrubbed() {
        let host = host(|| {
            exports::on_step(|_| {
                let resp = http::post("https://api.test/v1/chat")
                    .header("Authorization", &format!("Bearer {}", http::secret("KEY")))
                    .body("hi")
                    .send()?;
                Ok(StepResult::output(format!(
                    "{} {} | {} | {}",
                    resp.status(),
                    resp.text()?,
                    resp.header("x-echo").unwrap_or(""),
                    resp.url()
                )))
            })
        });
        let mut task = host.create_task("t").unwrap();
        let step = task.step("go").unwrap();
        assert_eq!(
            step.output,
            "200 POST /v1/chat key=Bearer {{secret:KEY}} body=hi | Bearer {{secret:KEY}} | https://api.test/v1/chat"
        );
        assert!(!step.output.contains(KEY));
    }

    #[test]
    fn a_refused_request_fails_with_its_code() {
        let host = host(|| {
            exports::on_step(|_| {
                let cases: Vec<(http::Request, ErrorCode)> = vec![
                    (http::get("https://evil.test/"), ErrorCode::NotAllowed),
                    (http::get("https://api.test/moved"), ErrorCode::NotAllowed),
                    (
                        http::get("https://other.test/").header("X-Key", &http::secret("KEY")),
                        ErrorCode::NotAllowed,
                    ),
                    (
                        http::get("https://api.test/").header("Host", "evil.test"),
                        ErrorCode::Invalid,
                    ),
                    (
                        http::get("https://api.test/").header("X-A", "a\r\nHost: evil.test"),
                        ErrorCode::Invalid,
                    ),
                    (
                        http::get("https://api.test/").header("X-A", "a\u{85}b"),
                        ErrorCode::Invalid,
                    ),
                    (
                        http::get("https://api.test/").header("X-A", "a\u{2028}b"),
                        ErrorCode::Invalid,
                    ),
                    (
                        http::get("https://api.test/").header("X-A", "a\u{2029}b"),
                        ErrorCode::Invalid,
                    ),
                    (
                        http::get(&format!("https://api.test/?k={}", http::secret("KEY"))),
                        ErrorCode::Invalid,
                    ),
                ];
                for (i, (req, code)) in cases.into_iter().enumerate() {
                    match req.send() {
                        Err(e)
                            if e.code() == Some(code)
                                && e.message().starts_with("http_request: ") => {}
                        other => {
                            return Err(format!("case {}: {:?}, want {:?}", i, other, code).into())
                        }
                    }
                }
                Ok(StepResult::output("ok"))
            })
        });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "ok");
    }

    #[test]
    fn redirects_are_followed_unless_the_request_says_not() {
        let host = host(|| {
            exports::on_step(|_| {
                let req = http::get("https://api.test/v1/old")
                    .header("Authorization", &http::secret("KEY"));
                let moved = req.clone().no_redirects().send()?;
                let followed = req.send()?;
                Ok(StepResult::output(format!(
                    "{} {} | {} {}",
                    moved.status(),
                    moved.header("Location").unwrap_or(""),
                    followed.url(),
                    followed.text()?
                )))
            })
        });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(
            task.step("go").unwrap().output,
            "301 /v1/new | https://api.test/v1/new GET /v1/new key={{secret:KEY}} body="
        );
    }

    #[test]
    fn fetch_artifact_writes_a_uri_artifacts_bytes_to_the_workspace() {
        let host = host(|| {
            exports::on_step(|s| {
                let n = crate::fetch_artifact(&s.task.artifacts[0].id, "in/page.txt")?;
                match crate::fetch_artifact("nope", "x") {
                    Err(e) if e.is_not_found() => {}
                    other => return Err(format!("no such artifact: {:?}", other).into()),
                }
                Ok(StepResult::output(n.to_string()))
            })
        });
        let mut task = host.create_task("t").unwrap();
        task.upload_uri("https://api.test/page", "", "").unwrap();
        let step = task.step("go").unwrap();
        let data = task.read_file("in/page.txt").unwrap();
        assert_eq!(
            String::from_utf8(data.clone()).unwrap(),
            "GET /page key= body="
        );
        assert_eq!(step.output, data.len().to_string());
    }

    /// A redirect that would carry a secret's value, in any form, to a
    /// destination the secret is not bound to is refused, and that
    /// destination is never reached.
    #[test]
    fn a_secrets_value_is_refused_where_it_is_not_bound() {
        use std::cell::Cell;
        // KEY as it is, and in base64.
        for form in [KEY, "c2stdGVzdC0wMTIzNDU2Nzg5"] {
            let reached = Rc::new(Cell::new(false));
            let seen = reached.clone();
            let mut host = Host::new(Handlers::step_only(|| {
                exports::on_step(|_| {
                    let sent = http::get("https://api.test/v1/echo")
                        .header("Authorization", &http::secret("KEY"))
                        .send();
                    match sent {
                        Err(e)
                            if e.code() == Some(ErrorCode::NotAllowed)
                                && e.message().contains("not bound to that destination") =>
                        {
                            Ok(StepResult::output("refused"))
                        }
                        other => Err(format!("{:?}", other).into()),
                    }
                })
            }));
            host.allow_http("https://api.test")
                .allow_http("https://other.test")
                .secret("KEY", KEY, &["https://api.test/v1"])
                .serve_http(move |req| {
                    if req.url.starts_with("https://other.test") {
                        seen.set(true);
                        return Reply::text("got it");
                    }
                    Reply::redirect(302, &format!("https://other.test/?k={}", form))
                });
            let mut task = host.create_task("t").unwrap();
            assert_eq!(
                task.step("go").unwrap().output,
                "refused",
                "form {:?}",
                form
            );
            assert!(!reached.get(), "form {:?}: other.test was reached", form);
        }
    }

    /// Each redirect followed counts as a request of the call, which may
    /// make 32; the plugin's Referer goes with its first request only.
    #[test]
    fn redirects_count_as_requests_and_carry_no_referer() {
        use std::cell::RefCell;
        let referers = Rc::new(RefCell::new(Vec::new()));
        let seen = referers.clone();
        let mut host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                http::get("https://api.test/loop")
                    .header("Referer", "https://mine.example/")
                    .send()?;
                // 3 requests made, 29 left.
                for _ in 0..29 {
                    http::get("https://api.test/ok").send()?;
                }
                match http::get("https://api.test/ok").send() {
                    Err(e) if e.code() == Some(ErrorCode::Limit) => {
                        Ok(StepResult::output("limited"))
                    }
                    other => Err(format!("the 33rd request: {:?}", other).into()),
                }
            })
        }));
        host.allow_http("https://api.test").serve_http(move |req| {
            let mut seen = seen.borrow_mut();
            seen.push(req.header("referer").unwrap_or("").to_string());
            if req.path() == "/loop" && seen.len() < 3 {
                return Reply::redirect(302, "/loop");
            }
            Reply::text("ok")
        });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "limited");
        assert_eq!(
            referers.borrow()[..3],
            [
                "https://mine.example/".to_string(),
                String::new(),
                String::new()
            ]
        );
    }

    /// What comes back is scrubbed of a secret in every form the host
    /// scrubs: quoted as Go's %+q writes it (😀 as \U0001f600, which
    /// no JSON writer writes), in base64url without padding (which no
    /// other form is).
    #[test]
    fn what_comes_back_is_scrubbed_in_every_form() {
        const CLE: &str = "sk-😀-key-01234567";
        let mut host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                Ok(StepResult::output(
                    http::get("https://api.test/v1/echo").send()?.text()?,
                ))
            })
        }));
        host.allow_http("https://api.test")
            .secret("KEY", CLE, &["https://api.test/v1"])
            .serve_http(|_| {
                // In base64url without padding, and as %+q quotes it.
                Reply::text(r#"c2st8J-YgC1rZXktMDEyMzQ1Njc "sk-\U0001f600-key-01234567""#)
            });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(
            task.step("go").unwrap().output,
            r#"{{secret:KEY}} "{{secret:KEY}}""#
        );
    }

    /// Headers are bounded as they would be sent, each secret placeholder
    /// counted as the longest secret: 17 placeholders are over 64 KiB.
    #[test]
    fn headers_are_bounded_as_they_would_be_sent() {
        let host = host(|| {
            exports::on_step(|_| {
                let mut req = http::get("https://api.test/v1/");
                for i in 0..17 {
                    req = req.header(&format!("X-K{}", i), &http::secret("KEY"));
                }
                match req.send() {
                    Err(e) if e.code() == Some(ErrorCode::Invalid) => {
                        Ok(StepResult::output("refused"))
                    }
                    other => Err(format!("{:?}", other).into()),
                }
            })
        });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "refused");
    }

    /// A request message over 64 KiB is refused before it is read, as the
    /// host refuses it: here three headers of 15,000 '"' each, within the
    /// headers' bound as sent but twice that as JSON.
    #[test]
    fn a_request_message_over_its_bound_is_refused() {
        let host = host(|| {
            exports::on_step(|_| {
                let mut req = http::get("https://api.test/");
                for i in 0..3 {
                    req = req.header(&format!("X-Q{}", i), &"\"".repeat(15_000));
                }
                match req.send() {
                    Err(e)
                        if e.code() == Some(ErrorCode::Invalid)
                            && e.message().contains("the request message of") =>
                    {
                        Ok(StepResult::output("refused"))
                    }
                    other => Err(format!("{:?}", other).into()),
                }
            })
        });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "refused");
    }

    /// A secret or a destination agentrt would not start with is refused
    /// as the test sets it up, saying why.
    #[test]
    fn what_agentrt_would_not_start_with_panics() {
        let cases: Vec<(&str, fn(&mut Host))> = vec![
            ("at least 8", |h| {
                h.secret("KEY", "short", &["https://api.test"]);
            }),
            ("control character", |h| {
                h.secret("KEY", "sk-0123456789\n", &["https://api.test"]);
            }),
            ("letters, digits and _", |h| {
                h.secret("1KEY", "sk-0123456789", &["https://api.test"]);
            }),
            ("leave the port out", |h| {
                h.secret("KEY", "sk-0123456789", &["https://api.test:443"]);
            }),
            ("allow_http", |h| {
                h.allow_http("HTTPS://api.test");
            }),
        ];
        for (want, set_up) in cases {
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                set_up(&mut Host::new(Handlers::step_only(|| 0)))
            }));
            let msg = match got {
                Err(p) => p.downcast::<String>().map(|s| *s).unwrap_or_default(),
                Ok(()) => String::new(),
            };
            assert!(msg.contains(want), "{:?}: panicked with {:?}", want, msg);
        }
    }

    #[test]
    fn without_a_grant_nothing_is_reached() {
        let host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| match http::get("https://api.test/").send() {
                Err(e) if e.code() == Some(ErrorCode::NotAllowed) => {
                    Ok(StepResult::output("refused"))
                }
                other => Err(format!("{:?}", other).into()),
            })
        }));
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "refused");
    }

    /// A secret is filled in only for the destinations it is bound to: a
    /// first request elsewhere is refused, naming the secret, and a
    /// redirect to a granted destination it is not bound to goes on
    /// without the header (as agentrt's client writes each hop's headers
    /// again), rather than carrying the value there or failing.
    #[test]
    fn a_secret_is_filled_in_only_where_it_is_bound() {
        use std::cell::RefCell;
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        let mut host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                let sent = http::get("https://other.test/v1/")
                    .header("X-Key", &http::secret("KEY"))
                    .send();
                match sent {
                    Err(e)
                        if e.code() == Some(ErrorCode::NotAllowed)
                            && e.message()
                                .contains("no secret KEY is held for https://other.test/v1/") => {}
                    other => return Err(format!("KEY to other.test: {:?}", other).into()),
                }
                http::get("https://api.test/v1/go")
                    .header("X-Key", &http::secret("KEY"))
                    .send()
                    .map_err(|e| format!("a redirect out of KEY's destination: {:?}", e))?;
                Ok(StepResult::output("ok"))
            })
        }));
        host.allow_http("https://api.test")
            .allow_http("https://other.test")
            .secret("KEY", KEY, &["https://api.test/v1"])
            .serve_http(move |req| {
                log.borrow_mut().push(format!(
                    "{} {}",
                    req.path(),
                    req.header("x-key").unwrap_or("-")
                ));
                if req.path() == "/v1/go" {
                    return Reply::redirect(302, "/elsewhere");
                }
                Reply::text("ok")
            });
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "ok");
        assert_eq!(
            *seen.borrow(),
            [format!("/v1/go {}", KEY), "/elsewhere -".to_string()]
        );
    }
}
