package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCheckpointPickSQL locks job ? while token ? and lease owner ? still
// hold its lease, and reads the clock.
const jobCheckpointPickSQL = `SELECT id, ` + nowExpr + ` FROM leasehold_job
WHERE id = ? AND lease_token = ? AND lease_owner = ? AND state = 'running' AND lease_until > ` + nowExpr + `
FOR UPDATE`

// jobCheckpointSQL records the stage and state on the job the pick locked
// and renews its lease from the picked time by a TTL in microseconds, as
// jobHeartbeatSQL does.
const jobCheckpointSQL = `UPDATE leasehold_job
SET stage = ?, stage_state = ?,
	lease_until = CAST(? AS DATETIME(6)) + INTERVAL ? MICROSECOND,
	heartbeat_at = CAST(? AS DATETIME(6)),
	heartbeats = heartbeats + 1
WHERE id = ? AND lease_token = ?`

// stageInsertSQL appends the stage history row of the checkpoint.
const stageInsertSQL = `INSERT INTO leasehold_stage (job_id, attempt, token, stage, state, at)
SELECT id, attempt, lease_token, ?, ?, CAST(? AS DATETIME(6)) FROM leasehold_job WHERE id = ?`

// jobStagesSQL is a job's stage history, oldest first.
const jobStagesSQL = `SELECT job_id, attempt, token, stage, state, at
FROM leasehold_stage WHERE job_id = ? ORDER BY id`

// jobDependenciesSQL is the edges of job ?, parents first, with both jobs'
// states (” for a job pruned since).
const jobDependenciesSQL = `SELECT d.parent_id, d.child_id, COALESCE(p.state, ''), COALESCE(c.state, '')
FROM leasehold_job_dep d
LEFT JOIN leasehold_job p ON p.id = d.parent_id
LEFT JOIN leasehold_job c ON c.id = d.child_id
WHERE d.child_id = ? OR d.parent_id = ?
ORDER BY d.child_id = ? DESC, d.parent_id, d.child_id`

var _ driver.StageExecutor = (*executor)(nil)

// JobCheckpoint writes in one transaction: a locking read of the lease,
// then the job's update and the stage history row. It ignores
// params.TxBound (see JobFinish).
func (e *executor) JobCheckpoint(ctx context.Context, params *driver.JobCheckpointParams) (bool, error) {
	var state any
	if params.State != nil {
		state = string(params.State)
	}
	var written bool
	err := e.write(ctx, func(q querier) error {
		written = false
		ids, now, err := pick(ctx, q, jobCheckpointPickSQL, params.ID, params.Token, params.Owner)
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := q.ExecContext(ctx, jobCheckpointSQL, params.Stage, state, now, params.TTL.Microseconds(), now,
			params.ID, params.Token); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, stageInsertSQL, params.Stage, state, now, params.ID); err != nil {
			return fmt.Errorf("record stage: %w", err)
		}
		written = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("checkpoint job %d: %w", params.ID, translateError(err))
	}
	return written, nil
}

func scanStage(s sqlbackend.RowScanner) (*leasetype.StageRow, error) {
	var (
		r     leasetype.StageRow
		state sql.NullString
		at    dbTime
	)
	if err := s.Scan(&r.JobID, &r.Attempt, &r.Token, &r.Stage, &state, &at); err != nil {
		return nil, err
	}
	if state.Valid {
		r.State = []byte(state.String)
	}
	r.At = at.Time
	return &r, nil
}

func (e *executor) JobStages(ctx context.Context, params *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := sqlbackend.QueryAll(ctx, q, scanStage, jobStagesSQL, params.JobID)
	if err != nil {
		return nil, fmt.Errorf("list stages of job %d: %w", params.JobID, translateError(err))
	}
	return rows, nil
}

func (e *executor) JobDependencies(ctx context.Context, params *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	id := params.JobID
	rows, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanDependency, jobDependenciesSQL, id, id, id)
	if err != nil {
		return nil, fmt.Errorf("list dependencies of job %d: %w", id, translateError(err))
	}
	return rows, nil
}
