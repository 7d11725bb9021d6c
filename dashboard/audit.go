package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// Actor identities the dashboard records in the audit trail for its
// actions, by how the request authenticated.
const (
	actorToken     = "token"     // a bearer token
	actorSession   = "session"   // the login page's session cookie
	actorBasic     = "basic:"    // basic auth, followed by the user name
	actorAnonymous = "anonymous" // a dashboard without authentication
)

// identity names who sent r for the audit trail: "token", "basic:<user>",
// "session", or "anonymous" when the dashboard has no authentication. It
// is called once authenticate accepted r, and checks the credentials in the
// same order.
func (o *Options) identity(r *http.Request, now time.Time) string {
	if !o.HasAuth() {
		return actorAnonymous
	}
	if o.BearerToken != "" {
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") &&
			secretEqual(strings.TrimSpace(tok), o.BearerToken) {
			return actorToken
		}
	}
	if ba := o.BasicAuth; ba != nil {
		if user, pass, ok := r.BasicAuth(); ok && secretEqual(user, ba.Username) && secretEqual(pass, ba.Password) {
			return actorBasic + user
		}
	}
	if o.BearerToken != "" {
		if c, err := r.Cookie(sessionCookie); err == nil && validSession(sessionKey(o.BearerToken), c.Value, now, o.sessionTTL()) {
			return actorSession
		}
	}
	return actorAnonymous
}

// withActor gives r's context the identity that authenticated it, for the
// audit entries of the actions it posts. An actor the embedding
// application set already (leasehold.WithActor in its own middleware, with
// its own user names) is kept.
func (h *handler) withActor(r *http.Request) *http.Request {
	if leasehold.ActorFrom(r.Context()) != "" {
		return r
	}
	return r.WithContext(leasehold.WithActor(r.Context(), h.opts.identity(r, h.now())))
}

// jobAuditLimit bounds the operator actions shown on a job's page.
const jobAuditLimit = 50

// jobAudit returns the newest operator actions on job id for its page; nil,
// logged, when the trail cannot be read (the rest of the page still helps).
func (h *handler) jobAudit(r *http.Request, id int64) []*leasetype.AuditRow {
	rows, err := h.src.AuditList(r.Context(), &leasehold.AuditListParams{JobID: id, Limit: jobAuditLimit})
	if err != nil {
		h.opts.Logger.Warn("dashboard: read the audit trail of a job", "job", id, "error", err)
		return nil
	}
	return rows
}

// auditData is the audit page.
type auditData struct {
	Rows  []*leasetype.AuditRow
	Queue string
	Actor string
	JobID int64
	// Next links the next (older) page, "" on the last page.
	Next string
}

const auditPageSize = 100

// audit lists the operator actions, newest first, filtered by job, queue
// or actor, and pages backwards.
func (h *handler) audit(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "audit", "Audit", "audit"
	q := r.URL.Query()
	d := &auditData{Queue: strings.TrimSpace(q.Get("queue")), Actor: strings.TrimSpace(q.Get("actor"))}
	if len(d.Queue) > maxTextParam || len(d.Actor) > maxTextParam {
		return badRequest("queue and actor are at most %d bytes", maxTextParam)
	}
	var err error
	if d.JobID, err = positiveParam(q, "job"); err != nil {
		return err
	}
	before, err := positiveParam(q, "before")
	if err != nil {
		return err
	}
	rows, err := h.src.AuditList(r.Context(), &leasehold.AuditListParams{
		JobID: d.JobID, Queue: d.Queue, Actor: d.Actor, BeforeID: before, Limit: auditPageSize + 1,
	})
	if err != nil {
		return err
	}
	if len(rows) > auditPageSize {
		rows = rows[:auditPageSize]
		next := url.Values{}
		for k, v := range map[string]string{"queue": d.Queue, "actor": d.Actor} {
			if v != "" {
				next.Set(k, v)
			}
		}
		if d.JobID > 0 {
			next.Set("job", strconv.FormatInt(d.JobID, 10))
		}
		next.Set("before", strconv.FormatInt(rows[len(rows)-1].ID, 10))
		d.Next = "?" + next.Encode()
	}
	d.Rows = rows
	h.bulkFlash(r, p)
	p.Data = d
	return nil
}
