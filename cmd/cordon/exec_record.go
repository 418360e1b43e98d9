package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/sandbox/pool"
)

// execRecorder is `cordon exec --record FILE`: the exec's durable run
// record (docs/SPEC.md §9.5), written a segment at a time, each line
// synced before the next step. A freeze (`cordon freeze RUN`, through the
// control socket, freeze_linux.go) appends the execute that ran until
// then and a suspend; a thaw, a resume with the same snapshot and the
// idle energy of the frozen time; the end of the run, the last execute
// and a close. Its methods are safe for concurrent use.
type execRecorder struct {
	runID string
	file  string
	ctl   *sandbox.Control
	model pool.IdleModel // the idle energy of the run's allotted cores
	kill  func()         // ends the run (a thaw refused)

	mu       sync.Mutex
	f        *os.File // nil once finished
	rec      *durable.Record
	base     durable.Segment // the run's manifest, grants and environment
	segStart time.Time       // when the running segment began (zero: at the program's start)
	segCPU   int64           // the run's CPU time then
	frozen   *sandbox.Frozen // while frozen
	snapshot canon.ID        // while frozen
	refused  error           // a thaw refused: the run was killed for it
}

// newRunID is a run's id for 'cordon freeze' and 'cordon thaw'.
func newExecRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// validRunID reports whether id is one newExecRunID makes.
func validRunID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// execManifest is the ContentId of what an exec was asked to run: the
// record's manifest address, fixed before the program is decided.
func execManifest(argv, ins, outs []string) canon.ID {
	b, _ := json.Marshal(map[string]any{"type": "cordon.exec-request.v1", "argv": argv, "inputs": nonNil(ins), "outputs": nonNil(outs)})
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // strings only
	}
	return canon.Sum(c)
}

// execRuntime is the record's environment address of an exec without an
// environment manifest: the host's runtime, or the image's by its config
// digest.
func execRuntime(img *sandbox.ImageRuntime) canon.ID {
	doc := map[string]any{"type": "cordon.exec-runtime.v1", "runtime": "host"}
	if img != nil {
		doc["runtime"], doc["image"] = "image", img.Config
	}
	b, _ := json.Marshal(doc)
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return canon.Sum(c)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// newExecRecorder creates the record file, which must not exist.
func newExecRecorder(file string, manifest, grants, env canon.ID, limits sandbox.Limits, ctl *sandbox.Control, kill func()) (*execRecorder, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &execRecorder{runID: newExecRunID(), file: file, ctl: ctl, model: pool.DefaultIdle(limits), kill: kill,
		f: f, rec: durable.New(), base: durable.Segment{Manifest: manifest, Grants: grants, Env: env}}, nil
}

// appendSeg appends s to the record and its line to the file, synced.
// Requires mu.
func (r *execRecorder) appendSeg(s durable.Segment) error {
	if r.f == nil {
		return errors.New("the record is closed")
	}
	s.Manifest, s.Grants, s.Env = r.base.Manifest, r.base.Grants, r.base.Env
	if _, err := r.rec.Append(s); err != nil {
		return err
	}
	segs := r.rec.Segments()
	line := append(segs[len(segs)-1].JCS(), '\n')
	if _, err := r.f.Write(line); err != nil {
		return fmt.Errorf("--record %s: %w", r.file, err)
	}
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("--record %s: %w", r.file, err)
	}
	return nil
}

// workEnergy is the Estimator's energy of a segment that used cpuNS of
// CPU time over wall, on the allotted cores (energy.DefaultCoefficients);
// CPU accounting beyond wall × cores is taken as that.
func (r *execRecorder) workEnergy(cpuNS int64, wall time.Duration) int64 {
	cores := r.model.Cores
	w := uint64(max(wall, 0))
	c := uint64(max(cpuNS, 0))
	if c > w*cores {
		c = w * cores
	}
	e, err := energy.DefaultCoefficients.Estimate(c, w, cores)
	if err != nil || e > canon.MaxInt {
		return canon.MaxInt
	}
	return int64(e)
}

// idleEnergy is the Estimator's idle energy of the allotted cores over
// d: never zero.
func (r *execRecorder) idleEnergy(d time.Duration) int64 {
	e := r.model.Energy(max(d, time.Nanosecond))
	return int64(min(max(e, 1), canon.MaxInt))
}

// snapshotOf is the suspend's snapshot: the ContentId over the run, its
// outputs tree at the freeze and its frozen processes.
func (r *execRecorder) snapshotOf(f *sandbox.Frozen) canon.ID {
	pids := f.PIDs
	if pids == nil {
		pids = []int{}
	}
	b, _ := json.Marshal(map[string]any{"type": "cordon.exec-snapshot.v1", "run": r.runID, "sandbox_run": f.RunID,
		"outputs": f.Outputs.String(), "pids": pids})
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return canon.Sum(c)
}

