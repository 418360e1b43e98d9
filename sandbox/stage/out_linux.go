package stage

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// tempPrefix starts the name of every temporary entry Out creates in the
// workspace.
const tempPrefix = ".cordon-out-"

// testHookMove, if set, is called before each move of the commit phase; an
// error it returns is taken as that move's failure.
var testHookMove func(i int) error

// wsDir is a workspace directory an output goes into.
type wsDir struct {
	fd int
	// fresh: Out created the directory, inside a temporary tree that is not
	// yet in place, so entries go straight to their final names.
	fresh bool
}

// made is an entry Out created in the workspace, to remove on failure.
type made struct {
	dir   int
	name  string
	rmdir bool
}

// move puts a temporary entry in place in the commit phase.
type move struct {
	dir       int
	tmp, name string
	path      string
	// exchange: something is at name (a regular file or a symlink) and is
	// swapped to tmp, to be removed after the commit or swapped back on
	// failure. Otherwise nothing may be at name.
	exchange bool
}

// plan holds what Out prepared in the workspace before it commits.
type plan struct {
	ws int
	b  budget
	// owner is who gets what Out creates, when this process may give
	// files away (it runs as root): the workspace's owner, or a replaced
	// file's owner. Otherwise chown is false and files stay this
	// process's.
	owner struct{ uid, gid int }
	chown bool
	dirs  map[string]wsDir
	made  []made
	moves []move
	fds   []int
	files []File
}

