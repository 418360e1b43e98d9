package handoff

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	args := []string{"cordon", "exec", "--state", "/s", "--", "sh", "-c", "echo 'a b'", ""}
	env := []string{"PATH=/bin", "EMPTY=", "X=a=b"}
	nonce := strings.Repeat("0123456789abcdef", 4)
	b, ok := Encode(nonce, args, env)
	if !ok {
		t.Fatal("Encode refused")
	}
	l, ok := Header(b[:len(Magic)+4])
	if !ok || l != len(b)-len(Magic)-4 {
		t.Fatalf("Header: %d %v, want %d", l, ok, len(b)-len(Magic)-4)
	}
	gotNonce, gotArgs, gotEnv, ok := Decode(b[len(Magic)+4:])
	if !ok || gotNonce != nonce || !slices.Equal(gotArgs, args) || !slices.Equal(gotEnv, env) {
		t.Fatalf("Decode: %q %q %q %v", gotNonce, gotArgs, gotEnv, ok)
	}
	// No environment at all.
	b, _ = Encode(nonce, []string{"cordon"}, nil)
	if _, a, e, ok := Decode(b[len(Magic)+4:]); !ok || len(a) != 1 || len(e) != 0 {
		t.Fatalf("no env: %q %q %v", a, e, ok)
	}
}

var testNonce = strings.Repeat("0123456789abcdef", 4)

func TestEncodeRefuses(t *testing.T) {
	if _, ok := Encode(testNonce, []string{"a\x00b"}, nil); ok {
		t.Error("an argument with a NUL was encoded")
	}
	if _, ok := Encode(testNonce, []string{"cordon"}, []string{"A=\x00"}); ok {
		t.Error("an environment string with a NUL was encoded")
	}
	if _, ok := Encode(testNonce, []string{strings.Repeat("x", MaxPayload)}, nil); ok {
		t.Error("a request over MaxPayload was encoded")
	}
	for _, n := range []string{"", testNonce[:63], testNonce + "0", strings.ToUpper(testNonce), strings.Repeat("g", 64)} {
		if _, ok := Encode(n, []string{"cordon"}, nil); ok {
			t.Errorf("nonce %q was encoded", n)
		}
	}
}

