package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule computes the slots of a periodic job.
//
// The schedules this package returns are immutable and safe for concurrent
// use by multiple goroutines.
type Schedule interface {
	// Next returns the first slot strictly after t, in UTC; the zero time when there is none.
	Next(t time.Time) time.Time
	// String returns the canonical spec that Parse accepts and that round-trips.
	String() string
}

// Parse parses a cron expression (five fields, or six with a leading seconds
// field), a descriptor such as "@daily", or "@every <duration>", optionally
// preceded by a time zone prefix "CRON_TZ=<IANA name> " (or "TZ=<name> ").
// The package documentation describes the syntax.
//
// Errors name the field and the offending value, for example
// "cron: field day-of-month: value 32 out of range 1-31".
func Parse(spec string) (Schedule, error) {
	tokens := strings.Fields(spec)
	if len(tokens) == 0 {
		return nil, errors.New("cron: empty spec")
	}

	loc := time.UTC
	zoned := false
	if name, ok := zonePrefix(tokens[0]); ok {
		var err error
		if loc, err = loadZone(name); err != nil {
			return nil, err
		}
		zoned = true
		tokens = tokens[1:]
		if len(tokens) == 0 {
			return nil, fmt.Errorf("cron: nothing follows the time zone %q", name)
		}
	}

	if strings.HasPrefix(tokens[0], "@") {
		return parseDescriptor(tokens, loc, zoned)
	}

	s, err := parseFields(tokens, loc)
	if err != nil {
		return nil, err // not a nil *cronSchedule in a non-nil Schedule
	}
	return s, nil
}

// parseFields parses the five or six fields of a cron expression.
func parseFields(tokens []string, loc *time.Location) (*cronSchedule, error) {
	switch len(tokens) {
	case 5:
		tokens = append([]string{"0"}, tokens...)
	case 6:
	default:
		return nil, fmt.Errorf("cron: expected 5 fields (or 6 with leading seconds), found %d in %q", len(tokens), strings.Join(tokens, " "))
	}
	s := &cronSchedule{loc: loc}
	sets := []*uint64{&s.second, &s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	for i, tok := range tokens {
		set, err := fields[i].parse(tok)
		if err != nil {
			return nil, err
		}
		*sets[i] = set
	}
	s.domAll = s.dom == fields[fieldDOM].all()
	s.dowAll = s.dow == fields[fieldDOW].all()
	return s, nil
}

// MustParse is like [Parse] but panics when the spec is invalid. It is meant
// for specs fixed in the program's source, such as package-level variables.
func MustParse(spec string) Schedule {
	s, err := Parse(spec)
	if err != nil {
		panic(err)
	}
	return s
}

// Every returns a schedule with a slot every d, aligned to the Unix epoch:
// the slots are the instants 1970-01-01T00:00:00Z + k*d for every integer k,
// so every client computes the same slots whenever it starts. Every(time.Hour)
// fires on the hour, Every(24*time.Hour) at midnight UTC. Its String is
// "@every " followed by d.String().
//
// Every panics if d is not positive.
func Every(d time.Duration) Schedule {
	if d <= 0 {
		panic("cron: Every: interval must be positive, got " + d.String())
	}
	return every{d: d}
}

// zonePrefix reports whether tok is a "CRON_TZ=name" or "TZ=name" prefix and
// returns the name.
func zonePrefix(tok string) (string, bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if name, ok := strings.CutPrefix(tok, p); ok {
			return name, true
		}
	}
	return "", false
}

