package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// Client registry statements. Times are the database clock; durations are
// microseconds.
const (
	// clientRegisterSQL upserts a client's row: owner, host, pid, id,
	// version, queues, running, TTL, then the same but the owner again
	// for the update (MariaDB has no row alias). started_at is kept on update.
	clientRegisterSQL = `INSERT INTO leasehold_client (owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ` + nowExpr + `, ` + nowExpr + `, ` + nowExpr + ` + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	host = ?, pid = ?, client_id = ?, version = ?, queues = ?, running = ?,
	seen_at = ` + nowExpr + `, expires_at = ` + nowExpr + ` + INTERVAL ? MICROSECOND`
	// clientListSQL lists the rows, alive when expires_at is still ahead.
	clientListSQL = `SELECT owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at,
	expires_at >= ` + nowExpr + `
FROM leasehold_client ORDER BY owner LIMIT ?`
	clientRemoveSQL = `DELETE FROM leasehold_client WHERE owner = ?`
	// clientPruneSQL deletes rows expired more than ? microseconds ago.
	clientPruneSQL = `DELETE FROM leasehold_client WHERE expires_at < ` + nowExpr + ` - INTERVAL ? MICROSECOND`
)

// ClientRegister upserts a working client's registry row.
func (e *executor) ClientRegister(ctx context.Context, params *driver.ClientRegisterParams) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	queues, ttl := driver.EncodeClientQueues(params.Queues), params.TTL.Microseconds()
	_, err = q.ExecContext(ctx, clientRegisterSQL, params.Owner, params.Host, params.PID, params.ID, params.Version, queues, params.Running, ttl,
		params.Host, params.PID, params.ID, params.Version, queues, params.Running, ttl)
	if err != nil {
		return fmt.Errorf("register client %s: %w", params.Owner, translateError(err))
	}
	return nil
}

// ClientList returns the registry rows in owner order.
func (e *executor) ClientList(ctx context.Context, params *driver.ClientListParams) ([]*leasetype.ClientRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit <= 0 {
		limit = driver.DefaultClientListLimit
	}
	rows, err := sqlbackend.QueryAll(ctx, q, scanClient, clientListSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", translateError(err))
	}
	return rows, nil
}

// ClientRemove deletes a client's registry row.
func (e *executor) ClientRemove(ctx context.Context, params *driver.ClientRemoveParams) (bool, error) {
	q, err := e.read()
	if err != nil {
		return false, err
	}
	res, err := q.ExecContext(ctx, clientRemoveSQL, params.Owner)
	if err != nil {
		return false, fmt.Errorf("remove client %s: %w", params.Owner, translateError(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("remove client %s: %w", params.Owner, err)
	}
	return n > 0, nil
}

// ClientPrune deletes the registry rows of clients gone for a while.
func (e *executor) ClientPrune(ctx context.Context, params *driver.ClientPruneParams) (int64, error) {
	q, err := e.read()
	if err != nil {
		return 0, err
	}
	res, err := q.ExecContext(ctx, clientPruneSQL, params.OlderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune clients: %w", translateError(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune clients: %w", err)
	}
	return n, nil
}

func scanClient(s sqlbackend.RowScanner) (*leasetype.ClientRow, error) {
	var (
		r                      leasetype.ClientRow
		queues                 string
		started, seen, expires dbTime
		alive                  bool
	)
	if err := s.Scan(&r.Owner, &r.Host, &r.PID, &r.ID, &r.Version, &queues, &r.Running, &started, &seen, &expires, &alive); err != nil {
		return nil, err
	}
	r.Queues = driver.DecodeClientQueues(queues)
	r.StartedAt, r.SeenAt, r.ExpiresAt, r.Alive = started.Time, seen.Time, expires.Time, alive
	return &r, nil
}
