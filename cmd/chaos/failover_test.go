package main

import (
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	for _, tc := range longestGapCases(ms) {
		if got := longestGap(tc.times, tc.t, tc.end); got != tc.want {
			t.Errorf("%s: longestGap = %d, want %d", tc.name, got, tc.want)
		}
	}
}

type longestGapCase struct {
	name   string
	times  []int64
	t, end int64
	want   int64
}

func longestGapCases(ms func(int64) int64) []longestGapCase {
	return []longestGapCase{
		{"counted from the fault", []int64{ms(100), ms(900), ms(5000), ms(5100)}, ms(1000), ms(60000), 4000},
		{"a later gap is longer", []int64{ms(1200), ms(1300), ms(9300)}, ms(1000), ms(60000), 8000},
		{"nothing after the fault", []int64{ms(100), ms(900)}, ms(1000), ms(60000), -1},
		{"events past end ignored", []int64{ms(1500), ms(70000)}, ms(1000), ms(60000), 500},
	}
}

func TestWithDBName(t *testing.T) {
	for _, tc := range []struct {
		raw, db string
		pool    int
		want    string
	}{
		{"postgres://postgres@127.0.0.1:55462/test?sslmode=disable", "x", 8,
			"postgres://postgres@127.0.0.1:55462/x?sslmode=disable&pool_max_conns=8"},
		{"postgres://postgres@127.0.0.1:1,127.0.0.1:2/test?target_session_attrs=read-write&sslmode=disable", "postgres", 0,
			"postgres://postgres@127.0.0.1:1,127.0.0.1:2/postgres?target_session_attrs=read-write&sslmode=disable"},
		{"postgres://postgres@127.0.0.1:1", "x", 0, "postgres://postgres@127.0.0.1:1/x?sslmode=disable"},
	} {
		if got := withDBName(tc.raw, tc.db, tc.pool); got != tc.want {
			t.Errorf("withDBName(%q, %q, %d) = %q, want %q", tc.raw, tc.db, tc.pool, got, tc.want)
		}
	}
}

func TestAnalyzeClaims(t *testing.T) {
	evs := []claimEvent{
		{Ev: "start", Job: 1, Kind: "charge", Token: 1, Owner: "a", At: 1},
		{Ev: "end", Job: 1, Kind: "charge", Token: 1, Owner: "a", At: 2},
		// The failover rolled job 1's lease and completion back: token 1 again.
		{Ev: "start", Job: 1, Kind: "charge", Token: 1, Owner: "b", At: 3},
		{Ev: "end", Job: 1, Kind: "charge", Token: 1, Owner: "b", At: 4},
		// Job 2: a fenced run, then a successful one under a newer token.
		// Job 3 appears twice, as two jobs: its ID was given again.
		{Ev: "start", Job: 3, Created: 10, Kind: "charge", Token: 1, Owner: "a", At: 9},
		{Ev: "end", Job: 3, Created: 10, Kind: "charge", Token: 1, Owner: "a", At: 10},
		{Ev: "start", Job: 3, Created: 20, Kind: "charge", Token: 1, Owner: "b", At: 11},
		{Ev: "end", Job: 3, Created: 20, Kind: "charge", Token: 1, Owner: "b", At: 12},
		{Ev: "start", Job: 2, Kind: "charge", Token: 1, Owner: "a", At: 5},
		{Ev: "end", Job: 2, Kind: "charge", Token: 1, Owner: "a", At: 6, Err: "lease lost"},
		{Ev: "start", Job: 2, Kind: "charge", Token: 2, Owner: "b", At: 7},
		{Ev: "end", Job: 2, Kind: "charge", Token: 2, Owner: "b", At: 8},
	}
	cf := analyzeClaims(evs, "charge")
	if len(cf.tokenReuses) != 1 || cf.tokenReuses[0].Job != 1 || cf.tokenReuses[0].Token != 1 || len(cf.tokenReuses[0].Owners) != 2 {
		t.Errorf("tokenReuses = %+v, want job 1 token 1 by a and b", cf.tokenReuses)
	}
	if len(cf.doubleOK) != 1 || cf.doubleOK[0] != 1 {
		t.Errorf("doubleOK = %v, want [1]", cf.doubleOK)
	}
	if len(cf.idsReused) != 1 || cf.idsReused[0] != 3 {
		t.Errorf("idsReused = %v, want [3]", cf.idsReused)
	}
	if len(cf.starts) != 6 {
		t.Errorf("starts = %v, want 6", cf.starts)
	}
}

func TestLostRuns(t *testing.T) {
	evs := []claimEvent{
		{Ev: "end", Job: 1, Created: 10, Token: 1, Owner: "a", At: 5},            // before the kill
		{Ev: "end", Job: 2, Created: 20, Token: 1, Owner: "a", At: 15},           // still in the database
		{Ev: "end", Job: 3, Created: 30, Token: 1, Owner: "a", At: 15},           // lost, completed after
		{Ev: "end", Job: 4, Created: 40, Token: 1, Owner: "b", At: 16, Err: "x"}, // lost, failed after
	}
	ids := map[int64]int64{1: 11, 2: 20, 3: 31}
	got := lostRuns(evs, ids, 10)
	if len(got) != 2 || got[0].Job != 3 || !got[0].OK || got[1].Job != 4 || got[1].OK {
		t.Errorf("lostRuns = %+v, want job 3 ok and job 4 failed", got)
	}
}

func TestForeignOutcomes(t *testing.T) {
	evs := []claimEvent{
		{Ev: "start", Job: 7, Created: 70, Token: 1, Owner: "a"}, // the lost job 7
		{Ev: "start", Job: 7, Created: 71, Token: 1, Owner: "b"}, // the new job 7
		{Ev: "start", Job: 8, Created: 80, Token: 1, Owner: "a"},
	}
	attempts := []attemptRow{
		{Job: 7, Token: 1, Owner: "a", Outcome: "retryable", created: 71}, // a's lost lease ended the new job 7
		{Job: 7, Token: 1, Owner: "b", Outcome: "completed", created: 71},
		{Job: 8, Token: 1, Owner: "a", Outcome: "completed", created: 80},
		{Job: 9, Token: 1, Owner: "c", Outcome: "expired", created: 90}, // no run logged: not judged
	}
	got := foreignOutcomes(evs, attempts)
	if len(got) != 1 || got[0].Job != 7 || got[0].Owner != "a" {
		t.Errorf("foreignOutcomes = %+v, want job 7 by a", got)
	}
}
