package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/environment/image"
	"github.com/cordon-dev/cordon/sandbox"
)

// runImage is 'cordon image unpack': verify an OCI image and unpack it
// into the state directory's image cache, or find it there.
func runImage(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "image: missing subcommand", hint: "use 'cordon image unpack'"}
	}
	sub, args := args[0], args[1:]
	if sub != "unpack" {
		return &usageError{msg: fmt.Sprintf("image: unknown subcommand %q", sub), hint: "use unpack"}
	}
	fs := flag.NewFlagSet("image unpack", flag.ContinueOnError)
	stateDir := fs.String("state", "", "the state directory whose images/ cache to use (default: $CORDON_STATE, or /var/lib/cordon as root)")
	asJSON := fs.Bool("json", false, "print one JSON object for machines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("image unpack", pos, "REF"); err != nil {
		return err
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return fmt.Errorf("image unpack: %w", err)
	}
	im, err := image.Open(pos[0])
	if err != nil {
		return withHint(err, imageRefHint)
	}
	// An interrupted unpack leaves nothing in the cache.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second signal kills at once
	start := time.Now()
	r, err := (&image.Cache{Dir: filepath.Join(state, "images")}).Unpack(ctx, im)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if *asJSON {
		return writeJSON(e, map[string]any{"ref": im.Ref, "manifest": r.Manifest, "config": r.Config, "rootfs": r.Dir, "reused": r.Reused, "ms": took.Milliseconds()})
	}
	how := fmt.Sprintf("unpacked in %s", took.Round(time.Millisecond))
	if r.Reused {
		how = "already in the cache"
	}
	manifest := r.Manifest
	if manifest == "" {
		manifest = "none (docker save tarball)"
	}
	_, err = fmt.Fprintf(e.stdout, "image %s\n  manifest %s\n  config   %s\n  rootfs   %s (%s)\n", im.Ref, manifest, r.Config, r.Dir, how)
	return err
}

// imageRefHint says what an image reference is.
const imageRefHint = "REF is an OCI image layout directory (DIR, or DIR@sha256:… when it holds several images) or a docker save tarball"

// execImage is 'cordon exec --image REF': the image verified and
// unpacked into the state directory's cache (or found there), as the
// run's runtime.
func execImage(state, ref string) (*sandbox.ImageRuntime, error) {
	im, err := image.Open(ref)
	if err != nil {
		return nil, withHint(err, imageRefHint)
	}
	// An interrupted unpack leaves nothing in the cache.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := (&image.Cache{Dir: filepath.Join(state, "images")}).Unpack(ctx, im)
	if err != nil {
		return nil, err
	}
	return &sandbox.ImageRuntime{Root: r.Dir, Manifest: r.Manifest, Config: r.Config}, nil
}
