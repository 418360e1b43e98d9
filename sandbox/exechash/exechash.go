// Package exechash computes the ContentId of executables for
// content-addressed exec control (docs/SPEC.md §3.5): exec decisions are
// made on the BLAKE3 of a binary's bytes, so that renaming, moving, copying
// or linking a binary never changes what the Enforcer decides about it.
//
// A Cache remembers hashes by the identity of the file — device, inode,
// size, modification and change times — and never serves a stale one:
//
//   - any write to a file changes its ctime, which no unprivileged process
//     can set back (utimes changes ctime too), so a changed file has a new
//     key;
//   - a file whose ctime is within RacyWindow of the moment hashing began
//     is hashed but not cached, since file timestamps are coarse (the
//     "racily clean" problem git solves the same way): a second write in
//     the same clock tick would otherwise keep the key;
//   - the file is stat'ed before and after it is read through one open
//     descriptor; if its identity changed in between, the hash is refused.
//
// The hash belongs to the open file it was computed from. Callers that
// exec the file should exec that descriptor (execveat with AT_EMPTY_PATH),
// not the path again, so that the file cannot be swapped in between; the
// sandbox does so.
package exechash

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// RacyWindow is how recent a file's ctime may be for its hash to be
// cached. It is far above the timestamp granularity of Linux file systems
// (a clock tick) and covers file systems with 2-second timestamps.
const RacyWindow = 3 * time.Second

var (
	// ErrNotRegular is returned for anything but a regular file.
	ErrNotRegular = errors.New("exechash: not a regular file")
	// ErrChanged is returned when the file changed while it was hashed.
	ErrChanged = errors.New("exechash: file changed while it was hashed")
)

// key identifies a file's content as far as metadata can tell.
type key struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// Cache is a cache of executable hashes. The zero Cache is not usable;
// call New. A Cache is safe for concurrent use.
type Cache struct {
	max int

	mu      sync.Mutex
	entries map[key]canon.ID // guarded by mu
	hashed  int              // files hashed, for tests; guarded by mu

	now            func() time.Time // testHookNow
	testHookHashed func(f *os.File) // runs after the read, before the second stat
}

// New returns a Cache that holds at most maxEntries hashes (it forgets them
// all when full).
func New(maxEntries int) *Cache {
	return &Cache{max: maxEntries, entries: map[key]canon.ID{}, now: time.Now}
}

// Sum opens path (following symbolic links, as exec does) and returns the
// ContentId of its bytes. It opens without blocking, so that a FIFO at
// path is refused (ErrNotRegular) rather than waited on.
func (c *Cache) Sum(path string) (canon.ID, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return canon.ID{}, err
	}
	defer f.Close()
	return c.SumFile(f)
}

// SumFile returns the ContentId of the bytes of the open file f, reading
// it from offset 0 whatever f's current offset.
func (c *Cache) SumFile(f *os.File) (canon.ID, error) {
	k, regular, err := stat(f)
	if err != nil {
		return canon.ID{}, fmt.Errorf("exechash: %s: %w", f.Name(), err)
	}
	if !regular {
		return canon.ID{}, fmt.Errorf("%w: %s", ErrNotRegular, f.Name())
	}
	c.mu.Lock()
	id, ok := c.entries[k]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	start := c.now()
	h := blake3.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, k.size))
	if err != nil {
		return canon.ID{}, fmt.Errorf("exechash: %s: %w", f.Name(), err)
	}
	var extra [1]byte
	if m, _ := f.ReadAt(extra[:], k.size); n != k.size || m != 0 {
		return canon.ID{}, fmt.Errorf("%w: %s changed size", ErrChanged, f.Name())
	}
	h.Sum(id[:0])
	if c.testHookHashed != nil {
		c.testHookHashed(f)
	}
	k2, _, err := stat(f)
	if err != nil {
		return canon.ID{}, fmt.Errorf("exechash: %s: %w", f.Name(), err)
	}
	if k2 != k {
		return canon.ID{}, fmt.Errorf("%w: %s", ErrChanged, f.Name())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hashed++
	if k.ctime >= start.Add(-RacyWindow).UnixNano() {
		return id, nil // racily clean: correct now, but not safe to remember
	}
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[k] = id
	return id, nil
}
