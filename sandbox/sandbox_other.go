//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/tier"
)

var errNotLinux = fmt.Errorf("%w: the cordon sandbox needs Linux", errors.ErrUnsupported)

// Run is not supported on this system.
func Run(context.Context, *Spec) (*Result, error) {
	return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: %w", ErrUnavailable, errNotLinux)}
}

// Probe reports that no tier is available on this system.
func Probe(t tier.Tier) error { return fmt.Errorf("%w for %s: %w", ErrUnavailable, t, errNotLinux) }

// Offers returns no tiers on this system.
func Offers() []tier.Tier { return nil }
