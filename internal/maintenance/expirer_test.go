package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// expireExec answers JobExpire with the batch sizes in sizes, then an error.
type expireExec struct {
	sizes []int
	calls int
}

func (e *expireExec) JobExpire(ctx context.Context, p *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	if e.calls >= len(e.sizes) {
		return nil, errors.New("database away")
	}
	n := min(e.sizes[e.calls], p.Limit)
	e.calls++
	rows := make([]*leasetype.JobRow, n)
	for i := range rows {
		rows[i] = &leasetype.JobRow{ID: int64(i + 1), State: leasetype.JobStateAvailable}
	}
	return rows, nil
}

func TestExpirerRunOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		sizes            []int
		wantTotal        int
		wantCalls        int
		wantNotification int
	}{
		{"nothing expired", []int{0}, 0, 1, 0},
		{"one partial batch", []int{3}, 3, 1, 1},
		{"full batches are followed at once", []int{10, 10, 4}, 24, 3, 3},
		{"an error ends the round with what was reclaimed", []int{10}, 10, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exec := &expireExec{sizes: tc.sizes}
			notified := 0
			e := &Expirer{Exec: exec, Limit: 10, Logger: slog.New(slog.DiscardHandler), OnExpired: func(rows []*leasetype.JobRow) { notified++ }}
			if got := e.RunOnce(context.Background()); got != tc.wantTotal {
				t.Fatalf("RunOnce = %d, want %d", got, tc.wantTotal)
			}
			if exec.calls != tc.wantCalls || notified != tc.wantNotification {
				t.Fatalf("statements %d, notifications %d; want %d, %d", exec.calls, notified, tc.wantCalls, tc.wantNotification)
			}
		})
	}
}
