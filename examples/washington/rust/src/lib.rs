//! The agent the Agent Protocol's compliance suite expects: asked to write
//! the word "Washington" to a .txt file, it creates the artifact output.txt
//! containing Washington and finishes the task.
//!
//! Build (from the repository root):
//!
//! ```text
//! make build/plugins/washington-rust.wasm
//! ```

use agentrt::{Error, Step, StepResult};

fn on_step(step: &Step) -> Result<StepResult, Error> {
    let prompt = if step.input.is_empty() {
        &step.task.input
    } else {
        &step.input
    };
    if !mentions_washington(prompt) {
        return Ok(StepResult::output(
            "I only know how to write the word 'Washington' to a .txt file.",
        ));
    }
    agentrt::create_artifact("output.txt", "", b"Washington")?;
    agentrt::info("wrote output.txt");
    Ok(StepResult::output("Wrote 'Washington' to output.txt").last())
}

agentrt::export_agent!(step = on_step);

/// Whether `text` contains "washington" in any case, exactly as Go's
/// `strings.Contains(strings.ToLower(text), "washington")` (the Go example):
/// the only characters that Go lowercases into those ASCII letters are the
/// ASCII capitals and U+0130 'İ' (to 'i'). Rust's `to_lowercase` would miss
/// 'İ' (it gives "i\u{307}") and bring 25 KB of Unicode tables.
fn mentions_washington(text: &str) -> bool {
    let folded: String = text
        .chars()
        .map(|c| {
            if c == '\u{130}' {
                'i'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    folded.contains("washington")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_washington_in_any_case() {
        for text in [
            "Write the word Washington to a .txt file",
            "WASHINGTON",
            "washington",
            "WASHİNGTON",
            "x wAsHiNgToN y",
        ] {
            assert!(mentions_washington(text), "{:?}", text);
        }
        for text in ["", "Washingto n", "Wash", "Ωashington", "washi\u{307}ngton"] {
            assert!(!mentions_washington(text), "{:?}", text);
        }
    }
}
