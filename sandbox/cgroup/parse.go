package cgroup

// The parsers here read the kernel's text formats. They are portable so
// that they are tested and fuzzed on every system; only Linux calls them.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errFormat is returned for kernel text that does not have the documented
// format. It is an internal detail: callers see it wrapped with the file.
var errFormat = errors.New("unexpected format")

// mount is one line of /proc/self/mountinfo (proc_pid_mountinfo(5)),
// reduced to what discovery needs.
type mount struct {
	root   string   // the directory of the filesystem mounted here, e.g. "/" or "/docker/1f2e"
	point  string   // the mount point, e.g. "/sys/fs/cgroup/memory"
	fstype string   // "cgroup" (v1) or "cgroup2"
	super  []string // super options: for a v1 hierarchy, its controllers among them
}

// parseMountinfo parses /proc/self/mountinfo. Each line is
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// with zero or more optional fields before the "-" separator.
func parseMountinfo(b []byte) ([]mount, error) {
	var ms []mount
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		sep := -1
		for j := 6; j < len(f); j++ {
			if f[j] == "-" {
				sep = j
				break
			}
		}
		if len(f) < 10 || sep < 0 || len(f) != sep+4 {
			return nil, fmt.Errorf("mountinfo line %d: %w", i+1, errFormat)
		}
		root, err := unescapeOctal(f[3])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", i+1, err)
		}
		point, err := unescapeOctal(f[4])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", i+1, err)
		}
		ms = append(ms, mount{root: root, point: point, fstype: f[sep+1], super: strings.Split(f[sep+3], ",")})
	}
	return ms, nil
}

// unescapeOctal undoes the kernel's escaping of space, tab, newline and
// backslash in mountinfo paths (\040, \011, \012, \134).
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", errFormat
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", errFormat
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// procCgroup is one line of /proc/self/cgroup (cgroups(7)):
// "hierarchy-ID:controller-list:cgroup-path". The v2 hierarchy has ID 0
// and an empty controller list.
type procCgroup struct {
	id          int
	controllers []string
	path        string
}

// parseProcCgroup parses /proc/self/cgroup. Every path must be absolute.
func parseProcCgroup(b []byte) ([]procCgroup, error) {
	var cs []procCgroup
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			return nil, fmt.Errorf("cgroup line %d: %w", i+1, errFormat)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("cgroup line %d: %w", i+1, errFormat)
		}
		var ctl []string
		if f[1] != "" {
			ctl = strings.Split(f[1], ",")
		}
		cs = append(cs, procCgroup{id: id, controllers: ctl, path: f[2]})
	}
	return cs, nil
}

// parseInt parses a file that holds one non-negative decimal integer and
// a newline, such as memory.max_usage_in_bytes or pids.peak.
func parseInt(b []byte) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSuffix(string(b), "\n"), 10, 64)
	if err != nil || v < 0 {
		return 0, errFormat
	}
	return v, nil
}

// parseKeyed returns the value of key in a flat keyed file, one
// "key value" pair a line (cgroup-v2.rst, "Interface Files"), such as
// cpu.stat, memory.events or v1 memory.oom_control. found is false when
// no line has the key. Every line must have exactly two fields, and the
// value of key must be a non-negative decimal integer.
func parseKeyed(b []byte, key string) (v int64, found bool, err error) {
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 2 {
			return 0, false, errFormat
		}
		if f[0] != key {
			continue
		}
		if found {
			return 0, false, errFormat // a key twice
		}
		if v, err = parseInt([]byte(f[1])); err != nil {
			return 0, false, err
		}
		found = true
	}
	return v, found, nil
}

// parsePIDs parses cgroup.procs: one decimal PID a line.
func parsePIDs(b []byte) ([]int, error) {
	var pids []int
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 0 {
			return nil, errFormat
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
