package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/sandbox/cgroup"
)

// The Sandbox is a Control's runHandle (control.go) while its program
// runs. Control serializes these calls; Wait's select reads the timer
// concurrently, which time.Timer allows.

func (sb *Sandbox) id() string { return sb.runID }

func (sb *Sandbox) freeze() ([]int, int64, error) {
	if sb.cg == nil {
		return nil, 0, fmt.Errorf("%w: run %s has no cgroup (a rootless run without a delegated cgroup v2 subtree), and only a cgroup can be frozen", ErrUnavailable, sb.runID)
	}
	if err := sb.cg.Freeze(); err != nil {
		return nil, 0, fmt.Errorf("run %s: %w", sb.runID, err)
	}
	// Pause the wall clock. A timer that has fired already means the
	// limit passed before the freeze: thaw, and let Wait kill the run.
	if !sb.deadline.Stop() {
		return nil, 0, errors.Join(fmt.Errorf("run %s: the wall-clock limit passed before the freeze", sb.runID), sb.cg.Thaw())
	}
	// Remember what was left of the limit, for the thaw.
	sb.wallLeft = max(time.Until(sb.wallEnds), 0)
	pids, err := sb.cg.Procs()
	var st cgroup.Stats
	if err == nil {
		st, err = sb.cg.Stats()
	}
	if err == nil && len(pids) == 0 {
		// Init has not forked the program into the group yet (or it has
		// ended): there is nothing to freeze.
		err = fmt.Errorf("%w: run %s has no process in its cgroup yet", ErrNotRunning, sb.runID)
	}
	if err != nil {
		return nil, 0, errors.Join(err, sb.thaw())
	}
	return pids, st.CPUNanos, nil
}

func (sb *Sandbox) thaw() error {
	if err := sb.cg.Thaw(); err != nil {
		return fmt.Errorf("run %s: %w", sb.runID, err)
	}
	sb.wallEnds = time.Now().Add(sb.wallLeft)
	sb.deadline.Reset(sb.wallLeft)
	return nil
}

// MaxDigestEntries bounds the entries of the outputs tree a freeze (or a
// thaw) digests. A run whose tree has more cannot be frozen: the freeze
// is refused, saying so.
const MaxDigestEntries = 100_000

// MaxDigestDepth bounds how deep under /work the outputs digest goes
// (each level holds a directory open). A deeper tree cannot be frozen.
const MaxDigestDepth = 256

// digestBatch is how many directory entries are read at a time, so that
// the entry bound holds within one huge directory too.
const digestBatch = 1024

// outputsTreeType heads the outputs digest's encoding (SPEC §9.5).
const outputsTreeType = "cordon.outputs-tree.v2"

// outputsDigest is the outputs digest (SPEC §9.5) of the run's outputs
// tree in its /work — the declared outputs, or all of /work when none is
// declared. It is a digest of metadata, not of bytes: while the run is
// frozen none of its processes can change anything, so it guards against
// changes made from outside during the freeze, and every change of a
// file's bytes by an unprivileged writer moves its ctime, which cannot be
// set back. Each entry records its path (exact bytes), its full st_mode
// (type, permission, setuid/setgid/sticky), uid, gid, size, mtime and
// ctime in ns, device, inode, link count and rdev, and a link's target:
// links are never followed (a declared output that is a link, or that
// lies under one, is recorded as that link). A declared output that is
// not there is recorded absent. The walk goes through an os.Root on
// /work, reads no file's bytes, stops at MaxDigestEntries entries (an
// error) and when the run ends or its Control is detached.
func (sb *Sandbox) outputsDigest() (canon.ID, error) {
	if sb.work == nil {
		return canon.ID{}, fmt.Errorf("run %s: no /work to digest", sb.runID)
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(sb.work.Fd())))
	if err != nil {
		return canon.ID{}, fmt.Errorf("run %s: opening /work: %w", sb.runID, err)
	}
	defer root.Close()
	w := &digestWalk{root: root, entries: map[string][]byte{}}
	if sb.ctx != nil {
		w.done = sb.ctx.Done()
	}
	if sb.spec != nil && sb.spec.Control != nil {
		w.ended = sb.spec.Control.ending
	}
	paths := []string{"."}
	if sb.spec != nil && len(sb.spec.Outputs) > 0 {
		paths = sb.spec.Outputs
	}
	for _, p := range paths {
		if err := w.output(p); err != nil {
			return canon.ID{}, fmt.Errorf("run %s: digesting the outputs at %q: %w", sb.runID, p, err)
		}
	}
	return w.sum(), nil
}

