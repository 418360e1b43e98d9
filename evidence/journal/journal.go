// Package journal implements cordon's run journal as specified in
// docs/SPEC.md §4.3: a JSONL file of hash-chained entries, each line the
// JCS form of {"body":…,"index":i,"prev":"b3:…","type":"…"} whose
// ContentId the next entry names as prev.
//
// Verify walks a journal and reports the first bad index and why: an
// edited entry breaks the next entry's prev; a deleted, inserted or moved
// entry breaks the index sequence; truncation and a rewritten tail are
// caught against a retained or signed head. Append verifies the whole
// chain first, under an exclusive lock, and refuses to extend a broken
// one; a crash mid-append leaves a verifiable prefix and a torn last line
// that Verify names and Repair removes.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/flock"
)

// MaxLine bounds one entry's line, newline excluded.
const MaxLine = 1 << 20

var (
	// ErrBroken: the chain is broken at the reported index (an entry was
	// edited, deleted, inserted or moved, or a line is not canonical).
	ErrBroken = errors.New("journal: chain is broken")
	// ErrTruncated: the journal is shorter than, or its tail differs from,
	// a retained or signed head.
	ErrTruncated = errors.New("journal: truncated or rewritten against the head")
	// ErrTorn: the last line is incomplete, as a crash mid-append leaves it.
	ErrTorn = errors.New("journal: torn last line")
)

// Error names the first bad entry.
type Error struct {
	Index  int64 // the first bad index
	Err    error // ErrBroken, ErrTruncated or ErrTorn
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("entry %d: %s", e.Index, e.Reason)
}
func (e *Error) Unwrap() error { return e.Err }

// Entry is one journal entry.
type Entry struct {
	Index int64
	Prev  canon.ID // zero for the first entry
	Type  string

	line               []byte // the JCS form, no newline
	id                 canon.ID
	bodyStart, bodyEnd int  // the body within line
	hasPrev            bool // the line has a prev member
}

// Body returns the entry's body, an object.
func (e Entry) Body() canon.Value {
	v, err := canon.Parse(e.line[e.bodyStart:e.bodyEnd])
	if err != nil {
		panic("journal: a checked body does not parse: " + err.Error()) // unreachable: the line passed CheckJCSObject
	}
	return v
}

// ID returns the entry's ContentId, the ContentId of its line.
func (e Entry) ID() canon.ID { return e.id }

// Line returns the entry's JCS line, without the newline.
func (e Entry) Line() []byte { return append([]byte(nil), e.line...) }

// Head is the state of a journal: how many entries, and the ContentId of
// the last (zero when empty).
type Head struct {
	Count int64
	ID    canon.ID
}

// newEntry builds the entry that follows head.
func newEntry(head Head, typ string, body canon.Value) (Entry, error) {
	if body.Kind() != canon.KindObject {
		return Entry{}, fmt.Errorf("journal: body must be an object, got %s", body.Kind())
	}
	if !validType(typ) {
		return Entry{}, fmt.Errorf("journal: entry type %q: want 1 to 64 of a-z 0-9 . _ -", typ)
	}
	doc := map[string]any{"index": head.Count, "type": typ, "body": json.RawMessage(body.AppendJCS(nil))}
	if head.Count > 0 {
		doc["prev"] = head.ID.String()
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return Entry{}, err
	}
	line, err := canon.JCS(raw)
	if err != nil {
		return Entry{}, err
	}
	if len(line) > MaxLine {
		return Entry{}, fmt.Errorf("journal: entry of %d bytes is longer than %d", len(line), MaxLine)
	}
	return parseLine(line, head.Count)
}

