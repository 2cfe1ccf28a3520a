//! Runs a plugin's handlers in `cargo test`, on the build machine, against
//! an in-memory host: each task has a workspace, its artifacts and its log,
//! and the host has the operator's settings. The same shape as the Go
//! kit's `agenttest`.
//!
//! [`test_host!`](crate::test_host!) makes a host that runs the handlers the
//! crate gave [`export_agent!`](crate::export_agent!):
//!
//! ```
//! use agentrt::{Error, Step, StepResult};
//!
//! fn on_step(step: &Step) -> Result<StepResult, Error> {
//!     agentrt::workspace::write("said.txt", step.input.as_bytes())?;
//!     agentrt::info!("said {}", step.input);
//!     Ok(StepResult::output(format!("you said: {}", step.input)).last())
//! }
//!
//! agentrt::export_agent!(step = on_step);
//!
//! # fn main() {
//! // In the crate's tests (#[cfg(test)] mod tests { ... #[test] fn ... }):
//! let host = agentrt::test_host!();
//! let mut task = host.create_task("a task").unwrap();
//! let step = task.step("hello").unwrap();
//! assert_eq!(step.output, "you said: hello");
//! assert!(step.is_last);
//! assert_eq!(task.read_file("said.txt").unwrap(), b"hello");
//! assert_eq!(step.logs[0].message, "said hello");
//! # }
//! ```
//!
//! The host follows agentrt's rules where a plugin can tell: a task handler
//! runs when the task is created and may plan steps; a step runs the
//! oldest planned step, else a new one; a failed call's artifacts are
//! dropped and its failure recorded on the step; an upload is placed in the
//! workspace before the artifact handler runs and taken back when the
//! handler rejects it, and a URI upload is handed to it as it is; a
//! download runs the download handler, or is the stored bytes or the URI;
//! paths are checked as the host checks them; progress reports are the
//! step handler's, within their sizes, recorded on the step
//! ([`Step::progress`](crate::testing::Step::progress)); log lines and
//! progress reports count against the call's log limit
//! ([`Host::max_log`](crate::testing::Host::max_log)) as agentrt counts
//! them. It refuses what agentrt refuses, so that a test cannot pass and
//! the plugin then fail on a server: a result that is not I-JSON, not an
//! object, or names a field in another case; a request to a destination
//! not granted, or whose URL, headers, body or message agentrt would not
//! send; a secret filled in, or its value carried in any form, where it
//! is not bound; more than 32 requests in a call, each redirect counted (plugins/README.md
//! lists each rule). It does not check URIs against an agent's schemes,
//! and it does not hold a handler to agentrt's other limits (time,
//! memory, host calls, the sizes and counts of results and artifacts, and
//! what a handler prints, which goes to the test's output): `agentrt call`
//! runs one handler in the real sandbox, under them.
//!
//! Handlers run natively, in the test's thread: a panic fails the test
//! with its message, as any panic in a test does.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;

use crate::abi;
use crate::host::fake::{self, State};

mod http;
#[cfg(test)]
mod progress_tests;
pub use crate::host::fake::{Reply, SentRequest};
use crate::json::{self, Value};
use crate::log::Level;
use http::HttpSetup;

pub use crate::exports::Handlers;

#[cfg(test)]
impl Handlers {
    /// The handlers of a plugin with a step handler only.
    pub(crate) fn step_only(step: fn() -> i32) -> Handlers {
        Handlers {
            step,
            task: None,
            artifact: None,
            download: None,
        }
    }
}

/// An in-memory agentrt host for one agent's tasks.
pub struct Host {
    /// What [`config()`](crate::config()) returns: the operator's settings.
    pub config: BTreeMap<String, String>,
    /// What one handler call may log, in bytes, as agentrt's `--max-log`
    /// (or a manifest's `limits.max_log`) bounds it: log lines and
    /// progress reports, each counted as agentrt counts it (64 bytes and
    /// its text as stored). 0 is agentrt's default, 64 KiB. What a handler
    /// prints is not counted here: it goes to the test's output.
    pub max_log: usize,
    handlers: Handlers,
    next_id: Cell<u64>,
    /// Outbound HTTP: what is granted, the secrets held, and the server
    /// (testing/http.rs, through [`Host::allow_http`], [`Host::secret`],
    /// [`Host::serve_http`]).
    http: HttpSetup,
}

/// A task of a [`Host`].
pub struct Task<'h> {
    pub id: String,
    pub input: String,
    /// A JSON object.
    pub additional_input: Value,
    host: &'h Host,
    files: BTreeMap<String, Vec<u8>>,
    artifacts: Vec<Artifact>,
    steps: Vec<Step>,
    logs: Vec<Log>,
}

