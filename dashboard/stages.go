package dashboard

import (
	"context"
	"net/http"

	"github.com/leasehold/leasehold/leasetype"
)

// stageSource is implemented by sources that record stage checkpoints and
// dependencies (*leasehold.Client does); the job page shows them when the
// source has them.
type stageSource interface {
	JobStages(ctx context.Context, id int64) ([]*leasetype.StageRow, error)
	JobDependencies(ctx context.Context, id int64) ([]*leasetype.DependencyRow, error)
}

// jobStages fills the job page's stage history and dependency edges.
func (h *handler) jobStages(r *http.Request, d *jobData) error {
	src, ok := h.src.(stageSource)
	if !ok {
		return nil
	}
	stages, err := src.JobStages(r.Context(), d.Job.ID)
	if err != nil {
		return err
	}
	deps, err := src.JobDependencies(r.Context(), d.Job.ID)
	if err != nil {
		return err
	}
	d.Stages = stages
	for _, e := range deps {
		if e.Child == d.Job.ID {
			d.Upstream = append(d.Upstream, e)
		} else {
			d.Downstream = append(d.Downstream, e)
		}
	}
	return nil
}
