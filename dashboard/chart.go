package dashboard

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// Charts are computed here as plain shapes and drawn by the templates as
// inline SVG, so html/template escapes every label and no script is needed.

// svgRect is one rectangle of a chart.
type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// svgText is one label of a chart.
type svgText struct {
	X, Y   float64
	Text   string
	Anchor string // start, middle or end
}

// svgLine is one line of a chart (grid lines, markers).
type svgLine struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

// throughputWindow is how far back the overview's charts reach.
const throughputWindow = 30 * time.Minute

// series of the throughput chart, bottom to top.
var throughputSeries = []struct{ name, class string }{
	{"completed", "oc-completed"}, {"failed", "oc-failed"}, {"lease expired", "oc-expired"}, {"other", "oc-other"},
}

func seriesOf(o leasetype.AttemptOutcome) int {
	switch o {
	case leasetype.OutcomeCompleted:
		return 0
	case leasetype.OutcomeFailed, leasetype.OutcomePanicked:
		return 1
	case leasetype.OutcomeLeaseExpired:
		return 2
	}
	return 3 // released, snoozed, cancelled
}

// barChart is a stacked bar chart of attempts ended per minute.
type barChart struct {
	W, H    float64
	Small   bool
	Label   string
	Bars    []svgRect
	Grid    []svgLine
	YLabels []svgText
	XLabels []svgText
	Totals  [4]int64
	Max     int64
}

// Sum is the number of attempts in the chart.
func (c *barChart) Sum() int64 { return c.Totals[0] + c.Totals[1] + c.Totals[2] + c.Totals[3] }

// Legend lists the series with their totals, for the chart's caption.
func (c *barChart) Legend() []legendEntry {
	out := make([]legendEntry, len(throughputSeries))
	for i, s := range throughputSeries {
		out[i] = legendEntry{Name: s.name, Class: s.class, Count: c.Totals[i]}
	}
	return out
}

type legendEntry struct {
	Name, Class string
	Count       int64
}

// throughputChart draws the attempts of the minutes ending with now's
// minute. queue "" takes every queue. small draws a sparkline without axes.
func throughputChart(counts []*leasetype.ThroughputCount, queue string, now time.Time, small bool) *barChart {
	const buckets = int(throughputWindow / time.Minute)
	last := now.UTC().Truncate(time.Minute)
	first := last.Add(-time.Duration(buckets-1) * time.Minute)
	var grid [buckets][4]int64
	c := &barChart{Small: small, Label: "attempts ended per minute, last 30 minutes"}
	for _, tc := range counts {
		if queue != "" && tc.Queue != queue {
			continue
		}
		i := int(tc.Minute.UTC().Truncate(time.Minute).Sub(first) / time.Minute)
		if i < 0 || i >= buckets {
			continue
		}
		s := seriesOf(tc.Outcome)
		grid[i][s] += tc.Count
		c.Totals[s] += tc.Count
	}
	for i := range grid {
		c.Max = max(c.Max, grid[i][0]+grid[i][1]+grid[i][2]+grid[i][3])
	}

	var left, top, bottom float64 = 40, 8, 20
	c.W, c.H = 1200, 170
	if small {
		left, top, bottom = 0, 2, 0
		c.W, c.H = 150, 28
	}
	plotW, plotH := c.W-left-4, c.H-top-bottom
	if small {
		plotW = c.W
	}
	slot := plotW / float64(buckets)
	scaleMax := niceCeil(c.Max)
	for i := range grid {
		x := left + float64(i)*slot + 1
		y := top + plotH
		minute := first.Add(time.Duration(i) * time.Minute)
		for s, n := range grid[i] {
			if n == 0 {
				continue
			}
			h := plotH * float64(n) / float64(scaleMax)
			y -= h
			c.Bars = append(c.Bars, svgRect{
				X: x, Y: y, W: max(slot-2, 1), H: h, Class: throughputSeries[s].class,
				Title: fmt.Sprintf("%s: %d %s", minute.Format("15:04"), n, throughputSeries[s].name),
			})
		}
	}
	if small {
		c.Grid = append(c.Grid, svgLine{X1: 0, Y1: top + plotH - 0.5, X2: c.W, Y2: top + plotH - 0.5, Class: "axis"})
		return c
	}
	for _, frac := range []float64{0, 0.5, 1} {
		y := top + plotH - plotH*frac
		c.Grid = append(c.Grid, svgLine{X1: left, Y1: y, X2: left + plotW, Y2: y, Class: "grid"})
		c.YLabels = append(c.YLabels, svgText{X: left - 6, Y: y + 4, Text: fmtCount(int64(float64(scaleMax) * frac)), Anchor: "end"})
	}
	for _, i := range []int{0, 10, 20, buckets - 1} {
		m := first.Add(time.Duration(i) * time.Minute)
		c.XLabels = append(c.XLabels, svgText{X: left + float64(i)*slot + slot/2, Y: c.H - 5, Text: m.Format("15:04"), Anchor: "middle"})
	}
	return c
}

