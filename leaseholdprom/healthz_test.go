package leaseholdprom_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdprom"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// TestHealthz: 200 while the database answers, 503 with the error once it
// is closed; JSON either way.
func TestHealthz(t *testing.T) {
	t.Parallel()
	d, db := openDB(t)
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := leaseholdprom.Healthz(c, time.Second)
	check := func(wantCode int, wantStatus string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != wantCode {
			t.Fatalf("code = %d, want %d; body %s", rec.Code, wantCode, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		var body struct {
			Status, Database, Error string
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body, err)
		}
		if body.Status != wantStatus || (wantCode == http.StatusOK) != (body.Error == "") {
			t.Fatalf("body = %+v, want status %q", body, wantStatus)
		}
	}
	check(http.StatusOK, "ok")
	db.Close()
	check(http.StatusServiceUnavailable, "unavailable")
}

func newRow(now time.Time) *leasetype.JobRow {
	leased := now
	return &leasetype.JobRow{ID: 1, Kind: "prom", Queue: "q", ScheduledAt: now.Add(-2 * time.Second), LeasedAt: &leased}
}

// TestHealthzSchema: a database without the leasehold schema is not
// healthy, and the body says what to run.
func TestHealthzSchema(t *testing.T) {
	t.Parallel()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		leaseholdprom.Healthz(c, time.Second).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "leasehold migrate up") || !strings.Contains(body, `"database":"reachable"`) {
		t.Fatalf("healthz without the schema = %d %s, want 503 saying to run leasehold migrate up", code, body)
	}
	if _, err := migrate.New(d).Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusOK || !strings.Contains(body, `"schema":"ok"`) {
		t.Fatalf("healthz after migrating = %d %s, want 200", code, body)
	}
}
