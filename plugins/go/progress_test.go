//go:build !wasm

package agent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

func TestProgressSendsTheMessageAndOutputAsTheyAre(t *testing.T) {
	tests := []struct {
		name   string
		report func() error
		want   [2]string
	}{
		{"a message", func() error { return Progress("calling the model (turn 1)") }, [2]string{"calling the model (turn 1)", ""}},
		{"an empty message", func() error { return Progress("") }, [2]string{"", ""}},
		{"with output", func() error { return ProgressOutput("drafting", "Dear Sir,\n") }, [2]string{"drafting", "Dear Sir,\n"}},
		{"no output is none", func() error { return ProgressOutput("drafting", "") }, [2]string{"drafting", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := useHost(t, &fakeHost{})
			if err := tt.report(); err != nil {
				t.Fatal(err)
			}
			if len(h.reports) != 1 || h.reports[0] != tt.want {
				t.Errorf("reported %q, want [%q]", h.reports, tt.want)
			}
		})
	}
}

func TestARefusedProgressReportIsAHostErrorOfProgress(t *testing.T) {
	for _, code := range []int32{abi.ErrLimit, abi.ErrNotAllowed} {
		t.Run(abi.ErrorName(code), func(t *testing.T) {
			msg := fmt.Sprintf("refused with %d", code)
			useHost(t, &fakeHost{fail: map[string]hostFailure{abi.FuncProgress: {code, msg}}})
			err := ProgressOutput("m", "o")
			var he *HostError
			if !errors.As(err, &he) || he.Func != abi.FuncProgress || he.Code != code || he.Message != msg {
				t.Fatalf("err = %#v, want a HostError of progress, code %d, message %q", err, code, msg)
			}
			if !errors.Is(err, &HostError{Code: code}) {
				t.Errorf("errors.Is(%v, code %d) is false", err, code)
			}
		})
	}
}
