package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCheckpointSQL records stage $4 with state $5 on job $1, fenced by
// token $2 and lease owner $3, renews the lease by $6 milliseconds as
// jobHeartbeatSQL does, and appends the stage history row, in one
// statement. It reads clock_timestamp() for the reason jobFinishSQL does
// (it may run late in a caller's transaction). Neither stage column is
// indexed: the update can be HOT.
const jobCheckpointSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS cp_now),
checkpointed AS (
	UPDATE leasehold_job SET
		stage = $4::text,
		stage_state = $5::jsonb,
		lease_until = clock.cp_now + $6::bigint * interval '1 millisecond',
		heartbeat_at = clock.cp_now,
		heartbeats = heartbeats + 1
	FROM clock
	WHERE id = $1
		AND lease_token = $2
		AND lease_owner = $3
		AND state = 'running'
		AND lease_until > clock.cp_now
	RETURNING id, attempt, lease_token, clock.cp_now
)
INSERT INTO leasehold_stage (job_id, attempt, token, stage, state, at)
SELECT id, attempt, lease_token, $4::text, $5::jsonb, cp_now FROM checkpointed
RETURNING job_id`

// jobStagesSQL is a job's stage history, oldest first.
const jobStagesSQL = `
SELECT job_id, attempt, token, stage, coalesce(state::text, ''), at
FROM leasehold_stage WHERE job_id = $1 ORDER BY id`

// jobDependenciesSQL is the edges of job $1, parents first, each with both
// jobs' states (a job pruned since reads as ”).
const jobDependenciesSQL = `
SELECT d.parent_id, d.child_id, coalesce(p.state, ''), coalesce(c.state, ''), d.child_id = $1 AS upstream
FROM leasehold_job_dep d
LEFT JOIN leasehold_job p ON p.id = d.parent_id
LEFT JOIN leasehold_job c ON c.id = d.child_id
WHERE d.child_id = $1 OR d.parent_id = $1
ORDER BY upstream DESC, d.parent_id, d.child_id`

var _ driver.StageExecutor = (*executor)(nil)

func (e *executor) JobCheckpoint(ctx context.Context, params *driver.JobCheckpointParams) (bool, error) {
	if _, inTx := e.db.(pgx.Tx); inTx && params.TxBound > 0 {
		if err := e.boundTx(ctx, params.TxBound); err != nil {
			return false, err
		}
	}
	var state any
	if params.State != nil {
		state = string(params.State)
	}
	ids, err := e.queryIDs(ctx, "checkpoint", jobCheckpointSQL,
		params.ID, params.Token, params.Owner, params.Stage, state, params.TTL.Milliseconds())
	if err != nil {
		return false, err
	}
	return len(ids) == 1, nil
}

func (e *executor) JobStages(ctx context.Context, params *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	rows, err := e.db.Query(ctx, jobStagesSQL, params.JobID)
	if err != nil {
		return nil, fmt.Errorf("list stages: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.StageRow{}
	for rows.Next() {
		var (
			s     leasetype.StageRow
			state string
		)
		if err := rows.Scan(&s.JobID, &s.Attempt, &s.Token, &s.Stage, &state, &s.At); err != nil {
			return nil, fmt.Errorf("list stages: %w", translateError(err))
		}
		if state != "" {
			s.State = []byte(state)
		}
		s.At = s.At.UTC()
		out = append(out, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list stages: %w", translateError(err))
	}
	return out, nil
}

func (e *executor) JobDependencies(ctx context.Context, params *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	rows, err := e.db.Query(ctx, jobDependenciesSQL, params.JobID)
	if err != nil {
		return nil, fmt.Errorf("list dependencies: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.DependencyRow{}
	for rows.Next() {
		var (
			d            leasetype.DependencyRow
			pState, cSt  string
			upstreamEdge bool
		)
		if err := rows.Scan(&d.Parent, &d.Child, &pState, &cSt, &upstreamEdge); err != nil {
			return nil, fmt.Errorf("list dependencies: %w", translateError(err))
		}
		d.ParentState, d.ChildState = leasetype.JobState(pState), leasetype.JobState(cSt)
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dependencies: %w", translateError(err))
	}
	return out, nil
}
