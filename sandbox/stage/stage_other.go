//go:build !linux

package stage

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// in and out need openat2(2), which only Linux has.

func in(workspace, staging *os.File, inputs []string, own Owner, lim Limits) ([]File, error) {
	return nil, fmt.Errorf("stage: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func out(staging, workspace *os.File, outputs []string, lim Limits, present bool) ([]File, error) {
	return nil, fmt.Errorf("stage: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
