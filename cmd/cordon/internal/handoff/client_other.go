//go:build !linux

package handoff

// There is no resident exec server off Linux: cordon exec starts cold.
