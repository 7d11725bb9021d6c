package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/leasetype"
	"github.com/spf13/cobra"
)

// addJSONFlag adds the --json flag of a read command.
func addJSONFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "json", false, "print JSON instead of a table")
}

// writeJSON writes v as indented JSON with a trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns. Call row for each line, then flush.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = termSafe(oneLine(fmt.Sprint(c)))
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// oneLine keeps a cell on one line, so that a multi-line error (a panic's
// stack) cannot break the table's alignment.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\t", " ")
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

// termSafe shows the control characters in s as escapes (\x1b, \u009b),
// so that text from the database (a handler's error, a job's arguments)
// cannot move the cursor, retitle the window or clear the screen of the
// operator's terminal. Newlines and tabs are kept.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !isControl(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// isControl reports whether r is a C0 or C1 control character or DEL,
// other than newline and tab.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0)
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	r := []rune(oneLine(s))
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// fmtTime formats a time in UTC to the second, or "-" when unset.
func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// fmtDuration rounds d for people: 1h2m, 3m4s, 5.2s, 12ms.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jobJSON is a job as the CLI prints it with --json: the row's fields with
// the arguments and metadata as JSON rather than base64.
type jobJSON struct {
	ID           int64                  `json:"id"`
	Kind         string                 `json:"kind"`
	Queue        string                 `json:"queue"`
	State        leasetype.JobState     `json:"state"`
	Priority     int                    `json:"priority"`
	Args         json.RawMessage        `json:"args"`
	Metadata     json.RawMessage        `json:"metadata"`
	UniqueKey    string                 `json:"unique_key,omitempty"`
	Key          string                 `json:"key,omitempty"`
	Sequence     string                 `json:"sequence,omitempty"`
	Attempt      int                    `json:"attempt"`
	MaxAttempts  int                    `json:"max_attempts"`
	Errors       int                    `json:"errors"`
	Expiries     int                    `json:"expiries"`
	LastError    string                 `json:"last_error,omitempty"`
	LeaseToken   int64                  `json:"lease_token"`
	LeaseOwner   string                 `json:"lease_owner,omitempty"`
	LeasedAt     *time.Time             `json:"leased_at,omitempty"`
	LeaseUntil   *time.Time             `json:"lease_until,omitempty"`
	HeartbeatAt  *time.Time             `json:"heartbeat_at,omitempty"`
	Heartbeats   int                    `json:"heartbeats"`
	LeaseTTL     string                 `json:"lease_ttl,omitempty"`
	ExpiryPolicy leasetype.ExpiryPolicy `json:"expiry_policy,omitempty"`
	ScheduledAt  time.Time              `json:"scheduled_at"`
	CreatedAt    time.Time              `json:"created_at"`
	FinalizedAt  *time.Time             `json:"finalized_at,omitempty"`
	// CancelRequestedAt is when cancellation of the running job was asked for.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
}

func toJobJSON(r *leasetype.JobRow) *jobJSON {
	j := &jobJSON{
		ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: r.State, Priority: r.Priority,
		Args: rawOr(r.EncodedArgs, "{}"), Metadata: rawOr(r.Metadata, "{}"), UniqueKey: r.UniqueKey,
		Key: r.Key, Sequence: r.Sequence,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Errors: r.Errors, Expiries: r.Expiries, LastError: r.LastError,
		LeaseToken: r.LeaseToken, LeaseOwner: r.LeaseOwner, LeasedAt: r.LeasedAt, LeaseUntil: r.LeaseUntil,
		HeartbeatAt: r.HeartbeatAt, Heartbeats: r.Heartbeats, ExpiryPolicy: r.ExpiryPolicy,
		ScheduledAt: r.ScheduledAt, CreatedAt: r.CreatedAt, FinalizedAt: r.FinalizedAt, CancelRequestedAt: r.CancelRequestedAt,
	}
	if r.LeaseTTL > 0 {
		j.LeaseTTL = r.LeaseTTL.String()
	}
	return j
}

// rawOr returns b as raw JSON when it is valid, else def.
func rawOr(b []byte, def string) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage(def)
	}
	return json.RawMessage(b)
}

// jobsTable writes the one-line-per-job table of jobs list and stuck list.
func jobsTable(w io.Writer, rows []*leasetype.JobRow, now time.Time) error {
	t := newTable(w, "ID", "STATE", "QUEUE", "KIND", "KEY", "PRI", "ATTEMPT", "ERRORS", "EXPIRIES", "SCHEDULED", "CREATED", "OWNER", "LEASE LEFT", "LAST ERROR")
	for _, r := range rows {
		t.row(r.ID, stateCell(r), r.Queue, r.Kind, orDash(r.Key), r.Priority, fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts), r.Errors, r.Expiries,
			fmtTime(&r.ScheduledAt), fmtTime(&r.CreatedAt), orDash(ownerIfHeld(r)), leaseLeft(r, now), orDash(truncate(r.LastError, 60)))
	}
	return t.flush()
}

// ownerIfHeld returns the lease owner of a running or stuck job: for other
// states the owner is history, shown in jobs show.
func ownerIfHeld(r *leasetype.JobRow) string {
	if r.State == leasetype.JobStateRunning || r.State == leasetype.JobStateStuck {
		return r.LeaseOwner
	}
	return ""
}

// leaseLeft says how long a running job's lease has left, on this machine's
// clock; "-" for other states.
func leaseLeft(r *leasetype.JobRow, now time.Time) string {
	if r.State != leasetype.JobStateRunning || r.LeaseUntil == nil {
		return "-"
	}
	left := r.LeaseUntil.Sub(now)
	if left <= 0 {
		return "expired " + fmtDuration(-left) + " ago"
	}
	return fmtDuration(left)
}

// stateCell is a job's state for a table: a running job whose cancellation
// was asked for says so.
func stateCell(r *leasetype.JobRow) string {
	if r.State == leasetype.JobStateRunning && r.CancelRequestedAt != nil {
		return "running (cancel requested)"
	}
	return string(r.State)
}
