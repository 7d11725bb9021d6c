package sqlbackend

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/driver"
)

// Tx is the state of a transaction a backend started: one on its pool, or a
// savepoint nested in another transaction. It ends once, by Commit or
// Rollback; ending it also ends the transactions nested in it, which Open
// then reports.
type Tx struct {
	parent *Tx
	end    func(ctx context.Context, commit bool) error
	mu     sync.Mutex
	done   bool
}

// NewTx returns the state of a transaction nested in parent, nil when it
// has no parent the backend started (on the pool, or a savepoint in a
// user's transaction). end commits it (or releases the savepoint) when
// commit is set and rolls it back otherwise; it runs at most once.
func NewTx(parent *Tx, end func(ctx context.Context, commit bool) error) *Tx {
	return &Tx{parent: parent, end: end}
}

// Open returns driver.ErrClosed once t, or a transaction it is nested in,
// has ended. A nil Tx (the pool or a user's transaction) is always open.
func (t *Tx) Open() error {
	for ; t != nil; t = t.parent {
		if t.isDone() {
			return driver.ErrClosed
		}
	}
	return nil
}

// isDone reports whether t itself has ended.
func (t *Tx) isDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// Commit commits the transaction, or releases the savepoint. It returns
// driver.ErrClosed when the transaction or one it is nested in has ended.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.parent.Open(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return driver.ErrClosed
	}
	t.done = true
	return t.end(ctx, true)
}

// Rollback rolls the transaction back; after Commit or Rollback it does
// nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil
	}
	t.done = true
	if t.parent != nil && t.parent.isDone() {
		return nil // the parent's end already undid it
	}
	return t.end(ctx, false)
}
