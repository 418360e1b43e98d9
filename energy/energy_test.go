package energy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fakePowercap writes a powercap tree: two packages with core and dram
// subzones and a psys zone that must be ignored.
func fakePowercap(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	zone := func(dir, name string, energy, max uint64) {
		p := filepath.Join(root, dir)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "name"), []byte(name+"\n"), 0o644)
		os.WriteFile(filepath.Join(p, "energy_uj"), []byte(fmt.Sprintf("%d\n", energy)), 0o644)
		os.WriteFile(filepath.Join(p, "max_energy_range_uj"), []byte(fmt.Sprintf("%d\n", max)), 0o644)
	}
	zone("intel-rapl:0", "package-0", 1000, 262143328850)
	zone("intel-rapl:0:0", "core", 500, 262143328850)
	zone("intel-rapl:0:1", "dram", 200, 65712999613)
	zone("intel-rapl:1", "package-1", 3000, 262143328850)
	zone("intel-rapl:2", "psys", 9999, 262143328850)
	return root
}

func set(t *testing.T, root, dir string, v uint64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, dir, "energy_uj"), []byte(fmt.Sprintf("%d\n", v)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRAPL(t *testing.T) {
	root := fakePowercap(t)
	r, err := NewRAPL(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Domains()); got != "[package-0 dram package-1]" {
		t.Fatalf("domains %s: core and psys must not be counted", got)
	}
	start, _ := r.Read()
	set(t, root, "intel-rapl:0", 6000)
	set(t, root, "intel-rapl:0:1", 700)
	set(t, root, "intel-rapl:0:0", 99999) // core is inside package-0: ignored
	end, _ := r.Read()
	if d, err := r.Delta(start, end); err != nil || d != 5000+500 {
		t.Fatalf("Delta = %d, %v; want 5500", d, err)
	}
	// Wraparound: package-1 passes its range and restarts.
	set(t, root, "intel-rapl:1", 262143328850-10)
	a, _ := r.Read()
	set(t, root, "intel-rapl:1", 40)
	b, _ := r.Read()
	if d, err := r.Delta(a, b); err != nil || d != 50 {
		t.Fatalf("Delta across a wrap = %d, %v; want 50", d, err)
	}
	// A counter above its range is refused, not trusted.
	set(t, root, "intel-rapl:1", 262143328851)
	if _, err := r.Read(); err == nil {
		t.Fatal("Read accepted a counter above max_energy_range_uj")
	}
}

func TestRAPLUnavailable(t *testing.T) {
	if _, err := NewRAPL(t.TempDir()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("empty tree: %v", err)
	}
	root := fakePowercap(t)
	os.Remove(filepath.Join(root, "intel-rapl:1", "energy_uj"))
	if _, err := NewRAPL(root); !errors.Is(err, ErrUnavailable) {
		t.Errorf("unreadable counter: %v", err)
	}
	root = fakePowercap(t)
	os.WriteFile(filepath.Join(root, "intel-rapl:0", "energy_uj"), []byte("n/a\n"), 0o644)
	if _, err := NewRAPL(root); !errors.Is(err, ErrUnavailable) {
		t.Errorf("garbage counter: %v", err)
	}
	// This machine: no RAPL, or RAPL readable; never a silent zero.
	if r, err := NewRAPL(""); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("NewRAPL on this host: %v does not wrap ErrUnavailable", err)
		}
	} else if _, err := r.Read(); err != nil {
		t.Errorf("RAPL found but unreadable: %v", err)
	}
}

// TestTrackerAcrossWraps: a tracker that samples often enough counts
// several wraps that a start/end pair would miss.
func TestTrackerAcrossWraps(t *testing.T) {
	root := fakePowercap(t)
	r, _ := NewRAPL(root)
	const max = 262143328850
	tr, err := Track(context.Background(), r, time.Hour) // sampled by hand below
	if err != nil {
		t.Fatal(err)
	}
	v := uint64(1000)
	for range 3 { // three wraps of package-0, each +max/2+… of energy
		v = (v + max/2) % max
		set(t, root, "intel-rapl:0", v)
		tr.sample()
	}
	got, err := tr.Stop()
	want := uint64(3 * (max / 2))
	if err != nil || got != want {
		t.Fatalf("Tracker = %d, %v; want %d", got, err, want)
	}
	// A failed sample fails the measurement.
	tr, _ = Track(context.Background(), r, time.Hour)
	os.Remove(filepath.Join(root, "intel-rapl:0", "energy_uj"))
	tr.sample()
	if _, err := tr.Stop(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Stop after a failed sample = %v", err)
	}
}

