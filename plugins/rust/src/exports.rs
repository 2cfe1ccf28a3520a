//! The bodies of the ABI's exports, which [`export_agent!`](crate::export_agent)
//! defines in the plugin crate. Not part of the kit's API: use the macro.
//!
//! Each export reads the input message, runs the handler and sets the result
//! message. A handler's `Err` becomes `{"error": message}` and the export
//! returns 1.

use crate::abi;
use crate::agent::{plan_message, Artifact, PlannedStep, Step, StepResult, Task};
use crate::download::Download;
use crate::error::Error;
use crate::host;
use crate::json::{self, Value};

/// The handlers of a plugin, as [`export_agent!`](crate::export_agent!)
/// defines them: each runs the handler on the call in progress. The test
/// harness ([`testing`](crate::testing), behind the kit's `testing`
/// feature) runs them; the type is here so that a plugin built natively
/// without the harness still compiles.
#[derive(Clone, Copy)]
pub struct Handlers {
    pub step: fn() -> i32,
    pub task: Option<fn() -> i32>,
    pub artifact: Option<fn() -> i32>,
    pub download: Option<fn() -> i32>,
}

/// `agentrt_handlers`: the bit set of the handlers the plugin defines (the
/// step handler always is).
pub fn handlers(task: bool, artifact: bool, download: bool) -> i32 {
    let mut bits = abi::HANDLER_BIT_STEP;
    if task {
        bits |= abi::HANDLER_BIT_TASK;
    }
    if artifact {
        bits |= abi::HANDLER_BIT_ARTIFACT;
    }
    if download {
        bits |= abi::HANDLER_BIT_DOWNLOAD;
    }
    bits
}

/// `agentrt_on_step`.
pub fn on_step<F>(handler: F) -> i32
where
    F: FnOnce(&Step) -> Result<StepResult, Error>,
{
    begin();
    let input = match read_input() {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    let step = Step::from_input(input);
    match handler(&step).and_then(|r| r.to_message()) {
        Ok(result) => succeed(&result),
        Err(e) => fail(&e),
    }
}

/// `agentrt_on_task`.
pub fn on_task<F>(handler: F) -> i32
where
    F: FnOnce(&Task) -> Result<Vec<PlannedStep>, Error>,
{
    begin();
    let mut input = match read_input() {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    let task = Task::from_message(input.take("task"));
    match handler(&task).and_then(|plan| plan_message(&plan)) {
        Ok(result) => succeed(&result),
        Err(e) => fail(&e),
    }
}

/// `agentrt_on_artifact`.
pub fn on_artifact<F>(handler: F) -> i32
where
    F: FnOnce(&Task, &Artifact) -> Result<(), Error>,
{
    begin();
    let (task, artifact) = match task_and_artifact("artifact") {
        Ok(input) => input,
        Err(e) => return fail(&e),
    };
    match handler(&task, &artifact) {
        Ok(()) => succeed(&Value::object()),
        Err(e) if e.is_rejection() => succeed(&Value::object().with("reject", e.message())),
        Err(e) => match e.replacement() {
            Some((uri, path)) => {
                let mut replace = Value::object();
                if !uri.is_empty() {
                    replace.insert("uri", uri);
                }
                if !path.is_empty() {
                    replace.insert("workspace_path", path);
                }
                succeed(&Value::object().with("replace", replace))
            }
            None => fail(&e),
        },
    }
}

/// `agentrt_on_download`.
pub fn on_download<F>(handler: F) -> i32
where
    F: FnOnce(&Task, &Artifact, &mut Download) -> Result<(), Error>,
{
    begin();
    let (task, artifact) = match task_and_artifact("download") {
        Ok(input) => input,
        Err(e) => return fail(&e),
    };
    match handler(&task, &artifact, &mut Download::new()) {
        Ok(()) => succeed(&Value::object()),
        Err(e) if e.is_default_download() => succeed(&Value::object().with("default", true)),
        Err(e) => fail(&e),
    }
}

/// The task and the artifact of the input of the artifact or download
/// handler.
fn task_and_artifact(handler: &str) -> Result<(Task, Artifact), Error> {
    let mut input = read_input()?;
    let artifact = match input.take("artifact") {
        Value::Null => {
            return Err(Error::new(format!(
                "the {} handler's input has no artifact",
                handler
            )))
        }
        v => Artifact::from_message(v),
    };
    Ok((Task::from_message(input.take("task")), artifact))
}

/// The export of a handler the plugin does not define. The host does not
/// call it (`agentrt_handlers` leaves its bit unset); if it does, it fails.
pub fn missing(handler: &str) -> i32 {
    fail(&Error::new(format!(
        "the plugin defines no {} handler",
        handler
    )))
}

/// Prepares a handler call: a panic, which traps the instance
/// (`panic = "abort"`), first reports its message through the log and the
/// result, so that it shows up in the step's log.
fn begin() {
    // Natively (the kit's tests) panics keep the default hook.
    #[cfg(target_arch = "wasm32")]
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string(); // "panicked at '...', src/lib.rs:3:5"
        let _ = host::log(abi::LEVEL_ERROR, &msg);
        let _ = host::set_result(Value::object().with("error", msg).to_json().as_bytes());
    }));
}

