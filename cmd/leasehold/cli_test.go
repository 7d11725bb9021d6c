package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/dburl"
	"github.com/leasehold/leasehold/leasetype"
)

// result is one in-process run of the command tree.
type result struct {
	out, errOut string
	err         error
}

// syncBuffer is a buffer safe for the concurrent writes and reads of a
// command running in a goroutine (serve).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runTree runs the leasehold command tree in process with ctx.
func runTree(ctx context.Context, stdout, stderr *syncBuffer, args ...string) error {
	cmd := newRootCmd()
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// backend is a fresh database for one test, reached by the CLI through URL
// and by the test through DB (its driver's executor) to set up and check.
type backend struct {
	name string
	url  string
	db   *dburl.DB
}

// run runs the CLI on the backend's database.
func (b *backend) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	err := runTree(t.Context(), &out, &errOut, append(args, "--database-url", b.url)...)
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// ok runs the CLI and fails the test on an error.
func (b *backend) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := b.run(t, args...)
	if r.err != nil {
		t.Fatalf("leasehold %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.out, r.errOut)
	}
	return r.out
}

// fails runs the CLI, wants an error containing want, and returns the run.
func (b *backend) fails(t *testing.T, want string, args ...string) result {
	t.Helper()
	r := b.run(t, args...)
	if r.err == nil {
		t.Fatalf("leasehold %s succeeded, want an error containing %q\nstdout:\n%s", strings.Join(args, " "), want, r.out)
	}
	if !strings.Contains(r.err.Error()+"\n"+r.errOut, want) {
		t.Fatalf("leasehold %s: error %q (stderr %q), want it to contain %q", strings.Join(args, " "), r.err, r.errOut, want)
	}
	return r
}

func (b *backend) exec() driver.Executor {
	if b.db.SQLite != nil {
		return b.db.SQLite.GetExecutor()
	}
	return b.db.Postgres.GetExecutor()
}

func (b *backend) job(t *testing.T, id int64) *leasetype.JobRow {
	t.Helper()
	row, err := b.exec().JobGet(t.Context(), &driver.JobGetParams{ID: id})
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return row
}

// eachBackend runs fn on a fresh, unmigrated SQLite file and a fresh,
// unmigrated Postgres schema, in parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newSQLiteBackend(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newPostgresBackend(t))
	})
}

func newSQLiteBackend(t *testing.T) *backend {
	t.Helper()
	url := "sqlite:" + filepath.Join(sqliteDir(t), "jobs.db")
	return openBackend(t, "sqlite", url)
}

// sqliteDir is a temporary directory for a test's SQLite files, removed
// when the test ends. Unlike t.TempDir, its removal tries again for a
// moment: a command's driver may still be opening a connection of its
// closed pool (a statement prepared in the background) and create the
// WAL files while the directory is being removed.
func sqliteDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasehold-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for range 20 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("remove %s: %v", dir, err)
	})
	return dir
}

func openBackend(t *testing.T, name, url string) *backend {
	t.Helper()
	db, err := dburl.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { db.Close() })
	return &backend{name: name, url: url, db: db}
}

// newPostgresBackend returns a backend on a fresh schema, dropped when the
// test ends, selected by search_path in the URL. It fails the test, never
// skips it, when the server cannot be reached.
func newPostgresBackend(t *testing.T) *backend {
	t.Helper()
	return openBackend(t, "postgres", pgtest.SchemaURL(t, "lhcli_", "pool_max_conns=4"))
}

// migrated returns a backend with the schema applied through the CLI.
func migrated(t *testing.T, b *backend) *backend {
	t.Helper()
	b.ok(t, "migrate", "up")
	return b
}

// enqueue inserts a job through the CLI and returns it, from --json.
func (b *backend) enqueue(t *testing.T, args ...string) *jobJSON {
	t.Helper()
	out := b.ok(t, append([]string{"enqueue", "--json"}, args...)...)
	var res struct {
		UniqueSkipped bool     `json:"unique_skipped"`
		Job           *jobJSON `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Job == nil {
		t.Fatalf("enqueue --json printed %q: %v", out, err)
	}
	return res.Job
}

// claim takes the lease of the next job of queue as owner, as a worker in
// another process would.
func (b *backend) claim(t *testing.T, queue, owner string, ttl time.Duration, stuckKinds ...string) *leasetype.JobRow {
	t.Helper()
	rows, err := b.exec().JobClaim(t.Context(), &driver.JobClaimParams{
		Queue: queue, Max: 1, Owner: owner, DefaultLeaseTTL: ttl, StuckKinds: stuckKinds,
	})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim from %s: %d rows, %v", queue, len(rows), err)
	}
	return rows[0]
}

// crash claims the next job of queue with a short lease that is never
// renewed, as a worker that crashes, and waits for it to be reclaimed:
// stuck when kind is in stuckKinds, else available again.
func (b *backend) crash(t *testing.T, queue string, stuckKinds ...string) *leasetype.JobRow {
	t.Helper()
	row := b.claim(t, queue, "crashed-worker", 50*time.Millisecond, stuckKinds...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.exec().JobExpire(t.Context(), &driver.JobExpireParams{Limit: 100}); err != nil {
			t.Fatalf("expire: %v", err)
		}
		got := b.job(t, row.ID)
		if got.State != leasetype.JobStateRunning {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still running after its lease", row.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantAll fails unless s contains every one of want.
func wantAll(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

// claimParams claims one job of queue, as a probe that the queue is claimable.
func claimParams(queue string) *driver.JobClaimParams {
	return &driver.JobClaimParams{Queue: queue, Max: 1, Owner: "probe", DefaultLeaseTTL: time.Minute}
}
