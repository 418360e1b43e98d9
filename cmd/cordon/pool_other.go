//go:build !linux

package main

import (
	"errors"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
)

var errPoolLinux = errors.New("warm pools need Linux's sandbox (docs/sandbox.md, \"Warm pools\")")

func runPool(*env, []string) error {
	return &refusal{code: sandbox.ExitRefused, err: errPoolLinux}
}

func newPoolSandbox(string, *session.Recorder, bool, bool, *servedExec, func(string)) (session.Sandbox, *poolView, error) {
	return nil, nil, errPoolLinux
}

// servedExec exists only on Linux, where a resident exec server can run.
type servedExec struct{}

func (*servedExec) admit(string) error { return errPoolLinux }

func (*servedExec) grants([]byte) *grant.Set { return nil }
