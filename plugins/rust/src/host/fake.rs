//! An in-memory host for running the kit outside WebAssembly: the kit's
//! unit tests, and [`testing`](crate::testing), the harness a plugin's own
//! tests use. It has the `agentrt_v1` functions' raw signatures and
//! follows plugins/ABI.md: sized reads, negative codes, `last_error`, paths
//! checked as the host checks them. Its state is per thread, so tests do
//! not share it. Until a call begins ([`begin`], [`begin_call`]), every
//! function answers "not allowed", as the real host does outside a call.
#![allow(dead_code)] // parts serve only the tests

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::abi;
use crate::json::{self, Value};

/// What one fake handler call saw and did.
#[derive(Default)]
pub(crate) struct State {
    pub input: Vec<u8>,
    pub result: Option<Vec<u8>>,
    pub logs: Vec<(i32, String)>,
    /// (meta JSON, bytes) of each artifact_create.
    pub artifacts: Vec<(String, Vec<u8>)>,
    pub files: BTreeMap<String, Vec<u8>>,
    pub config: String,
    /// What workspace_stat and workspace_list answer when set, instead of
    /// describing `files`.
    pub stat_answer: Option<String>,
    pub list_answer: Option<String>,
    pub last_error: String,
    /// Calls of input, to check the sized-read protocol.
    pub input_calls: usize,
    /// The number in the last id handed out: an artifact's id is the next.
    pub last_id: u64,
    /// What download_write sent; download_fail makes it fail.
    pub downloaded: Vec<u8>,
    pub download_fail: Option<(i32, String)>,
    /// Set for a download handler's call: download_write works, and
    /// nothing may change (as agentrt refuses changes from a download).
    pub download: bool,
    /// What outbound requests reach (http.rs); None refuses them all.
    pub http: Option<Rc<http::Setup>>,
    /// The last response's message and body.
    pub http_response: Option<(Vec<u8>, Vec<u8>)>,
    /// The outbound requests of the call, each redirect followed counted.
    pub http_requests: usize,
    /// The handler the input message names ("step", ...).
    pub handler: String,
    /// The step handler's progress reports: message, output ("" for none).
    pub progress: Vec<(String, String)>,
    /// The call's log limit in bytes (0: agentrt's default, 64 KiB); what
    /// the log lines and progress reports count against it; whether a
    /// line did not fit, which fills it (log_limit.rs).
    pub max_log: usize,
    pub log_bytes: usize,
    pub log_full: bool,
}

mod destination;
mod http;
mod ijson;
mod log_limit;
mod scrub;
pub use http::{Reply, SentRequest};
use log_limit::valid_text;
// What the test harness (the kit's "testing" feature) sets up with.
#[cfg(any(test, feature = "testing"))]
pub(crate) use {
    destination::parse_destination,
    http::{Secret, Setup, MAX_REQUESTS},
    ijson::check_names as check_result_names,
    scrub::check_secret,
};

/// The handler the input message names ("" for none).
fn handler_of(input: &[u8]) -> String {
    json::parse(&String::from_utf8_lossy(input))
        .ok()
        .and_then(|v| v["handler"].as_str().map(String::from))
        .unwrap_or_default()
}

/// Refuses a change from the download handler.
fn read_only(s: &mut State) -> Result<(), i32> {
    if s.download {
        return Err(fail(
            s,
            abi::ERR_NOT_ALLOWED,
            "the download handler cannot change the task: serving a download changes nothing",
        ));
    }
    Ok(())
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Starts a fake handler call whose input message is `input`.
pub(crate) fn begin(input: &str) {
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            input: input.as_bytes().to_vec(),
            config: "{}".into(),
            download: handler_of(input.as_bytes()) == abi::HANDLER_DOWNLOAD,
            handler: handler_of(input.as_bytes()),
            ..State::default()
        })
    });
}

/// Starts a call with `state`, for the harness.
pub(crate) fn begin_call(mut state: State) {
    state.handler = handler_of(&state.input);
    state.download = state.handler == abi::HANDLER_DOWNLOAD;
    STATE.with(|s| *s.borrow_mut() = Some(state));
}

/// Ends the call in progress and returns its state.
pub(crate) fn end_call() -> State {
    STATE.with(|s| s.borrow_mut().take().expect("no fake call in progress"))
}

/// Runs `f` on the state of the call in progress.
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| {
        f(s.borrow_mut()
            .as_mut()
            .expect("no fake call in progress (call fake::begin)"))
    })
}

