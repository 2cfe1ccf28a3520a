//! The ABI's names and numbers (plugins/ABI.md), mirrored by hand from the
//! Go package `plugins/abi`. Plugin authors rarely need them: the kit and
//! [`export_agent!`](crate::export_agent) use them for you.
//!
//! A Go test (`plugins/abi/rustabi_test.go`) holds each constant here to the
//! Go constant of the same name, and fails on one that is on one side only;
//! the tests below hold the kit's imports and exports to these names.

/// The ABI version this kit implements; `agentrt_abi_version` returns it.
pub const VERSION: i32 = 1;

/// The module the host's functions are imported from.
pub const IMPORT_MODULE: &str = "agentrt_v1";

/// Exports a plugin may define; every handler export is `() -> i32`.
pub const VERSION_EXPORT: &str = "agentrt_abi_version";
pub const STEP_EXPORT: &str = "agentrt_on_step";
pub const TASK_EXPORT: &str = "agentrt_on_task";
pub const ARTIFACT_EXPORT: &str = "agentrt_on_artifact";
pub const DOWNLOAD_EXPORT: &str = "agentrt_on_download";
pub const HANDLERS_EXPORT: &str = "agentrt_handlers";
/// The reactor constructor; the kit's plugins do not need one.
pub const INITIALIZE_EXPORT: &str = "_initialize";

/// Bits of `agentrt_handlers`' result: the handlers the plugin defines.
pub const HANDLER_BIT_TASK: i32 = 1 << 0;
pub const HANDLER_BIT_STEP: i32 = 1 << 1;
pub const HANDLER_BIT_ARTIFACT: i32 = 1 << 2;
pub const HANDLER_BIT_DOWNLOAD: i32 = 1 << 3;

/// The host's functions, in [`IMPORT_MODULE`].
pub const FUNC_INPUT: &str = "input";
pub const FUNC_SET_RESULT: &str = "set_result";
pub const FUNC_LOG: &str = "log";
pub const FUNC_ARTIFACT_CREATE: &str = "artifact_create";
pub const FUNC_LAST_ERROR: &str = "last_error";
pub const FUNC_WORKSPACE_READ: &str = "workspace_read";
pub const FUNC_WORKSPACE_WRITE: &str = "workspace_write";
pub const FUNC_WORKSPACE_LIST: &str = "workspace_list";
pub const FUNC_WORKSPACE_STAT: &str = "workspace_stat";
pub const FUNC_WORKSPACE_DELETE: &str = "workspace_delete";
pub const FUNC_CONFIG: &str = "config";
pub const FUNC_DOWNLOAD_WRITE: &str = "download_write";
/// Outbound HTTP (plugins/ABI.md, "Outbound HTTP"): see [`http`](crate::http).
pub const FUNC_HTTP_REQUEST: &str = "http_request";
pub const FUNC_HTTP_RESPONSE: &str = "http_response";
pub const FUNC_HTTP_RESPONSE_BODY: &str = "http_response_body";
pub const FUNC_ARTIFACT_FETCH: &str = "artifact_fetch";
/// A step handler's progress report: see [`progress`](crate::progress()).
pub const FUNC_PROGRESS: &str = "progress";

/// Error codes returned by host functions (see [`ErrorCode`](crate::ErrorCode)).
pub const ERR_INVALID: i32 = -1;
pub const ERR_FAULT: i32 = -2;
pub const ERR_NOT_FOUND: i32 = -3;
pub const ERR_BAD_PATH: i32 = -4;
pub const ERR_LIMIT: i32 = -5;
pub const ERR_NOT_ALLOWED: i32 = -6;
pub const ERR_IO: i32 = -7;

/// Log levels of the host's `log` function (see [`Level`](crate::Level)).
pub const LEVEL_DEBUG: i32 = 0;
pub const LEVEL_INFO: i32 = 1;
pub const LEVEL_WARN: i32 = 2;
pub const LEVEL_ERROR: i32 = 3;

/// Handler names, as in the input message's `handler` field.
pub const HANDLER_TASK: &str = "task";
pub const HANDLER_STEP: &str = "step";
pub const HANDLER_ARTIFACT: &str = "artifact";
pub const HANDLER_DOWNLOAD: &str = "download";

