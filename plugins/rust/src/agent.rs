//! What handlers receive (Task, Step, Request, Artifact) and return
//! (StepResult, PlannedStep), and their translation from and to the ABI's
//! messages (plugins/ABI.md, "Messages").

use crate::error::Error;
use crate::json::Value;

/// The task a handler works on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Task {
    pub id: String,
    /// The task's prompt ("" when the client sent none).
    pub input: String,
    /// The task's `additional_input`: a JSON object, or `Null` when the
    /// client sent none.
    pub additional_input: Value,
    /// The task's artifacts so far, uploaded or created, oldest first.
    pub artifacts: Vec<Artifact>,
}

/// The step being executed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    pub id: String,
    /// The task the step belongs to.
    pub task: Task,
    /// The step's name: the one it was planned with, or "".
    pub name: String,
    /// The step's input: for a planned step, the input it was planned with;
    /// otherwise the execute-step request's input.
    pub input: String,
    /// The step's `additional_input` (a JSON object, or `Null`).
    pub additional_input: Value,
    /// Whether the task handler planned this step.
    pub planned: bool,
    /// The execute-step request that runs this step.
    pub request: Request,
}

/// An execute-step request body.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub input: String,
    /// A JSON object, or `Null`.
    pub additional_input: Value,
}

/// A file of the task, uploaded by a client or created by the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Artifact {
    pub id: String,
    pub agent_created: bool,
    /// A plain name such as `report.md`.
    pub file_name: String,
    /// The artifact's directory in the workspace ("" for its root).
    pub relative_path: String,
    /// Where the artifact's bytes sit in the task's workspace
    /// (`relative_path/file_name`); read them with
    /// [`workspace::read`](crate::workspace::read). "" for a URI artifact.
    pub path: String,
    /// What a URI artifact refers to (bytes held elsewhere, which agentrt
    /// never fetches); "" for bytes.
    pub uri: String,
    /// The step that made the artifact; "" when none did.
    pub step_id: String,
}

/// What a step handler returns. Every field is optional; build one with
/// [`StepResult::output`] or [`StepResult::new`] and the `with_*` methods.
///
/// ```
/// use agentrt::{json::Value, StepResult};
///
/// let r = StepResult::output("3 words")
///     .with_additional_output(Value::object().with("words", 3))
///     .with_name("count words")
///     .last();
/// assert!(r.is_last);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepResult {
    /// The step's output (`None` leaves it null).
    pub output: Option<String>,
    /// The step's `additional_output`, which must be a JSON object.
    pub additional_output: Option<Value>,
    /// A new name for the step.
    pub name: Option<String>,
    /// Whether this step is the task's last.
    pub is_last: bool,
}

impl StepResult {
    /// A result that sets nothing.
    pub fn new() -> StepResult {
        StepResult::default()
    }

    /// A result with this output.
    pub fn output(text: impl Into<String>) -> StepResult {
        StepResult {
            output: Some(text.into()),
            ..StepResult::default()
        }
    }

    pub fn with_output(mut self, text: impl Into<String>) -> StepResult {
        self.output = Some(text.into());
        self
    }

    /// Sets `additional_output`, which must be a JSON object (see
    /// [`Value::object`]).
    pub fn with_additional_output(mut self, object: Value) -> StepResult {
        self.additional_output = Some(object);
        self
    }

    /// Renames the step.
    pub fn with_name(mut self, name: impl Into<String>) -> StepResult {
        self.name = Some(name.into());
        self
    }

    /// Marks the step as the task's last.
    pub fn last(mut self) -> StepResult {
        self.is_last = true;
        self
    }

    /// The step handler's result message.
    pub(crate) fn to_message(&self) -> Result<Value, Error> {
        let mut m = Value::object();
        if let Some(output) = &self.output {
            m.insert("output", output.as_str());
        }
        if let Some(extra) = &self.additional_output {
            if !extra.is_object() {
                return Err(Error::new(
                    "the step's additional_output must be a JSON object",
                ));
            }
            m.insert("additional_output", extra.clone());
        }
        if let Some(name) = &self.name {
            m.insert("name", name.as_str());
        }
        if self.is_last {
            m.insert("is_last", true);
        }
        Ok(m)
    }
}

/// A step the task handler plans. Planned steps are listed with status
/// `created` and run, oldest first, by the following execute-step requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannedStep {
    pub name: String,
    pub input: Option<String>,
    /// The step's `additional_input`, which must be a JSON object.
    pub additional_input: Option<Value>,
}

impl PlannedStep {
    /// A step with a name and an input.
    pub fn new(name: impl Into<String>, input: impl Into<String>) -> PlannedStep {
        PlannedStep {
            name: name.into(),
            input: Some(input.into()),
            additional_input: None,
        }
    }

    /// Sets `additional_input`, which must be a JSON object.
    pub fn with_additional_input(mut self, object: Value) -> PlannedStep {
        self.additional_input = Some(object);
        self
    }

    fn to_message(&self) -> Result<Value, Error> {
        let mut m = Value::object().with("name", self.name.as_str());
        if let Some(input) = &self.input {
            m.insert("input", input.as_str());
        }
        if let Some(extra) = &self.additional_input {
            if !extra.is_object() {
                return Err(Error::new(format!(
                    "the additional_input of planned step {:?} must be a JSON object",
                    self.name
                )));
            }
            m.insert("additional_input", extra.clone());
        }
        Ok(m)
    }
}

