package maintenance

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

type cancelExec struct {
	refs  []driver.LeaseRef
	owner string
	calls int
}

func (e *cancelExec) JobCancelRequested(ctx context.Context, p *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	e.calls++
	e.owner = p.Owner
	return e.refs, nil
}

func TestCancelPollerRunOnce(t *testing.T) {
	t.Parallel()
	exec := &cancelExec{refs: []driver.LeaseRef{{ID: 1, Token: 3}, {ID: 2, Token: 1}}}
	holds := false
	var got []driver.LeaseRef
	p := &CancelPoller{
		Exec: exec, Owner: "host:1:a", Logger: slog.New(slog.DiscardHandler),
		HoldsLeases:       func() bool { return holds },
		OnCancelRequested: func(ref driver.LeaseRef) { got = append(got, ref) },
	}
	if n := p.RunOnce(context.Background()); n != 0 || exec.calls != 0 {
		t.Fatalf("without leases: reported %d, queried %d times; want 0, 0", n, exec.calls)
	}
	holds = true
	if n := p.RunOnce(context.Background()); n != 2 || exec.calls != 1 || exec.owner != "host:1:a" {
		t.Fatalf("with leases: reported %d, queried %d times for %q", n, exec.calls, exec.owner)
	}
	if !slices.Equal(got, exec.refs) {
		t.Fatalf("reported %v, want %v", got, exec.refs)
	}
}
