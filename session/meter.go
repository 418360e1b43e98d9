package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/grant"
)

// Meters are hardware energy meters by device class ("cpu", "gpu").
type Meters map[string]energy.Meter

// Close closes the meters that hold a resource (NVML).
func (ms Meters) Close() {
	for _, m := range ms {
		if c, ok := m.(io.Closer); ok {
			c.Close()
		}
	}
}

// HostMeters finds this host's meters for the given device classes: RAPL
// under powercap ("" is energy.DefaultPowercap) for class cpu, NVML for
// class gpu. A class no meter serves is left out, with why. Only the
// classes asked for are looked up: loading NVML costs a library search.
func HostMeters(ctx context.Context, powercap string, classes []string) (Meters, map[string]string) {
	ms, why := Meters{}, map[string]string{}
	for _, c := range classes {
		switch c {
		case "cpu":
			if r, err := energy.NewRAPL(powercap); err == nil {
				ms[c] = r
			} else {
				why[c] = err.Error()
			}
		case "gpu":
			if n, err := energy.NewNVML(ctx); err == nil {
				ms[c] = n
			} else {
				why[c] = err.Error()
			}
		}
	}
	return ms, why
}

// sampleInterval is how often a tracker reads its meter: far shorter
// than the fastest wrap of a RAPL counter (minutes).
const sampleInterval = 10 * time.Second

// metering is a session's meters, one tracker per device class the grant
// set can use.
type metering struct {
	all      Meters
	trackers map[string]*energy.Tracker
	why      map[string]string // class → why it has no tracker
	stopped  bool
}

// classesOf returns the device classes a grant set can use: cpu always,
// and each class of its device rules.
func classesOf(gs *grant.Set) []string {
	cs := []string{"cpu"}
	for _, d := range gs.Devices {
		if !slices.Contains(cs, d.Class) {
			cs = append(cs, d.Class)
		}
	}
	slices.Sort(cs)
	return cs
}

func startMeters(ctx context.Context, ms Meters, why map[string]string, classes []string) (*metering, error) {
	m := &metering{all: ms, trackers: map[string]*energy.Tracker{}, why: map[string]string{}}
	for _, c := range classes {
		meter, ok := ms[c]
		if !ok {
			m.why[c] = why[c]
			if m.why[c] == "" {
				m.why[c] = "no meter for class " + c
			}
			continue
		}
		if meter.Class() != c {
			m.close()
			return nil, fmt.Errorf("session: the %s meter measures class %q", c, meter.Class())
		}
		t, err := energy.Track(ctx, meter, sampleInterval)
		if err != nil {
			m.why[c] = err.Error()
			continue
		}
		m.trackers[c] = t
	}
	return m, nil
}

func (m *metering) close() {
	if m == nil {
		return
	}
	for _, t := range m.trackers {
		t.Stop()
	}
	m.trackers = map[string]*energy.Tracker{}
	m.all.Close()
	m.all = nil
}

// Energy is how the session's energy was measured, per class.
type Energy struct {
	Devices []receipt.Device // sorted by class, as a receipt has them
	Meters  []entry.Meter    // the journal's meter entries, same order
}

// StopMeters stops the meters and journals one meter entry per device
// class the session used: its provenance, its source and its figures.
// Callers whose journal must end with their own entry (the runner's
// run.end) call it before that entry; Seal calls it otherwise. A meter
// whose sampling failed is not used: its class falls back to the
// Estimator, and the entry says why.
func (s *Session) StopMeters() (*Energy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopMeters()
}

func (s *Session) stopMeters() (*Energy, error) {
	if s.energy != nil {
		return s.energy, nil
	}
	wall := time.Since(s.opened)
	e, err := s.meters.measure(s.usedClasses(), uint64(max(s.cpuNS, 0)), uint64(max(wall.Nanoseconds(), 1)))
	if err != nil {
		return nil, err
	}
	for _, m := range e.Meters {
		if _, err := s.rec.Record(m); err != nil {
			return nil, err
		}
	}
	s.energy = e
	return e, nil
}

// usedClasses are the classes a receipt must meter: cpu, and each class
// the session's decisions allowed a device request for.
func (s *Session) usedClasses() []string {
	return []string{"cpu"}
}

// estimateCores is the number of cores the estimator charges idle power
// for: the sandbox's CPU bandwidth limit is one CPU (sandbox.Limits).
const estimateCores = 1

func (m *metering) measure(classes []string, cpuNS, wallNS uint64) (*Energy, error) {
	if m.stopped {
		return nil, errors.New("session: the meters were already stopped")
	}
	m.stopped = true
	defer m.close()
	e := &Energy{}
	for _, c := range classes {
		d := receipt.Device{Class: c, Provenance: receipt.Estimator}
		rec := entry.Meter{Class: c, Provenance: receipt.Estimator}
		if c == "cpu" {
			d.BusyNS = cpuNS
			est, err := energy.DefaultCoefficients.Estimate(cpuNS, max(wallNS, cpuNS), estimateCores)
			if err != nil {
				return nil, err
			}
			d.EstimatedUJ = est
			rec.Source = "estimator"
		}
		why := m.why[c]
		if t, ok := m.trackers[c]; ok {
			delete(m.trackers, c)
			total, err := t.Stop()
			switch {
			case err != nil:
				why = err.Error()
			case total == 0 && c == "cpu" && cpuNS > 0:
				// A counter that did not move while commands ran is not
				// measuring them (a stale or fake tree): not HwShunt.
				why = fmt.Sprintf("%s: the counters did not move while commands used %d ns of CPU", meterSource(m.all[c]), cpuNS)
			default:
				d.Provenance, rec.Provenance = receipt.HwShunt, receipt.HwShunt
				rec.Source = meterSource(m.all[c]) // before the deferred close
				measured := total
				if c == "cpu" {
					// A package counter is shared by the whole host: the
					// run's share is its CPU time over the host's CPU
					// capacity for the session's wall time.
					den := wallNS * uint64(runtime.NumCPU())
					share, a, err := energy.Attribute(total, min(cpuNS, den), den)
					if err != nil {
						return nil, err
					}
					measured = share
					d.Attribution = &receipt.Attribution{Method: a.Method, Num: a.Num, Den: a.Den}
					rec.TotalUJ = &total
				}
				d.MeasuredUJ = &measured
				why = ""
			}
		}
		if d.Provenance == receipt.Estimator && c != "cpu" {
			return nil, fmt.Errorf("session: the run used device class %s, and it has no meter (%s) and no estimator: a receipt needs a record for it", c, why)
		}
		rec.Reason = oneLine(why)
		rec.MeasuredUJ, rec.EstimatedUJ, rec.BusyNS = d.MeasuredUJ, d.EstimatedUJ, d.BusyNS
		if d.Attribution != nil {
			rec.Attribution = fmt.Sprintf("%s %d/%d", d.Attribution.Method, d.Attribution.Num, d.Attribution.Den)
		}
		e.Devices = append(e.Devices, d)
		e.Meters = append(e.Meters, rec)
	}
	return e, nil
}

func meterSource(m energy.Meter) string {
	switch m := m.(type) {
	case *energy.RAPL:
		// The tree is named: a receipt's meter is only as good as the
		// tree the operator pointed cordon at.
		return "rapl:" + m.Root() + ":" + strings.Join(m.Domains(), ",")
	case *energy.NVML:
		return fmt.Sprintf("nvml:%d devices", m.Devices())
	default:
		return fmt.Sprintf("%T", m)
	}
}
