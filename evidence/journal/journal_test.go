package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

func body(t testing.TB, s string) canon.Value {
	t.Helper()
	v, err := canon.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func build(t *testing.T, n int) (string, []Entry) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	var es []Entry
	for i := range n {
		e, err := Append(path, "decision", body(t, fmt.Sprintf(`{"n":%d,"rule":"fs[0]"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return path, es
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(b), "\n")[:bytes.Count(b, []byte("\n"))]
}

func verifyString(s string) (Head, error) { return Verify(strings.NewReader(s)) }

func TestAppendVerify(t *testing.T) {
	path, es := build(t, 5)
	f, _ := os.Open(path)
	defer f.Close()
	h, err := Verify(f)
	if err != nil || h.Count != 5 || h.ID != es[4].ID() {
		t.Fatalf("Verify = %+v, %v", h, err)
	}
	if es[0].Index != 0 || !es[0].Prev.IsZero() || es[3].Prev != es[2].ID() {
		t.Fatalf("entries are not chained: %+v", es)
	}
	if l := lines(t, path)[1]; !strings.HasPrefix(l, `{"body":{"n":1,"rule":"fs[0]"},"index":1,"prev":"b3:`) {
		t.Fatalf("line format: %s", l)
	}
}

// TestTamper edits, deletes, inserts, reorders and truncates journals and
// checks that Verify reports the first bad index with the right reason.
func TestTamper(t *testing.T) {
	path, es := build(t, 6)
	ls := lines(t, path)
	join := func(xs ...string) string { return strings.Join(xs, "") }
	other, _ := newEntry(Head{Count: 3, ID: es[2].ID()}, "decision", body(t, `{"n":99}`))
	for _, tc := range []struct {
		name    string
		journal string
		want    error
		index   int64
		reason  string
	}{
		{"edit body", join(ls[0], ls[1], strings.Replace(ls[2], `"n":2`, `"n":7`, 1), ls[3], ls[4], ls[5]), ErrBroken, 3, "entry 2 was edited"},
		{"edit type", join(ls[0], strings.Replace(ls[1], `"decision"`, `"effect"`, 1), ls[2], ls[3], ls[4], ls[5]), ErrBroken, 2, "entry 1 was edited"},
		{"non-canonical edit", join(ls[0], strings.Replace(ls[1], `{"body"`, `{ "body"`, 1), ls[2]), ErrBroken, 1, "not in JCS form"},
		{"delete", join(ls[0], ls[1], ls[3], ls[4], ls[5]), ErrBroken, 2, "has index 3: an entry was deleted, inserted or moved"},
		{"delete first", join(ls[1], ls[2]), ErrBroken, 0, "has index 1"},
		{"insert", join(ls[0], ls[1], ls[2], string(other.Line())+"\n", ls[3]), ErrBroken, 4, "has index 3"},
		{"reorder", join(ls[0], ls[2], ls[1], ls[3]), ErrBroken, 1, "has index 2"},
		{"duplicate", join(ls[0], ls[1], ls[1], ls[2]), ErrBroken, 2, "has index 1"},
		{"forged prev on first", strings.Replace(ls[0], `"index":0`, `"index":0,"prev":"`+es[1].ID().String()+`"`, 1), ErrBroken, 0, "first entry has a prev"},
		{"torn tail", join(ls[0], ls[1], ls[2][:20]), ErrTorn, 2, "incomplete last line"},
		{"garbage line", join(ls[0], "not json\n"), ErrBroken, 1, "want an object"},
		{"unknown member", join(strings.Replace(ls[0], `"type":"decision"}`, `"type":"decision","x":1}`, 1)), ErrBroken, 0, "unknown member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verifyString(tc.journal)
			var je *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &je) || je.Index != tc.index || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Verify = %v; want %v at %d containing %q", err, tc.want, tc.index, tc.reason)
			}
		})
	}
	// Truncation and a rewritten tail pass the chain check but not the head.
	head := Head{Count: 6, ID: es[5].ID()}
	if _, err := verifyString(join(ls[0], ls[1], ls[2])); err != nil {
		t.Fatalf("a truncated journal is a valid prefix: %v", err)
	}
	if _, err := VerifyAgainst(strings.NewReader(join(ls[0], ls[1], ls[2])), head); !errors.Is(err, ErrTruncated) {
		t.Errorf("VerifyAgainst truncated = %v", err)
	}
	rewritten, _ := newEntry(Head{Count: 5, ID: es[4].ID()}, "decision", body(t, `{"n":5,"rule":"evil"}`))
	tampered := join(ls[0], ls[1], ls[2], ls[3], ls[4], string(rewritten.Line())+"\n")
	if _, err := verifyString(tampered); err != nil {
		t.Fatalf("a rewritten last entry is chain-valid: %v", err)
	}
	if _, err := VerifyAgainst(strings.NewReader(tampered), head); !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "rewritten") {
		t.Errorf("VerifyAgainst rewritten tail = %v", err)
	}
	if _, err := VerifyAgainst(strings.NewReader(join(ls...)), head); err != nil {
		t.Errorf("VerifyAgainst intact = %v", err)
	}
}

