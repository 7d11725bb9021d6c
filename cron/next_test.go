package cron

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// mustTime parses an RFC 3339 time, or one in year 10000, which RFC 3339
// cannot write.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	if rest, ok := strings.CutPrefix(s, "10000-"); ok {
		v := mustTime(t, "2000-"+rest)
		return time.Date(10000, v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), v.Location())
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nextCase: from "from", successive calls of Next return want, in order.
type nextCase struct {
	spec string
	from string
	want []string // RFC 3339, UTC; "" for the zero time
	note string
}

func runNextCases(t *testing.T, cases []nextCase) {
	t.Helper()
	for _, tc := range cases {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		at := mustTime(t, tc.from)
		for i, w := range tc.want {
			got := s.Next(at)
			var want time.Time
			if w != "" {
				want = mustTime(t, w)
			}
			if !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("%q (%s): call %d of Next from %s = %s, want %s",
					tc.spec, tc.note, i+1, tc.from, fmtTime(got), fmtTime(want))
				break
			}
			at = got
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero time"
	}
	return t.Format(time.RFC3339Nano) + " (" + t.Location().String() + ")"
}

func TestNextUTC(t *testing.T) {
	runNextCases(t, []nextCase{
		// Strictly after, and sub-second instants.
		{"* * * * *", "2024-05-05T10:00:00Z", []string{"2024-05-05T10:01:00Z", "2024-05-05T10:02:00Z"}, "on a slot"},
		{"* * * * *", "2024-05-05T10:00:59.999999999Z", []string{"2024-05-05T10:01:00Z"}, "just before a slot"},
		{"* * * * * *", "2024-05-05T10:00:00Z", []string{"2024-05-05T10:00:01Z", "2024-05-05T10:00:02Z"}, "every second"},
		{"* * * * * *", "2024-05-05T10:00:00.5Z", []string{"2024-05-05T10:00:01Z"}, "half a second in"},
		{"30 * * * * *", "2024-05-05T10:00:30Z", []string{"2024-05-05T10:01:30Z"}, "seconds field"},
		{"*/10 * * * * *", "2024-05-05T10:00:55Z", []string{"2024-05-05T10:01:00Z", "2024-05-05T10:01:10Z"}, "seconds step"},
		{"15,45 30 9 * * *", "2024-05-05T09:30:45Z", []string{"2024-05-06T09:30:15Z", "2024-05-06T09:30:45Z"}, "seconds past the last of the day"},

		// Boundaries of hours, days, months, years.
		{"*/15 * * * *", "2024-12-31T23:45:00Z", []string{"2025-01-01T00:00:00Z", "2025-01-01T00:15:00Z"}, "year boundary"},
		{"0 0 1 1 *", "2023-12-31T23:59:59Z", []string{"2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"}, "new year"},
		{"59 23 31 12 *", "2024-06-01T00:00:00Z", []string{"2024-12-31T23:59:00Z", "2025-12-31T23:59:00Z"}, "last minute of the year"},
		{"0 0 1 * *", "2024-01-31T12:00:00Z", []string{"2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"}, "first of the month"},
		{"0 0 31 * *", "2024-01-31T00:00:00Z", []string{"2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z", "2024-10-31T00:00:00Z"}, "only months with a 31st"},
		{"0 0 30 * *", "2024-01-30T00:00:00Z", []string{"2024-03-30T00:00:00Z", "2024-04-30T00:00:00Z"}, "February has no 30th"},
		{"0 12 * * *", "2024-02-28T12:00:00Z", []string{"2024-02-29T12:00:00Z", "2024-03-01T12:00:00Z"}, "leap day is a day"},
		{"0 12 * * *", "2023-02-28T12:00:00Z", []string{"2023-03-01T12:00:00Z"}, "no leap day in 2023"},
		{"0 0 * 2 *", "2024-02-28T00:00:00Z", []string{"2024-02-29T00:00:00Z", "2025-02-01T00:00:00Z"}, "every day of February"},

		// 29 February.
		{"0 0 29 2 *", "2023-01-01T00:00:00Z", []string{"2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}, "leap days"},
		{"0 0 29 2 *", "2000-01-01T00:00:00Z", []string{"2000-02-29T00:00:00Z", "2004-02-29T00:00:00Z"}, "2000 is a leap year"},
		{"0 0 29 2 *", "2096-03-01T00:00:00Z", []string{"2104-02-29T00:00:00Z"}, "2100 is not: eight years"},
		{"0 0 28-29 2 *", "2023-02-28T00:00:00Z", []string{"2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z", "2025-02-28T00:00:00Z"}, "28th and 29th"},

		// Never.
		{"0 0 30 2 *", "2024-01-01T00:00:00Z", []string{""}, "30 February"},
		{"0 0 31 2 *", "2024-01-01T00:00:00Z", []string{""}, "31 February"},
		{"0 0 31 4,6,9,11 *", "2024-01-01T00:00:00Z", []string{""}, "31st of 30-day months"},
		{"* * * 30 FEB *", "2024-01-01T00:00:00Z", []string{""}, "six fields"},

		// Day of month and day of week. September 2024 begins on a Sunday.
		{"0 12 13 * FRI", "2024-09-01T00:00:00Z", []string{
			"2024-09-06T12:00:00Z", "2024-09-13T12:00:00Z", "2024-09-20T12:00:00Z", "2024-09-27T12:00:00Z",
			"2024-10-04T12:00:00Z", "2024-10-11T12:00:00Z", "2024-10-13T12:00:00Z", "2024-10-18T12:00:00Z",
		}, "13th or Friday"},
		{"0 0 1 * MON", "2024-09-01T00:00:00Z", []string{"2024-09-02T00:00:00Z", "2024-09-09T00:00:00Z", "2024-09-16T00:00:00Z", "2024-09-23T00:00:00Z", "2024-09-30T00:00:00Z", "2024-10-01T00:00:00Z", "2024-10-07T00:00:00Z"}, "1st or Monday"},
		{"0 0 * * MON", "2024-09-01T00:00:00Z", []string{"2024-09-02T00:00:00Z", "2024-09-09T00:00:00Z"}, "Mondays"},
		{"0 0 1-31 * MON", "2024-09-01T00:00:00Z", []string{"2024-09-02T00:00:00Z", "2024-09-09T00:00:00Z"}, "every day of the month is unrestricted: Mondays"},
		{"0 0 13 * *", "2024-09-01T00:00:00Z", []string{"2024-09-13T00:00:00Z", "2024-10-13T00:00:00Z"}, "13th"},
		{"0 0 13 * 0-7", "2024-09-01T00:00:00Z", []string{"2024-09-13T00:00:00Z", "2024-10-13T00:00:00Z"}, "every weekday is unrestricted: 13th"},
		{"0 0 */10 * SAT", "2024-09-01T00:00:00Z", []string{"2024-09-07T00:00:00Z", "2024-09-11T00:00:00Z", "2024-09-14T00:00:00Z", "2024-09-21T00:00:00Z", "2024-09-28T00:00:00Z", "2024-10-01T00:00:00Z"}, "*/10 is restricted: 1,11,21,31 or Saturday"},
		{"0 0 29 2 MON", "2025-03-01T00:00:00Z", []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}, "February: the 29th or Mondays"},
		{"0 0 29 2 MON", "2028-02-27T00:00:00Z", []string{"2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-05T00:00:00Z"}, "February: Monday the 28th, Tuesday the 29th"},
		{"0 0 * * 7", "2024-03-04T00:00:00Z", []string{"2024-03-10T00:00:00Z", "2024-03-17T00:00:00Z"}, "7 is Sunday"},
		{"0 0 * * FRI-SUN", "2024-03-07T00:00:00Z", []string{"2024-03-08T00:00:00Z", "2024-03-09T00:00:00Z", "2024-03-10T00:00:00Z", "2024-03-15T00:00:00Z"}, "weekend"},
		{"0 9 * * MON-FRI", "2024-03-08T09:00:00Z", []string{"2024-03-11T09:00:00Z", "2024-03-12T09:00:00Z"}, "weekdays"},

		// Steps and names.
		{"0 */6 * * *", "2024-01-01T05:00:00Z", []string{"2024-01-01T06:00:00Z", "2024-01-01T12:00:00Z", "2024-01-01T18:00:00Z", "2024-01-02T00:00:00Z"}, "every six hours"},
		{"5/20 * * * *", "2024-01-01T00:50:00Z", []string{"2024-01-01T01:05:00Z", "2024-01-01T01:25:00Z", "2024-01-01T01:45:00Z", "2024-01-01T02:05:00Z"}, "a/n"},
		{"0 9-17/4 * * *", "2024-01-01T10:00:00Z", []string{"2024-01-01T13:00:00Z", "2024-01-01T17:00:00Z", "2024-01-02T09:00:00Z"}, "a-b/n"},
		{"0 0 1 JAN,JUL *", "2024-02-01T00:00:00Z", []string{"2024-07-01T00:00:00Z", "2025-01-01T00:00:00Z"}, "month names"},
		{"0 0 1 */4 *", "2024-02-01T00:00:00Z", []string{"2024-05-01T00:00:00Z", "2024-09-01T00:00:00Z", "2025-01-01T00:00:00Z"}, "month step"},
		{"0 0 29-31/2 * *", "2024-02-01T00:00:00Z", []string{"2024-02-29T00:00:00Z", "2024-03-29T00:00:00Z", "2024-03-31T00:00:00Z", "2024-04-29T00:00:00Z"}, "day step"},

		// Descriptors.
		{"@hourly", "2024-01-01T00:00:00Z", []string{"2024-01-01T01:00:00Z"}, ""},
		{"@daily", "2024-02-28T00:00:00Z", []string{"2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"}, ""},
		{"@weekly", "2024-03-06T00:00:00Z", []string{"2024-03-10T00:00:00Z", "2024-03-17T00:00:00Z"}, "Sunday midnight"},
		{"@monthly", "2024-12-15T00:00:00Z", []string{"2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z"}, ""},
		{"@yearly", "2024-12-15T00:00:00Z", []string{"2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}, ""},

		// The edges of the supported range.
		{"0 0 1 1 *", "0001-01-01T00:00:00Z", []string{"0002-01-01T00:00:00Z"}, "from the zero time"},
		{"* * * * *", "0000-12-31T23:59:59Z", []string{""}, "before year 1"},
		{"59 23 31 12 *", "9999-12-31T23:58:00Z", []string{"9999-12-31T23:59:00Z", "10000-12-31T23:59:00Z", ""}, "year 10000 is past the range"},
		{"* * * * *", "10000-01-01T00:00:00Z", []string{""}, "from year 10000"},
	})
}

// The transitions used below, all in 2024 unless noted:
//
//	Europe/Berlin      31 Mar 01:00Z: 02:00 CET -> 03:00 CEST
//	                   27 Oct 01:00Z: 03:00 CEST -> 02:00 CET
//	America/New_York   10 Mar 07:00Z: 02:00 EST -> 03:00 EDT
//	                    3 Nov 06:00Z: 02:00 EDT -> 01:00 EST
//	America/Sao_Paulo  2018-11-04 03:00Z: 00:00 -03 -> 01:00 -02 (midnight skipped)
//	Pacific/Apia       2011-12-30 10:00Z: 29 Dec 24:00 -10 -> 31 Dec 00:00 +14 (30 Dec skipped)
//	Australia/Lord_Howe 7 Apr 15:00Z: 02:00 +11 -> 01:30 +10:30; 6 Oct 15:30Z: 02:00 +10:30 -> 02:30 +11
func TestNextDST(t *testing.T) {
	runNextCases(t, []nextCase{
		// Berlin, spring forward: 02:00-02:59:59 does not exist on 31 March.
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-03-30T12:00:00Z", []string{"2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"}, "02:30 fires at 03:00 CEST"},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-03-31T00:59:59.5Z", []string{"2024-03-31T01:00:00Z"}, "just before the gap"},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-03-31T01:00:00Z", []string{"2024-04-01T00:30:00Z"}, "at the end of the gap"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "2024-03-30T12:00:00Z", []string{"2024-03-31T01:00:00Z", "2024-04-01T00:00:00Z"}, "02:00 fires at 03:00 CEST"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "2024-03-30T12:00:00Z", []string{"2024-03-31T01:00:00Z", "2024-04-01T01:00:00Z"}, "03:00 exists"},
		{"CRON_TZ=Europe/Berlin 59 1 * * *", "2024-03-30T12:00:00Z", []string{"2024-03-31T00:59:00Z", "2024-03-31T23:59:00Z"}, "01:59 CET, then 01:59 CEST"},
		{"CRON_TZ=Europe/Berlin */15 * * * *", "2024-03-31T00:40:00Z", []string{"2024-03-31T00:45:00Z", "2024-03-31T01:00:00Z", "2024-03-31T01:15:00Z"}, "02:00-03:00 fire once at 03:00"},
		{"CRON_TZ=Europe/Berlin 0 * * * *", "2024-03-30T23:30:00Z", []string{"2024-03-31T00:00:00Z", "2024-03-31T01:00:00Z", "2024-03-31T02:00:00Z"}, "hourly"},
		{"CRON_TZ=Europe/Berlin 30 2 31 3 *", "2024-01-01T00:00:00Z", []string{"2024-03-31T01:00:00Z", "2025-03-31T00:30:00Z"}, "the 2025 change is on 30 March"},

		// Berlin, fall back: 02:00-02:59:59 happens twice on 27 October.
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-10-26T12:00:00Z", []string{"2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"}, "first 02:30 only"},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-10-27T00:30:00Z", []string{"2024-10-28T01:30:00Z"}, "from the first 02:30"},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", "2024-10-27T01:15:00Z", []string{"2024-10-28T01:30:00Z"}, "from the repeated 02:15"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "2024-10-26T12:00:00Z", []string{"2024-10-27T00:00:00Z", "2024-10-28T01:00:00Z"}, "02:00"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "2024-10-26T12:00:00Z", []string{"2024-10-27T02:00:00Z", "2024-10-28T02:00:00Z"}, "03:00 exists once"},
		{"CRON_TZ=Europe/Berlin 0 * * * *", "2024-10-26T23:30:00Z", []string{"2024-10-27T00:00:00Z", "2024-10-27T02:00:00Z", "2024-10-27T03:00:00Z"}, "hourly pauses for the repeated hour"},
		{"CRON_TZ=Europe/Berlin */30 * * * *", "2024-10-27T00:00:00Z", []string{"2024-10-27T00:30:00Z", "2024-10-27T02:00:00Z", "2024-10-27T02:30:00Z"}, "half-hourly"},
		{"CRON_TZ=Europe/Berlin * * * * * *", "2024-10-27T00:59:58Z", []string{"2024-10-27T00:59:59Z", "2024-10-27T02:00:00Z"}, "every second pauses for an hour"},
		{"CRON_TZ=Europe/Berlin * * * * * *", "2024-10-27T01:30:00Z", []string{"2024-10-27T02:00:00Z"}, "from the repeated hour"},

		// New York.
		{"CRON_TZ=America/New_York 30 2 * * *", "2024-03-09T12:00:00Z", []string{"2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"}, "02:30 fires at 03:00 EDT"},
		{"CRON_TZ=America/New_York 0 2 * * *", "2024-03-09T12:00:00Z", []string{"2024-03-10T07:00:00Z", "2024-03-11T06:00:00Z"}, "02:00 fires at 03:00 EDT"},
		{"TZ=America/New_York @daily", "2024-03-09T12:00:00Z", []string{"2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"}, "midnight EST, then EDT"},
		{"CRON_TZ=America/New_York 30 1 * * *", "2024-11-02T12:00:00Z", []string{"2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"}, "first 01:30 only"},
		{"CRON_TZ=America/New_York 30 1 * * *", "2024-11-03T06:15:00Z", []string{"2024-11-04T06:30:00Z"}, "from the repeated 01:15"},
		{"CRON_TZ=America/New_York 0 1 * * *", "2024-11-02T12:00:00Z", []string{"2024-11-03T05:00:00Z", "2024-11-04T06:00:00Z"}, "01:00"},
		{"CRON_TZ=America/New_York */20 * * * *", "2024-11-03T05:30:00Z", []string{"2024-11-03T05:40:00Z", "2024-11-03T07:00:00Z", "2024-11-03T07:20:00Z"}, "pauses for the repeated hour"},
		{"CRON_TZ=America/New_York 0 9 * * MON-FRI", "2024-11-01T12:00:00Z", []string{"2024-11-01T13:00:00Z", "2024-11-04T14:00:00Z"}, "09:00 EDT, then EST"},

		// Elsewhere.
		{"CRON_TZ=America/Sao_Paulo @daily", "2018-11-03T12:00:00Z", []string{"2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"}, "a skipped midnight fires at 01:00"},
		{"CRON_TZ=Pacific/Apia 0 12 * * *", "2011-12-29T22:00:00Z", []string{"2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"}, "a skipped day fires at the end of the gap"},
		{"CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2024-04-06T12:00:00Z", []string{"2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"}, "half-hour fall back: first 01:45 only"},
		{"CRON_TZ=Australia/Lord_Howe 15 2 * * *", "2024-10-05T12:00:00Z", []string{"2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"}, "half-hour spring forward"},
		{"CRON_TZ=Asia/Kolkata 0 9 * * *", "2024-03-09T12:00:00Z", []string{"2024-03-10T03:30:00Z"}, "a half-hour offset"},
	})
}

// TestNextAnyLocation checks that the location of the argument does not
// matter and that the result is in UTC.
func TestNextAnyLocation(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	at := mustTime(t, "2024-10-27T00:59:58.25Z")
	for _, spec := range []string{"CRON_TZ=Europe/Berlin * * * * * *", "0 0 * * *", "@every 7m"} {
		s := MustParse(spec)
		a, b := s.Next(at), s.Next(at.In(tokyo))
		if !a.Equal(b) || b.Location() != time.UTC {
			t.Errorf("%q: Next(UTC) = %s, Next(Tokyo) = %s", spec, fmtTime(a), fmtTime(b))
		}
	}
}

func TestEvery(t *testing.T) {
	runNextCases(t, []nextCase{
		{"@every 1h", "2024-01-01T10:20:00Z", []string{"2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"}, "on the hour"},
		{"@every 1h", "2024-01-01T11:00:00Z", []string{"2024-01-01T12:00:00Z"}, "strictly after"},
		{"@every 1h", "2024-01-01T10:59:59.999999999Z", []string{"2024-01-01T11:00:00Z"}, "a nanosecond before"},
		{"@every 15m", "2024-01-01T10:59:00Z", []string{"2024-01-01T11:00:00Z", "2024-01-01T11:15:00Z"}, "quarter hours"},
		{"@every 24h", "2024-03-30T12:00:00Z", []string{"2024-03-31T00:00:00Z"}, "midnight UTC, whatever the zones do"},
		{"@every 168h", "2024-01-01T00:00:00Z", []string{"2024-01-04T00:00:00Z", "2024-01-11T00:00:00Z"}, "weeks from the epoch start on Thursdays"},
		{"@every 90m", "2024-01-01T00:10:00Z", []string{"2024-01-01T01:30:00Z", "2024-01-01T03:00:00Z"}, "90 minutes"},
		{"@every 7m", "2024-03-30T12:00:00Z", []string{"2024-03-30T12:05:00Z", "2024-03-30T12:12:00Z"}, "7 minutes from the epoch"},
		{"@every 1.5s", "1970-01-01T00:00:01Z", []string{"1970-01-01T00:00:01.5Z", "1970-01-01T00:00:03Z"}, "sub-second"},
		{"@every 1h", "1969-12-31T23:30:00Z", []string{"1970-01-01T00:00:00Z"}, "before the epoch"},
		{"@every 7m", "1969-12-31T23:59:00Z", []string{"1970-01-01T00:00:00Z"}, "before the epoch, 7 minutes"},
		{"@every 7m", "1969-12-31T23:52:59Z", []string{"1969-12-31T23:53:00Z"}, "before the epoch, 7 minutes back"},
		{"@every 1h", "0001-01-01T00:00:00Z", []string{"0001-01-01T01:00:00Z"}, "from the zero time"},
		{"@every 1h", "9999-12-31T23:30:00Z", []string{"10000-01-01T00:00:00Z", ""}, "past the range"},
		{"@every 1h", "0000-12-31T23:00:00Z", []string{""}, "before year 1"},
	})

	// Every and "@every" agree, and the slots are multiples of d from the
	// epoch, computed here with math/big-free integer arithmetic on seconds.
	for _, d := range []time.Duration{time.Second, 7 * time.Minute, time.Hour, 25 * time.Hour, 168 * time.Hour, 1000 * time.Hour} {
		e, p := Every(d), MustParse("@every "+d.String())
		if e.String() != p.String() {
			t.Errorf("Every(%v).String() = %q, Parse gives %q", d, e, p)
		}
		for _, from := range []string{"0001-01-01T00:00:00Z", "1601-05-06T07:08:09.1Z", "1969-12-31T23:59:59.999Z", "2024-02-29T12:34:56Z", "2262-04-12T00:00:00Z", "9999-01-01T00:00:00Z"} {
			at := mustTime(t, from)
			n := e.Next(at)
			if !n.Equal(p.Next(at)) {
				t.Errorf("Every(%v) and its spec disagree from %s", d, from)
			}
			step := int64(d / time.Second)
			if !n.After(at) || n.Sub(at) > d || n.Nanosecond() != 0 || n.Unix()%step != 0 || n.Location() != time.UTC {
				t.Errorf("Every(%v).Next(%s) = %s: not the next multiple of %v from the epoch", d, from, fmtTime(n), d)
			}
		}
	}
}

// TestNextConcurrent runs Next from many goroutines, for the race detector.
func TestNextConcurrent(t *testing.T) {
	schedules := []Schedule{MustParse("CRON_TZ=Europe/Berlin */5 * * * *"), MustParse("0 12 13 * FRI"), Every(time.Minute)}
	var wg sync.WaitGroup
	results := make([][]time.Time, 8)
	for g := range results {
		wg.Go(func() {
			at := mustTime(t, "2024-10-26T22:00:00Z")
			for _, s := range schedules {
				for range 50 {
					at = s.Next(at)
					results[g] = append(results[g], at)
				}
			}
		})
	}
	wg.Wait()
	for g := range results {
		for i := range results[g] {
			if !results[g][i].Equal(results[0][i]) {
				t.Fatalf("goroutine %d, result %d: %v, goroutine 0 got %v", g, i, results[g][i], results[0][i])
			}
		}
	}
}

func BenchmarkNext(b *testing.B) {
	for _, spec := range []string{
		"*/5 * * * *",
		"0 9 * * MON-FRI",
		"CRON_TZ=Europe/Berlin 30 2 * * *",
		"CRON_TZ=America/New_York * * * * * *",
		"0 0 29 2 *",
		"0 0 30 2 *", // never: the whole ten-year search
		"@every 7m",
	} {
		s := MustParse(spec)
		b.Run(spec, func(b *testing.B) {
			at := time.Date(2024, 10, 27, 0, 59, 0, 0, time.UTC)
			for b.Loop() {
				s.Next(at)
			}
		})
	}
}
