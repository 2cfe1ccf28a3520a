package conformance

import "slices"

var artifactChecks = []Check{{
	ID: "artifacts.list", Group: "artifacts", Level: LevelSpec,
	Asserts: "list-artifacts answers 200 with an object whose artifacts are Artifacts",
	run:     checkListArtifacts,
}, {
	ID: "artifacts.uploaded-listed", Group: "artifacts", Level: LevelSpec,
	Asserts: "an uploaded artifact is listed by list-artifacts, with its file_name and agent_created false",
	run:     checkUploadedListed,
}, {
	ID: "artifacts.in-task", Group: "artifacts", Level: LevelStrict,
	Asserts: "an uploaded artifact is among the artifacts of get-task",
	run:     checkUploadedInTask,
}, {
	ID: "artifacts.agent-created", Group: "artifacts", Level: LevelSpec,
	Asserts: "an artifact a step created is agent_created and listed by list-artifacts",
	Needs:   "an agent that creates an artifact for the official suite's task",
	run:     checkAgentCreated,
}}

func checkListArtifacts(s *session) error {
	taskID, _, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	ex, err := s.do(get(taskPath(taskID, "artifacts")))
	if err != nil {
		return err
	}
	o, err := ex.wantObject("an object with artifacts")
	if err != nil {
		return err
	}
	arr, ok := o["artifacts"].([]any)
	if !ok {
		return ex.failf("want artifacts, an array (it is %s)", describeAbsent(o, "artifacts"))
	}
	for i, v := range arr {
		a, ok := v.(map[string]any)
		if !ok {
			return ex.failf("want artifacts[%d] an Artifact, not a JSON %s", i, kind(v))
		}
		if err := artifactShape(a); err != nil {
			return ex.failf("want artifacts[%d] an Artifact (%v)", i, err)
		}
	}
	return nil
}

// findArtifact gets list-artifacts of the task (a page of 100) and
// returns the artifact with the id, or nil.
func (s *session) findArtifact(taskID, artifactID string) (object, *exchange, error) {
	l, ex, err := s.list(taskPath(taskID, "artifacts")+page(1, 100), "artifacts", artifactShape)
	if err != nil {
		return nil, ex, err
	}
	for _, a := range l.items {
		if a.str("artifact_id") == artifactID {
			return a, ex, nil
		}
	}
	return nil, ex, nil
}

func checkUploadedListed(s *session) error {
	taskID, artifactID, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	art, ex, err := s.findArtifact(taskID, artifactID)
	if err != nil {
		return err
	}
	if art == nil {
		return ex.failf("want the uploaded artifact %q listed", artifactID)
	}
	if art.str("file_name") != officialUpload.fileName || art["agent_created"] != false {
		return ex.failf("want artifact %q listed with file_name %q and agent_created false", artifactID, officialUpload.fileName)
	}
	return nil
}

func checkUploadedInTask(s *session) error {
	taskID, artifactID, err := s.uploaded(officialUpload)
	if err != nil {
		return err
	}
	ex, err := s.do(get(taskPath(taskID)))
	if err != nil {
		return err
	}
	task, err := ex.wantObject("the Task")
	if err != nil {
		return err
	}
	if !slices.Contains(ids(task.objects("artifacts"), "artifact_id"), artifactID) {
		return ex.failf("want the uploaded artifact %q among the task's artifacts", artifactID)
	}
	return nil
}

func checkAgentCreated(s *session) error {
	w, err := s.washingtonWithArtifacts()
	if err != nil {
		return err
	}
	for _, art := range w.artifacts {
		id := art.str("artifact_id")
		listed, ex, err := s.findArtifact(w.taskID, id)
		if err != nil {
			return err
		}
		if listed == nil {
			return ex.failf("want the artifact %q the step created listed", id)
		}
		if listed["agent_created"] != true {
			return ex.failf("want the artifact %q the step created listed with agent_created true", id)
		}
	}
	return nil
}