/// The result the call set, as text.
pub(crate) fn result() -> Option<String> {
    with(|s| {
        s.result
            .as_ref()
            .map(|r| String::from_utf8(r.clone()).unwrap())
    })
}

/// Runs `f` on the call in progress, or answers ErrNotAllowed.
fn call(f: impl FnOnce(&mut State) -> i32) -> i32 {
    STATE.with(|s| match s.borrow_mut().as_mut() {
        Some(state) => f(state),
        None => abi::ERR_NOT_ALLOWED,
    })
}

fn fail(s: &mut State, code: i32, msg: &str) -> i32 {
    s.last_error = msg.to_string();
    code
}

unsafe fn bytes<'a>(ptr: *const u8, len: i32) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    std::slice::from_raw_parts(ptr, len as usize)
}

unsafe fn text<'a>(s: &mut State, ptr: *const u8, len: i32) -> Result<&'a str, i32> {
    std::str::from_utf8(bytes(ptr, len)).map_err(|_| fail(s, abi::ERR_INVALID, "not UTF-8"))
}

unsafe fn copy_out(data: &[u8], buf: *mut u8, cap: i32) -> i32 {
    if data.len() <= cap as usize {
        std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len());
    }
    data.len() as i32
}

/// Cleans a workspace path as the host does ("./a//b" is "a/b"), or fails
/// the call with ERR_BAD_PATH as the host would.
fn check_path(s: &mut State, path: &str) -> Result<String, i32> {
    match clean_dir(path) {
        Ok(p) if p.is_empty() => Err(fail(
            s,
            abi::ERR_BAD_PATH,
            &format!("path {:?} names no file", path),
        )),
        Ok(p) => Ok(p),
        Err(msg) => Err(fail(s, abi::ERR_BAD_PATH, &msg)),
    }
}

/// Cleans a workspace directory ("" is the root), refusing what the host
/// refuses (plugins/ABI.md, "Paths"): absolute paths, "..", backslashes,
/// control characters, names over 255 bytes, paths over 1024 bytes or 32
/// directories.
pub(crate) fn clean_dir(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Ok(String::new());
    }
    if path.contains('\\') {
        return Err(format!(
            "path {:?} contains a backslash; use / between names",
            path
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(format!("path {:?} contains a control character", path));
    }
    if path.len() > 1024 {
        return Err("path is longer than 1024 bytes".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "path {:?} is absolute; paths are relative to the task's workspace",
            path
        ));
    }
    let mut kept = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => continue,
            ".." => {
                return Err(format!(
                    "path {:?} leaves the task's workspace (\"..\")",
                    path
                ))
            }
            s if s.len() > 255 => {
                return Err(format!(
                    "a name in path {:?} is longer than 255 bytes",
                    path
                ))
            }
            s => kept.push(s),
        }
    }
    if kept.len() > 32 {
        return Err(format!("path {:?} is deeper than 32 directories", path));
    }
    Ok(kept.join("/"))
}

/// Refuses a file where a directory is, or a directory where a file is.
fn check_write(s: &mut State, path: &str) -> Result<(), i32> {
    for other in s.files.keys() {
        let msg = if other.starts_with(path) && other[path.len()..].starts_with('/') {
            format!("{:?} is a directory, not a file", path)
        } else if path.starts_with(other.as_str()) && path[other.len()..].starts_with('/') {
            format!("a directory in {:?} is a file", path)
        } else {
            continue;
        };
        return Err(fail(s, abi::ERR_BAD_PATH, &msg));
    }
    Ok(())
}

fn file_info(path: &str, data: &[u8]) -> Value {
    Value::object()
        .with("path", path)
        .with("size", data.len())
        .with("mod_time", 1_700_000_000_000u64)
}

pub unsafe fn host_input(buf: *mut u8, cap: i32) -> i32 {
    call(|s| {
        s.input_calls += 1;
        copy_out(&s.input, buf, cap)
    })
}

pub unsafe fn host_set_result(ptr: *const u8, len: i32) -> i32 {
    call(|s| {
        let result = bytes(ptr, len);
        // As the host: a result every client reads alike, or none.
        if let Some(why) = ijson::check(result) {
            return fail(s, abi::ERR_INVALID, &format!("set_result: {}", why));
        }
        s.result = Some(result.to_vec());
        0
    })
}

