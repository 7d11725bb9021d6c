package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// registryExec records the registrar's calls; registerErr fails ClientRegister.
type registryExec struct {
	mu          sync.Mutex
	registered  []driver.ClientRegisterParams
	pruned      []time.Duration
	removed     []string
	registerErr error
}

func (e *registryExec) ClientRegister(_ context.Context, p *driver.ClientRegisterParams) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.registerErr != nil {
		return e.registerErr
	}
	e.registered = append(e.registered, *p)
	return nil
}

func (e *registryExec) ClientRemove(_ context.Context, p *driver.ClientRemoveParams) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removed = append(e.removed, p.Owner)
	return true, nil
}

func (e *registryExec) ClientPrune(_ context.Context, p *driver.ClientPruneParams) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pruned = append(e.pruned, p.OlderThan)
	return 2, nil
}

func TestClientRegistrarRunOnce(t *testing.T) {
	t.Parallel()
	exec := &registryExec{}
	running := int64(3)
	r := &ClientRegistrar{
		Exec: exec, Row: driver.ClientRegisterParams{Owner: "h:1:a", Host: "h", PID: 1, ID: "a", Queues: []string{"q"}},
		Running: func() int64 { return running }, Interval: 5 * time.Second, PruneAfter: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	if n := r.RunOnce(t.Context()); n != 2 {
		t.Fatalf("RunOnce pruned %d, want the executor's 2", n)
	}
	running = 0
	r.RunOnce(t.Context())
	if len(exec.registered) != 2 || exec.registered[0].Running != 3 || exec.registered[1].Running != 0 ||
		exec.registered[0].TTL != 15*time.Second || exec.registered[0].Owner != "h:1:a" || !slices.Equal(exec.registered[0].Queues, []string{"q"}) {
		t.Fatalf("registered %+v; want two beats with running 3 then 0, TTL 3 intervals", exec.registered)
	}
	if !slices.Equal(exec.pruned, []time.Duration{30 * time.Second, 30 * time.Second}) {
		t.Fatalf("pruned with %v, want PruneAfter after each beat", exec.pruned)
	}
	if r.Row.Running != 0 || r.Row.TTL != 0 {
		t.Fatalf("RunOnce changed the template row: %+v", r.Row)
	}
	r.Remove(t.Context())
	if !slices.Equal(exec.removed, []string{"h:1:a"}) {
		t.Fatalf("removed %v, want the owner", exec.removed)
	}

	failing := &registryExec{registerErr: errors.New("database away")}
	r.Exec = failing
	if n := r.RunOnce(t.Context()); n != 0 || len(failing.pruned) != 0 {
		t.Fatalf("after a failed beat: pruned %d (calls %v), want no prune", n, failing.pruned)
	}
}

func TestClientRegistrarRunBeatsAtOnceAndStops(t *testing.T) {
	t.Parallel()
	exec := &registryExec{}
	r := &ClientRegistrar{Exec: exec, Row: driver.ClientRegisterParams{Owner: "h:1:a"}, Running: func() int64 { return 0 },
		Interval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		exec.mu.Lock()
		n := len(exec.registered)
		exec.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d beats in 5 s at a 10 ms interval", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if len(exec.removed) != 0 {
		t.Fatalf("Run removed the row on cancel (%v); only Remove may", exec.removed)
	}
}
