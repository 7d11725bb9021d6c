package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
)

const maxNote = 2000

// action runs a job action posted by a form: retry, cancel, discard, or
// resolve (with as=succeeded|failed|retry and a note). It answers with a
// redirect to the page in the form's "next" field, or to the job.
func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	fail := func(code int, format string, args ...any) {
		e := badRequest(format, args...).(*httpError)
		e.code = code
		h.renderError(w, r, p, e)
	}
	if h.opts.ReadOnly {
		fail(http.StatusForbidden, "this dashboard is read-only")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if why := h.checkCSRF(r); why != "" {
		fail(http.StatusForbidden, "%s", why)
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
		_, err = h.src.JobCancel(ctx, id)
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
	http.Redirect(w, r, h.next(r, p.Base, id, done), http.StatusSeeOther)
}

// next is where to go after an action: the form's "next" page when it is
// one of the dashboard's own, else the job's page; with the outcome for the
// flash message.
func (h *handler) next(r *http.Request, base string, id int64, done string) string {
	target := base + "/jobs/" + strconv.FormatInt(id, 10)
	if u, err := url.Parse(r.PostFormValue("next")); err == nil && u.Scheme == "" && u.Host == "" && u.User == nil &&
		strings.HasPrefix(u.Path, base+"/") && !strings.HasPrefix(u.Path, "//") && !strings.Contains(u.Path, "\\") {
		q := u.Query()
		q.Del("done")
		q.Del("job")
		if enc := q.Encode(); enc != "" {
			target = u.Path + "?" + enc
		} else {
			target = u.Path
		}
	}
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	return target + sep + url.Values{"done": {done}, "job": {strconv.FormatInt(id, 10)}}.Encode()
}
