package main

// The resident exec server (docs/sandbox.md, "Resident exec server"):
// `cordon pool serve --exec N` keeps N warm cordon processes on
// STATE/pool/exec.sock, each started ahead and holding one prepared slot
// of the pool's grant set. A `cordon exec` on that state directory hands
// itself to one of them before it initialises (package
// cmd/cordon/internal/handoff); the warm process checks that the caller
// could have run the command itself exactly as it would be run here,
// runs the same `cordon exec` code with the caller's arguments,
// environment, working directory and streams, answers the exit status,
// and exits. The server starts its successor.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/cmd/cordon/internal/handoff"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/sandbox/pool"
)

func residentSocket(state string) string {
	return filepath.Join(state, "pool", handoff.SocketName)
}

// servedExec is what a warm process tells `cordon exec` about the one
// run it serves.
type servedExec struct {
	state string            // the state directory this server serves
	slot  *pool.Pool        // the warm slot, one; nil: none was prepared
	ours  map[string]string // this process's context (residentContext)
	nonce string            // what a caller must have read in this process's environ
	held  *heldWriter
	start func() // tells the caller the run starts here
	// declined is set when the caller's command line names another state
	// directory: nothing has run, and the caller starts cold.
	declined string
	// after is what is left to do once the caller has its answer: the
	// served slot's destruction, whose run has ended (runLocal).
	after []func()
	// parsed is the server's grant set as grant.Parse returned it for
	// parsedBytes, before the caller came (a copy of its own, not the
	// slot's); grants hands it to an exec whose grant set has exactly
	// these bytes, once.
	parsedBytes []byte
	parsed      *grant.Set
}

// grants returns the grant set parsed from b ahead of the caller, when b
// is byte for byte what was parsed (grant.Parse depends on nothing else),
// and only once; otherwise nil, and the caller's exec parses b itself.
func (s *servedExec) grants(b []byte) *grant.Set {
	gs := s.parsed
	s.parsed = nil
	if gs == nil || !bytes.Equal(b, s.parsedBytes) {
		return nil
	}
	return gs
}

// afterAnswer has f run once the caller has been answered.
func (s *servedExec) afterAnswer(f func()) { s.after = append(s.after, f) }

// errDeclined ends a served exec that declined; its output is dropped.
var errDeclined = errors.New("declined")

// admit checks, before exec does anything but read its flags and grant
// set, that the caller's state directory is the one this server serves.
func (s *servedExec) admit(flagValue string) error {
	dir, err := resolveStateDir(flagValue)
	if err != nil || dir != s.state {
		s.declined = "the command names another state directory"
		return errDeclined
	}
	if s.start != nil {
		s.start()
	}
	s.held.release()
	return nil
}

// heldWriter holds what is written until release (then it is written
// through), so that a served exec that declines writes nothing.
type heldWriter struct {
	mu       sync.Mutex
	w        io.Writer
	buf      bytes.Buffer // guarded by mu
	released bool         // guarded by mu
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released {
		return h.buf.Write(p)
	}
	return h.w.Write(p)
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released {
		h.released = true
		_, _ = h.w.Write(h.buf.Bytes())
		h.buf.Reset()
	}
}

// residentChildren keeps n warm processes on the listener ln, each given
// the grant set's bytes, until ctx ends; it returns when they have all
// exited.
type residentChildren struct {
	state, tenant   string
	timeout, idle   time.Duration
	grants          []byte
	ln              *os.File
	life            *os.File // a pipe's read end: at EOF, the server is gone
	stderr          io.Writer
	served, started atomic.Int64
}

