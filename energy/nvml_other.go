//go:build !linux

package energy

// loadNVML reports no NVML: it is loaded on Linux only.
func loadNVML() nvmlAPI { return nil }
