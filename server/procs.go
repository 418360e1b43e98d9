package server

import (
	"runtime"
	"sync"
	"time"
)

// While runs execute in this process, the Go runtime gets one more P
// than it chose (GOMAXPROCS), and gets its own choice back once none has
// executed for procsLinger.
//
// Why: an executing run makes blocking system calls here — the journal
// and the evidence files are synced about 25 times a run, and SQLite
// syncs its log at each commit. A P whose thread blocks in a system call
// keeps the goroutines queued on it until the runtime's monitor notices
// and hands the P to another thread, which after a quiet spell takes up
// to 10 ms; on two CPUs that leaves one of them idle, and the requests
// queued behind the sync wait. The load test showed the CPUs about 10%
// idle while runs executed under saturating reads (2–3% with the extra
// P), and the read p99 falling from 41–43 ms to 34–36 ms (docs/server.md,
// "Figures"). Without runs an extra P costs: three threads time-share
// two CPUs, and with GOMAXPROCS=3 throughout the p99 of reads alone rose
// from 36 to 53–57 ms, so it is given only while runs execute.
//
// Config.SpareProc turns it on; cordon serve and cordon worker set it
// unless the operator set GOMAXPROCS (the environment variable).
type spareProc struct {
	mu      sync.Mutex
	running int         // guarded by mu: runs executing
	raised  bool        // guarded by mu: this raised GOMAXPROCS
	restore *time.Timer // guarded by mu: pending restore, if any
	linger  time.Duration
	procs   func(int) int // runtime.GOMAXPROCS
	reset   func()        // runtime.SetDefaultGOMAXPROCS
}

// procsLinger is how long the extra P stays after the last run ended:
// runs that follow each other closely do not stop the world for each
// change.
const procsLinger = 250 * time.Millisecond

// runProcs is the process's one spareProc: GOMAXPROCS is the process's.
var runProcs = &spareProc{linger: procsLinger, procs: runtime.GOMAXPROCS, reset: runtime.SetDefaultGOMAXPROCS}

// begin records a run starting to execute, raising GOMAXPROCS by one if
// it is the first.
func (p *spareProc) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running++
	if p.restore != nil {
		p.restore.Stop()
		p.restore = nil
	}
	if !p.raised {
		p.procs(p.procs(0) + 1)
		p.raised = true
	}
}

// end records a run that stopped executing; after the last, the runtime
// gets its own GOMAXPROCS back once linger has passed with none
// executing.
func (p *spareProc) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	if p.running == 0 && p.raised && p.restore == nil {
		p.restore = time.AfterFunc(p.linger, p.lower)
	}
}

func (p *spareProc) lower() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restore = nil
	if p.running == 0 && p.raised {
		// The runtime's own choice again, and its updates when the
		// CPUs it may use change.
		p.reset()
		p.raised = false
	}
}