func TestAppendRefusesBrokenAndRepairsTorn(t *testing.T) {
	path, _ := build(t, 3)
	ls := lines(t, path)
	os.WriteFile(path, []byte(ls[0]+strings.Replace(ls[1], `"n":1`, `"n":8`, 1)+ls[2]), 0o600)
	if _, err := Append(path, "decision", body(t, `{}`)); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append to a broken journal = %v", err)
	}
	if _, err := Repair(path); !errors.Is(err, ErrBroken) {
		t.Fatalf("Repair of a broken (not torn) journal = %v", err)
	}
	// A crash mid-append: a partial last line.
	os.WriteFile(path, []byte(ls[0]+ls[1]+ls[2][:len(ls[2])/2]), 0o600)
	if _, err := Append(path, "decision", body(t, `{}`)); !errors.Is(err, ErrTorn) {
		t.Fatalf("Append to a torn journal = %v", err)
	}
	h, err := Repair(path)
	if err != nil || h.Count != 2 {
		t.Fatalf("Repair = %+v, %v", h, err)
	}
	if got := strings.Join(lines(t, path), ""); got != ls[0]+ls[1] {
		t.Fatalf("Repair removed more than the torn line")
	}
	if e, err := Append(path, "decision", body(t, `{"after":"repair"}`)); err != nil || e.Index != 2 {
		t.Fatalf("Append after Repair = %+v, %v", e, err)
	}
}

