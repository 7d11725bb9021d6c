package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pgCluster is a throwaway Postgres cluster the harness owns: created with
// initdb in a temporary directory, listening on a free loopback port, and
// removed at the end. Only such a cluster is ever restarted.
type pgCluster struct {
	bin  string // directory of initdb and pg_ctl
	dir  string // the temporary directory: data in dir/data, the socket in dir
	port int
	// runAs is the unprivileged user to run the server as when the harness
	// runs as root (initdb refuses root); empty otherwise.
	runAs   string
	started bool
}

// findPGBin returns the directory of the newest installed initdb.
func findPGBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no initdb found (install PostgreSQL's server binaries)")
}

func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startPGCluster creates and starts a private cluster.
func startPGCluster(ctx context.Context, logf func(string, ...any)) (*pgCluster, error) {
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leasehold-chaos-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		c.runAs = "postgres"
		u, err := user.Lookup(c.runAs)
		if err != nil {
			c.remove()
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the private cluster as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			c.remove()
			return nil, err
		}
	}
	if c.port, err = freePort(); err != nil {
		c.remove()
		return nil, err
	}
	logf("private cluster: initdb in %s (port %d)", dir, c.port)
	if out, err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		c.remove()
		return nil, fmt.Errorf("initdb: %w: %s", err, lastLines(out, 5))
	}
	if err := c.start(ctx); err != nil {
		c.stop()
		c.remove()
		return nil, err
	}
	return c, nil
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// URL returns the cluster's address, host:port.
func (c *pgCluster) addr() string { return "127.0.0.1:" + strconv.Itoa(c.port) }

func (c *pgCluster) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on", c.port, c.dir)
	out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, lastLines(out, 5))
	}
	c.started = true
	return nil
}

// restart stops the server in immediate mode (no checkpoint, like a crash:
// the next start runs crash recovery) and starts it again.
func (c *pgCluster) restart(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-m", "immediate", "-w", "-t", "60", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart -m immediate: %w: %s", err, lastLines(out, 5))
	}
	return nil
}

// stop stops the server at once; it is safe to call when it is not running.
func (c *pgCluster) stop() {
	if !c.started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	c.started = false
}

func (c *pgCluster) remove() { _ = os.RemoveAll(c.dir) }

// run runs one of the cluster's binaries, as runAs when set.
func (c *pgCluster) run(ctx context.Context, name string, args ...string) (string, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.dir
	// The server pg_ctl starts must not hold our output pipe open: it logs
	// to a file (-l), and we stop waiting for the pipe soon after exit.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
