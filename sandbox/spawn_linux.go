package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Spawner starts sandbox init from a small helper process: the same
// binary, started once with argv[0] SpawnerArg0, that does nothing but
// start inits for the process that started it.
//
// Init is started with CLONE_NEWUSER among its clone flags, so Go
// cannot vfork it: it forks the whole starting process, copying its
// page tables, and every page that process writes before init execs is
// copied once more. In a large, busy process (cordon serve, with its
// HTTP clients, store and runs) that costs thousands of page faults per
// run and stalls its threads. The spawner's fork is cheap, and the
// spawner itself is started with vfork (no new namespaces).
//
// A run started through a spawner is the run started directly, step
// for step: the spawner receives the same path, arguments, environment,
// files, clone flags, id mappings and credentials over a socketpair
// nobody else holds, starts init from a thread of its own that it keeps
// until the run releases it (init's parent-death signal fires when that
// thread ends), and reaps init only when asked to, so that init's pid
// names init until Wait. The caller signals init through a pidfd.
//
// Every descriptor the spawner holds is close-on-exec except what a
// request hands init. When the caller's end closes (the caller exited
// or Close), the spawner exits, and every init it started is killed.
// A spawner that died (killed, say) fails the runs it was serving and is
// started again for the next one.
type Spawner struct {
	mu     sync.Mutex
	h      *spawnerProc
	closed bool
}

// spawnerProc is one spawner process.
type spawnerProc struct {
	conn *net.UnixConn // the request socket (SOCK_SEQPACKET)
	proc *os.Process
	dead chan struct{} // closed when the process has exited
}

// spawnerFD is the request socket's descriptor in the spawner.
const spawnerFD = 3

// maxSpawnFiles bounds the descriptors one request hands init (the
// kernel's SCM_MAX_FD is 253; one more is the run's own socket).
const maxSpawnFiles = 250

// StartSpawner starts a spawner from this process's own executable.
// It returns once the spawner has said it is ready.
func StartSpawner() (*Spawner, error) {
	h, err := startSpawnerProc()
	if err != nil {
		return nil, err
	}
	return &Spawner{h: h}, nil
}

func startSpawnerProc() (*spawnerProc, error) {
	ours, theirs, err := seqpacketPair()
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting the spawner: %w", err)
	}
	defer theirs.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{SpawnerArg0},
		Env:        initEnv,
		ExtraFiles: []*os.File{theirs},
		// Its own session: the terminal's signals are not the spawner's
		// (it ignores them too), so that the caller's graceful shutdown
		// still finds its runs' inits.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("sandbox: starting the spawner: %w", err)
	}
	sp := &spawnerProc{conn: ours, proc: cmd.Process, dead: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(sp.dead)
	}()
	buf := make([]byte, 16)
	_ = ours.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := ours.Read(buf)
	_ = ours.SetReadDeadline(time.Time{})
	if err != nil || string(buf[:n]) != "ready" {
		sp.close()
		if err == nil {
			err = fmt.Errorf("it answered %q", buf[:n])
		}
		return nil, fmt.Errorf("sandbox: the spawner did not start (is this binary's sandbox package linked in?): %v", err)
	}
	return sp, nil
}

// Close ends the spawner: it exits, and every init it started and has
// not reaped is killed. Close waits for it to exit.
func (sp *Spawner) Close() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = true
	return sp.h.close()
}

func (sp *spawnerProc) close() error {
	err := sp.conn.Close()
	select {
	case <-sp.dead:
	case <-time.After(5 * time.Second):
		_ = sp.proc.Kill()
		<-sp.dead
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// PID returns the spawner's process id (tests).
func (sp *Spawner) PID() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.h.proc.Pid
}

func seqpacketPair() (ours *net.UnixConn, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "spawner")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "spawner"), nil
}

