package stage

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckPath(t *testing.T) {
	long := strings.Repeat("a", maxSegment)
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"a", true},
		{"src/app.py", true},
		{"out/report.xml", true},
		{".env", true},
		{"a/.cordon", true},
		{".cordonx", true},
		{".cordon-out-X", true},
		{"..a", true},
		{"a..", true},
		{"a b/c d", true},
		{"a b/c\td", false},    // a control character: journals and receipts name paths as they are
		{"a\xffb", false},      // invalid UTF-8
		{"a\uFFFEb", false},    // a noncharacter
		{"line\nbreak", false}, // would fake a line in a listing
		{"é/ü", true},
		{long, true},
		{long + "/" + long, true},
		{strings.Repeat("a/", maxPath/2-1) + "aa", true}, // exactly 4096 bytes

		{"", false},
		{".", false},
		{"..", false},
		{"/", false},
		{"/etc/passwd", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"./a", false},
		{"a/.", false},
		{"a/./b", false},
		{"../a", false},
		{"a/..", false},
		{"a/../b", false},
		{"a/b/../../..", false},
		{"a\x00b", false},
		{"\x00", false},
		{".cordon", false},
		{".cordon/state", false},
		{".cordon/a/b", false},
		{long + "a", false},
		{"x/" + long + "a", false},
		{strings.Repeat("a/", maxPath/2) + "a", false}, // 4097 bytes
	} {
		err := CheckPath(tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", tc.p, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("CheckPath(%q) = %v, want ErrRefused", tc.p, err)
		}
		if pe, ok := errors.AsType[*PathError](err); !ok || pe.Path != tc.p {
			t.Errorf("CheckPath(%q) = %#v, want a *PathError naming the path", tc.p, err)
		}
	}
}

// refCheckPath is a naive reference for CheckPath, written from the
// definition by segments rather than with path.Clean.
func refCheckPath(p string) bool {
	if p == "" || len(p) > maxPath || strings.Contains(p, "\x00") || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p { // plain text: no control characters, no noncharacters
		if unicode.IsControl(r) && r < 0x80 || (r >= 0xFDD0 && r <= 0xFDEF) || r%0x10000 >= 0xFFFE {
			return false
		}
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || len(s) > maxSegment {
			return false
		}
	}
	return segs[0] != ".cordon"
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "", ".", "..", "/a", "a//b", "a/./b", "a/../b",
		".cordon", ".cordon/x", "x/.cordon", "a\x00", "a/", strings.Repeat("a", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckPath(p)
		if want := refCheckPath(p); (err == nil) != want {
			t.Fatalf("CheckPath(%q) = %v, reference says ok=%v", p, err, want)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Fatalf("CheckPath(%q) = %v, want ErrRefused", p, err)
		}
	})
}

func TestCheckPaths(t *testing.T) {
	for _, tc := range []struct {
		ps      []string
		bad     string // the path the error names; "" for no error
		comment string
	}{
		{[]string{"a", "b", "c/d"}, "", "disjoint"},
		{[]string{"a", "ab", "a-b", "a.b/c"}, "", "prefixes that are not parents"},
		{nil, "", "nothing"},
		{[]string{"a", "a"}, "a", "duplicate"},
		{[]string{"a/b/c", "a"}, "a/b/c", "beneath another"},
		{[]string{"a", "a-b", "a/b"}, "a/b", "beneath another, not adjacent when sorted"},
		{[]string{"ok", "/abs"}, "/abs", "not canonical"},
	} {
		err := checkPaths(tc.ps)
		if tc.bad == "" {
			if err != nil {
				t.Errorf("%s: checkPaths(%q) = %v, want nil", tc.comment, tc.ps, err)
			}
			continue
		}
		pe, ok := errors.AsType[*PathError](err)
		if !ok || pe.Path != tc.bad || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: checkPaths(%q) = %v, want ErrRefused naming %q", tc.comment, tc.ps, err, tc.bad)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	if err := DefaultLimits().check(); err != nil {
		t.Errorf("DefaultLimits().check() = %v", err)
	}
	for _, l := range []Limits{{}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {-1, 1, 1}, {1, -1, 1}, {1, 1, -1}} {
		if err := l.check(); err == nil {
			t.Errorf("Limits%+v.check() = nil, want an error", l)
		}
	}
}
