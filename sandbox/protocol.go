package sandbox

import "github.com/cordon-dev/cordon/internal/phase"

// The parent and the sandbox init talk over three pipes passed as fds 3,
// 4 and 5 of init:
//
//	fd 3  parent → init  the initConfig as JSON, then EOF
//	fd 4  parent → init  one byte 'g' when the run may start (init is in
//	                     its cgroup, inputs are staged), or, for a
//	                     prepared sandbox (initConfig.Deferred), one
//	                     launchConfig line; EOF at any time means "give
//	                     up": init kills everything and exits
//	fd 5  init → parent  JSON lines: a ready message when the root is
//	                     built, then one exit (or error) message
//	fd 6  parent ↔ init  the egress bridge (bridge_linux.go), when the
//	                     grant set has egress rules; closed otherwise
//	fd 7  parent → init  a unix socket: one message carrying the run's
//	                     cgroup v1 "tasks" files (initConfig.CgroupFiles of
//	                     them, SCM_RIGHTS), then as many of the cgroup it
//	                     was made beneath, sent once the cgroup is made (it
//	                     is made while init starts); init's forking thread
//	                     writes "0" to each of the first to join the run's
//	                     cgroup, forks the program, and writes "0" to each
//	                     of the others to leave it again
//	fd 8…                detached mount trees of the fs grants' host paths
//	                     (initConfig.Binds, in order; fsgrant_linux.go):
//	                     init attaches each while building the root
//	fd 8+b               with an image runtime (initConfig.Image;
//	                     image_linux.go), a detached tree of the image's
//	                     root: init attaches it, binds the runtime from
//	                     it and closes it after writing /etc; i is 1,
//	                     else 0
//	fd 8+b+i             cordon's own executable, which the kernel ran as
//	                     init through /proc/self/fd; init closes it first
//
// A rootless init (idmap_linux.go) is first started as
// "cordon-sandbox-init rootless-wait N", N being the descriptor of
// cordon's executable: it waits until fd 3 is readable (the parent writes
// the configuration only after newuidmap and newgidmap mapped its ids),
// then executes cordon again through fd N as plain init, with the same
// descriptors; its configuration has "rootless" set.
//
// After the exit message init kills every other process in its PID
// namespace, reaps them, and waits for EOF on fd 4 before exiting, so
// that the parent can copy outputs out of the still-mounted /work.

// initConfig is everything init needs; the parent computes all of it.
type initConfig struct {
	Argv        []string `json:"argv"`
	Path        string   `json:"path"` // the program, resolved in the runtime
	Env         []string `json:"env"`
	UID         int      `json:"uid"` // the program's uid and gid inside
	GID         int      `json:"gid"`
	Runtime     []string `json:"runtime"`     // host paths bound read-only (or mirrored as symlinks)
	ExecFiles   []string `json:"exec_files"`  // the only files execve may open (Landlock)
	NoExecDirs  []string `json:"noexec_dirs"` // runtime program directories mounted noexec
	TmpBytes    int64    `json:"tmp_bytes"`
	WorkBytes   int64    `json:"work_bytes"`
	NoFile      int64    `json:"nofile"`
	FileSize    int64    `json:"fsize"`
	NProc       int64    `json:"nproc"`
	LandlockABI int      `json:"landlock_abi"` // the ABI to restrict with; probed by the parent
	// Seccomp is the seccomp filter to load (seccomp.Filter's binary
	// form), assembled by the parent while the kernel starts init.
	Seccomp     []byte `json:"seccomp"`
	Hostname    string `json:"hostname"`
	CgroupFiles int    `json:"cgroup_files"` // how many cgroup v1 tasks files fd 7 carries
	Egress      bool   `json:"egress"`       // fd 6 is the egress bridge: start the forwarder
	Phases      bool   `json:"phases"`       // send init's phase marks with the exit message
	// The grant set's fs rules (fsgrant_linux.go); empty without them.
	Binds       []fsBind `json:"binds,omitempty"`        // host paths bound at the same path
	ScratchExec []string `json:"scratch_exec,omitempty"` // /work or /tmp mounted executable
	Masks       []fsMask `json:"masks,omitempty"`        // deny.fs paths hidden
	Rootless    bool     `json:"rootless"`               // /work is init's until init gives it to the program (chownWork)
	// Image: the runtime is an image's, whose root is fd 8+b;
	// ImagePath: a rootless run's image, which init opens (image.go).
	Image     bool       `json:"image,omitempty"`
	ImagePath *imagePath `json:"image_path,omitempty"`
	// Deferred: a prepared sandbox (Prepare). Argv, Path and Env are
	// empty here, and ExecFiles holds only the grant set's names that
	// were resolved when it was prepared (none when a rule pins or denies
	// a hash); they come on fd 4, as one launchConfig line, in place of
	// the byte 'g'.
	Deferred bool `json:"deferred,omitempty"`

	// A prepared sandbox's init, after its launch (never on the wire):
	// the Landlock ruleset built before ready, with the prepared
	// executables, and the launch's executables it lacks.
	landlock *landlockSet
	moreExec []string
}

// launchConfig is what a prepared sandbox's init learns when it is
// started (Prepared.Start): one line of JSON on fd 4, in place of 'g'.
// Init binds ExecFiles executable, as noexecProgramDirs does before
// the root is entered in a cold run, then starts the program as a cold
// run's init does.
type launchConfig struct {
	Argv      []string `json:"argv"`
	Path      string   `json:"path"`
	Env       []string `json:"env"`
	ExecFiles []string `json:"exec_files"`
	// Rebind are prepared executables (of the config's ExecFiles) that
	// the host replaced (a new inode at the name) after Prepare: the
	// kernel dropped their binds, so init binds them again, as a cold
	// run binds them when it builds its root.
	Rebind []string `json:"rebind,omitempty"`
}

// initMessage is one line init writes on fd 5.
type initMessage struct {
	Ready  bool   `json:"ready,omitempty"`
	Exit   *int   `json:"exit,omitempty"`   // exit status (0-255)
	Signal int    `json:"signal,omitempty"` // killing signal, when Exit is nil
	Error  string `json:"error,omitempty"`  // a setup failure
	Code   int    `json:"code,omitempty"`   // with Error: 125, 126 or 127
	// Left, with the exit status: init's thread left the run's cgroup
	// after the program was born, so the cgroup is empty now.
	Left bool `json:"left,omitempty"`
	// Phases are init's marks (package phase), with the exit message
	// when initConfig.Phases asked for them.
	Phases []phase.Mark `json:"phases,omitempty"`
}