// spawnRequest is what the spawner needs of an exec.Cmd to start init
// exactly as the caller would have. Files travel alongside, in order:
// the run's socket, then stdin, stdout, stderr (those present), then
// the ExtraFiles that are not nil (Extra says which are: a nil one is a
// descriptor init does not get, as for os/exec).
type spawnRequest struct {
	Path                 string                 `json:"path"`
	Args                 []string               `json:"args"`
	Env                  []string               `json:"env"`
	Stdin                bool                   `json:"stdin,omitempty"`
	Stdout               bool                   `json:"stdout,omitempty"`
	Stderr               bool                   `json:"stderr,omitempty"`
	Extra                []bool                 `json:"extra"`
	Cloneflags           uintptr                `json:"cloneflags"`
	Setsid               bool                   `json:"setsid"`
	Pdeathsig            syscall.Signal         `json:"pdeathsig"`
	UidMappings          []syscall.SysProcIDMap `json:"uid_mappings,omitempty"`
	GidMappings          []syscall.SysProcIDMap `json:"gid_mappings,omitempty"`
	GidMappingsSetgroups bool                   `json:"setgroups"`
	Credential           *syscall.Credential    `json:"credential,omitempty"`
	// Owner, when not negative, is the id the starting thread takes
	// before it starts init (asNamespaceOwner).
	Owner int `json:"owner"`
	// Rlimits are the caller's resource limits when it sent the request
	// (all but RLIMIT_NOFILE, which os/exec sets in the child from the
	// runtime's record): the spawner takes them before it starts init,
	// so that init inherits the caller's limits of now, not those of the
	// spawner's start.
	Rlimits []spawnRlimit `json:"rlimits"`
}

// spawnRlimit is one resource limit of a request.
type spawnRlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// spawnRlimits are the limits a request carries: every resource Linux
// has, RLIMIT_NOFILE aside.
var spawnRlimits = []int{unix.RLIMIT_CPU, unix.RLIMIT_FSIZE, unix.RLIMIT_DATA, unix.RLIMIT_STACK, unix.RLIMIT_CORE,
	unix.RLIMIT_RSS, unix.RLIMIT_NPROC, unix.RLIMIT_MEMLOCK, unix.RLIMIT_AS, unix.RLIMIT_LOCKS,
	unix.RLIMIT_SIGPENDING, unix.RLIMIT_MSGQUEUE, unix.RLIMIT_NICE, unix.RLIMIT_RTPRIO, unix.RLIMIT_RTTIME}

// currentRlimits reads this process's limits for a request.
func currentRlimits() ([]spawnRlimit, error) {
	out := make([]spawnRlimit, 0, len(spawnRlimits))
	for _, r := range spawnRlimits {
		var l unix.Rlimit
		if err := unix.Prlimit(0, r, nil, &l); err != nil {
			return nil, fmt.Errorf("reading resource limit %d: %w", r, err)
		}
		out = append(out, spawnRlimit{Resource: r, Cur: l.Cur, Max: l.Max})
	}
	return out, nil
}

// startMu serializes, in the spawner, taking a request's resource
// limits (the process's own) and starting init with them.
var startMu sync.Mutex

// startWithRlimits starts cmd with the spawner's limits set to lims
// first; a limit it cannot take refuses the start.
func startWithRlimits(cmd *exec.Cmd, lims []spawnRlimit) error {
	startMu.Lock()
	defer startMu.Unlock()
	if len(lims) != len(spawnRlimits) {
		return fmt.Errorf("the request carries %d resource limits, want %d", len(lims), len(spawnRlimits))
	}
	for i, l := range lims {
		if l.Resource != spawnRlimits[i] {
			return fmt.Errorf("the request's resource limit %d is for resource %d, want %d", i, l.Resource, spawnRlimits[i])
		}
		lim := unix.Rlimit{Cur: l.Cur, Max: l.Max}
		if err := unix.Prlimit(0, l.Resource, &lim, nil); err != nil {
			return fmt.Errorf("taking the caller's resource limit %d (%d, %d): %w", l.Resource, l.Cur, l.Max, err)
		}
	}
	return cmd.Start()
}

// spawnReply is the spawner's answer on a run's socket: first the pid
// (its pidfd alongside) or an error, then, once asked, init's wait
// status and resource usage.
type spawnReply struct {
	PID    int                 `json:"pid,omitempty"`
	Error  string              `json:"error,omitempty"`
	Status *syscall.WaitStatus `json:"status,omitempty"`
	Rusage *syscall.Rusage     `json:"rusage,omitempty"`
}

// initProc is sandbox init, started directly (execInit) or by a
// spawner (spawnedInit).
type initProc interface {
	// pid is init's process id, which names init until wait returns.
	pid() int
	// kill sends init SIGKILL; it is safe after init has been reaped.
	kill() error
	// wait reaps init and returns its resource usage; an exit status
	// or a signal is not an error.
	wait() (*syscall.Rusage, error)
	// alive returns nil while init has not been reaped, that is while
	// its pid still names init. A use of the pid (a /proc path, a cgroup
	// move, newuidmap) reached init if alive returns nil after it: a
	// spawner that died leaves init to be reaped by another process, and
	// its pid free for any other.
	alive() error
}

