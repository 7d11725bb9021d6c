package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// MySQL and MariaDB 10 have no UPDATE ... RETURNING, so the raw claim is a
// short transaction, as in our driver: a locking read of up to ? claimable
// jobs in claim order through the claim index, skipping rows other loops
// hold, then one UPDATE of exactly those rows.
const mysqlRawPick = `SELECT id, lease_token FROM leasehold_job
WHERE claim_queue = 'default' AND scheduled_at <= UTC_TIMESTAMP(6)
ORDER BY priority, scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// mysqlRawLease leases the picked rows (the %s: their IDs); the pick locked
// them, so each token becomes the one read plus one.
const mysqlRawLease = `UPDATE leasehold_job SET
	state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?,
	leased_at = UTC_TIMESTAMP(6),
	lease_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND
WHERE id IN (%s)`

// mysqlRawComplete completes a batch in one autocommit statement, fenced by
// each job's token and lease: InnoDB evaluates an UPDATE's condition on the
// latest row version under the row's lock, so the statement needs no
// locking read before it. The ? is a JSON array of [id, token] pairs, the
// counterpart of Postgres's unnest.
const mysqlRawComplete = `UPDATE leasehold_job j
JOIN JSON_TABLE(?, '$[*]' COLUMNS (c_id BIGINT PATH '$[0]', c_token BIGINT PATH '$[1]')) AS t
	ON j.id = t.c_id
SET j.state = 'completed', j.finalized_at = UTC_TIMESTAMP(6)
WHERE j.lease_token = t.c_token
	AND j.state = 'running'
	AND j.lease_until > UTC_TIMESTAMP(6)`

// mysqlRaw is the raw loop on MySQL/MariaDB. Its claim transactions are READ
// COMMITTED, as our driver's are (no gap locks to hold up inserts).
type mysqlRaw struct{ db *sql.DB }

func (r mysqlRaw) claim(ctx context.Context, owner string, max int, ids, tokens []int64) ([]int64, []int64, error) {
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return ids, tokens, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	rows, err := tx.QueryContext(ctx, mysqlRawPick, max)
	if err != nil {
		return ids, tokens, err
	}
	for rows.Next() {
		var id, token int64
		if err := rows.Scan(&id, &token); err != nil {
			rows.Close()
			return ids, tokens, err
		}
		ids, tokens = append(ids, id), append(tokens, token+1)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ids, tokens, err
	}
	if len(ids) == 0 {
		return ids, tokens, tx.Commit()
	}
	var list strings.Builder
	for i, id := range ids {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(strconv.FormatInt(id, 10))
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(mysqlRawLease, list.String()), owner); err != nil {
		return ids[:0], tokens[:0], err
	}
	if err := tx.Commit(); err != nil {
		return ids[:0], tokens[:0], err
	}
	return ids, tokens, nil
}

func (r mysqlRaw) complete(ctx context.Context, ids, tokens []int64) (int64, error) {
	b := make([]byte, 0, 24*len(ids))
	b = append(b, '[')
	for i := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, ids[i], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, tokens[i], 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	res, err := r.db.ExecContext(ctx, mysqlRawComplete, string(b))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r mysqlRaw) reset(ctx context.Context) error {
	return dbExecAll(ctx, r.db, mysqlResets...)
}

func (r mysqlRaw) analyze(ctx context.Context) error {
	return dbExecAll(ctx, r.db, mysqlAnalyze)
}
