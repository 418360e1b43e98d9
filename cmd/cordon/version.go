package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at release time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func runVersion(e *env, args []string) error {
	if len(args) > 0 {
		return usageErrorf("version: unexpected argument %q", args[0])
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	_, err := fmt.Fprintf(e.stdout, "cordon %s%s (%s %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