/// A step of a task: planned (status `created`) or run (`completed`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    pub id: String,
    /// The name it was planned with, or the one its handler gave.
    pub name: String,
    pub status: String,
    pub input: String,
    pub additional_input: Value,
    /// Whether the task handler planned it.
    pub planned: bool,
    /// The step's output ("" when the handler left it null).
    pub output: String,
    /// The step's `additional_output` (`Null` for none); a failed step's is
    /// `{"error": {"code": ..., "message": ...}}`.
    pub additional_output: Value,
    pub is_last: bool,
    /// The artifacts the step created.
    pub artifacts: Vec<Artifact>,
    /// What the step's handler logged.
    pub logs: Vec<Log>,
    /// The progress reports of the step's handler, in the order it made
    /// them ([`progress`](crate::progress()),
    /// [`progress_with_output`](crate::progress_with_output)); a failed
    /// step keeps those it made.
    pub progress: Vec<Progress>,
}

/// One progress report of a step's handler.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub message: String,
    /// The step's output so far it reported ("" for none).
    pub output: String,
}

/// An artifact of a task, with its bytes; or a URI artifact, with its URI
/// and no bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Artifact {
    pub id: String,
    pub agent_created: bool,
    pub file_name: String,
    /// Its directory in the workspace ("" for the root).
    pub relative_path: String,
    /// The step that created it ("" for none).
    pub step_id: String,
    pub data: Vec<u8>,
    /// What a URI artifact refers to ("" for bytes).
    pub uri: String,
}

impl Artifact {
    /// Where the artifact sits in the task's workspace; "" for a URI
    /// artifact, which is not there.
    pub fn path(&self) -> String {
        if !self.uri.is_empty() {
            String::new()
        } else if self.relative_path.is_empty() {
            self.file_name.clone()
        } else {
            format!("{}/{}", self.relative_path, self.file_name)
        }
    }

    /// The artifact as a handler reads it.
    fn message(&self) -> Value {
        let mut m = Value::object()
            .with("artifact_id", self.id.as_str())
            .with("agent_created", self.agent_created)
            .with("file_name", self.file_name.as_str())
            .with("relative_path", self.relative_path.as_str());
        if self.uri.is_empty() {
            m.insert("workspace_path", self.path());
        } else {
            m.insert("uri", self.uri.as_str());
        }
        if !self.step_id.is_empty() {
            m.insert("step_id", self.step_id.as_str());
        }
        m
    }
}

/// What downloading an artifact gives a client: what the download handler
/// wrote (`served`), or, when the plugin has none or it left the download
/// to agentrt, the artifact's bytes, or its URI (which agentrt redirects
/// an http or https download to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Download {
    pub served: bool,
    pub data: Vec<u8>,
    pub uri: String,
}

/// One line a handler logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub level: Level,
    pub message: String,
}

/// A handler's failure, as agentrt reports it to the client; or an
/// upload's rejection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// `"task"`, `"step"`, `"artifact"` or `"download"`.
    pub handler: &'static str,
    /// Why it failed (the handler's error), or why the upload was rejected.
    pub message: String,
    /// What the handler logged before it failed.
    pub logs: Vec<Log>,
    rejection: bool,
}

impl Failure {
    /// Whether the artifact handler rejected the upload
    /// ([`reject`](crate::reject)) rather than failed.
    pub fn is_rejection(&self) -> bool {
        self.rejection
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rejection {
            write!(f, "upload rejected: {}", self.message)
        } else {
            write!(f, "{} handler failed: {}", self.handler, self.message)
        }
    }
}

impl std::error::Error for Failure {}

impl Host {
    /// A host with no tasks and no settings, running `handlers`; see
    /// [`test_host!`](crate::test_host!).
    pub fn new(handlers: Handlers) -> Host {
        Host {
            config: BTreeMap::new(),
            max_log: 0,
            handlers,
            next_id: Cell::new(0),
            http: HttpSetup::default(),
        }
    }