// parseLine reads one line (without newline) as an entry, strictly: the
// line must be exactly the JCS form of an object with the members body
// (an object), index, prev (except at index 0) and type, and nothing else.
// It checks the line in one pass without building it (canon.CheckJCSObject);
// the body is parsed only when asked for.
func parseLine(line []byte, at int64) (Entry, error) {
	bad := func(format string, args ...any) (Entry, error) {
		return Entry{}, &Error{Index: at, Err: ErrBroken, Reason: fmt.Sprintf(format, args...)}
	}
	var buf [4]canon.Span
	spans, err := canon.CheckJCSObject(line, buf[:0])
	if err != nil {
		if errors.Is(err, canon.ErrNotJCS) {
			return bad("not in JCS form (edited?): %v", err)
		}
		return bad("not canonical JSON: %v", err)
	}
	e := Entry{line: append([]byte(nil), line...), id: canon.Sum(line)}
	names := [...]string{"body", "index", "prev", "type"}
	next := 0
	for _, sp := range spans {
		name := string(line[sp.NameStart:sp.NameEnd])
		for next < len(names) && names[next] != name {
			if names[next] != "prev" {
				return bad("%s: required member is missing (or unknown member %q)", names[next], name)
			}
			next++
		}
		if next == len(names) {
			return bad("%s: unknown member", name)
		}
		next++
		val := line[sp.ValueStart:sp.ValueEnd]
		switch name {
		case "body":
			if val[0] != '{' {
				return bad("body: want an object")
			}
			e.bodyStart, e.bodyEnd = sp.ValueStart, sp.ValueEnd
		case "index":
			n, ok := parseIndex(val)
			if !ok {
				return bad("index: want a non-negative integer")
			}
			e.Index = n
		case "prev":
			if len(val) < 2 || val[0] != '"' {
				return bad("prev: want a ContentId")
			}
			if e.Prev, err = canon.ParseID(string(val[1 : len(val)-1])); err != nil {
				return bad("prev: %v", err)
			}
			e.hasPrev = true
		case "type":
			if len(val) < 3 || val[0] != '"' || !validType(string(val[1:len(val)-1])) {
				return bad("type: want 1 to 64 of a-z 0-9 . _ -")
			}
			e.Type = string(val[1 : len(val)-1])
		}
	}
	if next < len(names) {
		return bad("%s: required member is missing", names[len(names)-1])
	}
	return e, nil
}

