package leasehold

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// Insert inserts one job. With a UniqueKey it is idempotent: while a job
// with the key is unfinished, the existing job is returned with
// UniqueSkipped set. A client that works the job's queue and has a worker
// free inserts it leased to itself and starts it when Insert returns (see
// the package documentation, Claim order).
func (c *Client[TTx]) Insert(ctx context.Context, args JobArgs, opts *InsertOpts) (*InsertResult, error) {
	return c.core.insertOne(ctx, c.core.exec, args, opts, true)
}

// InsertTx inserts one job inside the caller's transaction: it exists only
// if the transaction commits, and becomes claimable then.
func (c *Client[TTx]) InsertTx(ctx context.Context, tx TTx, args JobArgs, opts *InsertOpts) (*InsertResult, error) {
	return c.core.insertOne(ctx, c.driver.UnwrapExecutor(tx), args, opts, false)
}

// InsertMany inserts jobs in one round trip and returns them in order.
func (c *Client[TTx]) InsertMany(ctx context.Context, params []InsertManyParams) ([]*InsertResult, error) {
	return c.core.insertMany(ctx, c.core.exec, params, true)
}

// InsertManyTx is InsertMany inside the caller's transaction.
func (c *Client[TTx]) InsertManyTx(ctx context.Context, tx TTx, params []InsertManyParams) ([]*InsertResult, error) {
	return c.core.insertMany(ctx, c.driver.UnwrapExecutor(tx), params, false)
}

// InsertManyFast inserts jobs in bulk (COPY on Postgres) and returns how many
// it inserted, without returning the rows. Jobs may not have unique keys.
func (c *Client[TTx]) InsertManyFast(ctx context.Context, params []InsertManyParams) (int, error) {
	return c.core.insertFast(ctx, c.core.exec, params, true)
}

// InsertManyFastTx is InsertManyFast inside the caller's transaction.
func (c *Client[TTx]) InsertManyFastTx(ctx context.Context, tx TTx, params []InsertManyParams) (int, error) {
	return c.core.insertFast(ctx, c.driver.UnwrapExecutor(tx), params, false)
}

