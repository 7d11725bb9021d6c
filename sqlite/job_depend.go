package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobMarkParentsSQL marks the jobs of the JSON array ?1 as having
// dependents, which arms migration 8's triggers on them, and returns their
// states. The insert's transaction holds the write lock: no parent changes
// state between this read and the commit.
const jobMarkParentsSQL = `UPDATE leasehold_job SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(?1))
RETURNING id, state`

// jobInsertEdgeSQL records the edge from parent ?1 to child ?2, satisfied
// as ?3.
const jobInsertEdgeSQL = `INSERT INTO leasehold_job_dep (parent_id, child_id, satisfied)
VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING`

// jobParkChildSQL sets a new job's dependency state: ?3 (pending, cancelled
// or as inserted) with ?2 waiting parents, policy ?4, cancelled by ?5 with
// note ?6 on the clock ?7.
const jobParkChildSQL = `UPDATE leasehold_job SET
	state = ?3,
	deps_pending = ?2,
	dependency_policy = ?4,
	cancelled_by_dep = ?5,
	last_error = CASE WHEN ?6 <> '' THEN ?6 ELSE last_error END,
	finalized_at = CASE WHEN ?3 = 'cancelled' THEN ?7 END
WHERE id = ?1
RETURNING ` + jobColumns

// applyDependencies records the dependencies of the jobs just inserted in
// this transaction (results) and parks them: pending while a parent is not
// completed, cancelled at once when a parent failed under the cancel
// policy. Jobs are handled in input order, so a job depending on an
// earlier one of the batch sees that one's state.
func applyDependencies(ctx context.Context, q querier, now int64, jobs []*driver.JobInsertParams, results []*driver.JobInsertResult) error {
	for i, p := range jobs {
		if len(p.DependsOn) == 0 && len(p.DependsOnIndex) == 0 || results[i].UniqueSkipped {
			continue
		}
		parents := driver.DependencyParents(p, results)
		list, err := json.Marshal(parents)
		if err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, jobMarkParentsSQL, string(list))
		if err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		states := make(map[int64]leasetype.JobState, len(parents))
		for rows.Next() {
			var (
				id    int64
				state string
			)
			if err := rows.Scan(&id, &state); err != nil {
				rows.Close()
				return fmt.Errorf("record dependencies: %w", err)
			}
			states[id] = leasetype.JobState(state)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		out, err := driver.EvaluateDependencies(parents, states, driver.DependencyPolicyOf(p))
		if err != nil {
			return fmt.Errorf("record dependencies of job %d: %w", i, err)
		}
		child := results[i].Job
		for _, id := range parents {
			if _, err := q.ExecContext(ctx, jobInsertEdgeSQL, id, child.ID, driver.EdgeSatisfied(states[id], driver.DependencyPolicyOf(p))); err != nil {
				return fmt.Errorf("record dependencies: %w", err)
			}
		}
		policy := driver.DependencyPolicyOf(p)
		state, note, by := string(child.State), "", any(nil)
		switch {
		case out.Cancelled(policy):
			state, note, by = string(leasetype.JobStateCancelled), out.CancelNote(), out.FailedParent
		case out.Waiting > 0:
			state = string(leasetype.JobStatePending)
		}
		row, err := scanJob(q.QueryRowContext(ctx, jobParkChildSQL, child.ID, out.Waiting, state, string(policy), by, note, now))
		if err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		results[i].Job = row
	}
	return nil
}
