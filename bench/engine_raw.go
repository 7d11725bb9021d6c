package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/postgres"
)

// rawClaim is the hand-written claim on our schema: a materialized CTE picks
// up to $1 claimable jobs with FOR UPDATE SKIP LOCKED, and the update leases
// them with a new fencing token. It uses the same partial index as ours.
const rawClaim = `
WITH picked AS MATERIALIZED (
	SELECT id AS picked_id
	FROM leasehold_job
	WHERE state IN ('available', 'scheduled', 'retryable')
		AND queue = 'default'
		AND scheduled_at <= now()
	ORDER BY priority, scheduled_at, id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE leasehold_job SET
	state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = $2,
	leased_at = now(),
	lease_until = now() + interval '30 seconds'
FROM picked
WHERE id = picked.picked_id
RETURNING id, lease_token`

// rawComplete completes a batch, fenced by each job's token and lease.
const rawComplete = `
UPDATE leasehold_job SET state = 'completed', finalized_at = now()
FROM unnest($1::bigint[], $2::bigint[]) AS t(c_id, c_token)
WHERE id = t.c_id
	AND lease_token = t.c_token
	AND state = 'running'
	AND lease_until > now()`

// rawOps are the statements of the raw loop on one database.
type rawOps interface {
	// claim leases up to max claimable jobs to owner and appends their IDs
	// and new fencing tokens.
	claim(ctx context.Context, owner string, max int, ids, tokens []int64) ([]int64, []int64, error)
	// complete completes the jobs whose token and lease still hold, in one
	// statement, and returns how many it wrote.
	complete(ctx context.Context, ids, tokens []int64) (int64, error)
	reset(ctx context.Context) error
	analyze(ctx context.Context) error
}

// rawEngine is the limit of the approach: loops of batch claim and one
// fenced batch completion, no framework, no history, no heartbeats.
type rawEngine struct {
	ops      rawOps
	inserter engine // inserts the backlog with our bulk insert
	loops    int
	batch    int

	done   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
}

func newRawEngine(pool *pgxpool.Pool) (*rawEngine, error) {
	ins, err := newLeaseholdEngine("raw", postgres.New(pool), leasehold.Config{}, newHooks(), poolExec(pool), nil, "")
	if err != nil {
		return nil, err
	}
	return &rawEngine{ops: pgRaw{pool}, inserter: ins, loops: 4, batch: 1000}, nil
}

func (e *rawEngine) name() string { return "raw" }

func (e *rawEngine) reset(ctx context.Context) error { return e.ops.reset(ctx) }

func (e *rawEngine) analyze(ctx context.Context) error { return e.ops.analyze(ctx) }

func (e *rawEngine) insert(ctx context.Context, n int) error { return e.inserter.insert(ctx, n) }

func (e *rawEngine) insertOne(ctx context.Context, a benchArgs) error {
	return e.inserter.insertOne(ctx, a)
}

func (e *rawEngine) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done.Store(0)
	e.err = nil
	for i := range e.loops {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			// An error once the round is stopped comes from the stop (on
			// MySQL, database/sql rolls back a transaction whose context
			// ends and reports sql.ErrTxDone, not the context's error).
			if err := e.loop(ctx, fmt.Sprintf("raw-%d", i)); err != nil && ctx.Err() == nil {
				e.errMu.Lock()
				e.err = err
				e.errMu.Unlock()
			}
		}()
	}
	return nil
}

func (e *rawEngine) loop(ctx context.Context, owner string) error {
	ids := make([]int64, 0, e.batch)
	tokens := make([]int64, 0, e.batch)
	for ctx.Err() == nil {
		var err error
		ids, tokens, err = e.ops.claim(ctx, owner, e.batch, ids[:0], tokens[:0])
		if err != nil {
			return fmt.Errorf("raw: claim: %w", err)
		}
		if len(ids) == 0 {
			sleepCtx(ctx, time.Millisecond) // the whole poll
			continue
		}
		// The handlers would run here; the jobs are no-ops.
		n, err := e.ops.complete(ctx, ids, tokens)
		if err != nil {
			return fmt.Errorf("raw: complete: %w", err)
		}
		e.done.Add(n)
	}
	return ctx.Err()
}

func (e *rawEngine) stop(context.Context) error {
	if e.cancel != nil {
		e.cancel()
		e.wg.Wait()
	}
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
}

func (e *rawEngine) completed() int64 { return e.done.Load() }

// pgRaw is the raw loop on Postgres: one statement to claim, one to complete.
type pgRaw struct{ pool *pgxpool.Pool }

func (r pgRaw) claim(ctx context.Context, owner string, max int, ids, tokens []int64) ([]int64, []int64, error) {
	rows, err := r.pool.Query(ctx, rawClaim, max, owner)
	if err != nil {
		return ids, tokens, err
	}
	var id, token int64
	_, err = pgx.ForEachRow(rows, []any{&id, &token}, func() error {
		ids, tokens = append(ids, id), append(tokens, token)
		return nil
	})
	return ids, tokens, err
}

func (r pgRaw) complete(ctx context.Context, ids, tokens []int64) (int64, error) {
	tag, err := r.pool.Exec(ctx, rawComplete, ids, tokens)
	return tag.RowsAffected(), err
}

func (r pgRaw) reset(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE leasehold_job, leasehold_attempt_log")
	return err
}

func (r pgRaw) analyze(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "ANALYZE leasehold_job")
	return err
}

func poolExec(pool *pgxpool.Pool) func(context.Context, string) error {
	return func(ctx context.Context, q string) error {
		_, err := pool.Exec(ctx, q)
		return err
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
