package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/internal/flock"
)

// openBox opens WORKSPACE/.cordon/mailbox, creating both directories
// (0700) when create is set. Without create, a missing directory is an
// error that wraps os.ErrNotExist.
func openBox(workspace string, create bool) (*box, error) {
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("mailbox: workspace %q: %w: not an absolute path; give the full path", workspace, ErrInvalid)
	}
	ws, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("mailbox: workspace: %w", err)
	}
	defer ws.Close()
	top, err := openDir(ws, filepath.Join(workspace, dirName), dirName, create)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	name := filepath.Join(workspace, dirName, boxName)
	dir, err := openDir(top, name, boxName, create)
	if err != nil {
		return nil, err
	}
	return &box{dir: dir, name: name}, nil
}

// openDir opens the directory name in parent (path names it in errors),
// creating it first when create is set. It refuses anything but a real
// directory: the entry is checked with Lstat, and what got opened must be
// the same directory, so a link swapped in between is refused too.
func openDir(parent *os.Root, path, name string, create bool) (*os.Root, error) {
	if create {
		// Mkdir never follows a link at name: it fails with EEXIST.
		if err := parent.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("mailbox: create %s: %w", path, err)
		}
	}
	lst, err := parent.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	if !lst.IsDir() {
		return nil, unsafeType(path, lst.Mode(), "directory")
	}
	dir, err := parent.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	st, err := dir.Stat(".")
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	if !os.SameFile(lst, st) {
		dir.Close()
		return nil, unsafeSwapped(path)
	}
	return dir, nil
}

// openFile opens the regular file name in b with flag (os.O_RDONLY, or
// os.O_RDWR|os.O_APPEND), creating it (0600) when create is set. It
// refuses a symbolic link, a special file (never opened in a way that
// blocks), a file with other hard links, or a file swapped between the
// check and the open.
func (b *box) openFile(name string, flag int, create bool) (*os.File, error) {
	path := b.path(name)
	if create {
		// O_CREATE|O_EXCL never follows a link at name.
		f, err := b.dir.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			if err := checkOpened(f, nil, path); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("mailbox: create %s: %w", path, err)
		}
	}
	lst, err := b.dir.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	if !lst.Mode().IsRegular() {
		return nil, unsafeType(path, lst.Mode(), "regular file")
	}
	f, err := b.dir.OpenFile(name, flag|flock.NonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("mailbox: open %s: %w", path, err)
	}
	if err := checkOpened(f, lst, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkOpened requires f to be a regular file with one link and, when lst
// is not nil, the file lst describes.
func checkOpened(f *os.File, lst os.FileInfo, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	if lst != nil && !os.SameFile(lst, st) {
		return unsafeSwapped(path)
	}
	if !st.Mode().IsRegular() {
		return unsafeType(path, st.Mode(), "regular file")
	}
	n, err := nlink(st)
	if err != nil {
		return fmt.Errorf("mailbox: %s: %w", path, err)
	}
	if n != 1 {
		return fmt.Errorf("mailbox: %s: %w: it has %d hard links; remove the other links (or the file) and retry", path, ErrUnsafe, n)
	}
	return nil
}

func unsafeType(path string, mode fs.FileMode, want string) error {
	return fmt.Errorf("mailbox: %s: %w: a %s, want a %s; remove it and retry", path, ErrUnsafe, kind(mode), want)
}

func unsafeSwapped(path string) error {
	return fmt.Errorf("mailbox: %s: %w: it changed while being opened; check who else writes the workspace", path, ErrUnsafe)
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