// TestDecodeRefuses: what the server reads is a hostile process's bytes
// (of the same uid, but possibly confined); every malformed form is
// refused, none panics.
func TestDecodeRefuses(t *testing.T) {
	n := testNonce + "\x00"
	for name, p := range map[string]string{
		"empty":              "",
		"no nonce":           "1\x00cordon\x00",
		"a short nonce":      testNonce[:10] + "\x001\x00cordon\x00",
		"no terminator":      n + "1\x00cordon",
		"count only":         n + "1\x00",
		"count zero":         n + "0\x00cordon\x00",
		"count past the end": n + "3\x00cordon\x00exec\x00",
		"count not decimal":  n + "x\x00cordon\x00",
		"count signed":       n + "+1\x00cordon\x00",
		"count leading zero": n + "01\x00cordon\x00",
		"count too long":     n + "12345678\x00cordon\x00",
		"env without =":      n + "1\x00cordon\x00NOEQUALS\x00",
		"env without a name": n + "1\x00cordon\x00=v\x00",
		"trailing bytes":     n + "1\x00cordon\x00A=b\x00junk",
		"count huge":         n + "9999999\x00cordon\x00",
	} {
		if _, a, e, ok := Decode([]byte(p)); ok {
			t.Errorf("%s: decoded %q %q", name, a, e)
		}
	}
	for name, h := range map[string][]byte{
		"wrong magic": append([]byte("cordon-handoff-1\x00"), 10, 0, 0, 0),
		"too short":   []byte(Magic),
		"too long":    append([]byte(Magic), 0, 0, 0x20, 0), // 2 MiB
		"below two":   append([]byte(Magic), 1, 0, 0, 0),
	} {
		if l, ok := Header(h); ok {
			t.Errorf("%s: header accepted, length %d", name, l)
		}
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := Encode(testNonce, []string{"cordon", "exec", "--", "true"}, []string{"A=b"})
	f.Add(b[len(Magic)+4:])
	f.Add([]byte(testNonce + "\x001\x00\x00"))
	f.Fuzz(func(t *testing.T, p []byte) {
		nonce, args, env, ok := Decode(p)
		if !ok {
			return
		}
		// What decodes re-encodes to the same bytes.
		again, ok := Encode(nonce, args, env)
		if !ok || !bytes.Equal(again[len(Magic)+4:], p) {
			t.Fatalf("%q decoded to %q %q, which encodes to %q", p, args, env, again)
		}
	})
}

// TestStateFlag: the scan finds --state as the flag package would, and
// gives up (the caller starts cold) on what it does not know.
func TestStateFlag(t *testing.T) {
	for _, c := range []struct {
		args  []string
		state string
		ok    bool
	}{
		{nil, "", true},
		{[]string{"--", "true"}, "", true},
		{[]string{"true", "--state", "/x"}, "", true}, // after the program: the program's
		{[]string{"--state", "/s", "--", "true"}, "/s", true},
		{[]string{"-state", "/s", "true"}, "/s", true},
		{[]string{"--state=/s", "true"}, "/s", true},
		{[]string{"-state=/s", "--state", "/t", "true"}, "/t", true}, // the last wins
		{[]string{"--stats", "--state", "/s", "true"}, "/s", true},
		{[]string{"--stats=true", "--state=/s", "true"}, "/s", true},
		{[]string{"--journal", "--state", "/s", "true"}, "", true}, // --state is --journal's value; /s is the program
		{[]string{"--grants", "g.json", "--pool", "--state", "/s", "--", "x"}, "/s", true},
		{[]string{"-", "--state", "/s"}, "", true}, // "-" ends the flags
		{[]string{"--state"}, "", false},           // no value
		{[]string{"--nosuch", "x"}, "", false},
		{[]string{"-h"}, "", false},
		{[]string{"--help"}, "", false},
		{[]string{"---state", "/s"}, "", false},
		{[]string{"--=x"}, "", false},
		{[]string{"--grants", "/dev/stdin", "true"}, "", false},
		{[]string{"--grants=/proc/self/fd/3", "true"}, "", false},
		{[]string{"--key", "../../dev/fd/0", "true"}, "", false},
		{[]string{"--in", "../x", "true"}, "", false},
		{[]string{"--workspace", "/home/me/dev/proj", "--", "true"}, "", true}, // not under /dev
	} {
		state, ok := StateFlag(c.args, "/home/me")
		if state != c.state || ok != c.ok {
			t.Errorf("StateFlag(%q) = %q, %v; want %q, %v", c.args, state, ok, c.state, c.ok)
		}
	}
}

func TestStateDirAndGetenv(t *testing.T) {
	for _, c := range []struct {
		flag string
		env  []string
		euid int
		want string
		ok   bool
	}{
		{"/f", []string{"CORDON_STATE=/e"}, 0, "/f", true},
		{"", []string{"CORDON_STATE=/e"}, 0, "/e", true},
		{"", []string{"CORDON_STATE=/e", "CORDON_STATE=/second"}, 0, "/e", true}, // the first, as the runtime reads it
		{"", []string{"CORDON_STATE="}, 0, "/var/lib/cordon", true},
		{"", nil, 0, "/var/lib/cordon", true},
		{"", []string{"XDG_STATE_HOME=/x", "HOME=/h"}, 1000, "/x/cordon", true},
		{"", []string{"XDG_STATE_HOME=rel", "HOME=/h"}, 1000, "/h/.local/state/cordon", true},
		{"", []string{"HOME=/h"}, 1000, "/h/.local/state/cordon", true},
		{"", nil, 1000, "", false},
	} {
		got, ok := StateDir(c.flag, c.env, c.euid)
		if got != c.want || ok != c.ok {
			t.Errorf("StateDir(%q, %q, %d) = %q, %v; want %q, %v", c.flag, c.env, c.euid, got, ok, c.want, c.ok)
		}
	}
	if Getenv([]string{"AB=1", "A=2"}, "A") != "2" || Getenv([]string{"A"}, "A") != "" {
		t.Error("Getenv matched a prefix or a string without =")
	}
}

func TestNamesProcessFile(t *testing.T) {
	for _, c := range []struct {
		p, cwd string
		want   bool
	}{
		{"/dev/stdin", "/", true}, {"/dev", "/", true}, {"/proc/self/fd/0", "/", true},
		{"proc/self/environ", "/", true}, {"fd/3", "/dev", true}, {"self/fd/3", "/proc", true},
		{"//dev/fd/3", "/", true}, {"/./dev/fd/3", "/", true}, {"///proc/self/fd/3", "/", true}, {"/.//proc/self", "/", true},
		{"a/../b", "/", true}, {"/tmp/../dev/stdin", "/", true}, {"..", "/", true},
		{"", "/", false}, {"/tmp/g.json", "/", false}, {"grants.json", "/home/me", false}, {"/home/me/dev/x", "/", false},
		{"dev/fd/0", "/home/me", false}, {"devices/x", "/", false}, {"/devx", "/", false},
	} {
		if got := NamesProcessFile(c.p, c.cwd); got != c.want {
			t.Errorf("NamesProcessFile(%q, %q) = %v, want %v", c.p, c.cwd, got, c.want)
		}
	}
}

func TestParseClock(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "76545907550123456": 76545907550123456, "9223372036854775807": 1<<63 - 1} {
		if got, ok := parseClock(s); !ok || got != want {
			t.Errorf("parseClock(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "0", "01", "-1", "+1", "1.5", "12a", "9223372036854775808", "9999999999999999999", "12345678901234567890"} {
		if got, ok := parseClock(s); ok {
			t.Errorf("parseClock(%q) = %d, accepted", s, got)
		}
	}
}