func (rc *residentChildren) run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := rc.one(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					fmt.Fprintf(rc.stderr, "cordon: pool: warm exec process: %s\n", oneLine(err.Error()))
					select { // a failing host is not hammered
					case <-ctx.Done():
						return
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	wg.Wait()
}

// one starts a warm process and waits for it: it serves at most one run.
func (rc *residentChildren) one(ctx context.Context) error {
	gr, gw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer gr.Close()
	args := []string{"pool", "warm", "--state", rc.state, "--max-idle", rc.idle.String()}
	if rc.tenant != "" {
		args = append(args, "--tenant", rc.tenant)
	}
	if rc.timeout > 0 {
		args = append(args, "--timeout", rc.timeout.String())
	}
	// /proc/self/exe: this very binary, even if the file was replaced.
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = "cordon"
	// The nonce a caller must read in the warm process's /proc/PID/environ
	// (docs/sandbox.md, "Resident exec server").
	var nb [handoff.NonceLen / 2]byte
	if _, err := rand.Read(nb[:]); err != nil {
		gw.Close()
		return err
	}
	// GORACE: a race-detector build would otherwise sleep a second at
	// the warm process's exit (after each served run, with the caller's
	// streams still held); 50 ms, as CI gives every other race-built
	// cordon. Other builds ignore it, and a served run gets the caller's
	// environment, not this one.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "CORDON_RESIDENT=" + handoff.Off, handoff.NonceEnv + "=" + hex.EncodeToString(nb[:]), "GORACE=atexit_sleep_ms=50"}
	cmd.Stdout = nil
	cmd.Stderr = rc.stderr
	// 3: the listener, 4: the grant set, 5: the lifeline (a warm process
	// cannot rely on the parent-death signal: the kernel clears it when
	// a thread that makes a sandbox's user namespace changes its ids).
	cmd.ExtraFiles = []*os.File{rc.ln, gr, rc.life}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		gw.Close()
		return err
	}
	rc.started.Add(1)
	_, werr := gw.Write(rc.grants)
	gw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if werr != nil {
			return werr
		}
		if err == nil {
			rc.served.Add(1)
		}
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return <-done
	}
}

