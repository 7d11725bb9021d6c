package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// haCluster is a Patroni cluster made by scripts/ha-cluster.sh, known from
// the state file it writes (KEY='value' lines). The harness never starts
// or stops it as a whole; it fails its primary over and brings the old
// primary's node back with the script's start-node.
type haCluster struct {
	state        string // path of the state file
	dir          string
	mode         string // sync or async
	script       string // ha-cluster.sh, to restart a node
	basePort     string
	haproxyURL   string
	multiHostURL string
	nodes        [3]haNode

	adminURL, dbName string // the run's database, by the chosen route
}

type haNode struct {
	name     string // node1..node3, as Patroni knows it
	pgPort   int
	restPort int
	config   string // Patroni's YAML
	data     string // the data directory
	pidFile  string // Patroni's PID file
}

// loadHACluster reads the state file of scripts/ha-cluster.sh up.
func loadHACluster(path string) (*haCluster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read HA state file: %w", err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		kv[k] = strings.Trim(v, "'")
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read HA state file: %w", err)
	}
	c := &haCluster{state: path, dir: kv["HA_DIR"], mode: kv["HA_MODE"], script: kv["HA_SCRIPT"], basePort: kv["HA_BASE_PORT"],
		haproxyURL: kv["HA_HAPROXY_URL"], multiHostURL: kv["HA_MULTIHOST_URL"]}
	if c.dir == "" || c.haproxyURL == "" || c.multiHostURL == "" || (c.mode != "sync" && c.mode != "async") {
		return nil, fmt.Errorf("HA state file %s lacks HA_DIR, HA_MODE, HA_HAPROXY_URL or HA_MULTIHOST_URL: was it written by scripts/ha-cluster.sh up?", path)
	}
	for i := range c.nodes {
		p := fmt.Sprintf("HA_NODE%d_", i+1)
		n := haNode{name: fmt.Sprintf("node%d", i+1), config: kv[p+"CONFIG"], data: kv[p+"DATA"], pidFile: kv[p+"PATRONI_PIDFILE"]}
		n.pgPort, _ = strconv.Atoi(kv[p+"PG_PORT"])
		n.restPort, _ = strconv.Atoi(kv[p+"REST_PORT"])
		if n.pgPort == 0 || n.restPort == 0 || n.config == "" || n.data == "" || n.pidFile == "" {
			return nil, fmt.Errorf("HA state file %s lacks node %d's ports or paths", path, i+1)
		}
		c.nodes[i] = n
	}
	return c, nil
}

// leader returns the index of the node whose Patroni answers 200 on
// /primary, or -1. With two such nodes (a split brain, never expected) it
// returns -2.
func (c *haCluster) leader(ctx context.Context) int {
	found := -1
	for i, n := range c.nodes {
		if c.rest(ctx, n, "/primary") == http.StatusOK {
			if found >= 0 {
				return -2
			}
			found = i
		}
	}
	return found
}

func (c *haCluster) rest(ctx context.Context, n haNode, path string) int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", n.restPort, path), nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitLeader waits, at most d, for a leader other than not (-1: any).
func (c *haCluster) waitLeader(ctx context.Context, not int, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l := c.leader(ctx); l >= 0 && l != not {
			return l, nil
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return -1, fmt.Errorf("no new Patroni leader within %s", d)
}

// waitHealthy waits, at most d, until a leader streams to both replicas
// (and, in sync mode, has a synchronous standby).
func (c *haCluster) waitHealthy(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l := c.leader(ctx)
		if l < 0 {
			last = errors.New("no leader")
		} else {
			streaming, sync, err := c.replication(ctx, l)
			switch {
			case err != nil:
				last = err
			case streaming < 2:
				last = fmt.Errorf("leader %s streams to %d replicas", c.nodes[l].name, streaming)
			case c.mode == "sync" && sync < 1:
				last = fmt.Errorf("leader %s has no synchronous standby", c.nodes[l].name)
			default:
				return nil
			}
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	return fmt.Errorf("cluster not healthy within %s: %v", d, last)
}

func (c *haCluster) replication(ctx context.Context, node int) (streaming, sync int, err error) {
	err = c.query(ctx, node, `SELECT count(*) FILTER (WHERE state = 'streaming'), count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication`, &streaming, &sync)
	return streaming, sync, err
}

// query runs one query on a node directly, not through HAProxy.
func (c *haCluster) query(ctx context.Context, node int, q string, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.nodes[node].pgPort))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, q).Scan(dest...)
}

// switchover asks Patroni for a planned switchover away from node l.
func (c *haCluster) switchover(ctx context.Context, l int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "patronictl", "-c", c.nodes[l].config, "switchover", "--leader", c.nodes[l].name, "--force").CombinedOutput()
	if err != nil {
		return fmt.Errorf("patronictl switchover: %w: %s", err, lastLines(string(out), 3))
	}
	return nil
}

