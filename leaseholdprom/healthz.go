package leaseholdprom

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Pinger is what Healthz needs from a client. A *leasehold.Client of any
// backend satisfies it.
type Pinger interface {
	// Ping returns nil when the database answers.
	Ping(ctx context.Context) error
}

// SchemaChecker is implemented by a client that can compare the database's
// schema with the one it needs (*leasehold.Client does). Healthz uses it
// when the client offers it.
type SchemaChecker interface {
	// CheckSchema returns an error when the schema is missing, older than
	// the client needs, or newer and not declared compatible.
	CheckSchema(ctx context.Context) error
}

// healthBody is the JSON body Healthz answers with.
type healthBody struct {
	Status    string  `json:"status"`
	Database  string  `json:"database"`
	Schema    string  `json:"schema,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// schemaCheckEvery is how long Healthz trusts a schema check: probes come
// every few seconds, and the schema changes only with a migration.
const schemaCheckEvery = 10 * time.Second

// Healthz returns an http.Handler for /healthz that reports whether the
// client's database can be reached and, when the client is a
// SchemaChecker, holds the schema it needs: 200 with {"status":"ok",...}
// when the database answers within timeout (default 2 s when zero or
// negative) and the schema is right, else 503 with
// {"status":"unavailable",...} and the error (for a schema, what to run:
// "leasehold migrate up"). It calls the client's Ping (one read of the
// database clock) and, at most every 10 s, CheckSchema. The body carries
// the driver's error text, so mount it where the callers may see database
// errors.
func Healthz(client Pinger, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	checker, _ := client.(SchemaChecker)
	var (
		mu        sync.Mutex
		checkedAt time.Time
		schemaErr error
	)
	checkSchema := func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !checkedAt.IsZero() && time.Since(checkedAt) < schemaCheckEvery {
			return schemaErr
		}
		err := checker.CheckSchema(ctx)
		if ctx.Err() != nil {
			return err // the probe timed out: do not remember it
		}
		checkedAt, schemaErr = time.Now(), err
		return err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		start := time.Now()
		err := client.Ping(ctx)
		body := healthBody{Status: "ok", Database: "reachable", LatencyMS: float64(time.Since(start).Microseconds()) / 1000}
		code := http.StatusOK
		if err != nil {
			body.Status, body.Database, body.Error = "unavailable", "unreachable", err.Error()
			code = http.StatusServiceUnavailable
		} else if checker != nil {
			body.Schema = "ok"
			if err := checkSchema(ctx); err != nil {
				body.Status, body.Schema, body.Error = "unavailable", "not ready", err.Error()
				code = http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}
