package stats

import "testing"

func TestMean(t *testing.T) {
	for _, c := range []struct {
		xs   []int
		want int
	}{
		{nil, 0},
		{[]int{4}, 4},
		{[]int{2, 4, 6}, 4},
	} {
		if got := Mean(c.xs); got != c.want {
			t.Errorf("Mean(%v) = %d, want %d", c.xs, got, c.want)
		}
	}
}
