package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A completion in the caller's transaction (CompleteTx) locks the job's
// row until that transaction ends, and the lease is not renewed meanwhile.
// The driver therefore bounds the transaction with the server's own
// timeouts, lowered for the rest of the transaction only (set_config's
// is_local, as SET LOCAL): the server aborts it when it stays idle that
// long (idle_in_transaction_session_timeout: the session is terminated,
// which ends the transaction and frees its row locks), when one statement
// runs that long (statement_timeout), and, on Postgres 17 and later, when
// the whole rest of the transaction takes that long (transaction_timeout;
// the timer starts when it is set). A setting already tighter is kept (the
// settings read as intervals: '0', '30s', '5min'), and a setting the server
// does not have is skipped (current_setting with missing_ok). The settings
// are read by name: pg_settings would materialize every setting of the
// server on each call, which cost more server time than the completion
// itself. A pooler in transaction mode keeps the settings to the
// transaction too.

// boundTxSettings are the settings a bound lowers.
var boundTxSettings = []string{"idle_in_transaction_session_timeout", "statement_timeout", "transaction_timeout"}

// boundTxSettingsSQL is the bound as columns of one row, the bound being
// argument $arg in milliseconds: one column per setting of boundTxSettings, which
// sets it when it is disabled or looser than the bound (NULL for a setting
// the server does not have). Columns of one row, not a row per setting
// filtered and counted: the server builds no scan, filter or aggregate on
// each call (a few µs per call, BenchmarkCompleteOne's form
// bound-as-rows).
func boundTxSettingsSQL(arg int) string {
	cols := make([]string, len(boundTxSettings))
	for i, name := range boundTxSettings {
		cols[i] = strings.NewReplacer("$S", name, "$B", fmt.Sprintf("$%d", arg)).Replace(
			`CASE WHEN current_setting('$S', true)::interval <= interval '0'
		OR current_setting('$S', true)::interval > $B::bigint * interval '1 millisecond'
	THEN set_config('$S', $B::bigint::text, true) END`)
	}
	return strings.Join(cols, ",\n\t")
}

// jobBoundTxSQL bounds the caller's transaction to $1 milliseconds from
// now, in a statement of its own.
var jobBoundTxSQL = `SELECT ` + boundTxSettingsSQL(1)

// boundedFinishSQL maps the outcome statements to their bounded forms
// (finishBounded), which take the bound in milliseconds as one more
// argument.
var boundedFinishSQL = map[string]string{
	jobCompleteSQL:    boundedFinish(jobCompleteSQL, 4),
	jobCompleteOneSQL: boundedCompleteOne(),
	jobFinishSQL:      boundedFinish(jobFinishSQL, 9),
}

// boundTx bounds the caller's transaction (executor e's) to bound,
// rounded up to a millisecond, from now, in a statement of its own.
func (e *executor) boundTx(ctx context.Context, bound time.Duration) error {
	ms := (bound + time.Millisecond - 1).Milliseconds()
	if _, err := e.db.Exec(ctx, jobBoundTxSQL, ms); err != nil {
		return fmt.Errorf("finish leases: bound the transaction: %w", translateError(err))
	}
	return nil
}

// BoundsTx reports true: JobFinish bounds a caller's transaction with the
// server's timeouts (see boundTxSettings).
func (d *Driver) BoundsTx() bool { return true }

// finishBounded writes the outcomes in the caller's transaction and
// bounds that transaction in the same statement: query's bounded form, one
// statement and one round trip, as a completion in the caller's
// transaction (CompleteTx) costs the handler's connection that much time.
// The settings are made before the statement writes a row.
func (e *executor) finishBounded(ctx context.Context, bound time.Duration, query string, args []any) ([]int64, error) {
	bounded, ok := boundedFinishSQL[query]
	if !ok {
		return nil, fmt.Errorf("finish leases: no bounded form of the outcome statement")
	}
	args = append(args, (bound + time.Millisecond - 1).Milliseconds())
	return e.queryIDs(ctx, "finish leases", bounded, args...)
}

// finishClockSQL starts jobCompleteSQL and jobFinishSQL: the clock they
// read once.
const finishClockSQL = `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now)`

// boundedFinish returns query, which starts with finishClockSQL, with the
// clock also applying the bound's settings (columns of its row), the
// bound being argument $arg. The clock is a materialized CTE: its row, and
// so the settings, is computed before the update writes a row.
func boundedFinish(query string, arg int) string {
	if !strings.HasPrefix(strings.TrimSpace(query), finishClockSQL) {
		panic("postgres: the outcome statement does not start with its clock")
	}
	clock := `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now,
	` + boundTxSettingsSQL(arg) + `)`
	return strings.Replace(query, finishClockSQL, clock, 1)
}

// boundedCompleteOne returns jobCompleteOneSQL bounded, the bound being
// argument $4: a condition that holds whatever the settings were. Having
// no column of the table, it is planned as a one-time filter, which the
// server evaluates, and so makes the settings, once, before the scan
// reaches the row (TestOutcomePlansBoundTheRunningScan). The settings made
// in RETURNING, as the update writes the row, cost no less in
// BenchmarkCompleteOne, but raised the server's page faults in the
// payments benchmark from 1.40–1.51 a job to 2.20–2.23 and its CPU a job
// by about a fifth.
func boundedCompleteOne() string {
	const returning = "\nRETURNING id"
	if !strings.HasSuffix(jobCompleteOneSQL, returning) {
		panic("postgres: the one-lease completion does not end with its RETURNING")
	}
	return strings.TrimSuffix(jobCompleteOneSQL, returning) + `
	AND (SELECT num_nulls(` + boundTxSettingsSQL(4) + `) >= 0)` + returning
}
