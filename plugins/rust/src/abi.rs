//! The ABI's names and numbers (plugins/ABI.md), mirrored by hand from the
//! Go package `plugins/abi`. Plugin authors rarely need them: the kit and
//! [`export_agent!`](crate::export_agent) use them for you.

/// The ABI version this kit implements; `agentrt_abi_version` returns it.
pub const VERSION: i32 = 1;

/// The module the host's functions are imported from.
pub const IMPORT_MODULE: &str = "agentrt_v1";

/// Exports a plugin may define; every one is `() -> i32`.
pub const VERSION_EXPORT: &str = "agentrt_abi_version";
pub const STEP_EXPORT: &str = "agentrt_on_step";
pub const TASK_EXPORT: &str = "agentrt_on_task";
pub const ARTIFACT_EXPORT: &str = "agentrt_on_artifact";
pub const HANDLERS_EXPORT: &str = "agentrt_handlers";

/// Bits of `agentrt_handlers`' result: the handlers the plugin defines.
pub const HANDLER_BIT_TASK: i32 = 1 << 0;
pub const HANDLER_BIT_STEP: i32 = 1 << 1;
pub const HANDLER_BIT_ARTIFACT: i32 = 1 << 2;

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
