package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// MySQL and MariaDB refuse a trigger that writes the table whose change
// fired it, so the dependency rules the other backends keep in triggers
// (migration 8) run here, in the transaction of the state change: the
// completion (JobFinish), an operator's change (JobSetState), a bulk
// action (JobBulk; a bulk delete leaves the children as they are, as the
// triggers do) and an expiry (JobExpire).

// jobLockParentsSQLFormat locks the parents of a new job and reads their
// states: a parent completing concurrently either committed first (its
// state here is completed) or waits for this transaction, after which its
// completion sees the new edges.
const jobLockParentsSQLFormat = `SELECT id, state FROM leasehold_job WHERE id IN (%s) FOR UPDATE`

// jobMarkParentsSQLFormat marks the parents as having dependents.
const jobMarkParentsSQLFormat = `UPDATE leasehold_job SET has_dependents = TRUE WHERE id IN (%s) AND NOT has_dependents`

// jobParkChildSQL sets a new job's dependency state: state, waiting
// parents, policy, the parent that cancelled it and the note, then its ID.
const jobParkChildSQL = `UPDATE leasehold_job SET
	state = ?, deps_pending = ?, dependency_policy = ?, cancelled_by_dep = ?,
	last_error = COALESCE(?, last_error),
	finalized_at = IF(state = 'cancelled', ` + nowExpr + `, finalized_at)
WHERE id = ?`

// jobWithDependentsSQLFormat reads the state of the jobs, among those
// given, that have dependents.
const jobWithDependentsSQLFormat = `SELECT id, state FROM leasehold_job WHERE id IN (%s) AND has_dependents`

// depUnsatisfiedSQL locks the unsatisfied edges of a parent.
const depUnsatisfiedSQL = `SELECT child_id FROM leasehold_job_dep WHERE parent_id = ? AND NOT satisfied FOR UPDATE`

// depSatisfySQL marks a parent's edges satisfied.
const depSatisfySQL = `UPDATE leasehold_job_dep SET satisfied = TRUE WHERE parent_id = ? AND NOT satisfied`

// jobReleaseSQLFormat counts one completed dependency off each pending
// child; the one reaching zero becomes available, or scheduled. MySQL
// assigns left to right, each assignment seeing the earlier ones: deps_pending
// goes last. The update takes each child's row lock, so two parents
// completing at once are counted one after the other.
const jobReleaseSQLFormat = `UPDATE leasehold_job SET
	state = IF(deps_pending > 1, state, IF(scheduled_at > ` + nowExpr + `, 'scheduled', 'available')),
	scheduled_at = IF(deps_pending > 1, scheduled_at, GREATEST(scheduled_at, ` + nowExpr + `)),
	deps_pending = deps_pending - 1
WHERE state = 'pending' AND id IN (%s)`

// depCancelTargetsSQL locks the pending children of a failed parent that
// have the cancel policy.
const depCancelTargetsSQL = `SELECT j.id FROM leasehold_job_dep d
JOIN leasehold_job j ON j.id = d.child_id
WHERE d.parent_id = ? AND NOT d.satisfied AND j.state = 'pending' AND j.dependency_policy = 'cancel'
FOR UPDATE`

// depAnyTargetsSQL locks the unsatisfied edges of a failed parent to
// children with the any policy, which count the failure as finished.
const depAnyTargetsSQL = `SELECT d.child_id FROM leasehold_job_dep d
JOIN leasehold_job j ON j.id = d.child_id
WHERE d.parent_id = ? AND NOT d.satisfied AND j.dependency_policy = 'any'
FOR UPDATE`

// depSatisfySomeSQLFormat marks the edges from a parent (first argument)
// to the children given satisfied.
const depSatisfySomeSQLFormat = `UPDATE leasehold_job_dep SET satisfied = TRUE WHERE parent_id = ? AND child_id IN (%s)`

// jobCancelByDepSQLFormat cancels children because parent (first argument,
// with the note second) failed.
const jobCancelByDepSQLFormat = `UPDATE leasehold_job SET
	state = 'cancelled', finalized_at = ` + nowExpr + `, cancelled_by_dep = ?, last_error = ?
WHERE state = 'pending' AND id IN (%s)`

// depRestoreTargetsSQL locks the children a parent cancelled.
const depRestoreTargetsSQL = `SELECT j.id FROM leasehold_job_dep d
JOIN leasehold_job j ON j.id = d.child_id
WHERE d.parent_id = ? AND j.state = 'cancelled' AND j.cancelled_by_dep = ?
FOR UPDATE`

