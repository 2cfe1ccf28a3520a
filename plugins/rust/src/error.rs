use std::fmt;

use crate::abi;

/// A handler's failure, or a host function's.
///
/// A handler that returns `Err(e)` fails its call: the host records
/// `e.message()` as the call's error (the client gets a 502). Build one from
/// a message with `"...".into()` or [`Error::new`]; the kit's functions
/// return one with the host's [`ErrorCode`] and explanation. An artifact
/// handler refuses an upload with [`reject`](crate::reject) instead, or
/// keeps another artifact in place of a URI upload with
/// [`replace_with_uri`](crate::replace_with_uri) or
/// [`replace_with_file`](crate::replace_with_file); a download handler
/// leaves the download to agentrt with
/// [`default_download`](crate::default_download).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    message: String,
    code: Option<i32>,
    kind: Kind,
}

/// What an error that is not a failure asks of the host.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Failure,
    Rejection,
    ReplaceWithUri(String),
    ReplaceWithFile(String),
    DefaultDownload,
}

impl Error {
    /// An error with a message of your own.
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            code: None,
            kind: Kind::Failure,
        }
    }

    /// The error of a failed host call: `code` is the host's negative error
    /// code, `message` says what failed (the kit prefixes the function).
    pub fn from_host(code: i32, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            code: Some(code),
            kind: Kind::Failure,
        }
    }

    fn of_kind(message: String, kind: Kind) -> Error {
        Error {
            message,
            code: None,
            kind,
        }
    }

    /// What went wrong; for a rejection, the reason the client sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The host's error code, for an error from a host function with a code
    /// this kit knows.
    pub fn code(&self) -> Option<ErrorCode> {
        self.code.and_then(ErrorCode::from_i32)
    }

    /// The host's raw error code (`-1` ... `-7`, or a newer one), for an
    /// error from a host function.
    pub fn raw_code(&self) -> Option<i32> {
        self.code
    }

    /// Whether a host function failed because there is no such file.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(ErrorCode::NotFound)
    }

    /// Whether this error is a [`reject`](crate::reject)ion.
    pub fn is_rejection(&self) -> bool {
        self.kind == Kind::Rejection
    }

    /// Whether this error is [`default_download`](crate::default_download).
    pub fn is_default_download(&self) -> bool {
        self.kind == Kind::DefaultDownload
    }

    /// The replacement this error asks for, as `(uri, workspace_path)`,
    /// one of them empty.
    pub(crate) fn replacement(&self) -> Option<(&str, &str)> {
        match &self.kind {
            Kind::ReplaceWithUri(uri) => Some((uri, "")),
            Kind::ReplaceWithFile(path) => Some(("", path)),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == Kind::Rejection {
            f.write_str("upload rejected: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::new(message)
    }
}

impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::new(message)
    }
}

impl From<crate::json::ParseError> for Error {
    fn from(e: crate::json::ParseError) -> Error {
        Error::new(e.to_string())
    }
}

// `?` on the standard library's errors: each becomes an Error with its
// message. (A blanket `impl<E: std::error::Error> From<E>` would clash with
// `From<&str>` and `From<String>`, which Rust's coherence rules do not let
// stand beside it.) For any other error, use [`Context`]: `.context("...")?`.
macro_rules! from_std_errors {
    ($($t:ty),* $(,)?) => {
        $(
            impl From<$t> for Error {
                fn from(e: $t) -> Error {
                    Error::new(e.to_string())
                }
            }
        )*
    };
}

from_std_errors!(
    std::io::Error,
    std::fmt::Error,
    std::num::ParseIntError,
    std::num::ParseFloatError,
    std::num::TryFromIntError,
    std::str::ParseBoolError,
    std::str::Utf8Error,
    std::string::FromUtf8Error,
    std::char::ParseCharError,
    std::array::TryFromSliceError,
    std::time::SystemTimeError,
    Box<dyn std::error::Error>,
    Box<dyn std::error::Error + Send + Sync>,
);

/// Adds what was being done to any error, turning it into an [`Error`], so
/// that `?` works on results of any error type:
///
/// ```
/// use agentrt::{Context, Error};
///
/// fn limit(text: &str) -> Result<u32, Error> {
///     let n: u32 = text.trim().parse().context("the limit")?;
///     Ok(n)
/// }
/// assert_eq!(limit("ten").unwrap_err().message(), "the limit: invalid digit found in string");
/// ```
pub trait Context<T> {
    /// On error, an [`Error`] whose message is `what: ` and the error's.
    fn context(self, what: &str) -> Result<T, Error>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, Error> {
        self.map_err(|e| {
            let message = e.to_string();
            if what.is_empty() {
                Error::new(message)
            } else {
                Error::new(format!("{}: {}", what, message))
            }
        })
    }
}