// errInitGone is alive's answer once init has been reaped.
var errInitGone = errors.New("sandbox init is gone (its spawner died?): its pid may name another process now")

// execInit is init started by os/exec from this process.
type execInit struct{ cmd *exec.Cmd }

func (e execInit) pid() int    { return e.cmd.Process.Pid }
func (e execInit) kill() error { return e.cmd.Process.Kill() }

// alive: this process is init's parent, and reaps it only in wait.
func (e execInit) alive() error {
	if e.cmd.ProcessState != nil {
		return errInitGone
	}
	return nil
}
func (e execInit) wait() (*syscall.Rusage, error) {
	if err := e.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, err
		}
	}
	ru, _ := e.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return ru, nil
}

// copyDelay bounds how long a spawned init's Wait waits for its
// output streams to end once init has exited.
const copyDelay = 5 * time.Second

// spawnedInit is init started by a spawner.
type spawnedInit struct {
	h       *spawnerProc // the spawner that started init
	conn    *net.UnixConn
	pidv    int
	pidfd   int
	copies  sync.WaitGroup // os/exec's copies of non-file output streams
	outputs []*os.File     // the read ends they copy from
	stdin   *os.File       // the write end a non-file stdin is copied to, or nil
	copyMu  sync.Mutex     // guards copyErr: not mu, which wait holds while it waits for the copies
	copyErr error
	mu      sync.Mutex
	waited  bool
}

func (p *spawnedInit) pid() int { return p.pidv }

func (p *spawnedInit) kill() error {
	return unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
}

// alive: a pidfd signals its process, zombie or not, until it is
// reaped (ESRCH); EPERM is a process that is there.
func (p *spawnedInit) alive() error {
	if err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0); errors.Is(err, unix.ESRCH) {
		return errInitGone
	}
	return nil
}

func (p *spawnedInit) wait() (*syscall.Rusage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waited {
		return nil, errors.New("sandbox init already waited for")
	}
	p.waited = true
	if _, err := p.conn.Write([]byte("wait")); err != nil {
		return nil, fmt.Errorf("asking the spawner to reap init: %w", err)
	}
	var rep spawnReply
	if err := readAnswer(nil, nil, p.h, p.conn, &rep, nil); err != nil {
		return nil, fmt.Errorf("the spawner's answer for init: %w", err)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("the spawner: %s", rep.Error)
	}
	if rep.Status == nil {
		return nil, errors.New("the spawner answered without init's status")
	}
	// Init and its PID namespace are gone, so the streams end once what
	// they hold is copied, unless something outside the run holds a
	// write end (a request still in flight to a spawner that died): as
	// os/exec's WaitDelay, stop waiting after a while, and say so.
	if p.stdin != nil {
		p.stdin.Close() // a stdin copy that still waits for its input writes no more
	}
	copied := make(chan struct{})
	go func() {
		p.copies.Wait()
		close(copied)
	}()
	select {
	case <-copied:
	case <-time.After(copyDelay):
		for _, r := range p.outputs {
			_ = r.SetReadDeadline(time.Now())
		}
		<-copied
		return rep.Rusage, fmt.Errorf("the program's output was still held open %s after init exited", copyDelay)
	}
	if !rep.Status.Exited() || rep.Status.ExitStatus() != 0 {
		return rep.Rusage, nil // as os/exec: an unsuccessful exit hides a copy's error
	}
	p.copyMu.Lock()
	defer p.copyMu.Unlock()
	return rep.Rusage, p.copyErr
}

// release ends the run's hold on the spawner: an init not yet reaped
// is killed and reaped there, and the thread that started it ends.
func (p *spawnedInit) release() {
	p.conn.Close()
	unix.Close(p.pidfd)
}

