package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestClientsCLI: leasehold clients says so when no client is registered,
// lists each registered client with its queues, running count and status
// (alive, or gone after it stopped beating), and prints the rows as JSON.
func TestClientsCLI(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		r := b.run(t, "clients")
		if r.err != nil || r.out != "" || !strings.Contains(r.errOut, "no clients registered") {
			t.Fatalf("clients on an empty registry: %v, stdout %q, stderr %q; want a note on stderr", r.err, r.out, r.errOut)
		}
		if out := b.ok(t, "clients", "--json"); strings.TrimSpace(out) != "[]" {
			t.Fatalf("clients --json on an empty registry printed %q, want []", out)
		}

		for _, p := range []*driver.ClientRegisterParams{
			{Owner: "web-1:42:w1", Host: "web-1", PID: 42, ID: "w1", Version: "v1.2.3", Queues: []string{"mail", "payments"}, Running: 7, TTL: time.Hour},
			{Owner: "web-2:43:w2\x1b]0;x\x07", Host: "web-2", PID: 43, ID: "w2\x1b]0;x\x07", Queues: []string{"default"}, TTL: time.Millisecond},
		} {
			if err := b.exec().ClientRegister(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
		out := b.ok(t, "clients")
		wantAll(t, "clients", out, "HOST", "LAST SEEN", "web-1", "42", "w1", "v1.2.3", "mail,payments", "7", "alive", "web-2", "gone")
		if strings.ContainsRune(out, 0x1b) {
			t.Fatalf("clients printed a raw escape sequence:\n%q", out)
		}

		var rows []*leasetype.ClientRow
		if err := json.Unmarshal([]byte(b.ok(t, "clients", "--json")), &rows); err != nil {
			t.Fatalf("clients --json: %v", err)
		}
		if len(rows) != 2 || rows[0].Owner != "web-1:42:w1" || !rows[0].Alive || rows[0].Running != 7 || rows[1].Alive {
			t.Fatalf("clients --json = %+v", rows)
		}
	})
}
