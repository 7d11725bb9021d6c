package driver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// AuditInsertParams is one entry of the audit trail (see
// leasetype.AuditRow for the fields). Its time is the database clock.
type AuditInsertParams struct {
	Actor  string
	Action string
	Queue  string
	// JobID is the job of a single-job action, 0 for none.
	JobID int64
	// JobIDs are the jobs of a bulk batch.
	JobIDs []int64
	Count  int64
	Note   string
	Detail string
}

// AuditListParams filters the audit trail. Zero fields do not filter.
type AuditListParams struct {
	// JobID keeps entries about this job: its single-job actions and the
	// bulk batches that changed it.
	JobID int64
	// Queue keeps entries about this queue.
	Queue string
	// Actor keeps entries of this actor.
	Actor string
	// Since keeps entries recorded at or after it.
	Since time.Time
	// BeforeID pages: only entries with a smaller ID.
	BeforeID int64
	// Limit is the most rows to return; zero means 100.
	Limit int
}

// DefaultAuditListLimit is the listing size when AuditListParams.Limit is zero.
const DefaultAuditListLimit = 100

// EncodeAuditJobIDs stores a bulk batch's job IDs as text: ",1,2,3,", so
// that an entry about job N is found with LIKE '%,N,%' on every backend
// ("" for none).
func EncodeAuditJobIDs(ids []int64) string {
	if len(ids) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte(',')
	for _, id := range ids {
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte(',')
	}
	return b.String()
}

// DecodeAuditJobIDs reads what EncodeAuditJobIDs stored.
func DecodeAuditJobIDs(s string) []int64 {
	var out []int64
	for part := range strings.SplitSeq(strings.Trim(s, ","), ",") {
		if id, err := strconv.ParseInt(part, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// AuditJobPattern is the LIKE pattern matching the encoded job IDs of a
// bulk batch that holds id.
func AuditJobPattern(id int64) string {
	return "%," + strconv.FormatInt(id, 10) + ",%"
}

// JobFilter selects jobs for JobCount and JobBulk. Zero fields do not filter.
type JobFilter struct {
	// States keeps jobs in one of them; empty keeps every state (JobBulk
	// never touches a running job whatever States says).
	States []leasetype.JobState
	// Queue keeps jobs of this queue.
	Queue string
	// Kind keeps jobs of this kind.
	Kind string
	// OlderThan, when positive, keeps jobs created more than OlderThan
	// before the database clock.
	OlderThan time.Duration
}

// JobCountParams selects the jobs JobCount counts.
type JobCountParams struct {
	JobFilter
}

// JobBulkParams is one batch of a bulk action: a state change, or a
// deletion, of up to Limit jobs that match the filter, are not running and
// have an ID above AfterID, taken in ID order.
type JobBulkParams struct {
	JobFilter
	// AfterID is the cursor: only jobs with a larger ID. Pass the previous
	// batch's LastID, so that a job the batch skipped is not examined again.
	AfterID int64
	// Limit is the most jobs examined, 1 to 10,000.
	Limit int
	// Delete deletes the jobs (their attempt rows are kept, as JobPrune
	// does) instead of changing their state.
	Delete bool
	// State is the jobs' new state when not Delete; never running.
	State leasetype.JobState
	// ResetErrors zeroes Errors and Expiries, as JobSetState does.
	ResetErrors bool
	// Note, when not empty, becomes LastError.
	Note string
}

// JobBulkResult is what one JobBulk batch did.
type JobBulkResult struct {
	// IDs are the jobs changed (or deleted), in ID order.
	IDs []int64
	// Conflicts are the jobs skipped because the new state would make them
	// hold a unique key another job holds (see ErrUniqueConflict).
	Conflicts []int64
	// Examined is how many jobs matched the filter in this batch (at most
	// Limit); fewer than Limit means there are no more.
	Examined int
	// LastID is the largest ID examined, 0 when none was.
	LastID int64
}

// ValidateJobBulk checks JobBulkParams as every backend must.
func ValidateJobBulk(p *JobBulkParams) error {
	if p.Limit < 1 || p.Limit > 10000 {
		return fmt.Errorf("bulk: limit %d is outside 1 to 10000", p.Limit)
	}
	if !p.Delete && (!p.State.Valid() || p.State == leasetype.JobStateRunning) {
		return fmt.Errorf("bulk: cannot move jobs to %q", p.State)
	}
	for _, s := range p.States {
		if !s.Valid() {
			return fmt.Errorf("bulk: unknown state %q", s)
		}
	}
	return nil
}

// JobBulkVerb names a bulk batch in errors: "delete" or "set state".
func JobBulkVerb(p *JobBulkParams) string {
	if p.Delete {
		return "delete"
	}
	return "set state " + string(p.State)
}

// NotRunningStates are every job state but running.
func NotRunningStates() []leasetype.JobState {
	var out []leasetype.JobState
	for _, s := range leasetype.JobStates() {
		if s != leasetype.JobStateRunning {
			out = append(out, s)
		}
	}
	return out
}
