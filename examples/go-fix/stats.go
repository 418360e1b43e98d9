// Package stats has a bug for the agent to fix.
package stats

// Mean returns the arithmetic mean of xs, or 0 for none.
func Mean(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	sum := 0
	for _, x := range xs[1:] {
		sum += x
	}
	return sum / len(xs)
}
