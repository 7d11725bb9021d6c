package leasehold

import (
	"context"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/leasetype"
)

// Stages runs a handler's work as a fixed sequence of named stages, each
// ended by a fenced Checkpoint, so that an attempt after a crash resumes at
// the stage the job reached and never repeats one already recorded. State
// is the value carried from stage to stage and checkpointed with each: on
// resume it holds what the last recorded stage stored.
//
// Declare every stage up front, in order, with NewStages; then call Do for
// each in that order. Do skips a stage an earlier attempt checkpointed and
// runs the others, checkpointing each one after it succeeds. This is not
// replay: the code between stages runs on every attempt, and a stage that
// failed or was interrupted before its checkpoint runs again, so its
// outside effects must still be idempotent (use Job.IdempotencyKey).
type Stages[S any] struct {
	// State is the state carried through the stages; on resume it is the
	// state the last recorded stage stored.
	State S

	names   []string
	next    int // index of the stage Do expects next
	resume  int // stages before this index are skipped
	skipped int
}

// NewStages returns the stages of job (the handler's job row), declared in
// order by names. It decodes the state of the job's last checkpoint into
// State. It returns an error wrapping ErrInvalidArgs when a name is empty
// or repeated, and when the stage the job recorded is not one of names (the
// handler's stages were renamed under a running job: resuming would guess).
func NewStages[S any](job *leasetype.JobRow, names ...string) (*Stages[S], error) {
	if job == nil {
		return nil, fmt.Errorf("%w: stages: job is nil", ErrInvalidArgs)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: stages: no stage names", ErrInvalidArgs)
	}
	for i, n := range names {
		if _, err := encodeStage(n, nil); err != nil {
			return nil, err
		}
		if slices.Index(names, n) != i {
			return nil, fmt.Errorf("%w: stages: stage %q declared twice", ErrInvalidArgs, n)
		}
	}
	s := &Stages[S]{names: slices.Clone(names)}
	if job.Stage != "" {
		i := slices.Index(names, job.Stage)
		if i < 0 {
			return nil, fmt.Errorf("%w: stages: job %d recorded stage %q, which is not one of %q", ErrInvalidArgs, job.ID, job.Stage, names)
		}
		s.resume = i + 1
		if _, err := decodeStageState(job, &s.State); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Do runs stage name unless an earlier attempt recorded it, then
// checkpoints it with State (through Checkpoint, so ctx must be the
// handler's). fn changes State through its pointer. An error of fn is
// returned as is and nothing is recorded; a refused checkpoint returns a
// *LeaseLostError. Stages must be run in their declared order.
func (s *Stages[S]) Do(ctx context.Context, name string, fn func(ctx context.Context, state *S) error) error {
	if s.next >= len(s.names) || s.names[s.next] != name {
		want := "none (all ran)"
		if s.next < len(s.names) {
			want = fmt.Sprintf("%q", s.names[s.next])
		}
		return fmt.Errorf("%w: stages: Do(%q) out of order, next declared stage is %s", ErrInvalidArgs, name, want)
	}
	s.next++
	if s.next <= s.resume {
		s.skipped++
		return nil
	}
	if err := fn(ctx, &s.State); err != nil {
		return err
	}
	return Checkpoint(ctx, name, s.State)
}

// Skipped returns how many stages Do skipped because an earlier attempt
// recorded them.
func (s *Stages[S]) Skipped() int { return s.skipped }

// Resumed reports whether the job had recorded a stage when the attempt
// began.
func (s *Stages[S]) Resumed() bool { return s.resume > 0 }
