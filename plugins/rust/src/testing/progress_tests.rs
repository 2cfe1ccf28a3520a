//! Progress reports in the harness: the step handler's only, within their
//! sizes, counted with log lines against the call's log limit, kept as
//! UTF-8, recorded on the step; as agentrt has them.

use super::*;
use crate::exports;
use crate::{progress, progress_with_output, Error, StepResult};

/// What a report answered: "ok", or the error's message.
fn outcome(r: Result<(), Error>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => e.message().to_string(),
    }
}

/// Runs one step of a new task on `host` and returns it.
fn run_step(host: &Host, input: &str) -> Step {
    let mut task = host.create_task("").unwrap();
    task.step(input).unwrap()
}

#[test]
fn reports_are_recorded_on_the_step_in_order_as_utf8() {
    let host = Host::new(Handlers::step_only(|| {
        exports::on_step(|_| {
            progress("calling the model (turn 1)")?;
            progress_with_output("running tool write_file", "Dear Sir,")?;
            let (msg, out) = (b"bad \xff\xfe bytes", b"half \xe2\x82\xff");
            // SAFETY: the fake reads the two ranges only.
            let code = unsafe {
                crate::host::fake::host_progress(
                    msg.as_ptr(),
                    msg.len() as i32,
                    out.as_ptr(),
                    out.len() as i32,
                )
            };
            assert_eq!(code, 0);
            progress("")?;
            Ok(StepResult::output("done"))
        })
    }));
    let step = run_step(&host, "");
    let want = [
        ("calling the model (turn 1)", ""),
        ("running tool write_file", "Dear Sir,"),
        ("bad \u{FFFD} bytes", "half \u{FFFD}"),
        ("", ""),
    ];
    let got: Vec<(&str, &str)> = step
        .progress
        .iter()
        .map(|p| (p.message.as_str(), p.output.as_str()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_failed_step_keeps_its_progress_reports() {
    let host = Host::new(Handlers::step_only(|| {
        exports::on_step(|_| {
            progress("about to fail")?;
            Err(Error::new("broke"))
        })
    }));
    let mut task = host.create_task("").unwrap();
    assert!(task.step("").is_err());
    let kept: Vec<&str> = task.steps()[0]
        .progress
        .iter()
        .map(|p| p.message.as_str())
        .collect();
    assert_eq!(kept, ["about to fail"]);
}

/// Only the step handler reports progress: the task, artifact and
/// download handlers are refused with NotAllowed, as agentrt refuses
/// them. Each logs what its report answered, into the task's log.
#[test]
fn only_the_step_handler_reports_progress() {
    fn report(handler: &str) {
        let e = progress_with_output(&format!("from the {} handler", handler), "x").unwrap_err();
        crate::info!("{}: {:?}", handler, e.code());
    }
    let host = Host::new(Handlers {
        step: || exports::on_step(|_| Ok(StepResult::new())),
        task: Some(|| {
            exports::on_task(|_| {
                report("task");
                Ok(vec![])
            })
        }),
        artifact: Some(|| {
            exports::on_artifact(|_, _| {
                report("artifact");
                Ok(())
            })
        }),
        download: Some(|| {
            exports::on_download(|_, _, _| {
                report("download");
                Err(crate::default_download())
            })
        }),
    });
    let mut task = host.create_task("").unwrap();
    let a = task.upload("a.txt", "", b"a").unwrap();
    task.download(&a.id).unwrap();
    let logs: Vec<&str> = task.logs().iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        logs,
        [
            "task: Some(NotAllowed)",
            "artifact: Some(NotAllowed)",
            "download: Some(NotAllowed)"
        ]
    );
}

/// A message over 1 KiB and an output over 16 KiB are refused with Limit
/// before anything else is looked at: outside the step handler too, as
/// agentrt checks the sizes first.
#[test]
fn a_report_over_its_sizes_is_refused_with_limit() {
    let host = Host::new(Handlers::step_only(|| {
        exports::on_step(|_| {
            let m = |n: usize| "m".repeat(n);
            let answers = [
                outcome(progress(&m(abi::MAX_PROGRESS_MESSAGE_BYTES))),
                outcome(progress(&m(abi::MAX_PROGRESS_MESSAGE_BYTES + 1))),
                outcome(progress_with_output(
                    "o",
                    &m(abi::MAX_PROGRESS_OUTPUT_BYTES),
                )),
                outcome(progress_with_output(
                    "o",
                    &m(abi::MAX_PROGRESS_OUTPUT_BYTES + 1),
                )),
            ];
            Ok(StepResult::output(answers.join("\n")))
        })
    }));
    let step = run_step(&host, "");
    assert_eq!(
        step.output,
        "ok\nprogress: progress message of 1025 bytes is over its limit of 1024 bytes\n\
         ok\nprogress: progress output of 16385 bytes is over its limit of 16384 bytes"
    );
    assert_eq!(step.progress.len(), 2);
    assert_eq!(
        step.progress[0].message.len(),
        abi::MAX_PROGRESS_MESSAGE_BYTES
    );
    assert_eq!(
        step.progress[1].output.len(),
        abi::MAX_PROGRESS_OUTPUT_BYTES
    );

    let host = Host::new(Handlers {
        step: || exports::on_step(|_| Ok(StepResult::new())),
        task: Some(|| {
            exports::on_task(|_| {
                let e = progress(&"m".repeat(abi::MAX_PROGRESS_MESSAGE_BYTES + 1));
                crate::info!("{}", outcome(e));
                Ok(vec![])
            })
        }),
        artifact: None,
        download: None,
    });
    let task = host.create_task("").unwrap();
    assert_eq!(
        task.logs()[0].message,
        "progress: progress message of 1025 bytes is over its limit of 1024 bytes"
    );
}

/// With agentrt's default log limit, 64 KiB, three reports of a 16 KiB
/// output fit and a fourth does not: each counts 64 bytes and its text.
#[test]
fn progress_counts_against_the_default_log_limit() {
    let host = Host::new(Handlers::step_only(|| {
        exports::on_step(|_| {
            let out = "o".repeat(abi::MAX_PROGRESS_OUTPUT_BYTES);
            let mut answers: Vec<String> = (0..4)
                .map(|_| outcome(progress_with_output("m", &out)))
                .collect();
            answers.push(outcome(progress("small")));
            Ok(StepResult::output(answers.join("\n")))
        })
    }));
    let step = run_step(&host, "");
    assert_eq!(
        step.output,
        "ok\nok\nok\nprogress: a progress report of 16449 bytes would put the call over its log limit of 65536 bytes\nok"
    );
    assert_eq!(step.progress.len(), 4);
    assert_eq!(step.progress[3].message, "small");
}

/// Log lines and progress reports share the call's log limit, each
/// counted as agentrt counts a record (64 bytes and its text as stored):
/// a report that does not fit is dropped and leaves the log as it was; a
/// line that does not fit fills it, the log says so once, and every later
/// line and report is refused.
#[test]
fn progress_and_log_share_the_calls_log_limit() {
    let mut host = Host::new(Handlers::step_only(|| {
        exports::on_step(|_| {
            let line = "l".repeat(261); // 325 bytes counted
            let answers = [
                outcome(progress_with_output("m", "\"quoted\"")), // 64+1+10: 75
                {
                    crate::info(&line); // 400
                    crate::info(&line); // 725
                    "logged".to_string()
                },
                // 64+1+106 would fit, but 106 quotes are stored as 212 bytes.
                outcome(progress_with_output("m", &"\"".repeat(106))),
                outcome(progress(&"p".repeat(211))), // 1000: fits exactly
                outcome(progress("")),               // 1064: dropped
                {
                    crate::info(""); // fills the log
                    "logged".to_string()
                },
                outcome(progress("")), // refused: the log is full
            ];
            Ok(StepResult::output(answers.join("\n")))
        })
    }));
    host.max_log = 1000;
    let step = run_step(&host, "");
    assert_eq!(
        step.output.split('\n').collect::<Vec<_>>(),
        [
            "ok",
            "logged",
            "progress: a progress report of 277 bytes would put the call over its log limit of 1000 bytes",
            "ok",
            "progress: a progress report of 64 bytes would put the call over its log limit of 1000 bytes",
            "logged",
            "progress: the log limit of 1000 bytes was reached",
        ]
    );
    let reports: Vec<&str> = step.progress.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(reports, ["m", &"p".repeat(211)]);
    let logs: Vec<(Level, &str)> = step
        .logs
        .iter()
        .map(|l| (l.level, l.message.as_str()))
        .collect();
    assert_eq!(
        logs,
        [
            (Level::Info, "l".repeat(261).as_str()),
            (Level::Info, "l".repeat(261).as_str()),
            (
                Level::Warn,
                "log limit of 1000 bytes reached; later lines dropped"
            ),
        ]
    );
}

/// What a report counts is its text as agentrt stores it, escaped: a
/// quote, a backslash and \n take 2 bytes, another control character 6,
/// U+2028 6 (bytes that are not UTF-8: log_limit.rs's tests).
#[test]
fn a_report_counts_its_text_as_stored() {
    let mut host = Host::new(Handlers::step_only(|| {
        exports::on_step(|s| Ok(StepResult::output(outcome(progress(&s.input)))))
    }));
    for (text, size) in [
        ("plain", 5),
        ("\"\\\n\r\t\u{8}\u{c}", 14),
        ("\u{0}\u{1f}", 12),
        ("\u{7f}<>&", 4),
        ("\u{2028}\u{2029}", 12),
        ("é€😀", 9),
    ] {
        host.max_log = 64 + size - 1;
        assert_ne!(
            run_step(&host, text).output,
            "ok",
            "{:?} fit under {}",
            text,
            host.max_log
        );
        host.max_log += 1;
        assert_eq!(
            run_step(&host, text).output,
            "ok",
            "{:?} under {}",
            text,
            host.max_log
        );
    }
}
