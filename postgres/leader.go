package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// leaderAttemptSQL takes or renews leader lease $1 for owner $2 holding
// token $3 (0 when it holds nothing), for $4 microseconds, in one
// conditional write. A missing row is created at token 1. An expired lease
// is taken over: the token grows by one and acquired_at restarts. An
// unexpired one is renewed only for its holder with its current token, so a
// holder of an older grant cannot extend the lease of the new one. The
// clock is clock_timestamp(), read once; it travels in the excluded row
// (acquired_at) so that the conflict branch uses the same reading.
const leaderAttemptSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS ld_now)
INSERT INTO leasehold_leader AS l (name, owner, token, lease_until, acquired_at, updated_at)
SELECT $1, $2, 1, ld_now + $4::bigint * interval '1 microsecond', ld_now, ld_now
FROM clock
ON CONFLICT (name) DO UPDATE SET
	owner = excluded.owner,
	token = CASE WHEN l.lease_until <= excluded.acquired_at THEN l.token + 1 ELSE l.token END,
	lease_until = excluded.lease_until,
	acquired_at = CASE WHEN l.lease_until <= excluded.acquired_at THEN excluded.acquired_at ELSE l.acquired_at END,
	updated_at = excluded.updated_at
WHERE l.lease_until <= excluded.acquired_at
	OR (l.owner = excluded.owner AND l.token = $3::bigint)
RETURNING ` + leaderColumns

// leaderGetSQL reads leader lease $1.
const leaderGetSQL = `SELECT ` + leaderColumns + ` FROM leasehold_leader WHERE name = $1`

// leaderResignSQL ends leader lease $1 at once when owner $2 holds it with
// token $3. It only shortens a lease: an expired one is left as it is.
const leaderResignSQL = `
UPDATE leasehold_leader SET lease_until = clock_timestamp(), updated_at = clock_timestamp()
WHERE name = $1 AND owner = $2 AND token = $3 AND lease_until > clock_timestamp()`

// leaderColumns is the select list scanLeader reads.
const leaderColumns = `name, owner, token, lease_until, acquired_at`

func (e *executor) LeaderAttempt(ctx context.Context, params *driver.LeaderParams) (*driver.LeaderRow, error) {
	row, err := scanLeader(e.db.QueryRow(ctx, leaderAttemptSQL,
		params.Name, params.Owner, params.Token, micros(params.TTL)))
	if err == nil {
		return row, nil
	}
	if err = translateError(err); !errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("attempt leader lease %s: %w", params.Name, err)
	}
	// Another client holds the lease: report it, as it is now.
	row, err = scanLeader(e.db.QueryRow(ctx, leaderGetSQL, params.Name))
	if err != nil {
		return nil, fmt.Errorf("read leader lease %s: %w", params.Name, translateError(err))
	}
	return row, nil
}

func (e *executor) LeaderResign(ctx context.Context, params *driver.LeaderParams) error {
	if _, err := e.db.Exec(ctx, leaderResignSQL, params.Name, params.Owner, params.Token); err != nil {
		return fmt.Errorf("resign leader lease %s: %w", params.Name, translateError(err))
	}
	return nil
}

// scanLeader reads one row selected with leaderColumns.
func scanLeader(row interface{ Scan(...any) error }) (*driver.LeaderRow, error) {
	var l driver.LeaderRow
	if err := row.Scan(&l.Name, &l.Owner, &l.Token, &l.LeaseUntil, &l.AcquiredAt); err != nil {
		return nil, err
	}
	l.LeaseUntil = l.LeaseUntil.UTC()
	l.AcquiredAt = l.AcquiredAt.UTC()
	return &l, nil
}
