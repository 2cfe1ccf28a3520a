//! An agent that turns a task into chat-completions calls to an
//! OpenAI-compatible endpoint and lets the model work in the task's
//! workspace through tools: write a file, read one, list them, finish.
//! What it writes is published as artifacts. Each step is one call of the
//! model, and the tools it asked for; the step's `additional_output`
//! records the tokens it used and an estimated cost. Clients watching the
//! task's events see its progress: "calling the model (turn N)" before each
//! call, "running tool NAME" before each tool, the first with what the
//! model said, when it said something, as the step's output so far. The Go
//! example (`../go`) is the same agent; the settings are the same:
//!
//! | setting | default |
//! |---|---|
//! | `base_url` | `https://api.openai.com/v1` |
//! | `model` | `gpt-4o-mini` |
//! | `api_key_secret` | `OPENAI_API_KEY`, the secret holding the key |
//! | `input_cost_per_mtok` | `0.15` dollars per million prompt tokens |
//! | `output_cost_per_mtok` | `0.60` dollars per million completion tokens |
//! | `max_steps` | `20` |
//!
//! The key is never the plugin's: it sends the placeholder of the secret,
//! which agentrt fills in for the destinations the operator bound it to.
//!
//! Build (from the repository root):
//!
//! ```text
//! make build/plugins/llm-agent-rust.wasm
//! ```

use agentrt::http;
use agentrt::json::{self, Value};
use agentrt::{workspace, Error, ErrorCode, Step, StepResult};

/// Where a task's conversation with the model is kept between steps; the
/// model's tools never see it.
const STATE_DIR: &str = ".llm";
const CONVERSATION: &str = ".llm/conversation.json";

const SYSTEM_PROMPT: &str = "You are an agent that completes the user's task by calling tools in a workspace of files. \
Write each file the task asks for with write_file: the files you write are published to the user. \
When the task is done, call finish with a one-line summary.";

