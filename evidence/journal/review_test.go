package journal

// Adversarial review tests (docs/SPEC.md §4.3). Each test asserts the
// correct behaviour; tests named TestReviewFixed_* fail on the code as
// reviewed and demonstrate a bug.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// reviewStringIndex returns a JSON string literal (quotes included) that
// parseIndex, which trusts CheckJCS to have seen digits only, reads as the
// even integer target: every byte c contributes int64(c-'0') (0..255) and
// the sum wraps modulo 2^64, so with 64 free positions of '0' or '1' any
// even value can be reached (10^j = 2^j·5^j sets bit j; 10^64 ≡ 0).
func reviewStringIndex(target uint64) string {
	if target%2 != 0 {
		panic("even targets only")
	}
	val := make([]byte, 66)
	val[0], val[65] = '"', '"'
	val[1] = '0' // weight 10^64 ≡ 0 mod 2^64
	q, zero := byte('"'), byte('0')
	acc := uint64(q - zero) // 242, as parseIndex computes it
	pow := uint64(1)
	for j := 1; j <= 63; j++ {
		pow *= 10
		c := byte('0')
		if ((target-acc)>>j)&1 == 1 {
			acc += pow
			c = '1'
		}
		val[65-j] = c
	}
	if acc != target {
		panic("construction failed")
	}
	return string(val)
}

// An "index" that is not an integer at all (a string) must be refused: the
// line is not "the JCS form of such an object". parseIndex instead sums the
// bytes of the string literal, so a 66-byte string reads as index 0 and the
// forged entry verifies.
func TestReviewFixed_JournalIndexNotAnInteger(t *testing.T) {
	idx := reviewStringIndex(0)
	if n, ok := parseIndex([]byte(idx)); ok && n != 0 {
		t.Fatalf("construction: parseIndex(%s) = %d", idx, n)
	}
	line := `{"body":{"outcome":"allow"},"index":` + idx + `,"type":"decision"}`
	if err := canon.CheckJCS([]byte(line)); err != nil {
		t.Fatalf("construction: line is not JCS: %v", err)
	}
	h, err := verifyString(line + "\n")
	if err == nil {
		t.Fatalf("a journal whose index is the string %s verified (head %+v)", idx, h)
	}
	if !errors.Is(err, ErrBroken) {
		t.Fatalf("err = %v, want ErrBroken", err)
	}
}

