// Package cleanup undoes partial setup in reverse order, after gVisor's
// pkg/cleanup. A function that acquires several resources adds an undo
// step for each as it goes, defers Clean, and calls Release once every
// step has succeeded:
//
//	var cu cleanup.Cleanup
//	defer cu.Clean()
//	f, err := os.Open(p)
//	if err != nil {
//		return nil, err // Clean undoes what came before
//	}
//	cu.Add(func() { f.Close() })
//	…
//	t.close = cu.Release() // success: the caller now owns the undo
//
// A failure at any step then undoes exactly the steps before it.
package cleanup

// Cleanup is a stack of undo steps. The zero value is an empty Cleanup,
// ready to use. A Cleanup must not be copied after its first Add, and
// is not safe for concurrent use.
type Cleanup struct {
	steps []func()
}

// Make returns a Cleanup whose first step is f; a nil f adds nothing.
func Make(f func()) Cleanup {
	var c Cleanup
	c.Add(f)
	return c
}

// Add pushes f: it runs before every step added earlier. A nil f adds
// nothing.
func (c *Cleanup) Add(f func()) {
	if f != nil {
		c.steps = append(c.steps, f)
	}
}

// Clean runs the steps, the last added first, and empties c: a second
// Clean, or a Clean after Release, does nothing. Steps must not panic:
// a panic stops the steps after it.
func (c *Cleanup) Clean() {
	steps := c.steps
	c.steps = nil
	for i := len(steps) - 1; i >= 0; i-- {
		steps[i]()
	}
}

// Release empties c and returns a function that runs the steps it held,
// the last added first, at most once however often it is called. It is
// how a successful setup hands its undo to the object it built.
func (c *Cleanup) Release() func() {
	steps := c.steps
	c.steps = nil
	var done bool
	return func() {
		if done {
			return
		}
		done = true
		r := Cleanup{steps: steps}
		r.Clean()
	}
}
