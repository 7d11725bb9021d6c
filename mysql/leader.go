package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// Leader leases: as for job leases, the conditional write is a
// locking read that decides, then the UPDATE of the locked row: no other
// client can take or renew the lease in between.

// leaderLockSQL locks leader row ?1 and reads its holder and whether its
// lease has expired on the database clock.
const leaderLockSQL = `SELECT owner, token, lease_until <= ` + nowExpr + `
FROM leasehold_leader WHERE name = ? FOR UPDATE`

// leaderInsertSQL grants a lease that no row records yet: name, owner,
// TTL in microseconds. The first holder's token is 1.
const leaderInsertSQL = `INSERT INTO leasehold_leader (name, owner, token, lease_until, acquired_at, updated_at)
VALUES (?, ?, 1, ` + nowExpr + ` + INTERVAL ? MICROSECOND, ` + nowExpr + `, ` + nowExpr + `)`

// leaderTakeOverSQL grants an expired lease to a new holder: owner, TTL
// in microseconds, name. Its token grows by one.
const leaderTakeOverSQL = `UPDATE leasehold_leader
SET owner = ?, token = token + 1,
	lease_until = ` + nowExpr + ` + INTERVAL ? MICROSECOND,
	acquired_at = ` + nowExpr + `, updated_at = ` + nowExpr + `
WHERE name = ?`

// leaderRenewSQL extends the holder's lease: TTL in microseconds, name.
const leaderRenewSQL = `UPDATE leasehold_leader
SET lease_until = ` + nowExpr + ` + INTERVAL ? MICROSECOND, updated_at = ` + nowExpr + `
WHERE name = ?`

// leaderGetSQL reads a leader row.
const leaderGetSQL = `SELECT name, owner, token, lease_until, acquired_at
FROM leasehold_leader WHERE name = ?`

// leaderResignSQL ends the lease of name ?1 when owner ?2 holds it with
// token ?3. LEAST never moves an already expired lease later. The owner is
// compared as bytes (utf8mb4_bin ignores trailing spaces).
const leaderResignSQL = `UPDATE leasehold_leader
SET lease_until = LEAST(lease_until, ` + nowExpr + `), updated_at = ` + nowExpr + `
WHERE name = ? AND CAST(owner AS BINARY) = CAST(? AS BINARY) AND token = ?`

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
		err := q.QueryRowContext(ctx, leaderGetSQL, params.Name).Scan(&r.Name, &r.Owner, &r.Token, &until, &acquiredAt)
		if err != nil {
			return translateError(err)
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
		err := q.QueryRowContext(ctx, leaderLockSQL, params.Name).Scan(&owner, &token, &expired)
		switch {
		case isNoRows(err):
			_, err = q.ExecContext(ctx, leaderInsertSQL, params.Name, params.Owner, ttl)
			if isDuplicate(err) {
				continue // inserted concurrently: lock it and decide again
			}
			return err
		case err != nil:
			return err
		case expired:
			_, err = q.ExecContext(ctx, leaderTakeOverSQL, params.Owner, ttl, params.Name)
			return err
		case owner == params.Owner && token == params.Token:
			_, err = q.ExecContext(ctx, leaderRenewSQL, ttl, params.Name)
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
	if _, err := q.ExecContext(ctx, leaderResignSQL, params.Name, params.Owner, params.Token); err != nil {
		return fmt.Errorf("resign leader lease %s: %w", params.Name, translateError(err))
	}
	return nil
}
