package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// defaultExecGrants is the grant set of a `cordon exec` without --grants:
// untrusted code, a fixed list of common runtime tools by name, no
// network, no environment, and the default limits.
//
//go:embed defaults/exec-grants.json
var defaultExecGrants []byte

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// exitStatus makes run return a status without printing anything more.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// refusal is an error that exits 125 (or 126, 127), printed as usual.
type refusal struct {
	code int
	err  error
}

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

func runExec(e *env, args []string) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	grantsFile := fs.String("grants", "", "the grant set (default: the embedded one; see docs/sandbox.md)")
	workspace := fs.String("workspace", "", "the host directory inputs come from and outputs return to")
	var ins, outs listFlag
	fs.Var(&ins, "in", "a workspace-relative file or directory to stage into /work (repeatable)")
	fs.Var(&outs, "out", "a workspace-relative path to copy back after the run (repeatable)")
	timeout := durationVar(fs, "timeout", 0, "wall-clock limit, at most the grant set's wall_ms")
	receiptFile := fs.String("receipt", "", "write a signed receipt here (needs --key, $CORDON_KEY or $CORDON_KEY_FILE)")
	keyFile := fs.String("key", "", "the steward key that signs the receipt (default: $CORDON_KEY, the key's PEM text, or the file $CORDON_KEY_FILE names)")
	tenant := fs.String("tenant", "", "the tenant of a multi-tenant (S3) run")
	journalFile := fs.String("journal", "", "append the run's decisions (exec, every egress request) and its outcome to this journal (JSON lines, hash-chained)")
	stats := fs.Bool("stats", false, "print the run's exit status, wall time, CPU time and peak memory to stderr")
	asJSON := fs.Bool("json", false, "with --stats: print them as one JSON object on stderr (stdout is the program's)")
	stateDir := fs.String("state", "", "cordon's state directory (default: $CORDON_STATE, /var/lib/cordon as root, else $XDG_STATE_HOME/cordon or ~/.local/state/cordon)")
	powercap := fs.String("powercap", energy.DefaultPowercap, "the powercap tree whose RAPL counters meter the CPU's energy for the receipt")
	envFile := fs.String("env", "", "run in this environment manifest (cordon env ingest; DSSE-signed with --env-pubkey): its image must be --image's, and its variables are set where the grant set names them")
	envPub := fs.String("env-pubkey", "", "the public key (PEM) a signed --env manifest must verify under")
	usePool := fs.Bool("pool", false, "claim a warm slot from the resident pool ('cordon pool serve'); without one the run is refused")
	poolCold := fs.Bool("pool-fallback-cold", false, "with --pool: start cold when no resident pool, or no matching slot, is there")
	recordFile := fs.String("record", "", "write the run's durable record here (execute, suspend, resume, …, close; docs/SPEC.md §9.5), with its head signed beside it (FILE.head) when a key is given; 'cordon freeze RUN' and 'cordon thaw RUN' freeze and thaw the run")
	imageRef := fs.String("image", "", "run on this OCI image's runtime instead of the host's: an OCI layout directory (DIR or DIR@sha256:…) or a docker save tarball, unpacked into the state directory's cache")
	fs.SetOutput(discard{})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{fs: fs}
		}
		return flagError(fs, err)
	}
	if *asJSON && !*stats {
		return &usageError{msg: "exec: --json needs --stats", hint: "pass --stats --json for the run's figures as JSON on stderr"}
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return &usageError{msg: "exec: no program given", hint: "usage: cordon exec [flags] -- PROGRAM [ARG…]"}
	}
	if e.served != nil { // a resident server's warm process: nothing is read or written before this
		if err := e.served.admit(*stateDir); err != nil {
			return err
		}
	}
	refuse := func(err error) error { return &refusal{code: sandbox.ExitRefused, err: err} }

	gsBytes, gsName := defaultExecGrants, "the embedded default grant set"
	if *grantsFile == "" {
		if b, note, err := rootlessDefaultGrants(); err != nil {
			return refuse(fmt.Errorf("exec: %w", err))
		} else if b != nil {
			fmt.Fprintln(e.stderr, "cordon: note: exec: "+note)
			gsBytes, gsName = b, "the embedded default grant set, less its memory limit"
		}
	}
	if *grantsFile != "" {
		b, err := os.ReadFile(*grantsFile)
		if err != nil {
			return refuse(fmt.Errorf("exec: --grants: %w", err))
		}
		gsBytes, gsName = b, *grantsFile
	}
	var gs *grant.Set
	if e.served != nil {
		gs = e.served.grants(gsBytes) // the same bytes, parsed before the caller came; or nil
	}
	if gs == nil {
		var err error
		if gs, err = grant.Parse(gsBytes); err != nil {
			return refuse(fmt.Errorf("exec: %s: %w", gsName, err))
		}
	}
	limits, err := execLimits(gs, *timeout)
	if err != nil {
		return refuse(fmt.Errorf("exec: %s: %w", gsName, err))
	}
	var key *sign.PrivateKey
	if *receiptFile != "" {
		k, err := stewardKey(*keyFile)
		if err != nil {
			return refuse(fmt.Errorf("exec: %w", err))
		}
		if k == nil {
			return &usageError{msg: "exec: --receipt needs a key", hint: "pass --key FILE, or set $CORDON_KEY to the key's PEM text or $CORDON_KEY_FILE to its path (make one with 'cordon keygen')"}
		}
		key = k
		for _, f := range []string{*receiptFile, *receiptFile + ".unit.json"} {
			if _, err := os.Lstat(f); err == nil {
				return refuse(fmt.Errorf("exec: --receipt: %s exists; a receipt is never written over", f))
			}
		}
	} else if *keyFile != "" && *recordFile == "" {
		return &usageError{msg: "exec: --key given without --receipt or --record"}
	}
	if *recordFile != "" {
		if *usePool {
			return &usageError{msg: "exec: --record with --pool", hint: "a pooled run runs in the resident pool's process, which cannot freeze it for this one: drop --pool to record and freeze the run"}
		}
		if key == nil {
			k, err := stewardKey(*keyFile)
			if err != nil {
				return refuse(fmt.Errorf("exec: %w", err))
			}
			key = k // nil: the record's head is not signed
		}
		for _, f := range []string{*recordFile, *recordFile + ".head"} {
			if _, err := os.Lstat(f); err == nil {
				return refuse(fmt.Errorf("exec: --record: %s exists; a record is never written over", f))
			}
		}
	}
	if *receiptFile != "" && *powercap != energy.DefaultPowercap && *journalFile == "" {
		// The receipt does not say which tree metered it; the journal's
		// meter entry does, so a receipt metered from another tree needs it.
		return &usageError{msg: "exec: --powercap other than " + energy.DefaultPowercap + " with --receipt needs --journal",
			hint: "the journal's meter entry records which powercap tree measured the receipt's energy"}
	}
	if *poolCold && !*usePool {
		return &usageError{msg: "exec: --pool-fallback-cold needs --pool"}
	}
	if *usePool && *receiptFile != "" && *journalFile == "" {
		// The slot's idle energy is a pool.claim journal entry and the
		// receipt's pool-idle record: the verifier checks one against the
		// other (docs/SPEC.md §12.4).
		return &usageError{msg: "exec: --pool with --receipt needs --journal", hint: "the journal's pool.claim entry records the idle energy the run is charged with"}
	}
	phase.Add("exec: flags and grants")
	state, err := execStateDir(*stateDir)
	if err != nil {
		return refuse(fmt.Errorf("exec: %w", err))
	}
	var img *sandbox.ImageRuntime
	if *imageRef != "" && selection.Required(gs) == tier.S4 { // refused before the image is unpacked (sandbox.Spec.Image)
		return refuse(withHint(fmt.Errorf("exec: --image: %s requires S4, and an image runtime is not available at S4 (gVisor)", gsName),
			"run the image with a grant set that requires S2 or S3, or drop --image; see docs/sandbox.md, \"Image runtime\""))
	}
	if *imageRef != "" {
		if img, err = execImage(state, *imageRef); err != nil {
			return refuse(fmt.Errorf("exec: --image: %w", err))
		}
	}
	var renv *appliedEnv
	if *envFile != "" {
		if renv, err = loadRunEnv(e, *envFile, *envPub, img, gs); err != nil {
			return refuse(fmt.Errorf("exec: --env: %w", err))
		}
	} else if *envPub != "" {
		return &usageError{msg: "exec: --env-pubkey given without --env"}
	}
	ws := ""
	if *workspace != "" {
		ws, err = filepath.Abs(*workspace)
		if err != nil {
			return refuse(err)
		}
	}
	// Every file of evidence cordon writes: none may be one the program
	// can write, or one its outputs are copied onto.
	var evidence []evidencePath
	if *receiptFile != "" {
		evidence = append(evidence, evidencePath{"--receipt", *receiptFile}, evidencePath{"--receipt", *receiptFile + ".unit.json"})
	}
	if *recordFile != "" {
		evidence = append(evidence, evidencePath{"--record", *recordFile}, evidencePath{"--record", *recordFile + ".head"})
	}
	if *journalFile != "" {
		evidence = append(evidence, evidencePath{"--journal", *journalFile})
	}
	for _, ev := range evidence {
		if err := evidenceOutsideProgram(gs, ws, outs, ev.file); err != nil {
			return refuse(fmt.Errorf("exec: %s: %w", ev.flag, err))
		}
	}
	vars := map[string]string{}
	for _, name := range gs.Env {
		if v, ok := os.LookupEnv(name); ok {
			vars[name] = v
		}
	}
	if renv != nil { // the environment's values win over the operator's
		for k, v := range renv.Vars {
			vars[k] = v
		}
	}
	var rec *session.Recorder
	if *journalFile != "" {
		w, err := journal.Open(*journalFile)
		if err != nil {
			return refuse(fmt.Errorf("exec: --journal: %w", err))
		}
		defer w.Close()
		rec = session.NewRecorder(w, nil)
		if noted, err := rec.NoteUnfinished(); err != nil {
			return refuse(fmt.Errorf("exec: --journal: %w", err))
		} else if noted {
			fmt.Fprintf(e.stderr, "cordon: note: exec: %s ended inside a command whose process was killed; recorded as command.unfinished\n", *journalFile)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var caught atomic.Value // the os.Signal that interrupted the run
	go func() {
		select {
		case sig := <-sigs:
			caught.Store(sig)
			cancel()
		case <-ctx.Done():
		}
	}()
	var (
		ctl *sandbox.Control
		rr  *execRecorder
	)
	if *recordFile != "" {
		envID := execRuntime(img)
		if renv != nil {
			envID = renv.ID
		}
		ctl = sandbox.NewControl()
		if rr, err = newExecRecorder(*recordFile, execManifest(argv, ins, outs), gs.ID(), envID, limits, ctl, cancel); err != nil {
			return refuse(fmt.Errorf("exec: --record: %w", err))
		}
		defer func() { // every path that does not finish the record below
			if err := rr.finish(nil, canon.ID{}, key); err != nil {
				fmt.Fprintf(e.stderr, "cordon: error: exec: --record: %s\n", oneLine(err.Error()))
			}
		}()
		stop, err := rr.serve(state)
		if err != nil {
			return refuse(fmt.Errorf("exec: --record: %w", err))
		}
		defer stop()
		fmt.Fprintf(e.stderr, "cordon: note: exec: run %s: freeze it with 'cordon freeze %s', thaw it with 'cordon thaw %s'\n", rr.runID, rr.runID, rr.runID)
	}
	var (
		pooled   session.Sandbox
		poolNote *poolView
	)
	// A warm process's slot serves a plain exec too, when the run could
	// be pooled: not frozen (--record), not on an image, and with the
	// slot's idle energy in the journal if there is a receipt.
	warm := e.served != nil && *recordFile == "" && *imageRef == "" && (*receiptFile == "" || *journalFile != "")
	if *usePool || warm {
		var local *servedExec
		if warm {
			local = e.served
		}
		if pooled, poolNote, err = newPoolSandbox(state, rec, *poolCold, *usePool, local, func(msg string) { fmt.Fprintln(e.stderr, "cordon: note: exec: "+msg) }); err != nil {
			return refuse(fmt.Errorf("exec: --pool: %w", err))
		}
	}
	s, err := session.Open(ctx, session.Config{
		Grants: gs, Tenant: *tenant, StateDir: state, Workspace: ws, Recorder: rec, Powercap: *powercap, Version: version, Sandbox: pooled,
		OnEgress: func(r egress.Record) {
			if !r.Allow || r.Error != "" {
				fmt.Fprintln(e.stderr, "cordon: "+oneLine(r.String()))
			}
		},
	})
	if err != nil {
		return refuse(fmt.Errorf("exec: %w", err))
	}
	defer s.Close()
	phase.Add("exec: session opened")
	if plan := s.Plan(); plan.Err == nil && *tenant != "" && plan.Required != tier.S3 {
		return refuse(fmt.Errorf("exec: sandbox: refused: tenant %q given for a single-tenant (%s) run", *tenant, plan.Required))
	}
	out, err := s.Exec(ctx, session.Command{
		Argv: argv, Inputs: ins, Outputs: outs, Env: vars, Wall: limits.Wall,
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, Image: img, Control: ctl,
	})
	if rr != nil {
		rr.mu.Lock()
		refused := rr.refused
		rr.mu.Unlock()
		if refused != nil {
			_, _ = s.StopMeters()
			return refuse(fmt.Errorf("exec: %w; the run was killed", refused))
		}
	}
	if sig, ok := caught.Load().(os.Signal); ok {
		code := 130
		if sig == syscall.SIGTERM {
			code = 143
		}
		fmt.Fprintf(e.stderr, "cordon: error: exec: interrupted by %s; the run was killed\n", signalName(sig))
		if _, err := s.StopMeters(); err != nil { // the journal ends as every run's does
			fmt.Fprintf(e.stderr, "cordon: error: exec: journal: %s\n", oneLine(err.Error()))
		}
		return &exitStatus{code: code}
	}
	if err != nil {
		var ee *sandbox.ExitError
		switch {
		case errors.As(err, &ee):
			return &refusal{code: ee.Code, err: fmt.Errorf("exec: %w", err)}
		case errors.Is(err, session.ErrNoTier):
			return refuse(withHint(fmt.Errorf("exec: %w", s.Plan().Err), "cordon runs untrusted code only inside its sandbox (S2, or S3 with --tenant); see docs/sandbox.md"))
		}
		return refuse(fmt.Errorf("exec: %w", err))
	}
	phase.Add("exec: session exec")
	res := out.Result
	if res.TimedOut {
		fmt.Fprintf(e.stderr, "cordon: error: exec: %s: killed after the wall-clock limit of %s\n", argv[0], limits.Wall)
	}
	if res.OOMKills > 0 {
		fmt.Fprintf(e.stderr, "cordon: note: exec: the run hit its memory limit of %d bytes (%d OOM kills)\n", limits.MemoryBytes, res.OOMKills)
	}
	switch {
	case res.OutputsErr != nil && len(res.Outputs) > 0:
		// stage.Out put every output in place but could not remove an
		// old copy it had moved aside.
		fmt.Fprintf(e.stderr, "cordon: error: exec: the outputs are in place, but cleaning up after them failed: %s\n", oneLine(res.OutputsErr.Error()))
	case res.OutputsErr != nil && res.ExitCode != 0:
		fmt.Fprintf(e.stderr, "cordon: error: exec: %s exited %d, and its declared outputs were not copied back (the workspace is unchanged): %s\n", argv[0], res.ExitCode, oneLine(res.OutputsErr.Error()))
	case res.OutputsErr != nil:
		fmt.Fprintf(e.stderr, "cordon: error: exec: outputs not copied back, the workspace is unchanged: %s\n", oneLine(res.OutputsErr.Error()))
	}
	if *stats && !*asJSON && e.served != nil {
		fmt.Fprintf(e.stderr, "cordon: exec: served by a warm process (pid %d) of the resident exec server\n", os.Getpid())
	}
	if *stats && poolNote != nil && poolNote.note() != "" && !(*asJSON && e.served != nil && !*usePool) {
		fmt.Fprintln(e.stderr, "cordon: pool: "+poolNote.note())
	}
	if *stats && *asJSON {
		if err := writeExecStats(e.stderr, res, gs, out.Egress); err != nil {
			return refuse(err)
		}
	} else if *stats {
		fmt.Fprintf(e.stderr, "cordon: run: tier %s, exit %d, wall %.1f ms, cpu %.1f ms, peak memory %d KiB, host uid %d\n",
			res.Tier, res.ExitCode, float64(res.Wall().Microseconds())/1e3, float64(res.CPUNanos)/1e6, res.PeakMemoryBytes>>10, res.HostUID)
		if len(gs.Egress) > 0 {
			st := out.Egress
			fmt.Fprintf(e.stderr, "cordon: egress: %d connections, %d denied, %d bytes up, %d bytes down", st.Conns, st.Denied, st.BytesUp, st.BytesDown)
			if st.Dropped > 0 {
				fmt.Fprintf(e.stderr, ", %d closed unrecorded past the cap", st.Dropped)
			}
			fmt.Fprintln(e.stderr)
		}
	}
	var receiptID canon.ID
	if *receiptFile != "" {
		var envID canon.ID
		if renv != nil {
			envID = renv.ID
		}
		charges, err := poolNote.charges()
		if err != nil {
			return refuse(fmt.Errorf("exec: receipt: %w", err))
		}
		if receiptID, err = writeExecReceipt(s, key, *receiptFile, argv, res, img, envID, charges); err != nil {
			return refuse(fmt.Errorf("exec: receipt: %w", err))
		}
	} else if _, err := s.StopMeters(); err != nil {
		return refuse(fmt.Errorf("exec: journal: %w", err))
	}
	if rr != nil {
		if err := rr.finish(res, receiptID, key); err != nil {
			return refuse(fmt.Errorf("exec: --record: %w", err))
		}
	}
	switch {
	case res.ExitCode != 0:
		return &exitStatus{code: res.ExitCode}
	case res.OutputsErr != nil:
		return &exitStatus{code: sandbox.ExitRefused}
	default:
		return &exitStatus{code: 0}
	}
}

// execStats is `cordon exec --stats --json`: one object on stderr.
type execStats struct {
	Tier            string       `json:"tier"`
	Exit            int          `json:"exit"`
	Signal          int          `json:"signal,omitempty"`
	TimedOut        bool         `json:"timed_out"`
	OOMKills        int64        `json:"oom_kills"`
	WallUS          int64        `json:"wall_us"`
	CPUNS           int64        `json:"cpu_ns"`
	PeakMemoryBytes int64        `json:"peak_memory_bytes"`
	HostUID         int          `json:"host_uid"`
	Egress          *egressStats `json:"egress,omitempty"`
}

type egressStats struct {
	Conns     int64 `json:"conns"`
	Denied    int64 `json:"denied"`
	Dropped   int64 `json:"dropped"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
}

func writeExecStats(w io.Writer, res *sandbox.Result, gs *grant.Set, eg egress.Stats) error {
	st := execStats{Tier: res.Tier.String(), Exit: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, OOMKills: res.OOMKills,
		WallUS: res.Wall().Microseconds(), CPUNS: res.CPUNanos, PeakMemoryBytes: res.PeakMemoryBytes, HostUID: res.HostUID}
	if len(gs.Egress) > 0 {
		st.Egress = &egressStats{Conns: eg.Conns, Denied: eg.Denied, Dropped: eg.Dropped, BytesUp: eg.BytesUp, BytesDown: eg.BytesDown}
	}
	b, err := json.Marshal(st)
	if err == nil {
		b, err = canon.JCS(b) // members sorted, as every --json output
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func signalName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// execLimits are the sandbox defaults narrowed or widened to what the
// grant set names; --timeout may only shorten the wall clock.
func execLimits(gs *grant.Set, timeout time.Duration) (sandbox.Limits, error) {
	l, err := sandbox.LimitsFor(gs)
	if err != nil {
		return l, err
	}
	if timeout < 0 {
		return l, fmt.Errorf("--timeout %s is negative", timeout)
	}
	if timeout > 0 {
		if timeout > l.Wall {
			return l, fmt.Errorf("--timeout %s exceeds the granted wall clock of %s", timeout, l.Wall)
		}
		l.Wall = timeout
	}
	return l, nil
}

// execStateDir returns the state directory, creating it (0700) if it
// does not exist.
func execStateDir(flagValue string) (string, error) {
	dir, err := resolveStateDir(flagValue)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// resolveStateDir is execStateDir's directory, absolute, not made.
func resolveStateDir(flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		dir = os.Getenv("CORDON_STATE")
	}
	if dir == "" {
		var err error
		if dir, err = defaultStateDir(os.Geteuid()); err != nil {
			return "", err
		}
	}
	return filepath.Abs(dir)
}

// defaultStateDir is the state directory of a process with effective uid
// euid that names none: /var/lib/cordon for root, and for another user
// $XDG_STATE_HOME/cordon, else ~/.local/state/cordon (the XDG base
// directory specification's default; a relative $XDG_STATE_HOME is
// ignored, as it says).
func defaultStateDir(euid int) (string, error) {
	if euid == 0 {
		return "/var/lib/cordon", nil
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: %w (pass --state)", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "cordon"), nil
}

// execUnit is the document a receipt's unit field addresses: what was
// asked to run, and with what.
func execUnit(argv []string, res *sandbox.Result, img *sandbox.ImageRuntime, env canon.ID) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"argv":[`)
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(a))
	}
	b.WriteString(`],"grants":` + jsonString(res.GrantsID.String()))
	if !env.IsZero() { // the environment manifest it ran in
		b.WriteString(`,"env":` + jsonString(env.String()))
	}
	if img != nil { // the runtime: the image's, by its digests
		b.WriteString(`,"image":{"config":` + jsonString(img.Config))
		if img.Manifest != "" {
			b.WriteString(`,"manifest":` + jsonString(img.Manifest))
		}
		b.WriteString(`}`)
	}
	b.WriteString(`,"inputs":{`)
	for i, f := range res.Inputs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(f.Path) + ":" + jsonString(f.ID.String()))
	}
	b.WriteString(`},"program":{"b3":` + jsonString(res.Program.B3.String()) + `,"path":` + jsonString(res.Program.Path) + `}`)
	b.WriteString(`,"tier":` + jsonString(res.Tier.String()) + `,"type":"cordon.exec.v1"}`)
	return canon.JCS([]byte(b.String()))
}

