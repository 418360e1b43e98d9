package cgroup

import (
	"errors"
	"math"
	"testing"
)

func TestLimitsCheck(t *testing.T) {
	const page = 4096
	for _, tc := range []struct {
		name string
		lim  Limits
		ok   bool
	}{
		{"minimal", Limits{MemoryBytes: page, PIDs: 1}, true},
		{"one CPU", Limits{MemoryBytes: 1 << 30, PIDs: 64, CPUMillis: 1000}, true},
		{"least CPU", Limits{MemoryBytes: page, PIDs: 1, CPUMillis: MinCPUMillis}, true},
		{"no memory", Limits{PIDs: 1}, false},
		{"negative memory", Limits{MemoryBytes: -page, PIDs: 1}, false},
		{"memory not in pages", Limits{MemoryBytes: page + 1, PIDs: 1}, false},
		{"no pids", Limits{MemoryBytes: page}, false},
		{"negative pids", Limits{MemoryBytes: page, PIDs: -1}, false},
		{"CPU below the kernel's least quota", Limits{MemoryBytes: page, PIDs: 1, CPUMillis: MinCPUMillis - 1}, false},
		{"negative CPU", Limits{MemoryBytes: page, PIDs: 1, CPUMillis: -1000}, false},
		{"CPU overflowing the quota", Limits{MemoryBytes: page, PIDs: 1, CPUMillis: math.MaxInt64}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.lim.check(page)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("%+v.check() = %v, want ok: %v (or ErrInvalid)", tc.lim, err, tc.ok)
			}
		})
	}
	err := Limits{MemoryBytes: 1, PIDs: 0, CPUMillis: 1}.check(page)
	if want := "cgroup: invalid argument: MemoryBytes 1 is not a multiple of the page size 4096; PIDs 0 is not positive; CPUMillis 1 is outside [10, 92233720368547] and not 0"; err == nil || err.Error() != want {
		t.Errorf("check() = %v, want every problem named: %q", err, want)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"cordon/acme/run-42", true},
		{"a", true},
		{"a.b_c-D9", true},
		{"", false},
		{"/abs", false},
		{"trailing/", false},
		{"a//b", false},
		{"../up", false},
		{"a/../b", false},
		{"a/./b", false},
		{".hidden", false},
		{"sp ace", false},
		{"new\nline", false},
		{"colon:x", false},
		{"é", false},
		{selfLeaf, false},
		{selfLeaf + "/x", false},
		{"x/" + selfLeaf, true}, // only the first component can clash
		{string(make([]byte, 256)), false},
	} {
		err := checkPath(tc.path)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("checkPath(%q) = %v, want ok: %v (or ErrInvalid)", tc.path, err, tc.ok)
		}
	}
}

func TestNewRefusesInvalid(t *testing.T) {
	if _, err := New("../x", Limits{MemoryBytes: 1 << 20, PIDs: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New(../x) = %v, want ErrInvalid", err)
	}
	if _, err := New("x", Limits{MemoryBytes: 1 << 20}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New without a pids limit = %v, want ErrInvalid", err)
	}
}
