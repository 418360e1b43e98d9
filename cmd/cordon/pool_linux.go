package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/sandbox/pool"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// `cordon pool serve` keeps a warm pool (package sandbox/pool) resident
// and serves it on a unix socket, STATE/pool/pool.sock (directory 0700,
// socket 0600): `cordon exec --pool` claims a slot there, `cordon pool
// status` reads the books and `cordon pool stop` stops it. Every
// connection's peer is checked (SO_PEERCRED): only the server's own uid,
// or root, may use it, since the server stages the claimer's workspace
// with its own rights.
//
// The wire: JSON lines. A claim's first line carries the claimer's stdin,
// stdout and stderr (SCM_RIGHTS), which the server relays, never hands
// on to the program. The server answers "claimed" (the slot and its idle
// charge) or an error, asks the claimer to record the exec decision and
// the fs grants' mounts (each answered ok or an error, which refuses the
// run), and ends with the result.

// poolRequest is a client's first line.
type poolRequest struct {
	Op     string      `json:"op"` // "claim", "status", "stop"
	Key    pool.Key    `json:"key,omitzero"`
	Launch *poolLaunch `json:"launch,omitempty"`
}

type poolLaunch struct {
	Argv            []string          `json:"argv"`
	Env             map[string]string `json:"env,omitempty"`
	Workspace       string            `json:"workspace,omitempty"`
	Inputs          []string          `json:"inputs,omitempty"`
	Outputs         []string          `json:"outputs,omitempty"`
	OutputsOptional bool              `json:"outputs_optional,omitempty"`
	WallNS          int64             `json:"wall_ns,omitempty"`
}

// poolReply is one server line.
type poolReply struct {
	Claimed  *poolCharge     `json:"claimed,omitempty"`
	Decision *grant.Decision `json:"decision,omitempty"`
	Mounts   []sandbox.Mount `json:"mounts,omitempty"`
	Result   *poolResult     `json:"result,omitempty"`
	Status   *pool.Status    `json:"status,omitempty"`
	Stopped  *pool.Totals    `json:"stopped,omitempty"`
	Error    string          `json:"error,omitempty"`
	Code     int             `json:"code,omitempty"` // with Error: the sandbox's exit code, when it has one
	Mismatch bool            `json:"mismatch,omitempty"`
	Empty    bool            `json:"empty,omitempty"`
}

type poolCharge struct {
	Slot          string `json:"slot"`
	IdleUJ        uint64 `json:"idle_uj"`
	Provenance    string `json:"provenance"`
	ParkedNS      int64  `json:"parked_ns"`
	IdlePerCoreUW uint64 `json:"idle_per_core_uw"`
	Cores         uint64 `json:"cores"`
}

// poolResult is a sandbox.Result on the wire.
type poolResult struct {
	sandbox.Result
	OutputsErr string `json:"outputs_err,omitempty"`
}

// poolAck is the client's answer to a decision or mounts line.
type poolAck struct {
	Error string `json:"error,omitempty"`
}

// claimWait bounds how long a claim waits for a slot when none is ready.
const claimWait = 10 * time.Second

func poolSocket(state string) string { return filepath.Join(state, "pool", "pool.sock") }

func runPool(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "pool: missing subcommand", hint: "use 'cordon pool serve', 'cordon pool status' or 'cordon pool stop'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "serve":
		return poolServe(e, args)
	case "status", "stop":
		return poolControl(e, sub, args)
	case "warm": // started by 'pool serve --exec' only (resident_linux.go)
		return poolWarm(e, args)
	default:
		return &usageError{msg: fmt.Sprintf("pool: unknown subcommand %q", sub), hint: "use serve, status or stop"}
	}
}

