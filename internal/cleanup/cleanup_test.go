package cleanup

import (
	"errors"
	"slices"
	"testing"
)

// record returns a step that appends name to *log.
func record(log *[]string, name string) func() {
	return func() { *log = append(*log, name) }
}

func TestCleanReverseOrder(t *testing.T) {
	var log []string
	c := Make(record(&log, "a"))
	c.Add(record(&log, "b"))
	c.Add(nil)
	c.Add(record(&log, "c"))
	c.Clean()
	if want := []string{"c", "b", "a"}; !slices.Equal(log, want) {
		t.Errorf("Clean ran %v, want %v", log, want)
	}
	c.Clean()
	if len(log) != 3 {
		t.Errorf("a second Clean ran steps again: %v", log)
	}
}

func TestZeroValue(t *testing.T) {
	var c Cleanup
	c.Clean()
	c.Release()()
	var log []string
	c.Add(record(&log, "a"))
	c.Clean()
	if !slices.Equal(log, []string{"a"}) {
		t.Errorf("zero Cleanup ran %v", log)
	}
	if m := Make(nil); len(m.steps) != 0 {
		t.Errorf("Make(nil) holds %d steps", len(m.steps))
	}
}

func TestRelease(t *testing.T) {
	var log []string
	c := Make(record(&log, "a"))
	c.Add(record(&log, "b"))
	undo := c.Release()
	c.Clean() // released: nothing to do
	if len(log) != 0 {
		t.Fatalf("Clean after Release ran %v", log)
	}
	undo()
	undo()
	if want := []string{"b", "a"}; !slices.Equal(log, want) {
		t.Errorf("the released func ran %v, want %v once", log, want)
	}
	// Steps added after Release belong to c again, not to undo.
	c.Add(record(&log, "c"))
	c.Clean()
	if want := []string{"b", "a", "c"}; !slices.Equal(log, want) {
		t.Errorf("after Release, Add and Clean ran %v, want %v", log, want)
	}
}

// setup acquires n resources, failing at step fail (or never if fail is
// out of range), in the way the package documentation shows.
func setup(log *[]string, n, fail int) (undo func(), err error) {
	var cu Cleanup
	defer cu.Clean()
	for i := range n {
		if i == fail {
			return nil, errors.New("step failed")
		}
		*log = append(*log, "acquire "+string(rune('a'+i)))
		cu.Add(record(log, "release "+string(rune('a'+i))))
	}
	return cu.Release(), nil
}

func TestPartialSetup(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail int
		want []string
	}{
		{"first step fails", 0, nil},
		{"second step fails", 1, []string{"acquire a", "release a"}},
		{"last step fails", 2, []string{"acquire a", "acquire b", "release b", "release a"}},
		{"success", 3, []string{"acquire a", "acquire b", "acquire c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			undo, err := setup(&log, 3, tc.fail)
			if (err != nil) != (tc.fail < 3) {
				t.Fatalf("setup failing at %d: err %v", tc.fail, err)
			}
			if !slices.Equal(log, tc.want) {
				t.Errorf("setup failing at %d did %v, want %v", tc.fail, log, tc.want)
			}
			if undo != nil {
				log = nil
				undo()
				if want := []string{"release c", "release b", "release a"}; !slices.Equal(log, want) {
					t.Errorf("undo of a full setup did %v, want %v", log, want)
				}
			}
		})
	}
}
