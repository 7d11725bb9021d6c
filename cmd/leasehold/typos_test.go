package main

import (
	"context"
	"strings"
	"testing"
)

// TestTyposAreErrors: a mistyped subcommand or flag at any level fails with
// the nearest suggestion, instead of printing help and exiting 0.
func TestTyposAreErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "upp"}, `unknown command "upp" for "leasehold migrate"; did you mean "up"?`},
		{[]string{"jobs", "retyr", "1"}, `unknown command "retyr" for "leasehold jobs"; did you mean "retry"?`},
		{[]string{"queues", "puase", "q"}, `unknown command "puase" for "leasehold queues"; did you mean "pause"?`},
		{[]string{"migrat", "up"}, `unknown command "migrat" for "leasehold"`},
		{[]string{"jobs", "frobnicate"}, `unknown command "frobnicate" for "leasehold jobs"; see "leasehold jobs --help"`},
		{[]string{"jobs", "list", "--stat", "x"}, `unknown flag: --stat; did you mean --state?`},
		{[]string{"jobs", "list", "--zzzzzz", "1"}, `unknown flag: --zzzzzz; see "leasehold jobs list --help"`},
	}
	for _, tc := range tests {
		var out, errOut syncBuffer
		err := runTree(context.Background(), &out, &errOut, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("leasehold %s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// A group command alone still prints its help and succeeds.
	var out, errOut syncBuffer
	if err := runTree(context.Background(), &out, &errOut, "migrate"); err != nil || !strings.Contains(out.String(), "Available Commands") {
		t.Errorf("leasehold migrate: error %v, output %q; want its help", err, out.String())
	}
}

func TestLevenshtein(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"state", "stat", 1}, {"retry", "retyr", 2}, {"queue", "", 5}, {"kitten", "sitting", 3}} {
		if got := levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