// poolSpec is the spec a pool's slots are prepared with, for a grant set
// and the wall clock (0: the grant set's), as session.Exec builds a
// command's.
func poolSpec(gs *grant.Set, tenant, state string, wall time.Duration) (*sandbox.Spec, error) {
	t := selection.Required(gs)
	if t != tier.S3 {
		tenant = ""
	} else if tenant == "" {
		return nil, errors.New("an S3 grant set needs --tenant")
	}
	limits, err := execLimits(gs, wall)
	if err != nil {
		return nil, err
	}
	return &sandbox.Spec{Grants: gs, Tier: t, Tenant: tenant, StateDir: state, Limits: limits}, nil
}

func poolServe(e *env, args []string) error {
	fs := flag.NewFlagSet("pool serve", flag.ContinueOnError)
	grantsFile := fs.String("grants", "", "the grant set every slot is prepared under (default: exec's embedded one)")
	size := fs.Int("size", 2, "slots kept ready")
	maxIdle := durationVar(fs, "max-idle", 10*time.Minute, "evict a slot parked longer than this (its idle energy becomes overhead)")
	timeout := durationVar(fs, "timeout", 0, "the slots' wall-clock limit, at most the grant set's wall_ms (a claim may shorten it)")
	tenant := fs.String("tenant", "", "the tenant of a multi-tenant (S3) grant set")
	stateDir := fs.String("state", "", "cordon's state directory (as exec's)")
	warmN := fs.Int("exec", 0, "also keep this many warm cordon processes on STATE/pool/exec.sock, each holding a slot: a plain 'cordon exec' on this state directory hands itself to one (docs/sandbox.md, \"Resident exec server\")")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *warmN < 0 || *warmN > 64 {
		return &usageError{msg: fmt.Sprintf("pool serve: --exec %d, want 0 to 64", *warmN)}
	}
	refuse := func(err error) error { return &refusal{code: sandbox.ExitRefused, err: err} }
	gsBytes, gsName := defaultExecGrants, "the embedded default grant set"
	if *grantsFile == "" {
		if b, _, err := rootlessDefaultGrants(); err != nil {
			return refuse(fmt.Errorf("pool serve: %w", err))
		} else if b != nil {
			gsBytes = b
		}
	} else {
		b, err := os.ReadFile(*grantsFile)
		if err != nil {
			return refuse(fmt.Errorf("pool serve: --grants: %w", err))
		}
		gsBytes, gsName = b, *grantsFile
	}
	gs, err := grant.Parse(gsBytes)
	if err != nil {
		return refuse(fmt.Errorf("pool serve: %s: %w", gsName, err))
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return refuse(fmt.Errorf("pool serve: %w", err))
	}
	spec, err := poolSpec(gs, *tenant, state, *timeout)
	if err != nil {
		return refuse(fmt.Errorf("pool serve: %s: %w", gsName, err))
	}
	// What sandbox.Prepare refuses is refused here, before any slot.
	switch {
	case len(gs.Egress) > 0:
		return refuse(withHint(fmt.Errorf("pool serve: %s has egress rules: its runs cannot be prepared ahead (the egress proxy is the run's)", gsName), "run such commands cold, with plain 'cordon exec'"))
	case spec.Tier == tier.S4:
		return refuse(fmt.Errorf("pool serve: %s requires S4 (gVisor), which has no prepared sandbox", gsName))
	}
	ln, err := listenPool(state)
	if err != nil {
		return refuse(fmt.Errorf("pool serve: %w", err))
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := pool.New(ctx, pool.Config{Spec: spec, Env: pool.EnvAddress(spec), Size: *size, MaxIdle: *maxIdle})
	if err != nil {
		return refuse(fmt.Errorf("pool serve: %w", err))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopped := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(stopped); ln.Close() }) }
	go func() {
		select {
		case <-sigs:
			stop()
		case <-stopped:
		}
	}()
	fmt.Fprintf(e.stderr, "cordon: pool: serving %d slots of policy %s, environment %s, on %s\n", *size, p.Key().Policy, p.Key().Env, poolSocket(state))
	if *warmN > 0 {
		rln, err := listenResident(state)
		if err != nil {
			p.Stop()
			return refuse(fmt.Errorf("pool serve: --exec: %w", err))
		}
		lifeR, lifeW, err := os.Pipe()
		if err != nil {
			rln.Close()
			p.Stop()
			return refuse(fmt.Errorf("pool serve: --exec: %w", err))
		}
		defer lifeW.Close() // held open until this process ends: the warm processes' lifeline
		defer lifeR.Close()
		rctx, rcancel := context.WithCancel(ctx)
		rc := &residentChildren{state: state, tenant: *tenant, timeout: *timeout, idle: *maxIdle, grants: gsBytes, ln: rln, life: lifeR, stderr: e.stderr}
		rdone := make(chan struct{})
		go func() {
			defer close(rdone)
			rc.run(rctx, *warmN)
		}()
		defer func() {
			// Stop: no warm process takes another caller (those waiting
			// in the backlog start cold), and each one serving a run has
			// it cancelled, as a claim's.
			_ = os.Remove(residentSocket(state))
			rcancel()
			<-rdone
			rln.Close()
		}()
		fmt.Fprintf(e.stderr, "cordon: pool: %d warm exec processes on %s\n", *warmN, residentSocket(state))
	}
	var conns sync.WaitGroup
	live := &poolConns{m: map[*net.UnixConn]bool{}}
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			break
		}
		if !live.add(c) {
			c.Close()
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer live.remove(c)
			defer c.Close()
			servePoolConn(ctx, p, c, func() { live.keep(c); stop() })
		}()
	}
	// Stopped: every connection but the one that asked to stop (and is
	// answered) is closed. An idle one goes; a claim's run is cancelled,
	// as when its claimer goes away.
	live.closeAll()
	tot := p.Stop()
	conns.Wait()
	b, _ := json.Marshal(tot)
	fmt.Fprintf(e.stderr, "cordon: pool: stopped; idle energy %s\n", b)
	return nil
}

