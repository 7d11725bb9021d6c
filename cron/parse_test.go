package cron

import (
	"strings"
	"testing"
	"time"

	_ "time/tzdata" // the tests need the zones even where the system has no IANA database
)

func TestParseAccepted(t *testing.T) {
	tests := []struct {
		spec, canonical string
	}{
		// Plain fields.
		{"* * * * *", "* * * * *"},
		{"0 0 * * *", "0 0 * * *"},
		{"59 23 31 12 *", "59 23 31 12 *"},
		{"00 007 * * *", "0 7 * * *"},
		{"  0\t0  *\t* *  ", "0 0 * * *"},
		{"15 10,14 * * *", "15 10,14 * * *"},
		{"1,2,3,5,6,7,9 * * * *", "1-3,5-7,9 * * * *"},
		{"3,1,2 * * * *", "1-3 * * * *"},
		{"1,2 * * * *", "1,2 * * * *"},
		{"1,1,1 * * * *", "1 * * * *"},
		{"0-59 0-23 1-31 1-12 0-6", "* * * * *"},

		// Steps.
		{"*/15 * * * *", "*/15 * * * *"},
		{"*/1 * * * *", "* * * * *"},
		{"0 */2 * * *", "0 */2 * * *"},
		{"0 0-23/6 * * *", "0 */6 * * *"},
		{"0 */5 * * *", "0 */5 * * *"},
		{"0 1-23/2 * * *", "0 1-23/2 * * *"},
		{"5/15 * * * *", "5-50/15 * * * *"},
		{"5-59/15 * * * *", "5-50/15 * * * *"},
		{"1-10/3 * * * *", "1-10/3 * * * *"},
		{"0,30 * * * *", "*/30 * * * *"},
		{"0,40 * * * *", "0,40 * * * *"},
		{"*/40 * * * *", "0,40 * * * *"},
		{"*/60 * * * *", "0 * * * *"},
		{"0 9-17/4 * * *", "0 9,13,17 * * *"},
		{"0 0 */10 * *", "0 0 */10 * *"},
		{"0 0 2/10 * *", "0 0 2,12,22 * *"},
		{"0 0 */5 1-6 *", "0 0 */5 1-6 *"},
		{"0 0 3-31/5 * *", "0 0 3-28/5 * *"},
		{"0 0 1 */3 *", "0 0 1 */3 *"},
		{"0 0 * * */2", "0 0 * * */2"},
		{"0 0 * * 1/2", "0 0 * * 1,3,5"},
		{"0 0 * * */7", "0 0 * * 0"},
		{"0 0 * * 7/2", "0 0 * * 0"},

		// Names, any case; 7 is Sunday.
		{"0 9 * * MON-FRI", "0 9 * * 1-5"},
		{"0 9 * * mon-fri", "0 9 * * 1-5"},
		{"0 9 * * Mon-Fri/2", "0 9 * * 1,3,5"},
		{"0 0 1 JAN,apr,Jul,OCT *", "0 0 1 */3 *"},
		{"0 0 1 jan-dec/6 *", "0 0 1 */6 *"},
		{"0 0 1 JAN-6 *", "0 0 1 1-6 *"},
		{"0 0 * * 7", "0 0 * * 0"},
		{"0 0 * * SUN", "0 0 * * 0"},
		{"0 0 * * 0,7", "0 0 * * 0"},
		{"0 0 * * 0-7", "0 0 * * *"},
		{"0 0 * * SUN-SAT", "0 0 * * *"},
		{"0 0 * * 5-7", "0 0 * * 0,5,6"},
		{"0 0 * * FRI-SUN", "0 0 * * 0,5,6"},
		{"0 0 * * SUN-SUN", "0 0 * * 0"},
		{"0 0 * * MON-SUN", "0 0 * * *"},
		{"0 0 1-31 * *", "0 0 * * *"},
		{"0 12 13 * FRI", "0 12 13 * 5"},
		{"0 0 30 2 *", "0 0 30 2 *"}, // accepted; it never fires

		// Six fields: seconds first; a seconds field of just 0 is dropped.
		{"30 * * * * *", "30 * * * * *"},
		{"0 * * * * *", "* * * * *"},
		{"0,0 0 0 * * *", "0 0 * * *"},
		{"*/10 * * * * *", "*/10 * * * * *"},
		{"* * * * * *", "* * * * * *"},
		{"0-29 0 0 1 1 *", "0-29 0 0 1 1 *"},

		// Descriptors, any case.
		{"@yearly", "0 0 1 1 *"},
		{"@annually", "0 0 1 1 *"},
		{"@monthly", "0 0 1 * *"},
		{"@weekly", "0 0 * * 0"},
		{"@daily", "0 0 * * *"},
		{"@midnight", "0 0 * * *"},
		{"@hourly", "0 * * * *"},
		{"@DAILY", "0 0 * * *"},
		{" @hourly ", "0 * * * *"},
		{"@every 1h", "@every 1h0m0s"},
		{"@every 90m", "@every 1h30m0s"},
		{"@every 1.5s", "@every 1.5s"},
		{"@every 500ms", "@every 500ms"},
		{"@every 1ns", "@every 1ns"},
		{"@EVERY 24h", "@every 24h0m0s"},

		// Time zones.
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "CRON_TZ=Europe/Berlin 30 2 * * *"},
		{"TZ=Europe/Berlin 30 2 * * *", "CRON_TZ=Europe/Berlin 30 2 * * *"},
		{"CRON_TZ=America/New_York @daily", "CRON_TZ=America/New_York 0 0 * * *"},
		{"TZ=America/New_York 0 */10 9-17 * * MON-FRI", "CRON_TZ=America/New_York */10 9-17 * * 1-5"},
		{"CRON_TZ=UTC 0 0 * * *", "0 0 * * *"},
		{"CRON_TZ=Etc/UTC 0 0 * * *", "CRON_TZ=Etc/UTC 0 0 * * *"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.spec, err)
			continue
		}
		if got := s.String(); got != tt.canonical {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.spec, got, tt.canonical)
		}
		assertRoundTrip(t, s)
	}
}

