package dashboard

import (
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

// bulkActions are the bulk actions in the order the jobs page offers them,
// with their labels and the states each applies to.
var bulkActions = []bulkActionDef{
	{leasehold.BulkRetry, "Retry", "", []leasetype.JobState{leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled, leasetype.JobStateStuck}},
	{leasehold.BulkDiscard, "Discard", "danger", []leasetype.JobState{leasetype.JobStatePending, leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateStuck}},
	{leasehold.BulkCancel, "Cancel", "plain", []leasetype.JobState{leasetype.JobStatePending, leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateStuck, leasetype.JobStateRunning}},
	{leasehold.BulkDelete, "Delete", "danger", []leasetype.JobState{leasetype.JobStatePending, leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled, leasetype.JobStateStuck}},
}

// bulkActionDef is a bulk action as the dashboard offers it.
type bulkActionDef struct {
	Action leasehold.BulkAction
	Label  string
	Class  string
	From   []leasetype.JobState
}

// bulkButton is one bulk action the jobs page offers.
type bulkButton struct {
	Action leasehold.BulkAction
	Label  string
	Class  string
}

// bulkOffer is the jobs page's bulk card: the actions that apply to the
// filtered state and how many jobs match.
type bulkOffer struct {
	Count   int64
	Buttons []bulkButton
	// State, Queue and Kind are the filter, passed on to the confirmation.
	State, Queue, Kind string
}

// bulkOffer returns the bulk card for a jobs filter: only for one state
// (so the count is that of every action offered), without an ID, unique
// key or key filter, with at least one matching job, on a dashboard that acts.
func (h *handler) bulkOffer(r *http.Request, f *jobFilter) *bulkOffer {
	if h.opts.ReadOnly || f.State() == "" || f.ID > 0 || f.UniqueKey != "" || f.Key != "" {
		return nil
	}
	state := leasetype.JobState(f.State())
	o := &bulkOffer{State: string(state), Queue: f.Queue, Kind: f.Kind}
	for _, a := range bulkActions {
		if slices.Contains(a.From, state) {
			o.Buttons = append(o.Buttons, bulkButton{a.Action, a.Label, a.Class})
		}
	}
	if len(o.Buttons) == 0 {
		return nil
	}
	n, err := h.src.JobBulkCount(r.Context(), &leasehold.BulkParams{
		Action: o.Buttons[0].Action, States: []leasetype.JobState{state}, Queue: f.Queue, Kind: f.Kind,
	})
	if err != nil {
		h.opts.Logger.Warn("dashboard: count the jobs of a bulk action", "error", err)
		return nil
	}
	if n == 0 {
		return nil
	}
	o.Count = n
	return o
}

// bulkData is the confirmation page of a bulk action.
type bulkData struct {
	Action    leasehold.BulkAction
	Label     string
	Class     string
	State     string
	Queue     string
	Kind      string
	OlderThan string
	Count     int64
	// Running reports that the action asks running jobs to cancel.
	Running bool
	Batch   int
}

// parseBulk reads a bulk action and its filter from a query or a form.
func parseBulk(v url.Values) (*leasehold.BulkParams, *bulkData, error) {
	d := &bulkData{
		Action: leasehold.BulkAction(v.Get("action")),
		State:  strings.TrimSpace(v.Get("state")),
		Queue:  strings.TrimSpace(v.Get("queue")),
		Kind:   strings.TrimSpace(v.Get("kind")),
		Batch:  leasehold.DefaultBulkBatchSize,
	}
	i := slices.IndexFunc(bulkActions, func(a bulkActionDef) bool { return a.Action == d.Action })
	if i < 0 {
		return nil, nil, badRequest("bulk action %q: want retry, discard, cancel or delete", d.Action)
	}
	d.Label, d.Class = bulkActions[i].Label, bulkActions[i].Class
	state := leasetype.JobState(d.State)
	if !state.Valid() {
		return nil, nil, badRequest("a bulk action needs one state: %q is not one of %s", d.State, stateList())
	}
	if !slices.Contains(bulkActions[i].From, state) {
		return nil, nil, badRequest("%s does not apply to %s jobs", strings.ToLower(d.Label), state)
	}
	if len(d.Queue) > maxTextParam || len(d.Kind) > maxTextParam {
		return nil, nil, badRequest("queue and kind are at most %d bytes", maxTextParam)
	}
	p := &leasehold.BulkParams{Action: d.Action, States: []leasetype.JobState{state}, Queue: d.Queue, Kind: d.Kind}
	if s := strings.TrimSpace(v.Get("older_than")); s != "" {
		age, err := time.ParseDuration(s)
		if err != nil || age < 0 {
			return nil, nil, badRequest("older than %q: want a duration such as 30m, 2h or 72h", s)
		}
		p.OlderThan, d.OlderThan = age, s
	}
	d.Running = state == leasetype.JobStateRunning
	return p, d, nil
}

// bulkConfirm shows how many jobs a bulk action would change and asks to
// confirm it with a POST.
func (h *handler) bulkConfirm(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "bulk", "Bulk action", "jobs"
	if h.opts.ReadOnly {
		return &httpError{code: http.StatusForbidden, msg: "this dashboard is read-only"}
	}
	bp, d, err := parseBulk(r.URL.Query())
	if err != nil {
		return err
	}
	if d.Count, err = h.src.JobBulkCount(r.Context(), bp); err != nil {
		return err
	}
	p.Data = d
	return nil
}

// bulkPost runs a confirmed bulk action and redirects to the audit page,
// which shows its entries.
func (h *handler) bulkPost(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	if !h.allowPost(w, r, p) {
		return
	}
	bp, _, err := parseBulk(r.PostForm)
	if err != nil {
		h.renderError(w, r, p, err)
		return
	}
	res, err := h.src.JobBulk(r.Context(), bp)
	if err != nil {
		h.renderError(w, r, p, sourceError(err))
		return
	}
	flash := url.Values{
		"done":      {"bulk-" + string(bp.Action)},
		"n":         {strconv.FormatInt(res.Changed, 10)},
		"requested": {strconv.FormatInt(res.CancelRequested, 10)},
		"conflicts": {strconv.Itoa(len(res.Conflicts))},
	}
	http.Redirect(w, r, withFlash(p.Base+"/audit", flash), http.StatusSeeOther)
}

// bulkFlash turns the redirect after a bulk action into a message made of
// fixed texts and numbers only.
func (h *handler) bulkFlash(r *http.Request, p *pageData) {
	q := r.URL.Query()
	past, ok := map[string]string{
		"bulk-retry": "retried", "bulk-discard": "discarded", "bulk-cancel": "cancelled", "bulk-delete": "deleted",
	}[q.Get("done")]
	if !ok {
		return
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(q.Get(k), 10, 64)
		return max(n, 0)
	}
	msg := fmt.Sprintf("%s jobs %s.", fmtCount(num("n")), past)
	if n := num("requested"); n > 0 {
		msg += fmt.Sprintf(" Cancellation requested for %s running jobs: their workers end them.", fmtCount(n))
	}
	if n := num("conflicts"); n > 0 {
		msg += fmt.Sprintf(" %s skipped: another job holds their unique key (listed in the entries below).", fmtCount(n))
	}
	p.Flash = msg
}
