// Package mailbox carries short messages between an agent and its operator
// through the agent's workspace. The agent posts to the operator and reads
// the operator's replies; the operator does the same through `cordon mail`.
//
// # Layout
//
// Everything lives under WORKSPACE/.cordon/mailbox/:
//
//	agent.jsonl     messages from the agent     (FromAgent)
//	operator.jsonl  messages from the operator  (FromOperator)
//	agent.cursor    the last operator seq the agent has read, "N\n"
//
// Each log holds one message per line, a JSON object with exactly the
// members seq, time, from and text, in that order, as Post writes them
// (encoding/json, HTML characters not escaped, a trailing "\n"). seq is
// 1 on the first line and grows by one per line; from names the log's
// sender; time is RFC 3339 in UTC to the second; text follows the rules of
// Post. A log is at most [MaxLog] bytes.
//
// # Threat model
//
// The workspace is hostile: whatever runs in it may plant symbolic links,
// hard links, FIFOs or garbage where the mailbox expects its files. The
// operator is trusted. Every function refuses, and never follows, a
// symbolic link or special file at .cordon, .cordon/mailbox or any file in
// it, and refuses a file with more than one hard link ([ErrUnsafe]). Logs
// are parsed strictly: a line that is not exactly what Post would have
// written, including a torn last line, is an error naming the file and
// line ([ErrMalformed]) and is never skipped. Post appends under an
// exclusive flock(2) and never rewrites an existing line.
//
// This package does not stop code in the workspace from writing a
// well-formed operator.jsonl itself; it only keeps the mailbox from being
// used to read or write outside it, and keeps a damaged log from being
// half-read.
//
// flock and hard-link counts are only implemented on unix systems;
// elsewhere every function fails with [errors.ErrUnsupported].
package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/internal/flock"
)

// Senders: the name of a log is the sender's name plus ".jsonl".
const (
	FromAgent    = "agent"
	FromOperator = "operator"
)

// MaxText is the largest text of one message, in bytes.
const MaxText = 16 << 10

// HeaderBytes is what UnreadUpTo counts for a message besides its text:
// enough for a "#SEQ TIME" line.
const HeaderBytes = 64

// MaxLog is the largest size of one log, in bytes; Post refuses a message
// that would take a log past it ([ErrFull]).
const MaxLog = 4 << 20

var (
	// ErrInvalid is wrapped by errors about the arguments: a relative
	// workspace, an unknown sender or a text Post refuses.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnsafe is wrapped when a mailbox path is a symbolic link, a
	// special file, a hard-linked file or changed while being opened.
	ErrUnsafe = errors.New("unsafe mailbox path")
	// ErrMalformed is wrapped by every *LineError and by a bad cursor.
	ErrMalformed = errors.New("malformed mailbox file")
	// ErrFull is wrapped when a log has reached MaxLog.
	ErrFull = errors.New("mailbox log full")
)

// Message is one line of a log.
type Message struct {
	Seq  int64  `json:"seq"`  // 1, 2, 3… per sender log
	Time string `json:"time"` // RFC 3339 UTC, seconds
	From string `json:"from"`
	Text string `json:"text"`
}

// LineError reports a malformed line of a log. Line counts from 1.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("mailbox: %s line %d: %v: %s; inspect the file and move it aside", e.File, e.Line, ErrMalformed, e.Msg)
}

func (e *LineError) Unwrap() error { return ErrMalformed }

const (
	dirName    = ".cordon"
	boxName    = "mailbox"
	cursorName = "agent.cursor"
	cursorTmp  = "agent.cursor.tmp"
)

