//go:build !linux

package nvmldl

// Isolate does nothing: NVML is loaded on Linux only.
func Isolate() error { return nil }
