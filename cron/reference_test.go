package cron

import (
	"testing"
	"time"
)

// The reference below implements the rule of Next from its definition, by
// brute force and independently of the package's zone code: walk the
// instants minute by minute, and fire at an instant when the clock reaches
// (for the first time) a matching wall minute, or jumps over one. It reads the
// zone only through Time.Zone, not ZoneBounds, and needs zones whose offsets
// and transitions fall on whole minutes.

// wallMinute is a wall time to the minute.
type wallMinute struct {
	year              int
	month             time.Month
	day, hour, minute int
	weekday           time.Weekday
}

func wallOfMinutes(naive int64) wallMinute {
	t := time.Unix(naive*60, 0).UTC()
	return wallMinute{t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Weekday()}
}

// walk is the wall clock of a zone, minute by minute, over a window.
type walk struct {
	from    time.Time // the first instant; each next one is a minute later
	walls   []int64   // naive minutes of each instant's wall clock
	maxWall int64     // the latest wall minute shown before from
}

func newWalk(loc *time.Location, from, to time.Time) *walk {
	wall := func(u time.Time) int64 {
		_, off := u.In(loc).Zone()
		return (u.Unix() + int64(off)) / 60 // u is on a whole minute after 1970
	}
	start := from.Add(-48 * time.Hour).Truncate(time.Minute)
	w := &walk{from: from, maxWall: wall(start)}
	for u := start.Add(time.Minute); !u.After(from); u = u.Add(time.Minute) {
		w.maxWall = max(w.maxWall, wall(u))
	}
	for u := from.Add(time.Minute); !u.After(to); u = u.Add(time.Minute) {
		w.walls = append(w.walls, wall(u))
	}
	return w
}

// slots returns the slots after from of the spec that match describes.
func (w *walk) slots(match func(wallMinute) bool) []time.Time {
	highest := w.maxWall
	var slots []time.Time
	for i, wall := range w.walls {
		if wall <= highest {
			continue // the clock repeats wall times it has shown
		}
		for x := highest + 1; x <= wall; x++ { // usually just wall; more after a gap
			if match(wallOfMinutes(x)) {
				slots = append(slots, w.from.Add(time.Duration(i+1)*time.Minute))
				break
			}
		}
		highest = wall
	}
	return slots
}

func TestNextMatchesReference(t *testing.T) {
	specs := []struct {
		fields string
		match  func(w wallMinute) bool
	}{
		{"30 2 * * *", func(w wallMinute) bool { return w.hour == 2 && w.minute == 30 }},
		{"45 1 * * *", func(w wallMinute) bool { return w.hour == 1 && w.minute == 45 }},
		{"0 * * * *", func(w wallMinute) bool { return w.minute == 0 }},
		{"*/15 * * * *", func(w wallMinute) bool { return w.minute%15 == 0 }},
		{"@daily", func(w wallMinute) bool { return w.hour == 0 && w.minute == 0 }},
		{"*/7 1-3 * * *", func(w wallMinute) bool { return w.hour >= 1 && w.hour <= 3 && w.minute%7 == 0 }},
		{"* * * * *", func(w wallMinute) bool { return true }},
		{"15 2 * * SUN", func(w wallMinute) bool { return w.weekday == time.Sunday && w.hour == 2 && w.minute == 15 }},
		{"0 12 * * *", func(w wallMinute) bool { return w.hour == 12 && w.minute == 0 }},
		{"59 23 * * *", func(w wallMinute) bool { return w.hour == 23 && w.minute == 59 }},
		{"0,30 0 1,31 * *", func(w wallMinute) bool { return w.hour == 0 && w.minute%30 == 0 && (w.day == 1 || w.day == 31) }},
		{"0 2 * * 1-5", func(w wallMinute) bool {
			return w.hour == 2 && w.minute == 0 && w.weekday >= time.Monday && w.weekday <= time.Friday
		}},
	}
	windows := []struct {
		zone, from, to string
	}{
		{"Europe/Berlin", "2024-03-29T00:00:00Z", "2024-04-02T00:00:00Z"},
		{"Europe/Berlin", "2024-10-25T00:00:00Z", "2024-10-29T00:00:00Z"},
		{"America/New_York", "2024-03-08T00:00:00Z", "2024-03-12T00:00:00Z"},
		{"America/New_York", "2024-11-01T00:00:00Z", "2024-11-05T00:00:00Z"},
		{"Australia/Lord_Howe", "2024-04-05T00:00:00Z", "2024-04-09T00:00:00Z"},
		{"Australia/Lord_Howe", "2024-10-04T00:00:00Z", "2024-10-08T00:00:00Z"},
		{"America/Sao_Paulo", "2018-11-02T00:00:00Z", "2018-11-06T00:00:00Z"},
		{"America/Sao_Paulo", "2019-02-15T00:00:00Z", "2019-02-19T00:00:00Z"},
		{"Pacific/Apia", "2011-12-28T00:00:00Z", "2012-01-01T00:00:00Z"},
		{"Europe/Dublin", "2024-03-29T00:00:00Z", "2024-04-01T00:00:00Z"}, // negative DST in the IANA data
		{"Asia/Kathmandu", "2024-06-01T00:00:00Z", "2024-06-03T00:00:00Z"},
		// Past the zones' last listed transitions, where the rule of the
		// TZif footer applies: DST changes in a leap year, and the turn of a
		// leap year, where time.ZoneBounds misreports (go.dev/issue/81583).
		{"Europe/Berlin", "2040-03-23T00:00:00Z", "2040-03-27T00:00:00Z"},
		{"Europe/Berlin", "2040-10-26T00:00:00Z", "2040-10-30T00:00:00Z"},
		{"Europe/Berlin", "2040-12-29T00:00:00Z", "2041-01-02T00:00:00Z"},
		{"America/New_York", "2040-12-29T00:00:00Z", "2041-01-02T00:00:00Z"},
		{"Australia/Sydney", "2040-12-29T00:00:00Z", "2041-01-02T00:00:00Z"},
		{"America/New_York", "2096-12-29T00:00:00Z", "2097-01-02T00:00:00Z"},
	}
	for _, win := range windows {
		loc, err := time.LoadLocation(win.zone)
		if err != nil {
			t.Fatal(err)
		}
		from, to := mustTime(t, win.from), mustTime(t, win.to)
		ref := newWalk(loc, from, to)
		total := 0
		for _, sp := range specs {
			spec := "CRON_TZ=" + win.zone + " " + sp.fields
			want := ref.slots(sp.match)
			total += len(want)
			s := MustParse(spec)
			var got []time.Time
			for at := s.Next(from); !at.IsZero() && !at.After(to); at = s.Next(at) {
				got = append(got, at)
			}
			for i := range max(len(got), len(want)) {
				var g, w time.Time
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if !g.Equal(w) {
					t.Errorf("%q from %s: slot %d is %s, the reference says %s (local %s)",
						spec, win.from, i+1, fmtTime(g), fmtTime(w), w.In(loc).Format("2006-01-02 15:04:05 MST"))
					break
				}
			}
		}
		if total < 100 {
			t.Errorf("%s %s-%s: only %d slots in the window", win.zone, win.from, win.to, total)
		}
	}
}
