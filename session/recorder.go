package session

import (
	"fmt"
	"sync"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
)

// Filter rewrites a body before it is appended (the runner removes its
// provider's API key). It sees the canonical value and returns the one
// to append.
type Filter func(canon.Value) (canon.Value, error)

// Recorder appends typed entries (package evidence/entry) to one journal
// writer: the only writer of a session's journal, shared by the session
// and its caller. Its methods are safe for concurrent use (the egress
// proxy records from its own goroutines). A nil *Recorder records
// nothing.
type Recorder struct {
	mu     sync.Mutex
	w      *journal.Writer
	filter Filter
}

// NewRecorder returns a Recorder over w; filter may be nil.
func NewRecorder(w *journal.Writer, filter Filter) *Recorder {
	return &Recorder{w: w, filter: filter}
}

// Record appends b and syncs it, with every streamed entry before it.
func (r *Recorder) Record(b entry.Body) (journal.Entry, error) {
	return r.append(b, true)
}

// stream appends b without syncing it; the next Record makes it durable.
func (r *Recorder) stream(b entry.Body) error {
	_, err := r.append(b, false)
	return err
}

func (r *Recorder) append(b entry.Body, sync bool) (journal.Entry, error) {
	if r == nil {
		return journal.Entry{}, nil
	}
	v, err := entry.Encode(b)
	if err != nil {
		return journal.Entry{}, err
	}
	if r.filter != nil {
		if v, err = r.filter(v); err != nil {
			return journal.Entry{}, fmt.Errorf("journal: %s entry: %w", b.Name(), err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var e journal.Entry
	if sync {
		e, err = r.w.Append(b.Name(), v)
	} else {
		e, err = r.w.AppendNoSync(b.Name(), v)
	}
	if err != nil {
		return journal.Entry{}, fmt.Errorf("journal: %w", err)
	}
	return e, nil
}

// NoteUnfinished appends a command.unfinished entry when the journal, as
// it was opened, ends inside a command (its decision, mount, egress or outputs
// entries without the command entry that closes them): the process that
// ran it was killed. It reports whether it did.
func (r *Recorder) NoteUnfinished() (bool, error) {
	if r == nil {
		return false, nil
	}
	switch t := r.w.LastType(); t {
	case "decision", "mount", "egress", "outputs":
		_, err := r.Record(entry.CommandUnfinished{After: t,
			Reason: "the journal ended inside a command: the process that ran it stopped before recording its outcome (killed?); the entries since its decision have no outcome"})
		return err == nil, err
	}
	return false, nil
}

// Head is the journal's head after the last append.
func (r *Recorder) Head() journal.Head {
	if r == nil {
		return journal.Head{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Head()
}
