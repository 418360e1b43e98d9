//go:build !linux

package sandbox

import (
	"os"
	"path/filepath"
)

// imageRoot is Linux only (image_linux.go): elsewhere a plan never has
// one, and the runtime is the host's.
type imageRoot struct{}

func lstatRuntime(_ *fsPlan, p string) error {
	_, err := os.Lstat(p)
	return err
}

func evalRuntime(_ *fsPlan, p string) (string, error) { return filepath.EvalSymlinks(p) }

func openRuntime(_ *fsPlan, p string) (*os.File, error) { return os.Open(p) }
