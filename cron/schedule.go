package cron

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// searchYears bounds the search for a matching day. The longest gap between
// the days of a satisfiable spec is eight years: 29 February from 2096 to
// 2104 (2100 is not a leap year). A spec with no day in ten years has none.
const searchYears = 10

// The instants Next supports. Outside them it reports no slot.
var (
	minTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC) // time.Time{}
	maxTime = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
)

func inRange(t time.Time) bool { return !t.Before(minTime) && t.Before(maxTime) }

// cronSchedule is a parsed cron expression. Each field is a bit set of the
// values it matches; the day of week uses bits 0-6 (Sunday is 0).
type cronSchedule struct {
	second, minute, hour, dom, month, dow uint64
	// domAll and dowAll record that the day-of-month or day-of-week field
	// matches every value. Only when neither does is a day matched by either.
	domAll, dowAll bool
	loc            *time.Location
}

// Next returns the first slot strictly after t, in UTC; the zero time when
// there is none in the next ten years or t lies outside years 1-9999.
//
// A wall time matches when its second, minute, hour, month and day match
// the fields. Its slot is the first instant at which the zone's clock reads
// that wall time or later: a wall time skipped by a forward transition fires
// at the end of the gap, and one repeated by a backward transition fires at
// its first occurrence only.
func (s *cronSchedule) Next(t time.Time) time.Time {
	if !inRange(t) {
		return time.Time{}
	}
	// The answer is the slot of the first matching wall time that is later
	// than every wall time the clock has shown up to t: earlier wall times
	// were reached at or before t, and a wall time's slot only grows with it.
	from := s.maxWall(t.Unix()) + 1
	w, ok := s.nextMatch(civilOf(from))
	if !ok {
		return time.Time{}
	}
	return time.Unix(s.firstReaching(w.unix()), 0).UTC()
}

// The zone arithmetic below counts instants in Unix seconds and wall times in
// "naive" seconds: the Unix seconds of the same reading on a UTC clock. The
// wall time of instant u is u plus the zone's offset at u. Zone transitions
// happen on whole seconds, so the whole second of t (t.Unix()) is in the same
// zone period as t.

// lookBehind bounds how far the zone lookups look around an instant: more
// than the difference between any two UTC offsets.
const lookBehind = 48 * 60 * 60

// maxWall returns the latest wall time, in whole naive seconds, that the
// zone's clock has read at or before the Unix second u. It is the wall time
// of u itself except after a backward transition, while the clock repeats
// wall times it has already shown.
func (s *cronSchedule) maxWall(u int64) int64 {
	p := periodOf(s.loc, u)
	m := u + p.offset
	for p.start != math.MinInt64 && p.start > u-lookBehind {
		last := p.start - 1 // the last second of the previous period
		p = periodOf(s.loc, last)
		m = max(m, last+p.offset)
	}
	return m
}

// firstReaching returns the first Unix second at which the zone's clock
// reads naive wall time w or later: w itself when it exists (its first
// occurrence when it exists twice), else the end of the gap that skips it.
func (s *cronSchedule) firstReaching(w int64) int64 {
	u := w - lookBehind // the clock reads earlier than w here and before
	for {
		p := periodOf(s.loc, u)
		if c := max(u, w-p.offset); c < p.end {
			return c
		}
		u = p.end
	}
}

// period is a span [start, end) of Unix seconds with one UTC offset, in
// seconds. start and end are math.MinInt64 and math.MaxInt64 when unbounded.
type period struct {
	start, end, offset int64
}

// periodOf returns the period that contains the Unix second u. Its bounds
// may be closer to u than the zone's real transitions (time.Location splits
// periods at year boundaries), which is harmless: the offset is the same on
// both sides.
func periodOf(loc *time.Location, u int64) period {
	t := time.Unix(u, 0).In(loc)
	_, off := t.Zone()
	p := period{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		p.start = min(start.Unix(), u)
	}
	if !end.IsZero() {
		p.end = end.Unix()
	}
	if p.end <= u {
		// On the last UTC day of a leap year after a zone's last listed
		// transition, ZoneBounds reports the end of the zone's rule year as
		// 365 days after its start, a day early (go.dev/issue/81583). No
		// transition remains in that UTC year, so the period lasts at least
		// until the next one begins.
		p.end = time.Date(t.UTC().Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
		if p.end <= u { // never seen; one second at a time still terminates
			p.end = u + 1
		}
	}
	return p
}

// civil is a wall time: a date and a time of day with no zone.
type civil struct {
	year, month, day, hour, minute, second int
}

func civilOf(naive int64) civil {
	t := time.Unix(naive, 0).UTC()
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return civil{y, int(mo), d, h, mi, sec}
}

func (c civil) unix() int64 {
	return time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, c.second, 0, time.UTC).Unix()
}