// poolConns are a pool server's live connections.
type poolConns struct {
	mu     sync.Mutex
	m      map[*net.UnixConn]bool // guarded by mu: true for the connection that asked to stop
	closed bool                   // guarded by mu
}

// add tracks c, or reports false once the server has stopped.
func (pc *poolConns) add(c *net.UnixConn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return false
	}
	pc.m[c] = false
	return true
}

func (pc *poolConns) remove(c *net.UnixConn) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	delete(pc.m, c)
}

// keep exempts c (the stop request's connection) from closeAll.
func (pc *poolConns) keep(c *net.UnixConn) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if _, ok := pc.m[c]; ok {
		pc.m[c] = true
	}
}

// closeAll closes every tracked connection but the kept one, and every
// one added later.
func (pc *poolConns) closeAll() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.closed = true
	for c, kept := range pc.m {
		if !kept {
			c.Close()
		}
	}
}

// firstRequestWait bounds how long a new connection may take to send its
// request: one that sends nothing is closed, not waited for.
const firstRequestWait = 5 * time.Second

// listenPool listens on the state directory's pool socket (listenPrivate).
func listenPool(state string) (*net.UnixListener, error) {
	return listenPrivate(poolSocket(state), "a pool already serves %s: stop it first ('cordon pool stop')")
}

// listenPrivate listens on the unix socket sock: its directory is made
// 0700 (and must be the caller's and not open to others), a stale socket
// is removed (busy, with the socket's name, is the error when something
// answers there), and the socket is made 0600. The pool's socket and
// each 'cordon exec --record' control socket are made so.
func listenPrivate(sock, busy string) (*net.UnixListener, error) {
	dir := filepath.Dir(sock)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s must be a directory of uid %d with mode 0700 (it is uid %d, mode %#o): remove it or fix it", dir, os.Geteuid(), st.Uid, st.Mode&0o7777)
	}
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		return nil, fmt.Errorf(busy, sock)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// The socket is made 0600 by its own mode before bind (privateMode),
	// not by this process's umask: a umask changed for the moment would
	// apply to whatever another goroutine makes meanwhile (a slot's run
	// record directory, made 0600 without its search bit, and every run
	// on the state directory refused).
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = privateMode(int(fd)) }); cerr != nil {
			return cerr
		}
		return err
	}}
	l, err := lc.Listen(context.Background(), "unix", sock)
	if err != nil {
		return nil, err
	}
	ln := l.(*net.UnixListener)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// privateMode gives the unix socket fd, before it is bound, the mode