// poolWarm is a warm process (`cordon pool warm`, started only by `cordon
// pool serve --exec`): descriptor 3 is the server's listening socket, 4
// the grant set. It prepares one slot, takes one connection and serves
// it.
func poolWarm(e *env, args []string) error {
	fs := flag.NewFlagSet("pool warm", flag.ContinueOnError)
	stateDir := fs.String("state", "", "")
	tenant := fs.String("tenant", "", "")
	timeout := durationVar(fs, "timeout", 0, "")
	maxIdle := durationVar(fs, "max-idle", 10*time.Minute, "")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	refuse := func(err error) error {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool warm: %w", err)}
	}
	if acc, err := unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc != 1 {
		return refuse(errors.New("descriptor 3 is not a listening socket: this process is started by 'cordon pool serve --exec', not by hand"))
	}
	if dom, err := unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != unix.AF_UNIX {
		return refuse(errors.New("descriptor 3 is not a unix socket"))
	}
	var st unix.Stat_t
	if err := unix.Fstat(5, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return refuse(errors.New("descriptor 5 is not the server's lifeline"))
	}
	// The server's going away (even by kill -9) ends this process, and a
	// run it serves, as a signal to a cold cordon does.
	unix.CloseOnExec(3) // neither is the sandbox's
	unix.CloseOnExec(5)
	go func() {
		life := os.NewFile(5, "lifeline")
		_, _ = io.Copy(io.Discard, life)
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}()
	nonce := os.Getenv(handoff.NonceEnv)
	if !handoff.ValidNonce(nonce) {
		return refuse(errors.New("no nonce from the server"))
	}
	_ = os.Unsetenv(handoff.NonceEnv) // not a served run's (its initial copy stays in /proc/PID/environ, where callers read it)
	gf := os.NewFile(4, "grants")
	gsBytes, err := io.ReadAll(io.LimitReader(gf, 1<<20+1))
	gf.Close()
	if err != nil || len(gsBytes) > 1<<20 {
		return refuse(errors.New("descriptor 4 does not carry a grant set"))
	}
	gs, err := grant.Parse(gsBytes)
	if err != nil {
		return refuse(err)
	}
	// A copy for the served exec (servedExec.grants): a run on the slot
	// has this grant set, and its parse (0.2 ms) is done now.
	parsed, err := grant.Parse(gsBytes)
	if err != nil {
		return refuse(err)
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return refuse(err)
	}
	spec, err := poolSpec(gs, *tenant, state, *timeout)
	if err != nil {
		return refuse(err)
	}
	// This process's context, read before any sandbox is prepared: a
	// thread that makes a sandbox's user namespace changes its own ids,
	// and when that thread is the main one, /proc/self shows them.
	ours, err := residentContext("self")
	if err != nil {
		return refuse(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Marks are recorded from here on (a clock read and an append each,
	// at most phase.MaxMarks), so that the slot's init sends its own with
	// its exit status; a caller that asks for phases (CORDON_PHASES) gets
	// them, and no other (serveHandoff).
	phase.Enable()
	p, err := pool.New(ctx, pool.Config{Spec: spec, Env: pool.EnvAddress(spec), Size: 1, MaxIdle: *maxIdle})
	if err != nil {
		return refuse(err)
	}
	defer p.Stop()
	// Take a connection only once the slot is ready (or its preparation
	// failed: then the run starts cold here, still without cordon's own
	// start), so that a waiting sibling with a slot serves first.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if st := p.Status(); st.Ready > 0 || st.LastErr != "" {
			break
		}
	}
	// The signal handling every exec sets up (signal.Notify) starts the
	// runtime's signal thread and loop once per process (0.3 ms): they
	// are started now, on SIGWINCH, whose disposition (ignored) Stop
	// leaves as it was, so that the served exec finds them running.
	warmCodecs()
	warmSig := make(chan os.Signal, 1)
	signal.Notify(warmSig, syscall.SIGWINCH)
	signal.Stop(warmSig)
	// Connections are taken until one is served: one that ends, or is
	// declined, before anything of this process changed leaves it
	// waiting for the next.
	for {
		cfd, _, err := unix.Accept4(3, unix.SOCK_CLOEXEC)
		if err != nil {
			unix.Close(3)
			return refuse(fmt.Errorf("accepting: %w", err))
		}
		conn := os.NewFile(uintptr(cfd), "caller")
		served := serveHandoff(conn, cfd, &servedExec{state: state, slot: p, ours: ours, nonce: nonce, parsedBytes: gsBytes, parsed: parsed})
		conn.Close()
		if served {
			unix.Close(3)
			return nil
		}
	}
}

// warmCodecs fills encoding/json's per-type caches for what a served exec
// encodes and decodes (its journal's entries, the exec decision's record,
// the slot's launch and its init's exit message), so that the caller
// does not wait while they are built (about 0.2 ms of a served run,
// measured). It depends on no caller's input; a type left out costs only
// that time.
func warmCodecs() {
	sandbox.PrepareCodecs()
	_ = grant.Decision{}.Record()
	for _, b := range []entry.Body{entry.Command{}, entry.Outputs{}, entry.Meter{}, entry.PoolClaim{}} {
		if v, err := entry.Encode(b); err == nil {
			_ = v.AppendJCS(nil)
		}
	}
}

// serveHandoff serves one caller on conn (descriptor cfd); it reports
// whether it changed this process (its working directory, environment,
// streams), after which the process serves no other.
func serveHandoff(conn *os.File, cfd int, s *servedExec) (served bool) {
	answer := func(line string) { _, _ = conn.Write([]byte(line + "\n")) }
	decline := func(why string) { answer("decline " + oneLine(why)) }
	// The caller is checked before it is told to send anything: a warm
	// process that cannot read the caller's /proc (one confined where
	// the caller is not) never asks for its command line and environment.
	peer, err := checkPeer(cfd, s.ours)
	if err != nil {
		decline(err.Error())
		return false
	}
	defer peer.close()
	answer("ready " + strconv.Itoa(os.Getpid()))
	nonce, args, environ, files, err := readHandoff(cfd)
	if err != nil {
		decline(err.Error())
		return false
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(s.nonce)) != 1 {
		// Only a process that may ptrace-read this one can read it.
		decline("the request does not carry this warm process's nonce (/proc/PID/environ)")
		return false
	}
	if len(args) < 2 || args[1] != "exec" {
		decline("not an exec command line")
		return false
	}
	wd, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(files[3].Fd())))
	if err != nil {
		decline("the working directory: " + err.Error())
		return false
	}
	if _, ok := handoff.StateFlag(args[2:], wd); !ok {
		decline("a command line the hand-off does not take (an unknown flag, or a path that may name the process's own files)")
		return false
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(handoff.ProcessFileEnv, k) && handoff.NamesProcessFile(v, wd) {
			decline("$" + k + " may name the process's own files")
			return false
		}
	}
	// A non-blocking stream would make a cold cordon's writes wait in the
	// runtime's poller and this process's fail (the caller does not hand
	// one off).
	for _, f := range files[:3] {
		if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
			decline("a non-blocking standard stream")
			return false
		}
	}
	// A cold cordon whose stdout or stderr reader goes away dies of
	// SIGPIPE at its next write there (and its sandbox with it); so does
	// the served run: the caller is told to die of it, and this process
	// exits at once (the sandbox's init dies with it).
	brokenPipe := func(n int) {
		answer("sigpipe " + strconv.Itoa(n))
		os.Exit(141)
	}
	// The caller's working directory, environment, file mode mask and
	// standard descriptors (/dev/stdin and /proc/self/fd/0-2 are the
	// caller's, as in a cold cordon). This process's own are kept, and
	// put back before the answer: once the caller exits, nothing holds
	// its streams (a reader of its stdout sees the end), as after a cold
	// cordon's exit.
	served = true
	if err := unix.Fchdir(int(files[3].Fd())); err != nil {
		decline("the working directory: " + err.Error())
		return served
	}
	var own [3]int
	for i := range own {
		fd, err := unix.FcntlInt(uintptr(i), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			decline("the standard descriptors: " + err.Error())
			return served
		}
		own[i] = fd
	}
	defer func() {
		for _, fd := range own {
			unix.Close(fd)
		}
	}()
	for i, f := range files[:3] {
		if err := unix.Dup3(int(f.Fd()), i, 0); err != nil {
			decline("the standard descriptors: " + err.Error())
			return served
		}
	}
	os.Clearenv()
	for _, kv := range environ { // the first of a name wins, as the runtime reads it
		k, v, _ := strings.Cut(kv, "=")
		if _, set := os.LookupEnv(k); !set {
			_ = os.Setenv(k, v)
		}
	}
	unix.Umask(peer.umask)
	// Signal 32, which Go leaves alone: ignored where the caller ignores
	// it, so that the program inherits it as from a cold cordon.
	act := [4]uintptr{} // struct sigaction: SIG_DFL
	if peer.ignore32 {
		act[0] = 1 // SIG_IGN
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, 32, uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
		decline("signal 32: " + e.Error())
		return served
	}
	// The context was checked when the caller connected; that it is
	// still the caller (a process identity, not a reused pid) is checked
	// now that its /proc files have been read.
	if err := peer.alive(); err != nil {
		decline(err.Error())
		return served
	}
	// The caller's going away ends the run, as a signal to a cold cordon
	// does: the run is killed, its journal ended.
	var finished atomic.Bool
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:]) // the caller sends nothing more: this returns at its end
		if !finished.Load() {
			_ = unix.Kill(os.Getpid(), unix.SIGTERM)
		}
	}()
	phase.Reset() // the slot's preparation's are no caller's
	phase.Disable()
	if os.Getenv(phasesEnv) != "" { // the caller's phases: its spawn, then this process's marks ("main" is the hand-off)
		startPhases()
	}
	s.held = &heldWriter{w: &callerStream{f: files[2], n: 2, broken: brokenPipe}}
	s.start = func() { answer("start") }
	e := &env{stdin: files[0], stdout: &callerStream{f: files[1], n: 1, broken: brokenPipe}, stderr: s.held, served: s}
	code := dispatch(e, args[1:])
	finished.Store(true)
	if s.declined != "" {
		decline(s.declined)
		return served
	}
	s.held.release()
	printPhases(s.held)
	// The run has ended (its evidence written, its streams copied): this
	// process lets go of the caller's streams, then answers.
	for i, fd := range own {
		_ = unix.Dup3(fd, i, 0)
	}
	for _, f := range files[:3] {
		f.Close()
	}
	answer("exit " + strconv.Itoa(code))
	for _, f := range s.after {
		f()
	}
	return served
}

