//go:build !linux

package main

import (
	"errors"

	"github.com/cordon-dev/cordon/sandbox"
)

var errFreezeLinux = errors.New("freezing a run needs Linux's sandbox and its cgroup freezer")

func (r *execRecorder) serve(string) (func(), error) { return nil, errFreezeLinux }

func runFreezeVerb(string) func(e *env, args []string) error {
	return func(*env, []string) error { return &refusal{code: sandbox.ExitRefused, err: errFreezeLinux} }
}
