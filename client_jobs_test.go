package leasehold

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// failingReadDriver's reads fail as a backend's do: the error names the
// operation.
type failingReadDriver struct{ driver.Driver[*sql.Tx] }

func (d failingReadDriver) GetExecutor() driver.Executor {
	return failingReadExec{d.Driver.GetExecutor()}
}

type failingReadExec struct{ driver.Executor }

func (failingReadExec) JobList(context.Context, *driver.JobListParams) ([]*leasetype.JobRow, error) {
	return nil, errors.New("list jobs: connection reset")
}

func (failingReadExec) JobGet(context.Context, *driver.JobGetParams) (*leasetype.JobRow, error) {
	return nil, errors.New("get job 7: connection reset")
}

// TestReadErrorsOnePrefix: a failed read says what failed once, not
// "list jobs: list jobs:".
func TestReadErrorsOnePrefix(t *testing.T) {
	t.Parallel()
	d := newTestSQLite(t)
	c, err := NewClient[*sql.Tx](failingReadDriver{d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobList(context.Background(), nil); err == nil || err.Error() != "leasehold: list jobs: connection reset" {
		t.Errorf("JobList error = %v", err)
	}
	if _, err := c.JobGet(context.Background(), 7); err == nil || strings.Count(err.Error(), "get job") != 1 {
		t.Errorf("JobGet error = %v", err)
	}
}
