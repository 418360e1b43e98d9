package runner

import (
	"context"
	"errors"
	"os"

	"github.com/cordon-dev/cordon/evidence/journal"
)

// Every error Run returns wraps exactly one of these, so that a caller (a
// server, the CLI) can tell them apart with errors.Is; the message is the
// underlying error's, and the underlying error stays reachable too
// (journal.ErrTorn, memory.ErrUnsafe, context.Canceled, ...).
//
// How a run ended once it started is not an error: it is Outcome.Status
// (StatusBudgetExhausted when a budget ran out, StatusCancelled when ctx
// ended during the run, and so on), and the record says it.
var (
	// ErrLocked: another run holds the workspace's lock
	// (WORKSPACE/.cordon/lock). Run does not wait for it.
	ErrLocked = errors.New("runner: another run holds the workspace lock")
	// ErrBrokenJournal: the journal does not verify (an entry was edited,
	// deleted, inserted or moved, a line is torn) or no longer holds what
	// the previous result committed to, so nothing is appended.
	ErrBrokenJournal = errors.New("runner: the journal does not verify")
	// ErrCancelled: ctx ended before the run started; nothing was
	// recorded.
	ErrCancelled = errors.New("runner: cancelled before the run started")
	// ErrRefused: the run cannot start for any other reason: a bad
	// Config, workspace or state directory, a previous result that is
	// missing, malformed or does not verify under the run's key, an
	// unsafe memory store, a sandbox or tier the host cannot provide.
	ErrRefused = errors.New("runner: the run was refused")
	// ErrRecord: the run started but its record could not be completed
	// (a journal append, the memory entry, the seal failed).
	ErrRecord = errors.New("runner: the run's record could not be completed")
)

// kindError gives err one of the sentinels above without changing its
// message.
type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// mark wraps err, unless nil or already marked, in kind.
func mark(kind, err error) error {
	var k *kindError
	if err == nil || errors.As(err, &k) {
		return err
	}
	return &kindError{kind, err}
}

// startError marks an error of the run's start: ErrCancelled when ctx has
// ended, ErrBrokenJournal when the journal does not verify, ErrRefused
// otherwise.
func startError(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return mark(ErrCancelled, err)
	case errors.Is(err, journal.ErrBroken), errors.Is(err, journal.ErrTruncated), errors.Is(err, journal.ErrTorn):
		return mark(ErrBrokenJournal, err)
	}
	return mark(ErrRefused, err)
}

// previousError marks an error of checkPrevious. A journal that is gone
// while a result commits to it is broken too (the result's absence was
// already handled: any os.ErrNotExist here is the journal's).
func previousError(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, os.ErrNotExist) && ctx.Err() == nil {
		return mark(ErrBrokenJournal, err)
	}
	return startError(ctx, err)
}
