package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/risk"
)

func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = 2
		}
		h.Mode = 0o644
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("hi"))
		}
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// TestExtractRecordRefuses: the console extracts an evidence archive
// only as saveEvidence writes it: names under RUN/.cordon, clean and
// relative, regular files and directories; anything else is refused and
// nothing lands outside the temporary directory.
func TestExtractRecordRefuses(t *testing.T) {
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg} }
	ok := tarOf(t, &tar.Header{Name: "run_a/.cordon/", Typeflag: tar.TypeDir}, reg("run_a/.cordon/result.json"))
	dir := t.TempDir()
	if err := extractRecord(ok, dir, "run_a"); err != nil {
		t.Fatalf("a good archive: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "run_a", ".cordon", "result.json")); err != nil || string(b) != "hi" {
		t.Fatalf("extracted %q %v", b, err)
	}
	for name, a := range map[string][]byte{
		"parent":        tarOf(t, reg("run_a/.cordon/../../escape")),
		"absolute":      tarOf(t, reg("/tmp/escape")),
		"another run":   tarOf(t, reg("run_b/.cordon/result.json")),
		"outside state": tarOf(t, reg("run_a/escape")),
		"symlink":       tarOf(t, &tar.Header{Name: "run_a/.cordon/link", Typeflag: tar.TypeSymlink, Linkname: "/etc"}),
		"hard link":     tarOf(t, &tar.Header{Name: "run_a/.cordon/link", Typeflag: tar.TypeLink, Linkname: "run_a/.cordon/result.json"}),
		"device":        tarOf(t, &tar.Header{Name: "run_a/.cordon/dev", Typeflag: tar.TypeChar}),
		"not gzip":      []byte("plain"),
	} {
		d := t.TempDir()
		if err := extractRecord(a, filepath.Join(d, "x"), "run_a"); err == nil {
			t.Errorf("%s: extracted", name)
		}
		if _, err := os.Lstat(filepath.Join(d, "escape")); err == nil {
			t.Errorf("%s: a file landed outside", name)
		}
	}
}

// TestVisible: control characters, DEL, invalid UTF-8 and bidirectional
// overrides become visible escapes; newlines, tabs and other text stay.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain <b> text\n\tnext": "plain <b> text\n\tnext",
		"\x1b[31mred\x1b[0m":     `\x1b[31mred\x1b[0m`,
		"a\rb\x00c\x7f":          `a\x0db\x00c\x7f`,
		"\u009b2J":               `\u009b2J`,
		"bad\xffutf8":            `bad\xffutf8`,
		"abc\u202edcba":          `abc\u202edcba`,
		"é 漢字":                   "é 漢字",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if strings.ContainsFunc(visible("\x1b\x9b\u0085"), func(r rune) bool { return r < 0x20 || r >= 0x80 && r < 0xa0 }) {
		t.Error("a control character passed")
	}
}

// TestVisibleInvisible: every default-ignorable character (format
// characters, tag characters, variation selectors, Hangul fillers) is
// shown as an escape (red team F6); visible text around it stays.
func TestVisibleInvisible(t *testing.T) {
	for in, want := range map[string]string{
		"a\u200bb\u200c\u200d\u2060\ufeff": `a\u200bb\u200c\u200d\u2060\ufeff`,
		"ok\U000E0049\U000E0001\U000E007F": `ok\U000e0049\U000e0001\U000e007f`,
		"x\ufe0f\U000E0100\u180b":          `x\ufe0f\U000e0100\u180b`,
		"\u115f\u1160\u3164\uffa0\u034f":   `\u115f\u1160\u3164\uffa0\u034f`,
		"soft\u00adhyphen \u061c\u200e":    `soft\u00adhyphen \u061c\u200e`,
		"café ü 日本 \u00a0":                 "café ü 日本 \u00a0",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	// nothing default-ignorable survives, over the whole code space
	for c := rune(0x80); c <= unicode.MaxRune; c++ {
		if (unicode.Is(unicode.Cf, c) || unicode.Is(unicode.Variation_Selector, c) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c)) &&
			strings.ContainsRune(visible("a"+string(c)), c) {
			t.Fatalf("visible passes %U raw", c)
		}
	}
}

