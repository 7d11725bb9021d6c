package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCheckpointSQL records stage ?4 with state ?5 on job ?1, fenced by
// token ?2 and lease owner ?3 on the clock ?7, and renews the lease by ?6
// milliseconds as jobHeartbeatSQL does. It returns what the stage history
// row needs.
const jobCheckpointSQL = `UPDATE leasehold_job
SET stage = ?4, stage_state = ?5,
	lease_until = ?7 + 1000 * ?6,
	heartbeat_at = ?7,
	heartbeats = heartbeats + 1
WHERE id = ?1
	AND lease_token = ?2
	AND lease_owner = ?3
	AND state = 'running'
	AND lease_until > ?7
RETURNING attempt`

// stageInsertSQL appends a stage history row.
const stageInsertSQL = `INSERT INTO leasehold_stage (job_id, attempt, token, stage, state, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`

// jobStagesSQL is a job's stage history, oldest first.
const jobStagesSQL = `SELECT job_id, attempt, token, stage, state, at
FROM leasehold_stage WHERE job_id = ?1 ORDER BY id`

// jobDependenciesSQL is the edges of job ?1, parents first, with both jobs'
// states (” for a job pruned since).
const jobDependenciesSQL = `SELECT d.parent_id, d.child_id, coalesce(p.state, ''), coalesce(c.state, '')
FROM leasehold_job_dep d
LEFT JOIN leasehold_job p ON p.id = d.parent_id
LEFT JOIN leasehold_job c ON c.id = d.child_id
WHERE d.child_id = ?1 OR d.parent_id = ?1
ORDER BY d.child_id = ?1 DESC, d.parent_id, d.child_id`

var _ driver.StageExecutor = (*executor)(nil)

// JobCheckpoint ignores params.TxBound, as JobFinish does: a caller's
// transaction holds the write lock until it ends.
func (e *executor) JobCheckpoint(ctx context.Context, params *driver.JobCheckpointParams) (bool, error) {
	var state any
	if params.State != nil {
		state = string(params.State)
	}
	ms, _ := millis(params.TTL).(int64)
	var written bool
	err := e.write(ctx, func(q querier) error {
		written = false
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		var attempt int
		err := q.QueryRowContext(ctx, jobCheckpointSQL, params.ID, params.Token, params.Owner,
			params.Stage, state, ms, now).Scan(&attempt)
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, stageInsertSQL, params.ID, attempt, params.Token, params.Stage, state, now); err != nil {
			return fmt.Errorf("record stage: %w", err)
		}
		written = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("checkpoint job %d: %w", params.ID, err)
	}
	return written, nil
}

func scanStage(s sqlbackend.RowScanner) (*leasetype.StageRow, error) {
	var (
		r     leasetype.StageRow
		state sql.NullString
		at    int64
	)
	if err := s.Scan(&r.JobID, &r.Attempt, &r.Token, &r.Stage, &state, &at); err != nil {
		return nil, err
	}
	if state.Valid {
		r.State = []byte(state.String)
	}
	r.At = fromMicros(at)
	return &r, nil
}

func (e *executor) JobStages(ctx context.Context, params *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := sqlbackend.QueryAll(ctx, q, scanStage, jobStagesSQL, params.JobID)
	if err != nil {
		return nil, fmt.Errorf("list stages of job %d: %w", params.JobID, err)
	}
	return rows, nil
}

func (e *executor) JobDependencies(ctx context.Context, params *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanDependency, jobDependenciesSQL, params.JobID)
	if err != nil {
		return nil, fmt.Errorf("list dependencies of job %d: %w", params.JobID, err)
	}
	return rows, nil
}