/// The functions the model may call, as the chat-completions API
/// describes them.
const TOOLS: &str = r#"[
 {"type": "function", "function": {"name": "write_file", "description": "Create or replace a file of the workspace; it is published to the user.",
  "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "a relative path, such as notes/answer.txt"},
   "content": {"type": "string"}}, "required": ["path", "content"]}}},
 {"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
  "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
 {"type": "function", "function": {"name": "list_files", "description": "List the files of the workspace, with their sizes.",
  "parameters": {"type": "object", "properties": {}}}},
 {"type": "function", "function": {"name": "finish", "description": "End the task.",
  "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}}
]"#;

/// The operator's settings, with their defaults.
struct Settings {
    base_url: String,
    model: String,
    key_secret: String,
    input_cost: f64,
    output_cost: f64,
    max_steps: u64,
}

fn settings() -> Result<Settings, Error> {
    let c = agentrt::config()?;
    let get = |key: &str, default: &str| -> String {
        match c.get(key) {
            Some(v) if !v.is_empty() => v.clone(),
            _ => default.to_string(),
        }
    };
    let number = |key: &str, default: &str| -> Result<f64, Error> {
        get(key, default)
            .parse::<f64>()
            .map_err(|e| Error::new(format!("setting {}: {}", key, e)))
    };
    Ok(Settings {
        base_url: get("base_url", "https://api.openai.com/v1")
            .trim_end_matches('/')
            .to_string(),
        model: get("model", "gpt-4o-mini"),
        key_secret: get("api_key_secret", "OPENAI_API_KEY"),
        input_cost: number("input_cost_per_mtok", "0.15")?,
        output_cost: number("output_cost_per_mtok", "0.60")?,
        max_steps: get("max_steps", "20")
            .parse()
            .map_err(|e| Error::new(format!("setting max_steps: {}", e)))?,
    })
}

/// A message of the conversation.
fn message(role: &str, content: &str) -> Value {
    Value::object().with("role", role).with("content", content)
}

/// Calls the model once and runs the tools it asks for.
fn on_step(step: &Step) -> Result<StepResult, Error> {
    let cfg = settings()?;
    let (mut steps, mut messages) = load(step)?;
    if steps >= cfg.max_steps {
        return Ok(StepResult::output(format!(
            "stopped: the task took its {} steps",
            cfg.max_steps
        ))
        .last());
    }
    steps += 1;
    // Progress reports are for the clients watching the task's events; one
    // that is refused (past the log limit, say) changes nothing here.
    let _ = agentrt::progress(&format!("calling the model (turn {})", steps));
    let answer = complete(&cfg, &messages)?;
    let mut reply = answer["choices"][0]["message"].clone();
    if !reply.is_object() {
        return Err("the model's answer has no choices".into());
    }
    reply.insert("role", "assistant");
    messages.push(reply.clone());
    let mut said = Vec::new();
    if let Some(text) = reply["content"].as_str() {
        if !text.trim().is_empty() {
            said.push(text.trim().to_string());
        }
    }
    let calls = reply["tool_calls"].as_array().cloned().unwrap_or_default();
    let mut done = calls.is_empty(); // an answer without tools ends the task
    for (i, call) in calls.iter().enumerate() {
        let report = format!(
            "running tool {}",
            call["function"]["name"].as_str().unwrap_or("")
        );
        match said.first() {
            // What the model said is the step's output so far.
            Some(text) if i == 0 => progress_with_output(&report, text),
            _ => {
                let _ = agentrt::progress(&report);
            }
        }
        let (result, finished) = run_tool(call);
        done = done || finished;
        messages.push(
            message("tool", &result).with("tool_call_id", call["id"].as_str().unwrap_or("")),
        );
        said.push(result);
    }
    save(steps, messages)?;
    let usage = &answer["usage"];
    let tokens = |key: &str| usage[key].as_u64().unwrap_or(0);
    let cost = tokens("prompt_tokens") as f64 * cfg.input_cost / 1e6
        + tokens("completion_tokens") as f64 * cfg.output_cost / 1e6;
    let extra = Value::object()
        .with("tokens", tokens("total_tokens"))
        .with("estimated_cost", format!("{:.6}$", cost))
        .with("prompt_tokens", tokens("prompt_tokens"))
        .with("completion_tokens", tokens("completion_tokens"))
        .with("model", cfg.model.as_str());
    let result = StepResult::output(said.join("\n")).with_additional_output(extra);
    Ok(if done { result.last() } else { result })
}

/// Reports progress with the step's output so far, or without it when it
/// is refused (over its 16 KiB, or the log limit).
fn progress_with_output(message: &str, output: &str) {
    if let Err(e) = agentrt::progress_with_output(message, output) {
        if e.code() == Some(ErrorCode::Limit) {
            let _ = agentrt::progress(message);
        }
    }
}

/// The task's conversation, or one started from its input.
fn load(step: &Step) -> Result<(u64, Vec<Value>), Error> {
    match workspace::read_to_string(CONVERSATION) {
        Err(e) if e.is_not_found() => {
            let task = if step.task.input.is_empty() {
                &step.input
            } else {
                &step.task.input
            };
            Ok((
                0,
                vec![message("system", SYSTEM_PROMPT), message("user", task)],
            ))
        }
        Err(e) => Err(e),
        Ok(text) => {
            let saved = json::parse(&text)
                .map_err(|e| Error::new(format!("{}: {}", CONVERSATION, e)))?;
            let mut messages = saved["messages"].as_array().cloned().unwrap_or_default();
            // A later step's input, when it says something new, is the user's.
            let input = step.request.input.trim();
            if !input.is_empty() && input != step.task.input {
                messages.push(message("user", input));
            }
            Ok((saved["steps"].as_u64().unwrap_or(0), messages))
        }
    }
}

fn save(steps: u64, messages: Vec<Value>) -> Result<(), Error> {
    let saved = Value::object()
        .with("steps", steps)
        .with("messages", messages);
    workspace::write(CONVERSATION, saved.to_json().as_bytes())
}

/// Asks the model for the next message of the conversation.
fn complete(cfg: &Settings, messages: &[Value]) -> Result<Value, Error> {
    let tools = json::parse(TOOLS).map_err(|e| Error::new(format!("the tools: {}", e)))?;
    let body = Value::object()
        .with("model", cfg.model.as_str())
        .with("messages", messages.to_vec())
        .with("tools", tools);
    let resp = http::post(&format!("{}/chat/completions", cfg.base_url))
        .header(
            "Authorization",
            &format!("Bearer {}", http::secret(&cfg.key_secret)),
        )
        .json(&body)
        .send()
        .map_err(|e| Error::new(format!("calling the model: {}", e.message())))?;
    if resp.status() != 200 {
        let text = String::from_utf8_lossy(resp.bytes());
        let cut: String = text.chars().take(500).collect();
        return Err(format!("the model's endpoint answered {}: {}", resp.status(), cut).into());
    }
    resp.json()
        .map_err(|e| Error::new(format!("the model's answer is not a chat completion: {}", e.message())))
}

/// Runs one tool call: what it tells the model, and whether it finished
/// the task.
fn run_tool(call: &Value) -> (String, bool) {
    let name = call["function"]["name"].as_str().unwrap_or("");
    let args = match call["function"]["arguments"].as_str() {
        Some(text) if !text.is_empty() => match json::parse(text) {
            Ok(v) => v,
            Err(e) => {
                return (
                    format!("error: the arguments of {} are not a JSON object: {}", name, e),
                    false,
                )
            }
        },
        _ => Value::object(),
    };
    let text = |key: &str| args[key].as_str().unwrap_or("").to_string();
    let fail = |e: Error| (format!("error: {}", e.message()), false);
    match name {
        "write_file" => {
            let path = clean(&text("path"));
            let content = text("content");
            if path == STATE_DIR || path.starts_with(".llm/") {
                return (format!("error: {}/ is the agent's own", STATE_DIR), false);
            }
            if let Err(e) = workspace::write(&path, content.as_bytes()) {
                return fail(e);
            }
            let (dir, file) = match path.rfind('/') {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => ("", path.as_str()),
            };
            if let Err(e) = agentrt::publish_file(&path, file, dir) {
                return fail(e);
            }
            agentrt::info!("wrote {} ({} bytes)", path, content.len());
            (format!("wrote {} ({} bytes)", path, content.len()), false)
        }
        "read_file" => match workspace::read(&text("path")) {
            Ok(b) => (String::from_utf8_lossy(&b).into_owned(), false),
            Err(e) => fail(e),
        },
        "list_files" => match workspace::list("") {
            Ok(files) => {
                let lines: Vec<String> = files
                    .iter()
                    .filter(|f| !f.path.starts_with(".llm/"))
                    .map(|f| format!("{} ({} bytes)", f.path, f.size))
                    .collect();
                if lines.is_empty() {
                    ("the workspace is empty".to_string(), false)
                } else {
                    (lines.join("\n"), false)
                }
            }
            Err(e) => fail(e),
        },
        "finish" => {
            let summary = text("summary");
            (if summary.is_empty() { "done".into() } else { summary }, true)
        }
        other => (format!("error: no tool {}", other), false),
    }
}

/// A relative path as Go's path.Clean leaves it: no "./", no empty or "."
/// segment, ".." resolved (the host refuses what would leave).
fn clean(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if kept.pop().is_none() {
                    kept.push("..");
                }
            }
            s => kept.push(s),
        }
    }
    kept.join("/")
}