func (c *clientCore) insertOne(ctx context.Context, exec driver.Executor, args JobArgs, opts *InsertOpts, wake bool) (*InsertResult, error) {
	res, err := c.insertMany(ctx, exec, []InsertManyParams{{Args: args, InsertOpts: opts}}, wake)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

func (c *clientCore) insertMany(ctx context.Context, exec driver.Executor, params []InsertManyParams, wake bool) ([]*InsertResult, error) {
	var rows []*driver.JobInsertResult
	err := c.withInsertMiddleware(ctx, params, func(ctx context.Context, ps []*driver.JobInsertParams) (err error) {
		if err := checkDependencies(ps); err != nil {
			return err
		}
		var first map[string]driver.ClaimPosition
		rows, first, err = c.insertJobs(ctx, exec, ps, wake)
		if errors.Is(err, driver.ErrNotFound) {
			return fmt.Errorf("%w: insert jobs: %w", ErrNotFound, err)
		}
		if err != nil {
			return fmt.Errorf("leasehold: insert jobs: %w", err)
		}
		// Wake before the middleware returns, whatever it returns: the
		// listener skips this insert's notification (ownNotices), or the
		// coalesced one that announces it, or hears none for it. A job
		// the insert's own claim took needs no wake-up.
		if wake {
			c.wakeForInserts(first)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*InsertResult, len(rows))
	for i, r := range rows {
		out[i] = &InsertResult{Job: r.Job, UniqueSkipped: r.UniqueSkipped}
	}
	return out, nil
}

func (c *clientCore) insertFast(ctx context.Context, exec driver.Executor, params []InsertManyParams, wake bool) (int, error) {
	var n int
	err := c.withInsertMiddleware(ctx, params, func(ctx context.Context, ps []*driver.JobInsertParams) (err error) {
		for i, p := range ps {
			if p.UniqueKey != "" || len(p.UniqueFinished) > 0 {
				return fmt.Errorf("%w: job %d: InsertManyFast does not take unique keys; use InsertMany", ErrInvalidArgs, i)
			}
			if len(p.DependsOn) > 0 || len(p.DependsOnIndex) > 0 {
				return fmt.Errorf("%w: job %d: InsertManyFast does not take dependencies; use InsertMany", ErrInvalidArgs, i)
			}
		}
		if n, err = exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: ps, SenderTracker: c.tracking(wake)}); err != nil {
			return fmt.Errorf("leasehold: insert jobs: %w", err)
		}
		if wake {
			first := map[string]driver.ClaimPosition{}
			for _, p := range ps {
				keepFirst(first, p.Queue, insertPosition(p))
			}
			c.wakeForInserts(first)
		}
		return nil
	})
	return n, err
}

// withInsertMiddleware validates and encodes the jobs after the insert
// middleware has seen them, and calls insert with the result.
func (c *clientCore) withInsertMiddleware(ctx context.Context, params []InsertManyParams, insert func(context.Context, []*driver.JobInsertParams) error) error {
	if len(params) == 0 {
		return fmt.Errorf("%w: no jobs to insert", ErrInvalidArgs)
	}
	if len(c.middleware.insert) == 0 {
		ps, err := c.buildInsertParams(params)
		if err != nil {
			return err
		}
		return insert(ctx, ps)
	}
	jobs := insertJobs(params)
	return c.middleware.wrapInsert(ctx, jobs, func(ctx context.Context) error {
		withOpts := make([]InsertManyParams, len(jobs))
		for i, j := range jobs {
			withOpts[i] = InsertManyParams{Args: j.Args, InsertOpts: &j.Opts}
		}
		ps, err := c.buildInsertParams(withOpts)
		if err != nil {
			return err
		}
		return insert(ctx, ps)
	})
}

func (c *clientCore) buildInsertParams(params []InsertManyParams) ([]*driver.JobInsertParams, error) {
	if len(params) == 0 {
		return nil, fmt.Errorf("%w: no jobs to insert", ErrInvalidArgs)
	}
	out := make([]*driver.JobInsertParams, len(params))
	for i, p := range params {
		ip, err := c.buildInsert(p.Args, p.InsertOpts)
		if err != nil {
			if len(params) > 1 {
				return nil, fmt.Errorf("job %d: %w", i, err)
			}
			return nil, err
		}
		out[i] = ip
	}
	return out, nil
}

// buildInsert validates a job and its options and encodes it. Options come
// from, in order of precedence: opts, the args' own InsertOpts, the worker
// registered for the kind on this client, the client's config.
func (c *clientCore) buildInsert(args JobArgs, opts *InsertOpts) (*driver.JobInsertParams, error) {
	if args == nil {
		return nil, fmt.Errorf("%w: args are nil", ErrInvalidArgs)
	}
	kind := args.Kind()
	if err := validateName("kind", kind); err != nil {
		return nil, err
	}
	o := InsertOpts{}
	if withOpts, ok := args.(JobArgsWithInsertOpts); ok {
		o = withOpts.InsertOpts()
	}
	if opts != nil {
		o = mergeInsertOpts(o, *opts)
	}
	if o.Queue == "" {
		o.Queue = defaultQueue
	}
	if err := validateName("queue", o.Queue); err != nil {
		return nil, err
	}
	if o.Priority == 0 {
		o.Priority = 1
	}
	if o.Priority < 1 || o.Priority > 4 {
		return nil, fmt.Errorf("%w: priority %d is outside 1 to 4", ErrInvalidArgs, o.Priority)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = c.cfg.MaxAttempts
		if e := c.workers[kind]; e != nil && e.opts.MaxAttempts > 0 {
			o.MaxAttempts = e.opts.MaxAttempts
		}
	}
	if o.MaxAttempts < 1 || o.MaxAttempts > maxAttemptsLimit {
		return nil, fmt.Errorf("%w: max attempts %d is outside 1 to %d", ErrInvalidArgs, o.MaxAttempts, maxAttemptsLimit)
	}
	if o.LeaseTTL < 0 || o.LeaseTTL > 0 && o.LeaseTTL < minLeaseTTL {
		return nil, fmt.Errorf("%w: lease TTL %s is below the minimum %s", ErrInvalidArgs, o.LeaseTTL, minLeaseTTL)
	}
	if o.LeaseTTL > maxLeaseTTL {
		return nil, fmt.Errorf("%w: lease TTL %s is above the maximum %s", ErrInvalidArgs, o.LeaseTTL, maxLeaseTTL)
	}
	if err := validateUniqueKey(o.UniqueKey); err != nil {
		return nil, err
	}
	encoded, err := encodeJSON(args)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal args of kind %q: %w", ErrInvalidArgs, kind, err)
	}
	if len(encoded) > c.cfg.MaxArgsBytes {
		return nil, fmt.Errorf("%w: args of kind %q are %d bytes encoded (max %d)", ErrInvalidArgs, kind, len(encoded), c.cfg.MaxArgsBytes)
	}
	if hasNULEscape(encoded) {
		return nil, fmt.Errorf("%w: args of kind %q hold a NUL character (\\u0000), which not every backend can store", ErrInvalidArgs, kind)
	}
	if hasLoneSurrogate(encoded) {
		return nil, fmt.Errorf("%w: args of kind %q hold a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), which is not a character", ErrInvalidArgs, kind)
	}
	metadata := []byte("{}")
	if len(o.Metadata) > 0 {
		if metadata, err = encodeJSON(o.Metadata); err != nil {
			return nil, fmt.Errorf("%w: marshal metadata: %w", ErrInvalidArgs, err)
		}
		if len(metadata) > c.cfg.MaxArgsBytes {
			return nil, fmt.Errorf("%w: metadata is %d bytes encoded (max %d)", ErrInvalidArgs, len(metadata), c.cfg.MaxArgsBytes)
		}
		if hasNULEscape(metadata) {
			return nil, fmt.Errorf("%w: metadata holds a NUL character (\\u0000), which not every backend can store", ErrInvalidArgs)
		}
		if hasLoneSurrogate(metadata) {
			return nil, fmt.Errorf("%w: metadata holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), which is not a character", ErrInvalidArgs)
		}
	}
	p := &driver.JobInsertParams{
		Kind: kind, Queue: o.Queue, Priority: o.Priority, EncodedArgs: encoded, Metadata: metadata,
		UniqueKey: o.UniqueKey, MaxAttempts: o.MaxAttempts, LeaseTTL: o.LeaseTTL,
	}
	if !o.ScheduledAt.IsZero() {
		at := o.ScheduledAt.UTC()
		p.ScheduledAt = &at
	}
	if err := c.jobKeys(p, &o); err != nil {
		return nil, err
	}
	if !o.UniqueOpts.isZero() {
		if err := o.UniqueOpts.validate(); err != nil {
			return nil, err
		}
		if o.UniqueOpts.derives() {
			at := o.ScheduledAt
			if at.IsZero() {
				at = time.Now()
			}
			p.UniqueKey = o.UniqueOpts.uniqueKey(kind, o.Queue, o.UniqueKey, encoded, at)
		}
		if p.UniqueKey == "" {
			return nil, fmt.Errorf("%w: UniqueOpts.ByState needs a unique key: set UniqueKey or one of ByArgs, ByQueue, ByPeriod", ErrInvalidArgs)
		}
		p.UniqueFinished = o.UniqueOpts.finishedStates()
	}
	if err := setDependencies(p, o); err != nil {
		return nil, err
	}
	return p, nil
}

// mergeInsertOpts overlays the non-zero fields of over on base.
func mergeInsertOpts(base, over InsertOpts) InsertOpts {
	if over.Queue != "" {
		base.Queue = over.Queue
	}
	if over.Priority != 0 {
		base.Priority = over.Priority
	}
	if !over.ScheduledAt.IsZero() {
		base.ScheduledAt = over.ScheduledAt
	}
	if over.MaxAttempts != 0 {
		base.MaxAttempts = over.MaxAttempts
	}
	if over.LeaseTTL != 0 {
		base.LeaseTTL = over.LeaseTTL
	}
	if over.UniqueKey != "" {
		base.UniqueKey = over.UniqueKey
	}
	if over.Key != "" {
		base.Key = over.Key
	}
	if over.Sequence != "" {
		base.Sequence = over.Sequence
	}
	if !over.UniqueOpts.isZero() {
		base.UniqueOpts = over.UniqueOpts
	}
	base = mergeDependencyOpts(base, over)
	if len(over.Metadata) > 0 {
		m := maps.Clone(base.Metadata)
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, over.Metadata)
		base.Metadata = m
	}
	return base
}