/// The task handler's result message.
pub(crate) fn plan_message(steps: &[PlannedStep]) -> Result<Value, Error> {
    let mut m = Value::object();
    if !steps.is_empty() {
        let steps = steps
            .iter()
            .map(PlannedStep::to_message)
            .collect::<Result<Vec<_>, _>>()?;
        m.insert("steps", steps);
    }
    Ok(m)
}

/// The input message's fields, taken out of it.
fn take_string(v: &mut Value, key: &str) -> String {
    match v.take(key) {
        Value::String(s) => s,
        _ => String::new(),
    }
}

impl Task {
    pub(crate) fn from_message(mut v: Value) -> Task {
        let artifacts = match v.take("artifacts") {
            Value::Array(items) => items.into_iter().map(Artifact::from_message).collect(),
            _ => Vec::new(),
        };
        Task {
            id: take_string(&mut v, "task_id"),
            input: take_string(&mut v, "input"),
            additional_input: v.take("additional_input"),
            artifacts,
        }
    }
}

impl Step {
    /// The step handler's view of the input message.
    pub(crate) fn from_input(mut input: Value) -> Step {
        let mut step = input.take("step");
        let mut request = input.take("request");
        Step {
            id: take_string(&mut step, "step_id"),
            task: Task::from_message(input.take("task")),
            name: take_string(&mut step, "name"),
            input: take_string(&mut step, "input"),
            additional_input: step.take("additional_input"),
            planned: step["planned"].as_bool().unwrap_or(false),
            request: Request {
                input: take_string(&mut request, "input"),
                additional_input: request.take("additional_input"),
            },
        }
    }
}

impl Artifact {
    pub(crate) fn from_message(mut v: Value) -> Artifact {
        Artifact {
            id: take_string(&mut v, "artifact_id"),
            agent_created: v["agent_created"].as_bool().unwrap_or(false),
            file_name: take_string(&mut v, "file_name"),
            relative_path: take_string(&mut v, "relative_path"),
            path: take_string(&mut v, "workspace_path"),
            uri: take_string(&mut v, "uri"),
            step_id: take_string(&mut v, "step_id"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    const INPUT: &str = r#"{
        "abi": 1, "handler": "step", "future_field": [1, {"x": null}],
        "task": {"task_id": "t1", "input": null, "additional_input": {"k": "v"},
                 "artifacts": [{"artifact_id": "a1", "agent_created": false, "file_name": "a.txt",
                                "relative_path": "docs", "workspace_path": "docs/a.txt", "extra": 1}]},
        "step": {"step_id": "s1", "name": "count words", "input": "héllo \"w\" \\ 😀", "additional_input": {"n": 1}, "planned": true},
        "request": {"input": "go", "additional_input": {}}
    }"#;

    #[test]
    fn decodes_the_step_input() {
        let step = Step::from_input(parse(INPUT).unwrap());
        let want = Step {
            id: "s1".into(),
            task: Task {
                id: "t1".into(),
                input: "".into(),
                additional_input: Value::object().with("k", "v"),
                artifacts: vec![Artifact {
                    id: "a1".into(),
                    agent_created: false,
                    file_name: "a.txt".into(),
                    relative_path: "docs".into(),
                    path: "docs/a.txt".into(),
                    ..Artifact::default()
                }],
            },
            name: "count words".into(),
            input: "héllo \"w\" \\ 😀".into(),
            additional_input: Value::object().with("n", 1),
            planned: true,
            request: Request {
                input: "go".into(),
                additional_input: Value::object(),
            },
        };
        assert_eq!(step, want);
    }

    #[test]
    fn tolerates_missing_fields() {
        let step = Step::from_input(parse(r#"{"task": {}}"#).unwrap());
        assert_eq!(step, Step::default());
        let step = Step::from_input(parse("[]").unwrap());
        assert_eq!(step, Step::default());
    }

    #[test]
    fn encodes_step_results() {
        let cases: Vec<(StepResult, &str)> = vec![
            (StepResult::new(), "{}"),
            (StepResult::output(""), r#"{"output":""}"#),
            (
                StepResult::output("a\"b").last(),
                r#"{"output":"a\"b","is_last":true}"#,
            ),
            (
                StepResult::new()
                    .with_name("n")
                    .with_additional_output(Value::object().with("x", 1))
                    .with_output("o"),
                r#"{"output":"o","additional_output":{"x":1},"name":"n"}"#,
            ),
        ];
        for (r, want) in cases {
            assert_eq!(r.to_message().unwrap().to_json(), want, "{:?}", r);
        }
        let bad = StepResult::new().with_additional_output(Value::from(1));
        assert_eq!(
            bad.to_message().unwrap_err().message(),
            "the step's additional_output must be a JSON object"
        );
    }

    #[test]
    fn encodes_plans() {
        assert_eq!(plan_message(&[]).unwrap().to_json(), "{}");
        let plan = [
            PlannedStep::new("one", "first"),
            PlannedStep {
                name: "two".into(),
                ..PlannedStep::default()
            }
            .with_additional_input(Value::object().with("k", true)),
        ];
        assert_eq!(
            plan_message(&plan).unwrap().to_json(),
            r#"{"steps":[{"name":"one","input":"first"},{"name":"two","additional_input":{"k":true}}]}"#
        );
        let bad = [PlannedStep::new("x", "").with_additional_input(Value::Array(vec![]))];
        assert!(plan_message(&bad).is_err());
    }
}
