package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// queueRow is one queue of the overview.
type queueRow struct {
	Queue     string
	Counts    []stateCount // in leasetype.JobStates order
	Total     int64
	Available int64         // claimable now
	OldestAge time.Duration // of the oldest claimable job; 0 when none
	Chart     *barChart
	Paused    bool
	PausedAt  *time.Time
}

// stateCount is the number of jobs in one state.
type stateCount struct {
	State leasetype.JobState
	Count int64
}

func stateCounts() []stateCount {
	var out []stateCount
	for _, s := range leasetype.JobStates() {
		out = append(out, stateCount{State: s})
	}
	return out
}

type overviewData struct {
	Queues []*queueRow
	Totals []stateCount
	// Total counts every job; Claimable the claimable jobs of the queues
	// that are not paused, OldestAge the oldest of those.
	Total     int64
	Claimable int64
	OldestAge time.Duration
	Chart     *barChart
	Fleet     fleet
}

// fleet is the overview's figures of the whole fleet, from the database:
// the client registry and the job counts.
type fleet struct {
	// Alive and Gone count the registry's rows (gone: stopped beating
	// without deregistering, not yet pruned).
	Alive, Gone int64
	// HeldByClients is the running count the alive clients reported at
	// their last beat; Running the running jobs of the job counts.
	HeldByClients, Running int64
}

func (h *handler) overview(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "overview", "Overview", "overview"
	ctx := r.Context()
	counts, err := h.src.JobCounts(ctx)
	if err != nil {
		return err
	}
	backlog, err := h.src.QueueBacklog(ctx)
	if err != nil {
		return err
	}
	tp, err := h.src.JobThroughput(ctx, p.Now.Truncate(time.Minute).Add(-throughputWindow+time.Minute))
	if err != nil {
		return err
	}
	control, err := h.src.QueueList(ctx)
	if err != nil {
		return err
	}
	states := leasetype.JobStates()
	clients, err := h.src.Clients(ctx)
	if err != nil {
		return err
	}
	d := &overviewData{Totals: stateCounts()}
	for _, c := range clients {
		if c.Alive {
			d.Fleet.Alive++
			d.Fleet.HeldByClients += c.Running
		} else {
			d.Fleet.Gone++
		}
	}
	byQueue := map[string]*queueRow{}
	row := func(q string) *queueRow {
		if byQueue[q] == nil {
			byQueue[q] = &queueRow{Queue: q, Counts: stateCounts()}
			d.Queues = append(d.Queues, byQueue[q])
		}
		return byQueue[q]
	}
	for _, c := range counts {
		i := slices.Index(states, c.State)
		if i < 0 {
			continue
		}
		qr := row(c.Queue)
		qr.Counts[i].Count += c.Count
		qr.Total += c.Count
		d.Totals[i].Count += c.Count
	}
	for _, b := range backlog {
		qr := row(b.Queue)
		qr.Available, qr.OldestAge = b.Available, b.OldestAge
	}
	for _, t := range tp {
		row(t.Queue) // a queue whose jobs are all pruned still shows its recent work
	}
	for _, c := range control {
		if c.Paused {
			qr := row(c.Name) // a paused queue shows even without jobs, so it can be resumed
			qr.Paused, qr.PausedAt = true, c.PausedAt
		}
	}
	slices.SortFunc(d.Queues, func(a, b *queueRow) int { return strings.Compare(a.Queue, b.Queue) })
	for _, qr := range d.Queues {
		d.Total += qr.Total
		if !qr.Paused && qr.Available > 0 {
			d.Claimable += qr.Available
			d.OldestAge = max(d.OldestAge, qr.OldestAge)
		}
		qr.Chart = throughputChart(tp, qr.Queue, p.Now, true)
	}
	d.Chart = throughputChart(tp, "", p.Now, false)
	if i := slices.Index(states, leasetype.JobStateRunning); i >= 0 {
		d.Fleet.Running = d.Totals[i].Count
	}
	queueFlash(r, p, control)
	p.Data = d
	return nil
}