    /// Creates a task with `input`, running the task handler if the plugin
    /// has one. When the handler fails, no task is created.
    pub fn create_task(&self, input: &str) -> Result<Task<'_>, Failure> {
        self.create_task_with(input, Value::object())
    }

    /// [`create_task`](Host::create_task) with an additional input, a JSON
    /// object (`Null` is `{}`).
    pub fn create_task_with(
        &self,
        input: &str,
        additional_input: Value,
    ) -> Result<Task<'_>, Failure> {
        let mut task = Task {
            id: self.new_id(),
            input: input.to_string(),
            additional_input: object_or_empty(additional_input),
            host: self,
            files: BTreeMap::new(),
            artifacts: Vec::new(),
            steps: Vec::new(),
            logs: Vec::new(),
        };
        let handler = match self.handlers.task {
            Some(h) => h,
            None => return Ok(task),
        };
        let input = Value::object()
            .with("abi", abi::VERSION)
            .with("handler", "task")
            .with("task", task.message());
        let call = task.call(handler, input, "");
        if let Some(msg) = call.failure() {
            return Err(call.failed("task", msg));
        }
        let steps = call.result["steps"].as_array().cloned().unwrap_or_default();
        for p in steps {
            let step = Step {
                id: self.new_id(),
                name: p["name"].as_str().unwrap_or("").to_string(),
                status: "created".into(),
                input: p["input"].as_str().unwrap_or("").to_string(),
                additional_input: object_or_empty(p["additional_input"].clone()),
                planned: true,
                ..Step::default()
            };
            task.steps.push(step);
        }
        task.logs.extend(call.logs);
        task.artifacts.extend(call.artifacts);
        Ok(task)
    }

    fn new_id(&self) -> String {
        self.next_id.set(self.next_id.get() + 1);
        fake::fake_id(self.next_id.get())
    }
}

impl<'h> Task<'h> {
    /// Executes the task's next step with `input`: its oldest planned step,
    /// else a new one. When the handler fails, the step is recorded with the
    /// failure in its `additional_output`.
    pub fn step(&mut self, input: &str) -> Result<Step, Failure> {
        self.step_with(input, Value::object())
    }

    /// [`step`](Task::step) with an additional input, a JSON object.
    pub fn step_with(&mut self, input: &str, additional_input: Value) -> Result<Step, Failure> {
        let request = Value::object().with("input", input).with(
            "additional_input",
            object_or_empty(additional_input.clone()),
        );
        let i = match self.steps.iter().position(|s| s.status == "created") {
            Some(i) => i,
            None => {
                self.steps.push(Step {
                    id: self.host.new_id(),
                    status: "created".into(),
                    input: input.to_string(),
                    additional_input: object_or_empty(additional_input),
                    ..Step::default()
                });
                self.steps.len() - 1
            }
        };
        let s = &self.steps[i];
        let name = if s.name.is_empty() {
            Value::Null
        } else {
            Value::from(s.name.as_str())
        };
        let message = Value::object()
            .with("abi", abi::VERSION)
            .with("handler", "step")
            .with("task", self.message())
            .with(
                "step",
                Value::object()
                    .with("step_id", s.id.as_str())
                    .with("name", name)
                    .with("input", s.input.as_str())
                    .with("additional_input", s.additional_input.clone())
                    .with("planned", s.planned),
            )
            .with("request", request);
        let step_id = s.id.clone();
        let call = self.call(self.host.handlers.step, message, &step_id);
        let mut failure = call.failure();
        let extra = call.result["additional_output"].clone();
        if failure.is_none() && !extra.is_null() && !extra.is_object() {
            failure = Some("the result's additional_output is not a JSON object".into());
        }
        let step = &mut self.steps[i];
        step.status = "completed".into();
        step.logs = call.logs.clone();
        step.progress = call.progress.clone();
        if let Some(msg) = failure {
            let f = call.failed("step", msg);
            step.additional_output = Value::object().with(
                "error",
                Value::object()
                    .with("code", "plugin_failed")
                    .with("message", f.to_string()),
            );
            return Err(f);
        }
        step.output = call.result["output"].as_str().unwrap_or("").to_string();
        step.additional_output = extra;
        step.is_last = call.result["is_last"].as_bool().unwrap_or(false);
        if let Some(name) = call.result["name"].as_str() {
            step.name = name.to_string();
        }
        step.artifacts = call.artifacts.clone();
        let step = step.clone();
        self.artifacts.extend(call.artifacts);
        Ok(step)
    }

    /// Uploads a file to the task, as a client does: it is placed in the
    /// workspace at `relative_path/file_name`, then the artifact handler, if
    /// the plugin has one, runs. A rejected or failed upload is taken back
    /// out of the workspace (its [`Failure`] says which); the handler's
    /// artifacts are dropped and its log kept in the task's.
    pub fn upload(
        &mut self,
        file_name: &str,
        relative_path: &str,
        data: &[u8],
    ) -> Result<Artifact, Failure> {
        let refused = |message: String| Failure {
            handler: "artifact",
            message,
            logs: Vec::new(),
            rejection: false,
        };
        if file_name.is_empty() || file_name == "." || file_name == ".." || file_name.contains('/')
        {
            return Err(refused(format!(
                "file name {:?} is not a plain name",
                file_name
            )));
        }
        let dir = fake::clean_dir(relative_path).map_err(refused)?;
        let artifact = Artifact {
            id: self.host.new_id(),
            file_name: file_name.to_string(),
            relative_path: dir,
            data: data.to_vec(),
            ..Artifact::default()
        };
        let path = artifact.path();
        let before = self.files.insert(path.clone(), data.to_vec());
        let handler = match self.host.handlers.artifact {
            Some(h) => h,
            None => {
                self.artifacts.push(artifact.clone());
                return Ok(artifact);
            }
        };
        let message = Value::object()
            .with("abi", abi::VERSION)
            .with("handler", "artifact")
            .with("task", self.message())
            .with("artifact", artifact.message());
        let call = self.call(handler, message, "");
        self.logs.extend(call.logs.iter().cloned());
        let reject = call.result["reject"].as_str().unwrap_or("").to_string();
        let failure = call.failure();
        if failure.is_some() || !reject.is_empty() {
            match before {
                Some(old) => self.files.insert(path, old),
                None => self.files.remove(&path),
            };
            let rejection = failure.is_none();
            let mut f = call.failed("artifact", failure.unwrap_or(reject));
            f.rejection = rejection;
            return Err(f);
        }
        self.artifacts.push(artifact.clone());
        self.artifacts.extend(call.artifacts);
        Ok(artifact)
    }

