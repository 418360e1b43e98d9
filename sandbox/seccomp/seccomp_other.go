//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
)

// Install returns an error wrapping errors.ErrUnsupported: seccomp is a
// Linux facility.
func Install() error {
	return fmt.Errorf("seccomp: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Supported returns an error wrapping errors.ErrUnsupported: seccomp is a
// Linux facility.
func Supported() error {
	return fmt.Errorf("seccomp: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