// assertRoundTrip checks that the canonical spec parses to a schedule with
// the same canonical spec and the same slots.
func assertRoundTrip(t *testing.T, s Schedule) {
	t.Helper()
	again, err := Parse(s.String())
	if err != nil {
		t.Errorf("Parse(%q) of a canonical spec: %v", s.String(), err)
		return
	}
	if again.String() != s.String() {
		t.Errorf("round trip: %q became %q", s.String(), again.String())
	}
	from := time.Date(2024, time.February, 27, 22, 59, 58, 0, time.UTC)
	a, b := from, from
	for range 20 {
		if a, b = s.Next(a), again.Next(b); !a.Equal(b) {
			t.Errorf("%q and its round trip disagree: %v and %v", s, a, b)
			return
		}
	}
}

func TestParseRejected(t *testing.T) {
	tests := []struct {
		spec, err string // err is the whole message, or a prefix when it ends in "..."
	}{
		{"", "cron: empty spec"},
		{" \t ", "cron: empty spec"},
		{"* * * *", `cron: expected 5 fields (or 6 with leading seconds), found 4 in "* * * *"`},
		{"* * * * * * *", "cron: expected 5 fields (or 6 with leading seconds), found 7..."},

		// Values out of range, named by field.
		{"60 * * * *", "cron: field minute: value 60 out of range 0-59"},
		{"* 24 * * *", "cron: field hour: value 24 out of range 0-23"},
		{"* * 32 * *", "cron: field day-of-month: value 32 out of range 1-31"},
		{"* * 0 * *", "cron: field day-of-month: value 0 out of range 1-31"},
		{"* * * 13 *", "cron: field month: value 13 out of range 1-12"},
		{"* * * 0 *", "cron: field month: value 0 out of range 1-12"},
		{"* * * * 8", "cron: field day-of-week: value 8 out of range 0-7"},
		{"60 * * * * *", "cron: field second: value 60 out of range 0-59"},
		{"0 60 * * * *", "cron: field minute: value 60 out of range 0-59"},
		{"1,2,99 * * * *", "cron: field minute: value 99 out of range 0-59"},
		{"0 0 10-32 * *", "cron: field day-of-month: value 32 out of range 1-31"},
		{"99999999999999999999 * * * *", "cron: field minute: value 99999999999999999999 out of range 0-59"},

		// Steps.
		{"*/0 * * * *", "cron: field minute: step 0 out of range 1-60"},
		{"*/61 * * * *", "cron: field minute: step 61 out of range 1-60"},
		{"0 */25 * * *", "cron: field hour: step 25 out of range 1-24"},
		{"0 0 * * */8", "cron: field day-of-week: step 8 out of range 1-7"},
		{"*/99999999999999999999 * * * *", "cron: field minute: step 99999999999999999999 out of range 1-60"},
		{"*/ * * * *", `cron: field minute: invalid step ""`},
		{"*/x * * * *", `cron: field minute: invalid step "x"`},
		{"*/-1 * * * *", `cron: field minute: invalid step "-1"`},
		{"1/2/3 * * * *", `cron: field minute: invalid step "2/3"`},

		// Ranges.
		{"5-3 * * * *", "cron: field minute: range 5-3 starts after it ends"},
		{"0 0 * * 7-1", "cron: field day-of-week: range 7-1 starts after it ends"},
		{"0 0 * DEC-JAN *", "cron: field month: range DEC-JAN starts after it ends"},
		{"1-2-3 * * * *", `cron: field minute: invalid value "2-3"`},
		{"-1 * * * *", `cron: field minute: invalid range "-1"`},
		{"1- * * * *", `cron: field minute: invalid range "1-"`},
		{"*-5 * * * *", `cron: field minute: invalid value "*"`},

		// Lists and tokens.
		{"1,,2 * * * *", `cron: field minute: empty item in list "1,,2"`},
		{",1 * * * *", `cron: field minute: empty item in list ",1"`},
		{"1, * * * *", `cron: field minute: empty item in list "1,"`},
		{"a * * * *", `cron: field minute: invalid value "a"`},
		{"+5 * * * *", `cron: field minute: invalid value "+5"`},
		{"MON * * * *", `cron: field minute: invalid value "MON"`},
		{"* * * MON *", `cron: field month: invalid value "MON"`},
		{"* * * * JAN", `cron: field day-of-week: invalid value "JAN"`},
		{"* * * JANUARY *", `cron: field month: invalid value "JANUARY"`},
		{"* * * * MON-FOO", `cron: field day-of-week: invalid value "FOO"`},
		{"? * * * *", `cron: field minute: invalid value "?"`},
		{"* * L * *", `cron: field day-of-month: invalid value "L"`},
		{"* * 15W * *", `cron: field day-of-month: invalid value "15W"`},
		{"0 0 * * 1#2", `cron: field day-of-week: invalid value "1#2"`},

		// Descriptors.
		{"@reboot", `cron: unknown descriptor "@reboot"...`},
		{"@", `cron: unknown descriptor "@"...`},
		{"@daily 1", `cron: @daily takes no arguments, found "1"`},
		{"@every", `cron: @every takes one duration, as in "@every 1h30m"`},
		{"@every 1h 2m", `cron: @every takes one duration, as in "@every 1h30m"`},
		{"@every 0s", "cron: @every: interval must be positive, got 0s"},
		{"@every 0", "cron: @every: interval must be positive, got 0"},
		{"@every -1m", "cron: @every: interval must be positive, got -1m"},
		{"@every 1x", `cron: @every: time: unknown unit "x" in duration "1x"`},
		{"@every 1", `cron: @every: time: missing unit in duration "1"`},

		// Time zones.
		{"CRON_TZ=Europe/Berlin @every 1h", "cron: a time zone has no effect on @every..."},
		{"CRON_TZ=Mars/Olympus_Mons 0 0 * * *", `cron: time zone "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons`},
		{"CRON_TZ=../../etc/passwd 0 0 * * *", `cron: time zone "../../etc/passwd": ...`},
		{"CRON_TZ= 0 0 * * *", "cron: empty time zone name"},
		{"CRON_TZ=Local 0 0 * * *", `cron: time zone "Local" depends on the machine...`},
		{"CRON_TZ=Europe/Berlin", `cron: nothing follows the time zone "Europe/Berlin"`},
		{"CRON_TZ=Europe/Berlin   ", `cron: nothing follows the time zone "Europe/Berlin"`},
		{"CRON_TZ=Europe/Berlin 0 0 * *", "cron: expected 5 fields (or 6 with leading seconds), found 4..."},
		{"CRON_TZ=Europe/Berlin 61 0 * * *", "cron: field minute: value 61 out of range 0-59"},
		{"0 0 * * * CRON_TZ=Europe/Berlin", `cron: field day-of-week: invalid value "CRON_TZ=Europe"`},
		{"TZ=UTC TZ=UTC 0 0 * * *", `cron: field second: invalid value "TZ=UTC"`},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %q", tt.spec, s, tt.err)
			continue
		}
		if s != nil {
			t.Errorf("Parse(%q) returned a schedule with its error", tt.spec)
		}
		if prefix, ok := strings.CutSuffix(tt.err, "..."); ok {
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Parse(%q) error = %q, want prefix %q", tt.spec, err, prefix)
			}
		} else if err.Error() != tt.err {
			t.Errorf("Parse(%q) error = %q, want %q", tt.spec, err, tt.err)
		}
	}
}

