package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
		err  string
	}{
		{"5s", 5 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"0", 0, ""},
		{"5", 0, `invalid value "5" for flag -timeout: missing unit in duration "5" (ns, us, ms, s, m or h); did you mean 5s?`},
		{"2.5", 0, "did you mean 2.5s?"},
		{"five", 0, `invalid duration "five": write a number and a unit`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		d := durationVar(fs, "timeout", time.Minute, "a limit")
		err := fs.Parse([]string{"--timeout", tc.arg})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.arg, err)
		case tc.err == "" && *d != tc.want:
			t.Errorf("%q: got %v, want %v", tc.arg, *d, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %q", tc.arg, err, tc.err)
		}
	}
	// The default shows in help as fs.Duration's would.
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	durationVar(fs, "timeout", time.Minute, "a limit")
	if f := fs.Lookup("timeout"); f.DefValue != "1m0s" {
		t.Errorf("default %q", f.DefValue)
	}
	var b strings.Builder
	printFlags(&b, fs)
	if want := "  --timeout DURATION\n        a limit (default 1m0s)\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("help %q, want the prefix %q", b.String(), want)
	}
}

// TestParseFlagsDurationHint: through parseFlags, the suggestion is the
// hint line and the flag is written --timeout.
func TestParseFlagsDurationHint(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	durationVar(fs, "timeout", 0, "a limit")
	_, err := parseFlags(fs, []string{"--timeout", "5", "x.json"})
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("%v: not a usage error", err)
	}
	if want := `invalid value "5" for flag --timeout: missing unit in duration "5" (ns, us, ms, s, m or h)`; ue.msg != want {
		t.Errorf("msg %q, want %q", ue.msg, want)
	}
	if want := "did you mean --timeout 5s?"; ue.hint != want {
		t.Errorf("hint %q, want %q", ue.hint, want)
	}
}