// Other non-integer values (objects, literals) also sum to some index:
// `{}` reads as 827. A chain of 827 good entries followed by one whose
// index is {} must be refused.
func TestReviewFixed_JournalIndexIsAnObject(t *testing.T) {
	// Before the fix, parseIndex read `{}` as 827.
	if n, ok := parseIndex([]byte(`{}`)); ok {
		t.Fatalf("parseIndex({}) = %d, accepted", n)
	}
	var sb strings.Builder
	head := Head{}
	for i := range 827 {
		e, err := newEntry(head, "decision", mustParse(t, fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(e.line)
		sb.WriteByte('\n')
		head = Head{Count: head.Count + 1, ID: e.id}
	}
	sb.WriteString(`{"body":{},"index":{},"prev":"` + head.ID.String() + `","type":"decision"}` + "\n")
	if h, err := verifyString(sb.String()); err == nil {
		t.Fatalf("a journal whose entry 827 has index {} verified (head count %d)", h.Count)
	}
}

// "prev is absent only at index 0": the first entry must not carry a prev,
// not even the zero ContentId. Scan only checks !e.Prev.IsZero(), so
// "prev":"b3:AAA…A" at index 0 is accepted — a second spelling of the
// first entry.
func TestReviewFixed_JournalFirstEntryZeroPrev(t *testing.T) {
	zero := canon.ID{}.String()
	line := `{"body":{},"index":0,"prev":"` + zero + `","type":"decision"}`
	if err := canon.CheckJCS([]byte(line)); err != nil {
		t.Fatalf("construction: %v", err)
	}
	if h, err := verifyString(line + "\n"); err == nil {
		t.Fatalf("a first entry with prev %s verified (head %+v)", zero, h)
	}
}

// VerifyAgainst on a hostile/garbage retained head must return an error,
// not panic (entries[want.Count-1] with a negative count).
func TestReviewFixed_VerifyAgainstNegativeCountPanics(t *testing.T) {
	_, es := build(t, 2)
	var sb strings.Builder
	for _, e := range es {
		sb.Write(e.Line())
		sb.WriteByte('\n')
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("VerifyAgainst panicked: %v", r)
		}
	}()
	if _, err := VerifyAgainst(strings.NewReader(sb.String()), Head{Count: -1, ID: es[0].ID()}); err == nil {
		t.Fatal("a head with a negative count was accepted")
	}
}

func mustParse(t testing.TB, s string) canon.Value {
	t.Helper()
	v, err := canon.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Line-level tampering that keeps JSON meaning but changes bytes, or changes
// meaning: every variant must be refused at the right index.
func TestReviewJournalLineTampering(t *testing.T) {
	path, es := build(t, 3)
	ls := lines(t, path)
	l1 := strings.TrimSuffix(ls[1], "\n")
	prev0 := es[0].ID().String()
	for name, repl := range map[string]string{
		"whitespace":            strings.Replace(l1, `"index":1`, `"index": 1`, 1),
		"member order":          `{"index":1,"body":{"n":1,"rule":"fs[0]"},"prev":"` + prev0 + `","type":"decision"}`,
		"duplicate body":        `{"body":{"n":1,"rule":"fs[0]"},"body":{"n":1,"rule":"fs[0]"},"index":1,"prev":"` + prev0 + `","type":"decision"}`,
		"unknown member":        strings.Replace(l1, `"type":"decision"}`, `"type":"decision","x":1}`, 1),
		"unknown member before": strings.Replace(l1, `{"body"`, `{"a":1,"body"`, 1),
		"escaped type":          strings.Replace(l1, `"type":"decision"`, `"type":"decisio\u006e"`, 1),
		"upper type":            strings.Replace(l1, `"type":"decision"`, `"type":"Decision"`, 1),
		"empty type":            strings.Replace(l1, `"type":"decision"`, `"type":""`, 1),
		"type not string":       strings.Replace(l1, `"type":"decision"`, `"type":1`, 1),
		"index leading zero":    strings.Replace(l1, `"index":1`, `"index":01`, 1),
		"index float":           strings.Replace(l1, `"index":1`, `"index":1.0`, 1),
		"index exponent":        strings.Replace(l1, `"index":1`, `"index":1e0`, 1),
		"index negative":        strings.Replace(l1, `"index":1`, `"index":-1`, 1),
		"index true":            strings.Replace(l1, `"index":1`, `"index":true`, 1),
		"body array":            strings.Replace(l1, `"body":{"n":1,"rule":"fs[0]"}`, `"body":[]`, 1),
		"body string":           strings.Replace(l1, `"body":{"n":1,"rule":"fs[0]"}`, `"body":"{}"`, 1),
		"prev not string":       strings.Replace(l1, `"prev":"`+prev0+`"`, `"prev":["`+prev0+`"]`, 1),
		"prev missing":          strings.Replace(l1, `"prev":"`+prev0+`",`, ``, 1),
		"crlf":                  l1 + "\r",
		"body edited":           strings.Replace(l1, `"n":1`, `"n":7`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			j := ls[0] + repl + "\n" + ls[2]
			_, err := verifyString(j)
			var je *Error
			if !errors.As(err, &je) || je.Index != 1 && !(name == "body edited" && je.Index == 2) {
				t.Fatalf("err = %v, want an *Error at entry 1", err)
			}
		})
	}
	// A prev whose last character has non-zero spare bits names the same
	// 32 bytes as the real id: a second spelling must be refused.
	alt := []byte(prev0)
	last := alt[len(alt)-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	alt[len(alt)-1] = alphabet[strings.IndexByte(alphabet, last)|1]
	if string(alt) != prev0 {
		j := ls[0] + strings.Replace(ls[1], prev0, string(alt), 1) + ls[2]
		if _, err := verifyString(j); err == nil {
			t.Fatal("a prev spelled with non-zero spare bits verified")
		}
	}
}

// Deleting, duplicating, swapping entries, or splicing entries from
// another journal with the same prefix, breaks the chain.
func TestReviewJournalSpliceReorder(t *testing.T) {
	pa, _ := build(t, 4)
	a := lines(t, pa)
	for name, j := range map[string]string{
		"delete middle": a[0] + a[2] + a[3],
		"duplicate":     a[0] + a[1] + a[1] + a[2],
		"swap":          a[0] + a[2] + a[1] + a[3],
		"first twice":   a[0] + a[0],
		"empty line":    a[0] + "\n" + a[1],
		"no newline":    a[0] + strings.TrimSuffix(a[1], "\n"),
		"nul":           a[0] + "\x00\n",
	} {
		if _, err := verifyString(j); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	// Same index/prev but a different body: a fork. The chain verifies (the
	// spec says so), but a retained head of the original catches it.
	f1, err := newEntry(Head{Count: 1, ID: mustID(t, a[0])}, "decision", mustParse(t, `{"forged":true}`))
	if err != nil {
		t.Fatal(err)
	}
	forked := a[0] + string(f1.line) + "\n"
	if _, err := verifyString(forked); err != nil {
		t.Fatalf("a fork is a valid chain: %v", err)
	}
	orig := Head{Count: 2, ID: mustID(t, a[1])}
	if _, err := VerifyAgainst(strings.NewReader(forked), orig); !errors.Is(err, ErrTruncated) {
		t.Fatalf("fork against the retained head: %v", err)
	}
	// Truncation against the retained head.
	if _, err := VerifyAgainst(strings.NewReader(a[0]), orig); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncation against the retained head: %v", err)
	}
}

func mustID(t *testing.T, line string) canon.ID {
	t.Helper()
	return canon.Sum([]byte(strings.TrimSuffix(line, "\n")))
}

// A signed head is only accepted in its own context, from its own key, in
// JCS form, with its exact members.
func TestReviewSignedHeadConfusion(t *testing.T) {
	k, _ := sign.Generate()
	other, _ := sign.Generate()
	h := Head{Count: 3, ID: canon.Sum([]byte("x"))}
	payload := headJCS(h)
	if _, err := OpenHead(SignHead(k, h), k.Public()); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]byte{
		"attestation context": sign.Seal(k, sign.PayloadAttestation, payload),
		"receipt context":     sign.Seal(k, sign.PayloadReceipt, payload),
		"other key":           SignHead(other, h),
		"negative count":      sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":-1,"head":"`+h.ID.String()+`","type":"cordon.journal-head.v1"}`)),
		"count as string":     sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":"3","head":"`+h.ID.String()+`","type":"cordon.journal-head.v1"}`)),
		"not JCS":             sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":3, "head":"`+h.ID.String()+`","type":"cordon.journal-head.v1"}`)),
		"extra member":        sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":3,"head":"`+h.ID.String()+`","type":"cordon.journal-head.v1","x":0}`)),
		"wrong type":          sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":3,"head":"`+h.ID.String()+`","type":"cordon.journal-head.v2"}`)),
		"bad head id":         sign.Seal(k, sign.PayloadJournalHead, []byte(`{"count":3,"head":"b3:x","type":"cordon.journal-head.v1"}`)),
		"not an object":       sign.Seal(k, sign.PayloadJournalHead, []byte(`[3]`)),
		"trailing newline":    sign.Seal(k, sign.PayloadJournalHead, append(append([]byte(nil), payload...), '\n')),
	} {
		if got, err := OpenHead(env, k.Public()); err == nil {
			t.Errorf("%s: OpenHead accepted %+v", name, got)
		}
	}
}

// Hostile files: a very long line, a long torn line; no panic, an error.
func TestReviewJournalHostileSizes(t *testing.T) {
	long := `{"body":{"s":"` + strings.Repeat("a", MaxLine) + `"},"index":0,"type":"x"}` + "\n"
	if _, err := verifyString(long); err == nil {
		t.Fatal("an over-long line verified")
	}
	if _, err := verifyString(strings.Repeat("a", MaxLine+10)); err == nil {
		t.Fatal("an over-long torn line verified")
	}
	// Repair must refuse (not truncate) a journal whose complete lines do
	// not verify.
	path, _ := build(t, 2)
	ls := lines(t, path)
	bad := strings.Replace(ls[0], `"n":0`, `"n":9`, 1) + ls[1] + "torn"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(path); !errors.Is(err, ErrBroken) {
		t.Fatalf("Repair of a broken journal: %v, want ErrBroken", err)
	}
	if b, _ := os.ReadFile(path); string(b) != bad {
		t.Fatal("Repair modified a journal whose complete lines are broken")
	}
}

// A Writer whose write fails part-way (disk full, file size limit) has left
// a torn line in the file. It must not append after it: the next complete
// line would be glued to the torn bytes, breaking the chain in the middle,
// where Repair (which only removes a torn last line) cannot help. The
// failure is provoked with RLIMIT_FSIZE in a child process.
func TestReviewFixed_WriterAppendsAfterTornWrite(t *testing.T) {
	if os.Getenv("CORDON_REVIEW_CHILD") != "" {
		reviewWriterChild()
		return
	}
	path, _ := build(t, 2)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewFixed_WriterAppendsAfterTornWrite$", "-test.v")
	cmd.Env = append(os.Environ(), "CORDON_REVIEW_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "first append failed") {
		t.Skipf("could not provoke a short write:\n%s", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Verify(f); err != nil && !errors.Is(err, ErrTorn) {
		t.Fatalf("after a failed append the Writer corrupted the journal mid-chain: %v\n%s", err, out)
	}
}

func reviewWriterChild() {
	path := os.Getenv("CORDON_REVIEW_CHILD")
	signal.Ignore(syscall.SIGXFSZ)
	st, err := os.Stat(path)
	if err != nil {
		panic(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		panic(err)
	}
	w, err := Open(path)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	lim := syscall.Rlimit{Cur: uint64(st.Size()) + 20, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return
	}
	v, _ := canon.Parse([]byte(`{"n":"first, torn"}`))
	_, err1 := w.Append("decision", v)
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if err1 == nil {
		fmt.Println("first append succeeded")
		return
	}
	fmt.Println("first append failed:", err1)
	v2, _ := canon.Parse([]byte(`{"n":"second"}`))
	_, err2 := w.Append("decision", v2)
	fmt.Println("second append:", err2)
}