// 0600: Linux makes the bound file with the socket's own mode less the
// umask.
func privateMode(fd int) error {
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fmt.Errorf("making the socket private: %w", err)
	}
	return nil
}

// peerCred is the connection's peer's credentials (SO_PEERCRED: as of
// its connect or listen).
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}

// peerAllowed checks the connection's peer: the server's own uid or root.
func peerAllowed(c *net.UnixConn) error { return peerAllowedTo(c, "use the pool") }

// peerAllowedTo is peerAllowed; what the peer may not do names the
// server in the refusal.
func peerAllowedTo(c *net.UnixConn, what string) error {
	cred, err := peerCred(c)
	if err != nil {
		return err
	}
	if !trustedUID(cred.Uid) {
		return fmt.Errorf("uid %d may not %s of uid %d", cred.Uid, what, os.Geteuid())
	}
	return nil
}

// readFirst reads a connection's first line and the descriptors that
// came with it (at most three).
func readFirst(c *net.UnixConn) ([]byte, []*os.File, error) {
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(3*4))
	if err := c.SetReadDeadline(time.Now().Add(firstRequestWait)); err != nil {
		return nil, nil, err
	}
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if derr := c.SetReadDeadline(time.Time{}); err == nil {
		err = derr
	}
	if err != nil {
		return nil, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				return nil, nil, err
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "claimer's stream"))
			}
		}
	}
	if n == len(buf) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, errors.New("a request over 1 MiB")
	}
	return buf[:n], files, nil
}