// killNode SIGKILLs node l's Patroni, then its postmaster and every child
// of the postmaster at once: the node dies as a machine would, with no
// shutdown checkpoint and no walsender flushing what it still holds.
func (c *haCluster) killNode(l int) error {
	n := c.nodes[l]
	patroni, perr := c.ourPID(n.pidFile)
	pm, merr := c.ourPID(filepath.Join(n.data, "postmaster.pid"))
	if perr != nil && merr != nil {
		return fmt.Errorf("kill %s: no Patroni (%v) and no postmaster (%v)", n.name, perr, merr)
	}
	if perr == nil {
		_ = syscall.Kill(patroni, syscall.SIGKILL)
	}
	if merr == nil {
		children := childrenOf(pm)
		_ = syscall.Kill(pm, syscall.SIGKILL)
		for _, ch := range children {
			_ = syscall.Kill(ch, syscall.SIGKILL)
		}
	}
	return nil
}

// walReceivers returns the walreceiver PID of every replica (node ≠ l).
func (c *haCluster) walReceivers(ctx context.Context, l int) (map[int]int, error) {
	out := map[int]int{}
	for i := range c.nodes {
		if i == l {
			continue
		}
		var pid int
		if err := c.query(ctx, i, `SELECT pid FROM pg_stat_wal_receiver`, &pid); err != nil {
			return out, fmt.Errorf("walreceiver of %s: %w", c.nodes[i].name, err)
		}
		out[i] = pid
	}
	return out, nil
}

// startNode brings node i back (its Patroni rejoins, with pg_rewind when
// its timeline diverged), through the script that made the cluster.
func (c *haCluster) startNode(ctx context.Context, i int) error {
	if c.script == "" {
		return errors.New("HA state file names no HA_SCRIPT to restart a node with")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{"start-node", strconv.Itoa(i + 1), "--dir", c.dir}
	if c.basePort != "" {
		args = append(args, "--base-port", c.basePort)
	}
	out, err := exec.CommandContext(ctx, c.script, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ha-cluster.sh start-node %d: %w: %s", i+1, err, lastLines(string(out), 3))
	}
	return nil
}

// ourPID reads a PID file and checks that the process runs and that its
// command line names the cluster's directory, so that a reused PID is
// never signalled.
func (c *haCluster) ourPID(pidFile string) (int, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("bad PID in %s", pidFile)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d from %s is gone", pid, pidFile)
	}
	if !strings.Contains(string(cmdline), c.dir) {
		return 0, fmt.Errorf("process %d from %s is not the cluster's", pid, pidFile)
	}
	return pid, nil
}

// childrenOf returns the PIDs whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			fields := strings.Fields(s[i+1:])
			if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
				out = append(out, child)
			}
		}
	}
	return out
}

// setupHA loads the cluster and creates the run's database on it; it
// returns the harness's URL and sets every worker's, all by the chosen
// route.
func setupHA(ctx context.Context, e *env) (string, error) {
	c, err := loadHACluster(e.cfg.haState)
	if err != nil {
		return "", err
	}
	route := c.haproxyURL
	if e.cfg.haRoute == "multihost" {
		route = c.multiHostURL
	}
	if l := c.leader(ctx); l < 0 {
		return "", fmt.Errorf("the Patroni cluster in %s has no leader: is it up (scripts/ha-cluster.sh status)?", c.dir)
	}
	c.adminURL = withDBName(route, "postgres", 0)
	c.dbName = fmt.Sprintf("leasehold_chaos_%d_%d", os.Getpid(), e.cfg.seed)
	if err := pgAdmin(ctx, c.adminURL, "CREATE DATABASE "+c.dbName); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	e.ha = c
	for range e.cfg.workers {
		e.workerURLs = append(e.workerURLs, withDBName(route, c.dbName, 6))
	}
	return withDBName(route, c.dbName, 8), nil
}

func dropHADatabase(e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The cluster may still be settling after the last failover.
	var err error
	for ctx.Err() == nil {
		if err = pgAdmin(ctx, e.ha.adminURL, "DROP DATABASE IF EXISTS "+e.ha.dbName+" WITH (FORCE)"); err == nil {
			return
		}
		sleepCtx(ctx, time.Second)
	}
	fmt.Fprintln(os.Stderr, "chaos: drop database:", err)
}

// withDBName returns a postgres:// URL (one host or libpq's list) with
// another database and, when pool > 0, a pool size. net/url does not
// parse a host list, so this edits the string.
func withDBName(raw, db string, pool int) string {
	base, query, _ := strings.Cut(raw, "?")
	if i := strings.Index(base, "://"); i >= 0 {
		if j := strings.IndexByte(base[i+3:], '/'); j >= 0 {
			base = base[:i+3+j]
		}
	}
	out := base + "/" + db
	var q []string
	if query != "" {
		q = append(q, query)
	}
	if pool > 0 {
		q = append(q, fmt.Sprintf("pool_max_conns=%d", pool))
	}
	if !strings.Contains(query, "sslmode=") {
		q = append(q, "sslmode=disable")
	}
	if len(q) > 0 {
		out += "?" + strings.Join(q, "&")
	}
	return out
}
