//! The smallest agent: each step answers with its own input.
//!
//! Build (from the repository root):
//!
//! ```text
//! make build/plugins/echo-rust.wasm
//! ```

use agentrt::{Error, Step, StepResult};

fn on_step(step: &Step) -> Result<StepResult, Error> {
    if step.input.is_empty() {
        // No input, no output (null), as the Go example answers.
        return Ok(StepResult::new());
    }
    Ok(StepResult::output(&step.input))
}

agentrt::export_agent!(step = on_step);