// Post appends a message from `from` (FromAgent or FromOperator) to
// WORKSPACE/.cordon/mailbox/<from>.jsonl, creating directories (0700) and
// the file (0600) as needed. text must be valid UTF-8, 1..MaxText bytes,
// no NUL and no control characters other than \n and \t. The workspace
// must be an absolute path. Post verifies the whole log under the lock
// before appending, and refuses to extend a malformed one.
func Post(workspace, from, text string, now time.Time) (Message, error) {
	if err := checkSender(from); err != nil {
		return Message{}, err
	}
	if err := checkText(text); err != nil {
		return Message{}, fmt.Errorf("mailbox: text: %w", err)
	}
	ts := now.UTC().Format(time.RFC3339)
	if err := checkTime(ts); err != nil {
		return Message{}, fmt.Errorf("mailbox: time %q: %w: not an RFC 3339 time; check the clock", ts, ErrInvalid)
	}
	b, err := openBox(workspace, true)
	if err != nil {
		return Message{}, err
	}
	defer b.close()
	name := from + ".jsonl"
	f, err := b.openFile(name, os.O_RDWR|os.O_APPEND, true)
	if err != nil {
		return Message{}, err
	}
	defer f.Close() // also releases the lock
	path := b.path(name)
	if err := flock.Lock(f); err != nil {
		return Message{}, fmt.Errorf("mailbox: lock %s: %w", path, err)
	}
	data, err := readAll(f, path)
	if err != nil {
		return Message{}, err
	}
	msgs, err := parse(data, path, from)
	if err != nil {
		return Message{}, err
	}
	m := Message{Seq: int64(len(msgs)) + 1, Time: ts, From: from, Text: text}
	line, err := encode(m)
	if err != nil {
		return Message{}, err
	}
	if len(data)+len(line) > MaxLog {
		return Message{}, fmt.Errorf("mailbox: %s: %w: a %d-byte cap; archive the log (move it aside) and retry", path, ErrFull, MaxLog)
	}
	if _, err := f.Write(line); err != nil {
		// Remove what part of our own line got written; the lines
		// before it stay as they were.
		if terr := f.Truncate(int64(len(data))); terr != nil {
			return Message{}, fmt.Errorf("mailbox: append to %s: %w; its last line may be torn: run `cordon mail` to check", path, err)
		}
		return Message{}, fmt.Errorf("mailbox: append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return Message{}, fmt.Errorf("mailbox: sync %s: %w", path, err)
	}
	return m, nil
}

// List returns every message in from's log, in order. A mailbox or log
// that does not exist yet holds no messages.
func List(workspace, from string) ([]Message, error) {
	if err := checkSender(from); err != nil {
		return nil, err
	}
	b, err := openBox(workspace, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer b.close()
	msgs, f, err := b.readLog(from)
	if f != nil {
		f.Close()
	}
	return msgs, err
}

// Unread returns the operator's messages the agent has not read yet and
// marks them read: the cursor file WORKSPACE/.cordon/mailbox/agent.cursor
// holds the last seq read and is replaced atomically by rename. It holds
// the operator log's lock throughout, so concurrent calls never return
// the same message twice. When it returns an error it has marked nothing
// read.
func Unread(workspace string) ([]Message, error) {
	msgs, _, err := UnreadUpTo(workspace, 0)
	return msgs, err
}

// UnreadUpTo is Unread for at most maxBytes (0: no limit), counting each
// message as its text plus HeaderBytes: it returns the oldest unread
// messages that fit (none if even the first does not) and marks only
// those read; the rest stay unread for the next call, and more says how
// many.
func UnreadUpTo(workspace string, maxBytes int) (msgs []Message, more int, err error) {
	b, err := openBox(workspace, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer b.close()
	msgs, f, err := b.readLog(FromOperator)
	if f != nil {
		defer f.Close() // releases the lock after the cursor is written
	}
	if err != nil {
		return nil, 0, err
	}
	last, err := b.readCursor()
	if err != nil {
		return nil, 0, err
	}
	if last > int64(len(msgs)) {
		return nil, 0, fmt.Errorf("mailbox: %s: %w: cursor %d is past the operator log's last seq %d; the log was truncated: inspect it, then remove the cursor", b.path(cursorName), ErrMalformed, last, len(msgs))
	}
	if last == int64(len(msgs)) {
		return nil, 0, nil
	}
	end, size := last, 0
	for end < int64(len(msgs)) && (maxBytes <= 0 || size+len(msgs[end].Text)+HeaderBytes <= maxBytes) {
		size += len(msgs[end].Text) + HeaderBytes
		end++
	}
	if end == last {
		return nil, len(msgs) - int(last), nil
	}
	if err := b.writeCursor(end); err != nil {
		return nil, 0, err
	}
	return msgs[last:end], len(msgs) - int(end), nil
}

// Pending returns how many of the operator's messages the agent has not
// read yet, marking none read: a parked run waiting for a reply resumes
// only when there is one (docs/SPEC.md §9.4).
func Pending(workspace string) (int, error) {
	b, err := openBox(workspace, false)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer b.close()
	msgs, f, err := b.readLog(FromOperator)
	if f != nil {
		defer f.Close()
	}
	if err != nil {
		return 0, err
	}
	last, err := b.readCursor()
	if err != nil {
		return 0, err
	}
	if last > int64(len(msgs)) {
		return 0, fmt.Errorf("mailbox: %s: %w: cursor %d is past the operator log's last seq %d; the log was truncated: inspect it, then remove the cursor", b.path(cursorName), ErrMalformed, last, len(msgs))
	}
	return len(msgs) - int(last), nil
}

func checkSender(from string) error {
	if from != FromAgent && from != FromOperator {
		return fmt.Errorf("mailbox: sender %q: %w: want %q or %q", from, ErrInvalid, FromAgent, FromOperator)
	}
	return nil
}

// checkText applies Post's rules for a message text.
func checkText(text string) error {
	if len(text) == 0 {
		return fmt.Errorf("%w: empty; write something", ErrInvalid)
	}
	if len(text) > MaxText {
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit; shorten it", ErrInvalid, len(text), MaxText)
	}
	for i, r := range text {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(text[i:]); n == 1 {
				return fmt.Errorf("%w: invalid UTF-8 at byte %d; send UTF-8 text", ErrInvalid, i)
			}
		}
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fmt.Errorf("%w: control character %U at byte %d; only newline and tab are allowed", ErrInvalid, r, i)
		}
		if unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: format character %U at byte %d (invisible or bidirectional) could make the text read differently from what it says", ErrInvalid, r, i)
		}
	}
	return nil
}

