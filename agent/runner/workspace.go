package runner

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/internal/flock"
)

// Limits on what a tool moves between the workspace and the model.
const (
	MaxReadBytes  = 256 << 10 // a file the read tool returns
	MaxWriteBytes = 1 << 20   // content the write tool accepts
	maxListing    = 1000      // entries of a directory the read tool lists
)

// errLink marks a path that crosses a symbolic link, a hard-linked file or
// a file of another kind: the runner never follows or reads through one.
var errLink = errors.New("not a plain file or directory")

// workspace reads and writes workspace paths that manifest.CheckPath has
// accepted, through an os.Root (so nothing resolves outside the
// workspace) and with every component checked not to be a symbolic link,
// so that no link inside the workspace can lead a tool into .cordon or
// to a file the manifest does not name. The workspace is the operator's;
// the runner assumes no other process changes it during a run.
type workspace struct {
	dir  string
	root *os.Root
}

func openWorkspace(dir string) (*workspace, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory (a symbolic link is not followed)", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return &workspace{dir: dir, root: r}, nil
}

func (w *workspace) Close() error { return w.root.Close() }

// lstat checks each component of p and returns the last one's info.
// Missing components give an error wrapping fs.ErrNotExist.
func (w *workspace) lstat(p string) (fs.FileInfo, error) {
	parts := strings.Split(p, "/")
	var fi fs.FileInfo
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		var err error
		if fi, err = w.root.Lstat(q); err != nil {
			return nil, err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("%s: a symbolic link: %w", q, errLink)
		case i < len(parts)-1 && !fi.IsDir():
			return nil, fmt.Errorf("%s: not a directory: %w", q, errLink)
		}
	}
	return fi, nil
}

// ReadFile reads the regular file at the workspace path p (checked by
// manifest.CheckPath first) without following any symbolic link, as the
// read tool does, up to limit bytes. cordon run reads a replay script
// with it.
func ReadFile(workspace, p string, limit int64) ([]byte, error) {
	if err := manifest.CheckPath(p); err != nil {
		return nil, err
	}
	w, err := openWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return w.readFile(p, limit)
}

// read returns a regular file's content, or a directory's listing (one
// name per line, "/" after directories).
func (w *workspace) read(p string) (string, error) {
	fi, err := w.lstat(p)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return w.list(p)
	}
	b, err := w.readFile(p, MaxReadBytes)
	return string(b), err
}

func (w *workspace) readFile(p string, limit int64) ([]byte, error) {
	fi, err := w.lstat(p)
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: a %s: %w", p, fi.Mode().Type(), errLink)
	case links(fi) > 1:
		return nil, fmt.Errorf("%s: has %d hard links: %w", p, links(fi), errLink)
	case fi.Size() > limit:
		return nil, fmt.Errorf("%s: %d bytes, more than the limit of %d", p, fi.Size(), limit)
	}
	f, err := w.root.OpenFile(p, os.O_RDONLY|flock.NoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if g, err := f.Stat(); err != nil || !os.SameFile(fi, g) {
		return nil, fmt.Errorf("%s: changed while it was opened", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the limit of %d bytes", p, limit)
	}
	return b, nil
}

func (w *workspace) list(p string) (string, error) {
	f, err := w.root.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ents, err := f.ReadDir(maxListing + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if len(ents) > maxListing {
		return "", fmt.Errorf("%s: more than %d entries; read a narrower path", p, maxListing)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
			n += "/"
		case e.Type()&fs.ModeSymlink != 0:
			n += " (symbolic link: not readable)"
		case !e.Type().IsRegular():
			n += " (" + e.Type().String() + ": not readable)"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, "\n"), nil
}

// write replaces (or creates) the regular file at p with data: a new file
// written beside it, synced, then renamed over it. Missing parent
// directories are created; an existing p must be a single-link regular
// file.
func (w *workspace) write(p string, data []byte) error {
	dir := path.Dir(p)
	if dir != "." {
		parts := strings.Split(dir, "/")
		for i := range parts {
			q := strings.Join(parts[:i+1], "/")
			fi, err := w.root.Lstat(q)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if err := w.root.Mkdir(q, 0o755); err != nil {
					return err
				}
			case err != nil:
				return err
			case fi.Mode()&fs.ModeSymlink != 0:
				return fmt.Errorf("%s: a symbolic link: %w", q, errLink)
			case !fi.IsDir():
				return fmt.Errorf("%s: not a directory: %w", q, errLink)
			}
		}
	}
	perm := fs.FileMode(0o644)
	fi, err := w.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: a %s, not a regular file: %w", p, fi.Mode().Type(), errLink)
	case links(fi) > 1:
		return fmt.Errorf("%s: has %d hard links: %w", p, links(fi), errLink)
	default:
		perm = fi.Mode().Perm() &^ 0o7000
	}
	tmp := path.Join(dir, ".cordon-write-"+rand.Text())
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|flock.NoFollow, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, p)
	}
	if err != nil {
		w.root.Remove(tmp)
		return err
	}
	return nil
}

// exists reports whether p names something (a link included).
func (w *workspace) exists(p string) bool {
	_, err := w.root.Lstat(p)
	return err == nil
}
