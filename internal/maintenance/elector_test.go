package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// leaderExec holds one leader row; err, when set, fails every statement.
type leaderExec struct {
	row     *driver.LeaderRow
	err     error
	resigns int
}

func (e *leaderExec) LeaderAttempt(ctx context.Context, p *driver.LeaderParams) (*driver.LeaderRow, error) {
	if e.err != nil {
		return nil, e.err
	}
	if e.row == nil {
		e.row = &driver.LeaderRow{Name: p.Name, Owner: p.Owner, Token: 1}
	}
	return e.row, nil
}

func (e *leaderExec) LeaderResign(ctx context.Context, p *driver.LeaderParams) error {
	if e.row != nil && e.row.Owner == p.Owner && e.row.Token == p.Token {
		e.resigns++
		e.row = nil
	}
	return nil
}

func TestElector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := &leaderExec{}
	e := &Elector{Exec: exec, Name: LeaderMaintenance, Owner: "a", TTL: 60 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if tok := e.Attempt(ctx); tok != 1 {
		t.Fatalf("first attempt: token %d, want 1", tok)
	}
	if e.Wait() != e.TTL/3 {
		t.Fatalf("leader waits %s, want TTL/3", e.Wait())
	}

	// A failing renewal keeps the lease until the local deadline, then drops it.
	exec.err = errors.New("database away")
	if tok := e.Attempt(ctx); tok != 1 {
		t.Fatalf("failed renewal before the local deadline: token %d, want 1", tok)
	}
	time.Sleep(e.TTL)
	if tok := e.Attempt(ctx); tok != 0 {
		t.Fatalf("failed renewal past the local deadline: token %d, want 0", tok)
	}
	if e.Wait() != e.TTL/6 {
		t.Fatalf("follower waits %s, want TTL/6", e.Wait())
	}

	// Another owner holds it: not leader.
	exec.err = nil
	exec.row = &driver.LeaderRow{Name: LeaderMaintenance, Owner: "b", Token: 2}
	if tok := e.Attempt(ctx); tok != 0 {
		t.Fatalf("lease held by another owner: token %d, want 0", tok)
	}

	// Taken again, then resigned: the row is gone at once.
	exec.row = nil
	if tok := e.Attempt(ctx); tok != 1 {
		t.Fatalf("retaken: token %d, want 1", tok)
	}
	e.Resign()
	if exec.resigns != 1 || exec.row != nil {
		t.Fatalf("resign: %d resignations, row %v", exec.resigns, exec.row)
	}
	e.Resign() // holds nothing: no statement
	if exec.resigns != 1 {
		t.Fatalf("a second Resign resigned again")
	}
}
