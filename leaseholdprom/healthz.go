package leaseholdprom

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Pinger is what Healthz needs from a client. A *leasehold.Client of any
// backend satisfies it.
type Pinger interface {
	// Ping returns nil when the database answers.
	Ping(ctx context.Context) error
}

// healthBody is the JSON body Healthz answers with.
type healthBody struct {
	Status    string  `json:"status"`
	Database  string  `json:"database"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// Healthz returns an http.Handler for /healthz that reports whether the
// client's database can be reached: 200 with {"status":"ok",...} when it
// answers within timeout (default 2 s when zero or negative), else 503 with
// {"status":"unavailable",...} and the error.
// It calls the client's Ping (one read of the database clock). The body
// carries the driver's error text, so mount it where the callers may see
// database errors.
func Healthz(client Pinger, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		timeout = 2 * time.Second
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
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}
