package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
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
