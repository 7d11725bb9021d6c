package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/examples/payments"
)

// recoveryTracker measures, for every job a fault interrupted, the time
// from the fault to the job running again: claimed under a newer lease
// (its fencing token grew) or finished (completed, discarded, cancelled —
// for a stuck charge, by reconciliation).
type recoveryTracker struct {
	db *sql.DB

	mu      sync.Mutex
	pending map[int64]*trackedJob
	max     time.Duration
	maxBy   map[string]time.Duration
	tracked int
}

type trackedJob struct {
	id, token int64
	fault     string
	at        time.Time
}

func newRecoveryTracker(db *sql.DB) *recoveryTracker {
	return &recoveryTracker{db: db, pending: map[int64]*trackedJob{}, maxBy: map[string]time.Duration{}}
}

// snapshot records the running jobs held by the worker with client ID
// owner (every running job when owner is empty), just before a fault.
func (t *recoveryTracker) snapshot(ctx context.Context, fault, owner string) error {
	q := `SELECT id, lease_token FROM leasehold_job WHERE state = 'running'`
	if owner != "" {
		// The owner is "host:pid:client-id"; client IDs are unique per
		// process and made by the harness of letters, digits and dashes.
		q += ` AND lease_owner LIKE '%:` + owner + `'`
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := t.db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("snapshot running jobs: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for rows.Next() {
		var j trackedJob
		if err := rows.Scan(&j.id, &j.token); err != nil {
			return err
		}
		j.fault, j.at = fault, now
		if _, ok := t.pending[j.id]; !ok {
			t.pending[j.id] = &j
			t.tracked++
		}
	}
	return rows.Err()
}

// busyOwners returns the client IDs of the workers holding running
// charge jobs now.
func (t *recoveryTracker) busyOwners(ctx context.Context) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out := map[string]bool{}
	rows, err := t.db.QueryContext(ctx, `SELECT DISTINCT lease_owner FROM leasehold_job WHERE state = 'running' AND kind = '`+payments.ChargeKind+`'`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var owner sql.NullString
		if rows.Scan(&owner) == nil && owner.Valid {
			// "host:pid:client-id"
			out[owner.String[strings.LastIndexByte(owner.String, ':')+1:]] = true
		}
	}
	return out
}

// poll checks the tracked jobs once.
func (t *recoveryTracker) poll(ctx context.Context) error {
	t.mu.Lock()
	ids := make([]string, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, fmt.Sprint(id))
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := t.db.QueryContext(ctx, `SELECT id, state, lease_token FROM leasehold_job WHERE id IN (`+strings.Join(ids, ",")+`)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for rows.Next() {
		var id, token int64
		var state string
		if err := rows.Scan(&id, &state, &token); err != nil {
			return err
		}
		j := t.pending[id]
		if j == nil {
			continue
		}
		if token > j.token || state == "completed" || state == "discarded" || state == "cancelled" {
			d := now.Sub(j.at)
			t.max = max(t.max, d)
			t.maxBy[j.fault] = max(t.maxBy[j.fault], d)
			delete(t.pending, id)
		}
	}
	return rows.Err()
}

// run polls every interval until ctx ends.
func (t *recoveryTracker) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = t.poll(ctx) // the database may be restarting: try again next tick
		}
	}
}

// result returns the longest recovery, per fault kind too, and how many
// tracked jobs never recovered.
func (t *recoveryTracker) result() (time.Duration, map[string]int64, int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := map[string]int64{}
	for k, v := range t.maxBy {
		by[k] = v.Milliseconds()
	}
	return t.max, by, len(t.pending), t.tracked
}
