package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// LeaderAttempt takes or renews the leader lease params.Name in one
// transaction: a locking read of its row, the insert, take-over or renewal
// it allows, and a read of the row after. When the row is missing and a
// concurrent client inserts it first, the insert fails on the primary key
// and the locking read runs again, now waiting for that client's commit.
func (e *executor) LeaderAttempt(ctx context.Context, params *driver.LeaderParams) (*driver.LeaderRow, error) {
	ttl := params.TTL.Microseconds()
	var out *driver.LeaderRow
	err := e.write(ctx, func(q querier) error {
		if err := leaderWrite(ctx, q, params, ttl); err != nil {
			return err
		}
		var (
			r                 driver.LeaderRow
			until, acquiredAt dbTime
		)
		err := q.QueryRowContext(ctx, queryLeaderGet, params.Name).Scan(&r.Name, &r.Owner, &r.Token, &until, &acquiredAt)
		if err != nil {
			return translate(err)
		}
		r.LeaseUntil, r.AcquiredAt = until.Time, acquiredAt.Time
		out = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attempt leader lease %s: %w", params.Name, err)
	}
	return out, nil
}

// leaderWrite makes the one write LeaderAttempt's locking read allows, if
// any.
func leaderWrite(ctx context.Context, q querier, params *driver.LeaderParams, ttl int64) error {
	for round := 0; round < maxInsertRounds; round++ {
		var (
			owner   string
			token   int64
			expired bool
		)
		err := q.QueryRowContext(ctx, queryLeaderLock, params.Name).Scan(&owner, &token, &expired)
		switch {
		case isNoRows(err):
			_, err = q.ExecContext(ctx, queryLeaderInsert, params.Name, params.Owner, ttl)
			if isDuplicate(err) {
				continue // inserted concurrently: lock it and decide again
			}
			return err
		case err != nil:
			return err
		case expired:
			_, err = q.ExecContext(ctx, queryLeaderTakeOver, params.Owner, ttl, params.Name)
			return err
		case owner == params.Owner && token == params.Token:
			_, err = q.ExecContext(ctx, queryLeaderRenew, ttl, params.Name)
			return err
		}
		return nil // held by another client, or by an older grant
	}
	return fmt.Errorf("leader row still contended after %d rounds", maxInsertRounds)
}

// LeaderResign ends the lease params.Name at once when params.Owner holds it
// with params.Token; otherwise it changes nothing.
func (e *executor) LeaderResign(ctx context.Context, params *driver.LeaderParams) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, queryLeaderResign, params.Name, params.Owner, params.Token); err != nil {
		return fmt.Errorf("resign leader lease %s: %w", params.Name, translate(err))
	}
	return nil
}