    /// Uploads a URI artifact to the task, as a client does: the artifact
    /// handler, if the plugin has one, gets it and may accept, reject or
    /// replace it (with another URI, or a workspace file's bytes). A
    /// `file_name` of "" names it after the URI's last path segment.
    pub fn upload_uri(
        &mut self,
        uri: &str,
        file_name: &str,
        relative_path: &str,
    ) -> Result<Artifact, Failure> {
        let refused = |message: String| Failure {
            handler: "artifact",
            message,
            logs: Vec::new(),
            rejection: false,
        };
        if uri.is_empty() {
            return Err(refused("the URI is empty".into()));
        }
        let name = if file_name.is_empty() {
            uri_file_name(uri)
        } else {
            file_name.to_string()
        };
        if name == "." || name == ".." || name.contains('/') {
            return Err(refused(format!("file name {:?} is not a plain name", name)));
        }
        let mut artifact = Artifact {
            id: self.host.new_id(),
            file_name: name,
            relative_path: fake::clean_dir(relative_path).map_err(refused)?,
            uri: uri.to_string(),
            ..Artifact::default()
        };
        let handler = match self.host.handlers.artifact {
            Some(h) => h,
            None => {
                self.artifacts.push(artifact.clone());
                return Ok(artifact);
            }
        };
        let message = Value::object()
            .with("abi", abi::VERSION)
            .with("handler", "artifact")
            .with("task", self.message())
            .with("artifact", artifact.message());
        let call = self.call(handler, message, "");
        self.logs.extend(call.logs.iter().cloned());
        let reject = call.result["reject"].as_str().unwrap_or("").to_string();
        let mut failure = call.failure();
        let replace = &call.result["replace"];
        if failure.is_none() && reject.is_empty() && replace.is_object() {
            match (replace["uri"].as_str(), replace["workspace_path"].as_str()) {
                (Some(u), None) => artifact.uri = u.to_string(),
                (None, Some(p)) => match fake::clean_dir(p)
                    .ok()
                    .and_then(|p| self.files.get(&p).map(|d| (p, d.clone())))
                {
                    Some((p, data)) => {
                        let (dir, name) = match p.rfind('/') {
                            Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
                            None => (String::new(), p.clone()),
                        };
                        artifact.uri.clear();
                        artifact.relative_path = dir;
                        artifact.file_name = name;
                        artifact.data = data;
                    }
                    None => {
                        failure = Some(format!(
                            "it replaced the upload with the workspace file {:?}: no such file",
                            p
                        ))
                    }
                },
                _ => {
                    failure = Some(
                        "its replacement names neither or both of uri and workspace_path".into(),
                    )
                }
            }
        }
        if failure.is_some() || !reject.is_empty() {
            let rejection = failure.is_none();
            let mut f = call.failed("artifact", failure.unwrap_or(reject));
            f.rejection = rejection;
            return Err(f);
        }
        self.artifacts.push(artifact.clone());
        self.artifacts.extend(call.artifacts);
        Ok(artifact)
    }

