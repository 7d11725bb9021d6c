package postgres

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobMarkParentsSQL marks the jobs of $1 as having dependents, which arms
// the dependents trigger (migration 8) on them, and returns their states.
// The update takes each parent's row lock: a parent completing concurrently
// either committed first (its state here is completed, and the edge counts
// as satisfied) or completes after this transaction, when its trigger sees
// the edge.
const jobMarkParentsSQL = `
UPDATE leasehold_job SET has_dependents = true
WHERE id = ANY($1::bigint[])
RETURNING id, state`

// jobInsertEdgesSQL records the edges from the parents $1 (satisfied as
// $2) to child $3.
const jobInsertEdgesSQL = `
INSERT INTO leasehold_job_dep (parent_id, child_id, satisfied)
SELECT p, $3, s FROM unnest($1::bigint[], $2::boolean[]) AS t(p, s)
ON CONFLICT DO NOTHING`

// jobParkChildSQL sets a new job's dependency state: pending with $2
// waiting parents, or cancelled ($3 = 'cancelled', by parent $5 with note
// $6), and its policy $4.
const jobParkChildSQL = `
UPDATE leasehold_job SET
	state = $3::text,
	deps_pending = $2,
	dependency_policy = $4,
	cancelled_by_dep = $5,
	last_error = nullif($6::text, ''),
	finalized_at = CASE WHEN $3::text = 'cancelled' THEN now() END
WHERE id = $1
RETURNING ` + jobColumns

// applyDependencies records the dependencies of the jobs just inserted in
// this transaction (results) and parks them: pending while a parent is
// not completed, cancelled at once when a parent failed under the cancel
// policy. Jobs are handled in input order, so a job depending on an
// earlier one of the batch sees that one's state.
func (e *executor) applyDependencies(ctx context.Context, jobs []*driver.JobInsertParams, results []*driver.JobInsertResult) error {
	for i, p := range jobs {
		if len(p.DependsOn) == 0 && len(p.DependsOnIndex) == 0 || results[i].UniqueSkipped {
			continue
		}
		parents := driver.DependencyParents(p, results)
		rows, err := e.db.Query(ctx, jobMarkParentsSQL, parents)
		if err != nil {
			return fmt.Errorf("record dependencies: %w", translateError(err))
		}
		states := make(map[int64]leasetype.JobState, len(parents))
		for rows.Next() {
			var (
				id    int64
				state string
			)
			if err := rows.Scan(&id, &state); err != nil {
				rows.Close()
				return fmt.Errorf("record dependencies: %w", translateError(err))
			}
			states[id] = leasetype.JobState(state)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("record dependencies: %w", translateError(err))
		}
		out, err := driver.EvaluateDependencies(parents, states, driver.DependencyPolicyOf(p))
		if err != nil {
			return fmt.Errorf("record dependencies of job %d: %w", i, err)
		}
		satisfied := make([]bool, len(parents))
		for k, id := range parents {
			satisfied[k] = driver.EdgeSatisfied(states[id], driver.DependencyPolicyOf(p))
		}
		child := results[i].Job
		if _, err := e.db.Exec(ctx, jobInsertEdgesSQL, parents, satisfied, child.ID); err != nil {
			return fmt.Errorf("record dependencies: %w", translateError(err))
		}
		policy := driver.DependencyPolicyOf(p)
		state, note, by := string(child.State), "", any(nil)
		switch {
		case out.Cancelled(policy):
			state, note, by = string(leasetype.JobStateCancelled), out.CancelNote(), out.FailedParent
		case out.Waiting > 0:
			state = string(leasetype.JobStatePending)
		}
		row, err := scanJob(e.db.QueryRow(ctx, jobParkChildSQL, child.ID, out.Waiting, state, string(policy), by, note))
		if err != nil {
			return fmt.Errorf("record dependencies: %w", translateError(err))
		}
		results[i].Job = row
	}
	return nil
}
