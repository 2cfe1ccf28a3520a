//! A test plugin that fails on request: the step input names the failure
//! (the same names as testdata/plugins/faulty). Anything else is echoed.

use agentrt::{Error, Step, StepResult};

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

agentrt::export_agent!(step = on_step);
