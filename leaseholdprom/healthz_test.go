package leaseholdprom_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdprom"
	"github.com/leasehold/leasehold/leasetype"
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
