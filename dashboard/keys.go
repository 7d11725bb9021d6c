package dashboard

import (
	"net/http"
	"strings"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

// keysLimit is the most top keys and blocked sequences the keys page shows.
const keysLimit = 50

type keysData struct {
	// Queue is the queue filter, "" for every queue.
	Queue string
	// Top holds the keys with the most waiting jobs.
	Top []*driver.KeyStatsRow
	// Queues sums up the keys with waiting jobs per queue.
	Queues []*driver.KeyQueueStatsRow
	// Blocked holds the blocked sequences.
	Blocked []*driver.SequenceBlockedRow
	// Limit is keysLimit, for the page's wording.
	Limit int
}

// keys is the flow-control view: the keys with the most waiting jobs and
// their running jobs, a per-queue summary of keys, and the blocked
// sequences with the job holding each up.
func (h *handler) keys(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "keys", "Keys", "keys"
	queue := strings.TrimSpace(r.URL.Query().Get("queue"))
	if len(queue) > maxTextParam {
		return badRequest("queue is longer than %d bytes", maxTextParam)
	}
	stats, err := h.src.KeyStats(r.Context(), &leasehold.KeyStatsParams{Queue: queue, Limit: keysLimit})
	if err != nil {
		return err
	}
	blocked, err := h.src.SequencesBlocked(r.Context(), &leasehold.SequencesBlockedParams{Queue: queue, Limit: keysLimit})
	if err != nil {
		return err
	}
	p.Data = &keysData{Queue: queue, Top: stats.Top, Queues: stats.Queues, Blocked: blocked, Limit: keysLimit}
	return nil
}
