package httpapi

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// Bodies as clients send them, for the cost of taking one at the edge.
const (
	benchTaskBody = `{"input":"Write the word 'Washington' to a file called output.txt",` +
		`"additional_input":{"model":"gpt-4o","temperature":0.7,"max_tokens":256,"tags":["demo","ci"]}}`
	benchPlannedTaskBody = `{"input":"Summarise the report","title":"Weekly report","description":"From the uploads",` +
		`"steps":["Fetch",{"name":"Summarise","input":"in 3 lines","additional_input":{"lang":"en"}},"Publish"],` +
		`"additional_input":{"model":"gpt-4o"}}`
	benchStepBody = `{"input":"next","additional_input":{"temperature":0.2}}`
)

// BenchmarkDecodeBody is what execute-step and create-task spend on a
// body at the edge: decodeBody, its reading, checking and decoding, from
// a request made anew each time (most of what a request costs here is
// making it); and decodeJSON alone, on a body already checked.
func BenchmarkDecodeBody(b *testing.B) {
	s := &Server{cfg: ServerConfig{MaxBodyBytes: 1 << 20, BodyTimeout: time.Second, MinBodyRate: 1024}}
	for _, c := range []struct {
		name string
		body string
		v    func() any
	}{
		{"create_task", benchTaskBody, func() any { return new(protocol.TaskRequestBody) }},
		{"create_task_planned", benchPlannedTaskBody, func() any { return new(protocol.TaskRequestBody) }},
		{"execute_step", benchStepBody, func() any { return new(protocol.StepRequestBody) }},
	} {
		body := []byte(c.body)
		b.Run(c.name+"/decodeBody", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decodeRequestBody(s, body, c.v()); err != nil {
					b.Fatal(err)
				}
			}
		})
		// readBody with and without the check of member names, in one
		// binary: what the check adds to the pass over the body.
		v := c.v()
		for _, names := range []struct {
			name   string
			fields func() *protocol.JSONFields
		}{{"readBody", func() *protocol.JSONFields { return fieldsOf(v) }}, {"readBody_no_names", func() *protocol.JSONFields { return nil }}} {
			b.Run(c.name+"/"+names.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest("POST", Prefix+"/agent/tasks", bytes.NewReader(body))
					if _, err := s.readBody(httptest.NewRecorder(), r, names.fields()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name+"/decodeJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decodeJSON(body, c.v()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
