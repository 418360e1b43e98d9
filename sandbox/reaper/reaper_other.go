//go:build !linux

package reaper

import (
	"errors"
	"fmt"
	"runtime"
)

var errNotLinux = fmt.Errorf("reaper: %s: %w", runtime.GOOS, errors.ErrUnsupported)

// Self is not supported on this system.
func Self() (Owner, error) { return Owner{}, errNotLinux }

// Alive is not supported on this system.
func (o Owner) Alive() (bool, error) { return false, errNotLinux }

// Begin is not supported on this system.
func Begin(string, *Run) (func(), error) { return nil, errNotLinux }

// End is not supported on this system.
func End(string, *Run) error { return errNotLinux }

// Sweep is not supported on this system: no sandbox runs here.
func Sweep(string, Options) (*Report, error) { return nil, errNotLinux }