func out(staging, workspace *os.File, outputs []string, lim Limits, present bool) ([]File, error) {
	root, err := checkRoot(staging, "staging")
	if err != nil {
		return nil, err
	}
	ws, err := checkRoot(workspace, "workspace")
	if err != nil {
		return nil, err
	}
	pl := &plan{ws: ws, b: budget{lim: lim}, dirs: map[string]wsDir{}}
	if os.Geteuid() == 0 {
		var wst unix.Stat_t
		if err := unix.Fstat(ws, &wst); err != nil {
			return nil, &PathError{Path: ".", Reason: "stat the workspace", Err: err}
		}
		pl.chown = true
		pl.owner.uid, pl.owner.gid = int(wst.Uid), int(wst.Gid)
	}
	defer pl.close()
	for _, p := range outputs {
		src, st, err := openSource(root, p, p, "staging")
		if present && errors.Is(err, ErrMissing) {
			continue
		}
		if err != nil {
			return nil, pl.abort(err)
		}
		if present && isDir(&st) {
			src.Close()
			return nil, pl.abort(refuse(p, "is a directory; only a regular file may be returned at a declared path"))
		}
		err = pl.add(src, &st, p, 0)
		src.Close()
		if err != nil {
			return nil, pl.abort(err)
		}
	}
	if err := pl.commit(); err != nil {
		return nil, err
	}
	slices.SortFunc(pl.files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return pl.files, pl.dropOld()
}

func (pl *plan) close() {
	for _, fd := range pl.fds {
		unix.Close(fd)
	}
}

// add copies src, opened from the staging path p, to a temporary entry in
// the workspace, recursively for a directory; depth is how far p is
// beneath a declared output.
func (pl *plan) add(src *os.File, st *unix.Stat_t, p string, depth int) error {
	if err := pl.b.entry(p); err != nil {
		return err
	}
	if !isDir(st) {
		return pl.file(src, st, p)
	}
	if depth >= maxDepth {
		return &PathError{Path: p, Reason: fmt.Sprintf("nested deeper than %d", maxDepth), Err: ErrLimit}
	}
	if _, err := pl.dir(p); err != nil {
		return err
	}
	return eachChild(src, p, "staging", func(c *os.File, cst *unix.Stat_t, _, q string) error {
		return pl.add(c, cst, q, depth+1)
	}, nil)
}

// dir returns the workspace directory d. If it does not exist, it is
// created in a temporary tree whose top is moved into place at commit.
func (pl *plan) dir(d string) (wsDir, error) {
	if d == "." {
		return wsDir{fd: pl.ws}, nil
	}
	if wd, ok := pl.dirs[d]; ok {
		return wd, nil
	}
	up, err := pl.dir(path.Dir(d))
	if err != nil {
		return wsDir{}, err
	}
	name := path.Base(d)
	var wd wsDir
	if up.fresh {
		fd, err := mkdirOpen(up.fd, name, 0o755)
		if err != nil {
			return wsDir{}, &PathError{Path: d, Reason: "create directory in the workspace", Err: err}
		}
		pl.made = append(pl.made, made{dir: up.fd, name: name, rmdir: true})
		if err := pl.giveAway(fd, d); err != nil {
			unix.Close(fd)
			return wsDir{}, err
		}
		wd = wsDir{fd: fd, fresh: true}
	} else {
		fd, err := openat2(up.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		switch err {
		case nil:
			wd = wsDir{fd: fd}
		case unix.ENOENT:
			tmp, fd, err := pl.tempDir(up.fd, d)
			if err != nil {
				return wsDir{}, err
			}
			pl.moves = append(pl.moves, move{dir: up.fd, tmp: tmp, name: name, path: d})
			wd = wsDir{fd: fd, fresh: true}
		default:
			return wsDir{}, lookupErr(d, "the workspace", err)
		}
	}
	pl.fds = append(pl.fds, wd.fd)
	pl.dirs[d] = wd
	return wd, nil
}

// tempName returns a name for a temporary entry.
func tempName() string { return tempPrefix + rand.Text() }

// createTemp calls create with new temporary names until one is free.
func createTemp[T any](create func(name string) (T, error)) (string, T, error) {
	for range 100 {
		name := tempName()
		v, err := create(name)
		if err != unix.EEXIST {
			return name, v, err
		}
	}
	var zero T
	return "", zero, unix.EEXIST
}

// giveAway gives the directory fd, created for the workspace directory d,
// to the workspace's owner when this process runs as root.
func (pl *plan) giveAway(fd int, d string) error {
	if !pl.chown {
		return nil
	}
	if err := unix.Fchown(fd, pl.owner.uid, pl.owner.gid); err != nil {
		return &PathError{Path: d, Reason: "chown in the workspace", Err: err}
	}
	return nil
}

// tempDir creates a temporary directory in dir, for the workspace
// directory d.
func (pl *plan) tempDir(dir int, d string) (string, int, error) {
	name, fd, err := createTemp(func(name string) (int, error) { return mkdirOpen(dir, name, 0o755) })
	if err != nil {
		return "", -1, &PathError{Path: d, Reason: "create directory in the workspace", Err: err}
	}
	if err := pl.giveAway(fd, d); err != nil {
		unix.Close(fd)
		unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		return "", -1, err
	}
	pl.made = append(pl.made, made{dir: dir, name: name, rmdir: true})
	return name, fd, nil
}

// file copies the regular file src, from the staging path p, to a
// temporary file in its workspace directory.
func (pl *plan) file(src *os.File, st *unix.Stat_t, p string) error {
	wd, err := pl.dir(path.Dir(p))
	if err != nil {
		return err
	}
	name := path.Base(p)
	perm := uint32(0o644)
	uid, gid := pl.owner.uid, pl.owner.gid
	exists := false
	if !wd.fresh {
		old, err := lstatAt(wd.fd, name)
		switch {
		case err == unix.ENOENT:
		case err != nil:
			return lookupErr(p, "the workspace", err)
		default:
			switch old.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				perm = old.Mode & 0o777
				uid, gid = int(old.Uid), int(old.Gid)
			case unix.S_IFLNK:
				// Replaced by the rename, never followed.
			default:
				return refuse(p, kind(old.Mode)+" in the workspace")
			}
			exists = true
		}
	}
	// In a fresh directory the file gets its final name at once.
	tmp := name
	var dst *os.File
	if wd.fresh {
		dst, err = createFile(wd.fd, name)
	} else {
		tmp, dst, err = createTemp(func(name string) (*os.File, error) { return createFile(wd.fd, name) })
	}
	if err != nil {
		return &PathError{Path: p, Reason: "create in the workspace", Err: err}
	}
	pl.made = append(pl.made, made{dir: wd.fd, name: tmp})
	f, err := pl.b.copyFile(dst, src, st, p)
	if err == nil {
		if cerr := unix.Fchmod(int(dst.Fd()), perm); cerr != nil {
			err = &PathError{Path: p, Reason: "chmod in the workspace", Err: cerr}
		}
	}
	if err == nil && pl.chown {
		if cerr := unix.Fchown(int(dst.Fd()), uid, gid); cerr != nil {
			err = &PathError{Path: p, Reason: "chown in the workspace", Err: cerr}
		}
	}
	if err == nil {
		if serr := dst.Sync(); serr != nil {
			err = &PathError{Path: p, Reason: "sync in the workspace", Err: serr}
		}
	}
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = &PathError{Path: p, Reason: "close in the workspace", Err: cerr}
	}
	if err != nil {
		return err
	}
	if !wd.fresh {
		pl.moves = append(pl.moves, move{dir: wd.fd, tmp: tmp, name: name, path: p, exchange: exists})
	}
	pl.files = append(pl.files, f)
	return nil
}