    /// Downloads an artifact of the task, as a client does: through the
    /// download handler, if the plugin has one, else as agentrt serves it.
    /// A failed download handler is a [`Failure`], and what it wrote is not
    /// returned (a client reads a download cut short). The download handler
    /// changes nothing: its workspace writes and artifacts are refused, as
    /// agentrt refuses them.
    pub fn download(&mut self, artifact_id: &str) -> Result<Download, Failure> {
        let artifact = match self.artifacts.iter().find(|a| a.id == artifact_id) {
            Some(a) => a.clone(),
            None => {
                return Err(Failure {
                    handler: "download",
                    message: format!("task {} has no artifact {}", self.id, artifact_id),
                    logs: Vec::new(),
                    rejection: false,
                })
            }
        };
        if let Some(handler) = self.host.handlers.download {
            let message = Value::object()
                .with("abi", abi::VERSION)
                .with("handler", "download")
                .with("task", self.message())
                .with("artifact", artifact.message());
            let call = self.call(handler, message, "");
            self.logs.extend(call.logs.iter().cloned());
            let default = call.result["default"].as_bool().unwrap_or(false);
            let mut failure = call.failure();
            if failure.is_none() && default && !call.downloaded.is_empty() {
                failure = Some(format!(
                    "it wrote {} bytes of the download, then left the download to the host",
                    call.downloaded.len()
                ));
            }
            if let Some(msg) = failure {
                return Err(call.failed("download", msg));
            }
            if !default {
                return Ok(Download {
                    served: true,
                    data: call.downloaded,
                    uri: String::new(),
                });
            }
        }
        Ok(Download {
            served: false,
            data: artifact.data,
            uri: artifact.uri,
        })
    }

    /// Puts a file in the task's workspace, as an earlier step would have:
    /// to set up what a handler reads.
    pub fn write_file(&mut self, path: &str, data: &[u8]) -> Result<(), crate::Error> {
        let p = fake::clean_dir(path).map_err(crate::Error::new)?;
        if p.is_empty() {
            return Err(crate::Error::new(format!("path {:?} names no file", path)));
        }
        self.files.insert(p, data.to_vec());
        Ok(())
    }

    /// A file of the task's workspace.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>, crate::Error> {
        let p = fake::clean_dir(path).map_err(crate::Error::new)?;
        self.files
            .get(&p)
            .cloned()
            .ok_or_else(|| crate::Error::new(format!("no file {:?} in the task's workspace", p)))
    }

    /// The paths of the task's workspace files, in path order.
    pub fn files(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    /// The task's steps in creation order, planned ones included.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The task's artifacts in creation order, uploaded and created.
    pub fn artifacts(&self) -> &[Artifact] {
        &self.artifacts
    }

    /// The task's log: what its task handler and artifact handlers logged.
    pub fn logs(&self) -> &[Log] {
        &self.logs
    }

    /// The task as a handler reads it.
    fn message(&self) -> Value {
        let artifacts = self
            .artifacts
            .iter()
            .map(Artifact::message)
            .collect::<Vec<_>>();
        Value::object()
            .with("task_id", self.id.as_str())
            .with("input", self.input.as_str())
            .with("additional_input", self.additional_input.clone())
            .with("artifacts", artifacts)
    }

    /// Runs `handler` on `input` with the task's workspace and the host's
    /// settings, and returns what the call did.
    fn call(&mut self, handler: fn() -> i32, input: Value, step_id: &str) -> Call {
        let config = Value::Object(
            self.host
                .config
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        );
        fake::begin_call(State {
            input: input.to_json().into_bytes(),
            files: std::mem::take(&mut self.files),
            config: config.to_json(),
            last_id: self.host.next_id.get(),
            http: Some(self.host.http.setup()),
            max_log: self.host.max_log,
            ..State::default()
        });
        let code = handler();
        let state = fake::end_call();
        self.files = state.files;
        self.host.next_id.set(state.last_id);
        // As the host decodes a result: a member named as one of its
        // fields only in another case fails the call.
        let handler_name = input["handler"].as_str().unwrap_or("");
        let result =
            state
                .result
                .as_ref()
                .map(|r| match fake::check_result_names(r, handler_name) {
                    Some(why) => Err(why),
                    None => json::parse(&String::from_utf8_lossy(r)).map_err(|e| e.to_string()),
                });
        let mut call = Call {
            code,
            result: Value::Null,
            bad_result: None,
            logs: state
                .logs
                .into_iter()
                .map(|(level, message)| Log {
                    level: level_of(level),
                    message,
                })
                .collect(),
            artifacts: Vec::new(),
            downloaded: state.downloaded,
            progress: state
                .progress
                .into_iter()
                .map(|(message, output)| Progress { message, output })
                .collect(),
        };
        match result {
            Some(Ok(v)) => call.result = v,
            Some(Err(e)) => call.bad_result = Some(format!("its result is not valid: {}", e)),
            None => {}
        }
        let mut id = state.last_id - state.artifacts.len() as u64;
        for (meta, data) in state.artifacts {
            id += 1;
            let meta = json::parse(&meta).unwrap_or_default();
            let uri = meta["uri"].as_str().unwrap_or("").to_string();
            let mut file_name = meta["file_name"].as_str().unwrap_or("").to_string();
            if file_name.is_empty() && !uri.is_empty() {
                file_name = uri_file_name(&uri);
            }
            call.artifacts.push(Artifact {
                id: fake::fake_id(id),
                agent_created: true,
                uri,
                file_name,
                relative_path: fake::clean_dir(meta["relative_path"].as_str().unwrap_or(""))
                    .unwrap_or_default(),
                step_id: step_id.to_string(),
                data,
            });
        }
        call
    }
}