// niceCeil rounds a chart's maximum up to 1, 2 or 5 times a power of ten.
func niceCeil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

// timeline draws a job's leases on one time axis: each lease's window (from
// the grant to its expiry as last renewed) as an outline, the time it was
// held as a filled bar coloured by outcome, and its last heartbeat as a tick.
type timeline struct {
	W, H   float64
	Rows   []timelineRow
	Grid   []svgLine
	Labels []svgText
}

type timelineRow struct {
	Label   svgText
	Window  svgRect
	Held    svgRect
	Beat    *svgLine
	Outcome string
}

// lease is one lease of a job, ended or current, for the timeline.
type lease struct {
	attempt       int
	token         int64
	owner         string
	leasedAt      time.Time
	leaseUntil    time.Time
	lastHeartbeat *time.Time
	heartbeats    int
	end           time.Time // finished, or now for the current lease
	outcome       string
	class         string
}

func leasesOf(job *leasetype.JobRow, attempts []*leasetype.AttemptRow, now time.Time) []lease {
	var out []lease
	for _, a := range attempts {
		out = append(out, lease{
			attempt: a.Attempt, token: a.Token, owner: a.Owner, leasedAt: a.LeasedAt, leaseUntil: a.LeaseUntil,
			lastHeartbeat: a.LastHeartbeatAt, heartbeats: a.Heartbeats, end: a.FinishedAt,
			outcome: string(a.Outcome), class: outcomeClass(a.Outcome),
		})
	}
	if job.State == leasetype.JobStateRunning && job.LeasedAt != nil && job.LeaseUntil != nil {
		end := now
		if end.Before(*job.LeasedAt) {
			end = *job.LeasedAt
		}
		out = append(out, lease{
			attempt: job.Attempt, token: job.LeaseToken, owner: job.LeaseOwner, leasedAt: *job.LeasedAt,
			leaseUntil: *job.LeaseUntil, lastHeartbeat: job.HeartbeatAt, heartbeats: job.Heartbeats, end: end,
			outcome: "running", class: "oc-running",
		})
	}
	return out
}

func newTimeline(leases []lease) *timeline {
	if len(leases) == 0 {
		return nil
	}
	start, end := leases[0].leasedAt, leases[0].end
	for _, l := range leases {
		start = minTime(start, l.leasedAt)
		end = maxTime(end, maxTime(l.end, l.leaseUntil))
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Second
	}
	const left, right, rowH, top = 130.0, 12.0, 22.0, 6.0
	t := &timeline{W: 1150}
	plotW := t.W - left - right
	x := func(at time.Time) float64 { return left + plotW*float64(at.Sub(start))/float64(span) }
	for i, l := range leases {
		y := top + float64(i)*rowH
		row := timelineRow{
			Label:   svgText{X: left - 8, Y: y + 14, Text: fmt.Sprintf("#%d · token %d", l.attempt, l.token), Anchor: "end"},
			Window:  svgRect{X: x(l.leasedAt), Y: y + 3, W: max(x(l.leaseUntil)-x(l.leasedAt), 2), H: 14, Class: "window"},
			Held:    svgRect{X: x(l.leasedAt), Y: y + 5, W: max(x(l.end)-x(l.leasedAt), 2), H: 10, Class: l.class},
			Outcome: l.outcome,
		}
		row.Held.Title = fmt.Sprintf("attempt %d (token %d) by %s: %s, held %s, lease until %s, %d heartbeats",
			l.attempt, l.token, l.owner, l.outcome, fmtDuration(l.end.Sub(l.leasedAt)), fmtTime(l.leaseUntil), l.heartbeats)
		row.Window.Title = "lease window until " + fmtTime(l.leaseUntil)
		if l.lastHeartbeat != nil {
			hx := x(*l.lastHeartbeat)
			row.Beat = &svgLine{X1: hx, Y1: y + 1, X2: hx, Y2: y + 19, Class: "beat"}
		}
		t.Rows = append(t.Rows, row)
	}
	t.H = top + float64(len(leases))*rowH + 22
	axisY := t.H - 18
	t.Grid = append(t.Grid, svgLine{X1: left, Y1: axisY, X2: left + plotW, Y2: axisY, Class: "axis"})
	t.Labels = append(t.Labels,
		svgText{X: left, Y: t.H - 4, Text: fmtTime(start), Anchor: "start"},
		svgText{X: left + plotW, Y: t.H - 4, Text: fmtTime(end) + " (" + fmtDuration(span) + ")", Anchor: "end"})
	return t
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
