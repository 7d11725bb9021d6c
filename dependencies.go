package leasehold

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Dependency policies, for InsertOpts.DependencyPolicy.
const (
	// DependencyCancel cancels a waiting job whose dependency was discarded
	// or cancelled, and transitively the jobs waiting on it.
	DependencyCancel = leasetype.DependencyCancel
	// DependencyWait keeps a waiting job pending when a dependency was
	// discarded or cancelled, for an operator to retry the dependency.
	DependencyWait = leasetype.DependencyWait
)

// setDependencies copies and checks the dependency options of o into p.
func setDependencies(p *driver.JobInsertParams, o InsertOpts) error {
	for _, id := range o.DependsOn {
		if id <= 0 {
			return fmt.Errorf("%w: DependsOn: %d is not a job ID", ErrInvalidArgs, id)
		}
	}
	if o.DependencyPolicy != "" && !o.DependencyPolicy.Valid() {
		return fmt.Errorf("%w: unknown dependency policy %q (want %q or %q)", ErrInvalidArgs, o.DependencyPolicy, DependencyCancel, DependencyWait)
	}
	p.DependsOn, p.DependsOnIndex, p.DependencyPolicy = o.DependsOn, o.DependsOnIndex, o.DependencyPolicy
	return nil
}

// mergeDependencyOpts overlays the dependency options of over on base.
func mergeDependencyOpts(base, over InsertOpts) InsertOpts {
	if len(over.DependsOn) > 0 {
		base.DependsOn = over.DependsOn
	}
	if len(over.DependsOnIndex) > 0 {
		base.DependsOnIndex = over.DependsOnIndex
	}
	if over.DependencyPolicy != "" {
		base.DependencyPolicy = over.DependencyPolicy
	}
	return base
}

// checkDependencies validates the dependency positions of a batch before
// it reaches the driver.
func checkDependencies(ps []*driver.JobInsertParams) error {
	if err := driver.ValidateDependencies(ps); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgs, err)
	}
	return nil
}

// JobDependencies returns the dependency edges of job id: the jobs it
// waits for (Child == id) first, then the jobs waiting on it, each with
// both jobs' states.
func (c *Client[TTx]) JobDependencies(ctx context.Context, id int64) ([]*leasetype.DependencyRow, error) {
	se, ok := c.core.exec.(driver.StageExecutor)
	if !ok {
		return nil, fmt.Errorf("leasehold: driver %s does not record dependencies", c.driver.Name())
	}
	rows, err := se.JobDependencies(ctx, &driver.JobDependenciesParams{JobID: id})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err)
	}
	return rows, nil
}
