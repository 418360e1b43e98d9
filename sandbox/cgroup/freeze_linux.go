package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// freezeTimeout is FreezeTimeout; tests shorten it.
var freezeTimeout = FreezeTimeout

// freezer returns the file that freezes the group, or an error wrapping
// ErrUnavailable that says what to enable.
func (g *Group) freezer() (string, error) {
	if g.version == 2 {
		f := filepath.Join(g.dirs[0], "cgroup.freeze")
		if !exists(f) {
			return "", fmt.Errorf("%w: cgroup %q: no cgroup.freeze in %s: the v2 freezer needs Linux 5.2 or later", ErrUnavailable, g.name, g.dirs[0])
		}
		return f, nil
	}
	dir := g.ctl["freezer"]
	f := filepath.Join(dir, "freezer.state")
	if dir == "" || !exists(f) {
		return "", fmt.Errorf("%w: cgroup %q: no freezer.state (in %q): mount the v1 freezer hierarchy (CONFIG_CGROUP_FREEZER) beside memory and pids", ErrUnavailable, g.name, dir)
	}
	return f, nil
}

func (g *Group) freeze() error {
	file, err := g.freezer()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(freezeTimeout)
	if g.version == 2 {
		if err := g.fs.write(file, "1"); err != nil {
			return fmt.Errorf("cgroup: freeze %q: %w", g.name, err)
		}
		ok, err := waitUntil(deadline, func() (bool, error) { return g.frozenV2(1) })
		if err == nil && ok {
			return nil
		}
		back := g.fs.write(file, "0") // never leave a group half frozen
		if err == nil {
			err = fmt.Errorf("cgroup.events of %s does not read frozen 1 after %v", g.dirs[0], freezeTimeout)
		}
		return fmt.Errorf("cgroup: freeze %q: %w", g.name, errors.Join(err, back))
	}
	// FREEZING means some task has not stopped yet: freezeV1 writes
	// FROZEN again (and thaws for a moment now and then) until the state
	// reads FROZEN or the deadline passes.
	if err := g.freezeV1(deadline); err != nil {
		return fmt.Errorf("cgroup: freeze %q: %w", g.name, err)
	}
	state, err := readState(file)
	if err == nil && state == "FROZEN" {
		return nil
	}
	back := g.fs.write(file, "THAWED")
	if err == nil {
		err = fmt.Errorf("%s reads %s, not FROZEN, after %v", file, state, freezeTimeout)
	}
	return fmt.Errorf("cgroup: freeze %q: %w", g.name, errors.Join(err, back))
}

func (g *Group) thaw() error {
	file, err := g.freezer()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(freezeTimeout)
	if g.version == 2 {
		if err := g.fs.write(file, "0"); err != nil {
			return fmt.Errorf("cgroup: thaw %q: %w", g.name, err)
		}
		ok, err := waitUntil(deadline, func() (bool, error) { return g.frozenV2(0) })
		if err == nil && !ok {
			err = fmt.Errorf("cgroup.events of %s does not read frozen 0 after %v", g.dirs[0], freezeTimeout)
		}
		if err != nil {
			return fmt.Errorf("cgroup: thaw %q: %w", g.name, err)
		}
		return nil
	}
	if err := g.fs.write(file, "THAWED"); err != nil {
		return fmt.Errorf("cgroup: thaw %q: %w", g.name, err)
	}
	ok, err := waitUntil(deadline, func() (bool, error) {
		s, err := readState(file)
		return s == "THAWED", err
	})
	if err == nil && !ok {
		err = fmt.Errorf("%s does not read THAWED after %v", file, freezeTimeout)
	}
	if err != nil {
		return fmt.Errorf("cgroup: thaw %q: %w", g.name, err)
	}
	return nil
}

func (g *Group) frozen() (bool, error) {
	file, err := g.freezer()
	if err != nil {
		return false, err
	}
	if g.version == 2 {
		return g.frozenV2(1)
	}
	s, err := readState(file)
	return s == "FROZEN", err
}

// frozenV2 reports whether cgroup.events reads "frozen want".
func (g *Group) frozenV2(want int64) (bool, error) {
	file := filepath.Join(g.dirs[0], "cgroup.events")
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	v, found, err := parseKeyed(b, "frozen")
	if err != nil || !found {
		return false, fmt.Errorf("%s: no frozen key", file)
	}
	return v == want, nil
}

// readState reads a v1 freezer.state: THAWED, FREEZING or FROZEN.
func readState(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
