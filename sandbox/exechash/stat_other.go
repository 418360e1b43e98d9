//go:build !linux

package exechash

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

func stat(f *os.File) (key, bool, error) {
	return key{}, false, fmt.Errorf("exechash on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
