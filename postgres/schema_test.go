package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/migrate"
)

// backendOf is the conformance suite's Backend for drivers made by newDriver,
// which returns a driver on a fresh, migrated, empty database.
func backendOf(newDriver func(t *testing.T) *Driver) drivertest.Backend[pgx.Tx] {
	return drivertest.Backend[pgx.Tx]{
		New: func(t *testing.T) driver.Driver[pgx.Tx] { return newDriver(t) },
		BeginTx: func(ctx context.Context, d driver.Driver[pgx.Tx]) (pgx.Tx, error) {
			return d.(*Driver).Pool().Begin(ctx)
		},
		CommitTx:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		RollbackTx: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
		NewSized: func(t *testing.T, conns int) driver.Driver[pgx.Tx] {
			return resized(t, newDriver(t), conns)
		},
		CompletionInJobRow: true,
	}
}

// migrated runs the migrations up on d and returns it.
func migrated(t testing.TB, d *Driver) *Driver {
	t.Helper()
	if _, err := migrate.New(d).Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

// TestConformanceExecModes runs the conformance suite's driver half, which
// runs every statement, and the client tests that go through the most
// paths, with the pool's connections in each of pgx's query exec modes
// other than the default (TestConformance has the whole suite): every
// statement must work whether or not pgx describes it first, as behind
// PgBouncer, where exec or simple_protocol is needed.
func TestConformanceExecModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(strings.ReplaceAll(mode.String(), " ", "_"), func(t *testing.T) {
			t.Parallel()
			b := backendOf(func(t *testing.T) *Driver {
				cfg := pgtest.PoolConfig(t, "lh_mode_", 12)
				cfg.ConnConfig.DefaultQueryExecMode = mode
				return migrated(t, New(pgtest.NewPool(t, cfg)))
			})
			drivertest.ExerciseDriver(t, b)
			drivertest.ExerciseClient(t, b, "Drain", "CompleteTx", "InsertTx", "InsertLeased", "Wakeups", "GlobalLimit", "KeyLimit", "CancelRunning", "PeriodicLeaderKilled", "Retention")
		})
	}
}

// schemaDriver returns a driver with Options.Schema on a fresh schema, on a
// pool whose search_path is another, empty schema (and not public): a
// statement that does not name the schema finds nothing and fails. It also
// returns the empty schema.
func schemaDriver(t *testing.T, opts Options) (*Driver, string) {
	t.Helper()
	tables := pgtest.Schema(t, "lh_tables_")
	cfg := pgtest.PoolConfig(t, "lh_empty_", 12)
	empty := cfg.ConnConfig.RuntimeParams["search_path"]
	opts.Schema = tables
	d, err := NewWithOptions(pgtest.NewPool(t, cfg), &opts)
	if err != nil {
		t.Fatal(err)
	}
	return migrated(t, d), empty
}

// TestConformanceSchema runs the whole conformance suite with Options.Schema
// on connections whose search_path is an empty schema: every statement the
// driver runs (migrations, COPY, batches, notifications) names the schema,
// and nothing of the driver's is created anywhere else. (The suite's own
// business tables, created as a user's would be, land on the search_path.)
func TestConformanceSchema(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, backendOf(func(t *testing.T) *Driver {
		d, empty := schemaDriver(t, Options{})
		t.Cleanup(func() {
			var n int
			err := pgtest.NewPool(t, pgtest.ParsePoolConfig(t, pgtest.URL(), 1)).QueryRow(context.Background(),
				`SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace AND relname LIKE 'leasehold%'`, empty).Scan(&n)
			if err != nil || n != 0 {
				t.Errorf("the search_path's schema %s holds %d leasehold relations (%v), want none", empty, n, err)
			}
		})
		return d
	}))
}

// TestSchemaRelations: the names the qualifier rewrites are exactly the
// relations (tables, sequences, views), functions and types other than the
// tables' own row types that the migrations create, so that a migration
// adding one is covered, or this test says what to fix.
func TestSchemaRelations(t *testing.T) {
	t.Parallel()
	d, _ := schemaDriver(t, Options{})
	rows, err := d.Pool().Query(t.Context(), `
		SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind NOT IN ('i', 'I', 'c', 't')
		UNION SELECT proname FROM pg_proc WHERE pronamespace = $1::regnamespace
		UNION SELECT typname FROM pg_type WHERE typnamespace = $1::regnamespace AND typrelid = 0 AND typcategory <> 'A'
		ORDER BY 1`, d.q.schema)
	if err != nil {
		t.Fatal(err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := relationNames(d.migrations); !slices.Equal(have, want) {
		t.Fatalf("the migrated schema holds %v; the qualifier rewrites %v: update relationNames", have, want)
	}
}

func TestQualifier(t *testing.T) {
	t.Parallel()
	q, err := newQualifier("My$Schema", mustMigrations())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`SELECT * FROM leasehold_job WHERE id = $1`, `SELECT * FROM "My$Schema".leasehold_job WHERE id = $1`},
		{`UPDATE leasehold_job j SET x = 1 FROM leasehold_queue q`, `UPDATE "My$Schema".leasehold_job j SET x = 1 FROM "My$Schema".leasehold_queue q`},
		{`SELECT nextval('leasehold_job_id_seq')`, `SELECT nextval('"My$Schema".leasehold_job_id_seq')`},
		{`CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue)`, `CREATE INDEX leasehold_job_claim_idx ON "My$Schema".leasehold_job (queue)`},
		{`SELECT leasehold_job.id FROM other.leasehold_job, "leasehold_job"`, `SELECT "My$Schema".leasehold_job.id FROM other.leasehold_job, "leasehold_job"`},
		{`SELECT pg_notify('leasehold_insert', q)`, `SELECT pg_notify('My$Schema.leasehold_insert', q)`},
		{`SELECT my_leasehold_job, leasehold_jobs FROM t`, `SELECT my_leasehold_job, leasehold_jobs FROM t`},
	} {
		if got := q.sql(tc.in); got != tc.want {
			t.Errorf("sql(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got := q.table(pgx.Identifier{"leasehold_job"}); !slices.Equal(got, pgx.Identifier{"My$Schema", "leasehold_job"}) {
		t.Errorf("table = %v", got)
	}
	long := strings.Repeat("s", 60)
	if ch := insertChannelFor(long); len(ch) > maxIdentifierLen || !strings.HasSuffix(ch, ".leasehold_insert") {
		t.Errorf("channel for a long schema = %q", ch)
	}
	for _, bad := range []string{`a"b`, "a'b", strings.Repeat("x", 64)} {
		if _, err := NewWithOptions(nil, &Options{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
	if _, err := NewWithOptions(nil, &Options{ListenURL: "postgres://h/db?sslmode=bogus"}); err == nil {
		t.Error("a bad ListenURL accepted")
	}
}