// commit makes every move; if one fails, it undoes those made and removes
// every temporary entry.
func (pl *plan) commit() error {
	for i, m := range pl.moves {
		var err error
		if testHookMove != nil {
			err = testHookMove(i)
		}
		if err == nil {
			err = m.do()
		}
		if err != nil {
			err = &PathError{Path: m.path, Reason: "move into place in the workspace", Err: err}
			for j := i - 1; j >= 0; j-- {
				if uerr := pl.moves[j].undo(); uerr != nil {
					err = errors.Join(err, &PathError{
						Path:   pl.moves[j].path,
						Reason: "WORKSPACE LEFT CHANGED: could not undo the move into place",
						Err:    uerr,
					})
				}
			}
			return pl.abort(err)
		}
	}
	return nil
}

func (m move) do() error {
	if m.exchange {
		return unix.Renameat2(m.dir, m.tmp, m.dir, m.name, unix.RENAME_EXCHANGE)
	}
	return unix.Renameat2(m.dir, m.tmp, m.dir, m.name, unix.RENAME_NOREPLACE)
}

func (m move) undo() error {
	if m.exchange {
		return unix.Renameat2(m.dir, m.tmp, m.dir, m.name, unix.RENAME_EXCHANGE)
	}
	return unix.Renameat2(m.dir, m.name, m.dir, m.tmp, unix.RENAME_NOREPLACE)
}

// abort removes every temporary entry, newest first, and returns err with
// any failure to remove one joined to it.
func (pl *plan) abort(err error) error {
	for i := len(pl.made) - 1; i >= 0; i-- {
		m := pl.made[i]
		flags := 0
		if m.rmdir {
			flags = unix.AT_REMOVEDIR
		}
		if uerr := unix.Unlinkat(m.dir, m.name, flags); uerr != nil {
			err = errors.Join(err, fmt.Errorf("stage: removing temporary %q from the workspace: %w", m.name, uerr))
		}
	}
	pl.made = nil
	return err
}

// dropOld removes, after a commit, the old files and symlinks the
// exchanges moved to temporary names.
func (pl *plan) dropOld() error {
	var err error
	for _, m := range pl.moves {
		if !m.exchange {
			continue
		}
		if uerr := unix.Unlinkat(m.dir, m.tmp, 0); uerr != nil {
			err = errors.Join(err, &PathError{
				Path:   m.path,
				Reason: fmt.Sprintf("output in place, but its old copy is left at %q", m.tmp),
				Err:    uerr,
			})
		}
	}
	return err
}
