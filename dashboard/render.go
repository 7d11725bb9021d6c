package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// fragmentHeader marks the live-refresh requests of the page script: they
// get the page's content without the surrounding layout.
const fragmentHeader = "X-Leasehold-Fragment"

// pageData is what every template gets.
type pageData struct {
	Title    string
	Nav      string // the active navigation entry
	Base     string
	CSRF     string
	ReadOnly bool
	SignedIn bool  // by the login page's session cookie: offer to sign out
	Refresh  int64 // live refresh interval in ms; 0 is off
	Now      time.Time
	Flash    string
	Here     string // this page's path and query, for the "next" of forms
	CSS, JS  string // asset URLs
	Data     any

	template string
}

// httpError is an error page with a status code.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// sourceError maps an error from the Source to the status it deserves.
func sourceError(err error) error {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return err
	case errors.Is(err, leasehold.ErrNotFound):
		return &httpError{code: http.StatusNotFound, msg: onePrefix(err.Error())}
	case errors.Is(err, leasehold.ErrJobState):
		return &httpError{code: http.StatusConflict, msg: onePrefix(err.Error())}
	case errors.Is(err, leasehold.ErrInvalidArgs):
		return &httpError{code: http.StatusBadRequest, msg: onePrefix(err.Error())}
	case errors.Is(err, context.Canceled):
		return &httpError{code: 499, msg: "request cancelled"}
	}
	return &httpError{code: http.StatusInternalServerError, msg: onePrefix(err.Error())}
}

