package main

import (
	"flag"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/server"
)

// TestServeGCPercent: serve sets the collector's target to the default
// when GOGC is not set, leaves GOGC's when it is, applies --gc-percent
// over both, and refuses a value out of range, naming the flag.
func TestServeGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	current := func() int { v := debug.SetGCPercent(100); debug.SetGCPercent(v); return v }
	for _, c := range []struct {
		args []string
		gogc string
		want int
	}{
		{nil, "", server.DefaultGCPercent},
		{nil, "150", 100}, // the runtime applied GOGC; serve leaves it
		{[]string{"--gc-percent", "250"}, "150", 250},
		{[]string{"--gc-percent", "100"}, "", 100},
	} {
		debug.SetGCPercent(100)
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		gc := fs.Int("gc-percent", server.DefaultGCPercent, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := setGCPercent(fs, *gc, c.gogc); err != nil {
			t.Fatal(err)
		}
		if got := current(); got != c.want {
			t.Errorf("%v with GOGC=%q: GC percent %d, want %d", c.args, c.gogc, got, c.want)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gc := fs.Int("gc-percent", server.DefaultGCPercent, "")
	fs.Parse([]string{"--gc-percent", "5"})
	if err := setGCPercent(fs, *gc, ""); err == nil || !strings.Contains(err.Error(), "--gc-percent 5") {
		t.Errorf("--gc-percent 5: %v", err)
	}
}
