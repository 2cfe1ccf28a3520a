//! The kit against the ABI's golden messages, the files the Go kit's and
//! the host's tests read too (plugins/abi/testdata/golden, its README says
//! what each directory holds).
//!
//! Each message the host writes goes through the kit's real path (the
//! exports, `workspace`, `config` on the fake host); what the handler or
//! the caller got is written back in the message's shape and must mean the
//! same as the golden. Each message the kit writes is built from a golden
//! and must come out meaning the same. A field of a golden the kit does
//! not handle fails either way; keys starting with `future_` are fields a
//! later host may add, which the kit must ignore.

use std::fs;
use std::path::PathBuf;

use crate::abi;
use crate::agent::{Artifact, PlannedStep, Step, StepResult, Task};
use crate::download::Download;
use crate::error::{default_download, reject, replace_with_file, replace_with_uri, Error};
use crate::exports::{on_artifact, on_download, on_step, on_task};
use crate::host::fake;
use crate::json::{parse, Value};
use crate::{config, create_artifact, create_uri_artifact, publish_file, workspace};

const FUTURE: &str = "future_";

fn golden_dir(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../abi/testdata/golden")
        .join(dir)
}

/// The golden messages of a directory, as (name, text), in name order.
fn goldens(dir: &str) -> Vec<(String, String)> {
    let path = golden_dir(dir);
    let mut out: Vec<(String, String)> = fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("{}: {}", path.display(), e))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map_or(false, |x| x == "json"))
        .map(|p| {
            let name = format!("{}/{}", dir, p.file_name().unwrap().to_string_lossy());
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no golden messages in {}", path.display());
    out
}

fn golden(name: &str) -> String {
    fs::read_to_string(golden_dir(name)).unwrap()
}

/// Whether a and b have the same JSON meaning: members in any order (the
/// last of a repeated key counts), numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = |o: &Vec<(String, Value)>| {
                let mut k: Vec<String> = o.iter().map(|(k, _)| k.clone()).collect();
                k.sort();
                k.dedup();
                k
            };
            keys(x) == keys(y)
                && x.iter()
                    .all(|(k, _)| same(a.get(k).unwrap(), b.get(k).unwrap()))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn assert_same(name: &str, got: &Value, want: &Value) {
    assert!(
        same(got, want),
        "{}: the kit gives\n  {}\nthe golden means\n  {}",
        name,
        got,
        want
    );
}

/// v without its `future_` keys, at any depth.
fn without_future(v: &Value) -> Value {
    match v {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(k, _)| !k.starts_with(FUTURE))
                .map(|(k, v)| (k.clone(), without_future(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_future).collect()),
        v => v.clone(),
    }
}

