package conformance

import (
	"net/http"
	"strings"
)

// officialUpload is the file the official suite uploads: test_output.txt,
// which its script writes with echo.
var officialUpload = upload{fileName: "test_output.txt", data: []byte("Washington\n")}

var uploadChecks = []Check{{
	ID: "uploads.upload", Group: "uploads", Level: LevelSpec,
	Asserts: `upload-artifact (multipart "file") answers 200 with an Artifact: its file_name, agent_created false`,
	Official: []string{
		"Artifacts / Upload Artifact: Response status code is 200",
	},
	run: checkUpload,
}, {
	ID: "uploads.relative-path", Group: "uploads", Level: LevelSpec,
	Asserts: "an upload's relative_path is the artifact's relative_path (docs/in, or docs/in/)",
	run:     checkUploadRelativePath,
}, {
	ID: "uploads.traversal-refused", Group: "uploads", Level: LevelStrict,
	Asserts: `a relative_path that climbs out of the workspace (../x, a/../../x, ..\x) is refused with a 4xx and a JSON {"message"}`,
	run:     checkUploadTraversal,
}, {
	ID: "uploads.absolute-refused", Group: "uploads", Level: LevelStrict,
	Asserts: `an absolute relative_path (/tmp/agentrt-check, /etc/agentrt-check) is refused with a 4xx and a JSON {"message"}`,
	run:     checkUploadAbsolute,
}, {
	ID: "uploads.file-name-directory", Group: "uploads", Level: LevelStrict,
	Asserts: `an upload's file name loses a client directory part: C:\Users\me\notes.txt is notes.txt, dir/sub/notes.txt is notes.txt`,
	run:     checkUploadFileNameDirectory,
}, {
	ID: "uploads.no-file", Group: "uploads", Level: LevelStrict,
	Asserts: `an upload without a "file" part (a multipart body without one, a JSON body, no body) is 422 with a JSON {"message"}`,
	run:     checkUploadWithoutFile,
}}

// uploadArtifact uploads to the task and returns the artifact.
func (s *session) uploadArtifact(taskID string, u upload) (object, *exchange, error) {
	ex, err := s.do(u.request(taskID))
	if err != nil {
		return nil, ex, err
	}
	art, err := ex.wantObject("an Artifact")
	if err != nil {
		return nil, ex, err
	}
	if err := artifactShape(art); err != nil {
		return nil, ex, ex.failf("want an Artifact (%v)", err)
	}
	return art, ex, nil
}

func checkUpload(s *session) error {
	taskID, err := s.newTask(washingtonInput)
	if err != nil {
		return err
	}
	art, ex, err := s.uploadArtifact(taskID, officialUpload)
	if err != nil {
		return err
	}
	if got := art.str("file_name"); got != officialUpload.fileName {
		return ex.failf("want file_name %q, not %q", officialUpload.fileName, got)
	}
	if art["agent_created"] != false {
		return ex.failf("want agent_created false: the client uploaded it")
	}
	return nil
}

// cleanDir is a relative_path as compared: without a leading "./" or a
// trailing "/".
func cleanDir(p string) string {
	return strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
}

func checkUploadRelativePath(s *session) error {
	taskID, err := s.newTask("a task to upload to")
	if err != nil {
		return err
	}
	const dir = "docs/in"
	art, ex, err := s.uploadArtifact(taskID, upload{fileName: "notes.txt", data: []byte("notes"), relativePath: ptr(dir)})
	if err != nil {
		return err
	}
	if got, _ := art["relative_path"].(string); cleanDir(got) != dir {
		return ex.failf("want relative_path %q", dir)
	}
	return nil
}

// wantRefused uploads with each relative_path and wants each refused.
func (s *session) wantRefused(paths ...string) error {
	taskID, err := s.newTask("a task to upload to")
	if err != nil {
		return err
	}
	for _, p := range paths {
		ex, err := s.do(upload{fileName: "escape.txt", data: []byte("escape"), relativePath: ptr(p)}.request(taskID))
		if err != nil {
			return err
		}
		if err := ex.wantError("a 4xx (refused)", is4xx); err != nil {
			return err
		}
	}
	return nil
}

func checkUploadTraversal(s *session) error {
	return s.wantRefused("../x", "a/../../x", `..\x`)
}

func checkUploadAbsolute(s *session) error {
	return s.wantRefused("/tmp/agentrt-check", "/etc/agentrt-check")
}

func checkUploadFileNameDirectory(s *session) error {
	taskID, err := s.newTask("a task to upload to")
	if err != nil {
		return err
	}
	for _, name := range []string{`C:\Users\me\notes.txt`, "dir/sub/notes.txt"} {
		art, ex, err := s.uploadArtifact(taskID, upload{fileName: name, data: []byte("notes")})
		if err != nil {
			return err
		}
		if got := art.str("file_name"); got != "notes.txt" {
			return ex.failf("want file_name %q, not %q", "notes.txt", got)
		}
	}
	return nil
}

func checkUploadWithoutFile(s *session) error {
	taskID, err := s.newTask("a task to upload to")
	if err != nil {
		return err
	}
	for _, r := range []*request{
		upload{noFile: true, relativePath: ptr("docs")}.request(taskID),
		postJSON(taskPath(taskID, "artifacts"), `{"file": "Washington"}`),
		{method: "POST", path: taskPath(taskID, "artifacts")},
	} {
		ex, err := s.do(r)
		if err != nil {
			return err
		}
		if err := ex.wantError("422", func(s int) bool { return s == http.StatusUnprocessableEntity }); err != nil {
			return err
		}
	}
	return nil
}
