use crate::error::Error;
use crate::host;

/// Reports how far the step handler has come: `message` becomes a
/// `step.progress` event of the task, which every client watching the
/// task's events sees at once (docs/EVENTS.md). Only the step handler
/// reports progress: elsewhere the report is refused with
/// [`ErrorCode::NotAllowed`](crate::ErrorCode::NotAllowed).
///
/// ```
/// # fn on_step(step: &agentrt::Step) -> Result<agentrt::StepResult, agentrt::Error> {
/// // A failed report does not fail the step: most handlers ignore it.
/// let _ = agentrt::progress("calling the model (turn 1)");
/// # Ok(agentrt::StepResult::new())
/// # }
/// ```
///
/// What it costs: one host call (counted against the call's host-call
/// limit) and a copy of `message`. The first report of a step that agentrt
/// has not yet marked running waits while it does so (one write to the
/// store, so that watchers see the step running); later reports do not
/// wait for the store.
///
/// Rules: `message` is at most [`MAX_PROGRESS_MESSAGE_BYTES`](crate::abi::MAX_PROGRESS_MESSAGE_BYTES)
/// (1 KiB). A report counts against the call's log limit (`--max-log`,
/// 64 KiB by default) as a log line of the same text would: 64 bytes plus
/// the text as stored, a JSON string. A longer message, or a report that
/// would put the log over its limit, is dropped and refused with
/// [`ErrorCode::Limit`](crate::ErrorCode::Limit); a later, smaller report
/// may still fit.
///
/// A plugin that never reports progress does not import the host's
/// `progress` function (the linker drops it), and so also loads on a host
/// without it.
pub fn progress(message: &str) -> Result<(), Error> {
    host::progress(message, "")
}

/// [`progress`] with the step's output so far, `output`, which a client
/// may show in place of the step's output until the step ends (the
/// event's `output`). `output` is at most
/// [`MAX_PROGRESS_OUTPUT_BYTES`](crate::abi::MAX_PROGRESS_OUTPUT_BYTES)
/// (16 KiB); `""` gives none, as [`progress`] does. It counts against the
/// call's log limit with `message`, as one log line of the two would
/// (64 bytes plus both texts as stored), and is copied too: a long output
/// sent with every report soon fills the log limit, so send it when it
/// has changed.
///
/// ```
/// # fn on_step(step: &agentrt::Step) -> Result<agentrt::StepResult, agentrt::Error> {
/// let draft = "Dear Sir,";
/// let _ = agentrt::progress_with_output("drafting the letter", draft);
/// # Ok(agentrt::StepResult::new())
/// # }
/// ```
pub fn progress_with_output(message: &str, output: &str) -> Result<(), Error> {
    host::progress(message, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;
    use crate::host::fake;
    use crate::ErrorCode;

    const STEP: &str = r#"{"handler":"step"}"#;

    #[test]
    fn sends_the_message_and_output_as_they_are() {
        fake::begin(STEP);
        progress("calling the model (turn 1)").unwrap();
        progress_with_output("drafting", "Dear Sir,\n").unwrap();
        progress_with_output("", "").unwrap();
        let got = fake::with(|s| s.progress.clone());
        assert_eq!(
            got,
            vec![
                ("calling the model (turn 1)".to_string(), String::new()),
                ("drafting".to_string(), "Dear Sir,\n".to_string()),
                (String::new(), String::new()),
            ]
        );
    }

    #[test]
    fn a_refused_report_is_an_error_of_progress_with_the_hosts_code() {
        fake::begin(r#"{"handler":"task"}"#);
        let e = progress("from the task handler").unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::NotAllowed));
        assert_eq!(
            e.message(),
            "progress: only the step handler reports progress"
        );
        fake::begin(STEP);
        let long = "m".repeat(abi::MAX_PROGRESS_MESSAGE_BYTES + 1);
        let e = progress(&long).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Limit));
        assert_eq!(
            e.message(),
            "progress: progress message of 1025 bytes is over its limit of 1024 bytes"
        );
    }
}
