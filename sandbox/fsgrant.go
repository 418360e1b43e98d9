package sandbox

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/grant"
)

// Mount is one change a grant set's fs rules make to the sandbox's file
// system (docs/sandbox.md, "Host paths: fs grants"). The sandbox reports
// every one to Spec.Mounted before the program starts, so that a caller
// records them (the journal's "mount" entries); a failed report refuses
// the run.
type Mount struct {
	// Kind is "bind" (the host path Path is visible at the same path
	// inside, with Access), "scratch" (the sandbox's own /work or /tmp is
	// mounted executable: Access is "rwx") or "mask" (a deny.fs path is
	// hidden behind an empty read-only directory or /dev/null; also a
	// file with a denied hash in a granted bin directory).
	Kind string
	// Path is absolute, the same outside and inside.
	Path string
	// Access is "ro", "rx", "rw" or "rwx"; "" for a mask.
	Access string
	// Rule names the grant: "fs[i]", "deny.fs[i]", or "exec.deny[i]" for
	// a file in a granted bin directory hidden for its denied hash.
	Rule string
	// Writable is true for a bind that lets the program write a host
	// path directly, bypassing the staged workspace.
	Writable bool
}

// MountFunc receives the run's mounts before the program starts
// (Spec.Mounted); an error refuses the run.
type MountFunc func([]Mount) error

// fsBind is one host path bound at the same path inside
// (initConfig.Binds). Dev and Ino are the identity of the file the parent
// decided on; init binds only that file.
type fsBind struct {
	Path   string `json:"path"`
	Access string `json:"access"` // ro, rx, rw, rwx
	Rule   string `json:"rule"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Dir    bool   `json:"dir"`
}

// fsMask is one deny.fs path hidden inside (initConfig.Masks).
type fsMask struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
	// Seen is true when the path was there at the decision and the mask
	// was reported (Spec.Mounted): init then refuses the run if it has
	// gone, so that no mask is recorded that was not applied.
	Seen bool `json:"seen,omitempty"`
}

// fsPlan is what a grant set's fs rules do to one run.
type fsPlan struct {
	binds       []fsBind
	scratchExec []string // "/work" and/or "/tmp": mounted executable
	masks       []fsMask
	// execRoots are the paths beneath which files are executable (rx and
	// rwx binds, and /work or /tmp when granted rwx): a program found on
	// PATH beneath one is in the sandbox's reach.
	execRoots []string
	// search is PATH inside the sandbox: the bin directories of granted
	// executable paths, in grant order, then searchPath.
	search []string
	mounts []Mount    // what Spec.Mounted is told
	img    *imageRoot // the image runtime (image.go); nil: the host's
}

// beneath reports whether p is root or lies beneath it, on segment
// boundaries.
func beneath(root, p string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// deniedBy returns the index of the first deny.fs path that covers p, or
// -1.
func deniedBy(deny []string, p string) int {
	for i, d := range deny {
		if beneath(d, p) {
			return i
		}
	}
	return -1
}

// inExecRoot reports whether f lies beneath one of the plan's host
// executable roots (rx and rwx binds; /work and /tmp do not count: the
// host cannot see what a run builds there).
func (p *fsPlan) inExecRoot(f string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.execRoots {
		if r != "/work" && r != "/tmp" && beneath(r, f) {
			return true
		}
	}
	return false
}

// pathEnv is the PATH variable for the plan.
func (p *fsPlan) pathEnv() string {
	if p == nil || len(p.search) == 0 {
		return "PATH=" + strings.Join(searchPath, ":")
	}
	return "PATH=" + strings.Join(p.search, ":")
}

// removeDenied drops from files those beneath a deny.fs path: a masked
// file cannot be executed. It refuses when the program itself is denied.
func removeDenied(gs *grant.Set, program []string, files []string) ([]string, error) {
	if len(gs.DenyFS) == 0 {
		return files, nil
	}
	for _, f := range program {
		if i := deniedBy(gs.DenyFS, f); i >= 0 {
			return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: exec %s: it is beneath denied path %s (deny.fs[%d])", ErrRefused, f, gs.DenyFS[i], i)}
		}
	}
	return slices.DeleteFunc(files, func(f string) bool { return deniedBy(gs.DenyFS, f) >= 0 }), nil
}
