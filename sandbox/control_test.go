package sandbox

import (
	"errors"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// slowRun is a runHandle whose outputs digest lasts until the Control's
// run ends, as a long digest that watches for it does.
type slowRun struct {
	c       *Control
	digests chan struct{}
	thawed  chan struct{}
}

func (r *slowRun) id() string                    { return "slow" }
func (r *slowRun) freeze() ([]int, int64, error) { return []int{1}, 0, nil }
func (r *slowRun) thaw() error                   { close(r.thawed); return nil }
func (r *slowRun) outputsDigest() (canon.ID, error) {
	close(r.digests)
	<-r.c.ending
	return canon.ID{}, errDigestStopped
}

// Ending the run (Wait's detach, as on SIGINT) while a freeze is digesting
// stops the digest: detach does not wait for it, and the freeze fails and
// thaws.
func TestControlDetachStopsDigest(t *testing.T) {
	c := NewControl()
	r := &slowRun{c: c, digests: make(chan struct{}), thawed: make(chan struct{})}
	c.attach(r)
	done := make(chan error, 1)
	go func() { _, err := c.Freeze(); done <- err }()
	<-r.digests
	detached := make(chan struct{})
	go func() { c.detach(); close(detached) }()
	select {
	case <-detached:
	case <-time.After(5 * time.Second):
		t.Fatal("detach waited for the digest")
	}
	if err := <-done; !errors.Is(err, errDigestStopped) {
		t.Errorf("Freeze during which the run ended = %v, want errDigestStopped", err)
	}
	select {
	case <-r.thawed:
	default:
		t.Error("the freeze whose digest stopped was not undone")
	}
	if _, err := c.Freeze(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Freeze after detach = %v, want ErrNotRunning", err)
	}
}