// callerStream is the caller's stdout (n 1) or stderr (n 2): a write
// that finds its reader gone (EPIPE) calls broken, as a write to a cold
// cordon's own stream raises SIGPIPE.
type callerStream struct {
	f      *os.File
	n      int
	broken func(n int)
	once   sync.Once
}

func (c *callerStream) Write(p []byte) (int, error) {
	n, err := c.f.Write(p)
	if errors.Is(err, unix.EPIPE) {
		c.once.Do(func() { c.broken(c.n) })
	}
	return n, err
}

// handoffRequestWait bounds how long a warm process waits for the
// request after its "ready": a caller sends it at once.
const handoffRequestWait = time.Second

// readHandoff reads the caller's request: its arguments, environment and
// four descriptors (stdin, stdout, stderr, working directory), within
// handoffRequestWait.
func readHandoff(cfd int) (nonce string, args, env []string, files []*os.File, err error) {
	// Each read waits at most what is left of firstRequestWait: a
	// socket's receive timeout is not restarted after a signal (the
	// runtime's preemption), so EINTR is retried here.
	deadline := time.Now().Add(handoffRequestWait)
	timed := func(read func() error) error {
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return unix.EAGAIN
			}
			tv := unix.NsecToTimeval(int64(left))
			if err := unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
			if err := read(); !errors.Is(err, unix.EINTR) {
				return err
			}
		}
	}
	head := make([]byte, len(handoff.Magic)+4)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn int
	err = timed(func() (err error) {
		n, oobn, _, _, err = unix.Recvmsg(cfd, head, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	})
	if errors.Is(err, unix.EAGAIN) {
		return "", nil, nil, nil, fmt.Errorf("no request within %s", handoffRequestWait)
	}
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("reading the request: %w", err)
	}
	if n == 0 {
		return "", nil, nil, nil, errors.New("the caller went away")
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return "", nil, nil, nil, err
		}
		for _, m := range msgs {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				return "", nil, nil, nil, err
			}
			fds = append(fds, got...)
		}
	}
	for i, fd := range fds {
		files = append(files, os.NewFile(uintptr(fd), [...]string{"stdin", "stdout", "stderr", "cwd"}[min(i, 3)]))
	}
	fail := func(msg string) (string, []string, []string, []*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return "", nil, nil, nil, errors.New(msg)
	}
	if len(files) != 4 {
		return fail(fmt.Sprintf("a request with %d descriptors, want 4", len(files)))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(files[3].Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fail("the working directory is not a directory")
	}
	for n < len(head) {
		var m int
		err := timed(func() (err error) { m, err = unix.Read(cfd, head[n:]); return err })
		if err != nil || m == 0 {
			return fail("a short request")
		}
		n += m
	}
	l, ok := handoff.Header(head)
	if !ok {
		return fail("not a hand-off request")
	}
	body := make([]byte, l)
	for got := 0; got < l; {
		var m int
		err := timed(func() (err error) { m, err = unix.Read(cfd, body[got:]); return err })
		if err != nil || m == 0 {
			return fail("a short request")
		}
		got += m
	}
	nonce, args, env, ok = handoff.Decode(body)
	if !ok {
		return fail("a malformed request")
	}
	tv := unix.Timeval{}
	if err := unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail(err.Error())
	}
	return nonce, args, env, files, nil
}

