package mysql

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
)

// insertAvailable inserts one available job into queue q on d's pool.
func insertAvailable(t *testing.T, d *Driver) {
	t.Helper()
	_, err := d.GetExecutor().JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{
		{Kind: "k", Queue: "q", EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 1},
	}})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// startListener runs listen until the test ends and returns its notices'
// queues once it is ready.
func startListener(t *testing.T, listen func(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	queues := make(chan string, 100)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- listen(ctx, func() { close(ready) }, func(n driver.InsertNotice) {
			select {
			case queues <- n.Queue:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener after cancel: %v, want nil", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("listener returned before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("listener not ready within 10s")
	}
	return queues
}

// awaitQueue waits for a notice of queue q.
func awaitQueue(t *testing.T, queues <-chan string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case q := <-queues:
			if q == "q" {
				return
			}
		case <-timeout:
			t.Fatal("no notice for queue q within 10s")
		}
	}
}

// TestListenerWaitsOnTheServer: on MariaDB an idle listener checks the
// wake-up rows on the server, in one statement of up to 250 ms, and still
// reports an insert. Over the 200 ms it stays idle here it sends one or
// two statements, where reads from the client every 10 ms would send about
// twenty. It works with the DSN's settings and without multiStatements
// and interpolateParams.
func TestListenerWaitsOnTheServer(t *testing.T) {
	t.Parallel()
	for name, tweak := range map[string]func(*mysqldriver.Config){
		"DSN": nil,
		"plain": func(cfg *mysqldriver.Config) {
			cfg.MultiStatements, cfg.InterpolateParams = false, false
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newTestDriver(t)
			var version string
			if err := d.DB().QueryRowContext(t.Context(), "SELECT VERSION()").Scan(&version); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(version, "MariaDB") {
				t.Skipf("server %s is not MariaDB: the listener reads from the client", version)
			}
			db, writes := countedDB(t, d, tweak)
			queues := startListener(t, New(db).ListenInserts)
			before := writes.Load()
			time.Sleep(200 * time.Millisecond)
			insertAvailable(t, d)
			awaitQueue(t, queues)
			if sent := writes.Load() - before; sent > 4 {
				t.Errorf("the listener sent %d statements over 200 ms idle and one insert, want at most 4 (one wait of up to 250 ms, then the next)", sent)
			}
		})
	}
}

// refusingBlocks is a server without anonymous blocks, as MySQL is: it
// answers the error numbered refusal to the wait statements after the
// first allowed ones, and counts the other reads.
type refusingBlocks struct {
	conn    *sql.Conn
	refusal uint16
	allowed int
	reads   atomic.Int64
}

// QueryContext implements wakeupQuerier.
func (r *refusingBlocks) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if strings.HasPrefix(query, "BEGIN NOT ATOMIC") {
		if r.allowed == 0 {
			return nil, &mysqldriver.MySQLError{Number: r.refusal, Message: "wait refused by the test"}
		}
		r.allowed--
		return r.conn.QueryContext(ctx, query, args...)
	}
	r.reads.Add(1)
	return r.conn.QueryContext(ctx, query, args...)
}

// TestListenerReadsWhereTheServerCannotWait: where the server refuses the
// wait statement (MySQL: a syntax error), or stops it at its
// max_statement_time after the first wait, the listener reads the
// wake-up rows from the client every 10 ms and reports an insert all the
// same.
func TestListenerReadsWhereTheServerCannotWait(t *testing.T) {
	t.Parallel()
	for name, refusing := range map[string]struct {
		refusal uint16
		allowed int
	}{
		"syntax":  {refusal: errSyntax},
		"timeout": {refusal: errStatementTimeout, allowed: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newTestDriver(t)
			conn, err := d.DB().Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			q := &refusingBlocks{conn: conn, refusal: refusing.refusal, allowed: refusing.allowed}
			queues := startListener(t, func(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error {
				return listenWakeups(ctx, q, ready, fn)
			})
			insertAvailable(t, d)
			awaitQueue(t, queues)
			if q.reads.Load() < 1 {
				t.Errorf("%d reads of the wake-up rows from the client, want some", q.reads.Load())
			}
		})
	}
}
