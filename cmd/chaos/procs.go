package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one worker OS process.
type proc struct {
	slot int
	id   string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	mu      sync.Mutex
	last    report // the latest counters it reported
	paused  bool
	reports int
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// lastReport returns the latest counters the process reported.
func (p *proc) lastReport() report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// wait waits for the process to exit, at most d.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// fleet is the worker processes: one live process per slot, restarted
// after a kill. Every process ever started is kept for its counters.
type fleet struct {
	exe    string
	base   workerConfig
	dbURLs []string // per slot: direct, or through the slot's proxy
	logDir string

	mu      sync.Mutex
	slots   []*proc
	all     []*proc
	gen     int
	closing bool
}

func newFleet(exe string, base workerConfig, dbURLs []string, logDir string) *fleet {
	return &fleet{exe: exe, base: base, dbURLs: dbURLs, logDir: logDir, slots: make([]*proc, len(dbURLs))}
}

// start starts the worker process of a slot.
func (f *fleet) start(slot int) (*proc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return nil, fmt.Errorf("fleet is stopping")
	}
	f.gen++
	w := f.base
	w.dbURL = f.dbURLs[slot]
	w.id = fmt.Sprintf("w%d-g%d", slot, f.gen)
	w.claimLog = filepath.Join(f.logDir, "claims-"+w.id+".jsonl")
	cmd := exec.Command(f.exe, w.args()...)
	// Its own process group, so a signal meant for the harness's terminal
	// does not reach it first; killed with SIGKILL if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logFile, err := os.Create(filepath.Join(f.logDir, w.id+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start worker %s: %w", w.id, err)
	}
	p := &proc{slot: slot, id: w.id, cmd: cmd, done: make(chan struct{})}
	var reading sync.WaitGroup
	reading.Add(1)
	go func() {
		defer reading.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r report
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				p.mu.Lock()
				p.last = r
				p.reports++
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		reading.Wait() // Wait closes the pipe: read it to the end first
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	f.slots[slot] = p
	f.all = append(f.all, p)
	return p, nil
}

// pick returns a random live, running worker, or nil.
func (f *fleet) pick(rng *rand.Rand) *proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []*proc
	for _, p := range f.slots {
		if p != nil && p.alive() && !p.isPaused() {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rng.IntN(len(live))]
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *proc) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.mu.Unlock()
}

// current returns the live process of every slot.
func (f *fleet) current() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*proc
	for _, p := range f.slots {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// every returns every process ever started.
func (f *fleet) every() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*proc(nil), f.all...)
}

// heal resumes paused workers and restarts dead ones.
func (f *fleet) heal() error {
	for slot := range f.dbURLs {
		f.mu.Lock()
		p := f.slots[slot]
		f.mu.Unlock()
		if p != nil && p.alive() {
			if p.isPaused() {
				_ = p.signal(syscall.SIGCONT)
				p.setPaused(false)
			}
			continue
		}
		if _, err := f.start(slot); err != nil {
			return err
		}
	}
	return nil
}

// stop asks every worker to stop (SIGTERM after SIGCONT), waits up to d
// for them, then kills what is left. No process outlives it.
func (f *fleet) stop(d time.Duration) {
	f.mu.Lock()
	f.closing = true
	all := append([]*proc(nil), f.all...)
	f.mu.Unlock()
	for _, p := range all {
		if p.alive() {
			_ = p.signal(syscall.SIGCONT)
			_ = p.signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(d)
	for _, p := range all {
		if !p.wait(time.Until(deadline)) {
			_ = p.signal(syscall.SIGKILL)
			p.wait(5 * time.Second)
		}
	}
}
