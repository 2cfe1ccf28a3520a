package conformance

import (
	"bytes"
	"mime"
	"net/http"
)

var downloadChecks = []Check{{
	ID: "downloads.download", Group: "downloads", Level: LevelSpec,
	Asserts: "download-artifact of an uploaded file answers 200 with its bytes",
	Official: []string{
		"Artifacts / Download Artifact: Response status code is 200",
	},
	run: checkDownload,
}, {
	ID: "downloads.exact-bytes", Group: "downloads", Level: LevelSpec,
	Asserts: "a 64 KiB binary upload (every byte value, NUL, CR LF, bytes that are not UTF-8) downloads byte for byte",
	run:     checkDownloadExactBytes,
}, {
	ID: "downloads.content-type", Group: "downloads", Level: LevelSpec,
	Asserts: "a download is application/octet-stream",
	run:     checkDownloadContentType,
}, {
	ID: "downloads.attachment", Group: "downloads", Level: LevelStrict,
	Asserts: "a download has Content-Disposition: attachment with the artifact's file name",
	run:     checkDownloadAttachment,
}, {
	ID: "downloads.non-ascii-name", Group: "downloads", Level: LevelStrict,
	Asserts: "a file named résumé ✓.txt keeps its name: its file_name, and its Content-Disposition's filename* (RFC 5987)",
	run:     checkDownloadNonASCIIName,
}, {
	ID: "downloads.range", Group: "downloads", Level: LevelStrict,
	Asserts: "a download with Range: bytes=2-5 answers 206 with those 4 bytes",
	run:     checkDownloadRange,
}, {
	ID: "downloads.agent-artifact", Group: "downloads", Level: LevelSpec,
	Asserts: "an artifact the agent created downloads with 200",
	Needs:   "an agent that creates an artifact for the official suite's task",
	run:     checkDownloadAgentArtifact,
}}

// uploaded uploads u to a new task and returns the task's and the
// artifact's ids.
func (s *session) uploaded(u upload) (taskID, artifactID string, err error) {
	taskID, err = s.newTask(washingtonInput)
	if err != nil {
		return "", "", err
	}
	art, _, err := s.uploadArtifact(taskID, u)
	if err != nil {
		return "", "", setup(err, "upload an artifact to download")
	}
	return taskID, art.str("artifact_id"), nil
}

// download downloads an uploaded u and wants 200.
func (s *session) download(u upload, header ...string) (*exchange, error) {
	taskID, artifactID, err := s.uploaded(u)
	if err != nil {
		return nil, err
	}
	r := get(taskPath(taskID, "artifacts", artifactID))
	for i := 0; i+1 < len(header); i += 2 {
		r.withHeader(header[i], header[i+1])
	}
	return s.do(r)
}

func checkDownload(s *session) error {
	ex, err := s.download(officialUpload)
	if err != nil {
		return err
	}
	if err := ex.wantStatus(http.StatusOK); err != nil {
		return err
	}
	if !bytes.Equal(ex.body, officialUpload.data) {
		return ex.failf("want the bytes uploaded, %q", officialUpload.data)
	}
	return nil
}

// binaryFile is 64 KiB that no text transformation leaves alone.
func binaryFile() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	copy(b, "\x00\r\n\xff\xfe\xc3\x28 not UTF-8 \r\n")
	return b
}

func checkDownloadExactBytes(s *session) error {
	data := binaryFile()
	ex, err := s.download(upload{fileName: "binary.bin", data: data})
	if err != nil {
		return err
	}
	if err := ex.wantStatus(http.StatusOK); err != nil {
		return err
	}
	if !bytes.Equal(ex.body, data) {
		i := 0
		for i < len(data) && i < len(ex.body) && data[i] == ex.body[i] {
			i++
		}
		return ex.failf("want the %d bytes uploaded (the bytes differ from byte %d on)", len(data), i)
	}
	return nil
}

func checkDownloadContentType(s *session) error {
	ex, err := s.download(officialUpload)
	if err != nil {
		return err
	}
	if err := ex.wantStatus(http.StatusOK); err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(ex.header.Get("Content-Type")); mt != "application/octet-stream" {
		return ex.failf("want Content-Type application/octet-stream")
	}
	return nil
}

// wantAttachment fails unless the download is an attachment named name.
func (ex *exchange) wantAttachment(name string) error {
	if err := ex.wantStatus(http.StatusOK); err != nil {
		return err
	}
	cd := ex.header.Get("Content-Disposition")
	typ, params, err := mime.ParseMediaType(cd)
	if err != nil || typ != "attachment" {
		return ex.failf("want Content-Disposition: attachment; filename=…, not %q", cd)
	}
	// mime decodes an RFC 5987 filename* into filename, and prefers it.
	if got := params["filename"]; got != name {
		return ex.failf("want Content-Disposition naming the file %q, not %q (%s)", name, got, cd)
	}
	return nil
}

func checkDownloadAttachment(s *session) error {
	ex, err := s.download(officialUpload)
	if err != nil {
		return err
	}
	return ex.wantAttachment(officialUpload.fileName)
}

func checkDownloadNonASCIIName(s *session) error {
	const name = "résumé ✓.txt"
	taskID, err := s.newTask(washingtonInput)
	if err != nil {
		return err
	}
	art, ex, err := s.uploadArtifact(taskID, upload{fileName: name, data: []byte("CV")})
	if err != nil {
		return err
	}
	if got := art.str("file_name"); got != name {
		return ex.failf("want file_name %q, not %q", name, got)
	}
	ex, err = s.do(get(taskPath(taskID, "artifacts", art.str("artifact_id"))))
	if err != nil {
		return err
	}
	return ex.wantAttachment(name)
}

func checkDownloadRange(s *session) error {
	data := []byte("0123456789")
	ex, err := s.download(upload{fileName: "digits.txt", data: data}, "Range", "bytes=2-5")
	if err != nil {
		return err
	}
	if err := ex.wantStatus(http.StatusPartialContent); err != nil {
		return err
	}
	if !bytes.Equal(ex.body, data[2:6]) {
		return ex.failf("want bytes 2 to 5 of %q, %q", data, data[2:6])
	}
	return nil
}

func checkDownloadAgentArtifact(s *session) error {
	w, err := s.washingtonWithArtifacts()
	if err != nil {
		return err
	}
	for _, art := range w.artifacts {
		ex, err := s.do(get(taskPath(w.taskID, "artifacts", art.str("artifact_id"))))
		if err != nil {
			return err
		}
		if err := ex.wantStatus(http.StatusOK); err != nil {
			return err
		}
	}
	return nil
}
