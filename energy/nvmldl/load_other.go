//go:build !linux

package nvmldl

import "errors"

// Load reports no NVML: it is loaded on Linux only.
func Load() API { return unavailable{errors.New("NVML is loaded on Linux only")} }
