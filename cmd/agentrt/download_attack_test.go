package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A download handler hands the host bytes to send to a client: every
// length it names is checked against the plugin's memory and the
// download's limit (--max-artifact) before anything is written, nothing
// is copied on the host, a write outside the download handler or a
// change to the task from it is refused, and a flood of writes is
// stopped by the host-call limit with the download cut short.
func TestADownloadHandlersBytesAreBoundedBeforeTheHostSendsThem(t *testing.T) {
	p := startProcess(t, attackerPlugin(t), t.TempDir(), "--memory", "256MiB", "--max-artifact", "4MiB",
		"--max-host-calls", "10000", "--call-timeout", "10s")
	task := p.createTask(`{}`)
	ids := map[string]string{}
	for _, name := range []string{"dl-big", "dl-fault", "dl-limit", "dl-flood", "dl-mutate", "plain"} {
		ct, body := multipartBody(t, part{name: "file", fileName: name + ".txt", value: "stored " + name})
		a := doRequest(t, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/artifacts", ct, body).artifact(t)
		ids[name] = a.ArtifactID
	}
	get := func(name string) (*http.Response, []byte, error) {
		res, err := http.Get(p.url + downloadPath(task, ids[name]))
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res, b, err
	}

	// 200 MiB named in one call, three at once: refused by its length,
	// before a byte is sent or copied.
	peak := p.peakSince(t)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, b, err := get("dl-big")
			if err != nil || res.StatusCode != 200 || !strings.HasPrefix(string(b), "-5 ") || !strings.Contains(string(b), "more than 4194304 bytes") {
				t.Errorf("dl-big: %v %v %.200q", res.StatusCode, err, b)
			}
		}()
	}
	wg.Wait()
	if grew := peak(); grew > 32*mib {
		t.Errorf("3 downloads naming 200 MiB each: the server's peak resident memory grew by %d MiB", grew/mib)
	}
	// A range past the plugin's memory.
	if _, b, err := get("dl-fault"); err != nil || !strings.HasPrefix(string(b), "-2 ") || !strings.Contains(string(b), "outside the plugin's memory") {
		t.Errorf("dl-fault: %v %q", err, b)
	}
	// 1 MiB at a time: exactly the limit reaches the client.
	if _, b, err := get("dl-limit"); err != nil || len(b) != 4*mib || bytes.Count(b, []byte("L")) != len(b) {
		t.Errorf("dl-limit: %v, %d bytes, want %d", err, len(b), 4*mib)
	}
	if logs := string(p.do("GET", "/ap/v1/agent/tasks/"+task+"/logs", "", "").want(t, 200).body); !strings.Contains(logs, "refused: -5") {
		t.Errorf("the plugin's log: %s", logs)
	}
	// A byte at a time, for ever: stopped by the host-call limit, after
	// bytes went out, so the download is cut short.
	res, b, err := get("dl-flood")
	if res == nil || res.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || len(b) > 10000 {
		t.Errorf("dl-flood: %v, %d bytes, %v; want 200, at most 10000 bytes, cut short", res, len(b), err)
	}
	// No change to the task from a download.
	if _, b, err := get("dl-mutate"); err != nil || string(b) != "-6 -6 -6" {
		t.Errorf("dl-mutate: %v %q", err, b)
	}
	var list struct{ Artifacts []artifactJSON }
	p.do("GET", "/ap/v1/agent/tasks/"+task+"/artifacts", "", "").want(t, 200).decode(t, &list)
	if len(list.Artifacts) != 6 {
		t.Errorf("the task holds %d artifacts after the downloads, want 6", len(list.Artifacts))
	}
	if _, b, err := get("dl-mutate"); err != nil || string(b) != "-6 -6 -6" {
		t.Errorf("dl-mutate again (its upload still in the workspace): %v %q", err, b)
	}
	// Outside the download handler, download_write reaches nothing.
	if got := output(t, p.step(task, "dl-write")); !strings.HasPrefix(got, "-6 only the download handler writes a download") {
		t.Errorf("download_write in a step: %q", got)
	}
	// Left to the host: the stored bytes.
	if _, b, err := get("plain"); err != nil || string(b) != "stored plain" {
		t.Errorf("plain: %v %q", err, b)
	}
}