// jobRestoreByDepSQLFormat puts children cancelled by a parent back to
// pending when the parent is retried (note first).
const jobRestoreByDepSQLFormat = `UPDATE leasehold_job SET
	state = 'pending', finalized_at = NULL, cancelled_by_dep = NULL, last_error = ?
WHERE state = 'cancelled' AND id IN (%s)`

// applyDependencies records the dependencies of the jobs just inserted in
// this transaction (results, with their IDs) and parks them: pending while
// a parent is not completed, cancelled at once when a parent failed under
// the cancel policy. Jobs are handled in input order, so a job depending
// on an earlier one of the batch sees that one's state.
func applyDependencies(ctx context.Context, q querier, jobs []*driver.JobInsertParams, results []*driver.JobInsertResult) error {
	parked := map[int64]leasetype.JobState{} // states set here, not yet read back
	for i, p := range jobs {
		if len(p.DependsOn) == 0 && len(p.DependsOnIndex) == 0 || results[i].UniqueSkipped {
			continue
		}
		parents := driver.DependencyParents(p, results)
		states, err := idStates(ctx, q, fmt.Sprintf(jobLockParentsSQLFormat, placeholders(len(parents))), parents)
		if err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		for id := range states {
			if st, ok := parked[id]; ok {
				states[id] = st
			}
		}
		out, err := driver.EvaluateDependencies(parents, states, driver.DependencyPolicyOf(p))
		if err != nil {
			return fmt.Errorf("record dependencies of job %d: %w", i, err)
		}
		if _, err := q.ExecContext(ctx, fmt.Sprintf(jobMarkParentsSQLFormat, placeholders(len(parents))), idArgs(parents)...); err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		child := results[i].Job.ID
		var sb strings.Builder
		args := make([]any, 0, 3*len(parents))
		sb.WriteString("INSERT IGNORE INTO leasehold_job_dep (parent_id, child_id, satisfied) VALUES ")
		for k, id := range parents {
			if k > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?)")
			args = append(args, id, child, driver.EdgeSatisfied(states[id], driver.DependencyPolicyOf(p)))
		}
		if _, err := q.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
		policy := driver.DependencyPolicyOf(p)
		state, note, by := leasetype.JobStateAvailable, any(nil), any(nil)
		switch {
		case out.Cancelled(policy):
			state, note, by = leasetype.JobStateCancelled, out.CancelNote(), out.FailedParent
		case out.Waiting > 0:
			state = leasetype.JobStatePending
		default:
			// Every parent completed: the job keeps the state its insert gave it.
			if _, err := q.ExecContext(ctx, `UPDATE leasehold_job SET dependency_policy = ? WHERE id = ?`, string(policy), child); err != nil {
				return fmt.Errorf("record dependencies: %w", err)
			}
			continue
		}
		parked[child] = state
		if _, err := q.ExecContext(ctx, jobParkChildSQL, string(state), out.Waiting, string(policy), by, note, child); err != nil {
			return fmt.Errorf("record dependencies: %w", err)
		}
	}
	return nil
}

// idStates runs a query of (id, state) rows with ids as its arguments.
func idStates(ctx context.Context, q querier, query string, ids []int64, extra ...any) (map[int64]leasetype.JobState, error) {
	rows, err := q.QueryContext(ctx, query, append(extra, idArgs(ids)...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]leasetype.JobState, len(ids))
	for rows.Next() {
		var (
			id    int64
			state string
		)
		if err := rows.Scan(&id, &state); err != nil {
			return nil, err
		}
		out[id] = leasetype.JobState(state)
	}
	return out, rows.Err()
}

