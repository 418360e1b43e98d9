package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/environment"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
)

// appliedEnv is an environment manifest applied to a run: its address, and
// the variables it sets.
type appliedEnv struct {
	ID   canon.ID
	Vars map[string]string
}

// loadRunEnv reads an environment manifest (or, with pubFile, a signed
// one) for a run on img, and checks it against the run: the image the
// manifest pins by digest must be the image the run uses, and every
// variable it sets must be named by the grant set's env (the grants, not
// the environment, decide what reaches a program). Its users and
// workspace folder are not applied: the sandbox's uid and /work are
// cordon's (docs/environments.md).
func loadRunEnv(e *env, file, pubFile string, img *sandbox.ImageRuntime, gs *grant.Set) (*appliedEnv, error) {
	name, data, err := readInput(e, file)
	if err != nil {
		return nil, err
	}
	var m *environment.Manifest
	switch {
	case isEnvelope(data):
		pub, err := loadPublic(e, pubFile)
		if err != nil {
			return nil, err
		}
		if m, err = environment.Open(data, pub); err != nil {
			return nil, envRefused(name, err)
		}
	case pubFile != "":
		return nil, fmt.Errorf("%s: the environment is not signed, so --env-pubkey cannot be checked", name)
	default:
		if m, err = environment.Parse(data); err != nil {
			return nil, envRefused(name, err)
		}
	}
	if img == nil {
		return nil, withHint(fmt.Errorf("%s: environment %s runs on image %s; name its OCI layout with --image", name, m.ID(), m.Image),
			"cordon does not pull images: copy it into an OCI layout (skopeo copy, crane pull --format=oci)")
	}
	_, digest, _ := strings.Cut(m.Image, "@")
	if img.Manifest == "" || img.Manifest != digest {
		got := img.Manifest
		if got == "" {
			got = "none (a docker save tarball has no manifest digest; use an OCI layout)"
		}
		return nil, fmt.Errorf("%s: environment %s pins image manifest %s; --image has %s", name, m.ID(), digest, got)
	}
	vars := map[string]string{}
	for _, src := range []map[string]string{m.ContainerEnv, m.RemoteEnv} { // remoteEnv wins, as in devcontainers
		for k, v := range src {
			if !slices.Contains(gs.Env, k) {
				return nil, withHint(fmt.Errorf("%s: the environment sets %s, which the grant set does not name in env", name, k),
					"add it to the grant set's env, or remove it from the environment: the grants decide what reaches a program")
			}
			vars[k] = v
		}
	}
	return &appliedEnv{ID: m.ID(), Vars: vars}, nil
}