// queueFlash turns the redirect after a queue action into a message. It
// names the queue only when the queue's state now matches the message, so a
// crafted link cannot put words in the page.
func queueFlash(r *http.Request, p *pageData, control []*leasehold.QueueInfo) {
	q := r.URL.Query()
	name, done := q.Get(flashQueue), q.Get("done")
	i := slices.IndexFunc(control, func(c *leasehold.QueueInfo) bool { return c.Name == name })
	if i < 0 {
		return
	}
	switch paused := control[i].Paused; {
	case done == "pause" && paused:
		p.Flash = fmt.Sprintf("Queue %s is paused: no client claims its jobs until it is resumed.", name)
	case done == "resume" && !paused:
		p.Flash = fmt.Sprintf("Queue %s is resumed: clients claim its jobs again.", name)
	}
}

// jobFilter is the jobs page's query, parsed and validated.
type jobFilter struct {
	States    []leasetype.JobState
	Queue     string
	Kind      string
	UniqueKey string
	Key       string // the flow-control key
	Sequence  string // the sequence key
	ID        int64
	BeforeID  int64
	Limit     int
	// pageState is the state a page lists (running, stuck), left out of its links.
	pageState bool
}

// State is the single state selected in the form, "" for any or several.
func (f *jobFilter) State() string {
	if len(f.States) == 1 {
		return string(f.States[0])
	}
	return ""
}