/// v without members that are null, "" or false: the kit reads a null or
/// missing text as "" and a missing flag as false. Free-form members
/// (`additional_*`) are kept as they are, but for null.
fn without_zeros(v: &Value) -> Value {
    match v {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, v)| {
                    !matches!(v, Value::Null | Value::Bool(false)) && v.as_str() != Some("")
                })
                .map(|(k, v)| {
                    if k.starts_with("additional_") {
                        (k.clone(), v.clone())
                    } else {
                        (k.clone(), without_zeros(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_zeros).collect()),
        v => v.clone(),
    }
}

// The kit's values, written back in the ABI's shape.

fn artifact_message(a: &Artifact) -> Value {
    Value::object()
        .with("artifact_id", a.id.as_str())
        .with("agent_created", a.agent_created)
        .with("file_name", a.file_name.as_str())
        .with("relative_path", a.relative_path.as_str())
        .with("workspace_path", a.path.as_str())
        .with("uri", a.uri.as_str())
        .with("step_id", a.step_id.as_str())
}

fn task_message(t: &Task) -> Value {
    Value::object()
        .with("task_id", t.id.as_str())
        .with("input", t.input.as_str())
        .with("additional_input", t.additional_input.clone())
        .with(
            "artifacts",
            t.artifacts.iter().map(artifact_message).collect::<Vec<_>>(),
        )
}

fn input_message(handler: &str, task: &Task) -> Value {
    Value::object()
        .with("abi", abi::VERSION)
        .with("handler", handler)
        .with("task", task_message(task))
}

/// What a handler saw of the golden input `text`, in the input's shape.
fn kit_view_of_input(name: &str, text: &str) -> Value {
    let handler = parse(text).unwrap()["handler"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no handler", name))
        .to_string();
    fake::begin(text);
    let mut seen = None;
    let code = match handler.as_str() {
        abi::HANDLER_STEP => on_step(|s: &Step| {
            seen = Some(
                input_message(abi::HANDLER_STEP, &s.task)
                    .with(
                        "step",
                        Value::object()
                            .with("step_id", s.id.as_str())
                            .with("name", s.name.as_str())
                            .with("input", s.input.as_str())
                            .with("additional_input", s.additional_input.clone())
                            .with("planned", s.planned),
                    )
                    .with(
                        "request",
                        Value::object()
                            .with("input", s.request.input.as_str())
                            .with("additional_input", s.request.additional_input.clone()),
                    ),
            );
            Ok(StepResult::new())
        }),
        abi::HANDLER_TASK => on_task(|t: &Task| {
            seen = Some(input_message(abi::HANDLER_TASK, t));
            Ok(vec![])
        }),
        abi::HANDLER_ARTIFACT => on_artifact(|t: &Task, a: &Artifact| {
            seen =
                Some(input_message(abi::HANDLER_ARTIFACT, t).with("artifact", artifact_message(a)));
            Ok(())
        }),
        abi::HANDLER_DOWNLOAD => on_download(|t: &Task, a: &Artifact, _: &mut Download| {
            seen =
                Some(input_message(abi::HANDLER_DOWNLOAD, t).with("artifact", artifact_message(a)));
            Ok(())
        }),
        other => panic!("{}: unknown handler {:?}", name, other),
    };
    assert_eq!(
        code,
        0,
        "{}: the handler call failed: {:?}",
        name,
        fake::result()
    );
    seen.unwrap_or_else(|| panic!("{}: the handler did not run", name))
}

#[test]
fn reads_the_golden_inputs() {
    for (name, text) in goldens("input") {
        let want = without_zeros(&without_future(&parse(&text).unwrap()));
        let got = without_zeros(&kit_view_of_input(&name, &text));
        assert_same(&name, &got, &want);
    }
}

fn file_info_message(f: &workspace::FileInfo) -> Value {
    Value::object()
        .with("path", f.path.as_str())
        .with("size", f.size)
        .with("mod_time", f.mod_time)
}

#[test]
fn reads_the_golden_host_answers() {
    for (name, text) in goldens("file_info") {
        fake::begin("{}");
        fake::with(|s| s.stat_answer = Some(text.clone()));
        let got = file_info_message(&workspace::stat("any").unwrap());
        assert_same(&name, &got, &without_future(&parse(&text).unwrap()));
    }
    for (name, text) in goldens("file_list") {
        fake::begin("{}");
        fake::with(|s| s.list_answer = Some(text.clone()));
        let got: Vec<Value> = workspace::list("")
            .unwrap()
            .iter()
            .map(file_info_message)
            .collect();
        assert_same(
            &name,
            &Value::from(got),
            &without_future(&parse(&text).unwrap()),
        );
    }
    for (name, text) in goldens("config") {
        fake::begin("{}");
        fake::with(|s| s.config = text.clone());
        let mut got = Value::object();
        for (k, v) in config().unwrap() {
            got.insert(k, v);
        }
        assert_same(&name, &got, &parse(&text).unwrap());
    }
}

/// Takes the members of a golden object one by one, and fails on one that
/// nobody took (the kit cannot write it).
struct Members {
    name: String,
    members: Vec<(String, Value)>,
}

impl Members {
    fn of(name: &str, v: &Value) -> Members {
        match without_future(v) {
            Value::Object(members) => Members {
                name: name.to_string(),
                members,
            },
            other => panic!("{}: {} is not an object", name, other),
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        let i = self.members.iter().position(|(k, _)| k == key)?;
        Some(self.members.remove(i).1)
    }

    fn text(&mut self, key: &str) -> Option<String> {
        self.take(key)
            .map(|v| v.as_str().expect("a string").to_string())
    }

    fn done(self) {
        assert!(
            self.members.is_empty(),
            "{}: the Rust kit writes no {:?}",
            self.name,
            self.members
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
        );
    }
}

/// The result message the call set, parsed.
fn result_message() -> Value {
    parse(&fake::result().expect("no result set")).unwrap()
}

#[test]
fn writes_the_golden_step_results() {
    let input = golden("input/step.json");
    for (name, text) in goldens("step_result") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let result = StepResult {
            output: m.text("output"),
            additional_output: m.take("additional_output"),
            name: m.text("name"),
            is_last: m.take("is_last").map_or(false, |v| v.as_bool().unwrap()),
        };
        let error = m.text("error");
        m.done();
        fake::begin(&input);
        on_step(move |_| match error {
            Some(e) => Err(Error::new(e)),
            None => Ok(result),
        });
        assert_same(&name, &result_message(), &without_future(&want));
    }
}

#[test]
fn writes_the_golden_task_results() {
    let input = golden("input/task.json");
    for (name, text) in goldens("task_result") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let mut plan = Vec::new();
        if let Some(Value::Array(steps)) = m.take("steps") {
            for (i, step) in steps.iter().enumerate() {
                let mut s = Members::of(&format!("{} steps[{}]", name, i), step);
                plan.push(PlannedStep {
                    name: s.text("name").unwrap_or_default(),
                    input: s.text("input"),
                    additional_input: s.take("additional_input"),
                });
                s.done();
            }
        }
        let error = m.text("error");
        m.done();
        fake::begin(&input);
        on_task(move |_| match error {
            Some(e) => Err(Error::new(e)),
            None => Ok(plan),
        });
        assert_same(&name, &result_message(), &without_future(&want));
    }
}

#[test]
fn writes_the_golden_artifact_results() {
    let input = golden("input/artifact.json");
    for (name, text) in goldens("artifact_result") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let replace = m.take("replace").map(|r| {
            let mut r = Members::of(&format!("{} replace", name), &r);
            let (uri, path) = (r.text("uri"), r.text("workspace_path"));
            r.done();
            match (uri, path) {
                (Some(uri), None) => replace_with_uri(uri),
                (None, Some(path)) => replace_with_file(path),
                _ => panic!(
                    "{}: the Rust kit replaces with a uri or a workspace_path",
                    name
                ),
            }
        });
        let answer = match (m.text("reject"), m.text("error"), replace) {
            (None, None, None) => Ok(()),
            (Some(reason), None, None) => Err(reject(reason)),
            (None, Some(e), None) => Err(Error::new(e)),
            (None, None, Some(r)) => Err(r),
            _ => panic!(
                "{}: the Rust kit writes one of reject, replace and error",
                name
            ),
        };
        m.done();
        fake::begin(&input);
        on_artifact(move |_, _| answer);
        assert_same(&name, &result_message(), &without_future(&want));
    }
}

