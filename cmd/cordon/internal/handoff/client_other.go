//go:build !linux || !(amd64 || arm64)

package handoff

// There is no resident exec server off Linux: cordon exec starts cold.