pub unsafe fn host_log(level: i32, ptr: *const u8, len: i32) -> i32 {
    call(|s| {
        if !(abi::LEVEL_DEBUG..=abi::LEVEL_ERROR).contains(&level) {
            return fail(s, abi::ERR_INVALID, &format!("unknown log level {}", level));
        }
        let msg = bytes(ptr, len);
        if let Err(why) = log_limit::count_line(s, msg) {
            return fail(s, abi::ERR_LIMIT, &why);
        }
        s.logs.push((level, valid_text(msg)));
        0
    })
}

pub unsafe fn host_progress(
    msg: *const u8,
    msg_len: i32,
    output: *const u8,
    output_len: i32,
) -> i32 {
    call(|s| {
        // As the host: the sizes first, each before a byte is read.
        if msg_len as usize > abi::MAX_PROGRESS_MESSAGE_BYTES {
            let why = format!(
                "progress message of {} bytes is over its limit of {} bytes",
                msg_len,
                abi::MAX_PROGRESS_MESSAGE_BYTES
            );
            return fail(s, abi::ERR_LIMIT, &why);
        }
        if output_len as usize > abi::MAX_PROGRESS_OUTPUT_BYTES {
            let why = format!(
                "progress output of {} bytes is over its limit of {} bytes",
                output_len,
                abi::MAX_PROGRESS_OUTPUT_BYTES
            );
            return fail(s, abi::ERR_LIMIT, &why);
        }
        if s.handler != abi::HANDLER_STEP {
            return fail(
                s,
                abi::ERR_NOT_ALLOWED,
                "only the step handler reports progress",
            );
        }
        let (msg, output) = (bytes(msg, msg_len), bytes(output, output_len));
        if let Err(why) = log_limit::count_progress(s, msg, output) {
            return fail(s, abi::ERR_LIMIT, &why);
        }
        s.progress.push((valid_text(msg), valid_text(output)));
        0
    })
}

pub unsafe fn host_artifact_create(
    meta: *const u8,
    meta_len: i32,
    data: *const u8,
    data_len: i32,
    id_out: *mut u8,
) -> i32 {
    call(|s| {
        if let Err(code) = read_only(s) {
            return code;
        }
        let meta = match text(s, meta, meta_len) {
            Ok(m) => m.to_string(),
            Err(code) => return code,
        };
        if let Some(why) = ijson::check(meta.as_bytes()) {
            return fail(
                s,
                abi::ERR_INVALID,
                &format!("artifact_create: meta is not a JSON object of file_name, relative_path, workspace_path and uri: {}", why),
            );
        }
        let parsed = match json::parse(&meta) {
            Ok(v) if v.is_object() => v,
            _ => {
                return fail(
                    s,
                    abi::ERR_INVALID,
                    "artifact_create: meta is not a JSON object",
                )
            }
        };
        let name = parsed["file_name"].as_str().unwrap_or("");
        if (name.is_empty() && parsed["uri"].as_str().is_none())
            || name == "."
            || name == ".."
            || name.contains('/')
        {
            return fail(
                s,
                abi::ERR_BAD_PATH,
                &format!(
                    "file name {:?} is not a plain name; put directories in relative_path",
                    name
                ),
            );
        }
        if let Err(msg) =
            clean_dir(name).and_then(|_| clean_dir(parsed["relative_path"].as_str().unwrap_or("")))
        {
            return fail(s, abi::ERR_BAD_PATH, &msg);
        }
        let mut data = bytes(data, data_len).to_vec();
        if parsed["uri"].as_str().is_some()
            && (!data.is_empty() || !parsed["workspace_path"].is_null())
        {
            return fail(
                s,
                abi::ERR_INVALID,
                "a URI artifact has no bytes: give no data or workspace_path with a uri",
            );
        }
        if let Some(path) = parsed["workspace_path"].as_str() {
            if !data.is_empty() {
                return fail(
                    s,
                    abi::ERR_INVALID,
                    "data_len must be 0 with a workspace_path",
                );
            }
            let path = match check_path(s, path) {
                Ok(p) => p,
                Err(code) => return code,
            };
            match s.files.get(&path) {
                Some(d) => data = d.clone(),
                None => {
                    return fail(
                        s,
                        abi::ERR_NOT_FOUND,
                        &format!("no file {:?} in the task's workspace", path),
                    )
                }
            }
        }
        s.artifacts.push((meta, data));
        s.last_id += 1;
        if !id_out.is_null() {
            let id = fake_id(s.last_id);
            std::ptr::copy_nonoverlapping(id.as_ptr(), id_out, 36);
        }
        0
    })
}