/// What one handler call did.
struct Call {
    code: i32,
    result: Value,
    bad_result: Option<String>,
    logs: Vec<Log>,
    artifacts: Vec<Artifact>,
    /// What a download handler wrote.
    downloaded: Vec<u8>,
    /// The step handler's progress reports.
    progress: Vec<Progress>,
}

/// The last segment of a URI's path (after its scheme and authority), or
/// its host, or "artifact".
fn uri_file_name(uri: &str) -> String {
    let rest = uri.split_once(':').map_or(uri, |(_, r)| r);
    let rest = rest.split(|c| c == '?' || c == '#').next().unwrap_or("");
    let (host, path) = match rest.strip_prefix("//") {
        Some(r) => match r.find('/') {
            Some(i) => (&r[..i], &r[i..]),
            None => (r, ""),
        },
        None => ("", rest),
    };
    match path.trim_end_matches('/').rsplit('/').next() {
        Some(seg) if !seg.is_empty() => seg.to_string(),
        _ if !host.is_empty() => host.to_string(),
        _ => "artifact".to_string(),
    }
}

impl Call {
    /// Why the call failed, `None` if it did not: a result that does not
    /// parse, the result's error, or a code other than 0.
    fn failure(&self) -> Option<String> {
        if let Some(msg) = &self.bad_result {
            return Some(msg.clone());
        }
        if let Some(msg) = self.result["error"].as_str() {
            return Some(msg.to_string());
        }
        if self.code != 0 {
            return Some(format!("it returned code {}", self.code));
        }
        None
    }

    fn failed(&self, handler: &'static str, message: String) -> Failure {
        Failure {
            handler,
            message,
            logs: self.logs.clone(),
            rejection: false,
        }
    }
}

fn level_of(level: i32) -> Level {
    match level {
        abi::LEVEL_DEBUG => Level::Debug,
        abi::LEVEL_WARN => Level::Warn,
        abi::LEVEL_ERROR => Level::Error,
        _ => Level::Info,
    }
}

