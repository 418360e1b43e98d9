package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at release time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func runVersion(e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object: version, revision, go, os, arch")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("version: unexpected argument %q", pos[0])
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	if *asJSON {
		return writeJSON(e, struct {
			Version  string `json:"version"`
			Revision string `json:"revision"`
			Go       string `json:"go"`
			OS       string `json:"os"`
			Arch     string `json:"arch"`
		}{version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH})
	}
	if rev != "" {
		rev = " " + rev
	}
	_, err = fmt.Fprintf(e.stdout, "cordon %s%s (%s %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// writeJSON writes v as one line of JSON on standard output.
func writeJSON(e *env, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}
