package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Discovery: where this process's cgroups are, and what they lack.

const (
	procMountinfo = "/proc/self/mountinfo"
	procSelf      = "/proc/self/cgroup"
)

// v1Controllers are the v1 hierarchies a group needs, in the order they are
// created and written.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// v2Controllers are the controllers enabled for v2 groups, in the order
// cgroup.controllers lists them.
var v2Controllers = []string{"cpu", "memory", "pids"}

// host is what discovery found.
type host struct {
	version int
	where   string // for messages: "v1 at /sys/fs/cgroup"
	// base maps each of v1Controllers to the directory groups are created
	// beneath in its hierarchy, or "" where it is not mounted. v1 only.
	base map[string]string
	// dir is the directory v2 groups are created beneath.
	dir string
	// self is set when dir is this process's own cgroup, or the parent of
	// the selfLeaf it has moved into: then New may move it. v2 only.
	self bool
	// missing names what discovery already found absent.
	missing []string
	fs      fsys
}

// discover finds the cgroup filesystem c places groups in. An error is
// returned only for what cannot be read; absent facilities are recorded
// in host.missing and reported by check.
func (c Config) discover() (*host, error) {
	h := &host{fs: realFS, base: map[string]string{}}
	if c.fs != nil {
		h.fs = *c.fs
	}
	if c.Root != "" {
		return h, h.discoverRoot(c.Root)
	}
	mi, err := os.ReadFile(procMountinfo)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	mounts, err := parseMountinfo(mi)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s: %w", procMountinfo, err)
	}
	pc, err := os.ReadFile(procSelf)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	self, err := parseProcCgroup(pc)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s: %w", procSelf, err)
	}
	return h, h.discoverMounts(mounts, self)
}

// discoverRoot fills h from a Config.Root directory.
func (h *host) discoverRoot(root string) error {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		h.version, h.dir, h.where = 2, root, "v2 at "+root
		return nil
	}
	h.version, h.where = 1, "v1 at "+root
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue // "cpu" may be a link to "cpu,cpuacct"
		}
		for _, ctl := range strings.Split(e.Name(), ",") {
			if slices.Contains(v1Controllers, ctl) && h.base[ctl] == "" {
				h.base[ctl] = dir
			}
		}
	}
	return nil
}

// discoverMounts fills h from this process's mounts and cgroups. v1 is
// used when any v1 hierarchy carries a controller cordon needs, even if
// others are missing: a host that mixes v1 and v2 controllers is
// refused, not half used.
func (h *host) discoverMounts(mounts []mount, self []procCgroup) error {
	var v1, v2 []mount
	for _, m := range mounts {
		switch {
		case m.fstype == "cgroup" && slices.ContainsFunc(m.super, func(o string) bool { return slices.Contains(v1Controllers, o) }):
			v1 = append(v1, m)
		case m.fstype == "cgroup2":
			v2 = append(v2, m)
		}
	}
	switch {
	case len(v1) > 0:
		h.version, h.where = 1, "v1 at "+filepath.Dir(v1[0].point)
		for _, ctl := range v1Controllers {
			i := slices.IndexFunc(self, func(p procCgroup) bool { return slices.Contains(p.controllers, ctl) })
			if i < 0 {
				continue // not mounted, or not in /proc/self/cgroup: missing
			}
			dir, err := within(v1, self[i].path, func(m mount) bool { return slices.Contains(m.super, ctl) })
			if err != nil {
				h.missing = append(h.missing, fmt.Sprintf("%s: %v", ctl, err))
				continue
			}
			h.base[ctl] = dir
		}
		return nil
	case len(v2) > 0:
		h.version, h.where = 2, "v2 at "+v2[0].point
		i := slices.IndexFunc(self, func(p procCgroup) bool { return p.id == 0 && p.controllers == nil })
		if i < 0 {
			return fmt.Errorf("cgroup: %s has no v2 line", procSelf)
		}
		dir, err := within(v2, self[i].path, func(mount) bool { return true })
		if err != nil {
			h.missing = append(h.missing, err.Error())
			return nil
		}
		if filepath.Base(dir) == selfLeaf {
			dir = filepath.Dir(dir) // moved there by an earlier New
		}
		h.dir, h.self, h.where = dir, true, "v2 at "+dir
		return nil
	default:
		h.version, h.where = 0, "no cgroup mount in "+procMountinfo
		h.missing = append(h.missing, "no cgroup filesystem is mounted")
		return nil
	}
}

// within returns the directory of the cgroup path (as /proc/self/cgroup
// names it) under the first mount that ok accepts and whose root contains
// path.
func within(mounts []mount, path string, ok func(mount) bool) (string, error) {
	for _, m := range mounts {
		if !ok(m) {
			continue
		}
		if m.root == "/" {
			return filepath.Join(m.point, path), nil
		}
		if path == m.root || strings.HasPrefix(path, m.root+"/") {
			return filepath.Join(m.point, strings.TrimPrefix(path, m.root)), nil
		}
	}
	return "", fmt.Errorf("own cgroup %q is not visible through any mount", path)
}

// check returns nil when h can create limited groups, and otherwise an
// error wrapping ErrUnavailable that names everything missing. It reads
// and changes nothing.
func (h *host) check() error {
	var problems, ctls []string
	switch h.version {
	case 1:
		for _, ctl := range v1Controllers {
			if h.base[ctl] == "" {
				ctls = append(ctls, ctl)
			} else if err := writableDir(h.base[ctl]); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", ctl, err))
			}
		}
	case 2:
		if h.dir == "" {
			break // missing already says why
		}
		have, err := os.ReadFile(filepath.Join(h.dir, "cgroup.controllers"))
		if err != nil {
			problems = append(problems, err.Error())
			break
		}
		for _, ctl := range v2Controllers {
			if !slices.Contains(strings.Fields(string(have)), ctl) {
				ctls = append(ctls, ctl)
			}
		}
		// The root cgroup has neither cgroup.type nor cgroup.kill; every
		// other cgroup has both from Linux 5.14 on.
		if exists(filepath.Join(h.dir, "cgroup.type")) && !exists(filepath.Join(h.dir, "cgroup.kill")) {
			problems = append(problems, "no cgroup.kill (Linux 5.14)")
		}
		if err := writableDir(h.dir); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if ctls != nil {
		problems = append([]string{"missing controllers: " + strings.Join(ctls, ", ")}, problems...)
	}
	problems = append(problems, h.missing...)
	if problems != nil {
		return fmt.Errorf("%w: %s (%s)", ErrUnavailable, strings.Join(problems, "; "), h.where)
	}
	return nil
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// wOK is W_OK of access(2), which package syscall does not name.
const wOK = 0x2

// writableDir returns nil when dir is a directory this process may create
// entries in.
func writableDir(dir string) error {
	if err := syscall.Access(dir, wOK); err != nil {
		return &os.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}

func (c Config) probe() error {
	h, err := c.discover()
	if err != nil {
		return err
	}
	return h.check()
}

// realFS is the real cgroup filesystem.
var realFS = fsys{
	mkdir: func(dir string) error { return os.Mkdir(dir, 0o755) },
	rmdir: func(dir string) error {
		if err := syscall.Rmdir(dir); err != nil {
			return &os.PathError{Op: "rmdir", Path: dir, Err: err}
		}
		return nil
	},
	write: func(file, data string) error {
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(data)
		return errors.Join(err, f.Close())
	},
}
