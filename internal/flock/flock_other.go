//go:build !unix

package flock

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

func lock(f *os.File) error {
	return fmt.Errorf("flock on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func tryLock(f *os.File) error { return lock(f) }

func unlock(f *os.File) error { return lock(f) }

const (
	noFollow = 0
	nonBlock = 0
)
