package cron_test

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/cron"
)

// A schedule in a time zone: the slots are computed on Berlin's wall clock
// and returned in UTC. On 31 March 2024 Berlin's clocks skip from 02:00 to
// 03:00, so that day's 02:30 fires at 03:00 local.
func Example() {
	s, err := cron.Parse("CRON_TZ=Europe/Berlin 30 2 * * *")
	if err != nil {
		panic(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	t := time.Date(2024, time.March, 29, 12, 0, 0, 0, time.UTC)
	for range 4 {
		t = s.Next(t)
		fmt.Println(t.Format(time.RFC3339), "=", t.In(berlin).Format("Mon 15:04 MST"))
	}
	// Output:
	// 2024-03-30T01:30:00Z = Sat 02:30 CET
	// 2024-03-31T01:00:00Z = Sun 03:00 CEST
	// 2024-04-01T00:30:00Z = Mon 02:30 CEST
	// 2024-04-02T00:30:00Z = Tue 02:30 CEST
}

// Parse accepts five or six fields, descriptors and a time zone prefix;
// String gives the canonical form to store.
func ExampleParse() {
	for _, spec := range []string{
		"*/15 9-17 * * MON-FRI",
		"0 0 1 JAN,APR,JUL,OCT *",
		"*/10 * * * * *",
		"TZ=America/New_York @weekly",
		"@every 90m",
		"0 0 32 * *",
	} {
		s, err := cron.Parse(spec)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-30s %s\n", spec, s)
	}
	// Output:
	// */15 9-17 * * MON-FRI          */15 9-17 * * 1-5
	// 0 0 1 JAN,APR,JUL,OCT *        0 0 1 */3 *
	// */10 * * * * *                 */10 * * * * *
	// TZ=America/New_York @weekly    CRON_TZ=America/New_York 0 0 * * 0
	// @every 90m                     @every 1h30m0s
	// cron: field day-of-month: value 32 out of range 1-31
}

// When both the day of month and the day of week are restricted, a day
// matches if either does: noon on the 13th, and noon on Fridays.
func ExampleParse_dayOfMonthOrWeek() {
	s := cron.MustParse("0 12 13 * FRI")
	t := time.Date(2024, time.September, 9, 0, 0, 0, 0, time.UTC)
	for range 4 {
		t = s.Next(t)
		fmt.Println(t.Format("Mon 2 Jan 15:04"))
	}
	// Output:
	// Fri 13 Sep 12:00
	// Fri 20 Sep 12:00
	// Fri 27 Sep 12:00
	// Fri 4 Oct 12:00
}

// An interval's slots are aligned to the Unix epoch, so every client computes
// the same ones whenever it starts.
func ExampleEvery() {
	s := cron.Every(90 * time.Minute)
	t := time.Date(2024, time.January, 1, 0, 10, 0, 0, time.UTC)
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.Format(time.Kitchen))
	}
	fmt.Println(s)
	// Output:
	// 1:30AM
	// 3:00AM
	// 4:30AM
	// @every 1h30m0s
}

// Specs fixed in the program can be parsed once, at start-up.
func ExampleMustParse() {
	nightly := cron.MustParse("CRON_TZ=America/New_York 0 2 * * *")
	fmt.Println(nightly.Next(time.Date(2024, time.November, 3, 0, 0, 0, 0, time.UTC)))
	// Output:
	// 2024-11-03 07:00:00 +0000 UTC
}
