package sqlite

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestOpenConcurrentFreshFile: many processes opening one new file at once
// (replicas running migrate up on a fresh SQLite database) all succeed,
// though switching the file to WAL can report SQLITE_BUSY to all but one.
func TestOpenConcurrentFreshFile(t *testing.T) {
	const openers, rounds = 8, 10
	for round := range rounds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("fresh%d.db", round))
		var wg sync.WaitGroup
		errs := make([]error, openers)
		for i := range openers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, db, err := Open(path)
				if err == nil {
					err = db.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, opener %d: %v", round, i, err)
			}
		}
	}
}
