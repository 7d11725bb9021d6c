package sqlbackend

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

// recorder returns an end function that records its calls.
func recorder(calls *[]bool) func(context.Context, bool) error {
	return func(_ context.Context, commit bool) error {
		*calls = append(*calls, commit)
		return nil
	}
}

func TestTxCommitOnce(t *testing.T) {
	ctx := context.Background()
	var calls []bool
	tx := NewTx(nil, recorder(&calls))
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("second commit: got %v, want driver.ErrClosed", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	if err := tx.Open(); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("open after commit: got %v, want driver.ErrClosed", err)
	}
	if len(calls) != 1 || !calls[0] {
		t.Fatalf("end calls: got %v, want [true]", calls)
	}
}

func TestTxNested(t *testing.T) {
	ctx := context.Background()
	var parentCalls, childCalls []bool
	parent := NewTx(nil, recorder(&parentCalls))
	child := NewTx(parent, recorder(&childCalls))
	if err := parent.Rollback(ctx); err != nil {
		t.Fatalf("parent rollback: %v", err)
	}
	if err := child.Open(); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("child open after parent ended: got %v, want driver.ErrClosed", err)
	}
	if err := child.Commit(ctx); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("child commit after parent ended: got %v, want driver.ErrClosed", err)
	}
	// The parent's rollback already undid the savepoint.
	if err := child.Rollback(ctx); err != nil {
		t.Fatalf("child rollback: %v", err)
	}
	if len(childCalls) != 0 {
		t.Fatalf("child end calls: got %v, want none", childCalls)
	}
}

func TestTxNilIsOpen(t *testing.T) {
	var tx *Tx
	if err := tx.Open(); err != nil {
		t.Fatalf("nil Tx open: %v", err)
	}
}