agentrt::export_agent!(step = on_step);

#[cfg(test)]
mod tests {
    use super::*;
    use agentrt::testing::{Reply, SentRequest};

    /// A model that writes the file the task names, saying `said` ("" for
    /// nothing), then finishes without a word.
    fn model(req: &SentRequest, said: &str) -> Reply {
        let messages = req.json()["messages"].as_array().cloned().unwrap_or_default();
        let wrote = messages.iter().any(|m| m["role"].as_str() == Some("tool"));
        let call = if wrote {
            (
                "finish",
                Value::object().with("summary", "Wrote Washington to washington.txt"),
            )
        } else {
            (
                "write_file",
                Value::object()
                    .with("path", "washington.txt")
                    .with("content", "Washington"),
            )
        };
        let tool_call = Value::object()
            .with("id", format!("call_{}", messages.len()))
            .with("type", "function")
            .with(
                "function",
                Value::object()
                    .with("name", call.0)
                    .with("arguments", call.1.to_json()),
            );
        Reply::json(
            &Value::object()
                .with(
                    "choices",
                    vec![Value::object().with(
                        "message",
                        Value::object()
                            .with("role", "assistant")
                            .with(
                                "content",
                                if wrote || said.is_empty() {
                                    Value::Null
                                } else {
                                    Value::from(said)
                                },
                            )
                            .with("tool_calls", vec![tool_call]),
                    )],
                )
                .with(
                    "usage",
                    Value::object()
                        .with("prompt_tokens", 1000)
                        .with("completion_tokens", 100)
                        .with("total_tokens", 1100),
                ),
        )
    }

