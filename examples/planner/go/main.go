// Command planner is an agent that plans its work: creating a task plans
// three named steps, and each executed step does one of them in the task's
// workspace, ending with a report published as an artifact.
//
//  1. count words: counts the words of every file uploaded to the task (or,
//     if none, of the task's input) into work/counts.tsv;
//  2. rank words: ranks the ten most frequent into work/top.tsv;
//  3. write report: writes report.md and publishes it; the last step.
//
// A word is a run of ASCII letters and digits, lowercased, so that every
// language's build of this example gives the same answers.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o planner-go.wasm .
package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	agent "github.com/agentrt/agentrt/plugins/go"
)

func init() {
	agent.HandleTask(func(t *agent.Task) ([]agent.PlannedStep, error) {
		agent.Logf("planned 3 steps")
		return []agent.PlannedStep{
			{Name: "count words", Input: "Count the words of the uploaded text files"},
			{Name: "rank words", Input: "Rank the ten most frequent words"},
			{Name: "write report", Input: "Write report.md and publish it"},
		}, nil
	})
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		switch s.Name {
		case "count words":
			return countWords(s)
		case "rank words":
			return rankWords()
		case "write report":
			return writeReport()
		}
		return agent.Result{Output: "The report is done; nothing left to do.", IsLast: true}, nil
	})
}

// countWords counts the words of the uploaded files into work/counts.tsv
// and lists the files in work/sources.txt.
func countWords(s *agent.Step) (agent.Result, error) {
	files, err := agent.ListFiles("")
	if err != nil {
		return agent.Result{}, err
	}
	counts := map[string]int{}
	var sources []string
	total := 0
	for _, f := range files {
		if strings.HasPrefix(f.Path, "work/") || f.Path == "report.md" {
			continue
		}
		text, err := agent.ReadFile(f.Path)
		if err != nil {
			return agent.Result{}, err
		}
		total += count(string(text), counts)
		sources = append(sources, f.Path)
	}
	if len(sources) == 0 {
		total += count(s.Task.Input, counts)
		sources = append(sources, "(task input)")
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Strings(words)
	var tsv strings.Builder
	for _, w := range words {
		fmt.Fprintf(&tsv, "%s\t%d\n", w, counts[w])
	}
	if err := agent.WriteFile("work/counts.tsv", []byte(tsv.String())); err != nil {
		return agent.Result{}, err
	}
	if err := agent.WriteFile("work/sources.txt", []byte(strings.Join(sources, "\n")+"\n")); err != nil {
		return agent.Result{}, err
	}
	agent.Logf("counted %d words in %s", total, strings.Join(sources, ", "))
	return agent.Result{
		Output:           fmt.Sprintf("Counted %d words (%d distinct) in %d files", total, len(words), len(sources)),
		AdditionalOutput: map[string]int{"words": total, "distinct": len(words), "files": len(sources)},
	}, nil
}

// count adds the words of text to counts and returns how many it found.
func count(text string, counts map[string]int) int {
	n := 0
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		counts[w]++
		n++
	}
	return n
}

type wordCount struct {
	word  string
	count int
}

// readCounts reads work/counts.tsv.
func readCounts() ([]wordCount, error) {
	b, err := agent.ReadFile("work/counts.tsv")
	if errors.Is(err, agent.ErrNotFound) {
		return nil, errors.New("there are no counts yet: the step \"count words\" runs first")
	} else if err != nil {
		return nil, err
	}
	var wcs []wordCount
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		word, n, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		c, err := strconv.Atoi(n)
		if err != nil {
			return nil, fmt.Errorf("work/counts.tsv: bad count %q", n)
		}
		wcs = append(wcs, wordCount{word, c})
	}
	return wcs, nil
}

// rankWords writes the ten most frequent words to work/top.tsv.
func rankWords() (agent.Result, error) {
	wcs, err := readCounts()
	if err != nil {
		return agent.Result{}, err
	}
	sort.SliceStable(wcs, func(i, j int) bool {
		if wcs[i].count != wcs[j].count {
			return wcs[i].count > wcs[j].count
		}
		return wcs[i].word < wcs[j].word
	})
	if len(wcs) > 10 {
		wcs = wcs[:10]
	}
	var tsv strings.Builder
	for i, wc := range wcs {
		fmt.Fprintf(&tsv, "%d\t%s\t%d\n", i+1, wc.word, wc.count)
	}
	if err := agent.WriteFile("work/top.tsv", []byte(tsv.String())); err != nil {
		return agent.Result{}, err
	}
	if len(wcs) == 0 {
		return agent.Result{Output: "There are no words to rank"}, nil
	}
	return agent.Result{Output: fmt.Sprintf("The most frequent word is '%s' (%d times)", wcs[0].word, wcs[0].count)}, nil
}

// writeReport writes report.md from the counts and the ranking and
// publishes it.
func writeReport() (agent.Result, error) {
	wcs, err := readCounts()
	if err != nil {
		return agent.Result{}, err
	}
	top, err := agent.ReadFile("work/top.tsv")
	if errors.Is(err, agent.ErrNotFound) {
		return agent.Result{}, errors.New("there is no ranking yet: the step \"rank words\" runs first")
	} else if err != nil {
		return agent.Result{}, err
	}
	sources, err := agent.ReadFile("work/sources.txt")
	if err != nil {
		return agent.Result{}, err
	}
	total := 0
	for _, wc := range wcs {
		total += wc.count
	}
	var r strings.Builder
	r.WriteString("# Word report\n\n")
	fmt.Fprintf(&r, "Sources: %s\n", strings.Join(strings.Split(strings.TrimSuffix(string(sources), "\n"), "\n"), ", "))
	fmt.Fprintf(&r, "Words: %d\nDistinct words: %d\n\n", total, len(wcs))
	r.WriteString("| Rank | Word | Count |\n|---:|---|---:|\n")
	for _, line := range strings.Split(strings.TrimSuffix(string(top), "\n"), "\n") {
		if line != "" {
			r.WriteString("| " + strings.ReplaceAll(line, "\t", " | ") + " |\n")
		}
	}
	if err := agent.WriteFile("report.md", []byte(r.String())); err != nil {
		return agent.Result{}, err
	}
	if _, err := agent.PublishFile("report.md", "report.md", ""); err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Output: "Wrote report.md", IsLast: true}, nil
}

func main() {}