/// The id numbered n, shaped as the host's.
pub(crate) fn fake_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{:012}", n)
}

pub unsafe fn host_last_error(buf: *mut u8, cap: i32) -> i32 {
    call(|s| copy_out(s.last_error.as_bytes(), buf, cap))
}

pub unsafe fn host_workspace_read(path: *const u8, path_len: i32, buf: *mut u8, cap: i32) -> i32 {
    call(|s| {
        let path = match text(s, path, path_len) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = match check_path(s, path) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = path.as_str();
        match s.files.get(path) {
            Some(data) => copy_out(data, buf, cap),
            None => fail(
                s,
                abi::ERR_NOT_FOUND,
                &format!("no file {:?} in the task's workspace", path),
            ),
        }
    })
}

pub unsafe fn host_workspace_write(
    path: *const u8,
    path_len: i32,
    data: *const u8,
    data_len: i32,
) -> i32 {
    call(|s| {
        if let Err(code) = read_only(s) {
            return code;
        }
        let path = match text(s, path, path_len) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = match check_path(s, path) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = path.as_str();
        if let Err(code) = check_write(s, path) {
            return code;
        }
        s.files
            .insert(path.to_string(), bytes(data, data_len).to_vec());
        0
    })
}

pub unsafe fn host_workspace_list(
    prefix: *const u8,
    prefix_len: i32,
    buf: *mut u8,
    cap: i32,
) -> i32 {
    call(|s| {
        let prefix = match text(s, prefix, prefix_len) {
            Ok(p) => p,
            Err(code) => return code,
        };
        if let Some(answer) = &s.list_answer {
            return copy_out(answer.as_bytes(), buf, cap);
        }
        let list: Vec<Value> = s
            .files
            .iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .map(|(p, d)| file_info(p, d))
            .collect();
        copy_out(Value::Array(list).to_json().as_bytes(), buf, cap)
    })
}

pub unsafe fn host_workspace_stat(path: *const u8, path_len: i32, buf: *mut u8, cap: i32) -> i32 {
    call(|s| {
        let path = match text(s, path, path_len) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = match check_path(s, path) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = path.as_str();
        if let Some(answer) = &s.stat_answer {
            return copy_out(answer.as_bytes(), buf, cap);
        }
        let info = match s.files.get(path) {
            Some(data) => file_info(path, data).to_json(),
            None => {
                return fail(
                    s,
                    abi::ERR_NOT_FOUND,
                    &format!("no file {:?} in the task's workspace", path),
                )
            }
        };
        copy_out(info.as_bytes(), buf, cap)
    })
}

pub unsafe fn host_workspace_delete(path: *const u8, path_len: i32) -> i32 {
    call(|s| {
        if let Err(code) = read_only(s) {
            return code;
        }
        let path = match text(s, path, path_len) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = match check_path(s, path) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let path = path.as_str();
        match s.files.remove(path) {
            Some(_) => 0,
            None => fail(
                s,
                abi::ERR_NOT_FOUND,
                &format!("no file {:?} in the task's workspace", path),
            ),
        }
    })
}

pub unsafe fn host_download_write(data: *const u8, data_len: i32) -> i32 {
    call(|s| {
        if !s.download {
            return fail(
                s,
                abi::ERR_NOT_ALLOWED,
                "only the download handler writes a download",
            );
        }
        if let Some((code, msg)) = s.download_fail.clone() {
            return fail(s, code, &msg);
        }
        s.downloaded.extend_from_slice(bytes(data, data_len));
        0
    })
}

pub unsafe fn host_config(buf: *mut u8, cap: i32) -> i32 {
    call(|s| copy_out(s.config.as_bytes(), buf, cap))
}

/// Runs `f` on the call in progress with its borrow released while `f`
/// runs the test's server: `f` gets what it needs first through `take`.
fn outbound<T>(
    take: impl FnOnce(&mut State) -> Result<T, i32>,
    f: impl FnOnce(T) -> Result<i32, (i32, String)>,
) -> i32 {
    let got = STATE.with(|s| match s.borrow_mut().as_mut() {
        Some(state) => Some(take(state)),
        None => None,
    });
    let got = match got {
        None => return abi::ERR_NOT_ALLOWED,
        Some(Err(code)) => return code,
        Some(Ok(v)) => v,
    };
    match f(got) {
        Ok(n) => n,
        Err((code, msg)) => with(|s| fail(s, code, &msg)),
    }
}