// TestConcurrentProcesses appends from several processes at once; the
// lock must keep the chain intact.
func TestConcurrentProcesses(t *testing.T) {
	if os.Getenv("JOURNAL_CHILD") != "" {
		return
	}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	const procs, each = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildAppender$")
			cmd.Env = append(os.Environ(), "JOURNAL_CHILD=1", "JOURNAL_PATH="+path, "JOURNAL_N="+strconv.Itoa(each), "JOURNAL_ID="+strconv.Itoa(p))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("child %d: %v\n%s", p, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	h, err := Verify(f)
	if err != nil || h.Count != procs*each {
		t.Fatalf("after concurrent appends: %+v, %v", h, err)
	}
}

func TestChildAppender(t *testing.T) {
	if os.Getenv("JOURNAL_CHILD") == "" {
		t.Skip("runs only as a child of TestConcurrentProcesses")
	}
	n, _ := strconv.Atoi(os.Getenv("JOURNAL_N"))
	for i := range n {
		if _, err := Append(os.Getenv("JOURNAL_PATH"), "decision", body(t, fmt.Sprintf(`{"proc":%s,"i":%d}`, os.Getenv("JOURNAL_ID"), i))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplay(t *testing.T) {
	_, a := build(t, 4)
	_, b := build(t, 4)
	if r := Replay(a, b); r.Status != Consistent {
		t.Fatalf("identical runs: %v", r)
	}
	path := filepath.Join(t.TempDir(), "j")
	var c []Entry
	for i, s := range []string{`{"n":0,"rule":"fs[0]"}`, `{"n":1,"rule":"fs[0]"}`, `{"n":2,"rule":"other"}`, `{"n":3,"rule":"fs[0]"}`} {
		e, _ := Append(path, "decision", body(t, s))
		c = append(c, e)
		_ = i
	}
	if r := Replay(a, c); r.Status != Diverged || r.Index != 2 {
		t.Fatalf("diverged run: %v", r)
	}
	if r := Replay(a, a[:3]); r.Status != Truncated || r.Index != 3 {
		t.Fatalf("truncated run: %v", r)
	}
	if r := Replay(a[:2], a); r.Status != Truncated || r.Index != 2 {
		t.Fatalf("longer re-execution: %v", r)
	}
	if r := Replay(nil, nil); r.Status != Consistent {
		t.Fatalf("empty: %v", r)
	}
}

func TestSignedHead(t *testing.T) {
	k, _ := sign.Generate()
	h := Head{Count: 7, ID: canon.Sum([]byte("x"))}
	env := SignHead(k, h)
	got, err := OpenHead(env, k.Public())
	if err != nil || got != h {
		t.Fatalf("OpenHead = %+v, %v", got, err)
	}
	for i := range len(env) * 8 {
		e := append([]byte(nil), env...)
		e[i/8] ^= 1 << (i % 8)
		if _, err := OpenHead(e, k.Public()); err == nil {
			t.Fatalf("signed head with bit %d flipped verified", i)
		}
	}
	other, _ := sign.Generate()
	if _, err := OpenHead(env, other.Public()); err == nil {
		t.Fatal("signed head verified under another key")
	}
}

func filepathOpen(p string) (*os.File, error) { return os.Open(p) }

func TestWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := w.Append("decision", body(t, fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	h := w.Head()
	w.Close()
	f, _ := os.Open(path)
	got, err := Verify(f)
	f.Close()
	if err != nil || got != h || got.Count != 5 {
		t.Fatalf("Verify after Writer = %+v, %v; writer head %+v", got, err, h)
	}
	// Appends through Append and a Writer interleave on one chain.
	if _, err := Append(path, "effect", body(t, `{}`)); err != nil {
		t.Fatal(err)
	}
	w, err = Open(path)
	if err != nil || w.Head().Count != 6 {
		t.Fatalf("Open = %+v, %v", w, err)
	}
	w.Close()
	// Open refuses a broken journal.
	ls := lines(t, path)
	os.WriteFile(path, []byte(ls[1]+ls[0]), 0o600)
	if _, err := Open(path); !errors.Is(err, ErrBroken) {
		t.Fatalf("Open of a broken journal = %v", err)
	}
	if _, err := Append(path, "BAD TYPE", body(t, `{}`)); err == nil {
		t.Fatal("an entry type with spaces was accepted")
	}
	// An entry too long to read back is refused before it is written.
	os.Remove(path)
	big := body(t, `{"x":"`+strings.Repeat("a", MaxLine)+`"}`)
	if _, err := Append(path, "decision", big); err == nil {
		t.Fatal("an entry longer than MaxLine was written")
	}
	if _, err := Append(path, "decision", body(t, `{"after":"refusal"}`)); err != nil {
		t.Fatalf("the journal was damaged by a refused entry: %v", err)
	}
}

// TestOpenRefusesFIFO: a FIFO at the journal's path is refused at once,
// never read (which would block forever).
func TestOpenRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "j.jsonl")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { _, err := Open(p); done <- err }()
	go func() { _, err := Append(p, "x", canon.Value{}); done <- err }()
	for range 2 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("a FIFO journal: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("opening a FIFO journal blocked")
		}
	}
}
