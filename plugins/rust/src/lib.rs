//! The kit for writing agentrt plugins (agents) in Rust.
//!
//! A plugin is a `cdylib` crate built for `wasm32-unknown-unknown`. Write
//! the handlers as plain functions and name them in [`export_agent!`], which
//! defines the exports the host calls (plugins/ABI.md, version 1):
//!
//! ```
//! use agentrt::{Error, Step, StepResult};
//!
//! fn on_step(step: &Step) -> Result<StepResult, Error> {
//!     if step.input.is_empty() {
//!         return Err("say something".into());
//!     }
//!     agentrt::info("echoing");
//!     Ok(StepResult::output(format!("you said: {}", step.input)).last())
//! }
//!
//! agentrt::export_agent!(step = on_step);
//! # fn main() {}
//! ```
//!
//! The plugin's `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "my-agent"
//! version = "0.1.0"
//! edition = "2021"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! agentrt = { path = "../../../plugins/rust" }
//!
//! [profile.release]
//! opt-level = "s"
//! lto = true
//! panic = "abort"
//! ```
//!
//! Build it (Debian's Rust 1.63 has the wasm32 standard library; a rustup
//! `rustc` earlier on `PATH` may not, hence `RUSTC`):
//!
//! ```text
//! RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! and serve `target/wasm32-unknown-unknown/release/my_agent.wasm` with
//! `agentrt run`.
//!
//! # Handlers
//!
//! | handler | signature | runs |
//! |---|---|---|
//! | `step` (required) | `fn(&Step) -> Result<StepResult, Error>` | for every executed step |
//! | `task` | `fn(&Task) -> Result<Vec<PlannedStep>, Error>` | once, when a task is created; may plan steps |
//! | `artifact` | `fn(&Task, &Artifact) -> Result<(), Error>` | when a client uploads a file or a URI; `Err(reject(..))` refuses it, `Err(replace_with_uri(..))` or `Err(replace_with_file(..))` keeps another artifact in place of a URI |
//! | `download` | `fn(&Task, &Artifact, &mut Download) -> Result<(), Error>` | when a client downloads an artifact; writes its bytes, or `Err(default_download())` leaves it to agentrt |
//!
//! A handler's `Err(e)` fails the call: the client gets a 502 with
//! `e.message()`, and artifacts the call created are dropped.
//!
//! From a handler, the plugin can [`log()`], report its [`progress()`]
//! (the step handler), [`create_artifact`],
//! [`publish_file`] and [`create_uri_artifact`], use its task's
//! [`workspace`], read its [`config()`], call out with [`http`] to the
//! destinations the operator granted, and [`fetch_artifact`] a URI
//! artifact into the workspace.
//! Messages are JSON; [`json`] is the kit's own small JSON module, with
//! [`json::Value`] for free-form fields such as `additional_input`. The kit
//! has no dependencies (serde_json would add about 100 KB to every plugin);
//! a plugin that wants serde for its own types adds it and decodes
//! `value.to_json()`.
//!
//! # What a call is
//!
//! Every handler call runs in a **fresh instance**: statics start from their
//! initial values each time. Keep state in the task's workspace.
//!
//! A **panic** traps the instance (the kit's plugins build with
//! `panic = "abort"`; wasm32 cannot unwind): the client gets a 502 saying the
//! plugin trapped, and the call's artifacts are dropped. Before it traps, the
//! kit logs the panic's message at level error, so it is in the step's log.
//! Return an `Err` for failures you expect.
//!
//! # Imports
//!
//! The plugin imports only the host functions it uses (the linker drops the
//! rest): a plugin that never touches the workspace or the config does not
//! import those functions, and so also loads on a host that lacks them. The
//! kit needs no WASI.
//!
//! # Testing
//!
//! Handlers are plain functions: test them natively with `cargo test`,
//! building a [`Step`] or [`Task`] with `..Default::default()`. Outside
//! WebAssembly, the host functions answer [`ErrorCode::NotAllowed`].

mod agent;
mod artifact;
mod config;
mod download;
mod error;
mod host;
mod log;
mod progress;

pub mod abi;
#[doc(hidden)]
pub mod exports;
pub mod http;
pub mod json;
pub mod workspace;

/// The test harness, for a plugin's tests: the kit's `testing` feature,
/// which a plugin enables in its `[dev-dependencies]` only, so that no
/// build of the plugin itself carries it (plugins/README.md).
#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
pub mod testing;

/// Makes a [`testing::Host`] running the handlers the crate gave
/// [`export_agent!`](crate::export_agent!). Use it in the tests of the
/// crate that invokes `export_agent!`, with the kit's `testing` feature
/// in `[dev-dependencies]`.
#[cfg(any(test, feature = "testing"))]
#[macro_export]
macro_rules! test_host {
    () => {
        $crate::testing::Host::new(crate::__agentrt_handlers())
    };
}

/// Without the kit's `testing` feature there is no harness: say how to
/// have it.
#[cfg(not(any(test, feature = "testing")))]
#[macro_export]
macro_rules! test_host {
    () => {
        compile_error!(
            "agentrt::test_host! needs the kit's test harness: add to Cargo.toml\n[dev-dependencies]\nagentrt = { path = \"…the kit…\", features = [\"testing\"] }"
        )
    };
}

#[cfg(test)]
mod golden_tests;

pub use agent::{Artifact, PlannedStep, Request, Step, StepResult, Task};
pub use artifact::{create_artifact, create_uri_artifact, publish_file};
pub use config::config;
pub use download::Download;
pub use error::{
    default_download, reject, replace_with_file, replace_with_uri, Context, Error, ErrorCode,
};
pub use http::fetch_artifact;
pub use log::{debug, error, info, log, warn, Level};
pub use progress::{progress, progress_with_output};

