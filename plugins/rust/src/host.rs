//! The host's functions (plugins/ABI.md, "Host functions"), wrapped in safe
//! Rust. This is the only module with `unsafe` besides the fake host.
//!
//! On wasm32 they are the `agentrt_v1` imports. Each import has a Rust name
//! of its own and the ABI name in `link_name`: declared under its ABI name,
//! `log` would silently bind to libm's `log(f64)` instead of the host's. The
//! linker keeps only the imports a plugin calls, so a plugin that never uses
//! the workspace does not import the workspace functions (and loads on a host
//! without them).
//!
//! Elsewhere (`cargo test` on the build machine) they are an in-memory fake
//! host, `fake`, with the same signatures.

use crate::abi;
use crate::error::Error;
use crate::json::{self, Value};

#[cfg(target_arch = "wasm32")]
mod raw {
    #[link(wasm_import_module = "agentrt_v1")]
    extern "C" {
        #[link_name = "input"]
        pub fn host_input(buf: *mut u8, cap: i32) -> i32;
        #[link_name = "set_result"]
        pub fn host_set_result(ptr: *const u8, len: i32) -> i32;
        #[link_name = "log"]
        pub fn host_log(level: i32, ptr: *const u8, len: i32) -> i32;
        #[link_name = "artifact_create"]
        pub fn host_artifact_create(
            meta: *const u8,
            meta_len: i32,
            data: *const u8,
            data_len: i32,
            id_out: *mut u8,
        ) -> i32;
        #[link_name = "last_error"]
        pub fn host_last_error(buf: *mut u8, cap: i32) -> i32;
        #[link_name = "workspace_read"]
        pub fn host_workspace_read(path: *const u8, path_len: i32, buf: *mut u8, cap: i32) -> i32;
        #[link_name = "workspace_write"]
        pub fn host_workspace_write(
            path: *const u8,
            path_len: i32,
            data: *const u8,
            data_len: i32,
        ) -> i32;
        #[link_name = "workspace_list"]
        pub fn host_workspace_list(
            prefix: *const u8,
            prefix_len: i32,
            buf: *mut u8,
            cap: i32,
        ) -> i32;
        #[link_name = "workspace_stat"]
        pub fn host_workspace_stat(path: *const u8, path_len: i32, buf: *mut u8, cap: i32) -> i32;
        #[link_name = "workspace_delete"]
        pub fn host_workspace_delete(path: *const u8, path_len: i32) -> i32;
        #[link_name = "config"]
        pub fn host_config(buf: *mut u8, cap: i32) -> i32;
        #[link_name = "download_write"]
        pub fn host_download_write(data: *const u8, data_len: i32) -> i32;
        #[link_name = "http_request"]
        pub fn host_http_request(
            req: *const u8,
            req_len: i32,
            body: *const u8,
            body_len: i32,
        ) -> i32;
        #[link_name = "http_response"]
        pub fn host_http_response(buf: *mut u8, cap: i32) -> i32;
        #[link_name = "http_response_body"]
        pub fn host_http_response_body(buf: *mut u8, cap: i32) -> i32;
        #[link_name = "artifact_fetch"]
        pub fn host_artifact_fetch(
            id: *const u8,
            id_len: i32,
            path: *const u8,
            path_len: i32,
        ) -> i32;
        #[link_name = "progress"]
        pub fn host_progress(
            msg: *const u8,
            msg_len: i32,
            output: *const u8,
            output_len: i32,
        ) -> i32;
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod fake;
#[cfg(not(target_arch = "wasm32"))]
use fake as raw;

/// The length of a buffer as the host takes it.
fn len32(func: &str, n: usize) -> Result<i32, Error> {
    if n > i32::MAX as usize {
        return Err(Error::from_host(
            abi::ERR_LIMIT,
            format!("{}: {} bytes is over the ABI's 2 GiB limit", func, n),
        ));
    }
    Ok(n as i32)
}

/// Calls a host function that follows the sized-read convention: it always
/// returns the data's length and copies the data only when the buffer is big
/// enough. The data may change between calls (a file being written), so it
/// tries a few times. An error is the host's negative code, or `None` when
/// the size kept changing.
fn sized_read_code(mut call: impl FnMut(*mut u8, i32) -> i32) -> Result<Vec<u8>, Option<i32>> {
    let mut cap: usize = 1024;
    for _ in 0..3 {
        let mut buf: Vec<u8> = Vec::with_capacity(cap);
        let n = call(buf.as_mut_ptr(), cap as i32);
        if n < 0 {
            return Err(Some(n));
        }
        let n = n as usize;
        if n <= cap {
            // SAFETY: the host copied exactly n <= cap bytes into buf.
            unsafe { buf.set_len(n) };
            return Ok(buf);
        }
        cap = n;
    }
    Err(None)
}

/// [`sized_read_code`], with a failure turned into an [`Error`].
fn sized_read(func: &str, call: impl FnMut(*mut u8, i32) -> i32) -> Result<Vec<u8>, Error> {
    sized_read_code(call).map_err(|code| match code {
        Some(code) => host_error(func, code),
        None => Error::from_host(
            abi::ERR_IO,
            format!("{}: the data kept changing size", func),
        ),
    })
}

/// The error of a failed call of `func`, with the host's message from
/// `last_error`: `workspace_read: no file "a.txt" in the task's workspace`.
pub(crate) fn host_error(func: &str, code: i32) -> Error {
    // SAFETY: the host writes at most cap bytes at buf.
    let msg =
        sized_read_code(|buf, cap| unsafe { raw::host_last_error(buf, cap) }).unwrap_or_default();
    let msg = String::from_utf8_lossy(&msg);
    // Some host messages already name the function.
    if msg.starts_with(func) && msg[func.len()..].starts_with(": ") {
        return Error::from_host(code, msg.into_owned());
    }
    let mut message = String::with_capacity(func.len() + 2 + msg.len());
    message.push_str(func);
    message.push_str(": ");
    if msg.is_empty() {
        match crate::ErrorCode::from_i32(code) {
            Some(c) => message.push_str(c.name()),
            None => message.push_str(&format!("unknown error {}", code)),
        }
    } else {
        message.push_str(&msg);
    }
    Error::from_host(code, message)
}

/// Turns a host function's status into a result.
fn status(func: &str, code: i32) -> Result<(), Error> {
    if code < 0 {
        Err(host_error(func, code))
    } else {
        Ok(())
    }
}

pub(crate) fn input() -> Result<Vec<u8>, Error> {
    // SAFETY: the host writes at most cap bytes at buf.
    sized_read(abi::FUNC_INPUT, |buf, cap| unsafe {
        raw::host_input(buf, cap)
    })
}

pub(crate) fn set_result(result: &[u8]) -> Result<(), Error> {
    let len = len32(abi::FUNC_SET_RESULT, result.len())?;
    // SAFETY: the host only reads the len bytes at ptr.
    status(abi::FUNC_SET_RESULT, unsafe {
        raw::host_set_result(result.as_ptr(), len)
    })
}

pub(crate) fn log(level: i32, message: &str) -> Result<(), Error> {
    let len = len32(abi::FUNC_LOG, message.len())?;
    // SAFETY: the host only reads the len bytes at ptr.
    status(abi::FUNC_LOG, unsafe {
        raw::host_log(level, message.as_ptr(), len)
    })
}

/// Registers an artifact and returns its 36-character id.
pub(crate) fn artifact_create(meta: &[u8], data: &[u8]) -> Result<String, Error> {
    let meta_len = len32(abi::FUNC_ARTIFACT_CREATE, meta.len())?;
    let data_len = len32(abi::FUNC_ARTIFACT_CREATE, data.len())?;
    let mut id = [0u8; 36];
    // SAFETY: the host reads the two ranges and writes at most 36 bytes at id.
    let code = unsafe {
        raw::host_artifact_create(
            meta.as_ptr(),
            meta_len,
            data.as_ptr(),
            data_len,
            id.as_mut_ptr(),
        )
    };
    status(abi::FUNC_ARTIFACT_CREATE, code)?;
    Ok(String::from_utf8_lossy(&id).into_owned())
}

pub(crate) fn workspace_read(path: &str) -> Result<Vec<u8>, Error> {
    let path_len = len32(abi::FUNC_WORKSPACE_READ, path.len())?;
    // SAFETY: the host reads path and writes at most cap bytes at buf.
    sized_read(abi::FUNC_WORKSPACE_READ, |buf, cap| unsafe {
        raw::host_workspace_read(path.as_ptr(), path_len, buf, cap)
    })
}

pub(crate) fn workspace_write(path: &str, data: &[u8]) -> Result<(), Error> {
    let path_len = len32(abi::FUNC_WORKSPACE_WRITE, path.len())?;
    let data_len = len32(abi::FUNC_WORKSPACE_WRITE, data.len())?;
    // SAFETY: the host only reads the two ranges.
    status(abi::FUNC_WORKSPACE_WRITE, unsafe {
        raw::host_workspace_write(path.as_ptr(), path_len, data.as_ptr(), data_len)
    })
}

pub(crate) fn workspace_list(prefix: &str) -> Result<Vec<u8>, Error> {
    let prefix_len = len32(abi::FUNC_WORKSPACE_LIST, prefix.len())?;
    // SAFETY: the host reads prefix and writes at most cap bytes at buf.
    sized_read(abi::FUNC_WORKSPACE_LIST, |buf, cap| unsafe {
        raw::host_workspace_list(prefix.as_ptr(), prefix_len, buf, cap)
    })
}

pub(crate) fn workspace_stat(path: &str) -> Result<Vec<u8>, Error> {
    let path_len = len32(abi::FUNC_WORKSPACE_STAT, path.len())?;
    // SAFETY: the host reads path and writes at most cap bytes at buf.
    sized_read(abi::FUNC_WORKSPACE_STAT, |buf, cap| unsafe {
        raw::host_workspace_stat(path.as_ptr(), path_len, buf, cap)
    })
}

pub(crate) fn workspace_delete(path: &str) -> Result<(), Error> {
    let path_len = len32(abi::FUNC_WORKSPACE_DELETE, path.len())?;
    // SAFETY: the host only reads path.
    status(abi::FUNC_WORKSPACE_DELETE, unsafe {
        raw::host_workspace_delete(path.as_ptr(), path_len)
    })
}

pub(crate) fn download_write(data: &[u8]) -> Result<(), Error> {
    let len = len32(abi::FUNC_DOWNLOAD_WRITE, data.len())?;
    // SAFETY: the host only reads the len bytes at data.
    status(abi::FUNC_DOWNLOAD_WRITE, unsafe {
        raw::host_download_write(data.as_ptr(), len)
    })
}

pub(crate) fn config() -> Result<Vec<u8>, Error> {
    // SAFETY: the host writes at most cap bytes at buf.
    sized_read(abi::FUNC_CONFIG, |buf, cap| unsafe {
        raw::host_config(buf, cap)
    })
}

/// Sends an outbound request (its message, and its body) through the host.
pub(crate) fn http_request(req: &[u8], body: &[u8]) -> Result<(), Error> {
    let req_len = len32(abi::FUNC_HTTP_REQUEST, req.len())?;
    let body_len = len32(abi::FUNC_HTTP_REQUEST, body.len())?;
    // SAFETY: the host only reads the two ranges.
    status(abi::FUNC_HTTP_REQUEST, unsafe {
        raw::host_http_request(req.as_ptr(), req_len, body.as_ptr(), body_len)
    })
}

/// The last response's message.
pub(crate) fn http_response() -> Result<Vec<u8>, Error> {
    // SAFETY: the host writes at most cap bytes at buf.
    sized_read(abi::FUNC_HTTP_RESPONSE, |buf, cap| unsafe {
        raw::host_http_response(buf, cap)
    })
}

/// The last response's body, of `size` bytes as its message said: read in
/// one call into a buffer of that size.
pub(crate) fn http_response_body(size: usize) -> Result<Vec<u8>, Error> {
    let func = abi::FUNC_HTTP_RESPONSE_BODY;
    let cap = len32(func, size)?;
    let mut buf: Vec<u8> = Vec::with_capacity(size);
    // SAFETY: the host writes at most cap bytes at buf.
    let n = unsafe { raw::host_http_response_body(buf.as_mut_ptr(), cap) };
    if n < 0 {
        return Err(host_error(func, n));
    }
    if n as usize <= size {
        // SAFETY: the host copied exactly n <= size bytes into buf.
        unsafe { buf.set_len(n as usize) };
        return Ok(buf);
    }
    // SAFETY: as above.
    sized_read(func, |buf, cap| unsafe {
        raw::host_http_response_body(buf, cap)
    })
}

/// Fetches a URI artifact into a workspace file; returns its size.
pub(crate) fn artifact_fetch(id: &str, path: &str) -> Result<u64, Error> {
    let id_len = len32(abi::FUNC_ARTIFACT_FETCH, id.len())?;
    let path_len = len32(abi::FUNC_ARTIFACT_FETCH, path.len())?;
    // SAFETY: the host only reads the two ranges.
    let n = unsafe { raw::host_artifact_fetch(id.as_ptr(), id_len, path.as_ptr(), path_len) };
    status(abi::FUNC_ARTIFACT_FETCH, n)?;
    Ok(n as u64)
}

/// Reports the step handler's progress: a message, and its output so far
/// (empty for none).
pub(crate) fn progress(message: &str, output: &str) -> Result<(), Error> {
    let msg_len = len32(abi::FUNC_PROGRESS, message.len())?;
    let output_len = len32(abi::FUNC_PROGRESS, output.len())?;
    // SAFETY: the host only reads the two ranges.
    status(abi::FUNC_PROGRESS, unsafe {
        raw::host_progress(message.as_ptr(), msg_len, output.as_ptr(), output_len)
    })
}

/// Decodes a host function's JSON answer.
pub(crate) fn decode(func: &str, answer: &[u8]) -> Result<Value, Error> {
    let text = String::from_utf8_lossy(answer);
    json::parse(&text)
        .map_err(|e| Error::new(format!("{}: the host's answer is not valid: {}", func, e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_read_retries_with_the_reported_size() {
        let data = vec![7u8; 3000];
        let mut caps = Vec::new();
        let got = sized_read("t", |buf, cap| {
            caps.push(cap);
            if data.len() <= cap as usize {
                // SAFETY: buf has room for cap bytes.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
            }
            data.len() as i32
        })
        .unwrap();
        assert_eq!(got, data);
        assert_eq!(caps, [1024, 3000]);
    }

    #[test]
    fn sized_read_gives_up_on_data_that_keeps_growing() {
        let mut n = 2000;
        let e = sized_read("t", |_, _| {
            n += 1;
            n
        })
        .unwrap_err();
        assert_eq!(e.code(), Some(crate::ErrorCode::Io));
        assert_eq!(e.message(), "t: the data kept changing size");
    }
}
