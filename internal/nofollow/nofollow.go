// Package nofollow opens and reads files that must be what they claim:
// regular files reached without following a symbolic link at the last
// component, and without blocking on a FIFO planted in their place. The
// runner and the run record's verifier read the state directory through
// it.
package nofollow

import (
	"fmt"
	"io"
	"os"

	"github.com/cordon-dev/cordon/internal/flock"
)

// Open opens name read-only; a symbolic link, FIFO, directory or other
// non-regular file is refused.
func Open(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|flock.NoFollow|flock.NonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return f, nil
}

// Read reads a regular file of at most limit bytes, as Open opens it.
func Read(name string, limit int64) ([]byte, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return b, nil
}

// Describe names a file mode for an error message: "a directory", "a
// symbolic link", …
func Describe(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