// peer is the caller: its pid, a pidfd that pins it, and the file mode
// mask its files are made with.
type peer struct {
	pid      int
	pidfd    int
	umask    int
	ignore32 bool // the caller ignores real-time signal 32
}

func (p *peer) close() { unix.Close(p.pidfd) }

// alive reports whether the caller is still the process that connected:
// its pidfd can be signalled, so its pid was not reused.
func (p *peer) alive() error {
	if err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0); err != nil {
		return errors.New("the caller went away")
	}
	return nil
}

// checkPeer checks that the caller may be served: it runs as this
// process's uid and gid, and everything that bounds what a process can
// do (residentContext) is the same for it as for this process. Then a
// served run can do nothing the caller could not have done by running
// cordon exec cold.
func checkPeer(cfd int, ours map[string]string) (*peer, error) {
	cred, err := unix.GetsockoptUcred(cfd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return nil, fmt.Errorf("the caller's credentials: %v", err)
	}
	if int(cred.Uid) != os.Geteuid() || int(cred.Gid) != os.Getegid() {
		return nil, fmt.Errorf("the caller runs as uid %d gid %d, this server as uid %d gid %d", cred.Uid, cred.Gid, os.Geteuid(), os.Getegid())
	}
	// The caller's pidfd (Linux 6.5): without one, a caller that is gone
	// could have its pid taken by another process before it is read, and
	// be checked as that process.
	fd, err := unix.GetsockoptInt(cfd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		return nil, fmt.Errorf("no pidfd of the caller (SO_PEERPIDFD: %v; Linux 6.5 or later gives one)", err)
	}
	p := &peer{pid: int(cred.Pid), pidfd: fd}
	fail := func(err error) (*peer, error) {
		p.close()
		return nil, err
	}
	theirs, err := residentContext(strconv.Itoa(p.pid))
	if err != nil {
		return fail(fmt.Errorf("the caller's process: %v", err))
	}
	// What cannot be compared is not served: a tracer (which would not
	// see the served run), and a seccomp filter (only their number
	// shows).
	if theirs["TracerPid"] != "0" {
		return fail(fmt.Errorf("the caller is traced (pid %s)", theirs["TracerPid"]))
	}
	if theirs["Seccomp"] != "0" || ours["Seccomp"] != "0" {
		return fail(errors.New("a seccomp filter (which of them cannot be compared): the caller's or the server's"))
	}
	for _, k := range residentKeys {
		if theirs[k] != ours[k] {
			return fail(fmt.Errorf("the caller's %s differs from the server's (%q, %q)", k, theirs[k], ours[k]))
		}
	}
	// Ignored signals: Go's runtime keeps an inherited SIG_IGN only for
	// SIGHUP and SIGINT (nohup) and the real-time signal 32, which it
	// does not use; those pass to a cold cordon's program. SIGHUP and
	// SIGINT must be the server's; signal 32's is taken on below; any
	// other difference is declined.
	ti, err1 := strconv.ParseUint(theirs["SigIgn"], 16, 64)
	oi, err2 := strconv.ParseUint(ours["SigIgn"], 16, 64)
	const rt32 = 1 << 31
	if err1 != nil || err2 != nil || ti&^rt32 != oi&^rt32 {
		return fail(fmt.Errorf("the caller's ignored signals (SigIgn %s) differ from the server's (%s)", theirs["SigIgn"], ours["SigIgn"]))
	}
	p.ignore32 = ti&rt32 != 0
	um, err := strconv.ParseUint(theirs["Umask"], 8, 32)
	if err != nil || um > 0o777 {
		return fail(errors.New("the caller's file mode mask is unreadable"))
	}
	p.umask = int(um)
	if err := p.alive(); err != nil {
		return fail(err)
	}
	return p, nil
}