// queryIDList runs a query of one id column.
func queryIDList(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// depChange is a state change of a job others may wait on.
type depChange struct {
	id       int64
	old, new leasetype.JobState
}

func failedState(s leasetype.JobState) bool {
	return s == leasetype.JobStateDiscarded || s == leasetype.JobStateCancelled
}

// propagateDependencies applies the dependency rules to the jobs of ids,
// whose state changed in this transaction from old(id) to what they hold
// now: a completion releases the children it was the last dependency of, a
// failure cancels the pending children with the cancel policy (and, in
// turn, their children), a retry of a failed job puts back to pending the
// children it cancelled. It costs one indexed read when none of the jobs
// has dependents.
func propagateDependencies(ctx context.Context, q querier, ids []int64, old func(id int64) leasetype.JobState) error {
	if len(ids) == 0 {
		return nil
	}
	states, err := idStates(ctx, q, fmt.Sprintf(jobWithDependentsSQLFormat, placeholders(len(ids))), ids)
	if err != nil || len(states) == 0 {
		return err
	}
	var queue []depChange
	for id, st := range states {
		queue = append(queue, depChange{id: id, old: old(id), new: st})
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch {
		case c.new == leasetype.JobStateCompleted && c.old != leasetype.JobStateCompleted:
			children, err := queryIDList(ctx, q, depUnsatisfiedSQL, c.id)
			if err != nil || len(children) == 0 {
				if err != nil {
					return err
				}
				continue
			}
			if _, err := q.ExecContext(ctx, depSatisfySQL, c.id); err != nil {
				return err
			}
			if err := releaseChildren(ctx, q, children); err != nil {
				return err
			}
		case failedState(c.new) && !failedState(c.old):
			// Children with the any policy count the failure as finished.
			anyChildren, err := queryIDList(ctx, q, depAnyTargetsSQL, c.id)
			if err != nil {
				return err
			}
			if len(anyChildren) > 0 {
				args := append([]any{c.id}, idArgs(anyChildren)...)
				if _, err := q.ExecContext(ctx, fmt.Sprintf(depSatisfySomeSQLFormat, placeholders(len(anyChildren))), args...); err != nil {
					return err
				}
				if err := releaseChildren(ctx, q, anyChildren); err != nil {
					return err
				}
			}
			children, err := queryIDList(ctx, q, depCancelTargetsSQL, c.id)
			if err != nil || len(children) == 0 {
				if err != nil {
					return err
				}
				continue
			}
			note := fmt.Sprintf("cancelled: dependency %d was %s", c.id, c.new)
			args := append([]any{c.id, note}, idArgs(children)...)
			if _, err := q.ExecContext(ctx, fmt.Sprintf(jobCancelByDepSQLFormat, placeholders(len(children))), args...); err != nil {
				return err
			}
			next, err := idStates(ctx, q, fmt.Sprintf(jobWithDependentsSQLFormat, placeholders(len(children))), children)
			if err != nil {
				return err
			}
			for id := range next {
				queue = append(queue, depChange{id: id, old: leasetype.JobStatePending, new: leasetype.JobStateCancelled})
			}
		case failedState(c.old) && !failedState(c.new):
			children, err := queryIDList(ctx, q, depRestoreTargetsSQL, c.id, c.id)
			if err != nil || len(children) == 0 {
				if err != nil {
					return err
				}
				continue
			}
			note := fmt.Sprintf("pending again: dependency %d was retried", c.id)
			args := append([]any{note}, idArgs(children)...)
			if _, err := q.ExecContext(ctx, fmt.Sprintf(jobRestoreByDepSQLFormat, placeholders(len(children))), args...); err != nil {
				return err
			}
			next, err := idStates(ctx, q, fmt.Sprintf(jobWithDependentsSQLFormat, placeholders(len(children))), children)
			if err != nil {
				return err
			}
			for id := range next {
				queue = append(queue, depChange{id: id, old: leasetype.JobStateCancelled, new: leasetype.JobStatePending})
			}
		}
	}
	return nil
}

// releaseChildren counts one more finished dependency for each of the
// pending children, makes those that reach none available (or scheduled),
// and bumps the wake-up rows of the queues that got available jobs, naming
// no sender: every client of such a queue, in any process, claims them at
// once rather than at its next poll.
func releaseChildren(ctx context.Context, q querier, children []int64) error {
	if _, err := q.ExecContext(ctx, fmt.Sprintf(jobReleaseSQLFormat, placeholders(len(children))), idArgs(children)...); err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, fmt.Sprintf(jobAvailableQueuesSQLFormat, placeholders(len(children))), idArgs(children)...)
	if err != nil {
		return err
	}
	var queues []string
	for rows.Next() {
		var queue string
		if err := rows.Scan(&queue); err != nil {
			rows.Close()
			return err
		}
		queues = append(queues, queue)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return wakeQueues(ctx, q, nil, queues)
}

// jobAvailableQueuesSQLFormat reads the queues of the available jobs among
// those given.
const jobAvailableQueuesSQLFormat = `SELECT DISTINCT queue FROM leasehold_job WHERE id IN (%s) AND state = 'available'`

// running is the old state of jobs whose lease just ended.
func running(int64) leasetype.JobState { return leasetype.JobStateRunning }
