// Package cron parses cron expressions and computes the slots of periodic jobs.
//
// A [Schedule] answers one question: what is the first slot strictly after a
// given instant? [Parse] reads a spec, [Every] builds a fixed interval, and
// [Schedule.Next] returns slots in UTC, so every client computes and stores the
// same instants whatever its local time zone.
//
//	s, err := cron.Parse("CRON_TZ=Europe/Berlin 0 9 * * MON-FRI")
//	next := s.Next(time.Now()) // 09:00 Berlin time on the next weekday, in UTC
//
// # Syntax
//
// A cron expression has five fields separated by spaces or tabs, or six with a
// leading seconds field:
//
//	minute hour day-of-month month day-of-week
//	second minute hour day-of-month month day-of-week
//
//	field          values   names
//	second         0-59
//	minute         0-59
//	hour           0-23
//	day-of-month   1-31
//	month          1-12     JAN-DEC
//	day-of-week    0-7      SUN-SAT (0 and 7 are both Sunday)
//
// Names are three letters and case-insensitive. A field is a comma-separated list
// of items, each of which is one of:
//
//	5        one value
//	*        every value
//	1-5      a range, both ends included
//	*/15     every 15th value from the lowest: minutes 0,15,30,45
//	1-10/3   every 3rd value of a range: 1,4,7,10
//	5/15     every 15th value from 5 to the highest: minutes 5,20,35,50
//
// A step runs from 1 to the number of values of the field (60 for minutes, 24
// for hours, 7 for days of the week); a larger one is an error rather than a
// silent single value. Ranges run upward; in the day-of-week field a range may
// end at SUN, which counts as 7, as in FRI-SUN. Examples:
//
//	*/5 * * * *                every five minutes
//	0 * * * *                  on the hour
//	30 2 * * *                 02:30 every day
//	0 9 * * MON-FRI            09:00 on weekdays
//	0 9 * * 1-5                the same
//	15 10,14 * * *             10:15 and 14:15
//	0 0 1 * *                  midnight on the first of the month
//	0 0 1 JAN,APR,JUL,OCT *    midnight on the first day of each quarter
//	0 0 29 2 *                 midnight on 29 February (leap years only)
//	0 12 13 * FRI              noon on the 13th and noon on Fridays
//	*/10 * * * * *             every ten seconds (six fields)
//	CRON_TZ=America/New_York 0 9 * * *   09:00 in New York
//
// A day-of-month such as 31 matches only in the months that have that day:
// "0 0 31 * *" skips April, and "0 0 30 2 *" never fires (its Next returns the
// zero time).
//
// # Day of month and day of week
//
// When both the day-of-month and the day-of-week fields are restricted, a day
// matches if either matches, as in Vixie cron: "0 12 13 * FRI" fires on every
// 13th and on every Friday, not only on Friday the 13th. When one of them matches
// every day, the other alone decides. A field is unrestricted when its values
// are all of the field's values, however written: "*", "*/1", "1-31" or
// "SUN-SAT". (Vixie cron instead looks at whether the field's text starts with
// "*", so there "*/2" in the day-of-month field still combines with the day of
// week by "and"; here "*/2" is restricted, and combines by "or".)
//
// # Descriptors
//
// A descriptor replaces the five fields:
//
//	@yearly, @annually   0 0 1 1 *    midnight on 1 January
//	@monthly             0 0 1 * *    midnight on the first of the month
//	@weekly              0 0 * * 0    midnight between Saturday and Sunday
//	@daily, @midnight    0 0 * * *    midnight
//	@hourly              0 * * * *    on the hour
//	@every <duration>    a fixed interval: @every 15m, @every 1h30m, @every 36h
//
// The duration is in time.ParseDuration syntax and must be positive. The slots
// of "@every d", and of [Every](d), are aligned to the Unix epoch: they are the
// instants 1970-01-01T00:00:00Z + k*d, so every client computes the same slots
// whenever it starts. "@every 1h" fires on the hour and "@every 24h" at midnight
// UTC; "@every 7m" fires at the minutes of the hour where a multiple of 7 minutes
// since the epoch falls, not at :00, :07, :14. An interval ignores time zones
// and daylight saving time, and a time zone prefix on @every is an error.
//
// # Time zones
//
// A spec may begin with "CRON_TZ=<zone> " (or "TZ=<zone> "), where the zone is an
// IANA name loaded with time.LoadLocation:
//
//	CRON_TZ=Europe/Berlin 30 2 * * *
//	TZ=America/New_York @daily
//
// The fields are then matched against the wall clock of that zone, and the slots
// are still returned in UTC. Without a prefix the zone is UTC. "Local" is refused,
// since it means a different zone on each machine. Loading a zone needs the IANA
// database: on systems that lack it (minimal containers), import
// time/tzdata in the program's main package.
//
// # Daylight saving time
//
// A wall time fires at the first instant at which the zone's clock reads it or
// later. That makes the two transitions deliberate:
//
//   - A wall time that does not exist, skipped when clocks spring forward, fires
//     at the first instant after the gap. On 31 March 2024 Berlin's clocks jump
//     from 02:00 to 03:00, so "CRON_TZ=Europe/Berlin 30 2 * * *" fires at 03:00
//     local (01:00 UTC). Several skipped wall times fire once, together:
//     "*/15 * * * *" fires at 01:45, then once at 03:00 for 02:00, 02:15, 02:30,
//     02:45 and 03:00 itself, then at 03:15.
//   - A wall time that occurs twice, when clocks fall back, fires once, at its
//     first occurrence. On 27 October 2024 Berlin's clocks go from 03:00 back to
//     02:00, so "30 2 * * *" fires at 02:30 summer time (00:30 UTC) and not again
//     an hour later. Schedules that fire within the hour pause while the clock
//     repeats it: "0 * * * *" fires at 02:00 summer time and next at 03:00 winter
//     time, two hours later. Use UTC or @every when a steady interval matters more
//     than the wall clock.
//
// # Canonical form
//
// [Schedule.String] returns a canonical spec that Parse accepts and that parses
// to the same schedule. For a cron expression it is written from the values each
// field matches, in numbers: "TZ=Europe/Berlin @weekly" becomes
// "CRON_TZ=Europe/Berlin 0 0 * * 0", "0 9 * * mon-fri" becomes "0 9 * * 1-5",
// and a seconds field of just 0 is dropped. Specs whose fields match the same
// values in the same zone therefore have the same canonical form, which makes
// it the form to store and compare. For an interval it is "@every " and the duration as
// time.Duration.String writes it ("@every 1h30m0s").
//
// # Limits
//
// Next searches ten years ahead for a matching day (the longest gap between the
// days of a spec that fires at all is eight years: 29 February from 2096 to 2104)
// and returns the zero time when there is none. It also returns the zero time for
// instants before year 1 or from year 10000 on. Slots have a resolution of one
// second for cron expressions; an @every interval may be shorter.
package cron
