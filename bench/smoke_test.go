package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSmoke runs every mode with tiny sizes so the harness never rots. It
// asserts that each mode printed one line per engine with a positive median,
// never any speed: speed is measured by running the command (BENCHMARKS.md).
func TestSmoke(t *testing.T) {
	prefix := fmt.Sprintf("bench_smoke_%d", os.Getpid())
	t.Cleanup(func() { dropSchemas(t, prefix) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropPaymentsDatabase(ctx, prefix); err != nil {
			t.Errorf("drop payments database: %v", err)
		}
	})
	t.Cleanup(func() {
		if err := dropMySQLDatabases(prefix); err != nil {
			t.Errorf("drop MySQL databases: %v", err)
		}
	})
	cases := []struct {
		name    string // subtest name; the mode when empty
		args    []string
		lines   map[string][]string // line prefix (mode) -> engines
		timeout time.Duration
	}{
		{
			args:  []string{"drain", "-jobs", "300", "-rounds", "1", "-workers", "100"},
			lines: map[string][]string{"drain": {"raw", "river", "leasehold"}},
		},
		{
			args:  []string{"continuous", "-duration", "1s", "-rounds", "1", "-workers", "100"},
			lines: map[string][]string{"continuous": {"raw", "river", "leasehold"}},
		},
		{
			args: []string{"latency", "-rate", "100", "-duration", "1s", "-rounds", "1", "-retained", "2000", "-jobs", "50"},
			lines: map[string][]string{
				"latency@100/s": {"leasehold-default", "river-default", "river-2ms", "leasehold+2k"},
				"claim":         {"leasehold", "leasehold+2k"},
			},
		},
		{
			name:  "latency-nowindow",
			args:  []string{"latency", "-rate", "100", "-duration", "1s", "-rounds", "1", "-engines", "leasehold-nowindow"},
			lines: map[string][]string{"latency@100/s": {"leasehold-nowindow"}},
		},
		{
			args:  []string{"heartbeat", "-jobs", "200", "-duration", "1500ms", "-ttl", "600ms"},
			lines: map[string][]string{"heartbeat": {"leasehold"}},
		},
		{
			args:  []string{"sqlite", "-jobs", "300", "-rounds", "1", "-workers", "100", "-sqlite-dir", t.TempDir()},
			lines: map[string][]string{"sqlite": {"river", "leasehold"}},
		},
		{
			args: []string{"payments", "-jobs", "300", "-rounds", "1", "-workers", "50", "-pool", "4"},
			lines: map[string][]string{
				"payments-pool4":       {"raw", "river", "leasehold"},
				"payments-pool4-xacts": {"raw", "river", "leasehold"},
			},
		},
		{
			args:  []string{"keyclaim", "-jobs", "2000", "-keys", "200", "-claims", "5"},
			lines: map[string][]string{"keyclaim": {"leasehold"}},
		},
		{
			name:  "drain-mysql",
			args:  []string{"drain", "-backend", "mysql", "-jobs", "300", "-rounds", "1", "-workers", "100"},
			lines: map[string][]string{"mysql-drain": {"raw", "leasehold"}},
		},
		{
			name:  "latency-mysql",
			args:  []string{"latency", "-backend", "mysql", "-rate", "100", "-duration", "1s", "-rounds", "1"},
			lines: map[string][]string{"mysql-latency@100/s": {"leasehold-default", "leasehold-remote", "leasehold-xproc"}},
		},
		{
			name:  "latency-sqlite",
			args:  []string{"latency", "-backend", "sqlite", "-rate", "100", "-duration", "1s", "-rounds", "1"},
			lines: map[string][]string{"sqlite-latency@100/s": {"leasehold-default", "leasehold-remote", "leasehold-xproc"}},
		},
	}
	for _, c := range cases {
		name := c.name
		if name == "" {
			name = c.args[0]
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			args := append(c.args[:1:1], append([]string{"-schema-prefix", prefix}, c.args[1:]...)...)
			if err := run(ctx, args, &out); err != nil {
				t.Fatalf("run %v: %v\n%s", args, err, out.String())
			}
			got := parseLines(out.String())
			for mode, engines := range c.lines {
				for _, e := range engines {
					v, ok := got[mode+" "+e]
					if !ok {
						t.Errorf("no %q line for engine %q in:\n%s", mode, e, out.String())
						continue
					}
					if !(v > 0) {
						t.Errorf("%s %s: median %v, want > 0\n%s", mode, e, v, out.String())
					}
				}
			}
		})
	}
}

var lineRE = regexp.MustCompile(`^(\S+)\s+(\S+)\s.*?median\s+([0-9.]+)`)

// parseLines maps "mode engine" to the first median on each result line.
func parseLines(out string) map[string]float64 {
	got := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		m := lineRE.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		got[m[1]+" "+m[2]] = v
	}
	return got
}

func dropSchemas(t *testing.T, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		t.Errorf("drop schemas: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, s := range schemaSuffixes {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+prefix+"_"+s+" CASCADE"); err != nil {
			t.Errorf("drop schema %s_%s: %v", prefix, s, err)
		}
	}
}