/// Counts one more outbound request of the call (a redirect followed is
/// one), or refuses it past the call's limit, as the host does.
fn count_request(max: usize) -> Result<(), (i32, String)> {
    with(|s| {
        if s.http_requests >= max {
            return Err((
                abi::ERR_LIMIT,
                format!("a handler call may make at most {} outbound requests", max),
            ));
        }
        s.http_requests += 1;
        Ok(())
    })
}

pub unsafe fn host_http_request(
    req: *const u8,
    req_len: i32,
    body: *const u8,
    body_len: i32,
) -> i32 {
    let req = bytes(req, req_len).to_vec();
    let body = bytes(body, body_len).to_vec();
    outbound(
        |s| {
            s.http_response = None;
            // As the host: the message is bounded before it is read.
            if req.len() > abi::MAX_HTTP_REQUEST_META_BYTES {
                return Err(fail(
                    s,
                    abi::ERR_INVALID,
                    &format!(
                        "the request message of {} bytes is over its limit of {} bytes",
                        req.len(),
                        abi::MAX_HTTP_REQUEST_META_BYTES
                    ),
                ));
            }
            Ok(s.http.clone())
        },
        |setup| {
            let message = json::parse(&String::from_utf8_lossy(&req)).map_err(|_| {
                (
                    abi::ERR_INVALID,
                    "the request message is not valid JSON".to_string(),
                )
            })?;
            let (meta, body) = http::send(setup.as_deref(), &message, body, &mut count_request)?;
            with(|s| s.http_response = Some((meta, body)));
            Ok(0)
        },
    )
}

pub unsafe fn host_http_response(buf: *mut u8, cap: i32) -> i32 {
    call(|s| match &s.http_response {
        Some((meta, _)) => copy_out(meta, buf, cap),
        None => fail(
            s,
            abi::ERR_NOT_FOUND,
            "no response: the last request failed, or none was made",
        ),
    })
}

pub unsafe fn host_http_response_body(buf: *mut u8, cap: i32) -> i32 {
    call(|s| match &s.http_response {
        Some((_, body)) => copy_out(body, buf, cap),
        None => fail(
            s,
            abi::ERR_NOT_FOUND,
            "no response: the last request failed, or none was made",
        ),
    })
}

pub unsafe fn host_artifact_fetch(
    id: *const u8,
    id_len: i32,
    path: *const u8,
    path_len: i32,
) -> i32 {
    let id = String::from_utf8_lossy(bytes(id, id_len)).into_owned();
    let path = String::from_utf8_lossy(bytes(path, path_len)).into_owned();
    outbound(
        |s| {
            read_only(s)?;
            let path = check_path(s, &path)?;
            let input = json::parse(&String::from_utf8_lossy(&s.input)).unwrap_or(Value::Null);
            let mut artifacts: Vec<Value> = input["task"]["artifacts"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            artifacts.push(input["artifact"].clone());
            let uri = match artifacts
                .iter()
                .find(|a| a["artifact_id"].as_str() == Some(id.as_str()))
            {
                None => {
                    return Err(fail(
                        s,
                        abi::ERR_NOT_FOUND,
                        &format!("the task has no artifact {:?}", id),
                    ))
                }
                Some(a) => a["uri"].as_str().unwrap_or("").to_string(),
            };
            if !uri.starts_with("http://") && !uri.starts_with("https://") {
                return Err(fail(
                    s,
                    abi::ERR_NOT_ALLOWED,
                    "only http and https URI artifacts are fetched",
                ));
            }
            Ok((s.http.clone(), uri, path))
        },
        |(setup, uri, path)| {
            let message = Value::object().with("url", uri);
            let (meta, body) = http::send(setup.as_deref(), &message, Vec::new(), &mut count_request)?;
            let status = json::parse(&String::from_utf8_lossy(&meta))
                .ok()
                .and_then(|m| m["status"].as_u64())
                .unwrap_or(0);
            if !(200..300).contains(&status) {
                return Err((abi::ERR_IO, format!("the server answered {}", status)));
            }
            let n = body.len() as i32;
            with(|s| match check_write(s, &path) {
                Ok(()) => {
                    s.files.insert(path, body);
                    Ok(n)
                }
                Err(code) => Err((code, s.last_error.clone())),
            })
        },
    )
}
