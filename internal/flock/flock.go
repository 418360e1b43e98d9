// Package flock wraps flock(2): an exclusive advisory lock on an open
// file, held until Unlock or until the file is closed. It is the only
// place cordon's evidence code touches a system call.
package flock

import (
	"errors"
	"os"
)

// Lock blocks until it holds an exclusive lock on f.
func Lock(f *os.File) error { return lock(f) }

// ErrHeld is returned by TryLock when another open file holds the lock.
var ErrHeld = errors.New("the lock is held by another")

// TryLock takes an exclusive lock on f without waiting: it returns
// ErrHeld when another open file (in this process or another) holds it.
func TryLock(f *os.File) error { return tryLock(f) }

// Unlock releases the lock on f.
func Unlock(f *os.File) error { return unlock(f) }

// NoFollow is the open flag that refuses a symbolic link at the last
// component of a path (O_NOFOLLOW), or 0 where the system has none.
const NoFollow = noFollow

// NonBlock is the open flag (O_NONBLOCK) that keeps an open of a FIFO
// planted where a regular file should be from blocking; it has no effect
// on a regular file. 0 where the system has none.
const NonBlock = nonBlock