#[test]
fn writes_the_golden_download_results() {
    let input = golden("input/download.json");
    for (name, text) in goldens("download_result") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let answer = match (m.take("default"), m.text("error")) {
            (None, None) => Ok(()),
            (Some(Value::Bool(true)), None) => Err(default_download()),
            (None, Some(e)) => Err(Error::new(e)),
            _ => panic!("{}: the Rust kit writes default or error, not both", name),
        };
        m.done();
        fake::begin(&input);
        on_download(move |_, _, _| answer);
        assert_same(&name, &result_message(), &without_future(&want));
    }
}

#[test]
fn writes_the_golden_artifact_metas() {
    for (name, text) in goldens("artifact_meta") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let file_name = m.text("file_name").unwrap_or_default();
        let relative_path = m.text("relative_path").unwrap_or_default();
        let workspace_path = m.text("workspace_path");
        let uri = m.text("uri");
        m.done();
        fake::begin("{}");
        match (workspace_path, uri) {
            (Some(path), None) => {
                workspace::write(&path, b"bytes").unwrap();
                publish_file(&path, &file_name, &relative_path).unwrap();
            }
            (None, Some(uri)) => {
                create_uri_artifact(&uri, &file_name, &relative_path).unwrap();
            }
            (None, None) => {
                create_artifact(&file_name, &relative_path, b"bytes").unwrap();
            }
            _ => panic!("{}: a meta with both a workspace_path and a uri", name),
        }
        let meta = fake::with(|s| s.artifacts[0].0.clone());
        assert_same(&name, &parse(&meta).unwrap(), &without_future(&want));
    }
}