impl<T> Context<T> for Option<T> {
    /// On `None`, an [`Error`] whose message is `what` and ` is missing`.
    fn context(self, what: &str) -> Result<T, Error> {
        self.ok_or_else(|| Error::new(format!("{} is missing", what)))
    }
}

/// Returns the error with which an artifact handler refuses an upload: the
/// client gets a 422 with `reason`, and nothing is kept.
///
/// ```
/// use agentrt::{reject, Artifact, Error, Task};
///
/// fn on_artifact(_task: &Task, artifact: &Artifact) -> Result<(), Error> {
///     if !artifact.file_name.ends_with(".txt") {
///         return Err(reject("only .txt files, please"));
///     }
///     Ok(())
/// }
/// # assert!(on_artifact(&Task::default(), &Artifact::default()).unwrap_err().is_rejection());
/// ```
pub fn reject(reason: impl Into<String>) -> Error {
    Error::of_kind(reason.into(), Kind::Rejection)
}

/// Returns the error with which an artifact handler keeps another URI in
/// place of the URI upload it was given (the URI made canonical, say): of a
/// scheme the agent accepts.
///
/// ```
/// use agentrt::{replace_with_uri, Artifact, Error, Task};
///
/// fn on_artifact(_task: &Task, artifact: &Artifact) -> Result<(), Error> {
///     if let Some(rest) = artifact.uri.strip_prefix("http://") {
///         return Err(replace_with_uri(format!("https://{}", rest)));
///     }
///     Ok(())
/// }
/// # fn main() {}
/// ```
pub fn replace_with_uri(uri: impl Into<String>) -> Error {
    let uri = uri.into();
    Error::of_kind(
        format!("upload replaced with {}", uri),
        Kind::ReplaceWithUri(uri),
    )
}

/// Returns the error with which an artifact handler makes the URI upload it
/// was given the workspace file at `path`: its bytes (a snapshot), named by
/// its path.
pub fn replace_with_file(path: impl Into<String>) -> Error {
    let path = path.into();
    Error::of_kind(
        format!("upload replaced with the workspace file {}", path),
        Kind::ReplaceWithFile(path),
    )
}

/// Returns the error with which a download handler leaves the download to
/// agentrt, as if it had no download handler: the stored bytes, or a
/// redirect to an http or https URI. It must not have written anything.
pub fn default_download() -> Error {
    Error::of_kind(
        "the download is left to agentrt".into(),
        Kind::DefaultDownload,
    )
}

/// The host's error codes (plugins/ABI.md, "Error codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A malformed argument: bad JSON, bad UTF-8, unknown log level.
    Invalid,
    /// A pointer + length outside the plugin's memory.
    Fault,
    /// No such file.
    NotFound,
    /// The path was refused (absolute, `..`, control characters, too long).
    BadPath,
    /// A size, count or quota limit was reached.
    Limit,
    /// Not available here (e.g. during initialization, or on this host).
    NotAllowed,
    /// The host failed; the message says why.
    Io,
}

impl ErrorCode {
    /// The code as the host returns it (`-1` ... `-7`).
    pub fn as_i32(self) -> i32 {
        match self {
            ErrorCode::Invalid => abi::ERR_INVALID,
            ErrorCode::Fault => abi::ERR_FAULT,
            ErrorCode::NotFound => abi::ERR_NOT_FOUND,
            ErrorCode::BadPath => abi::ERR_BAD_PATH,
            ErrorCode::Limit => abi::ERR_LIMIT,
            ErrorCode::NotAllowed => abi::ERR_NOT_ALLOWED,
            ErrorCode::Io => abi::ERR_IO,
        }
    }

    /// The code for a host function's negative result; `None` for one this
    /// kit does not know.
    pub fn from_i32(code: i32) -> Option<ErrorCode> {
        Some(match code {
            abi::ERR_INVALID => ErrorCode::Invalid,
            abi::ERR_FAULT => ErrorCode::Fault,
            abi::ERR_NOT_FOUND => ErrorCode::NotFound,
            abi::ERR_BAD_PATH => ErrorCode::BadPath,
            abi::ERR_LIMIT => ErrorCode::Limit,
            abi::ERR_NOT_ALLOWED => ErrorCode::NotAllowed,
            abi::ERR_IO => ErrorCode::Io,
            _ => return None,
        })
    }

    /// A short name for messages ("not found", ...), as the Go kit's.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Invalid => "invalid argument",
            ErrorCode::Fault => "bad pointer",
            ErrorCode::NotFound => "not found",
            ErrorCode::BadPath => "bad path",
            ErrorCode::Limit => "limit reached",
            ErrorCode::NotAllowed => "not allowed",
            ErrorCode::Io => "host I/O error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