func TestMustParse(t *testing.T) {
	if got := MustParse("@hourly").String(); got != "0 * * * *" {
		t.Errorf("MustParse(@hourly) = %q", got)
	}
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || err.Error() != "cron: field hour: value 25 out of range 0-23" {
			t.Errorf("MustParse of a bad spec panicked with %v, want the Parse error", r)
		}
	}()
	MustParse("0 25 * * *")
}

func TestEveryPanics(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Every(%v) did not panic", d)
				}
			}()
			Every(d)
		}()
	}
}

// TestDescriptorsMatchFields checks that each descriptor has the slots of
// the fields it stands for, in UTC and in a zone.
func TestDescriptorsMatchFields(t *testing.T) {
	for name, five := range descriptors {
		for _, prefix := range []string{"", "CRON_TZ=America/New_York "} {
			d, f := MustParse(prefix+name), MustParse(prefix+five)
			a, b := time.Date(2023, 12, 30, 0, 0, 0, 0, time.UTC), time.Date(2023, 12, 30, 0, 0, 0, 0, time.UTC)
			for range 30 {
				if a, b = d.Next(a), f.Next(b); !a.Equal(b) {
					t.Errorf("%s%s and %s%s disagree: %v and %v", prefix, name, prefix, five, a, b)
					break
				}
			}
		}
	}
}