func servePoolConn(ctx context.Context, p *pool.Pool, c *net.UnixConn, stop func()) {
	enc := json.NewEncoder(c)
	fail := func(err error, code int) { _ = enc.Encode(poolReply{Error: err.Error(), Code: code}) }
	if err := peerAllowed(c); err != nil {
		fail(fmt.Errorf("pool: refused: %w", err), sandbox.ExitRefused)
		return
	}
	line, files, err := readFirst(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		fail(fmt.Errorf("pool: reading the request: %w", err), sandbox.ExitRefused)
		return
	}
	var req poolRequest
	dec := json.NewDecoder(bufioFrom(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(fmt.Errorf("pool: the request: %w", err), sandbox.ExitRefused)
		return
	}
	switch req.Op {
	case "status":
		st := p.Status()
		_ = enc.Encode(poolReply{Status: &st})
	case "stop":
		stop()
		tot := p.Stop()
		_ = enc.Encode(poolReply{Stopped: &tot})
	case "claim":
		if req.Launch == nil || len(files) != 3 {
			fail(errors.New("pool: a claim needs a launch and three streams"), sandbox.ExitRefused)
			return
		}
		serveClaim(ctx, p, c, enc, req, files)
	default:
		fail(fmt.Errorf("pool: unknown op %q", req.Op), sandbox.ExitRefused)
	}
}

func bufioFrom(b []byte) io.Reader { return bufio.NewReader(&byteReader{b: b}) }

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func serveClaim(ctx context.Context, p *pool.Pool, c *net.UnixConn, enc *json.Encoder, req poolRequest, files []*os.File) {
	// A claim waits a while for a slot being prepared (back-to-back
	// claims outrun the refill), not forever.
	wctx, wcancel := context.WithTimeout(ctx, claimWait)
	cl, err := p.ClaimWait(wctx, req.Key)
	wcancel()
	if err != nil {
		_ = enc.Encode(poolReply{Error: err.Error(), Code: sandbox.ExitRefused, Mismatch: errors.Is(err, pool.ErrMismatch), Empty: errors.Is(err, pool.ErrEmpty)})
		return
	}
	defer cl.Destroy()
	ch := cl.Charge
	if err := enc.Encode(poolReply{Claimed: &poolCharge{Slot: cl.Slot, IdleUJ: ch.UJ, Provenance: ch.Provenance, ParkedNS: int64(ch.Parked),
		IdlePerCoreUW: ch.Model.IdlePerCoreUW, Cores: ch.Model.Cores}}); err != nil {
		return
	}
	// The claimer's acks, and its going away, which ends the run.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	acks := make(chan poolAck)
	go func() {
		defer cancel()
		dec := json.NewDecoder(c)
		for {
			var a poolAck
			if err := dec.Decode(&a); err != nil {
				return
			}
			select {
			case acks <- a:
			case <-ctx.Done():
				return
			}
		}
	}()
	ask := func(r poolReply) error {
		if err := enc.Encode(r); err != nil {
			return err
		}
		select {
		case a := <-acks:
			if a.Error != "" {
				return errors.New(a.Error)
			}
			return nil
		case <-ctx.Done():
			return errors.New("the claimer went away")
		}
	}
	l := req.Launch
	launch := &sandbox.Launch{
		Argv: l.Argv, Env: l.Env, Workspace: l.Workspace, Inputs: l.Inputs, Outputs: l.Outputs, OutputsOptional: l.OutputsOptional,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], Wall: time.Duration(l.WallNS),
		Decided: func(d grant.Decision) error { return ask(poolReply{Decision: &d}) },
		Mounted: func(m []sandbox.Mount) error { return ask(poolReply{Mounts: m}) },
	}
	var res *sandbox.Result
	if err = cl.Start(ctx, launch); err == nil {
		res, err = cl.Wait()
	}
	if err != nil {
		code := sandbox.ExitRefused
		var ee *sandbox.ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
		_ = enc.Encode(poolReply{Error: err.Error(), Code: code})
		return
	}
	pr := &poolResult{Result: *res}
	if res.OutputsErr != nil {
		pr.OutputsErr = res.OutputsErr.Error()
		pr.Result.OutputsErr = nil
	}
	_ = enc.Encode(poolReply{Result: pr})
}

func poolControl(e *env, op string, args []string) error {
	fs := flag.NewFlagSet("pool "+op, flag.ContinueOnError)
	stateDir := fs.String("state", "", "cordon's state directory (as exec's)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool %s: %w", op, err)}
	}
	c, err := dialPool(state)
	if err != nil {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool %s: %w", op, err)}
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(poolRequest{Op: op}); err != nil {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool %s: %w", op, err)}
	}
	var r poolReply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool %s: reading the reply: %w", op, err)}
	}
	if r.Error != "" {
		return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("pool %s: %s", op, r.Error)}
	}
	var v any = r.Status
	if op == "stop" {
		v = r.Stopped
	}
	b, err := json.Marshal(v)
	if err == nil {
		b, err = canon.JCS(b)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	return nil
}

// errPoolUntrusted is a pool socket, its directory or its server that is
// not this uid's or root's: nothing is sent to it, and no run falls back
// cold past it (someone else controls the state directory).
var errPoolUntrusted = errors.New("untrusted resident pool")

// dialPool connects to the state directory's resident pool, which must
// be this uid's or root's: the pool directory and the socket must be
// owned by the caller's euid or root, the directory not writable by group
// or others, and the process serving the socket (SO_PEERCRED) must run as the
// caller's euid or root. A claim sends the caller's standard streams and
// takes the answers as its run's result, so nothing is sent before these
// checks.
func dialPool(state string) (*net.UnixConn, error) {
	return dialPrivate(poolSocket(state), errPoolUntrusted, "no resident pool at %s: %w", "start one with 'cordon pool serve' (same --state and --grants)")
}