/// The longest meta `artifact_create` reads, in bytes; the host refuses a
/// longer one with [`ERR_INVALID`].
pub const MAX_ARTIFACT_META_BYTES: usize = 4096;

/// Bounds of what `http_request` reads: its request message (URL and
/// headers), a URL, the headers of a request and one header (name and
/// value); and the redirects one request follows.
pub const MAX_HTTP_REQUEST_META_BYTES: usize = 65536;
pub const MAX_URL_BYTES: usize = 8192;
pub const MAX_HTTP_HEADERS: usize = 100;
pub const MAX_HTTP_HEADER_BYTES: usize = 16384;
/// The headers of a request together, as the host would send them: each
/// secret placeholder counts as [`MAX_SECRET_BYTES`].
pub const MAX_HTTP_HEADERS_BYTES: usize = 65536;
pub const MAX_HTTP_REDIRECTS: usize = 10;

/// The longest message and partial output a progress report may carry,
/// in bytes; the host refuses a longer one with [`ERR_LIMIT`] before it
/// reads it.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;
pub const MAX_PROGRESS_OUTPUT_BYTES: usize = 16384;

/// A secret placeholder in a header value, `{{secret:NAME}}`, which the
/// host fills in; a name has at most [`MAX_SECRET_NAME_BYTES`] bytes.
pub const SECRET_PREFIX: &str = "{{secret:";
pub const SECRET_SUFFIX: &str = "}}";
pub const MAX_SECRET_NAME_BYTES: usize = 64;
/// The longest a secret's value may be.
pub const MAX_SECRET_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of `attr = "value"` in `src`, in order.
    fn attribute_values(src: &str, attr: &str) -> Vec<String> {
        let pattern = format!("{} = \"", attr);
        src.match_indices(&pattern)
            .map(|(i, _)| {
                let rest = &src[i + pattern.len()..];
                rest[..rest.find('"').unwrap()].to_string()
            })
            .collect()
    }

    /// host.rs declares the host's functions with literal names (an
    /// attribute cannot name a constant): they are the FUNC_ constants, in
    /// the module IMPORT_MODULE.
    #[test]
    fn imports_are_the_abis_host_functions() {
        let src = include_str!("host.rs");
        let mut imports = attribute_values(src, "link_name");
        imports.sort();
        let mut want = vec![
            FUNC_INPUT,
            FUNC_SET_RESULT,
            FUNC_LOG,
            FUNC_ARTIFACT_CREATE,
            FUNC_LAST_ERROR,
            FUNC_WORKSPACE_READ,
            FUNC_WORKSPACE_WRITE,
            FUNC_WORKSPACE_LIST,
            FUNC_WORKSPACE_STAT,
            FUNC_WORKSPACE_DELETE,
            FUNC_CONFIG,
            FUNC_DOWNLOAD_WRITE,
            FUNC_HTTP_REQUEST,
            FUNC_HTTP_RESPONSE,
            FUNC_HTTP_RESPONSE_BODY,
            FUNC_ARTIFACT_FETCH,
            FUNC_PROGRESS,
        ];
        want.sort_unstable();
        assert_eq!(imports, want);
        assert_eq!(attribute_values(src, "wasm_import_module"), [IMPORT_MODULE]);
    }

    /// export_agent! (lib.rs) defines its exports with literal names: they
    /// are the _EXPORT constants but the reactor's.
    #[test]
    fn exports_are_the_abis() {
        let src = include_str!("lib.rs");
        let mut exports: Vec<&str> = src
            .match_indices("pub extern \"C\" fn ")
            .map(|(i, m)| {
                let rest = &src[i + m.len()..];
                &rest[..rest.find('(').unwrap()]
            })
            .collect();
        exports.sort_unstable();
        let mut want = vec![
            VERSION_EXPORT,
            STEP_EXPORT,
            TASK_EXPORT,
            ARTIFACT_EXPORT,
            DOWNLOAD_EXPORT,
            HANDLERS_EXPORT,
        ];
        want.sort_unstable();
        assert_eq!(exports, want);
    }
}
