// Command seed creates a fixed number of tasks on an Agent Protocol server
// and writes their ids, one a line, for bench/run.sh's wrk scripts.
//
//	go run ./bench/seed -url http://127.0.0.1:8000/ap/v1 -n 10000 -c 16 -out ids.txt
//
// Every create must answer 200 with a task_id, or seed stops with an error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "", "server base URL, e.g. http://127.0.0.1:8000/ap/v1 (required)")
	n := flag.Int("n", 10000, "tasks to create")
	c := flag.Int("c", 16, "concurrent requests")
	out := flag.String("out", "", "file to write the task ids to, one a line (required)")
	body := flag.String("body", `{"input":"hello","additional_input":{"n":1}}`, "JSON body of each create-task request")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if *base == "" || *out == "" || *n < 0 || *c < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: seed -url BASE_URL -out FILE [-n N] [-c C] [-body JSON]")
		os.Exit(2)
	}
	start := time.Now()
	ids, err := seed(strings.TrimSuffix(*base, "/")+"/agent/tasks", *n, *c, []byte(*body), *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
	if err := writeIDs(*out, ids); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "seed: created %d tasks in %.2fs (%.0f/s) -> %s\n", len(ids), d.Seconds(), float64(len(ids))/d.Seconds(), *out)
}

func seed(url string, n, c int, body []byte, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        c,
		MaxIdleConnsPerHost: c,
		IdleConnTimeout:     time.Minute,
	}}
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				id, err := create(ctx, client, url, body)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("task %d: %w", i, err); cancel() })
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ids, nil
}

func create(ctx context.Context, client *http.Client, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %.200s", url, resp.Status, data)
	}
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(data, &task); err != nil {
		return "", fmt.Errorf("POST %s: bad JSON: %w", url, err)
	}
	if task.TaskID == "" {
		return "", errors.New("POST " + url + ": answer has no task_id")
	}
	return task.TaskID, nil
}

func writeIDs(path string, ids []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
