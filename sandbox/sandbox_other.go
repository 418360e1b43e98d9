//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/tier"
)

var errNotLinux = fmt.Errorf("%w: the cordon sandbox needs Linux", errors.ErrUnsupported)

func unsupported() error {
	return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: %w", ErrUnavailable, errNotLinux)}
}

// Sandbox is one run's sandbox; this system has none.
type Sandbox struct{ _ [0]func() }

// Create is not supported on this system.
func Create(context.Context, *Spec) (*Sandbox, error) { return nil, unsupported() }

// Start is not supported on this system.
func (*Sandbox) Start() error { return unsupported() }

// Wait is not supported on this system.
func (*Sandbox) Wait() (*Result, error) { return nil, unsupported() }

// Destroy has nothing to undo on this system.
func (*Sandbox) Destroy() error { return nil }

// Probe reports that no tier is available on this system.
func Probe(t tier.Tier) error { return fmt.Errorf("%w for %s: %w", ErrUnavailable, t, errNotLinux) }

// Offers returns no tiers on this system.
func Offers() []tier.Tier { return nil }

// CgroupLimits reports nil on this system: it runs no sandbox at all
// (Probe and Create refuse), so no run here goes without a cgroup.
func CgroupLimits() error { return nil }

// Spawner starts sandbox init from a helper process; this system has
// none.
type Spawner struct{ _ [0]func() }

// StartSpawner is not supported on this system.
func StartSpawner() (*Spawner, error) { return nil, unsupported() }

// Close has nothing to end on this system.
func (*Spawner) Close() error { return nil }

// Prepared is a prepared sandbox; this system has none.
type Prepared struct{ _ [0]func() }

// Prepare is not supported on this system.
func Prepare(context.Context, *Spec) (*Prepared, error) { return nil, unsupported() }

// Check reports that this system has no prepared sandbox.
func (*Prepared) Check() error { return unsupported() }

// Start is not supported on this system.
func (*Prepared) Start(context.Context, *Launch) error { return unsupported() }

// Wait is not supported on this system.
func (*Prepared) Wait() (*Result, error) { return nil, unsupported() }

// Destroy has nothing to undo on this system.
func (*Prepared) Destroy() error { return nil }

// landlockSet is Linux's Landlock ruleset (initConfig names it).
type landlockSet struct{}