// checkTime requires s to be RFC 3339 in UTC to the second, as Post
// writes it.
func checkTime(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return err
	}
	if t.UTC().Format(time.RFC3339) != s {
		return errors.New("not UTC to the second")
	}
	return nil
}

// encode returns m's line, with its trailing newline.
func encode(m Message) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("mailbox: encode message: %w", err)
	}
	return buf.Bytes(), nil
}

// parse reads a whole log strictly. path names it in errors; from is the
// sender every line must name.
func parse(data []byte, path, from string) ([]Message, error) {
	var msgs []Message
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil, &LineError{File: path, Line: n, Msg: "torn last line (no trailing newline)"}
		}
		line := data[:i+1]
		data = data[i+1:]
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, &LineError{File: path, Line: n, Msg: fmt.Sprintf("not a message object: %v", err)}
		}
		// Round trip: unknown, missing, duplicate or reordered members,
		// other spellings and extra whitespace all change the bytes.
		again, err := encode(m)
		if err != nil || !bytes.Equal(again, line) {
			return nil, &LineError{File: path, Line: n, Msg: "not in the canonical form Post writes (exactly seq, time, from, text)"}
		}
		if m.Seq != int64(n) {
			return nil, &LineError{File: path, Line: n, Msg: fmt.Sprintf("seq %d, want %d", m.Seq, n)}
		}
		if m.From != from {
			return nil, &LineError{File: path, Line: n, Msg: fmt.Sprintf("from %q in the log of %q", m.From, from)}
		}
		if err := checkTime(m.Time); err != nil {
			return nil, &LineError{File: path, Line: n, Msg: fmt.Sprintf("time %q: %v", m.Time, err)}
		}
		if err := checkText(m.Text); err != nil {
			return nil, &LineError{File: path, Line: n, Msg: fmt.Sprintf("text: %v", err)}
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// readAll reads f from its start, refusing more than MaxLog bytes.
func readAll(f *os.File, path string) ([]byte, error) {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, MaxLog+1))
	if err != nil {
		return nil, fmt.Errorf("mailbox: read %s: %w", path, err)
	}
	if len(data) > MaxLog {
		return nil, fmt.Errorf("mailbox: %s: %w: larger than the %d-byte cap; move it aside", path, ErrMalformed, MaxLog)
	}
	return data, nil
}

// readLog opens, locks, reads and parses from's log. It returns the
// locked file, for the caller to close, or nil when there is no log.
func (b *box) readLog(from string) ([]Message, *os.File, error) {
	name := from + ".jsonl"
	path := b.path(name)
	f, err := b.openFile(name, os.O_RDONLY, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := flock.Lock(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("mailbox: lock %s: %w", path, err)
	}
	data, err := readAll(f, path)
	if err != nil {
		return nil, f, err
	}
	msgs, err := parse(data, path, from)
	return msgs, f, err
}

// readCursor returns the last operator seq the agent has read, 0 when
// there is no cursor file.
func (b *box) readCursor() (int64, error) {
	path := b.path(cursorName)
	f, err := b.openFile(cursorName, os.O_RDONLY, false)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return 0, fmt.Errorf("mailbox: read %s: %w", path, err)
	}
	s, ok := bytes.CutSuffix(data, []byte("\n"))
	n, err := strconv.ParseInt(string(s), 10, 64)
	if !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != string(s) {
		return 0, fmt.Errorf("mailbox: %s: %w: want a seq and a newline, got %q; remove it to mark every operator message unread", path, ErrMalformed, data)
	}
	return n, nil
}

// writeCursor replaces the cursor file with seq: a fresh temporary file,
// synced, renamed over it, then the directory synced. The caller holds
// the operator log's lock, so no one else writes the temporary file.
func (b *box) writeCursor(seq int64) error {
	path := b.path(cursorName)
	if err := b.dir.Remove(cursorTmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mailbox: remove stale %s: %w", b.path(cursorTmp), err)
	}
	f, err := b.dir.OpenFile(cursorTmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("mailbox: write %s: %w", b.path(cursorTmp), err)
	}
	_, err = f.WriteString(strconv.FormatInt(seq, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.dir.Rename(cursorTmp, cursorName)
	}
	if err != nil {
		b.dir.Remove(cursorTmp)
		return fmt.Errorf("mailbox: write %s: %w", path, err)
	}
	return b.syncDir()
}

// box is an opened, checked WORKSPACE/.cordon/mailbox directory.
type box struct {
	dir  *os.Root
	name string // the directory's path, for messages
}

func (b *box) path(name string) string { return filepath.Join(b.name, name) }
func (b *box) close()                  { b.dir.Close() }

func (b *box) syncDir() error {
	d, err := b.dir.Open(".")
	if err != nil {
		return fmt.Errorf("mailbox: sync %s: %w", b.name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("mailbox: sync %s: %w", b.name, err)
	}
	return nil
}