// digestWalk is one outputs digest's walk.
type digestWalk struct {
	root    *os.Root
	done    <-chan struct{} // the run's context
	ended   <-chan struct{} // the Control's run has ended
	entries map[string][]byte
}

func (w *digestWalk) check() error {
	select {
	case <-w.done:
		return errDigestStopped
	case <-w.ended:
		return errDigestStopped
	default:
	}
	if len(w.entries) > MaxDigestEntries {
		return fmt.Errorf("the outputs tree has more than %d entries, the most a freeze digests: this run cannot be frozen (declare fewer or smaller outputs with --out)", MaxDigestEntries)
	}
	return nil
}

// output records the declared output p: each of its parents, up to the
// first that is not a directory (a link is recorded, not followed), and
// then p and, if it is a directory, the tree under it.
func (w *digestWalk) output(p string) error {
	p = path.Clean(p)
	if p == "." {
		fi, err := w.root.Lstat(".")
		if err != nil {
			return err
		}
		if err := w.add(".", fi, w.root, "."); err != nil {
			return err
		}
		return w.dir(w.root, ".", 0)
	}
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		fi, err := w.root.Lstat(q)
		if errors.Is(err, fs.ErrNotExist) {
			w.entries[q] = []byte{'a'} // absent
			return w.check()
		}
		if err != nil {
			return err
		}
		if err := w.add(q, fi, w.root, q); err != nil {
			return err
		}
		if !fi.IsDir() {
			return nil // a link or a file: nothing lies under it
		}
	}
	sub, err := w.root.OpenRoot(p)
	if err != nil {
		return err
	}
	defer sub.Close()
	return w.dir(sub, p, strings.Count(p, "/")+1)
}

// dir records every entry under the directory d, whose path is p; a
// directory is opened as a Root of its own, so that each entry is
// reached by its one name, and never through a link.
func (w *digestWalk) dir(d *os.Root, p string, depth int) error {
	if depth > MaxDigestDepth {
		return fmt.Errorf("the outputs tree is more than %d directories deep, the most a freeze digests: this run cannot be frozen (declare shallower outputs with --out)", MaxDigestDepth)
	}
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	var subdirs []string
	for {
		ents, rerr := f.ReadDir(digestBatch)
		for _, e := range ents {
			n := e.Name()
			q := n
			if p != "." {
				q = p + "/" + n
			}
			fi, err := d.Lstat(n)
			if err == nil {
				err = w.add(q, fi, d, n)
			}
			if err != nil {
				f.Close()
				return err
			}
			if fi.IsDir() {
				subdirs = append(subdirs, n)
			}
		}
		if rerr == io.EOF || (rerr == nil && len(ents) == 0) {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	f.Close()
	for _, n := range subdirs {
		q := n
		if p != "." {
			q = p + "/" + n
		}
		sub, err := d.OpenRoot(n)
		if err != nil {
			return err
		}
		err = w.dir(sub, q, depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// add records the entry p from its lstat; name is its name in d, to
// read a link's target.
func (w *digestWalk) add(p string, fi fs.FileInfo, d *os.Root, name string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no stat of the entry", p)
	}
	b := make([]byte, 0, 96)
	b = append(b, 'e')
	b = binary.BigEndian.AppendUint32(b, st.Mode)
	b = binary.BigEndian.AppendUint32(b, st.Uid)
	b = binary.BigEndian.AppendUint32(b, st.Gid)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(st.Mtim.Nano()))
	b = binary.BigEndian.AppendUint64(b, uint64(st.Ctim.Nano()))
	b = binary.BigEndian.AppendUint64(b, uint64(st.Dev))
	b = binary.BigEndian.AppendUint64(b, st.Ino)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Nlink))
	b = binary.BigEndian.AppendUint64(b, uint64(st.Rdev))
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := d.Readlink(name)
		if err != nil {
			return err
		}
		b = binary.AppendUvarint(b, uint64(len(target)))
		b = append(b, target...)
	}
	w.entries[p] = b
	return w.check()
}

// sum is the digest of the entries: the ContentId of the type's name and
// a newline, then, for each entry in the byte order of its path, the
// path's length (uvarint), the path's bytes and the entry's record.
func (w *digestWalk) sum() canon.ID {
	paths := make([]string, 0, len(w.entries))
	for p := range w.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b := append([]byte(outputsTreeType), '\n')
	for _, p := range paths {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = append(b, w.entries[p]...)
	}
	return canon.Sum(b)
}