// dialPrivate connects to the unix socket sock, whose directory and
// socket must be owned by the caller's euid or root, the directory not
// writable by group or others, and whose serving process (SO_PEERCRED)
// must run as the caller's euid or root; untrusted wraps what fails
// those checks. absent (with the socket and the dial's error) and hint
// say what to do when nothing serves there.
func dialPrivate(sock string, untrusted error, absent, hint string) (*net.UnixConn, error) {
	for _, p := range []string{filepath.Dir(sock), sock} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				break // nothing there: the dial says so
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		want := uint32(unix.S_IFDIR)
		if p == sock {
			want = unix.S_IFSOCK
		}
		// The directory's mode decides who can put another socket in
		// its place; the socket's decides only who can connect (the
		// server checks its peers).
		if st.Mode&unix.S_IFMT != want || !trustedUID(st.Uid) || want == unix.S_IFDIR && st.Mode&0o022 != 0 {
			what := "a directory of uid %d or root, not writable by group or others"
			if want == unix.S_IFSOCK {
				what = "a socket of uid %d or root"
			}
			return nil, withHint(fmt.Errorf("%w: %s is uid %d, mode %#o: it must be "+what,
				untrusted, p, st.Uid, st.Mode&0o7777, os.Geteuid()),
				"use a state directory of your own (--state), or remove "+p)
		}
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, withHint(fmt.Errorf(absent, sock, err), hint)
	}
	cred, err := peerCred(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: the credentials of the process serving %s: %v", untrusted, sock, err)
	}
	if !trustedUID(cred.Uid) {
		c.Close()
		return nil, withHint(fmt.Errorf("%w: %s is served by pid %d of uid %d, not uid %d or root", untrusted, sock, cred.Pid, cred.Uid, os.Geteuid()),
			"use a state directory of your own (--state)")
	}
	return c, nil
}