// freezeReply is the control socket's answer.
type freezeReply struct {
	Run      string `json:"run"`
	State    string `json:"state,omitempty"` // "frozen" or "running"
	Snapshot string `json:"snapshot,omitempty"`
	PIDs     []int  `json:"pids,omitempty"`
	Outputs  string `json:"outputs,omitempty"`
	IdleUJ   int64  `json:"idle_uj,omitempty"`
	ParkedMS int64  `json:"parked_ms,omitempty"`
	Error    string `json:"error,omitempty"`
}

// freeze freezes the run and records the execute until now and the
// suspend.
func (r *execRecorder) freeze() (*freezeReply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil, fmt.Errorf("run %s has ended", r.runID)
	}
	f, err := r.ctl.Freeze()
	if err != nil {
		return nil, err
	}
	start := r.segStart
	if start.IsZero() {
		start = r.ctl.Started()
	}
	snap := r.snapshotOf(f)
	err = r.appendSeg(durable.Segment{Kind: durable.Execute, EnergyUJ: r.workEnergy(f.CPUNanos-r.segCPU, f.At.Sub(start))})
	if err == nil {
		err = r.appendSeg(durable.Segment{Kind: durable.Suspend, Snapshot: snap})
	}
	if err != nil {
		// Unrecorded, the freeze is undone.
		if _, terr := r.ctl.Thaw(); terr != nil {
			r.kill()
			err = errors.Join(err, terr, errors.New("the run is killed: it could be neither recorded frozen nor thawed"))
		}
		return nil, err
	}
	r.frozen, r.snapshot = f, snap
	return &freezeReply{Run: r.runID, State: "frozen", Snapshot: snap.String(), PIDs: f.PIDs, Outputs: f.Outputs.String()}, nil
}

// thaw thaws the run and records the resume. A thaw refused because the
// outputs changed while frozen closes the record and kills the run: what
// it would continue from is not what was frozen.
func (r *execRecorder) thaw() (*freezeReply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil, fmt.Errorf("run %s has ended", r.runID)
	}
	if r.frozen == nil {
		return nil, fmt.Errorf("run %s is not frozen", r.runID)
	}
	now := time.Now()
	parked := now.Sub(r.frozen.At)
	f, err := r.ctl.Thaw()
	if errors.Is(err, sandbox.ErrChanged) {
		r.refused = fmt.Errorf("thaw of run %s refused: %w", r.runID, err)
		cerr := r.appendSeg(durable.Segment{Kind: durable.Close, IdleUJ: r.idleEnergy(parked), IdleProvenance: "Estimator", ParkedMS: parked.Milliseconds()})
		r.kill()
		return nil, errors.Join(fmt.Errorf("%w; the run is killed and its record closed", r.refused), cerr)
	}
	if err != nil {
		return nil, err
	}
	idle := r.idleEnergy(parked)
	if err := r.appendSeg(durable.Segment{Kind: durable.Resume, Snapshot: r.snapshot, IdleUJ: idle, IdleProvenance: "Estimator", ParkedMS: parked.Milliseconds()}); err != nil {
		r.kill()
		return nil, errors.Join(err, errors.New("the run is killed: its resume could not be recorded"))
	}
	r.segStart, r.segCPU = now, f.CPUNanos
	snap := r.snapshot
	r.frozen, r.snapshot = nil, canon.ID{}
	return &freezeReply{Run: r.runID, State: "running", Snapshot: snap.String(), IdleUJ: idle, ParkedMS: parked.Milliseconds()}, nil
}

// finish records the end of the run — its last execute (with the
// receipt, when there is one) and the close — and writes the signed head
// beside the record when k is not nil. res is nil when the program did
// not run to completion. Nothing recorded (the program never started):
// the empty file is removed.
func (r *execRecorder) finish(res *sandbox.Result, receiptID canon.ID, k *sign.PrivateKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	var err error
	{
		switch {
		case r.rec.Head().State == durable.Closed:
		case r.frozen != nil: // ended while frozen (killed): the park's idle energy closes it
			parked := time.Since(r.frozen.At)
			err = r.appendSeg(durable.Segment{Kind: durable.Close, IdleUJ: r.idleEnergy(parked), IdleProvenance: "Estimator", ParkedMS: parked.Milliseconds()})
		case res == nil && r.rec.Head().Count == 0:
			r.f.Close()
			r.f = nil
			return os.Remove(r.file)
		default:
			var cpu int64
			var wall time.Duration
			if res != nil {
				start := r.segStart
				if start.IsZero() {
					start = res.Start
				}
				cpu, wall = res.CPUNanos-r.segCPU, res.End.Sub(start)
			}
			err = r.appendSeg(durable.Segment{Kind: durable.Execute, EnergyUJ: r.workEnergy(cpu, wall), Receipt: receiptID})
			if err == nil {
				err = r.appendSeg(durable.Segment{Kind: durable.Close})
			}
		}
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
		r.f = nil
	}
	if err == nil && k != nil {
		err = writeNew(r.file+".head", r.rec.Head().Seal(k))
	}
	return err
}
