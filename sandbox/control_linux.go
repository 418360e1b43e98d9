package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
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

// maxDigestEntries bounds the entries OutputsDigest reads.
const maxDigestEntries = 100_000

// outputsDigest is the ContentId of the JCS object that maps each path
// of the run's outputs tree in its /work — the declared outputs, or all
// of /work when none is declared — to "dir", "link:TARGET", "file:ID"
// (the ContentId of its bytes), "other:MODE" or, for a declared output
// that is not there, "absent". It is read through an os.Root on /work,
// so that no link leads it outside; only regular files are opened.
func (sb *Sandbox) outputsDigest() (canon.ID, error) {
	if sb.work == nil {
		return canon.ID{}, fmt.Errorf("run %s: no /work to digest", sb.runID)
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(sb.work.Fd())))
	if err != nil {
		return canon.ID{}, fmt.Errorf("run %s: opening /work: %w", sb.runID, err)
	}
	defer root.Close()
	tree := map[string]string{}
	walk := func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != "." && errors.Is(err, fs.ErrNotExist) {
				tree[p] = "absent"
				return nil
			}
			return err
		}
		if len(tree) >= maxDigestEntries {
			return fmt.Errorf("more than %d entries", maxDigestEntries)
		}
		switch t := d.Type(); {
		case t.IsDir():
			tree[p] = "dir"
		case t&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			tree[p] = "link:" + target
		case t.IsRegular():
			f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			id, err := canon.SumReader(f)
			f.Close()
			if err != nil {
				return err
			}
			tree[p] = "file:" + id.String()
		default:
			tree[p] = "other:" + t.String()
		}
		return nil
	}
	paths := sb.spec.Outputs
	if len(paths) == 0 {
		paths = []string{"."}
	}
	for _, p := range paths {
		if err := fs.WalkDir(root.FS(), p, walk); err != nil {
			return canon.ID{}, fmt.Errorf("run %s: digesting the outputs at %s: %w", sb.runID, p, err)
		}
	}
	doc, err := json.Marshal(map[string]any{"type": "cordon.outputs-tree.v1", "tree": tree})
	if err != nil {
		return canon.ID{}, fmt.Errorf("run %s: the outputs tree: %w", sb.runID, err)
	}
	c, err := canon.JCS(doc)
	if err != nil {
		return canon.ID{}, fmt.Errorf("run %s: the outputs tree: %w", sb.runID, err)
	}
	return canon.Sum(c), nil
}