// onePrefix drops a wrapping prefix repeated by two layers ("leasehold:
// list jobs: list jobs: ..." becomes "leasehold: list jobs: ..."), so the
// error page says each step once.
func onePrefix(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p == out[len(out)-1] {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

type pageFunc func(r *http.Request, p *pageData) error

func (h *handler) newPage(w http.ResponseWriter, r *http.Request) *pageData {
	p := &pageData{
		Base: h.base(r), CSRF: h.csrfToken(w, r), ReadOnly: h.opts.ReadOnly, Now: h.clock(r.Context()).UTC(),
	}
	_, p.SignedIn = h.opts.authenticate(r, h.now())
	if h.opts.RefreshInterval > 0 {
		p.Refresh = h.opts.RefreshInterval.Milliseconds()
	}
	q := r.URL.Query()
	stripFlash(q)
	p.Here = p.Base + r.URL.Path
	if enc := q.Encode(); enc != "" {
		p.Here += "?" + enc
	}
	p.CSS = p.Base + "/static/app.css?v=" + h.assetHash["app.css"]
	p.JS = p.Base + "/static/app.js?v=" + h.assetHash["app.js"]
	return p
}

// page adapts a page function: it renders the page, or its error page.
func (h *handler) page(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := h.newPage(w, r)
		if err := fn(r, p); err != nil {
			h.renderError(w, r, p, sourceError(err))
			return
		}
		h.render(w, r, http.StatusOK, p)
	}
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, code int, p *pageData) {
	t := h.pages[p.template]
	name := "layout"
	if r.Header.Get(fragmentHeader) == "1" {
		name = "content"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, p); err != nil {
		h.opts.Logger.Error("dashboard: render page", "page", p.template, "error", err)
		http.Error(w, "500 internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Vary", fragmentHeader)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	Code   int
	Status string
	Msg    string
}

func (h *handler) renderError(w http.ResponseWriter, r *http.Request, p *pageData, he error) {
	e := he.(*httpError)
	if e.code == 499 {
		return // the client is gone
	}
	if e.code == http.StatusInternalServerError {
		e = h.explainSchema(r.Context(), e)
	}
	if e.code >= 500 {
		h.opts.Logger.Error("dashboard: request failed", "path", r.URL.Path, "error", e.msg)
	}
	p.template, p.Title = "error", http.StatusText(e.code)
	p.Data = &errorData{Code: e.code, Status: http.StatusText(e.code), Msg: e.msg}
	h.render(w, r, e.code, p)
}

// SchemaChecker is implemented by a Source that can compare the database's
// schema with the one it needs (*leasehold.Client does: CheckSchema).
type SchemaChecker interface {
	// CheckSchema returns an error saying what to run when the schema is
	// missing, older than needed, or newer and incompatible.
	CheckSchema(ctx context.Context) error
}

// explainSchema turns a failed page into the reason an operator can act on
// when the schema is the cause ("run `leasehold migrate up`"), instead of a
// raw "no such table".
func (h *handler) explainSchema(ctx context.Context, e *httpError) *httpError {
	sc, ok := h.src.(SchemaChecker)
	if !ok {
		return e
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := sc.CheckSchema(ctx); errors.Is(err, leasehold.ErrSchemaOutdated) || errors.Is(err, leasehold.ErrSchemaTooNew) {
		return &httpError{code: http.StatusServiceUnavailable, msg: onePrefix(err.Error())}
	}
	return e
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.renderError(w, r, h.newPage(w, r), &httpError{code: http.StatusNotFound, msg: "no such page: " + r.URL.Path})
}

func (h *handler) parseTemplates() error {
	funcs := template.FuncMap{
		"stateClass": stateClass,
		"states":     leasetype.JobStates,
		"time":       fmtTime,
		"rel":        relTime,
		"stamp":      stamp,
		"dur":        fmtDuration,
		"left":       leaseLeft,
		"pretty":     prettyJSON,
		"trunc":      truncate,
		"num":        fmtCount,
		"outcome":    outcomeClass,
		"idKey":      leasehold.IdempotencyKey,
		"f1":         func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
		"dict":       dict,
		"pathEscape": url.PathEscape,
	}
	h.pages = map[string]*template.Template{}
	for _, name := range []string{"overview", "jobs", "job", "running", "stuck", "discarded", "schedules", "login", "error", "audit", "bulk", "clients", "keys", "graph"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("dashboard: parse template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// stateClass returns the CSS class of a state badge.
func stateClass(s leasetype.JobState) string {
	if s.Valid() {
		return "st-" + string(s)
	}
	return "st-unknown"
}

func outcomeClass(o leasetype.AttemptOutcome) string {
	switch o {
	case leasetype.OutcomeCompleted:
		return "oc-completed"
	case leasetype.OutcomeFailed, leasetype.OutcomePanicked:
		return "oc-failed"
	case leasetype.OutcomeLeaseExpired:
		return "oc-expired"
	case leasetype.OutcomeCancelled:
		return "oc-cancelled"
	}
	return "oc-other"
}

// fmtTime shows a time in UTC to the second; nil or zero is a dash.
func fmtTime(v any) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func timeOf(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t == nil || t.IsZero() {
			return time.Time{}, false
		}
		return *t, true
	}
	return time.Time{}, false
}

// farFuture is how far ahead a time may be and still be said as "in ...":
// past it, "in 400d 3h" says less than the date. A week is still "in 6d 23h".
const farFuture = 7 * 24 * time.Hour

// relTime says how far a time is from now: "3m 5s ago", "in 20s"; a time
// more than farFuture ahead is its date: "on 2027-03-01 09:00Z".
func relTime(v any, now time.Time) string {
	t, ok := timeOf(v)
	if !ok {
		return ""
	}
	d := now.Sub(t)
	if d >= 0 {
		return fmtDuration(d) + " ago"
	}
	if -d > farFuture {
		return "on " + t.UTC().Format("2006-01-02 15:04Z")
	}
	return "in " + fmtDuration(-d)
}

// stamp is a time short enough for a table column: the time of day when
// it falls on now's date (UTC), else the date and time; fmtTime gives the
// full form for a title.
func stamp(v any, now time.Time) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	t, now = t.UTC(), now.UTC()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02 15:04:05Z")
}

// leaseLeft is the time left on a lease, on the database clock when the
// source can read it (see handler.clock). A negative result means the lease
// has lapsed and waits for the expirer.
func leaseLeft(until *time.Time, now time.Time) time.Duration {
	if until == nil {
		return 0
	}
	return until.Sub(now)
}

// fmtDuration is a short human duration: "450ms", "12s", "3m 5s", "2h 10m", "3d 4h".
func fmtDuration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		s = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		s = strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		s = fmt.Sprintf("%dm %ds", d/time.Minute, (d%time.Minute)/time.Second)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh %dm", d/time.Hour, (d%time.Hour)/time.Minute)
	default:
		s = fmt.Sprintf("%dd %dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
	}
	if neg {
		return "-" + s
	}
	return s
}

// fmtCount groups thousands: 1234567 is "1,234,567".
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// prettyJSON indents JSON for reading; text that is not JSON is shown as is.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// dict builds a map for passing several values to a sub-template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// databaseClock is implemented by sources that can read the database clock,
// the one leases are measured on (*leasehold.Client does).
type databaseClock interface {
	Now(ctx context.Context) (time.Time, error)
}

// clock returns the time pages are rendered against: the database clock
// when the source offers it, else the dashboard's own.
func (h *handler) clock(ctx context.Context) time.Time {
	if dc, ok := h.src.(databaseClock); ok {
		if now, err := dc.Now(ctx); err == nil {
			return now
		}
	}
	return h.now()
}