func readReply(c *net.UnixConn, rep *spawnReply, pidfd *int) error {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return err
	}
	if n == 0 {
		return io.EOF
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return errors.New("a truncated message")
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return err
	}
	if pidfd != nil && len(fds) == 1 {
		*pidfd = fds[0]
	} else {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if err := json.Unmarshal(buf[:n], rep); err != nil {
		if pidfd != nil && *pidfd >= 0 {
			unix.Close(*pidfd)
			*pidfd = -1
		}
		return fmt.Errorf("a malformed answer: %v", err)
	}
	return nil
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// start starts cmd, as cmd.Start would from a thread that took owner's
// ids first (owner < 0: none), in the spawner. Streams that are not
// files are copied through pipes, as os/exec copies them. A spawner
// that does not answer (stopped, say) holds start until ctx is done, no
// longer: the run's socket then closes, and the spawner, once it goes
// on, kills what it started for the request.
func (sp *Spawner) start(ctx context.Context, cmd *exec.Cmd, owner int) (_ *spawnedInit, err error) {
	req := spawnRequest{
		Path: cmd.Path, Args: cmd.Args, Env: cmd.Env,
		Cloneflags: cmd.SysProcAttr.Cloneflags, Setsid: cmd.SysProcAttr.Setsid, Pdeathsig: cmd.SysProcAttr.Pdeathsig,
		UidMappings: cmd.SysProcAttr.UidMappings, GidMappings: cmd.SysProcAttr.GidMappings,
		GidMappingsSetgroups: cmd.SysProcAttr.GidMappingsEnableSetgroups, Credential: cmd.SysProcAttr.Credential,
		Owner: owner,
	}
	if a := cmd.SysProcAttr; a.Chroot != "" || a.Setctty || a.Noctty || a.Foreground || a.Setpgid || a.Ptrace ||
		a.Unshareflags != 0 || a.AmbientCaps != nil || a.UseCgroupFD || a.PidFD != nil || cmd.Dir != "" {
		return nil, errors.New("the spawner does not carry one of this command's attributes")
	}
	if len(cmd.ExtraFiles) > maxSpawnFiles-3 {
		return nil, fmt.Errorf("init would get %d files, more than the spawner carries (%d)", len(cmd.ExtraFiles), maxSpawnFiles-3)
	}
	if req.Rlimits, err = currentRlimits(); err != nil {
		return nil, err
	}
	runConn, runEnd, err := seqpacketPair()
	if err != nil {
		return nil, err
	}
	p := &spawnedInit{conn: runConn, pidfd: -1}
	var (
		childEnds []*os.File // ours to close once the spawner has its copies
		undo      []func()
	)
	defer func() {
		runEnd.Close()
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			runConn.Close()
			for _, u := range undo {
				u()
			}
		}
	}()
	files := []*os.File{runEnd}
	// Stdin, as os/exec does: nil is /dev/null (the spawner opens it), a
	// file is passed, a reader is copied into a pipe.
	switch in := cmd.Stdin.(type) {
	case nil:
	case *os.File:
		req.Stdin = true
		files = append(files, in)
	default:
		r, w, perr := os.Pipe() // not err: the deferred start below must see start's own
		if perr != nil {
			return nil, perr
		}
		req.Stdin = true
		files = append(files, r)
		childEnds = append(childEnds, r)
		undo = append(undo, func() { w.Close() })
		p.stdin = w
		defer func() {
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(w, in) // the program may stop reading: EPIPE is not an error, as for os/exec
				w.Close()
			}()
		}()
	}
	for i, out := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		var f *os.File
		switch o := out.(type) {
		case nil:
			continue
		case *os.File:
			f = o
		default:
			r, w, perr := os.Pipe() // not err: the deferred start below must see start's own
			if perr != nil {
				return nil, perr
			}
			f = w
			childEnds = append(childEnds, w)
			undo = append(undo, func() { r.Close() })
			p.outputs = append(p.outputs, r)
			p.copies.Add(1)
			defer func() {
				if err != nil {
					p.copies.Done()
					return
				}
				go func() {
					defer p.copies.Done()
					defer r.Close()
					if _, cerr := io.Copy(o, r); cerr != nil {
						p.copyMu.Lock()
						if p.copyErr == nil { // the first, as os/exec keeps
							p.copyErr = cerr
						}
						p.copyMu.Unlock()
					}
				}()
			}()
		}
		if i == 0 {
			req.Stdout = true
		} else {
			req.Stderr = true
		}
		files = append(files, f)
	}
	for _, f := range cmd.ExtraFiles {
		req.Extra = append(req.Extra, f != nil)
		if f != nil {
			files = append(files, f)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	var (
		h   *spawnerProc // the spawner the request goes to
		rep spawnReply
	)
	for attempt := 1; ; attempt++ {
		var gone bool
		h, err = sp.send(body, fds)
		if err != nil {
			gone = errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.ECONNREFUSED)
			err = fmt.Errorf("sending the spawner the request: %w", err)
		} else if err = readAnswer(ctx.Done(), ctx.Err, h, runConn, &rep, &p.pidfd); err != nil {
			select {
			case <-h.dead:
				gone = true
			default:
			}
			err = fmt.Errorf("the spawner's answer: %w", err)
		}
		// A spawner that was dying (killed, not yet reaped) refused the
		// request or never answered it: send it once more, to the
		// spawner that replaces it once it is gone. An init the dead one
		// may have started has died with it (its parent-death signal)
		// before it was told anything; we still hold every descriptor
		// the request names.
		if err == nil || !gone || attempt == 2 || ctx.Err() != nil {
			break
		}
		select {
		case <-h.dead:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
		}
		if err := runConn.SetReadDeadline(time.Time{}); err != nil {
			return nil, err
		}
	}
	runtime.KeepAlive(files)
	if err != nil {
		return nil, err
	}
	if rep.Error != "" {
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
		return nil, errors.New(rep.Error)
	}
	if rep.PID <= 0 || p.pidfd < 0 {
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
		return nil, errors.New("the spawner answered without init's pid and pidfd")
	}
	p.pidv, p.h = rep.PID, h
	return p, nil
}

