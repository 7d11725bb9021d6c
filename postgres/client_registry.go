package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Client registry statements. Times are the database clock; durations are
// microseconds.
const (
	// clientRegisterSQL upserts a client's row: owner, host, pid, id,
	// version, queues, running, TTL. started_at is kept on update.
	clientRegisterSQL = `INSERT INTO leasehold_client (owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), now() + $8::bigint * interval '1 microsecond')
ON CONFLICT (owner) DO UPDATE SET
	host = excluded.host, pid = excluded.pid, client_id = excluded.client_id, version = excluded.version,
	queues = excluded.queues, running = excluded.running, seen_at = excluded.seen_at, expires_at = excluded.expires_at`
	// clientListSQL lists the rows, alive when expires_at is still ahead.
	clientListSQL = `SELECT owner, host, pid, client_id, version, queues, running, started_at, seen_at, expires_at,
	expires_at >= now()
FROM leasehold_client ORDER BY owner LIMIT $1`
	clientRemoveSQL = `DELETE FROM leasehold_client WHERE owner = $1`
	// clientPruneSQL deletes rows expired more than $1 microseconds ago.
	clientPruneSQL = `DELETE FROM leasehold_client WHERE expires_at < now() - $1::bigint * interval '1 microsecond'`
)

// ClientRegister upserts a working client's registry row.
func (e *executor) ClientRegister(ctx context.Context, params *driver.ClientRegisterParams) error {
	_, err := e.db.Exec(ctx, clientRegisterSQL, params.Owner, params.Host, params.PID, params.ID, params.Version,
		driver.EncodeClientQueues(params.Queues), params.Running, micros(params.TTL))
	if err != nil {
		return fmt.Errorf("register client %s: %w", params.Owner, translateError(err))
	}
	return nil
}

// ClientList returns the registry rows in owner order.
func (e *executor) ClientList(ctx context.Context, params *driver.ClientListParams) ([]*leasetype.ClientRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = driver.DefaultClientListLimit
	}
	rows, err := e.db.Query(ctx, clientListSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", translateError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*leasetype.ClientRow, error) {
		var (
			r      leasetype.ClientRow
			queues string
		)
		if err := row.Scan(&r.Owner, &r.Host, &r.PID, &r.ID, &r.Version, &queues, &r.Running, &r.StartedAt, &r.SeenAt, &r.ExpiresAt, &r.Alive); err != nil {
			return nil, err
		}
		r.Queues = driver.DecodeClientQueues(queues)
		r.StartedAt, r.SeenAt, r.ExpiresAt = r.StartedAt.UTC(), r.SeenAt.UTC(), r.ExpiresAt.UTC()
		return &r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", translateError(err))
	}
	return out, nil
}

// ClientRemove deletes a client's registry row.
func (e *executor) ClientRemove(ctx context.Context, params *driver.ClientRemoveParams) (bool, error) {
	tag, err := e.db.Exec(ctx, clientRemoveSQL, params.Owner)
	if err != nil {
		return false, fmt.Errorf("remove client %s: %w", params.Owner, translateError(err))
	}
	return tag.RowsAffected() > 0, nil
}

// ClientPrune deletes the registry rows of clients gone for a while.
func (e *executor) ClientPrune(ctx context.Context, params *driver.ClientPruneParams) (int64, error) {
	tag, err := e.db.Exec(ctx, clientPruneSQL, micros(params.OlderThan))
	if err != nil {
		return 0, fmt.Errorf("prune clients: %w", translateError(err))
	}
	return tag.RowsAffected(), nil
}