// trustedUID reports whether uid is this process's euid or root.
func trustedUID(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// poolSandbox is session.Sandbox for `cordon exec --pool`: each Run
// claims a slot from the resident pool, records the slot's idle charge
// in the journal (entry pool.claim, before the command's entry), and
// runs the command there; the exec decision and the mounts are recorded
// by the session through the server's questions.
type poolSandbox struct {
	state    string
	claim    bool        // --pool: the resident pool's socket when the local slot does not serve
	local    *servedExec // a warm process's slot, tried first; nil: none
	rec      *session.Recorder
	fallback bool         // run cold when no pool or no matching slot is there
	note     func(string) // prints a note
	charge   *poolCharge  // the last claim's, for --stats
}

func (ps *poolSandbox) Offers() []tier.Tier     { return sandbox.Offers() }
func (ps *poolSandbox) Probe(t tier.Tier) error { return sandbox.Probe(t) }

func (ps *poolSandbox) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	refused := func(err error) error { return &sandbox.ExitError{Code: sandbox.ExitRefused, Err: err} }
	if s.Image != nil {
		return nil, refused(errors.New("pool: an image runtime is not pooled: run it without --pool"))
	}
	if ps.local != nil && ps.local.slot != nil {
		res, served, err := ps.runLocal(ctx, s)
		if served {
			return res, err
		}
		if !ps.claim { // a plain exec whose run the slot cannot take: cold, as without a server
			return sandbox.Run(ctx, s)
		}
	}
	c, err := dialPool(ps.state)
	if err != nil {
		if ps.fallback && !errors.Is(err, errPoolUntrusted) {
			ps.note("no resident pool (" + oneLine(err.Error()) + "): starting cold, as --pool-fallback-cold asks")
			return sandbox.Run(ctx, s)
		}
		return nil, refused(err)
	}
	defer c.Close()
	files, copied, err := poolStreams(s)
	if err != nil {
		return nil, refused(err)
	}
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
		files = nil
	}
	// Whatever the outcome, the outputs' copies end (the server closes
	// its descriptors when it is done) before the caller writes to the
	// same writers; this runs after closeFiles.
	defer waitCopied(copied, 5*time.Second)
	defer closeFiles()
	// The wall clock is the launch's; the key's policy leaves it out.
	req := poolRequest{Op: "claim", Key: pool.KeyFor(s, pool.EnvAddress(s)), Launch: &poolLaunch{
		Argv: s.Argv, Env: s.Env, Workspace: s.Workspace, Inputs: s.Inputs, Outputs: s.Outputs, OutputsOptional: s.OutputsOptional,
		WallNS: int64(s.Limits.Wall),
	}}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, refused(err)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := c.WriteMsgUnix(append(b, '\n'), unix.UnixRights(fds...), nil); err != nil {
		return nil, refused(fmt.Errorf("pool: sending the claim: %w", err))
	}
	closeFiles() // the server has its copies; the pipes end when it closes them
	dec := json.NewDecoder(c)
	enc := json.NewEncoder(c)
	go func() { // the run ends when the claimer's context does
		<-ctx.Done()
		c.Close()
	}()
	for {
		var r poolReply
		if err := dec.Decode(&r); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, refused(fmt.Errorf("pool: the resident pool went away: %w", err))
		}
		switch {
		case r.Error != "" && (r.Mismatch || r.Empty) && ps.fallback:
			ps.note("the resident pool refused the claim (" + oneLine(r.Error) + "): starting cold, as --pool-fallback-cold asks")
			closeFiles()
			waitCopied(copied, 5*time.Second) // the cold run writes to the same writers
			return sandbox.Run(ctx, s)
		case r.Error != "":
			code := r.Code
			if code == 0 {
				code = sandbox.ExitRefused
			}
			return nil, &sandbox.ExitError{Code: code, Err: fmt.Errorf("%w: pool: %s", sandbox.ErrRefused, r.Error)}
		case r.Claimed != nil:
			ch := r.Claimed
			ps.charge = ch
			e := pool.Claim{Slot: ch.Slot, Key: req.Key, Charge: pool.Charge{UJ: ch.IdleUJ, Provenance: ch.Provenance,
				Parked: time.Duration(ch.ParkedNS), Model: pool.IdleModel{IdlePerCoreUW: ch.IdlePerCoreUW, Cores: ch.Cores}}}
			if ps.rec != nil {
				if _, err := ps.rec.Record(e.Entry()); err != nil {
					return nil, refused(fmt.Errorf("pool: recording the claim: %w", err))
				}
			}
		case r.Decision != nil:
			var a poolAck
			if s.Decided != nil {
				if err := s.Decided(*r.Decision); err != nil {
					a.Error = err.Error()
				}
			}
			if err := enc.Encode(a); err != nil {
				return nil, refused(err)
			}
		case r.Mounts != nil:
			var a poolAck
			if s.Mounted != nil {
				if err := s.Mounted(r.Mounts); err != nil {
					a.Error = err.Error()
				}
			}
			if err := enc.Encode(a); err != nil {
				return nil, refused(err)
			}
		case r.Result != nil:
			res := r.Result.Result
			if r.Result.OutputsErr != "" {
				res.OutputsErr = errors.New(r.Result.OutputsErr)
			}
			// The server closes its copies of the streams after the
			// result: what the program wrote is copied out by then.
			waitCopied(copied, 5*time.Second)
			return &res, nil
		default:
			return nil, refused(errors.New("pool: an empty reply from the resident pool"))
		}
	}
}

