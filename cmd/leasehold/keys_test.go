package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

func TestKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		if r := b.run(t, "keys"); r.err != nil || r.out != "" || !strings.Contains(r.errOut, "no keyed jobs") {
			t.Fatalf("keys on an empty database: %+v", r)
		}
		for range 3 {
			b.enqueue(t, "--kind", "charge", "--queue", "payments", "--key", "cust-1")
		}
		b.enqueue(t, "--kind", "charge", "--queue", "payments", "--key", "cust-2")
		b.enqueue(t, "--kind", "charge", "--queue", "hold", "--key", "evil\u009b2J")
		b.enqueue(t, "--kind", "charge", "--queue", "hold", "--key", "evil\u009b2J")
		b.claim(t, "hold", "host-a:1:w1", time.Hour)

		out := b.ok(t, "keys")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		// Top keys: header, cust-1 (3 waiting), then cust-2 and the hold key
		// (1 waiting each; the hold key has one running, so it comes first);
		// a blank line; the per-queue summary.
		if len(lines) != 8 {
			t.Fatalf("keys: want 4 lines of keys, a blank line and 3 of queues:\n%s", out)
		}
		for i, want := range [][]string{
			{"QUEUE", "KEY", "WAITING", "RUNNING"},
			{"payments", "cust-1", "3", "0"},
			{"hold", `evil\u009b2J`, "1", "1"},
			{"payments", "cust-2", "1", "0"},
		} {
			if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("keys line %d = %q, want fields %q", i, lines[i], want)
			}
		}
		if strings.Contains(out, "\u009b") {
			t.Errorf("keys printed a raw escape: %q", out)
		}
		if got := strings.Join(strings.Fields(lines[7]), " "); got != "payments 2 4 3" {
			t.Errorf("keys summary of payments = %q, want payments 2 4 3", lines[7])
		}

		var res driver.KeyStatsResult
		if err := json.Unmarshal([]byte(b.ok(t, "keys", "--json", "--queue", "payments", "--limit", "1")), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Top) != 1 || res.Top[0].Key != "cust-1" || res.Top[0].Waiting != 3 ||
			len(res.Queues) != 1 || res.Queues[0].Keys != 2 || len(res.Queues[0].WaitingBuckets) != len(driver.KeyWaitingBounds) {
			t.Fatalf("keys --json --queue payments --limit 1 = top %+v, queues %+v", res.Top, res.Queues)
		}
		b.fails(t, "--limit 0 is outside 1 to 10000", "keys", "--limit", "0")
		b.fails(t, "did you mean --queue?", "keys", "--queeu", "x")
		b.fails(t, `did you mean "keys"?`, "keyz")
	})
}