    /// A host granting the model's endpoint and holding its key, the model
    /// saying `said` with its first tool call.
    fn host(said: &str) -> agentrt::testing::Host {
        let said = said.to_string();
        let mut host = agentrt::test_host!();
        host.allow_http("https://api.openai.com/v1/")
            .secret("OPENAI_API_KEY", "sk-test-0123456789", &["https://api.openai.com/v1/"])
            .serve_http(move |req| {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-0123456789"));
                model(req, &said)
            });
        host
    }

    /// The reports of a step, as (message, output).
    fn reports(step: &agentrt::testing::Step) -> Vec<(&str, &str)> {
        step.progress
            .iter()
            .map(|p| (p.message.as_str(), p.output.as_str()))
            .collect()
    }

    #[test]
    fn writes_washington_through_tool_calls_reporting_each_call_as_progress() {
        let host = host("I will write the file.");
        let mut task = host
            .create_task("Write the word 'Washington' to a .txt file")
            .unwrap();
        let first = task.step("").unwrap();
        assert!(!first.is_last);
        assert_eq!(
            first.output,
            "I will write the file.\nwrote washington.txt (10 bytes)"
        );
        assert_eq!(first.additional_output["tokens"].as_u64(), Some(1100));
        assert_eq!(first.additional_output["estimated_cost"].as_str(), Some("0.000210$"));
        assert_eq!(
            reports(&first),
            [
                ("calling the model (turn 1)", ""),
                ("running tool write_file", "I will write the file."),
            ]
        );
        let second = task.step("").unwrap();
        assert!(second.is_last);
        assert_eq!(second.output, "Wrote Washington to washington.txt");
        assert_eq!(
            reports(&second),
            [
                ("calling the model (turn 2)", ""),
                ("running tool finish", ""),
            ]
        );
        assert_eq!(task.read_file("washington.txt").unwrap(), b"Washington");
        assert_eq!(first.artifacts[0].file_name, "washington.txt");
    }

    /// What the model said is reported as the step's output so far only
    /// within the 16 KiB a report's output may have; past it, the report
    /// goes without.
    #[test]
    fn an_answer_too_long_for_a_report_is_left_out_of_it() {
        let host = host(&"x".repeat(16 * 1024 + 1));
        let mut task = host.create_task("Write the word 'Washington'").unwrap();
        let step = task.step("").unwrap();
        assert_eq!(
            reports(&step),
            [
                ("calling the model (turn 1)", ""),
                ("running tool write_file", ""),
            ]
        );
    }

    #[test]
    fn cleans_paths_as_go_does() {
        assert_eq!(clean("./a//b/./c"), "a/b/c");
        assert_eq!(clean("a/../b"), "b");
    }
}
