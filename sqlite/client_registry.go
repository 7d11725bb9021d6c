package sqlite

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
	// version, queues, running, TTL. started_at is kept on update.
	clientRegisterSQL = `INSERT INTO leasehold_client (owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ` + nowExpr + `, ` + nowExpr + `, ` + nowExpr + ` + ?8)
ON CONFLICT (owner) DO UPDATE SET
	host = excluded.host, pid = excluded.pid, client_id = excluded.client_id, version = excluded.version,
	queues = excluded.queues, running = excluded.running, seen_at = excluded.seen_at, expires_at = excluded.expires_at`
	// clientListSQL lists the rows, alive when expires_at is still ahead.
	clientListSQL = `SELECT owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at,
	expires_at >= ` + nowExpr + `
FROM leasehold_client ORDER BY owner LIMIT ?1`
	clientRemoveSQL = `DELETE FROM leasehold_client WHERE owner = ?1`
	// clientPruneSQL deletes rows expired more than ?1 microseconds ago.
	clientPruneSQL = `DELETE FROM leasehold_client WHERE expires_at < ` + nowExpr + ` - ?1`
)

// ClientRegister upserts a working client's registry row.
func (e *executor) ClientRegister(ctx context.Context, params *driver.ClientRegisterParams) error {
	err := e.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, clientRegisterSQL, params.Owner, params.Host, params.PID, params.ID, params.Version,
			driver.EncodeClientQueues(params.Queues), params.Running, params.TTL.Microseconds())
		return err
	})
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
	var n int64
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, clientRemoveSQL, params.Owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("remove client %s: %w", params.Owner, translateError(err))
	}
	return n > 0, nil
}

// ClientPrune deletes the registry rows of clients gone for a while.
func (e *executor) ClientPrune(ctx context.Context, params *driver.ClientPruneParams) (int64, error) {
	var n int64
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, clientPruneSQL, params.OlderThan.Microseconds())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune clients: %w", translateError(err))
	}
	return n, nil
}

func scanClient(s sqlbackend.RowScanner) (*leasetype.ClientRow, error) {
	var (
		r                      leasetype.ClientRow
		queues                 string
		started, seen, expires int64
		alive                  bool
	)
	if err := s.Scan(&r.Owner, &r.Host, &r.PID, &r.ID, &r.Version, &queues, &r.Running, &started, &seen, &expires, &alive); err != nil {
		return nil, err
	}
	r.Queues = driver.DecodeClientQueues(queues)
	r.StartedAt, r.SeenAt, r.ExpiresAt, r.Alive = fromMicros(started), fromMicros(seen), fromMicros(expires), alive
	return &r, nil
}
