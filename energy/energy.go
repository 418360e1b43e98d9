// Package energy measures and estimates the energy a run uses, per device
// class, in integer microjoules (docs/SPEC.md §4.6). Three meters:
//
//   - RAPL, the powercap sysfs tree of the CPU packages and their DRAM
//     (class cpu, provenance HwShunt), with counter wraparound;
//   - NVML, NVIDIA's management library, loaded at run time (class gpu,
//     provenance HwShunt);
//   - an Estimator from CPU time and configurable power coefficients
//     (provenance Estimator).
//
// A meter that cannot read its counters is unavailable and says so with
// ErrUnavailable; it never reports zero. A package counter is shared by
// every process on the package: a run's share of it is an attribution,
// and Attribute marks it so.
package energy

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
)

// Provenances, as receipts spell them.
const (
	HwShunt   = "HwShunt"
	Estimator = "Estimator"
)

// ErrUnavailable is wrapped by every error that means "this meter cannot
// measure here": no counters, no permission, no library, no device.
var ErrUnavailable = errors.New("energy meter unavailable")

// Counter is one reading of a meter's cumulative counters, one value per
// domain, in microjoules.
type Counter struct {
	Values []uint64
}

// Meter reads cumulative hardware energy counters.
type Meter interface {
	// Class is the device class measured: "cpu", "gpu".
	Class() string
	// Read returns the current counters.
	Read() (Counter, error)
	// Delta returns the energy between two readings, in µJ, accounting for
	// at most one wraparound of each counter between them.
	Delta(start, end Counter) (uint64, error)
}

// Tracker samples a meter often enough that no counter wraps twice between
// samples, and sums the deltas.
type Tracker struct {
	m      Meter
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	last  Counter // guarded by mu
	total uint64  // guarded by mu
	err   error   // guarded by mu
}

// Track starts sampling m every interval until Stop. The interval must be
// shorter than the meter's shortest wrap period (for RAPL, minutes).
func Track(ctx context.Context, m Meter, interval time.Duration) (*Tracker, error) {
	c, err := m.Read()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracker{m: m, cancel: cancel, done: make(chan struct{}), last: c}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.sample()
			}
		}
	}()
	return t, nil
}

func (t *Tracker) sample() {
	c, err := t.m.Read()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if err != nil {
		t.err = err
		return
	}
	d, err := t.m.Delta(t.last, c)
	if err != nil {
		t.err = err
		return
	}
	var carry uint64
	t.total, carry = bits.Add64(t.total, d, 0)
	if carry != 0 {
		t.err = errors.New("energy: total overflows 64 bits")
	}
	t.last = c
}

// Stop takes a last sample, stops the tracker and returns the energy since
// Track, in µJ. Any failed sample fails the whole measurement: a partial
// figure is never reported as if it were whole.
func (t *Tracker) Stop() (uint64, error) {
	t.cancel()
	<-t.done
	t.sample()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, fmt.Errorf("energy: %s meter: %w", t.m.Class(), t.err)
	}
	return t.total, nil
}

// Attribution describes a run's share of a counter it did not own alone.
type Attribution struct {
	Method   string // "cpu-time-share"
	Num, Den uint64
}

// Attribute returns the share num/den of a measured total, rounded down,
// and the Attribution that must travel with it.
func Attribute(totalUJ, num, den uint64) (uint64, Attribution, error) {
	if den == 0 || num > den {
		return 0, Attribution{}, fmt.Errorf("energy: attribution %d/%d is not a share", num, den)
	}
	hi, lo := bits.Mul64(totalUJ, num)
	q, _ := bits.Div64(hi, lo, den) // hi < den because num <= den
	return q, Attribution{Method: "cpu-time-share", Num: num, Den: den}, nil
}

// Coefficients of the Estimator, in microwatts. The defaults are
// deliberately round, documented figures for a server core, not a model
// of any one part; set them from the hardware's datasheet or a calibration
// against a hardware meter.
type Coefficients struct {
	ActivePerCoreUW uint64 // power of one busy core
	IdlePerCoreUW   uint64 // power of one allotted core while idle
}

// DefaultCoefficients: 10 W per busy core, 2 W per idle allotted core.
var DefaultCoefficients = Coefficients{ActivePerCoreUW: 10_000_000, IdlePerCoreUW: 2_000_000}

// Estimate returns the estimated energy of a run, in µJ:
//
//	cpuNS × active + (wallNS × cores − cpuNS) × idle, per 10^9 ns,
//
// where cpuNS is the CPU time the run used, wallNS its wall time and cores
// the cores allotted to it. CPU time above wallNS × cores is an error.
func (c Coefficients) Estimate(cpuNS, wallNS, cores uint64) (uint64, error) {
	if cores == 0 {
		return 0, errors.New("energy: estimate with zero cores")
	}
	hi, capNS := bits.Mul64(wallNS, cores)
	if hi != 0 {
		return 0, errors.New("energy: wall time × cores overflows")
	}
	if cpuNS > capNS {
		return 0, fmt.Errorf("energy: %d ns of CPU time exceeds %d ns × %d cores", cpuNS, wallNS, cores)
	}
	active, err := mulDiv(cpuNS, c.ActivePerCoreUW, 1e9)
	if err != nil {
		return 0, err
	}
	idle, err := mulDiv(capNS-cpuNS, c.IdlePerCoreUW, 1e9)
	if err != nil {
		return 0, err
	}
	sum, carry := bits.Add64(active, idle, 0)
	if carry != 0 {
		return 0, errors.New("energy: estimate overflows")
	}
	return sum, nil
}

func mulDiv(a, b, d uint64) (uint64, error) {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return 0, errors.New("energy: estimate overflows")
	}
	q, _ := bits.Div64(hi, lo, d)
	return q, nil
}
