package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cordon-dev/cordon/conformance"
)

func runConformance(e *env, args []string) error {
	fset := flag.NewFlagSet("conformance", flag.ContinueOnError)
	dir := fset.String("vectors", "", "run the vectors in `DIR` (one <class>.json per class) instead of the embedded v1 pack")
	classes := fset.String("class", "", "run only these classes, comma-separated (e.g. C1)")
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("conformance: unexpected argument %q", pos[0])
	}
	var opts conformance.Options
	if *classes != "" {
		for _, c := range strings.Split(*classes, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return usageErrorf("conformance: empty class name in --class %q", *classes)
			}
			opts.Classes = append(opts.Classes, c)
		}
	}
	var vectors fs.FS = conformance.V1()
	name := "embedded v1 vectors"
	if *dir != "" {
		st, err := os.Stat(*dir)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("--vectors %s: not a directory", *dir)
		}
		vectors, name = os.DirFS(*dir), *dir
	}
	return runPack(e, vectors, name, opts)
}

func runPack(e *env, vectors fs.FS, name string, opts conformance.Options) error {
	rep, err := conformance.Run(vectors, opts)
	if err != nil {
		if errors.Is(err, conformance.ErrUnknownClass) {
			return err
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, r := range rep.Results {
		for _, f := range r.Failures {
			fmt.Fprintf(e.stderr, "cordon: conformance: FAIL %s: %s\n", f.Vector, oneLine(f.Reason))
		}
		fmt.Fprintln(e.stdout, r.Line())
	}
	fmt.Fprintln(e.stdout, rep.Summary())
	if !rep.OK() {
		return withHint(errCheckFailed, "the FAIL lines above name each failed vector")
	}
	return nil
}
