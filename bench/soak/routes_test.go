package main

import (
	"strings"
	"testing"
)

func TestParseMixReadsWeights(t *testing.T) {
	m, err := parseMix(defaultMix)
	if err != nil {
		t.Fatal(err)
	}
	if m.total != 14 || m.weight[getTask] != 4 || m.weight[createTask] != 0 {
		t.Errorf("the default mix: total %d, get-task %d, create-task %d; want 14, 4, 0", m.total, m.weight[getTask], m.weight[createTask])
	}
	m, err = parseMix(" get-task = 3 , get-task=1,step-old=0")
	if err != nil {
		t.Fatal(err)
	}
	if m.total != 1 || m.weight[getTask] != 1 {
		t.Errorf("a route given twice: total %d, weight %d; want the last, 1", m.total, m.weight[getTask])
	}
	for in, want := range map[string]string{
		"get-task":          "route=weight",
		"get-task=-1":       "≥ 0",
		"get-task=x":        "≥ 0",
		"post-task=1":       "no route",
		"create-task=1":     "paced",
		"get-task=0":        "no route with a weight",
		"":                  "no route with a weight",
		"list-steps=2,,x=1": "no route",
	} {
		if _, err := parseMix(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseMix(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

// Drawing every number below the total once picks each route as often
// as its weight says.
func TestMixPickFollowsTheWeights(t *testing.T) {
	m, err := parseMix("step-recent=2,get-task=5,download-artifact=1")
	if err != nil {
		t.Fatal(err)
	}
	var got [nRoutes]int
	for n := range m.total {
		got[m.pick(n)]++
	}
	if got != m.weight {
		t.Errorf("picks %v, want the weights %v", got, m.weight)
	}
}
