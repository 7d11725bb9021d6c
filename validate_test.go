package leasehold

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	tests := func() []struct {
		name, in string
		ok       bool
	} {
		return []struct {
			name, in string
			ok       bool
		}{
			{"simple", "default", true},
			{"separators", "payments.charge:v2/eu-west_1", true},
			{"digit first", "2fa", true},
			{"max length", strings.Repeat("a", 128), true},
			{"empty", "", false},
			{"too long", strings.Repeat("a", 129), false},
			{"space", "pay ment", false},
			{"leading separator", "-queue", false},
			{"quote", "q'; drop table", false},
			{"unicode", "zahlungsaufträge", false},
			{"newline", "a\nb", false},
		}
	}
	for _, tc := range tests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := validateName("queue", tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("validateName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("error %v does not wrap ErrInvalidArgs", err)
			}
		})
	}
}

func TestValidateUniqueKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true}, {"payment-42", true}, {strings.Repeat("k", 512), true},
		{strings.Repeat("k", 513), false}, {"a\x00b", false}, {"tab\there", false}, {"del\x7f", false},
		{"\xff\xfe", false}, {"zahlungsschlüssel-42", true},
	} {
		if err := validateUniqueKey(tc.in); tc.ok != (err == nil) {
			t.Errorf("validateUniqueKey(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	w := NewWorkers()
	cfg, err := (&Config{Workers: w}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaseTTL.Seconds() != 30 || cfg.MaxAttempts != 25 || cfg.MaxExpiries != 5 || cfg.MaxArgsBytes != 1<<20 ||
		cfg.Queues[defaultQueue].MaxWorkers != 100 || len(cfg.ID) != 8 || cfg.ExpiryPolicy != "retry" {
		t.Fatalf("defaults = %+v", cfg)
	}
	original := &Config{Queues: map[string]QueueConfig{"a": {MaxWorkers: 1}}}
	if _, err := original.withDefaults(); err != nil {
		t.Fatal(err)
	}
	if original.LeaseTTL != 0 || original.ID != "" {
		t.Fatalf("withDefaults changed the caller's config: %+v", original)
	}
	for name, bad := range map[string]Config{
		"ttl":               {LeaseTTL: 1},
		"policy":            {ExpiryPolicy: "sometimes"},
		"attempts":          {MaxAttempts: -2},
		"queue name":        {Queues: map[string]QueueConfig{"bad name": {MaxWorkers: 1}}},
		"queue size":        {Queues: map[string]QueueConfig{"q": {MaxWorkers: 0}}},
		"args bytes":        {MaxArgsBytes: -1},
		"no queues":         {Workers: w, Queues: map[string]QueueConfig{}},
		"negative gap":      {PollInterval: -1},
		"global limit":      {Queues: map[string]QueueConfig{"q": {MaxWorkers: 1, GlobalLimit: -1}}},
		"rate limit":        {Queues: map[string]QueueConfig{"q": {MaxWorkers: 1, RateLimit: &RateLimit{Limit: 0, Period: time.Second}}}},
		"rate period":       {Queues: map[string]QueueConfig{"q": {MaxWorkers: 1, RateLimit: &RateLimit{Limit: 5}}}},
		"leader ttl":        {LeaderTTL: time.Millisecond},
		"cancel gap":        {CancelCheckInterval: -1},
		"registry gap":      {RegistryInterval: time.Millisecond},
		"retention":         {Retention: Retention{Interval: -time.Second}},
		"periodic nil":      {PeriodicJobs: []*PeriodicJob{nil}},
		"periodic name":     {PeriodicJobs: []*PeriodicJob{{Name: "bad name", Schedule: everyTest(time.Second), Job: noJob}}},
		"periodic schedule": {PeriodicJobs: []*PeriodicJob{{Name: "a", Job: noJob}}},
		"periodic job":      {PeriodicJobs: []*PeriodicJob{{Name: "a", Schedule: everyTest(time.Second)}}},
		"periodic policy":   {PeriodicJobs: []*PeriodicJob{{Name: "a", Schedule: everyTest(time.Second), Job: noJob, MissedRuns: "sometimes"}}},
		"periodic twice": {PeriodicJobs: []*PeriodicJob{
			{Name: "a", Schedule: everyTest(time.Second), Job: noJob},
			{Name: "a", Schedule: everyTest(time.Minute), Job: noJob},
		}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: withDefaults = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// everyTest is a fixed-interval schedule for config tests.
type everyTest time.Duration

func (e everyTest) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(e)).Add(time.Duration(e))
}
func (e everyTest) String() string { return "@every " + time.Duration(e).String() }

func noJob(time.Time) (JobArgs, *InsertOpts) { return nil, nil }

func TestHasNULEscape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		want bool
	}{
		{`{"a":"b"}`, false},
		{`{"a":"\u0000"}`, true},
		{`{"a":"x\u0000y"}`, true},
		{`{"a":"\\u0000"}`, false}, // an escaped backslash, then text
		{`{"a":"\\\u0000"}`, true}, // an escaped backslash, then a NUL
		{`{"a":"\u00001"}`, true},
		{`{"a":"\u0001"}`, false},
	} {
		if got := hasNULEscape([]byte(tc.json)); got != tc.want {
			t.Errorf("hasNULEscape(%s) = %v, want %v", tc.json, got, tc.want)
		}
	}
}

func TestHasLoneSurrogate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		want bool
	}{
		{`{"a":"\ud800"}`, true},
		{`{"a":"\udc00"}`, true},
		{`{"a":"\ud800x"}`, true},
		{`{"a":"\ud800\u0041"}`, true},
		{`{"a":"\ud83d\ude00"}`, false}, // a pair: 😀
		{`{"a":"\\ud800"}`, false},      // an escaped backslash, then text
		{`{"\ud800":1}`, true},          // keys are strings too
		{`{"a":"\u00e9"}`, false},
		{`{"a":"plain"}`, false},
		{`{"a":"\"\ud800"}`, true},
	} {
		if got := hasLoneSurrogate([]byte(tc.json)); got != tc.want {
			t.Errorf("hasLoneSurrogate(%s) = %v, want %v", tc.json, got, tc.want)
		}
	}
}

func TestEncodeJSONKeepsHTMLCharacters(t *testing.T) {
	t.Parallel()
	got, err := encodeJSON(map[string]string{"url": "https://x/?a=1&b=<2>"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"url":"https://x/?a=1&b=<2>"}`; string(got) != want {
		t.Fatalf("encodeJSON = %s, want %s", got, want)
	}
}

func TestValidateNameShowsTheCharacter(t *testing.T) {
	t.Parallel()
	err := validateName("queue", "zürich")
	if err == nil || !strings.Contains(err.Error(), `'ü' at byte 1`) || !strings.Contains(err.Error(), "ASCII letters") {
		t.Fatalf("validateName(zürich) = %v, want the real character and ASCII named", err)
	}
}
