package sandbox

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
)

var (
	// ErrNotRunning is returned by Control's methods when no program is
	// running under it: not started yet, finished, or killed.
	ErrNotRunning = errors.New("sandbox: no running program")
	// ErrFrozen is returned by Freeze of a frozen run.
	ErrFrozen = errors.New("sandbox: the run is frozen already")
	// ErrNotFrozen is returned by Thaw of a run that is not frozen.
	ErrNotFrozen = errors.New("sandbox: the run is not frozen")
	// ErrChanged is returned by Thaw when the run's outputs are not what
	// they were when it was frozen; the run stays frozen.
	ErrChanged = errors.New("sandbox: the run's outputs changed while it was frozen")
	// errDigestStopped: the run ended during an outputs digest.
	errDigestStopped = errors.New("the run ended during the outputs digest")
)

// Control freezes and thaws a running sandboxed program from another
// goroutine (Spec.Control): its run's cgroup is frozen (the cgroup
// freezer), and while it is frozen the run's wall-clock limit is paused,
// so that time spent frozen is not counted against it. A Control serves
// one run; it is attached when Start starts the program and detached when
// Wait has its status. Its methods are safe for concurrent use.
type Control struct {
	mu       sync.Mutex
	run      runHandle // the attached run, or nil
	ended    bool      // the run was attached and has ended
	frozen   *Frozen   // while frozen
	started  time.Time // when the run was attached
	attached chan struct{}
	// ending is closed, without c.mu, when the run ends (detach): an
	// outputs digest under way in Freeze or Thaw stops, so that detach,
	// and with it an interrupted run's end, waits for no digest.
	ending  chan struct{}
	endOnce sync.Once
}

// Frozen is what a freeze saw.
type Frozen struct {
	RunID string
	// PIDs are the host pids of the run's processes, as the cgroup
	// lists them while they are frozen.
	PIDs []int
	// Outputs is the digest of the run's outputs tree in its /work at
	// the freeze (OutputsDigest); Thaw requires it unchanged.
	Outputs canon.ID
	// CPUNanos is the CPU time the run had used when it was frozen
	// (its cgroup's accounting).
	CPUNanos int64
	// At is when the run was frozen.
	At time.Time
}

// runHandle is what a Control needs of a running sandbox (Linux).
type runHandle interface {
	id() string
	freeze() ([]int, int64, error) // freeze the cgroup, pause the wall clock; the pids and CPU time
	thaw() error                   // thaw the cgroup, resume the wall clock
	outputsDigest() (canon.ID, error)
}

// NewControl returns a Control with no run attached.
func NewControl() *Control {
	return &Control{attached: make(chan struct{}), ending: make(chan struct{})}
}

// Attached is closed when a run is attached (its program started).
func (c *Control) Attached() <-chan struct{} { return c.attached }

func (c *Control) attach(r runHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.run, c.started = r, time.Now()
	close(c.attached)
}

// detach ends the Control's run: later calls return ErrNotRunning. It
// reports whether the run was frozen.
func (c *Control) detach() (wasFrozen bool) {
	c.endOnce.Do(func() {
		if c.ending != nil {
			close(c.ending)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	wasFrozen = c.frozen != nil
	if c.run != nil {
		c.run, c.ended, c.frozen = nil, true, nil
	}
	return wasFrozen
}

// Started is when the program was started (zero before).
func (c *Control) Started() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// RunID is the attached run's id ("" before it starts).
func (c *Control) RunID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		return ""
	}
	return c.run.id()
}

// Freeze freezes the running program: every process of its cgroup stops,
// the wall-clock limit is paused, and the outputs tree is digested while
// nothing can change it from inside.
func (c *Control) Freeze() (*Frozen, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		return nil, ErrNotRunning
	}
	if c.frozen != nil {
		return nil, ErrFrozen
	}
	pids, cpu, err := c.run.freeze()
	if err != nil {
		return nil, err
	}
	at := time.Now() // the work ended here, not after the digest
	d, err := c.run.outputsDigest()
	if err != nil {
		return nil, errors.Join(err, c.run.thaw())
	}
	c.frozen = &Frozen{RunID: c.run.id(), PIDs: pids, Outputs: d, CPUNanos: cpu, At: at}
	f := *c.frozen
	return &f, nil
}

// Thaw lets a frozen program run again, and its wall clock resume, if its
// outputs are as they were at the freeze; otherwise it returns an error
// wrapping ErrChanged and the run stays frozen (kill it: cancel the run's
// context). It returns what the freeze saw.
func (c *Control) Thaw() (*Frozen, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		return nil, ErrNotRunning
	}
	if c.frozen == nil {
		return nil, ErrNotFrozen
	}
	d, err := c.run.outputsDigest()
	if err != nil {
		return nil, err
	}
	if d != c.frozen.Outputs {
		return nil, fmt.Errorf("%w: digest %s at the freeze, %s now", ErrChanged, c.frozen.Outputs, d)
	}
	if err := c.run.thaw(); err != nil {
		return nil, err
	}
	f := c.frozen
	c.frozen = nil
	return f, nil
}

// IsFrozen reports whether the run is frozen.
func (c *Control) IsFrozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen != nil
}
