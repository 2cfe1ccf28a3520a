//! A test plugin that fails on request: the step input names the failure
//! (the same names as testdata/plugins/faulty). Anything else is echoed.
//! Its task handler fails a task whose input is "fail-task"; its artifact
//! handler rejects a file named *.bad and fails on one named *.fail,
//! logging first.

use agentrt::{reject, Artifact, Error, PlannedStep, Step, StepResult, Task};

fn on_task(task: &Task) -> Result<Vec<PlannedStep>, Error> {
    if task.input != "fail-task" {
        return Ok(Vec::new());
    }
    agentrt::info!("planning {:?}", task.input);
    agentrt::warn!("cannot plan this");
    Err("the plan failed".into())
}

fn on_artifact(_task: &Task, artifact: &Artifact) -> Result<(), Error> {
    agentrt::info!("checking {}", artifact.path);
    if artifact.file_name.ends_with(".bad") {
        return Err(reject("no .bad files, please"));
    }
    if artifact.file_name.ends_with(".fail") {
        return Err("cannot read it".into());
    }
    Ok(())
}

fn on_step(step: &Step) -> Result<StepResult, Error> {
    match step.input.as_str() {
        "error" => Err("the agent gave up".into()),
        "panic" => panic!("something impossible happened"),
        "overflow" => Ok(StepResult::output(recurse(1).to_string())),
        "oom" => {
            let mut keep: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut block = vec![0u8; 1 << 20];
                block[0] = 1;
                keep.push(block);
            }
        }
        "index" => {
            let xs: Vec<u32> = Vec::new();
            Ok(StepResult::output(xs[step.input.len()].to_string()))
        }
        other => Ok(StepResult::output(other)),
    }
}

/// Calls itself without end: a stack overflow.
#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    let mut pad = [0u8; 64];
    pad[(n % 64) as usize] = n as u8;
    // Read through a volatile pointer, so that the frame is not optimized away.
    let first = unsafe { std::ptr::read_volatile(&pad[0]) };
    recurse(n + 1) + first as u64 + pad[(n % 7) as usize] as u64
}

agentrt::export_agent!(step = on_step, task = on_task, artifact = on_artifact);
