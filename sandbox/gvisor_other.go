//go:build !linux

package sandbox

import "context"

// runGVisor is not supported on this system.
func runGVisor(context.Context, *Spec) (*Result, error) { return nil, unsupported() }