type fakeNVML struct {
	mu       sync.Mutex
	initErr  error
	n        int
	mj       []uint64
	readErr  error
	shutdown bool
}

func (f *fakeNVML) Init() error               { return f.initErr }
func (f *fakeNVML) DeviceCount() (int, error) { return f.n, nil }
func (f *fakeNVML) TotalEnergy(i int) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return 0, f.readErr
	}
	return f.mj[i], nil
}
func (f *fakeNVML) Shutdown() error { f.shutdown = true; return nil }

func TestNVML(t *testing.T) {
	f := &fakeNVML{n: 2, mj: []uint64{100, 5000}}
	m, err := newNVML(f)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Read()
	f.mj = []uint64{160, 5040}
	b, _ := m.Read()
	if d, err := m.Delta(a, b); err != nil || d != 100*1000 {
		t.Fatalf("Delta = %d, %v; want 100000 µJ", d, err)
	}
	f.mj = []uint64{10, 5040}
	c, _ := m.Read()
	if _, err := m.Delta(b, c); err == nil {
		t.Fatal("a counter going backwards was accepted")
	}
	for name, api := range map[string]nvmlAPI{
		"no library":            unavailableNVML{errors.New("libnvidia-ml.so.1: cannot open shared object file")},
		"no device":             &fakeNVML{n: 0},
		"init fails":            &fakeNVML{initErr: errors.New("driver not loaded")},
		"no energy (pre-Volta)": &fakeNVML{n: 1, mj: []uint64{0}, readErr: errors.New("Not Supported")},
	} {
		if _, err := newNVML(api); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: newNVML = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := newNVML(nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no binding: %v", err)
	}
	// This machine: no GPU, or a working meter; never a silent zero.
	if m, err := NewNVML(context.Background()); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("NewNVML on this host: %v does not wrap ErrUnavailable", err)
		}
	} else {
		defer m.Close()
		if _, err := m.Read(); err != nil {
			t.Errorf("NVML found but unreadable: %v", err)
		}
	}
}

func TestEstimate(t *testing.T) {
	c := DefaultCoefficients
	// 1 s of CPU on one of two cores over 1 s of wall time: 10 J active +
	// 1 idle core-second × 2 W = 12 J.
	if got, err := c.Estimate(1e9, 1e9, 2); err != nil || got != 12_000_000 {
		t.Fatalf("Estimate = %d, %v; want 12000000 µJ", got, err)
	}
	if got, _ := c.Estimate(0, 0, 1); got != 0 {
		t.Fatalf("Estimate of nothing = %d", got)
	}
	if _, err := c.Estimate(3e9, 1e9, 2); err == nil {
		t.Fatal("CPU time above wall × cores was accepted")
	}
	if _, err := c.Estimate(1, 1, 0); err == nil {
		t.Fatal("zero cores was accepted")
	}
	huge := Coefficients{ActivePerCoreUW: 1 << 62}
	if _, err := huge.Estimate(1<<62, 1<<62, 1); err == nil {
		t.Fatal("an overflowing estimate was accepted")
	}
}

func TestAttribute(t *testing.T) {
	got, a, err := Attribute(1_000_000, 1, 3)
	if err != nil || got != 333_333 || a.Method != "cpu-time-share" || a.Num != 1 || a.Den != 3 {
		t.Fatalf("Attribute = %d, %+v, %v", got, a, err)
	}
	if got, _, _ := Attribute(1<<63, 3, 4); got != 3<<61 {
		t.Fatalf("Attribute of a large total = %d", got)
	}
	for _, bad := range [][2]uint64{{1, 0}, {4, 3}} {
		if _, _, err := Attribute(10, bad[0], bad[1]); err == nil {
			t.Errorf("Attribute %d/%d accepted", bad[0], bad[1])
		}
	}
}