/// Reads and decodes the call's input message.
fn read_input() -> Result<Value, Error> {
    let bytes = host::input()?;
    // The host sends UTF-8; the lossy conversion, which looks at each byte
    // in turn, is only for input that is not.
    let parsed = match std::str::from_utf8(&bytes) {
        Ok(text) => json::parse(text),
        Err(_) => json::parse(&String::from_utf8_lossy(&bytes)),
    };
    match parsed {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(Error::new(
            "decode the handler's input: it is not a JSON object",
        )),
        Err(e) => Err(Error::new(format!("decode the handler's input: {}", e))),
    }
}

/// Sets `result` as the handler's result; returns the export's status.
fn succeed(result: &Value) -> i32 {
    match host::set_result(result.to_json().as_bytes()) {
        Ok(()) => 0,
        Err(e) => {
            // The result was refused (e.g. over the size limit): say why.
            let _ = host::set_result(
                Value::object()
                    .with("error", e.message())
                    .to_json()
                    .as_bytes(),
            );
            1
        }
    }
}

/// Reports `err` as the handler's failure.
fn fail(err: &Error) -> i32 {
    let msg = if err.message().is_empty() {
        "the handler failed"
    } else {
        err.message()
    };
    let _ = host::set_result(Value::object().with("error", msg).to_json().as_bytes());
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake;
    use crate::json::parse;

    fn step_input(input: &str) -> String {
        Value::object()
            .with("abi", 1)
            .with("handler", "step")
            .with(
                "task",
                Value::object()
                    .with("task_id", "t")
                    .with("input", "task text")
                    .with("artifacts", Vec::new()),
            )
            .with(
                "step",
                Value::object()
                    .with("step_id", "s")
                    .with("input", input)
                    .with("planned", false),
            )
            .with("request", Value::object().with("input", input))
            .to_json()
    }

    fn result() -> Value {
        parse(&fake::result().expect("no result set")).unwrap()
    }

    #[test]
    fn runs_the_step_handler() {
        fake::begin(&step_input("héllo \"quoted\" \\ 😀"));
        let code = on_step(|s| Ok(StepResult::output(&s.input).with_name(&s.task.input).last()));
        assert_eq!(code, 0);
        assert_eq!(
            result(),
            Value::object()
                .with("output", "héllo \"quoted\" \\ 😀")
                .with("name", "task text")
                .with("is_last", true)
        );
    }

    #[test]
    fn reads_an_input_larger_than_the_first_buffer() {
        let big = "x".repeat(5000);
        fake::begin(&step_input(&big));
        assert_eq!(on_step(|s| Ok(StepResult::output(&s.input))), 0);
        assert_eq!(result()["output"].as_str(), Some(big.as_str()));
        assert_eq!(
            fake::with(|s| s.input_calls),
            2,
            "one call to learn the size, one to copy"
        );
    }

    #[test]
    fn reports_a_handler_error() {
        fake::begin(&step_input("x"));
        assert_eq!(on_step(|_| Err("no can do".into())), 1);
        assert_eq!(result(), Value::object().with("error", "no can do"));

        fake::begin(&step_input("x"));
        assert_eq!(on_step(|_| Err(Error::new(""))), 1);
        assert_eq!(
            result(),
            Value::object().with("error", "the handler failed")
        );

        fake::begin(&step_input("x"));
        assert_eq!(
            on_step(|_| Ok(StepResult::new().with_additional_output(Value::from("no")))),
            1
        );
        assert_eq!(
            result()["error"].as_str(),
            Some("the step's additional_output must be a JSON object")
        );
    }

    #[test]
    fn reports_bad_input() {
        fake::begin("{\"task\": ");
        assert_eq!(on_step(|_| Ok(StepResult::new())), 1);
        assert_eq!(
            result()["error"].as_str(),
            Some("decode the handler's input: invalid JSON at byte 9: unexpected end of input")
        );
    }

    #[test]
    fn runs_the_task_handler() {
        fake::begin(
            r#"{"abi":1,"handler":"task","task":{"task_id":"t","input":"a b","artifacts":[]}}"#,
        );
        let code = on_task(|t| {
            Ok(t.input
                .split(' ')
                .map(|w| PlannedStep::new(format!("say {}", w), w))
                .collect())
        });
        assert_eq!(code, 0);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"steps":[{"name":"say a","input":"a"},{"name":"say b","input":"b"}]}"#
        );
    }

    #[test]
    fn runs_the_artifact_handler() {
        let input = r#"{"abi":1,"handler":"artifact","task":{"task_id":"t","artifacts":[]},
            "artifact":{"artifact_id":"a","agent_created":false,"file_name":"x.pdf","relative_path":"","workspace_path":"x.pdf"}}"#;
        let handler = |_: &Task, a: &Artifact| {
            if a.file_name.ends_with(".txt") {
                Ok(())
            } else if a.file_name.ends_with(".pdf") {
                Err(crate::reject(format!(
                    "{}: only .txt files, please",
                    a.file_name
                )))
            } else {
                Err(Error::new("cannot read it"))
            }
        };
        fake::begin(input);
        assert_eq!(on_artifact(handler), 0);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"reject":"x.pdf: only .txt files, please"}"#
        );

        fake::begin(&input.replace("x.pdf", "x.txt"));
        assert_eq!(on_artifact(handler), 0);
        assert_eq!(fake::result().unwrap(), "{}");

        fake::begin(&input.replace("x.pdf", "x.bin"));
        assert_eq!(on_artifact(handler), 1);
        assert_eq!(fake::result().unwrap(), r#"{"error":"cannot read it"}"#);

        fake::begin(r#"{"abi":1,"handler":"artifact","task":{}}"#);
        assert_eq!(on_artifact(handler), 1);
    }

    #[test]
    fn fails_a_missing_handler() {
        fake::begin("{}");
        assert_eq!(missing("task"), 1);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"error":"the plugin defines no task handler"}"#
        );
    }

    #[test]
    fn runs_the_artifact_handler_on_uris() {
        let input = r#"{"abi":1,"handler":"artifact","task":{"task_id":"t","artifacts":[]},
            "artifact":{"artifact_id":"a","agent_created":false,"file_name":"r.pdf","relative_path":"","uri":"http://b.example/r.pdf"}}"#;
        let handler = |_: &Task, a: &Artifact| match a.uri.strip_prefix("http://") {
            Some(rest) => Err(crate::replace_with_uri(format!("https://{}", rest))),
            None => Err(crate::replace_with_file("in/r.pdf")),
        };
        fake::begin(input);
        assert_eq!(on_artifact(handler), 0);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"replace":{"uri":"https://b.example/r.pdf"}}"#
        );
        fake::begin(&input.replace("http://", "s3://"));
        assert_eq!(on_artifact(handler), 0);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"replace":{"workspace_path":"in/r.pdf"}}"#
        );
    }

    #[test]
    fn runs_the_download_handler() {
        let input = r#"{"abi":1,"handler":"download","task":{"task_id":"t","artifacts":[]},
            "artifact":{"artifact_id":"a","agent_created":true,"file_name":"x.md","relative_path":"","workspace_path":"x.md","step_id":"s"}}"#;
        let handler = |_: &Task, a: &Artifact, out: &mut Download| {
            if a.file_name.ends_with(".bin") {
                return Err(crate::default_download());
            }
            out.write(b"# ")?;
            std::io::Write::write_all(out, a.step_id.as_bytes())
                .map_err(|e| Error::new(e.to_string()))?;
            if a.file_name.ends_with(".bad") {
                return Err(Error::new("cannot render it"));
            }
            assert_eq!(out.written(), 3);
            Ok(())
        };
        fake::begin(input);
        assert_eq!(on_download(handler), 0);
        assert_eq!(fake::result().unwrap(), "{}");
        assert_eq!(fake::with(|s| s.downloaded.clone()), b"# s");

        fake::begin(&input.replace("x.md", "x.bin"));
        assert_eq!(on_download(handler), 0);
        assert_eq!(fake::result().unwrap(), r#"{"default":true}"#);
        assert!(fake::with(|s| s.downloaded.is_empty()));

        fake::begin(&input.replace("x.md", "x.bad"));
        assert_eq!(on_download(handler), 1);
        assert_eq!(fake::result().unwrap(), r#"{"error":"cannot render it"}"#);

        // A write the host refuses fails the handler with the host's words.
        fake::begin(input);
        fake::with(|s| {
            s.download_fail = Some((abi::ERR_IO, "the client is not taking the download".into()))
        });
        assert_eq!(on_download(handler), 1);
        assert_eq!(
            fake::result().unwrap(),
            r#"{"error":"download_write: the client is not taking the download"}"#
        );
    }

    #[test]
    fn sets_handler_bits() {
        assert_eq!(handlers(false, false, false), 2);
        assert_eq!(handlers(true, false, false), 3);
        assert_eq!(handlers(true, true, false), 7);
        assert_eq!(handlers(true, true, true), 15);
        assert_eq!(handlers(false, false, true), 10);
    }
}
