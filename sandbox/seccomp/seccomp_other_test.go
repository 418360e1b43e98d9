//go:build !linux

package seccomp

import (
	"errors"
	"testing"
)

func TestUnsupported(t *testing.T) {
	if err := Install(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Install() = %v, want errors.ErrUnsupported", err)
	}
	if err := Supported(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Supported() = %v, want errors.ErrUnsupported", err)
	}
}
