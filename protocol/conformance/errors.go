package conformance

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
)

var errorChecks = []Check{{
	ID: "errors.unknown-task", Group: "errors", Level: LevelSpec,
	Asserts: `a well-formed task id no task has is 404 with a JSON {"message"} on each operation of a task`,
	run:     checkUnknownTask,
}, {
	ID: "errors.unknown-step", Group: "errors", Level: LevelSpec,
	Asserts: `a well-formed step id no step of the task has is 404 with a JSON {"message"}`,
	run:     checkUnknownStep,
}, {
	ID: "errors.unknown-artifact", Group: "errors", Level: LevelSpec,
	Asserts: `a well-formed artifact id no artifact of the task has is 404 with a JSON {"message"}`,
	run:     checkUnknownArtifact,
}, {
	ID: "errors.malformed-ids", Group: "errors", Level: LevelStrict,
	Asserts: `a task, step or artifact id that is no id at all (not-an-id, 0, ✓, 300 letters) is 404 with a JSON {"message"}`,
	run:     checkMalformedIDs,
}, {
	ID: "errors.step-of-other-task", Group: "errors", Level: LevelStrict,
	Asserts: `a step is found only through its own task: through another, 404 with a JSON {"message"}`,
	run:     checkStepOfOtherTask,
}, {
	ID: "errors.artifact-of-other-task", Group: "errors", Level: LevelStrict,
	Asserts: `an artifact is found only through its own task: through another, 404 with a JSON {"message"}`,
	run:     checkArtifactOfOtherTask,
}, {
	ID: "errors.malformed-json", Group: "errors", Level: LevelSpec,
	Asserts: "create-task and execute-step with a body that is not JSON answer 422 with a JSON object",
	run:     checkMalformedJSON,
}, {
	ID: "errors.mistyped-body", Group: "errors", Level: LevelStrict,
	Asserts: `create-task and execute-step with a body of the wrong shape ({"input": 5}, {"input": ["a"]}, [], "text") answer 422 with a JSON {"message"}`,
	run:     checkMistypedBody,
}, {
	ID: "errors.additional-input-not-object", Group: "errors", Level: LevelStrict,
	Asserts: `create-task and execute-step with an additional_input that is not an object ("x", 5, [1], true) answer 422 with a JSON {"message"}`,
	run:     checkAdditionalInputNotObject,
}, {
	ID: "errors.invalid-text", Group: "errors", Level: LevelStrict,
	Asserts: `create-task and execute-step with text that is not Unicode (a byte that is not UTF-8, a lone surrogate \ud800) answer 422 with a JSON {"message"}`,
	run:     checkInvalidText,
}, {
	ID: "errors.unknown-route", Group: "errors", Level: LevelStrict,
	Asserts: `a path the protocol does not have is 404 with a JSON {"message"}`,
	run:     checkUnknownRoute,
}, {
	ID: "errors.wrong-method", Group: "errors", Level: LevelStrict,
	Asserts: `a method a path does not have is 405 with an Allow header and a JSON {"message"}`,
	run:     checkWrongMethod,
}}

// unknownID is a well-formed id (a random UUID) that nothing has.
func unknownID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// taskOperations are the requests of each operation on a task, by its id.
func taskOperations(taskID string) []*request {
	return []*request{
		get(taskPath(taskID)),
		get(taskPath(taskID, "steps")),
		postJSON(taskPath(taskID, "steps"), stepBody("hello")),
		get(taskPath(taskID, "steps", unknownID())),
		get(taskPath(taskID, "artifacts")),
		officialUpload.request(taskID),
		get(taskPath(taskID, "artifacts", unknownID())),
	}
}

// wantNotFound sends each request and wants each 404.
func (s *session) wantNotFound(reqs ...*request) error {
	for _, r := range reqs {
		ex, err := s.do(r)
		if err != nil {
			return err
		}
		if err := ex.wantNotFound(); err != nil {
			return err
		}
	}
	return nil
}

func checkUnknownTask(s *session) error {
	return s.wantNotFound(taskOperations(unknownID())...)
}

func checkUnknownStep(s *session) error {
	taskID, _, err := s.newSteps(1)
	if err != nil {
		return err
	}
	return s.wantNotFound(get(taskPath(taskID, "steps", unknownID())))
}

func checkUnknownArtifact(s *session) error {
	taskID, _, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	return s.wantNotFound(get(taskPath(taskID, "artifacts", unknownID())))
}