// readAnswer reads the spawner's answer to a request on the run's
// socket. It gives up when done closes (a nil done never does; doneErr
// says why), and when the spawner h exits without answering: a request
// that reaches a spawner as it dies is not always answered by the
// socket's end (seen rootless), and nothing it started outlives it
// (init's parent-death signal).
func readAnswer(done <-chan struct{}, doneErr func() error, h *spawnerProc, c *net.UnixConn, rep *spawnReply, pidfd *int) error {
	var (
		mu   sync.Mutex
		read bool  // the answer was read: no more interrupting
		why  error // why the read was interrupted
	)
	interrupt := func(reason error) {
		mu.Lock()
		defer mu.Unlock()
		if !read && why == nil {
			why = reason
			_ = c.SetReadDeadline(time.Now())
		}
	}
	answered := make(chan struct{})
	go func() {
		select {
		case <-h.dead:
			interrupt(errors.New("the spawner exited before it answered; the next run starts a new one"))
		case <-done:
			interrupt(doneErr())
		case <-answered:
		}
	}()
	err := readReply(c, rep, pidfd)
	mu.Lock()
	read = true
	reason := why
	mu.Unlock()
	close(answered)
	switch {
	case err != nil && reason != nil:
		return fmt.Errorf("%w (%v)", reason, err)
	case err != nil:
		return err
	case reason != nil:
		// Answered before the deadline took: the socket serves on.
		return c.SetReadDeadline(time.Time{})
	}
	return nil
}

// send writes a request to the spawner, starting a new one first if
// the last one has exited, and returns the spawner it wrote to.
func (sp *Spawner) send(body []byte, fds []int) (*spawnerProc, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return sp.h, errors.New("the spawner is closed")
	}
	select {
	case <-sp.h.dead: // killed: a new one serves from now on
		h, err := startSpawnerProc()
		if err != nil {
			return sp.h, err
		}
		sp.h.conn.Close() // the dead one's request socket
		sp.h = h
	default:
	}
	_, _, err := sp.h.conn.WriteMsgUnix(body, unix.UnixRights(fds...), nil)
	return sp.h, err
}

// spawnerMain is the spawner's whole life: it serves requests on fd 3
// until the other end closes, then exits (which kills, through their
// parent-death signal, every init it has not reaped).
func spawnerMain() int {
	// The terminal's and the operator's signals are the caller's to act
	// on: the spawner ends only when the caller's end closes. They are
	// caught and dropped, not ignored: an ignored signal stays ignored
	// across fork and exec, so init and the program would inherit it,
	// where init started directly gets the default (a caught signal is
	// reset). One the spawner inherited ignored (nohup) stays ignored, as
	// it is for init started directly.
	dropped := make(chan os.Signal, 1) // never read: Notify drops what does not fit
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE} {
		if !signal.Ignored(sig) {
			signal.Notify(dropped, sig)
		}
	}
	// No init may inherit the request socket, nor anything the spawner
	// inherited from its caller's caller (os/exec passes on what is not
	// close-on-exec).
	if err := unix.CloseRange(spawnerFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return ExitRefused
	}
	f := os.NewFile(spawnerFD, "spawner")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return ExitRefused
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		return ExitRefused
	}
	if _, err := conn.Write([]byte("ready")); err != nil {
		return ExitRefused
	}
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*(maxSpawnFiles+1)))
	for {
		// Received descriptors are close-on-exec (Go asks for
		// MSG_CMSG_CLOEXEC): init gets only those cmd names.
		n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return 0
		}
		fds, perr := parseRights(oob[:oobn])
		if perr != nil || len(fds) == 0 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			continue // no run's socket to answer on: nothing started
		}
		files := make([]*os.File, len(fds))
		for i, fd := range fds {
			files[i] = os.NewFile(uintptr(fd), "spawned-"+strconv.Itoa(i))
		}
		run, err := net.FileConn(files[0])
		files[0].Close()
		if err != nil {
			closeFiles(files[1:])
			continue
		}
		var req spawnRequest
		switch {
		case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			err = errors.New("the spawner received a truncated request")
		default:
			err = decodeRequest(buf[:n], &req)
		}
		go spawnInit(run.(*net.UnixConn), req, files[1:], err)
	}
}

