package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

const maxNote = 2000

// action runs a job action posted by a form: retry, cancel (of a waiting,
// stuck or running job), discard, or resolve (with as=succeeded|failed|retry
// and a note). It answers with a redirect to the page in the form's "next"
// field, or to the job.
func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	fail := func(code int, format string, args ...any) {
		h.renderError(w, r, p, &httpError{code: code, msg: fmt.Sprintf(format, args...)})
	}
	if !h.allowPost(w, r, p) {
		return
	}
	id, err := parseID("job ID", r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, p, err)
		return
	}
	ctx := r.Context()
	done := r.PathValue("action")
	switch done {
	case "retry":
		_, err = h.src.JobRetry(ctx, id)
	case "cancel":
		var row *leasetype.JobRow
		row, err = h.src.JobCancel(ctx, id)
		if err == nil && row != nil && row.State == leasetype.JobStateRunning {
			// A running job was asked to stop; its worker ends it.
			done = "cancel-requested"
		}
	case "discard":
		_, err = h.src.JobDiscard(ctx, id)
	case "resolve":
		as := leasehold.Resolution(r.PostFormValue("as"))
		switch as {
		case leasehold.ResolveSucceeded, leasehold.ResolveFailed, leasehold.ResolveRetry:
		default:
			fail(http.StatusBadRequest, "resolve as %q: want succeeded, failed or retry", as)
			return
		}
		note := strings.TrimSpace(r.PostFormValue("note"))
		if utf8.RuneCountInString(note) > maxNote {
			fail(http.StatusBadRequest, "the note is longer than %d characters", maxNote)
			return
		}
		if note == "" {
			note = "resolved as " + string(as) + " from the dashboard"
		}
		_, err = h.src.ResolveStuck(ctx, id, as, note)
		done += "-" + string(as)
	default:
		fail(http.StatusNotFound, "unknown action %q: want retry, cancel, discard or resolve", done)
		return
	}
	if err != nil {
		h.renderError(w, r, p, sourceError(err))
		return
	}
	target := h.next(r, p.Base, p.Base+"/jobs/"+strconv.FormatInt(id, 10))
	http.Redirect(w, r, withFlash(target, url.Values{"done": {done}, "job": {strconv.FormatInt(id, 10)}}), http.StatusSeeOther)
}

// allowPost refuses a state-changing request, with the error page, when the
// dashboard is read-only or the CSRF check fails; it reports whether to go on.
func (h *handler) allowPost(w http.ResponseWriter, r *http.Request, p *pageData) bool {
	if h.opts.ReadOnly {
		h.renderError(w, r, p, &httpError{code: http.StatusForbidden, msg: "this dashboard is read-only"})
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if why := h.checkCSRF(r); why != "" {
		h.renderError(w, r, p, &httpError{code: http.StatusForbidden, msg: why})
		return false
	}
	return true
}

// queueAction pauses or resumes a queue, posted by a form on the overview.
// It answers with a redirect to the page in the form's "next" field, or to
// the overview.
func (h *handler) queueAction(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	if !h.allowPost(w, r, p) {
		return
	}
	name := r.PathValue("queue")
	if err := checkQueueName(name); err != nil {
		h.renderError(w, r, p, err)
		return
	}
	var err error
	done := r.PathValue("action")
	switch done {
	case "pause":
		err = h.src.QueuePause(r.Context(), name)
	case "resume":
		err = h.src.QueueResume(r.Context(), name)
	default:
		h.renderError(w, r, p, &httpError{code: http.StatusNotFound, msg: fmt.Sprintf("unknown queue action %q: want pause or resume", done)})
		return
	}
	if err != nil {
		h.renderError(w, r, p, sourceError(err))
		return
	}
	target := h.next(r, p.Base, p.Base+"/")
	http.Redirect(w, r, withFlash(target, url.Values{"done": {done}, flashQueue: {name}}), http.StatusSeeOther)
}

// checkQueueName applies the core's rule for queue names, so a bad name is
// a 400 from the dashboard whatever the Source does with it.
func checkQueueName(name string) error {
	if err := leasehold.ValidateQueueName(name); err != nil {
		return badRequest("%s", strings.TrimPrefix(err.Error(), leasehold.ErrInvalidArgs.Error()+": "))
	}
	return nil
}

// Flash parameters: the redirect after an action names what was done
// ("done") and to what ("job", or flashQueue for a queue).
const flashQueue = "name"

// stripFlash removes the flash parameters from a page's query.
func stripFlash(q url.Values) {
	q.Del("done")
	q.Del("job")
	q.Del(flashQueue)
	q.Del("cancelled")
	q.Del("requested")
}

// next is where to go after an action: the form's "next" page when it is
// one of the dashboard's own, else fallback; without flash parameters.
func (h *handler) next(r *http.Request, base, fallback string) string {
	u, err := url.Parse(r.PostFormValue("next"))
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(u.Path, base+"/") || strings.HasPrefix(u.Path, "//") || strings.Contains(u.Path, "\\") {
		return fallback
	}
	q := u.Query()
	stripFlash(q)
	if enc := q.Encode(); enc != "" {
		return u.Path + "?" + enc
	}
	return u.Path
}

// withFlash adds the outcome of an action to the page it redirects to.
func withFlash(target string, flash url.Values) string {
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	return target + sep + flash.Encode()
}
