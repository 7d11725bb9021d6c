package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzEnqueueFlags runs `leasehold enqueue` on SQLite with fuzzed flag
// values. It must never panic; when it succeeds, the job it prints must be
// the one asked for, and it must print nothing when it fails.
func FuzzEnqueueFlags(f *testing.F) {
	type seed struct{ kind, args, queue, priority, runAt, key, maxAttempts, leaseTTL, metadata string }
	for _, s := range []seed{
		{"charge", `{"payment_id": 42}`, "payments", "1", "2030-01-02T03:04:05Z", "charge-42", "5", "2m", `{"by":"ops"}`},
		{"email", `{}`, "", "", "", "", "", "", ""},
		{"", `{}`, "", "", "", "", "", "", ""},
		{"k", `[1,2]`, "q", "0", "", "", "", "", ""},
		{"k", `{"a":`, "q", "5", "yesterday", "", "-1", "-3s", `[]`},
		{"k", ` {"a":1} `, "--queue", "99999999999999999999", "2030-13-45T99:99:99Z", "\x00", "0", "1ns", `{"n":12345678901234567890}`},
		{"k\n", `{"a":"\ud800"}`, "q q", "1", "0001-01-01T00:00:00Z", strings.Repeat("k", 600), "1", "1h", `null`},
		{"-k", `null`, "-", "+1", "9999-12-31T23:59:59+14:00", "--kind", "2", "100ms", `{}`},
	} {
		f.Add(s.kind, s.args, s.queue, s.priority, s.runAt, s.key, s.maxAttempts, s.leaseTTL, s.metadata)
	}
	url := "sqlite:" + filepath.Join(f.TempDir(), "fuzz.db")
	ctx := context.Background()
	var out, errOut syncBuffer
	if err := runTree(ctx, &out, &errOut, "migrate", "up", "--database-url", url); err != nil {
		f.Fatalf("migrate: %v: %s", err, errOut.String())
	}
	f.Fuzz(func(t *testing.T, kind, args, queue, priority, runAt, key, maxAttempts, leaseTTL, metadata string) {
		argv := []string{"enqueue", "--json", "--database-url", url, "--kind=" + kind, "--args=" + args}
		for _, fl := range [][2]string{{"queue", queue}, {"priority", priority}, {"run-at", runAt}, {"unique-key", key},
			{"max-attempts", maxAttempts}, {"lease-ttl", leaseTTL}, {"metadata", metadata}} {
			if fl[1] != "" {
				argv = append(argv, "--"+fl[0]+"="+fl[1])
			}
		}
		var out, errOut syncBuffer
		err := runTree(ctx, &out, &errOut, argv...)
		if err != nil {
			if out.String() != "" {
				t.Fatalf("enqueue %q failed (%v) but printed %q", argv, err, out.String())
			}
			return
		}
		var res struct {
			UniqueSkipped bool     `json:"unique_skipped"`
			Job           *jobJSON `json:"job"`
		}
		if err := json.Unmarshal([]byte(out.String()), &res); err != nil || res.Job == nil {
			t.Fatalf("enqueue %q printed %q: %v", argv, out.String(), err)
		}
		if res.Job.Kind != kind && !res.UniqueSkipped {
			t.Fatalf("enqueue --kind %q inserted a job of kind %q", kind, res.Job.Kind)
		}
		if !res.UniqueSkipped && !json.Valid(res.Job.Args) {
			t.Fatalf("enqueue --args %q stored invalid JSON %q", args, res.Job.Args)
		}
	})
}