func testPool(t *testing.T, secrets ...string) *redact.Pool {
	t.Helper()
	p, err := redact.NewPool(redact.Config{OperatorSecrets: secrets, Configured: len(secrets)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func journalOf(n int, stdout string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"index":%d,"type":"command","body":{"argv":["echo","%d"],"exit":0,"stdout":%q}}`+"\n", i, i, stdout)
	}
	return b.String()
}

// TestPageTimelineBounded: the run page shows the journal's last entries,
// at most consoleTimelineEntries of them and consoleTimelineBytes of
// escaped text, and says how many it left out (red team F5).
func TestPageTimelineBounded(t *testing.T) {
	pool := testPool(t)
	shown, total, omitted, err := pageTimeline(pool, strings.NewReader(journalOf(2500, "ok")), nil)
	if err != nil || total != 2500 || omitted != 500 || len(shown) != consoleTimelineEntries || shown[0].Index != 500 || shown[len(shown)-1].Index != 2499 {
		t.Fatalf("2500 small entries: %d shown from %d, total %d, omitted %d, %v", len(shown), shown[0].Index, total, omitted, err)
	}
	shown, total, omitted, err = pageTimeline(pool, strings.NewReader(journalOf(100, strings.Repeat("<", 60<<10))+`{"torn`), nil)
	size := 0
	for _, e := range shown {
		size += escapedLen(e.Summary) + escapedLen(e.Detail)
	}
	if err != nil || total != 100 || omitted == 0 || int64(len(shown))+omitted != 100 || size > consoleTimelineBytes || shown[len(shown)-1].Index != 99 {
		t.Fatalf("100 entries of 60 KiB of '<': %d shown (%d escaped bytes), total %d, omitted %d, %v", len(shown), size, total, omitted, err)
	}
}

// TestClipMaskedFirst: a secret straddling the cut is masked before it
// is clipped, and the cut never falls inside a redaction mark (F3).
func TestClipMaskedFirst(t *testing.T) {
	const secret = "operator-secret-0123456789"
	pool := testPool(t, secret)
	for _, at := range []int{0, 5, 19, 25} {
		pad := strings.Repeat("x", maxDetail-len("[stdout]\n")-at)
		e, err := describe(pool, 0, "command", map[string]any{"argv": []any{"env"}, "stdout": pad + secret + "tail"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(e.Detail, secret[:8]) || strings.Contains(e.Detail, "[redacted") && !strings.Contains(e.Detail, "]") {
			t.Errorf("cut %d bytes into the secret: …%s", at, e.Detail[len(e.Detail)-60:])
		}
	}
	if got := clip("abc[redacted:secret]def", 8); got != "abc … (20 more bytes)" {
		t.Errorf("clip inside a mark: %q", got)
	}
	if got := clip("ab日本", 4); got != "ab … (6 more bytes)" {
		t.Errorf("clip inside a rune: %q", got)
	}
}

// TestLiveTailIncremental: the event stream's reader reads only what was
// appended since its last read, leaves a torn last line for later, and
// skips the entries the client has (F4).
func TestLiveTailIncremental(t *testing.T) {
	pool := testPool(t)
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	j := journalOf(5, "a")
	lines := strings.SplitAfter(j, "\n")
	os.WriteFile(p, []byte(strings.Join(lines[:3], "")+lines[3][:10]), 0o600)
	tail := &liveTail{path: p}
	got, err := tail.next(pool, 1)
	if err != nil || len(got) != 2 || got[0].Index != 1 || tail.n != 3 || tail.off != int64(len(strings.Join(lines[:3], ""))) {
		t.Fatalf("first read: %v %v, n %d off %d", got, err, tail.n, tail.off)
	}
	os.WriteFile(p, []byte(j), 0o600)
	got, err = tail.next(pool, 1)
	if err != nil || len(got) != 2 || got[0].Index != 3 || got[1].Index != 4 || tail.off != int64(len(j)) {
		t.Fatalf("second read: %v %v, off %d", got, err, tail.off)
	}
	// what was consumed is not read again: overwrite it with garbage
	os.WriteFile(p, []byte(strings.Repeat("#", len(j))+lines[0]), 0o600)
	if got, err = tail.next(pool, 0); err != nil || len(got) != 1 || got[0].Index != 5 || got[0].Kind != "command" {
		t.Fatalf("third read: %v %v", got, err)
	}
}

// TestStreamLimit: at most consoleStreamsPerSession streams per session
// and consoleStreamsTotal in all; a release frees a slot (F4).
func TestStreamLimit(t *testing.T) {
	var l streamLimit
	for i := range consoleStreamsPerSession {
		if msg := l.acquire("a"); msg != "" {
			t.Fatalf("stream %d refused: %s", i, msg)
		}
	}
	if msg := l.acquire("a"); !strings.Contains(msg, "this session already has") {
		t.Errorf("past the session's cap: %q", msg)
	}
	l.release("a")
	if msg := l.acquire("a"); msg != "" {
		t.Errorf("after a release: %q", msg)
	}
	for i := consoleStreamsPerSession; i < consoleStreamsTotal; i++ {
		if msg := l.acquire(fmt.Sprint("s", i)); msg != "" {
			t.Fatalf("stream %d refused: %s", i, msg)
		}
	}
	if msg := l.acquire("b"); !strings.Contains(msg, "the server already serves") {
		t.Errorf("past the total cap: %q", msg)
	}
}

// TestLineDiffBounded: one file's diff shows at most maxDiffShown bytes
// of text, masked before it is cut, and says so (F5).
func TestLineDiffBounded(t *testing.T) {
	const secret = "operator-secret-0123456789"
	pool := testPool(t, secret)
	long := strings.Repeat("y", maxDiffShown-19) + secret + "\n"
	df := lineDiff(pool, risk.File{Path: "a", Old: []byte("x\n"), New: []byte(long + strings.Repeat("z\n", 100))})
	n := 0
	for _, l := range df.Lines {
		n += len(l.Text)
		if strings.Contains(l.Text, secret[:8]) {
			t.Error("the diff shows the secret's prefix at the cut")
		}
	}
	if n > maxDiffShown+64 || !strings.Contains(df.Note, "cut at 256 KiB") {
		t.Errorf("diff of %d bytes, note %q", n, df.Note)
	}
}
