//go:build !linux

package cgroup

import (
	"errors"
	"testing"
)

func TestUnsupported(t *testing.T) {
	if err := Probe(); !errors.Is(err, ErrUnavailable) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Probe() = %v, want ErrUnavailable and errors.ErrUnsupported", err)
	}
	if g, err := New("cordon/x", Limits{MemoryBytes: 1 << 20, PIDs: 1}); g != nil || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("New() = %v, %v, want nil and errors.ErrUnsupported", g, err)
	}
}
