/*
Package dashboard is the leasehold web dashboard: an http.Handler that on-call
engineers use to see and fix the queue without writing SQL.

It serves an overview (jobs per queue and state, throughput of the last 30
minutes, the age of the oldest claimable job, the client's counters), a job
browser with filters and paging, each job's detail with its attempt timeline,
the running jobs with their lease time left and a Cancel button that asks
the worker holding a job to stop it (the job then shows "cancellation
requested" until it ends cancelled), the stuck jobs that wait for
reconciliation, with the actions to settle them, the discarded (dead) jobs,
and the periodic schedules with their next run, last run and last job. The overview shows which
queues are paused and pauses or resumes a queue for every client. A jobs list
filtered to one state offers bulk actions on every matching job ("Retry all N
matching", discard, cancel, delete), each behind a confirmation page that
counts again and a CSRF-checked POST. Every action is recorded in the audit
trail with the identity that authenticated the request ("token",
"basic:<user>", "session", or "anonymous" without authentication; an actor
the embedding application set with leasehold.WithActor is kept): each job's
page lists its "Operator actions", and the Audit page lists them all. Pages are rendered on the
server with html/template; a small embedded script refreshes the page's
content every few seconds without reloading it, and stops while the tab is
hidden.

Mount it under any prefix:

	h, err := dashboard.New(client, &dashboard.Options{BasePath: "/leasehold", BasicAuth: &dashboard.BasicAuth{Username: "ops", Password: pw}})
	if err != nil {
		return err
	}
	mux.Handle("/leasehold/", http.StripPrefix("/leasehold", h))

# Security

Every value is escaped by html/template. Every action that changes a job or
a queue is a POST that must carry the page's CSRF token (a random value kept in a
SameSite=Strict cookie and repeated in the form, compared in constant time);
cross-origin browser requests are refused as well. Options.BearerToken and
Options.BasicAuth require authentication on every request, compared in
constant time; the token must be at least MinTokenLen bytes. With a token, a
browser asking for a page without credentials is sent to the login page
({BasePath}/login), which takes the token once and sets a session cookie
(HttpOnly, SameSite=Strict, Secure over TLS or with Options.SecureCookies,
for Options.SessionTTL): an expiry signed with HMAC-SHA256 under a key
derived from the token, so no state is kept, a restart with the same token
keeps sessions and a new token ends them all. Other requests without
credentials get 401 with WWW-Authenticate. Options.Authenticate applies the
same check to other handlers, such as /metrics. Options.ReadOnly hides the actions and refuses every POST.
Responses carry a Content-Security-Policy without 'unsafe-inline' (the
script and the style sheet are served by the handler), frame-ancestors
'none' and X-Content-Type-Options nosniff. Use ListenCheck before serving
the dashboard on its own listener: it refuses an address reachable from
other hosts when no authentication is configured.
*/
package dashboard