// parseIndex reads a non-negative integer. The line passed CheckJCS, so
// the value is some canonical JSON value; anything but digits (a string,
// an object, a negative number) is refused here.
func parseIndex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// validType: entry types are short identifiers, so a line's type never
// needs escaping.
func validType(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Scan reads a journal and returns its entries and head. On a broken
// chain it returns the valid prefix and an *Error naming the first bad
// index.
func Scan(r io.Reader) ([]Entry, Head, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var entries []Entry
	var head Head
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			var long []byte
			long = append(long, line...)
			for err == bufio.ErrBufferFull && len(long) <= MaxLine {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > MaxLine+1 {
			return entries, head, &Error{Index: head.Count, Err: ErrBroken, Reason: fmt.Sprintf("line longer than %d bytes", MaxLine)}
		}
		if err == io.EOF {
			if len(line) > 0 {
				return entries, head, &Error{Index: head.Count, Err: ErrTorn,
					Reason: "incomplete last line (a crash mid-append?); 'cordon journal repair' removes it"}
			}
			return entries, head, nil
		}
		if err != nil {
			return entries, head, err
		}
		e, err := parseLine(line[:len(line)-1], head.Count)
		if err != nil {
			return entries, head, err
		}
		switch {
		case e.Index != head.Count:
			return entries, head, &Error{Index: head.Count, Err: ErrBroken,
				Reason: fmt.Sprintf("has index %d: an entry was deleted, inserted or moved", e.Index)}
		case head.Count == 0 && e.hasPrev:
			return entries, head, &Error{Index: 0, Err: ErrBroken, Reason: "the first entry has a prev"}
		case head.Count > 0 && (!e.hasPrev || e.Prev != head.ID):
			return entries, head, &Error{Index: head.Count, Err: ErrBroken,
				Reason: fmt.Sprintf("prev %s is not the id of entry %d (%s): entry %d was edited, or entries were inserted, deleted or moved", e.Prev, head.Count-1, head.ID, head.Count-1)}
		}
		entries = append(entries, e)
		head = Head{Count: head.Count + 1, ID: e.id}
	}
}

// Verify checks a journal and returns its head.
func Verify(r io.Reader) (Head, error) {
	_, h, err := Scan(r)
	return h, err
}

// VerifyAgainst checks a journal and that it still holds the retained
// head: at least head.Count entries, entry head.Count-1 with id head.ID.
// It catches truncation and a rewritten tail, which a chain alone cannot.
func VerifyAgainst(r io.Reader, want Head) (Head, error) {
	if want.Count < 0 || want.Count == 0 && !want.ID.IsZero() {
		return Head{}, fmt.Errorf("journal: malformed retained head %+v", want)
	}
	entries, h, err := Scan(r)
	if err != nil {
		return h, err
	}
	if want.Count == 0 {
		return h, nil
	}
	if h.Count < want.Count {
		return h, &Error{Index: h.Count, Err: ErrTruncated, Reason: fmt.Sprintf("the journal has %d entries; the retained head has %d", h.Count, want.Count)}
	}
	if got := entries[want.Count-1].id; got != want.ID {
		return h, &Error{Index: want.Count - 1, Err: ErrTruncated, Reason: fmt.Sprintf("id %s differs from the retained head %s: the tail was rewritten", got, want.ID)}
	}
	return h, nil
}

// Append adds one entry to the journal file at path, creating it if
// needed. Under an exclusive lock it verifies the whole chain first and
// refuses to extend a broken or torn one; it writes the line with one
// write and syncs it before returning.
func Append(path, typ string, body canon.Value) (Entry, error) {
	f, err := openJournal(path)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	if err := flock.Lock(f); err != nil {
		return Entry{}, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	defer flock.Unlock(f)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Entry{}, err
	}
	head, err := Verify(f)
	if err != nil {
		return Entry{}, fmt.Errorf("journal %s: refusing to append: %w", path, err)
	}
	e, err := newEntry(head, typ, body)
	if err != nil {
		return Entry{}, err
	}
	if testHookBeforeWrite != nil {
		testHookBeforeWrite(f, e)
	}
	if _, err := f.Write(append(e.Line(), '\n')); err != nil {
		return Entry{}, err
	}
	return e, f.Sync()
}

var testHookBeforeWrite func(f *os.File, e Entry)

// openJournal opens (creating) the journal at path for appending. A
// symbolic link at path is refused, and so is anything that is not a
// regular file — a FIFO would block the chain's verification forever.
func openJournal(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|flock.NoFollow|flock.NonBlock, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("journal %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Writer appends many entries under one lock: Open verifies the chain once
// and later appends extend the verified head, instead of re-reading the
// whole journal each time as Append does. Other appenders, in this process
// or another, wait for Close.
type Writer struct {
	f    *os.File
	head Head
	size int64 // bytes written: the verified journal and every append since
	err  error // set by a failed write or sync: the Writer appends nothing more

	synced     int64 // bytes known durable: the verified journal and every synced append
	syncedHead Head  // the head at synced
	lastType   string
}

// Open locks the journal at path (creating it if needed), verifies it and
// returns a Writer positioned at its head.
func Open(path string) (*Writer, error) {
	f, err := openJournal(path)
	if err != nil {
		return nil, err
	}
	if err := flock.Lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	entries, head, err := Scan(f)
	if err != nil {
		f.Close() // closing releases the lock
		return nil, fmt.Errorf("journal %s: refusing to append: %w", path, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{f: f, head: head, size: size, synced: size, syncedHead: head}
	if len(entries) > 0 {
		w.lastType = entries[len(entries)-1].Type
	}
	return w, nil
}

// LastType is the type of the journal's last entry when Open verified
// it, "" for an empty journal: a writer can tell that the previous one
// stopped midway (a killed process) and say so before appending.
func (w *Writer) LastType() string { return w.lastType }

// Head returns the head after the last append.
func (w *Writer) Head() Head { return w.head }

// Append writes one entry with one write and syncs it, and with it every
// entry AppendNoSync wrote before. If the write or the sync fails, the
// Writer cuts the file back to its last synced size (best effort) and
// refuses every later append: a partial line must never have another
// appended after it.
func (w *Writer) Append(typ string, body canon.Value) (Entry, error) {
	e, err := w.AppendNoSync(typ, body)
	if err != nil {
		return Entry{}, err
	}
	if err := w.f.Sync(); err != nil {
		w.fail(err)
		return Entry{}, err
	}
	w.synced, w.syncedHead = w.size, w.head
	return e, nil
}

// AppendNoSync writes one entry with one write and does not sync it: the
// next Append (or Sync) makes it durable. It is for entries written in
// bursts (a command's egress decisions), made durable together with the
// entry that ends the burst. A crash before that sync can lose the burst
// or tear its last line, which Verify reports and Repair removes.
func (w *Writer) AppendNoSync(typ string, body canon.Value) (Entry, error) {
	if w.err != nil {
		return Entry{}, fmt.Errorf("journal: an earlier append failed: %w", w.err)
	}
	e, err := newEntry(w.head, typ, body)
	if err != nil {
		return Entry{}, err
	}
	line := append(e.Line(), '\n')
	if _, err := w.f.Write(line); err != nil {
		w.fail(err)
		return Entry{}, err
	}
	w.size += int64(len(line))
	w.head = Head{Count: w.head.Count + 1, ID: e.id}
	return e, nil
}

// Sync makes every entry written so far durable.
func (w *Writer) Sync() error {
	if w.err != nil {
		return fmt.Errorf("journal: an earlier append failed: %w", w.err)
	}
	if err := w.f.Sync(); err != nil {
		w.fail(err)
		return err
	}
	w.synced, w.syncedHead = w.size, w.head
	return nil
}

func (w *Writer) fail(err error) {
	w.err = err
	w.f.Truncate(w.synced) // best effort: Verify and Repair handle what remains
	w.size, w.head = w.synced, w.syncedHead
}

// Close syncs what AppendNoSync wrote, then releases the lock and the
// file.
func (w *Writer) Close() error {
	var err error
	if w.err == nil && w.size != w.synced {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Repair removes a torn last line — and nothing else — from the journal at
// path. It refuses a journal whose complete lines do not verify.
func Repair(path string) (Head, error) {
	f, err := os.OpenFile(path, os.O_RDWR|flock.NoFollow, 0)
	if err != nil {
		return Head{}, err
	}
	defer f.Close()
	if err := flock.Lock(f); err != nil {
		return Head{}, err
	}
	defer flock.Unlock(f)
	entries, head, err := Scan(f)
	if err == nil || !errors.Is(err, ErrTorn) {
		return head, err
	}
	var size int64
	for _, e := range entries {
		size += int64(len(e.line)) + 1
	}
	if err := f.Truncate(size); err != nil {
		return head, err
	}
	return head, f.Sync()
}

// Result is the outcome of Replay.
type Result struct {
	Status Status
	Index  int64 // where a divergence starts, or the length of the shorter journal when truncated
}

// Status of a replay.
type Status int

const (
	Consistent Status = iota
	Diverged
	Truncated
)

func (s Status) String() string {
	return [...]string{"Consistent", "Diverged", "Truncated"}[s]
}

func (r Result) String() string {
	if r.Status == Consistent {
		return "Consistent"
	}
	return fmt.Sprintf("%s at %d", r.Status, r.Index)
}

// Replay compares a recorded journal with a re-execution's: Consistent
// when they are the same entries, Diverged at the first index whose
// entries differ, Truncated when one is a strict prefix of the other.
func Replay(recorded, reexec []Entry) Result {
	n := min(len(recorded), len(reexec))
	for i := range n {
		if recorded[i].id != reexec[i].id {
			return Result{Status: Diverged, Index: int64(i)}
		}
	}
	if len(recorded) != len(reexec) {
		return Result{Status: Truncated, Index: int64(n)}
	}
	return Result{Status: Consistent}
}

// HeadType is the type of a signed journal head.
const HeadType = "cordon.journal-head.v1"

// SignHead returns a DSSE envelope signing the head.
func SignHead(k *sign.PrivateKey, h Head) []byte {
	return sign.Seal(k, sign.PayloadJournalHead, headJCS(h))
}

func headJCS(h Head) []byte {
	b, _ := json.Marshal(map[string]any{"type": HeadType, "count": h.Count, "head": h.ID.String()})
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return c
}

// OpenHead verifies a signed head and returns it.
func OpenHead(envelope []byte, pub sign.PublicKey) (Head, error) {
	payload, err := sign.Open(envelope, pub, sign.PayloadJournalHead)
	if err != nil {
		return Head{}, err
	}
	v, err := canon.Parse(payload)
	if err != nil {
		return Head{}, err
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	typ, _ := o.Str("type", true)
	count, _ := o.Int("count", true)
	id, _ := o.Str("head", true)
	o.End()
	if err := r.Err(); err != nil {
		return Head{}, err
	}
	if typ != HeadType || count < 0 || !bytes.Equal(payload, v.AppendJCS(nil)) {
		return Head{}, fmt.Errorf("journal: malformed signed head")
	}
	h := Head{Count: count}
	if h.ID, err = canon.ParseID(id); err != nil {
		return Head{}, err
	}
	return h, nil
}
