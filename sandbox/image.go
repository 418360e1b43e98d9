package sandbox

import "fmt"

// ImageRuntime is an unpacked OCI image used as a run's runtime in place
// of the host's (docs/sandbox.md, "Image runtime"): the runtime
// directories (/usr, /bin, /lib…, /etc/alternatives) are the image's,
// bound read-only at the same paths, and every program, ELF interpreter
// and hash is looked up inside Root, with symbolic links (absolute ones
// too) resolved within it. Nothing else of the sandbox changes.
type ImageRuntime struct {
	// Root is the host directory of the unpacked root file system (an
	// environment/image cache entry's rootfs). It must not change while
	// a run uses it: the cache never writes a rootfs after unpacking.
	Root string
	// Manifest and Config are the image's digests ("sha256:…"), for the
	// caller's records; the sandbox does not check them (the cache did).
	Manifest, Config string
}

// imagePath is a rootless run's image root as init opens it itself (the
// caller's own cache, which init, running as the caller, may traverse),
// with the device and inode the parent decided on.
type imagePath struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// hasImage reports whether init's runtime is an image's.
func (cfg *initConfig) hasImage() bool { return cfg.Image || cfg.ImagePath != nil }

// image returns the image runtime of the plan, nil for the host's.
func (p *fsPlan) image() *imageRoot {
	if p == nil {
		return nil
	}
	return p.img
}

// imageOnly is the plan with the image runtime and no fs grants: what
// ELF interpreters are resolved in (the runtime only, as on the host).
func (p *fsPlan) imageOnly() *fsPlan {
	if p.image() == nil {
		return nil
	}
	return &fsPlan{img: p.img}
}

// checkImageSide requires a path resolved under an image runtime to stay
// on its side: a runtime path must resolve in the image's runtime, and a
// granted host path in the granted host paths, since the image and the
// host are different trees that the sandbox shows side by side.
func checkImageSide(fsp *fsPlan, p, real string) error {
	if fsp.image() == nil || inRuntime(p) == inRuntime(real) {
		return nil
	}
	return &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %s resolves to %s: with an image runtime a link may not cross between the image's runtime and a granted host path", ErrCannotExec, p, real)}
}