// query encodes the filter, without paging, for links.
func (f *jobFilter) query() url.Values {
	v := url.Values{}
	for _, s := range f.States {
		if !f.pageState {
			v.Add("state", string(s))
		}
	}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("queue", f.Queue)
	set("kind", f.Kind)
	set("unique_key", f.UniqueKey)
	set("key", f.Key)
	set("sequence", f.Sequence)
	if f.ID > 0 {
		v.Set("id", strconv.FormatInt(f.ID, 10))
	}
	if f.Limit != defaultLimit {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

const (
	defaultLimit = 50
	maxLimit     = 500
	maxTextParam = 512
)

func parseFilter(q url.Values) (*jobFilter, error) {
	f := &jobFilter{Limit: defaultLimit}
	for _, s := range q["state"] {
		for _, one := range strings.Split(s, ",") {
			one = strings.TrimSpace(one)
			if one == "" {
				continue
			}
			st := leasetype.JobState(one)
			if !st.Valid() {
				return nil, badRequest("unknown state %q: want one of %s", one, stateList())
			}
			if !slices.Contains(f.States, st) {
				f.States = append(f.States, st)
			}
		}
	}
	for key, dst := range map[string]*string{"queue": &f.Queue, "kind": &f.Kind, "unique_key": &f.UniqueKey, "key": &f.Key, "sequence": &f.Sequence} {
		v := strings.TrimSpace(q.Get(key))
		if len(v) > maxTextParam {
			return nil, badRequest("%s is longer than %d bytes", key, maxTextParam)
		}
		*dst = v
	}
	var err error
	if f.ID, err = positiveParam(q, "id"); err != nil {
		return nil, err
	}
	if f.BeforeID, err = positiveParam(q, "before"); err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return nil, badRequest("limit %q must be a whole number from 1 to %d", v, maxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// positiveParam parses an optional positive job ID parameter.
func positiveParam(q url.Values, key string) (int64, error) {
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(q.Get(key)), "#"))
	if v == "" {
		return 0, nil
	}
	return parseID(key, v)
}

func parseID(what, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, badRequest("%s %q is not a job ID: want a positive whole number", what, v)
	}
	return n, nil
}

func stateList() string {
	var names []string
	for _, s := range leasetype.JobStates() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// jobList is a page of jobs.
type jobList struct {
	Filter *jobFilter
	Jobs   []*leasetype.JobRow
	// Next links the next (older) page, "" on the last page.
	Next string
	// First links the first page, "" on the first page.
	First string
	// Bulk offers the bulk actions on every matching job; nil for none.
	Bulk *bulkOffer
}

// listJobs runs a filter and works out the paging links.
func (h *handler) listJobs(r *http.Request, f *jobFilter) (*jobList, error) {
	l := &jobList{Filter: f}
	if f.ID > 0 {
		job, err := h.src.JobGet(r.Context(), f.ID)
		if errors.Is(err, leasehold.ErrNotFound) {
			return l, nil
		}
		if err != nil {
			return nil, err
		}
		if matches(f, job) {
			l.Jobs = []*leasetype.JobRow{job}
		}
		return l, nil
	}
	jobs, err := h.src.JobList(r.Context(), &leasehold.JobListParams{
		States: f.States, Queue: f.Queue, Kind: f.Kind, UniqueKey: f.UniqueKey, Key: f.Key, Sequence: f.Sequence, BeforeID: f.BeforeID, Limit: f.Limit + 1,
	})
	if err != nil {
		return nil, err
	}
	if len(jobs) > f.Limit {
		jobs = jobs[:f.Limit]
		q := f.query()
		q.Set("before", strconv.FormatInt(jobs[len(jobs)-1].ID, 10))
		l.Next = "?" + q.Encode()
	}
	if f.BeforeID > 0 {
		l.First = "?" + f.query().Encode()
	}
	l.Jobs = jobs
	return l, nil
}

func matches(f *jobFilter, j *leasetype.JobRow) bool {
	return (len(f.States) == 0 || slices.Contains(f.States, j.State)) &&
		(f.Queue == "" || f.Queue == j.Queue) && (f.Kind == "" || f.Kind == j.Kind) &&
		(f.UniqueKey == "" || f.UniqueKey == j.UniqueKey) && (f.Key == "" || f.Key == j.Key) && (f.Sequence == "" || f.Sequence == j.Sequence) && (f.BeforeID == 0 || j.ID < f.BeforeID)
}

func (h *handler) jobs(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "jobs", "Jobs", "jobs"
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		return err
	}
	l, err := h.listJobs(r, f)
	if err != nil {
		return err
	}
	l.Bulk = h.bulkOffer(r, f)
	h.flash(r, p)
	p.Data = l
	return nil
}

// stateFilter serves the running and stuck pages: one state, with paging.
func (h *handler) stateFilter(r *http.Request, p *pageData, state leasetype.JobState) error {
	q := r.URL.Query()
	for _, k := range []string{"state", "id"} {
		if q.Has(k) {
			return badRequest("this page lists %s jobs; filter by %s on the jobs page", state, k)
		}
	}
	f, err := parseFilter(q)
	if err != nil {
		return err
	}
	if !q.Has("limit") {
		f.Limit = 200
	}
	f.States, f.pageState = []leasetype.JobState{state}, true
	l, err := h.listJobs(r, f)
	if err != nil {
		return err
	}
	h.flash(r, p)
	p.Data = l
	return nil
}

func (h *handler) running(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "running", "Running", "running"
	return h.stateFilter(r, p, leasetype.JobStateRunning)
}

func (h *handler) stuck(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "stuck", "Stuck", "stuck"
	return h.stateFilter(r, p, leasetype.JobStateStuck)
}

func (h *handler) discarded(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "discarded", "Discarded", "discarded"
	return h.stateFilter(r, p, leasetype.JobStateDiscarded)
}

type jobData struct {
	Job      *leasetype.JobRow
	Attempts []*leasetype.AttemptRow
	Timeline *timeline
	// Actions available in the job's state. CanCancel is for a waiting or
	// stuck job (with discard beside it); CanCancelRunning asks for the
	// cancellation of a running job that was not asked yet.
	CanRetry, CanCancel, CanCancelRunning, CanResolve bool
	// Audit is the operator actions on the job, newest first.
	Audit []*leasetype.AuditRow
	// Stages is the job's stage history; Upstream the jobs it waits for,
	// Downstream those waiting on it (when the source records them).
	Stages               []*leasetype.StageRow
	Upstream, Downstream []*leasetype.DependencyRow
	// GraphID and Step name the job's graph and step (InsertGraph); Graph
	// draws its dependencies.
	GraphID int64
	Step    string
	Graph   *depGraph
}

func (h *handler) job(r *http.Request, p *pageData) error {
	p.template, p.Nav = "job", "jobs"
	id, err := parseID("job ID", r.PathValue("id"))
	if err != nil {
		return err
	}
	p.Title = fmt.Sprintf("Job %d", id)
	job, err := h.src.JobGet(r.Context(), id)
	if err != nil {
		return err
	}
	attempts, err := h.src.JobAttempts(r.Context(), id)
	if err != nil {
		return err
	}
	d := &jobData{Job: job, Attempts: attempts, Timeline: newTimeline(leasesOf(job, attempts, p.Now)), Audit: h.jobAudit(r, id)}
	if err := h.jobStages(r, d); err != nil {
		return err
	}
	if err := h.jobGraph(r, d); err != nil {
		return err
	}
	switch job.State {
	case leasetype.JobStatePending, leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable:
		d.CanRetry = job.State != leasetype.JobStateAvailable && job.State != leasetype.JobStatePending
		d.CanCancel = true
	case leasetype.JobStateStuck:
		// Resolving is the way out of stuck, with a note; "run it again"
		// is one of its choices, so no bare Retry competes with it.
		d.CanCancel, d.CanResolve = true, true
	case leasetype.JobStateRunning:
		d.CanCancelRunning = job.CancelRequestedAt == nil
	case leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled:
		d.CanRetry = true
	}
	h.flash(r, p)
	p.Data = d
	return nil
}

// flash turns the redirect after an action into a message. Only fixed
// texts are shown, so a crafted link cannot put words in the page.
func (h *handler) flash(r *http.Request, p *pageData) {
	q := r.URL.Query()
	id, err := strconv.ParseInt(q.Get("job"), 10, 64)
	if err != nil || id < 1 {
		return
	}
	msg, ok := map[string]string{
		"retry":             "Job %d is available again.",
		"cancel":            "Job %d was cancelled.",
		"cancel-requested":  "Cancellation of job %d was requested: the worker holding it cancels its handler within moments, and the job ends cancelled unless the handler completes it first.",
		"discard":           "Job %d was discarded.",
		"resolve-succeeded": "Job %d was resolved as succeeded (completed).",
		"resolve-failed":    "Job %d was resolved as failed (discarded).",
		"resolve-retry":     "Job %d was resolved for a retry (available).",
	}[q.Get("done")]
	if ok {
		p.Flash = fmt.Sprintf(msg, id)
	}
}

// overdueAfter is how long past its next run a schedule may be before the
// page flags it: a leader enqueues a due slot at once, and a new leader
// takes over within the leader lease (15 s by default).
const overdueAfter = time.Minute

// scheduleRow is one periodic schedule with its last job.
type scheduleRow struct {
	*leasetype.PeriodicSchedule
	// LastJob is the job of the last slot enqueued; nil when there was none
	// or it has been pruned (LastJobGone).
	LastJob     *leasetype.JobRow
	LastJobGone bool
	LastID      int64 // the last job's ID, 0 when none
	// Overdue reports a next run more than overdueAfter in the past: no
	// leader enqueues the schedule's slots.
	Overdue bool
	// Queue is the queue of the last job (schedules do not store theirs),
	// "" when unknown; QueuePaused reports that it is paused, so the
	// schedule's jobs wait.
	Queue       string
	QueuePaused bool
}

type schedulesData struct {
	Schedules []*scheduleRow
}

// maxScheduleJobs bounds the last-job lookups of one schedules page.
const maxScheduleJobs = 200

func (h *handler) schedules(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "schedules", "Schedules", "schedules"
	ctx := r.Context()
	rows, err := h.src.PeriodicSchedules(ctx)
	if err != nil {
		return err
	}
	control, err := h.src.QueueList(ctx)
	if err != nil {
		return err
	}
	paused := map[string]bool{}
	for _, c := range control {
		paused[c.Name] = c.Paused
	}
	d := &schedulesData{}
	for i, row := range rows {
		sr := &scheduleRow{PeriodicSchedule: row, Overdue: p.Now.Sub(row.NextRunAt) > overdueAfter}
		if row.LastJobID != nil {
			sr.LastID = *row.LastJobID
		}
		if sr.LastID > 0 && i < maxScheduleJobs {
			job, err := h.src.JobGet(ctx, sr.LastID)
			switch {
			case errors.Is(err, leasehold.ErrNotFound):
				sr.LastJobGone = true
			case err != nil:
				return err
			default:
				sr.LastJob = job
				sr.Queue, sr.QueuePaused = job.Queue, paused[job.Queue]
			}
		}
		d.Schedules = append(d.Schedules, sr)
	}
	p.Data = d
	return nil
}