fn object_or_empty(v: Value) -> Value {
    if v.is_object() {
        v
    } else {
        Value::object()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports;
    use crate::{reject, workspace, Error, PlannedStep, StepResult};

    #[test]
    fn a_step_runs_against_the_tasks_workspace() {
        let host = Host::new(Handlers::step_only(|| {
            exports::on_step(|s| {
                let notes = workspace::read_to_string("notes.txt")?;
                workspace::write("out/answer.txt", format!("{}!", notes).as_bytes())?;
                crate::publish_file("out/answer.txt", "answer.txt", "out")?;
                crate::info!("task {:?}, step {:?}", s.task.input, s.input);
                Ok(StepResult::output(format!("read {}", notes))
                    .with_additional_output(Value::object().with("n", 1))
                    .last())
            })
        }));
        let mut task = host.create_task("the task").unwrap();
        task.write_file("notes.txt", b"hello").unwrap();
        let step = task.step("the step").unwrap();
        assert_eq!(step.output, "read hello");
        assert!(step.is_last);
        assert_eq!(step.additional_output.to_json(), r#"{"n":1}"#);
        assert_eq!(task.read_file("out/answer.txt").unwrap(), b"hello!");
        assert_eq!(step.artifacts.len(), 1);
        assert_eq!(step.artifacts[0].path(), "out/answer.txt");
        assert_eq!(step.artifacts[0].data, b"hello!");
        assert_eq!(step.artifacts[0].step_id, step.id);
        assert_eq!(
            step.logs,
            vec![Log {
                level: Level::Info,
                message: r#"task "the task", step "the step""#.into()
            }]
        );
        assert_eq!(task.files(), vec!["notes.txt", "out/answer.txt"]);
    }

    #[test]
    fn planned_steps_run_first_with_their_own_input() {
        let host = Host::new(Handlers {
            step: || {
                exports::on_step(|s| {
                    Ok(StepResult::output(format!(
                        "{}|{}|{}|{}",
                        s.name, s.input, s.request.input, s.planned
                    )))
                })
            },
            task: Some(|| {
                exports::on_task(|t| {
                    crate::info!("planning for {}", t.input);
                    Ok(vec![
                        PlannedStep::new("first", "a"),
                        PlannedStep::new("second", "b")
                            .with_additional_input(Value::object().with("k", 2)),
                    ])
                })
            }),
            artifact: None,
            download: None,
        });
        let mut task = host.create_task("plan").unwrap();
        assert_eq!(task.steps().len(), 2);
        assert_eq!(task.steps()[1].additional_input.to_json(), r#"{"k":2}"#);
        assert_eq!(task.logs()[0].message, "planning for plan");
        let outputs: Vec<String> = ["x", "y", "z"]
            .iter()
            .map(|i| task.step(i).unwrap().output)
            .collect();
        assert_eq!(
            outputs,
            vec!["first|a|x|true", "second|b|y|true", "|z|z|false"]
        );
    }

    /// A result agentrt refuses fails the step here too: one that is not
    /// I-JSON (a name twice, a number no double holds), which the host
    /// refuses at set_result, and one naming a field in another case,
    /// which the host refuses as it decodes the result.
    #[test]
    fn a_result_agentrt_refuses_fails_the_step() {
        fn dup() -> i32 {
            exports::on_step(|_| {
                let twice = Value::Object(vec![("k".into(), 1.into()), ("k".into(), 2.into())]);
                Ok(
                    StepResult::output("x")
                        .with_additional_output(Value::object().with("a", twice)),
                )
            })
        }
        fn huge() -> i32 {
            exports::on_step(|_| {
                let n = json::parse("1e400").unwrap();
                Ok(StepResult::output("x").with_additional_output(Value::object().with("n", n)))
            })
        }
        fn upper() -> i32 {
            crate::host::set_result(br#"{"output":"x","OUTPUT":"y"}"#).unwrap();
            0
        }
        fn planned_upper() -> i32 {
            crate::host::set_result(br#"{"steps":[{"name":"a"},{"Name":"b"}]}"#).unwrap();
            0
        }
        for (step, want) in [
            (
                dup as fn() -> i32,
                "set_result: duplicate member name at additional_output.a.k (byte ",
            ),
            (
                huge,
                "set_result: number out of range at additional_output.n (byte ",
            ),
            (
                upper,
                r#"its result is not valid: "OUTPUT": member names are case-sensitive; did you mean "output"?"#,
            ),
        ] {
            let host = Host::new(Handlers::step_only(step));
            let mut task = host.create_task("t").unwrap();
            match task.step("go") {
                Err(f) => assert!(
                    f.message.starts_with(want),
                    "{:?}, want {:?}",
                    f.message,
                    want
                ),
                Ok(s) => panic!("the step succeeded ({:?}), want: {}", s.output, want),
            }
        }
        let host = Host::new(Handlers {
            step: upper,
            task: Some(planned_upper),
            artifact: None,
            download: None,
        });
        match host.create_task("t") {
            Err(f) => assert_eq!(
                f.message,
                r#"its result is not valid: "Name" in steps[1]: member names are case-sensitive; did you mean "name"?"#
            ),
            Ok(_) => panic!("a task whose plan names a field in another case was created"),
        }
    }

    #[test]
    fn a_failed_step_is_recorded_without_its_artifacts() {
        let host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                crate::warn!("about to fail");
                crate::create_artifact("partial.txt", "", b"half")?;
                Err(Error::new("the agent gave up"))
            })
        }));
        let mut task = host.create_task("").unwrap();
        let f = task.step("go").unwrap_err();
        assert_eq!(f.to_string(), "step handler failed: the agent gave up");
        assert_eq!(f.logs[0].message, "about to fail");
        let step = &task.steps()[0];
        assert_eq!(
            step.additional_output["error"]["message"].as_str(),
            Some(f.to_string().as_str())
        );
        assert!(step.artifacts.is_empty() && task.artifacts().is_empty());
    }

    #[test]
    fn a_rejected_upload_is_taken_back_and_its_log_kept() {
        let host = Host::new(Handlers {
            step: || exports::on_step(|_| Ok(StepResult::new())),
            task: None,
            artifact: Some(|| {
                exports::on_artifact(|_, a| {
                    crate::info!("checking {}", a.path);
                    crate::create_artifact("summary.txt", "", b"s")?;
                    if a.file_name.ends_with(".txt") {
                        Ok(())
                    } else {
                        Err(reject("only .txt files, please"))
                    }
                })
            }),
            download: None,
        });
        let mut task = host.create_task("").unwrap();
        let f = task.upload("photo.png", "in", b"png").unwrap_err();
        assert!(f.is_rejection());
        assert_eq!(f.to_string(), "upload rejected: only .txt files, please");
        assert!(task.files().is_empty() && task.artifacts().is_empty());
        let a = task.upload("notes.txt", "in", b"n").unwrap();
        assert_eq!(a.path(), "in/notes.txt");
        assert_eq!(task.artifacts().len(), 2);
        assert_eq!(task.files(), vec!["in/notes.txt"]);
        assert_eq!(task.logs().len(), 2);
        assert_eq!(task.logs()[0].message, "checking in/photo.png");
    }

    #[test]
    fn uri_uploads_and_downloads_run_their_handlers_as_agentrt_does() {
        let host = Host::new(Handlers {
            step: || {
                exports::on_step(|_| {
                    let id = crate::create_uri_artifact("s3://bucket/out/report.pdf", "", "links")?;
                    Ok(StepResult::output(id))
                })
            },
            task: None,
            artifact: Some(|| {
                exports::on_artifact(|_, a| {
                    if let Some(rest) = a.uri.strip_prefix("http://") {
                        return Err(crate::replace_with_uri(format!("https://{}", rest)));
                    }
                    if let Some(text) = a.uri.strip_prefix("memo:") {
                        workspace::write(&format!("memos/{}", a.file_name), text.as_bytes())?;
                        return Err(crate::replace_with_file(format!("memos/{}", a.file_name)));
                    }
                    if a.uri.contains("reject") {
                        return Err(reject("not that one"));
                    }
                    Ok(())
                })
            }),
            download: Some(|| {
                exports::on_download(|_, a, out| {
                    if a.file_name == "report.pdf" {
                        let refused = workspace::write("x", b"").is_err()
                            && workspace::delete("memos/note").is_err();
                        out.write(
                            format!("served {} by {} ({})", a.uri, a.step_id, refused).as_bytes(),
                        )?;
                        return Ok(());
                    }
                    if a.file_name == "bad" {
                        out.write(b"half")?;
                        return Err(Error::new("broke"));
                    }
                    Err(crate::default_download())
                })
            }),
        });
        let mut task = host.create_task("uris").unwrap();
        let web = task.upload_uri("http://example.com/a.pdf", "", "").unwrap();
        assert_eq!(web.uri, "https://example.com/a.pdf");
        assert_eq!(
            (web.file_name.as_str(), web.path()),
            ("a.pdf", String::new())
        );
        let memo = task.upload_uri("memo:remember", "note", "").unwrap();
        assert_eq!(
            (memo.uri.as_str(), memo.path()),
            ("", "memos/note".to_string())
        );
        assert_eq!(memo.data, b"remember");
        assert!(task
            .upload_uri("https://reject.example/x", "", "")
            .unwrap_err()
            .is_rejection());
        let step = task.step("make a link").unwrap();
        let link = &step.artifacts[0];
        assert_eq!(
            (
                link.uri.as_str(),
                link.file_name.as_str(),
                link.relative_path.as_str()
            ),
            ("s3://bucket/out/report.pdf", "report.pdf", "links")
        );
        let d = task.download(&link.id).unwrap();
        assert!(d.served);
        assert_eq!(
            String::from_utf8(d.data).unwrap(),
            format!("served s3://bucket/out/report.pdf by {} (true)", step.id)
        );
        let d = task.download(&memo.id).unwrap();
        assert_eq!((d.served, d.data.as_slice()), (false, &b"remember"[..]));
        let d = task.download(&web.id).unwrap();
        assert_eq!(
            (d.served, d.uri.as_str()),
            (false, "https://example.com/a.pdf")
        );
        let bad = task
            .upload_uri("https://example.com/bad", "bad", "")
            .unwrap();
        let f = task.download(&bad.id).unwrap_err();
        assert_eq!(f.to_string(), "download handler failed: broke");
        assert_eq!(task.read_file("memos/note").unwrap(), b"remember");
    }

    #[test]
    fn config_is_the_hosts_settings() {
        let mut host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                Ok(StepResult::output(
                    crate::config()?
                        .get("greeting")
                        .cloned()
                        .unwrap_or_default(),
                ))
            })
        }));
        host.config.insert("greeting".into(), "hello".into());
        let mut task = host.create_task("").unwrap();
        assert_eq!(task.step("").unwrap().output, "hello");
    }

    #[test]
    fn paths_are_checked_as_the_host_checks_them() {
        thread_local!(static PATH: std::cell::RefCell<String> = std::cell::RefCell::new(String::new()));
        let host = Host::new(Handlers::step_only(|| {
            exports::on_step(|_| {
                let p = PATH.with(|p| p.borrow().clone());
                workspace::write(&p, b"x")?;
                Ok(StepResult::new())
            })
        }));
        let deep = format!("{}f", "d/".repeat(33));
        for p in [
            "../x",
            "/etc/passwd",
            "a\\b",
            "a\u{0}b",
            "",
            "a/../../b",
            deep.as_str(),
        ] {
            PATH.with(|cell| *cell.borrow_mut() = p.to_string());
            let mut task = host.create_task("").unwrap();
            let f = task.step("").unwrap_err();
            assert!(f.message.starts_with("workspace_write: "), "{:?}: {}", p, f);
            assert!(task.files().is_empty());
        }
    }
}