#[test]
fn writes_the_golden_http_requests() {
    for (name, text) in goldens("http_request") {
        let want = parse(&text).unwrap();
        let mut m = Members::of(&name, &want);
        let url = m.text("url").unwrap();
        let mut req = crate::http::request(&m.text("method").unwrap_or_default(), &url);
        if let Some(Value::Array(headers)) = m.take("headers") {
            for h in headers {
                req = req.header(h["name"].as_str().unwrap(), h["value"].as_str().unwrap());
            }
        }
        if let Some(ms) = m.take("timeout_ms") {
            req = req.timeout(std::time::Duration::from_millis(ms.as_u64().unwrap()));
        }
        if let Some(n) = m.take("max_response_bytes") {
            req = req.max_response_bytes(n.as_u64().unwrap());
        }
        if let Some(Value::Bool(true)) = m.take("no_redirects") {
            req = req.no_redirects();
        }
        m.done();
        assert_same(&name, &req.message(), &without_future(&want));
    }
}

#[test]
fn reads_the_golden_http_responses() {
    for (name, text) in goldens("http_response") {
        let golden = parse(&text).unwrap();
        let size = golden["body_size"].as_u64().unwrap() as usize;
        let r = crate::http::Response::read(&golden, vec![b'x'; size]);
        let headers: Vec<Value> = r
            .headers()
            .iter()
            .map(|(n, v)| {
                Value::object()
                    .with("name", n.as_str())
                    .with("value", v.as_str())
            })
            .collect();
        let read = Value::object()
            .with("status", r.status())
            .with("headers", headers)
            .with("body_size", r.bytes().len())
            .with("url", r.url());
        assert_same(&name, &read, &without_future(&golden));
    }
}

/// The comparison itself: what it must tell apart.
#[test]
fn compares_json_meaning() {
    let p = |s: &str| parse(s).unwrap();
    assert!(same(
        &p(r#"{"a":1,"b":[1,2]}"#),
        &p(r#"{"b":[1,2.0],"a":1e0}"#)
    ));
    assert!(!same(&p(r#"{"a":1}"#), &p(r#"{"a":1,"b":null}"#)));
    assert!(!same(&p(r#"[1,2]"#), &p(r#"[2,1]"#)));
    assert!(!same(&p(r#"{"a":"1"}"#), &p(r#"{"a":1}"#)));
    assert_eq!(
        without_zeros(&p(
            r#"{"a":"","b":false,"c":null,"d":{"e":"","f":0},"additional_input":{"x":""}}"#
        )),
        p(r#"{"d":{"f":0},"additional_input":{"x":""}}"#)
    );
    assert_eq!(
        without_future(&p(r#"{"future_a":1,"b":[{"future_c":2,"d":3}]}"#)),
        p(r#"{"b":[{"d":3}]}"#)
    );
}
