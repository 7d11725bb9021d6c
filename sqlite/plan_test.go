package sqlite

import (
	"context"
	"testing"
)

func TestPlans(t *testing.T) {
	d := newTestDriver(t)
	for name, q := range map[string]string{
		"finish": queryJobFinish, "attfin": queryAttemptInsertFinished, "hb": queryJobHeartbeat,
		"claim": queryJobClaim, "expire": queryJobExpire, "attexp": queryAttemptInsertExpired,
		"claimable": queryJobClaimableExists, "expired": queryJobExpiredExists, "count": queryJobCountByState,
		"uniq": queryJobGetUnfinishedByKey, "setstate": queryJobSetState,
	} {
		rows, err := d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, "[]", 1, 2, 3, 4, 5, 6)
		if err != nil {
			rows, err = d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, "[]", 1)
		}
		if err != nil {
			rows, err = d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, "[]", 1, 2)
		}
		if err != nil {
			rows, err = d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q)
		}
		if err != nil {
			t.Fatal(name, err)
		}
		for rows.Next() {
			var id, parent, notused int
			var detail string
			rows.Scan(&id, &parent, &notused, &detail)
			t.Logf("%s: %d %d %s", name, id, parent, detail)
		}
		rows.Close()
	}
}
