//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

func unsupported() error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, runtime.GOOS, errors.ErrUnsupported)
}

func (c Config) probe() error { return unsupported() }

func (c Config) newGroup(string, Limits) (*Group, error) { return nil, unsupported() }

// New never returns a Group here, so these are never reached.

func (g *Group) add(int) error                   { return unsupported() }
func (g *Group) stats() (Stats, error)           { return Stats{}, unsupported() }
func (g *Group) kill() error                     { return unsupported() }
func (g *Group) joinFiles() ([]*os.File, error)  { return nil, unsupported() }
func (g *Group) leaveFiles() ([]*os.File, error) { return nil, unsupported() }
func (g *Group) remove() error                   { return unsupported() }

func (c Config) dirs(string) ([]string, error) { return nil, unsupported() }
func idle(string) (bool, error)                { return false, unsupported() }
func removeIdle(string) error                  { return unsupported() }

func (g *Group) freeze() error         { return unsupported() }
func (g *Group) thaw() error           { return unsupported() }
func (g *Group) frozen() (bool, error) { return false, unsupported() }
func (g *Group) procs() ([]int, error) { return nil, unsupported() }

func frozenLeftover([]string) (bool, error)    { return false, unsupported() }
func killFrozen([]string, bool) ([]int, error) { return nil, unsupported() }