// nextMatch returns the first wall time at or after c that matches the
// fields, searching up to searchYears years ahead.
func (s *cronSchedule) nextMatch(c civil) (civil, bool) {
	y, mo, d, h, mi, sec := c.year, c.month, c.day, c.hour, c.minute, c.second
	for last := y + searchYears; y <= last; y, mo, d, h, mi, sec = y+1, 1, 1, 0, 0, 0 {
		for ; mo <= 12; mo, d, h, mi, sec = mo+1, 1, 0, 0, 0 {
			if !has(s.month, mo) {
				continue
			}
			first := time.Date(y, time.Month(mo), 1, 0, 0, 0, 0, time.UTC)
			days := first.AddDate(0, 1, -1).Day()
			weekday := int(first.Weekday())
			for ; d <= days; d, h, mi, sec = d+1, 0, 0, 0 {
				if !s.dayMatches(d, (weekday+d-1)%7) {
					continue
				}
				if hh, mm, ss, ok := s.timeFrom(h, mi, sec); ok {
					return civil{y, mo, d, hh, mm, ss}, true
				}
			}
		}
	}
	return civil{}, false
}

// dayMatches applies the day-of-month and day-of-week fields. When both are
// restricted a day matches if either matches; otherwise both must match
// (one of them matches every day).
func (s *cronSchedule) dayMatches(day, weekday int) bool {
	domOK, dowOK := has(s.dom, day), has(s.dow, weekday)
	if s.domAll || s.dowAll {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// timeFrom returns the first matching time of day at or after h:m:sec.
func (s *cronSchedule) timeFrom(h, m, sec int) (int, int, int, bool) {
	for {
		hh, ok := nextBit(s.hour, h)
		if !ok {
			return 0, 0, 0, false
		}
		if hh != h {
			m, sec = 0, 0
		}
		mm, ok := nextBit(s.minute, m)
		if !ok {
			h, m, sec = hh+1, 0, 0
			continue
		}
		if mm != m {
			sec = 0
		}
		ss, ok := nextBit(s.second, sec)
		if !ok {
			h, m, sec = hh, mm+1, 0
			continue
		}
		return hh, mm, ss, true
	}
}

// String returns the canonical spec: a "CRON_TZ=" prefix unless the zone is
// UTC, then five fields, or six when the seconds are not just 0. Each field is
// written from the set of values it matches, in numbers, so specs that match
// the same times (say "@daily" and "0 0 * * *", or "MON-FRI" and "1-5") have
// the same canonical form.
func (s *cronSchedule) String() string {
	var b strings.Builder
	if s.loc != time.UTC {
		b.WriteString("CRON_TZ=")
		b.WriteString(s.loc.String())
		b.WriteByte(' ')
	}
	if s.second != 1 {
		b.WriteString(fields[fieldSecond].format(s.second))
		b.WriteByte(' ')
	}
	for i, set := range []uint64{s.minute, s.hour, s.dom, s.month, s.dow} {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fields[fieldMinute+i].format(set))
	}
	return b.String()
}

// format writes a value set in the canonical form of a field: "*" for every
// value; "*/n" or "a-b/n" for an evenly spaced series; else a list of single
// values and ranges of three or more.
func (f *field) format(set uint64) string {
	if set == f.all() {
		return "*"
	}
	var vals []int
	for v := f.min; v <= f.top; v++ {
		if has(set, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) >= 2 {
		step, even := vals[1]-vals[0], true
		for i := 2; i < len(vals); i++ {
			even = even && vals[i]-vals[i-1] == step
		}
		first, last, span := vals[0], vals[len(vals)-1], f.top-f.min+1
		switch {
		case !even || step == 1:
		case first == f.min && last+step > f.top && (len(vals) >= 3 || span%step == 0):
			return "*/" + strconv.Itoa(step)
		case len(vals) >= 4:
			return strconv.Itoa(first) + "-" + strconv.Itoa(last) + "/" + strconv.Itoa(step)
		}
	}
	var items []string
	for i := 0; i < len(vals); {
		j := i
		for j+1 < len(vals) && vals[j+1] == vals[j]+1 {
			j++
		}
		if j-i >= 2 {
			items = append(items, strconv.Itoa(vals[i])+"-"+strconv.Itoa(vals[j]))
		} else {
			for k := i; k <= j; k++ {
				items = append(items, strconv.Itoa(vals[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(items, ",")
}

// every is a fixed interval aligned to the Unix epoch.
type every struct {
	d time.Duration
}

// Next returns the first instant strictly after t that is a whole number of
// intervals from 1970-01-01T00:00:00Z, in UTC; the zero time when t lies
// outside years 1-9999.
func (e every) Next(t time.Time) time.Time {
	if !inRange(t) {
		return time.Time{}
	}
	// r = (t - epoch) mod d, from seconds and nanoseconds: the nanoseconds
	// since the epoch overflow an int64 outside the years 1678-2262.
	d := uint64(e.d)
	sec := t.Unix() % int64(d)
	if sec < 0 {
		sec += int64(d)
	}
	hi, lo := bits.Mul64(uint64(sec), 1e9%d)
	r := bits.Rem64(hi, lo, d)
	r = (r + uint64(t.Nanosecond())%d) % d
	return t.Add(time.Duration(d - r)).UTC()
}

// String returns "@every " and the interval as time.Duration formats it.
func (e every) String() string { return "@every " + e.d.String() }

// bitRange returns the set of the values lo to hi.
func bitRange(lo, hi int) uint64 {
	return (1<<uint(hi+1) - 1) &^ (1<<uint(lo) - 1)
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

// nextBit returns the lowest value at or above from in the set.
func nextBit(set uint64, from int) (int, bool) {
	if from >= 64 {
		return 0, false
	}
	rest := set &^ (1<<uint(from) - 1)
	if rest == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(rest), true
}
