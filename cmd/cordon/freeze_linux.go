package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cordon-dev/cordon/sandbox"
)

// The control socket of a 'cordon exec --record' run is
// STATE/exec/RUN.sock, made as the pool's is (listenPrivate: directory
// 0700, socket 0600, both the caller's), and each connection's peer must
// be the same uid or root (SO_PEERCRED, peerAllowed); 'cordon freeze' and
// 'cordon thaw' check the socket and its server the same way
// (dialPrivate) before they send anything. One request per connection:
// a line {"op":"freeze"} or {"op":"thaw"}, answered by one freezeReply.

// execSocket is the control socket of run id in the state directory.
func execSocket(state, id string) string { return filepath.Join(state, "exec", id+".sock") }

// errExecUntrusted is a control socket, its directory or its server that
// is not this uid's or root's.
var errExecUntrusted = errors.New("untrusted exec control socket")

// serve listens on the run's control socket until stop is called.
func (r *execRecorder) serve(state string) (stop func(), err error) {
	sock := execSocket(state, r.runID)
	ln, err := listenPrivate(sock, "a run already serves %s")
	if err != nil {
		return nil, fmt.Errorf("the control socket: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return // closed by stop
			}
			r.handle(c)
		}
	}()
	return func() {
		ln.Close()
		<-done
		os.Remove(sock)
	}, nil
}

// handle answers one request; the requests of a run are handled one at
// a time.
func (r *execRecorder) handle(c *net.UnixConn) {
	defer c.Close()
	enc := json.NewEncoder(c)
	if err := peerAllowedTo(c, "freeze or thaw run "+r.runID); err != nil {
		_ = enc.Encode(freezeReply{Run: r.runID, Error: "refused: " + err.Error()})
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(firstRequestWait))
	line, err := bufio.NewReaderSize(c, 4096).ReadSlice('\n')
	if err != nil {
		_ = enc.Encode(freezeReply{Run: r.runID, Error: "reading the request: " + err.Error()})
		return
	}
	var req struct {
		Op string `json:"op"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		_ = enc.Encode(freezeReply{Run: r.runID, Error: "the request: " + err.Error()})
		return
	}
	var rep *freezeReply
	switch req.Op {
	case "freeze":
		rep, err = r.freeze()
	case "thaw":
		rep, err = r.thaw()
	default:
		err = fmt.Errorf("unknown op %q: want freeze or thaw", req.Op)
	}
	if err != nil {
		rep = &freezeReply{Run: r.runID, Error: err.Error()}
	}
	_ = enc.Encode(rep)
}

// runFreeze is 'cordon freeze RUN' and 'cordon thaw RUN'.
func runFreezeVerb(op string) func(e *env, args []string) error {
	return func(e *env, args []string) error {
		fs := flag.NewFlagSet(op, flag.ContinueOnError)
		stateDir := fs.String("state", "", "cordon's state directory, as the 'cordon exec --record' run was given (default: as exec's)")
		asJSON := fs.Bool("json", false, "print the answer as one JSON object")
		pos, err := parseFlags(fs, args)
		if err != nil {
			return err
		}
		if err := nArgs(op, pos, "RUN"); err != nil {
			return err
		}
		id := pos[0]
		if !validRunID(id) {
			return &usageError{msg: fmt.Sprintf("%s: %q is not a run id", op, id), hint: "a run id is the 16 hex digits 'cordon exec --record' prints when it starts"}
		}
		state, err := execStateDir(*stateDir)
		if err != nil {
			return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("%s: %w", op, err)}
		}
		c, err := dialPrivate(execSocket(state, id), errExecUntrusted, "no running 'cordon exec --record' run "+id+" (%s: %w)",
			"the run has ended, or it runs with another --state; 'cordon exec --record FILE' prints its run id when it starts")
		if err != nil {
			return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("%s: %w", op, err)}
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(c, "{\"op\":%q}\n", op); err != nil {
			return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("%s: %w", op, err)}
		}
		var rep freezeReply
		dec := json.NewDecoder(c)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("%s: run %s: reading the answer: %w", op, id, err)}
		}
		if rep.Error != "" {
			return &refusal{code: sandbox.ExitRefused, err: fmt.Errorf("%s: run %s: %s", op, id, rep.Error)}
		}
		if *asJSON {
			b, _ := json.Marshal(rep)
			fmt.Fprintf(e.stdout, "%s\n", b)
			return nil
		}
		switch op {
		case "freeze":
			fmt.Fprintf(e.stdout, "run %s frozen: %d processes, snapshot %s\n", id, len(rep.PIDs), rep.Snapshot)
		default:
			fmt.Fprintf(e.stdout, "run %s thawed after %d ms frozen: idle energy %d µJ (Estimator), snapshot %s\n", id, rep.ParkedMS, rep.IdleUJ, rep.Snapshot)
		}
		return nil
	}
}
