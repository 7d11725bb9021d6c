package sqlbackend

import (
	"github.com/leasehold/leasehold/driver"
)

// ScanKeyStats reads a row of a backend's top-keys query: queue, key,
// waiting, running.
func ScanKeyStats(s RowScanner) (*driver.KeyStatsRow, error) {
	r := &driver.KeyStatsRow{}
	if err := s.Scan(&r.Queue, &r.Key, &r.Waiting, &r.Running); err != nil {
		return nil, err
	}
	return r, nil
}

// ScanKeyQueueStats reads a row of a backend's per-queue key summary:
// queue, keys, waiting, max waiting, then one count per bound of
// driver.KeyWaitingBounds.
func ScanKeyQueueStats(s RowScanner) (*driver.KeyQueueStatsRow, error) {
	r := &driver.KeyQueueStatsRow{WaitingBuckets: make([]int64, len(driver.KeyWaitingBounds))}
	dest := []any{&r.Queue, &r.Keys, &r.Waiting, &r.MaxWaiting}
	for i := range r.WaitingBuckets {
		dest = append(dest, &r.WaitingBuckets[i])
	}
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	return r, nil
}