/// Defines the plugin's exports from its handlers.
///
/// ```
/// # use agentrt::{Artifact, Download, Error, PlannedStep, Step, StepResult, Task};
/// # fn on_step(_: &Step) -> Result<StepResult, Error> { Ok(StepResult::new()) }
/// # fn on_task(_: &Task) -> Result<Vec<PlannedStep>, Error> { Ok(vec![]) }
/// # fn on_artifact(_: &Task, _: &Artifact) -> Result<(), Error> { Ok(()) }
/// # fn on_download(_: &Task, _: &Artifact, _: &mut Download) -> Result<(), Error> { Ok(()) }
/// agentrt::export_agent!(step = on_step, task = on_task, artifact = on_artifact, download = on_download);
/// # fn main() {}
/// ```
///
/// `step` is required; `task`, `artifact` and `download` are optional, in
/// any order. A handler is a function or a closure with the signature in
/// the [crate docs](crate#handlers). Use the macro once, at the top level
/// of the plugin crate.
///
/// It defines `agentrt_abi_version`, `agentrt_handlers` and the four
/// handler exports, each `() -> i32`. A handler that is not given is still
/// exported (answering with an error), and `agentrt_handlers` tells the host
/// it does not exist.
#[macro_export]
macro_rules! export_agent {
    // Collect the handlers into [step] [task] [artifact] [download], each
    // [] or [handler].
    (@collect [] $t:tt $a:tt $d:tt step = $h:expr, $($rest:tt)*) => {
        $crate::export_agent!(@collect [$h] $t $a $d $($rest)*);
    };
    (@collect $s:tt [] $a:tt $d:tt task = $h:expr, $($rest:tt)*) => {
        $crate::export_agent!(@collect $s [$h] $a $d $($rest)*);
    };
    (@collect $s:tt $t:tt [] $d:tt artifact = $h:expr, $($rest:tt)*) => {
        $crate::export_agent!(@collect $s $t [$h] $d $($rest)*);
    };
    (@collect $s:tt $t:tt $a:tt [] download = $h:expr, $($rest:tt)*) => {
        $crate::export_agent!(@collect $s $t $a [$h] $($rest)*);
    };
    (@collect $s:tt $t:tt $a:tt $d:tt step = $h:expr, $($rest:tt)*) => {
        compile_error!("export_agent!: `step` is given twice");
    };
    (@collect $s:tt $t:tt $a:tt $d:tt task = $h:expr, $($rest:tt)*) => {
        compile_error!("export_agent!: `task` is given twice");
    };
    (@collect $s:tt $t:tt $a:tt $d:tt artifact = $h:expr, $($rest:tt)*) => {
        compile_error!("export_agent!: `artifact` is given twice");
    };
    (@collect $s:tt $t:tt $a:tt $d:tt download = $h:expr, $($rest:tt)*) => {
        compile_error!("export_agent!: `download` is given twice");
    };
    (@collect $s:tt $t:tt $a:tt $d:tt $other:ident = $h:expr, $($rest:tt)*) => {
        compile_error!(concat!("export_agent!: unknown handler `", stringify!($other), "` (expected step, task, artifact or download)"));
    };
    (@collect [] $t:tt $a:tt $d:tt) => {
        compile_error!("export_agent!: the step handler is required: export_agent!(step = on_step)");
    };
    (@collect [$s:expr] $t:tt $a:tt $d:tt) => {
        /// The handlers, for [`agentrt::test_host!`](agentrt::test_host)
        /// in the crate's tests.
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub fn __agentrt_handlers() -> $crate::exports::Handlers {
            $crate::exports::Handlers {
                step: || $crate::exports::on_step($s),
                task: $crate::export_agent!(@handler on_task $t),
                artifact: $crate::export_agent!(@handler on_artifact $a),
                download: $crate::export_agent!(@handler on_download $d),
            }
        }

        const _: () = {
            #[no_mangle]
            pub extern "C" fn agentrt_abi_version() -> i32 {
                $crate::abi::VERSION
            }

            #[no_mangle]
            pub extern "C" fn agentrt_handlers() -> i32 {
                $crate::exports::handlers(
                    $crate::export_agent!(@given $t),
                    $crate::export_agent!(@given $a),
                    $crate::export_agent!(@given $d),
                )
            }

            #[no_mangle]
            pub extern "C" fn agentrt_on_step() -> i32 {
                $crate::exports::on_step($s)
            }

            #[no_mangle]
            pub extern "C" fn agentrt_on_task() -> i32 {
                $crate::export_agent!(@call on_task "task" $t)
            }

            #[no_mangle]
            pub extern "C" fn agentrt_on_artifact() -> i32 {
                $crate::export_agent!(@call on_artifact "artifact" $a)
            }

            #[no_mangle]
            pub extern "C" fn agentrt_on_download() -> i32 {
                $crate::export_agent!(@call on_download "download" $d)
            }
        };
    };
    (@handler $run:ident []) => { ::std::option::Option::None };
    (@handler $run:ident [$h:expr]) => {
        ::std::option::Option::Some((|| $crate::exports::$run($h)) as fn() -> i32)
    };
    (@given []) => { false };
    (@given [$h:expr]) => { true };
    (@call $run:ident $name:literal []) => { $crate::exports::missing($name) };
    (@call $run:ident $name:literal [$h:expr]) => { $crate::exports::$run($h) };
    // The entry point.
    ($($key:ident = $h:expr),+ $(,)?) => {
        $crate::export_agent!(@collect [] [] [] [] $($key = $h,)+);
    };
}
