package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// isTerminal reports whether w is a terminal (a character device), where
// a progress bar redrawn in place makes sense. It asks only the standard
// library: a terminal is an *os.File whose mode has os.ModeCharDevice.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// What a progress bar shows, and how often.
const (
	// progressMinBytes: a transfer draws a bar only once it is known to
	// move at least this much; smaller files come and go too fast to watch.
	progressMinBytes = 1 << 20
	// progressInterval is how often the bar is redrawn at most.
	progressInterval = 100 * time.Millisecond
	// progressCells is the width of the bar itself.
	progressCells = 24
)

// progressBar draws how an upload or download goes on one line of a
// terminal, redrawn in place with "\r" at most every progressInterval:
// the bar and percentage when the size is known, the bytes moved and the
// rate always. update is safe to call from the goroutine moving the bytes
// while another calls finish.
type progressBar struct {
	w     io.Writer
	label string
	now   func() time.Time

	mu          sync.Mutex
	start, last time.Time
	width       int // of the line drawn last; 0 while none is drawn
	done        bool
}

// newProgressBar returns a bar for the transfer named label, drawn on w
// (a terminal) with the time told by now.
func newProgressBar(w io.Writer, label string, now func() time.Time) *progressBar {
	return &progressBar{w: w, label: label, now: now}
}

// update records that done bytes of total (-1: unknown) have moved, and
// redraws the bar if it is due.
func (p *progressBar) update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	if p.start.IsZero() {
		p.start = t
	}
	if p.done || (total < progressMinBytes && done < progressMinBytes) {
		return
	}
	if p.width > 0 && t.Sub(p.last) < progressInterval && done != total {
		return
	}
	p.last = t
	line := p.label + "  " + progressLine(done, total, t.Sub(p.start))
	n := len([]rune(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(0, p.width-n)))
	p.width = n
}

// finish clears the bar's line, if one was drawn; later updates draw
// nothing.
func (p *progressBar) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

// progressLine is the bar's text after its label: "[=====>    ]  45%
// 12.3 MiB / 27.0 MiB  3.1 MiB/s", or without the bar, the percentage
// and the whole when total is unknown (-1).
func progressLine(done, total int64, elapsed time.Duration) string {
	var b strings.Builder
	if total > 0 {
		filled := min(int(done*progressCells/total), progressCells)
		b.WriteString("[" + strings.Repeat("=", filled))
		if filled < progressCells {
			b.WriteString(">" + strings.Repeat(" ", progressCells-filled-1))
		}
		fmt.Fprintf(&b, "] %3d%%  %s / %s", min(done*100/total, 100), humanBytes(done), humanBytes(total))
	} else {
		b.WriteString(humanBytes(done))
	}
	if elapsed > 0 {
		fmt.Fprintf(&b, "  %s/s", humanBytes(int64(float64(done)/elapsed.Seconds())))
	}
	return b.String()
}

// humanBytes is n bytes to three significant figures in binary units:
// "512 B", "12.3 KiB", "3.10 MiB".
func humanBytes(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v, unit = v/1024, u
		if v < 1024 {
			break
		}
	}
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f %s", v, unit)
	case v < 100:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}