// malformedIDs are ids no server hands out.
var malformedIDs = []string{"not-an-id", "0", "✓", strings.Repeat("a", 300)}

func checkMalformedIDs(s *session) error {
	for _, id := range malformedIDs {
		if err := s.wantNotFound(taskOperations(id)...); err != nil {
			return err
		}
	}
	taskID, _, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	for _, id := range malformedIDs {
		if err := s.wantNotFound(get(taskPath(taskID, "steps", id)), get(taskPath(taskID, "artifacts", id))); err != nil {
			return err
		}
	}
	return nil
}

func checkStepOfOtherTask(s *session) error {
	_, stepIDs, err := s.newSteps(1)
	if err != nil {
		return err
	}
	other, err := s.newTask("another task")
	if err != nil {
		return err
	}
	return s.wantNotFound(get(taskPath(other, "steps", stepIDs[0])))
}

func checkArtifactOfOtherTask(s *session) error {
	_, artifactID, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	other, err := s.newTask("another task")
	if err != nil {
		return err
	}
	return s.wantNotFound(get(taskPath(other, "artifacts", artifactID)))
}

// bodyOperations are create-task and execute-step of a new task, each
// with body.
func (s *session) bodyOperations(bodies ...string) ([]*request, error) {
	taskID, err := s.newTask("a task to send bodies to")
	if err != nil {
		return nil, err
	}
	var reqs []*request
	for _, path := range []string{"/agent/tasks", taskPath(taskID, "steps")} {
		for _, b := range bodies {
			reqs = append(reqs, postJSON(path, b))
		}
	}
	return reqs, nil
}

// wantUnprocessable sends each request and wants each 422, with a JSON
// object that has a message if message.
func (s *session) wantUnprocessable(message bool, reqs []*request) error {
	for _, r := range reqs {
		ex, err := s.do(r)
		if err != nil {
			return err
		}
		if message {
			err = ex.wantError("422", func(s int) bool { return s == http.StatusUnprocessableEntity })
		} else if ex.status != http.StatusUnprocessableEntity {
			err = ex.failf("want 422 with a JSON object")
		} else if _, jerr := ex.object(); jerr != nil {
			err = ex.failf("want 422 with a JSON object (%v)", jerr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkMalformedJSON(s *session) error {
	reqs, err := s.bodyOperations(`{"input": "cut short`, `{input: unquoted}`)
	if err != nil {
		return err
	}
	return s.wantUnprocessable(false, reqs)
}

func checkMistypedBody(s *session) error {
	reqs, err := s.bodyOperations(`{"input": 5}`, `{"input": ["a"]}`, `[]`, `"text"`)
	if err != nil {
		return err
	}
	return s.wantUnprocessable(true, reqs)
}

func checkAdditionalInputNotObject(s *session) error {
	reqs, err := s.bodyOperations(`{"input": "x", "additional_input": "x"}`, `{"additional_input": 5}`,
		`{"additional_input": [1]}`, `{"additional_input": true}`)
	if err != nil {
		return err
	}
	return s.wantUnprocessable(true, reqs)
}

func checkInvalidText(s *session) error {
	reqs, err := s.bodyOperations("{\"input\": \"caf\xe9\"}", `{"input": "lone \ud800 surrogate"}`)
	if err != nil {
		return err
	}
	return s.wantUnprocessable(true, reqs)
}

func checkUnknownRoute(s *session) error {
	taskID, err := s.newTask("a task to look beside")
	if err != nil {
		return err
	}
	return s.wantNotFound(get("/agent/nothing"), get(taskPath(taskID, "nothing")))
}

func checkWrongMethod(s *session) error {
	taskID, err := s.newTask("a task to send the wrong methods to")
	if err != nil {
		return err
	}
	for _, r := range []*request{
		{method: "DELETE", path: "/agent/tasks"},
		{method: "PUT", path: taskPath(taskID)},
		{method: "DELETE", path: taskPath(taskID, "steps")},
	} {
		ex, err := s.do(r)
		if err != nil {
			return err
		}
		if err := ex.wantError("405", func(s int) bool { return s == http.StatusMethodNotAllowed }); err != nil {
			return err
		}
		if ex.header.Get("Allow") == "" {
			return ex.failf("want an Allow header naming the methods the path has")
		}
	}
	return nil
}
