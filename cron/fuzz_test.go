package cron

import (
	"fmt"
	"math/big"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics and that, for every spec it
// accepts, the canonical form round-trips and Next returns a slot strictly
// after its argument that matches the spec, with no matching slot skipped
// (checked by brute force for UTC schedules).
func FuzzParse(f *testing.F) {
	seeds := []string{
		"* * * * *", "*/15 * * * *", "0 9 * * MON-FRI", "0 12 13 * FRI", "0 0 29 2 *", "0 0 30 2 *",
		"5/15 1-10/3 */2 JAN-MAR/2 FRI-SUN", "0 0 1,15 * 1-5", "*/10 * * * * *", "30 59 23 31 12 *",
		"0 0 */10 * SAT", "@daily", "@weekly", "@yearly", "@every 1h30m", "@every 1.5s", "@every 7m",
		"CRON_TZ=Europe/Berlin 30 2 * * *", "TZ=America/New_York 30 1 * * *", "CRON_TZ=Pacific/Apia 0 12 * * *",
		"CRON_TZ=Australia/Lord_Howe */20 1-2 * * *", "CRON_TZ=Europe/Berlin * * * * * *",
		"", "60 * * * *", "* * 32 * *", "*/0 * * * *", "5-3 * * * *", "1,,2 * * * *", "@every 0s", "@reboot",
		"CRON_TZ=Local 0 0 * * *", "CRON_TZ=Nowhere/Else @daily", "0 0 * * 7-1", "*/99999999999999999999 * * * *",
	}
	times := []int64{
		mustTime(f, "2024-03-31T00:59:59Z").Unix(), mustTime(f, "2024-10-27T01:15:00Z").Unix(),
		mustTime(f, "2024-11-03T06:15:00Z").Unix(), mustTime(f, "2096-03-01T00:00:00Z").Unix(),
		mustTime(f, "2040-12-31T12:00:00Z").Unix(), 0, -1,
	}
	for i, spec := range seeds {
		f.Add(spec, times[i%len(times)], uint32(i*123456789))
	}
	// Instants from 1900 to 2200: a wide spread of zone rules, historical and
	// by the TZif footer.
	lo, hi := mustTime(f, "1900-01-01T00:00:00Z").Unix(), mustTime(f, "2200-01-01T00:00:00Z").Unix()

	f.Fuzz(func(t *testing.T, spec string, sec int64, nsec uint32) {
		s, err := Parse(spec)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse(%q) returned a schedule and the error %v", spec, err)
			}
			return
		}
		canonical := s.String()
		again, err := Parse(canonical)
		if err != nil {
			t.Fatalf("Parse(%q) accepted; its String %q is rejected: %v", spec, canonical, err)
		}
		if again.String() != canonical {
			t.Fatalf("Parse(%q): String %q parses to String %q", spec, canonical, again.String())
		}

		span := hi - lo
		from := time.Unix(lo+((sec%span)+span)%span, int64(nsec%1e9)).UTC()
		next := s.Next(from)
		if n2 := again.Next(from); !n2.Equal(next) {
			t.Fatalf("%q and its canonical form %q disagree on Next(%s): %s and %s", spec, canonical, fmtTime(from), fmtTime(next), fmtTime(n2))
		}
		switch s := s.(type) {
		case every:
			checkEvery(t, s, from, next)
		case *cronSchedule:
			if err := checkCron(s, from, next); err != nil {
				t.Fatalf("%q: Next(%s) = %s: %v", canonical, fmtTime(from), fmtTime(next), err)
			}
		default:
			t.Fatalf("Parse(%q) returned a %T", spec, s)
		}
	})
}

// checkEvery checks that next is the first whole number of intervals after
// from since the epoch, with math/big.
func checkEvery(t *testing.T, e every, from, next time.Time) {
	t.Helper()
	ns := func(u time.Time) *big.Int {
		v := new(big.Int).Mul(big.NewInt(u.Unix()), big.NewInt(1e9))
		return v.Add(v, big.NewInt(int64(u.Nanosecond())))
	}
	d := big.NewInt(int64(e.d))
	q := new(big.Int).Div(ns(from), d) // Euclidean: floor for a positive divisor
	want := q.Add(q, big.NewInt(1)).Mul(q, d)
	if next.Location() != time.UTC || ns(next).Cmp(want) != 0 {
		t.Fatalf("%q: Next(%s) = %s, want %s ns after the epoch", e, fmtTime(from), fmtTime(next), want)
	}
}