// residentKeys are what must be equal between the caller and the warm
// process: the credentials and confinement in /proc/PID/status, every
// namespace, the root directory, the cgroups (a run's cgroup is made
// under its cordon's own), the resource limits, the scheduling policy,
// real-time priority and nice value, the CPU and memory-node sets, the
// OOM score adjustment, the audit login and session, the ignored
// signals, the LSM label and the personality.
var residentKeys = []string{
	"Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "TracerPid",
	"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Cpus_allowed_list", "Mems_allowed_list",
	"ns/cgroup", "ns/ipc", "ns/mnt", "ns/net", "ns/pid", "ns/time", "ns/user", "ns/uts",
	"root", "cgroup", "limits", "nice", "policy", "rt_priority", "oom_score_adj", "loginuid", "sessionid",
	"attr/current", "personality",
}

// residentContext reads what residentKeys name for /proc/WHO, and the
// Umask.
func residentContext(who string) (map[string]string, error) {
	dir := "/proc/" + who
	m := map[string]string{}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for _, k := range []string{"Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "TracerPid", "SigIgn", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Umask"} {
		if _, ok := m[k]; !ok {
			return nil, fmt.Errorf("%s/status has no %s line", dir, k)
		}
	}
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"} {
		l, err := os.Readlink(dir + "/ns/" + ns)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		m["ns/"+ns] = l
	}
	var st unix.Stat_t
	if err := unix.Stat(dir+"/root", &st); err != nil {
		return nil, err
	}
	m["root"] = fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	for _, f := range []string{"cgroup", "limits", "attr/current", "personality", "oom_score_adj", "loginuid", "sessionid"} {
		b, err := os.ReadFile(dir + "/" + f)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.EINVAL) {
			return nil, err
		}
		m[f] = string(b)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pidOf(who))
	if err != nil {
		return nil, err
	}
	m["nice"] = strconv.Itoa(prio)
	stat, err := procStat(dir)
	if err != nil {
		return nil, err
	}
	m["rt_priority"], m["policy"] = stat[40-3], stat[41-3] // fields 40 and 41; the list starts at field 3
	return m, nil
}

