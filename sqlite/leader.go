package sqlite

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// leaderHeld is true, in leaderAttemptSQL's upsert, while the stored lease
// has not expired on the database clock.
const leaderHeld = `leasehold_leader.lease_until > ` + nowExpr

// leaderAttemptSQL takes or renews leader lease ?1 for owner ?2, whose
// current token is ?3, for ?4 microseconds, in one conditional upsert. A new
// row starts at token 1. An expired lease is taken over: token + 1,
// acquired_at now. An unexpired one is renewed only for the holder with the
// same token, which keeps it; a holder of an older grant is refused. 'now'
// is one value within the statement.
const leaderAttemptSQL = `INSERT INTO leasehold_leader
	(name, owner, token, lease_until, acquired_at, updated_at)
VALUES (?1, ?2, 1, ` + nowExpr + ` + ?4, ` + nowExpr + `, ` + nowExpr + `)
ON CONFLICT (name) DO UPDATE SET
	owner = excluded.owner,
	token = CASE WHEN ` + leaderHeld + ` THEN leasehold_leader.token ELSE leasehold_leader.token + 1 END,
	acquired_at = CASE WHEN ` + leaderHeld + ` THEN leasehold_leader.acquired_at ELSE excluded.acquired_at END,
	lease_until = excluded.lease_until,
	updated_at = excluded.updated_at
WHERE NOT ` + leaderHeld + `
	OR (leasehold_leader.owner = ?2 AND leasehold_leader.token = ?3 AND ` + leaderHeld + `)`

// leaderGetSQL reads leader lease ?1.
const leaderGetSQL = `SELECT name, owner, token, lease_until, acquired_at
FROM leasehold_leader WHERE name = ?1`

// leaderResignSQL expires leader lease ?1 now when owner ?2 holds it with
// token ?3. An already expired lease keeps its earlier end.
const leaderResignSQL = `UPDATE leasehold_leader
SET lease_until = min(lease_until, ` + nowExpr + `), updated_at = ` + nowExpr + `
WHERE name = ?1 AND owner = ?2 AND token = ?3`

// LeaderAttempt takes or renews a leader lease in one conditional upsert and
// returns the holder after it, in the same transaction.
func (e *executor) LeaderAttempt(ctx context.Context, params *driver.LeaderParams) (*driver.LeaderRow, error) {
	var row driver.LeaderRow
	err := e.write(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, leaderAttemptSQL, params.Name, params.Owner, params.Token,
			max(0, params.TTL.Microseconds())); err != nil {
			return err
		}
		var until, acquired int64
		if err := q.QueryRowContext(ctx, leaderGetSQL, params.Name).Scan(
			&row.Name, &row.Owner, &row.Token, &until, &acquired); err != nil {
			return fmt.Errorf("read lease: %w", err)
		}
		row.LeaseUntil, row.AcquiredAt = fromMicros(until), fromMicros(acquired)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attempt leader lease %s: %w", params.Name, err)
	}
	return &row, nil
}

// LeaderResign ends the lease at once when params.Owner holds it with
// params.Token; otherwise it does nothing.
func (e *executor) LeaderResign(ctx context.Context, params *driver.LeaderParams) error {
	err := e.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, leaderResignSQL, params.Name, params.Owner, params.Token)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign leader lease %s: %w", params.Name, err)
	}
	return nil
}