// checkCron checks Next(from) = next against the spec, by means independent
// of the search in Next.
func checkCron(s *cronSchedule, from, next time.Time) error {
	if next.IsZero() {
		if feasible(s) {
			return fmt.Errorf("no slot for a spec that has matching days")
		}
		return nil
	}
	if !feasible(s) {
		return fmt.Errorf("a slot for a spec with no matching day")
	}
	if !next.After(from) || next.Location() != time.UTC || next.Nanosecond() != 0 {
		return fmt.Errorf("not a whole UTC second after the argument")
	}
	if err := checkSlot(s, next); err != nil {
		return err
	}
	if back := s.Next(next.Add(-time.Nanosecond)); !back.Equal(next) {
		return fmt.Errorf("Next of a nanosecond earlier is %s", fmtTime(back))
	}
	if s.loc == time.UTC { // no skipped slot: walk every candidate up to a limit
		step, limit := time.Minute, 3*24*time.Hour
		if s.second != 1 {
			step, limit = time.Second, 2*time.Hour
		}
		for u := from.Truncate(step).Add(step); u.Before(next) && u.Sub(from) < limit; u = u.Add(step) {
			if wallMatches(s, u) {
				return fmt.Errorf("skipped the matching %s", fmtTime(u))
			}
		}
	}
	return nil
}

// checkSlot checks that the instant next is a slot: either its wall clock
// matches and shows that wall time for the first time, or it ends a gap in the
// wall clock that skipped a matching wall time.
func checkSlot(s *cronSchedule, next time.Time) error {
	local := next.In(s.loc)
	start, _ := local.ZoneBounds()
	_, off := local.Zone()
	wall := local.Unix() + int64(off)
	prev := next.Add(-time.Second).In(s.loc)
	_, prevOff := prev.Zone()
	prevWall := prev.Unix() + int64(prevOff)
	if wallMatches(s, next) {
		// The only earlier instants that showed a later wall time are those
		// before a backward transition within the last two days.
		if !start.IsZero() && next.Sub(start) < 48*time.Hour {
			before := start.Add(-time.Second).In(s.loc)
			_, beforeOff := before.Zone()
			if before.Unix()+int64(beforeOff) >= wall {
				return fmt.Errorf("its wall time %s was shown before, before the transition at %s", local.Format(time.DateTime), fmtTime(start))
			}
		}
		return nil
	}
	if prevWall+1 >= wall {
		return fmt.Errorf("its wall time %s does not match", local.Format(time.DateTime))
	}
	for w := prevWall + 1; w < wall; w++ { // the gap
		if wallMatches(s, time.Unix(w, 0).UTC()) {
			return nil
		}
	}
	return fmt.Errorf("its wall time %s does not match, nor any in the gap from %s", local.Format(time.DateTime), prev.Format(time.DateTime))
}

// wallMatches reports whether the wall clock of t in the schedule's zone
// matches the fields, with the day-of-month/day-of-week rule written out
// again.
func wallMatches(s *cronSchedule, t time.Time) bool {
	t = t.In(s.loc)
	if s.loc != time.UTC {
		_, off := t.Zone()
		t = time.Unix(t.Unix()+int64(off), 0).UTC() // the wall clock as a UTC reading
	}
	in := func(set uint64, v int) bool { return set>>v&1 == 1 }
	domRestricted := s.dom != 0xFFFFFFFE // 1-31
	dowRestricted := s.dow != 0x7F       // 0-6
	dayOK := in(s.dom, t.Day()) && in(s.dow, int(t.Weekday()))
	if domRestricted && dowRestricted {
		dayOK = in(s.dom, t.Day()) || in(s.dow, int(t.Weekday()))
	}
	return dayOK && in(s.month, int(t.Month())) && in(s.hour, t.Hour()) && in(s.minute, t.Minute()) && in(s.second, t.Second())
}

// feasible reports whether any day matches: always when the day of week is
// restricted (every month has every weekday) or the day of month is not;
// otherwise when some month has one of the days of month.
func feasible(s *cronSchedule) bool {
	if s.dow != 0x7F || s.dom == 0xFFFFFFFE {
		return true
	}
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		for d := 1; d <= longest[m]; d++ {
			if s.month>>m&1 == 1 && s.dom>>d&1 == 1 {
				return true
			}
		}
	}
	return false
}
