package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/mysql"
	lhsqlite "github.com/leasehold/leasehold/sqlite"
)

// childEnv, when set in the environment, makes the bench binary an insert
// child instead of a benchmark: "mysql <DSN>" or "sqlite <path>". The
// latency mode's leasehold-xproc engine starts one, so that its jobs are
// inserted by another process with a pool of its own.
const childEnv = "LEASEHOLD_BENCH_INSERT_CHILD"

// runInsertChild inserts one job per line of in ("<num> <at unix ns>")
// through an insert-only client on the database spec names, each insert on
// a goroutine of its own, and answers each on out: "<num> ok" or
// "<num> err <message>". It returns when in ends.
func runInsertChild(ctx context.Context, spec string, in io.Reader, out io.Writer) error {
	backend, target, ok := strings.Cut(spec, " ")
	if !ok {
		return fmt.Errorf("%s=%q: want \"mysql <DSN>\" or \"sqlite <path>\"", childEnv, spec)
	}
	var (
		c   *leasehold.Client[*sql.Tx]
		db  *sql.DB
		err error
	)
	cfg := &leasehold.Config{Logger: benchLogger()}
	switch backend {
	case "mysql":
		var d *mysql.Driver
		if d, db, err = mysql.Open(target); err == nil {
			c, err = leasehold.NewClient(d, cfg)
		}
	case "sqlite":
		var d *lhsqlite.Driver
		if d, db, err = lhsqlite.Open(target); err == nil {
			c, err = leasehold.NewClient(d, cfg)
		}
	default:
		return fmt.Errorf("%s: unknown backend %q", childEnv, backend)
	}
	if err != nil {
		return fmt.Errorf("insert child: %w", err)
	}
	defer db.Close()
	// A process of its own with an ordinary pool: the benchmark's pools are
	// uncapped, and two uncapped pools on a slow server can exhaust its
	// max_connections between them.
	db.SetMaxOpenConns(32)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		num, at, ok := strings.Cut(sc.Text(), " ")
		n, err1 := strconv.Atoi(num)
		ns, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("insert child: bad line %q", sc.Text())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Insert(ctx, benchArgs{Num: n, At: ns}, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintf(w, "%d err %s\n", n, strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Fprintf(w, "%d ok\n", n)
			}
			w.Flush() //nolint:errcheck // the parent sees a missing answer
		}()
	}
	wg.Wait()
	return sc.Err()
}

// childInserter is a running insert child (runInsertChild) of this binary.
type childInserter struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the child's output ends

	mu      sync.Mutex
	waiting map[int]chan error
	readErr error
}

// startInsertChild starts this binary as an insert child on spec.
func startInsertChild(spec string) (*childInserter, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary for the insert child: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+spec)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start insert child: %w", err)
	}
	c := &childInserter{cmd: cmd, stdin: stdin, done: make(chan struct{}), waiting: map[int]chan error{}}
	go c.read(stdout)
	return c, nil
}

// read dispatches the child's answers to the inserts waiting for them.
func (c *childInserter) read(stdout io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		num, rest, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		var res error
		if rest != "ok" {
			res = fmt.Errorf("insert child: %s", strings.TrimPrefix(rest, "err "))
		}
		c.mu.Lock()
		ch := c.waiting[n]
		delete(c.waiting, n)
		c.mu.Unlock()
		if ch != nil {
			ch <- res
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readErr = fmt.Errorf("insert child ended: %v", sc.Err())
	for n, ch := range c.waiting {
		ch <- c.readErr
		delete(c.waiting, n)
	}
}

// insert asks the child to insert a and waits for its answer. a.Num must
// be unique among the inserts in flight.
func (c *childInserter) insert(ctx context.Context, a benchArgs) error {
	ch := make(chan error, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return c.readErr
	}
	c.waiting[a.Num] = ch
	_, err := fmt.Fprintf(c.stdin, "%d %d\n", a.Num, a.At)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("write to insert child: %w", err)
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the child: it finishes its inserts and exits when its input
// ends.
func (c *childInserter) close() error {
	c.stdin.Close()
	<-c.done
	return c.cmd.Wait()
}