// loadZone loads an IANA time zone. The empty name and "Local" are refused:
// they mean UTC and the machine's zone to time.LoadLocation, and a schedule
// must mean the same thing on every client.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, errors.New("cron: empty time zone name")
	case "Local":
		return nil, errors.New(`cron: time zone "Local" depends on the machine; name an IANA zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("cron: time zone %q: %w", name, err)
	}
	return loc, nil
}

// descriptors maps each descriptor to the five fields it stands for.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

func parseDescriptor(tokens []string, loc *time.Location, zoned bool) (Schedule, error) {
	name := strings.ToLower(tokens[0])
	if name == "@every" {
		if zoned {
			return nil, errors.New("cron: a time zone has no effect on @every, whose slots are aligned to the Unix epoch; drop the CRON_TZ prefix")
		}
		if len(tokens) != 2 {
			return nil, errors.New(`cron: @every takes one duration, as in "@every 1h30m"`)
		}
		d, err := time.ParseDuration(tokens[1])
		if err != nil {
			return nil, fmt.Errorf("cron: @every: %w", err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("cron: @every: interval must be positive, got %s", tokens[1])
		}
		return every{d: d}, nil
	}
	fiveFields, ok := descriptors[name]
	if !ok {
		return nil, fmt.Errorf("cron: unknown descriptor %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)", tokens[0])
	}
	if len(tokens) != 1 {
		return nil, fmt.Errorf("cron: %s takes no arguments, found %q", name, strings.Join(tokens[1:], " "))
	}
	s, err := parseFields(strings.Fields(fiveFields), loc)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Field indexes into fields, in the order of the six-field form.
const (
	fieldSecond = iota
	fieldMinute
	fieldHour
	fieldDOM
	fieldMonth
	fieldDOW
)

// field describes one field of a cron expression. A field's value set is a
// bit set: bit v is set when value v matches.
type field struct {
	name string
	// min and max bound the values the field accepts.
	min, max int
	// top is the highest value "*" and "a/n" reach. It is max except for the
	// day of week, which accepts 7 as an alias of Sunday (0) but whose "*" is
	// 0-6.
	top   int
	names map[string]int
}

var fields = [...]field{
	fieldSecond: {name: "second", min: 0, max: 59, top: 59},
	fieldMinute: {name: "minute", min: 0, max: 59, top: 59},
	fieldHour:   {name: "hour", min: 0, max: 23, top: 23},
	fieldDOM:    {name: "day-of-month", min: 1, max: 31, top: 31},
	fieldMonth: {name: "month", min: 1, max: 12, top: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	}},
	fieldDOW: {name: "day-of-week", min: 0, max: 7, top: 6, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
	}},
}

// all returns the set of every value of the field.
func (f *field) all() uint64 { return bitRange(f.min, f.top) }

func (f *field) errorf(format string, args ...any) error {
	return fmt.Errorf("cron: field %s: "+format, append([]any{f.name}, args...)...)
}

// parse parses one field: a comma-separated list of "*", "a", "a-b", each
// optionally followed by "/step".
func (f *field) parse(text string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			return 0, f.errorf("empty item in list %q", text)
		}
		base, stepText, hasStep := strings.Cut(item, "/")
		var lo, hi int
		switch {
		case base == "*":
			lo, hi = f.min, f.top
		case strings.Contains(base, "-"):
			a, b, _ := strings.Cut(base, "-")
			if a == "" || b == "" {
				return 0, f.errorf("invalid range %q", base)
			}
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, err
			}
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			// "FRI-SUN": Sunday ends a day-of-week range as 7.
			if f.max == 7 && hi == 0 && lo > 0 && strings.EqualFold(b, "SUN") {
				hi = 7
			}
			if lo > hi {
				return 0, f.errorf("range %s starts after it ends", base)
			}
		default:
			var err error
			if lo, err = f.value(base); err != nil {
				return 0, err
			}
			hi = lo
			if hasStep { // "a/n" runs from a to the top of the field
				hi = max(lo, f.top)
			}
		}
		step := 1
		if hasStep {
			span := f.top - f.min + 1
			n, ok := atoi(stepText)
			switch {
			case stepText == "" || !isDigits(stepText):
				return 0, f.errorf("invalid step %q", stepText)
			case !ok || n < 1 || n > span:
				return 0, f.errorf("step %s out of range 1-%d", stepText, span)
			}
			step = n
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	if f.max == 7 { // day of week: 7 is Sunday
		if set&(1<<7) != 0 {
			set = set&^(1<<7) | 1
		}
	}
	return set, nil
}

// value parses a number or, in the month and day-of-week fields, a name.
func (f *field) value(tok string) (int, error) {
	if isDigits(tok) {
		n, ok := atoi(tok)
		if !ok || n < f.min || n > f.max {
			return 0, f.errorf("value %s out of range %d-%d", tok, f.min, f.max)
		}
		return n, nil
	}
	if v, ok := f.names[strings.ToUpper(tok)]; ok {
		return v, nil
	}
	return 0, f.errorf("invalid value %q", tok)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// atoi parses a string of digits, reporting false when it does not fit an int.
func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}