// writeExecReceipt seals the session: the exec unit document is the
// unit of work, the journal's last entry (when there is one) its root.
func writeExecReceipt(s *session.Session, k *sign.PrivateKey, file string, argv []string, res *sandbox.Result, img *sandbox.ImageRuntime, env canon.ID, charges []receipt.Device) (canon.ID, error) {
	unit, err := execUnit(argv, res, img, env)
	if err != nil {
		return canon.ID{}, err
	}
	sealed, err := s.Seal(k, session.SealInput{Unit: canon.Sum(unit), Exit: int64(res.ExitCode), Charges: charges})
	if err != nil {
		return canon.ID{}, err
	}
	if err := writeNew(file+".unit.json", unit); err != nil {
		return canon.ID{}, err
	}
	return sealed.ID, writeNew(file, sealed.Receipt)
}

// poolView is what `cordon exec --pool` learns of its claim: the --stats
// note, and the slot's idle charge.
type poolView struct {
	note func() string
	idle func() (uj uint64, provenance string, ok bool)
}

// charges are the receipt's records of the claim: the slot's idle
// energy as a pool-idle record (docs/SPEC.md §12.4), the figure of the
// journal's pool.claim entry; none without a claim (a cold run).
func (p *poolView) charges() ([]receipt.Device, error) {
	if p == nil {
		return nil, nil
	}
	uj, prov, ok := p.idle()
	if !ok {
		return nil, nil
	}
	if prov != receipt.Estimator {
		return nil, fmt.Errorf("the pool's idle charge has provenance %q; a receipt takes only an Estimator's here", prov)
	}
	return []receipt.Device{{Class: receipt.PoolIdleClass, Provenance: receipt.Estimator, EstimatedUJ: uj}}, nil
}

