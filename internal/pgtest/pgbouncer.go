package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bouncer is a private PgBouncer in front of the test server, started by
// PgBouncer for one test.
type Bouncer struct {
	// URL reaches the test database through the pooler (sslmode=disable).
	URL string
	// Version is PgBouncer's version ("1.18.0").
	Version string
}

// BouncerOptions configures PgBouncer.
type BouncerOptions struct {
	// PoolSize is the server connections per database and user (PgBouncer's
	// default_pool_size); default 20.
	PoolSize int
	// MaxPreparedStatements, when positive, sets max_prepared_statements
	// (PgBouncer 1.21 and newer track protocol-level prepared statements);
	// ignored, with a log line, on older versions.
	MaxPreparedStatements int
	// SearchPath, when set, is the search_path of the server connections
	// (set by PgBouncer's connect_query when it opens each), so that a
	// client that names no schema, as a user's URL would not, finds its
	// tables in a test's schema. Clients cannot set it themselves:
	// PgBouncer refuses the search_path startup parameter.
	SearchPath string
}

// PgBouncer starts PgBouncer in transaction pool mode on a free loopback
// port, in front of the test server's database, and stops it (by its
// process ID) when the test ends. It fails the test, never skips it, when
// PgBouncer is not installed: scripts/ensure-pgbouncer.sh installs it.
// PgBouncer refuses to run as root: as root it drops to the postgres user.
func PgBouncer(t testing.TB, opts *BouncerOptions) *Bouncer {
	t.Helper()
	o := BouncerOptions{PoolSize: 20}
	if opts != nil {
		o = *opts
		if o.PoolSize <= 0 {
			o.PoolSize = 20
		}
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("pgbouncer is not installed: run scripts/ensure-pgbouncer.sh (Debian: apt-get install pgbouncer)")
		}
	}
	version := bouncerVersion(t, bin)

	server, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("parse the test server's URL: %v", err)
	}
	host, port := server.Hostname(), server.Port()
	if port == "" {
		port = "5432"
	}
	dbname := strings.TrimPrefix(server.Path, "/")
	userName := server.User.Username()
	if userName == "" {
		userName = "postgres"
	}

	dir, err := os.MkdirTemp("", "leasehold-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	listen := freePort(t)
	var ini strings.Builder
	fmt.Fprintf(&ini, "[databases]\n%s = host=%s port=%s dbname=%s", dbname, host, port, dbname)
	if o.SearchPath != "" {
		fmt.Fprintf(&ini, " connect_query='SET search_path TO %s'", o.SearchPath)
	}
	ini.WriteString("\n\n[pgbouncer]\n")
	fmt.Fprintf(&ini, "listen_addr = 127.0.0.1\nlisten_port = %d\nunix_socket_dir =\n", listen)
	fmt.Fprintf(&ini, "auth_type = trust\nauth_file = %s\n", filepath.Join(dir, "users.txt"))
	fmt.Fprintf(&ini, "pool_mode = transaction\nmax_client_conn = 1000\ndefault_pool_size = %d\n", o.PoolSize)
	if o.MaxPreparedStatements > 0 {
		if versionAtLeast(version, 1, 21) {
			fmt.Fprintf(&ini, "max_prepared_statements = %d\n", o.MaxPreparedStatements)
		} else {
			t.Logf("PgBouncer %s has no max_prepared_statements (1.21 and newer); not set", version)
		}
	}
	var uid, gid int = -1, -1
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PgBouncer refuses to run as root and there is no postgres user to run it as: %v", err)
		}
		uid, _ = strconv.Atoi(pg.Uid)
		gid, _ = strconv.Atoi(pg.Gid)
		ini.WriteString("user = postgres\n")
	}
	files := map[string]string{"pgbouncer.ini": ini.String(), "users.txt": fmt.Sprintf("%q \"\"\n", userName)}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			_ = os.Chown(p, uid, gid)
		}
	}
	if uid >= 0 {
		_ = os.Chown(dir, uid, gid)
		_ = os.Chmod(dir, 0o755)
	}

	var logs lockedBuffer
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", logs.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", listen)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited at start:\n%s", logs.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen on %s within 10 s:\n%s", addr, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	u := url.URL{Scheme: "postgres", User: url.User(userName), Host: addr, Path: "/" + dbname, RawQuery: "sslmode=disable"}
	return &Bouncer{URL: u.String(), Version: version}
}

var versionRE = regexp.MustCompile(`PgBouncer (\d+\.\d+\.\d+)`)

func bouncerVersion(t testing.TB, bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("pgbouncer --version: %v: %s", err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("pgbouncer --version printed no version: %s", out)
	}
	return string(m[1])
}

// BouncerTracksPrepared reports whether PgBouncer version tracks
// protocol-level prepared statements in transaction mode when
// max_prepared_statements is set (1.21 and newer).
func BouncerTracksPrepared(version string) bool { return versionAtLeast(version, 1, 21) }

// versionAtLeast reports whether version (major.minor.patch) is at least major.minor.
func versionAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(parts[1])
	return ma > major || ma == major && mi >= minor
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a process's output for a test's log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
