package postgres

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// The direct decoder and pgx's generic Scan read the same rows into the
// same JobRows, over more rows than one block holds and with every
// nullable column both NULL and set.
func TestJobDecoderMatchesScan(t *testing.T) {
	d := newTestDriver(t)
	ctx := t.Context()
	pool := d.Pool()
	_, err := pool.Exec(ctx, `
INSERT INTO leasehold_job (kind, queue, state, priority, args, metadata, unique_key, attempt,
	max_attempts, errors, expiries, last_error, lease_token, lease_owner, leased_at, lease_until,
	heartbeat_at, heartbeats, lease_ttl_ms, expiry_policy, scheduled_at, created_at,
	finalized_at, cancel_requested_at)
SELECT
	'kind_' || (g % 3), 'queue_' || (g % 2),
	(ARRAY['available', 'running', 'completed', 'retryable'])[1 + g % 4],
	1 + g % 4,
	jsonb_build_object('n', g, 'pad', repeat('x', (g * 37) % 700), 'text', 'é ✓ "quoted"'),
	CASE WHEN g % 5 = 0 THEN '{}'::jsonb ELSE jsonb_build_object('trace', g) END,
	CASE WHEN g % 7 = 0 THEN 'key-' || g END,
	g % 9, 25, g % 4, g % 3,
	CASE WHEN g % 6 = 0 THEN 'error ' || g END,
	g * 1000 + 7,
	CASE WHEN g % 2 = 0 THEN 'owner-' || (g % 4) END,
	CASE WHEN g % 2 = 0 THEN timestamptz '2026-01-02 03:04:05.123456+00' + g * interval '1 second' END,
	CASE WHEN g % 2 = 0 THEN now() + g * interval '1 millisecond' END,
	CASE WHEN g % 4 = 0 THEN now() - g * interval '1 microsecond' END,
	g % 11,
	CASE WHEN g % 8 = 0 THEN 5000 + g END,
	CASE WHEN g % 10 = 0 THEN 'stuck' ELSE 'retry' END,
	timestamptz '1999-12-31 23:59:59.999999+00' + g * interval '1 day',
	timestamptz '1970-01-01 00:00:00+00' + g * interval '1 hour',
	CASE WHEN g % 4 = 2 THEN now() END,
	CASE WHEN g % 13 = 0 THEN now() END
FROM generate_series(1, 300) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	query := "SELECT " + jobColumns + " FROM leasehold_job ORDER BY id"

	rows, err := pool.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	if !binaryJobColumns(rows.FieldDescriptions()) {
		rows.Close()
		t.Fatalf("the default protocol did not return jobColumns in binary with the expected types: %+v", rows.FieldDescriptions())
	}
	fast, err := scanJobs(rows, 0)
	if err != nil {
		t.Fatal(err)
	}

	// The simple protocol returns text: scanJobs falls back to pgx's Scan.
	rows, err = pool.Query(ctx, query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if binaryJobColumns(rows.FieldDescriptions()) {
		rows.Close()
		t.Fatal("text-format rows were taken for binary ones")
	}
	generic, err := scanJobs(rows, 0)
	if err != nil {
		t.Fatal(err)
	}

	if len(fast) != 300 || len(generic) != 300 {
		t.Fatalf("read %d rows directly and %d with Scan, want 300 each", len(fast), len(generic))
	}
	for i := range fast {
		if !reflect.DeepEqual(fast[i], generic[i]) {
			t.Fatalf("row %d differs:\ndirect %s\nscan   %s", i, dump(fast[i]), dump(generic[i]))
		}
	}

	// Rows share blocks: growing one row's JSON must not write into another's.
	before := string(fast[1].EncodedArgs)
	_ = append(fast[0].EncodedArgs, strings.Repeat("!", 64)...)
	if got := string(fast[1].EncodedArgs); got != before {
		t.Fatalf("appending to row 0's args changed row 1's: %q", got)
	}
}

// A claim decodes its rows directly and returns them complete.
func TestClaimDecodesRows(t *testing.T) {
	d := newTestDriver(t)
	ctx := t.Context()
	e := d.GetExecutor()
	p := testJob("default")
	p.Metadata = []byte(`{"trace":"abc"}`)
	if _, err := e.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p, testJob("default")}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Max: 10, Owner: "me", DefaultLeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		got, err := e.JobGet(ctx, &driver.JobGetParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(j, got) {
			t.Fatalf("claimed row differs from the row read back:\nclaim %s\nget   %s", dump(j), dump(got))
		}
		if j.State != leasetype.JobStateRunning || j.LeaseOwner != "me" || j.LeaseUntil == nil || j.LeaseToken != 1 {
			t.Fatalf("claimed row is not a running lease of ours: %s", dump(j))
		}
	}
	if string(jobs[0].Metadata) != `{"trace": "abc"}` {
		t.Fatalf("metadata %q", jobs[0].Metadata)
	}
}

func dump(j *leasetype.JobRow) string { return fmt.Sprintf("%+v", *j) }

// BenchmarkScanJobs reads 1,000 rows selected with jobColumns over the
// default protocol, decoded directly (scanJobs) and with pgx's Scan (the
// fallback). The statement's own cost is in both.
func BenchmarkScanJobs(b *testing.B) {
	d := newTestDriver(b)
	ctx := b.Context()
	pool := d.Pool()
	if _, err := pool.Exec(ctx, `INSERT INTO leasehold_job (kind, queue, args, max_attempts, lease_owner, leased_at, lease_until)
SELECT 'bench', 'default', jsonb_build_object('num', g), 25, 'owner', now(), now() FROM generate_series(1, 1000) AS g`); err != nil {
		b.Fatal(err)
	}
	query := "SELECT " + jobColumns + " FROM leasehold_job"
	read := map[string]func(pgx.Rows) ([]*leasetype.JobRow, error){
		"direct": func(rows pgx.Rows) ([]*leasetype.JobRow, error) { return scanJobs(rows, 1000) },
		"pgx-scan": func(rows pgx.Rows) ([]*leasetype.JobRow, error) {
			defer rows.Close()
			var out []*leasetype.JobRow
			dest := newJobDest()
			for rows.Next() {
				j, err := dest.scan(rows)
				if err != nil {
					return nil, err
				}
				out = append(out, j)
			}
			return out, rows.Err()
		},
	}
	for _, name := range []string{"direct", "pgx-scan"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rows, err := pool.Query(ctx, query)
				if err != nil {
					b.Fatal(err)
				}
				jobs, err := read[name](rows)
				if err != nil || len(jobs) != 1000 {
					b.Fatalf("%d jobs, %v", len(jobs), err)
				}
			}
		})
	}
}