// evidencePath is a file of evidence cordon exec writes, and its flag.
type evidencePath struct{ flag, file string }

// evidenceOutsideProgram refuses a file of evidence (a receipt or its
// unit, a record or its head, a journal) that the program could decide:
// one beneath a path the grant set lets it write (receiptOutsideWritable),
// or one that a declared output is copied back onto, or beneath (an
// --out of the workspace ws naming the file, or a directory above it):
// the program's bytes would replace the evidence at the end of the run
// (red team freeze F4). Both paths are compared with their links resolved.
func evidenceOutsideProgram(gs *grant.Set, ws string, outs []string, file string) error {
	if err := receiptOutsideWritable(gs, file); err != nil {
		return err
	}
	if ws == "" || len(outs) == 0 {
		return nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	ev := resolveExisting(abs)
	for _, o := range outs {
		land := resolveExisting(filepath.Join(ws, o))
		if ev == land || strings.HasPrefix(ev, land+string(filepath.Separator)) || land == string(filepath.Separator) {
			return fmt.Errorf("%s is where the output --out %s is copied back (%s): the program's bytes would replace it; write it outside the declared outputs", file, o, land)
		}
	}
	return nil
}

// resolveExisting is p with the links of its longest existing prefix
// resolved (p is absolute and clean).
func resolveExisting(p string) string {
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// receiptOutsideWritable refuses a receipt whose directory lies beneath
// a path the grant set lets the program write (an rw or rwx fs rule):
// the program could swap the directory for a symbolic link, and cordon
// would write the receipt and its unit, as root, wherever it points
// (red team F9).
func receiptOutsideWritable(gs *grant.Set, file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	dir := filepath.Dir(abs)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	for i, r := range gs.FS {
		if r.Access&grant.Write == 0 || r.Path == "/work" || r.Path == "/tmp" {
			continue
		}
		if r.Path == "/" || dir == r.Path || strings.HasPrefix(dir, r.Path+"/") {
			return fmt.Errorf("%s lies beneath fs[%d] (%s %s), which the program may write: it could replace the directory with a link before cordon writes the receipt; write the receipt outside the writable paths", file, i, r.Access, r.Path)
		}
	}
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rootlessDefaultGrants returns, for a rootless cordon whose runs get no
// cgroup (sandbox.CgroupLimits), the embedded default grant set without
// its memory limit, which such a run cannot enforce (the sandbox refuses
// a grant set that names it), with the note that says so; nil otherwise.
// The grant set a receipt and journal record is then the one enforced.
func rootlessDefaultGrants() ([]byte, string, error) {
	why := sandbox.CgroupLimits()
	if why == nil {
		return nil, "", nil
	}
	b, err := withoutMemoryLimit(defaultExecGrants)
	if err != nil {
		return nil, "", err
	}
	return b, "rootless without cgroup limits (" + why.Error() + "): the run's memory and CPU are not limited, " +
		"so the default grant set's memory limit is left out (docs/sandbox.md, Rootless)", nil
}

// withoutMemoryLimit returns the grant set b without limits.memory_bytes.
func withoutMemoryLimit(b []byte) ([]byte, error) {
	var gs map[string]json.RawMessage
	if err := json.Unmarshal(b, &gs); err != nil {
		return nil, err
	}
	var limits map[string]json.RawMessage
	if err := json.Unmarshal(gs["limits"], &limits); err != nil {
		return nil, err
	}
	delete(limits, "memory_bytes")
	l, err := json.Marshal(limits)
	if err != nil {
		return nil, err
	}
	gs["limits"] = l
	return json.Marshal(gs)
}
