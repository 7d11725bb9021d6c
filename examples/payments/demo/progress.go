package demo

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasehold/leasehold/examples/payments"
)

// liveCounts are the fault and recovery counters shown while running.
type liveCounts struct {
	crashes, pauses, expiries, fenced, reconciled, pspCharges int64
}

// progress prints live progress: one redrawn line on a terminal, a plain
// line a second otherwise.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	drawn    bool
}

func newProgress(w io.Writer, terminal bool, total int) *progress {
	return &progress{w: w, terminal: terminal, total: total}
}

func (p *progress) interval() time.Duration {
	if p.terminal {
		return 200 * time.Millisecond
	}
	return time.Second
}

func (p *progress) update(c payments.Counts, lc liveCounts, elapsed time.Duration) {
	if p.w == nil {
		return
	}
	settled := c.Succeeded + c.Failed
	line := fmt.Sprintf("%5.1fs  settled %d/%d (succeeded %d, failed %d)  psp charges %d  crashes %d  pauses %d  expiries %d  fenced %d  reconciled %d",
		elapsed.Seconds(), settled, p.total, c.Succeeded, c.Failed, lc.pspCharges, lc.crashes, lc.pauses, lc.expiries, lc.fenced, lc.reconciled)
	if !p.terminal {
		fmt.Fprintln(p.w, line)
		return
	}
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = int(settled) * width / p.total
	}
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	fmt.Fprintf(p.w, "\r\x1b[K[%s] %s", bar, line)
	p.drawn = true
}

// done ends the redrawn line.
func (p *progress) done() {
	if p.w != nil && p.drawn {
		fmt.Fprintln(p.w)
	}
}