// decodeRequest decodes one request whole: a field the spawner does not
// know is one it would not honour, so the request is refused.
func decodeRequest(b []byte, req *spawnRequest) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(req); err != nil {
		return fmt.Errorf("the spawner cannot honour the request: %v", err)
	}
	if d.More() {
		return errors.New("the spawner cannot honour the request: data after it")
	}
	return nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// spawnInit starts one init on a thread it keeps until the run's socket
// closes, and reaps init when asked.
func spawnInit(conn *net.UnixConn, req spawnRequest, files []*os.File, reqErr error) {
	runtime.LockOSThread() // never unlocked: the thread dies with this goroutine, and init's Pdeathsig with it
	defer conn.Close()
	answer := func(rep spawnReply, pidfd int) {
		body, _ := json.Marshal(rep)
		var oob []byte
		if pidfd >= 0 {
			oob = unix.UnixRights(pidfd)
		}
		_, _, _ = conn.WriteMsgUnix(body, oob, nil)
	}
	cmd, err := req.command(files, reqErr)
	var pidfd int = -1
	if err == nil && req.Owner >= 0 {
		err = asNamespaceOwner(req.Owner)
	}
	if err == nil {
		cmd.SysProcAttr.PidFD = &pidfd
		err = startWithRlimits(cmd, req.Rlimits)
	}
	closeFiles(files)
	if err != nil {
		answer(spawnReply{Error: fmt.Sprintf("starting sandbox init: %v", err)}, -1)
		return
	}
	answer(spawnReply{PID: cmd.Process.Pid}, pidfd)
	unix.Close(pidfd)
	waited := false
	buf := make([]byte, 16)
	for {
		n, err := conn.Read(buf)
		if err != nil || n == 0 {
			break
		}
		if string(buf[:n]) != "wait" || waited {
			continue
		}
		waited = true
		werr := cmd.Wait()
		var ee *exec.ExitError
		if werr != nil && !errors.As(werr, &ee) {
			answer(spawnReply{Error: werr.Error()}, -1)
			continue
		}
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		answer(spawnReply{Status: &ws, Rusage: ru}, -1)
	}
	if !waited {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// command rebuilds the caller's exec.Cmd from a request and its files.
func (req *spawnRequest) command(files []*os.File, reqErr error) (*exec.Cmd, error) {
	if reqErr != nil {
		return nil, reqErr
	}
	want := 0
	for _, b := range slices.Concat([]bool{req.Stdin, req.Stdout, req.Stderr}, req.Extra) {
		if b {
			want++
		}
	}
	if len(files) != want {
		return nil, fmt.Errorf("the request names %d files and carries %d", want, len(files))
	}
	cmd := &exec.Cmd{
		Path: req.Path, Args: req.Args, Env: req.Env,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: req.Cloneflags, Setsid: req.Setsid, Pdeathsig: req.Pdeathsig,
			UidMappings: req.UidMappings, GidMappings: req.GidMappings,
			GidMappingsEnableSetgroups: req.GidMappingsSetgroups, Credential: req.Credential,
		},
	}
	if req.Env == nil {
		cmd.Env = []string{} // nil would be the spawner's own environment
	}
	i := 0
	if req.Stdin {
		cmd.Stdin = files[i]
		i++
	}
	if req.Stdout {
		cmd.Stdout = files[i]
		i++
	}
	if req.Stderr {
		cmd.Stderr = files[i]
		i++
	}
	for _, present := range req.Extra {
		var f *os.File
		if present {
			f = files[i]
			i++
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	return cmd, nil
}
