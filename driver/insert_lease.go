package driver

import (
	"slices"
	"time"
)

// InsertLease is what a LeasedInserter leases of an insert: the jobs its
// claim parameters select, by input position, and how.
type InsertLease struct {
	// Claim holds the lease's owner, TTLs and policies.
	Claim  *JobClaimParams
	marked []bool
}

// NewInsertLease marks the jobs claim selects for JobInsertLeased: the
// first claim.Max, in input order, of queue claim.Queue that claim.Kinds
// and claim.ExcludeKinds let through and that have no dependencies. It
// returns nil when it selects none (or claim is nil). Whether a marked job
// is leased also depends on its schedule and its queue's pause, which the
// backend checks on the database clock.
func NewInsertLease(jobs []*JobInsertParams, claim *JobClaimParams) *InsertLease {
	if claim == nil || claim.Max < 1 {
		return nil
	}
	marked := make([]bool, len(jobs))
	n := 0
	for i, p := range jobs {
		if n == claim.Max {
			break
		}
		if p.Queue != claim.Queue || len(p.DependsOn) > 0 || len(p.DependsOnIndex) > 0 ||
			len(claim.Kinds) > 0 && !slices.Contains(claim.Kinds, p.Kind) || slices.Contains(claim.ExcludeKinds, p.Kind) {
			continue
		}
		marked[i] = true
		n++
	}
	if n == 0 {
		return nil
	}
	return &InsertLease{Claim: claim, marked: marked}
}

// Marked reports whether the job at input position i is to be leased; false
// for a nil lease.
func (l *InsertLease) Marked(i int) bool {
	return l != nil && l.marked[i]
}

// Of returns the lease TTL and whether the stuck expiry policy applies to
// job p, as JobClaim works them out: the job's own TTL, else its kind's,
// else the default; stuck for a kind of Claim.StuckKinds.
func (l *InsertLease) Of(p *JobInsertParams) (ttl time.Duration, stuck bool) {
	ttl = p.LeaseTTL
	if ttl <= 0 {
		ttl = l.Claim.KindLeaseTTL[p.Kind]
	}
	if ttl <= 0 {
		ttl = l.Claim.DefaultLeaseTTL
	}
	return ttl, slices.Contains(l.Claim.StuckKinds, p.Kind)
}