func pidOf(who string) int {
	if who == "self" {
		return 0
	}
	n, _ := strconv.Atoi(who)
	return n
}

// procStat is /proc/PID/stat's fields from the third (the state) on.
func procStat(dir string) ([]string, error) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New(dir + "/stat: unreadable")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 39 {
		return nil, errors.New(dir + "/stat: unreadable")
	}
	return f, nil
}

// listenResident listens on the state directory's resident exec socket,
// as listenPrivate does (a 0700 directory of this uid, a 0600 socket, a
// stale one removed), but blocking and outside the net package: the warm
// processes accept on it themselves.
func listenResident(state string) (*os.File, error) {
	sock := residentSocket(state)
	// listenPrivate makes and checks the directory and removes a stale
	// socket; its listener is closed again at once (which unlinks it).
	l, err := listenPrivate(sock, "a resident exec server already serves %s: stop it first ('cordon pool stop')")
	if err != nil {
		return nil, err
	}
	l.Close()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	err = privateMode(fd) // not the umask: it is the whole process's (listenPrivate)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: sock})
	}
	if err == nil {
		err = unix.Chmod(sock, 0o600)
	}
	if err == nil {
		err = unix.Listen(fd, 128)
	}
	if err != nil {
		unix.Close(fd)
		_ = os.Remove(sock)
		return nil, err
	}
	return os.NewFile(uintptr(fd), sock), nil
}
