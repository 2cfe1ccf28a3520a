//! The task's workspace: a directory of files the plugin keeps between
//! calls (each call runs in a fresh instance, so this is where state lives).
//! Uploaded artifacts are there too, at [`Artifact::path`](crate::Artifact::path).
//!
//! Paths are relative and `/`-separated; the host cleans them (`./a//b` is
//! `a/b`) and refuses absolute paths, `..`, backslashes and control
//! characters with [`ErrorCode::BadPath`](crate::ErrorCode::BadPath).
//!
//! ```no_run
//! use agentrt::{workspace, Error};
//!
//! fn count_visits() -> Result<u64, Error> {
//!     let n = match workspace::read_to_string("state/visits") {
//!         Ok(text) => text.trim().parse().unwrap_or(0),
//!         Err(e) if e.is_not_found() => 0,
//!         Err(e) => return Err(e),
//!     };
//!     workspace::write("state/visits", (n + 1).to_string().as_bytes())?;
//!     Ok(n + 1)
//! }
//! ```

use crate::abi;
use crate::error::Error;
use crate::host;
use crate::json::Value;

/// A workspace file's description.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub path: String,
    /// The size in bytes.
    pub size: u64,
    /// The last modification, in Unix milliseconds.
    pub mod_time: i64,
}

impl FileInfo {
    fn from_message(v: &Value) -> FileInfo {
        FileInfo {
            path: v["path"].as_str().unwrap_or("").to_string(),
            size: v["size"].as_u64().unwrap_or(0),
            mod_time: v["mod_time"].as_i64().unwrap_or(0),
        }
    }
}

/// Reads a whole file. A missing file is an error with
/// [`is_not_found`](Error::is_not_found).
pub fn read(path: &str) -> Result<Vec<u8>, Error> {
    host::workspace_read(path)
}

/// Reads a whole file as UTF-8 text; invalid UTF-8 is an error.
pub fn read_to_string(path: &str) -> Result<String, Error> {
    String::from_utf8(read(path)?)
        .map_err(|_| Error::new(format!("workspace file {} is not UTF-8 text", path)))
}

/// Creates or replaces a file, making its directories.
pub fn write(path: &str, data: &[u8]) -> Result<(), Error> {
    host::workspace_write(path, data)
}

/// Lists every file whose path starts with `prefix` (a string prefix, not a
/// directory: `"out"` matches `out/a` and `outline.md`; `""` lists all), in
/// path order.
pub fn list(prefix: &str) -> Result<Vec<FileInfo>, Error> {
    let v = host::decode(abi::FUNC_WORKSPACE_LIST, &host::workspace_list(prefix)?)?;
    match v {
        Value::Array(items) => Ok(items.iter().map(FileInfo::from_message).collect()),
        _ => Err(Error::new(
            "workspace_list: the host's answer is not a JSON array",
        )),
    }
}

/// Describes one file.
pub fn stat(path: &str) -> Result<FileInfo, Error> {
    let v = host::decode(abi::FUNC_WORKSPACE_STAT, &host::workspace_stat(path)?)?;
    Ok(FileInfo::from_message(&v))
}

/// Removes a file.
pub fn delete(path: &str) -> Result<(), Error> {
    host::workspace_delete(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake;
    use crate::ErrorCode;

    #[test]
    fn writes_reads_lists_and_deletes() {
        fake::begin("{}");
        write("notes/a.txt", b"alpha").unwrap();
        write("notes/b.txt", "é".repeat(1000).as_bytes()).unwrap();
        write("other", b"").unwrap();
        assert_eq!(read("notes/a.txt").unwrap(), b"alpha");
        assert_eq!(
            read_to_string("notes/b.txt").unwrap(),
            "é".repeat(1000),
            "a file larger than the first buffer"
        );
        assert_eq!(read("other").unwrap(), b"");
        let names: Vec<String> = list("notes/")
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(names, ["notes/a.txt", "notes/b.txt"]);
        assert_eq!(list("").unwrap().len(), 3);
        assert_eq!(
            stat("notes/b.txt").unwrap(),
            FileInfo {
                path: "notes/b.txt".into(),
                size: 2000,
                mod_time: 1_700_000_000_000
            }
        );
        delete("notes/a.txt").unwrap();
        assert!(read("notes/a.txt").unwrap_err().is_not_found());
    }

    #[test]
    fn reports_host_errors() {
        fake::begin("{}");
        let e = read("missing.txt").unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::NotFound));
        assert_eq!(e.raw_code(), Some(-3));
        assert_eq!(
            e.message(),
            "workspace_read: no file \"missing.txt\" in the task's workspace"
        );
        let e = write("../escape", b"x").unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::BadPath));
        assert_eq!(
            e.to_string(),
            "workspace_write: path \"../escape\" leaves the task's workspace (\"..\")"
        );
        assert_eq!(
            delete("nope").unwrap_err().code(),
            Some(ErrorCode::NotFound)
        );
        assert_eq!(stat("nope").unwrap_err().code(), Some(ErrorCode::NotFound));
        write("bin", &[0xff, 0xfe]).unwrap();
        assert_eq!(
            read_to_string("bin").unwrap_err().message(),
            "workspace file bin is not UTF-8 text"
        );
    }

    #[test]
    fn is_not_allowed_outside_a_call() {
        // A thread of its own has no fake call in progress, like code running
        // outside agentrt.
        std::thread::spawn(|| {
            let e = read("a").unwrap_err();
            assert_eq!(e.code(), Some(ErrorCode::NotAllowed));
            assert_eq!(e.message(), "workspace_read: not allowed");
        })
        .join()
        .unwrap();
    }
}