// runLocal runs s in the warm process's own slot when its key is the
// slot's (served reports whether it did: otherwise nothing ran). The
// charge is recorded as a claim from the resident pool's is.
func (ps *poolSandbox) runLocal(ctx context.Context, s *sandbox.Spec) (res *sandbox.Result, served bool, err error) {
	p := ps.local.slot
	key := pool.KeyFor(s, pool.EnvAddress(s))
	cl, err := p.Claim(key)
	if err != nil {
		return nil, false, nil // another key, or no slot ready: not served here
	}
	destroy := true
	defer func() {
		if destroy {
			_ = cl.Destroy()
		}
	}()
	p.Stop() // a warm process serves one run: no successor here (the server starts one)
	ch := cl.Charge
	ps.charge = &poolCharge{Slot: cl.Slot, IdleUJ: ch.UJ, Provenance: ch.Provenance, ParkedNS: int64(ch.Parked),
		IdlePerCoreUW: ch.Model.IdlePerCoreUW, Cores: ch.Model.Cores}
	if ps.rec != nil {
		if _, err := ps.rec.Record(cl.Entry()); err != nil {
			return nil, true, &sandbox.ExitError{Code: sandbox.ExitRefused, Err: fmt.Errorf("pool: recording the claim: %w", err)}
		}
	}
	launch := &sandbox.Launch{
		Argv: s.Argv, Env: s.Env, Workspace: s.Workspace, Inputs: s.Inputs, Outputs: s.Outputs, OutputsOptional: s.OutputsOptional,
		Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, Wall: s.Limits.Wall, Decided: s.Decided, Mounted: s.Mounted,
	}
	if err := cl.Start(ctx, launch); err != nil {
		return nil, true, err
	}
	res, err = cl.Wait()
	if err == nil && !res.TimedOut {
		// Every process of the run is dead and reaped, and its streams
		// copied out (sandbox.Sandbox.Wait): what is left, init's exit
		// (its namespaces' teardown) and the cgroup's removal, is done
		// after the caller has its answer (serveHandoff).
		destroy = false
		ps.local.afterAnswer(func() { _ = cl.Destroy() })
	}
	return res, true, err
}

// poolStreams are the descriptors the claim passes for the spec's
// streams: a file as it is, anything else (or nil) through a pipe this
// process copies, /dev/null for nil.
func poolStreams(s *sandbox.Spec) ([]*os.File, *sync.WaitGroup, error) {
	var files []*os.File
	var copied sync.WaitGroup
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	// stdin
	switch in := s.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	case *os.File:
		f, err := dupFile(in)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		go func() {
			_, _ = io.Copy(w, in)
			w.Close()
		}()
		files = append(files, r)
	}
	for _, out := range []io.Writer{s.Stdout, s.Stderr} {
		switch o := out.(type) {
		case nil:
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			files = append(files, f)
		case *os.File:
			f, err := dupFile(o)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			files = append(files, f)
		default:
			r, w, err := os.Pipe()
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			copied.Add(1)
			go func() {
				defer copied.Done()
				_, _ = io.Copy(o, r)
				r.Close()
			}()
			files = append(files, w)
		}
	}
	return files, &copied, nil
}

func waitCopied(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// newPoolSandbox is the session.Sandbox of `cordon exec --pool`, and
// what reports the last claim's charge.
func newPoolSandbox(state string, rec *session.Recorder, fallback, claim bool, local *servedExec, note func(string)) (session.Sandbox, *poolView, error) {
	ps := &poolSandbox{state: state, rec: rec, fallback: fallback, claim: claim, local: local, note: note}
	return ps, &poolView{
		note: func() string {
			if ps.charge == nil {
				return ""
			}
			ch := ps.charge
			return fmt.Sprintf("slot %s, idle energy %d µJ (%s, %.1f ms parked)", ch.Slot, ch.IdleUJ, ch.Provenance, float64(ch.ParkedNS)/1e6)
		},
		idle: func() (uint64, string, bool) {
			if ps.charge == nil {
				return 0, "", false
			}
			return ps.charge.IdleUJ, ps.charge.Provenance, true
		},
	}, nil
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
