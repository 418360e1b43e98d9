// Package image unpacks OCI images into a content-addressed, read-only
// root file system cache, so that a run can use an image instead of the
// host's /usr as its runtime (docs/environments.md).
//
// An image is read from an OCI image layout directory or from a `docker
// save` tarball with github.com/google/go-containerregistry. Unpacking is
// cordon's own, because it is where an image attacks the host: every
// layer's uncompressed bytes must hash to the diff id its config names
// (and the config to the digest its manifest names), every path is created
// through an os.Root so no name or symbolic link can reach outside the
// root, whiteouts are applied, device nodes and FIFOs are refused, setuid
// and setgid bits are never kept, no extended attribute (file capability,
// ACL, SELinux label) is ever written, and the unpacked size is bounded.
// A rootfs appears in the cache only complete: it is unpacked into a
// temporary directory and renamed into place under its config digest.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var (
	// ErrInvalid is wrapped by errors about an image that cannot be
	// unpacked safely or does not match its digests.
	ErrInvalid = errors.New("invalid image")
	// ErrRef is wrapped by errors about an image reference.
	ErrRef = errors.New("bad image reference")
)

// Image is an image opened from a reference, with the digests that name it.
type Image struct {
	Ref string
	// Manifest is the digest of the image manifest ("sha256:…"), the name
	// a registry and `cordon exec --image` records use; empty for a
	// `docker save` tarball, which carries no manifest of its own.
	Manifest string
	// Config is the digest of the image configuration, which names every
	// layer by the digest of its contents: the cache key.
	Config string
	img    v1.Image
}

// Open opens an image reference: a directory holding an OCI image layout
// (with one image, or DIR@sha256:… to choose one by manifest digest), or a
// `docker save` tarball holding one image. Registry references are not
// read: pull the image into a layout first.
func Open(ref string) (*Image, error) {
	dir, want, _ := strings.Cut(ref, "@")
	st, err := os.Stat(dir)
	if err != nil {
		if strings.Contains(ref, "/") && !strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, ".") {
			return nil, fmt.Errorf("%w %q: %v; registry references are not pulled: copy the image into an OCI layout directory (for example with 'skopeo copy' or 'crane pull --format=oci') and name that directory", ErrRef, ref, err)
		}
		return nil, fmt.Errorf("%w %q: %w", ErrRef, ref, err)
	}
	var img v1.Image
	manifest := ""
	switch {
	case st.IsDir():
		img, manifest, err = openLayout(dir, want)
	case want != "":
		return nil, fmt.Errorf("%w %q: a @digest selects an image in a layout directory, not in a tarball", ErrRef, ref)
	default:
		img, err = tarball.ImageFromPath(dir, nil)
		if err != nil {
			err = fmt.Errorf("%w %q: not a docker save tarball with one image: %w", ErrRef, ref, err)
		}
	}
	if err != nil {
		return nil, err
	}
	// The config digest is the one the manifest names; Unpack checks the
	// config's bytes against it. A docker save tarball has no manifest to
	// name it: its digest is the hash of its config (asking ggcr for a
	// manifest would compress every layer first).
	if manifest == "" {
		raw, err := img.RawConfigFile()
		if err != nil {
			return nil, fmt.Errorf("%w %q: config: %w", ErrInvalid, ref, err)
		}
		if len(raw) > maxMeta {
			return nil, fmt.Errorf("%w %q: config of %d bytes, over %d", ErrInvalid, ref, len(raw), maxMeta)
		}
		return &Image{Ref: ref, Config: "sha256:" + hexSum(raw), img: img}, nil
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%w %q: manifest: %w", ErrInvalid, ref, err)
	}
	if err := checkBlob(dir, m.Config); err != nil {
		return nil, fmt.Errorf("%w %q: config: %w", ErrInvalid, ref, err)
	}
	for i, l := range m.Layers {
		if err := checkBlobFile(dir, l.Digest, -1); err != nil {
			return nil, fmt.Errorf("%w %q: layer %d: %w", ErrInvalid, ref, i, err)
		}
	}
	return &Image{Ref: ref, Manifest: manifest, Config: m.Config.Digest.String(), img: img}, nil
}

// maxMeta bounds an image's index, manifest and config.
const maxMeta = 4 << 20

// checkBlob requires the blob of d in the layout to be a regular file of
// exactly d's size, and small: ggcr reads metadata blobs whole.
func checkBlob(dir string, d v1.Descriptor) error {
	if d.Size < 0 || d.Size > maxMeta {
		return fmt.Errorf("descriptor size %d outside 0…%d", d.Size, maxMeta)
	}
	return checkBlobFile(dir, d.Digest, d.Size)
}

// checkBlobFile requires blobs/ALG/HEX to be a regular file (not a link,
// device or FIFO), of size want unless want is -1.
func checkBlobFile(dir string, h v1.Hash, want int64) error {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %s is not sha256", h)
	}
	st, err := os.Lstat(filepath.Join(dir, "blobs", "sha256", h.Hex))
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("blob %s is not a regular file", h)
	}
	if want >= 0 && st.Size() != want {
		return fmt.Errorf("blob %s has %d bytes, its descriptor says %d", h, st.Size(), want)
	}
	return nil
}

func openLayout(dir, want string) (v1.Image, string, error) {
	// ggcr reads index.json whole and follows links: it must be a small
	// regular file.
	st, err := os.Lstat(filepath.Join(dir, "index.json"))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("%w %q: not an OCI image layout: %w", ErrRef, dir, err)
	case !st.Mode().IsRegular():
		return nil, "", fmt.Errorf("%w %q: index.json is not a regular file", ErrInvalid, dir)
	case st.Size() > maxMeta:
		return nil, "", fmt.Errorf("%w %q: index.json has %d bytes, over %d", ErrInvalid, dir, st.Size(), maxMeta)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: not an OCI image layout: %w", ErrRef, dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: index.json: %w", ErrInvalid, dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: index.json: %w", ErrInvalid, dir, err)
	}
	var picked []v1.Descriptor
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() {
			continue
		}
		if want == "" || d.Digest.String() == want {
			picked = append(picked, d)
		}
	}
	switch {
	case len(picked) == 0 && want != "":
		return nil, "", fmt.Errorf("%w %q: no image with manifest %s in index.json", ErrRef, dir, want)
	case len(picked) == 0:
		return nil, "", fmt.Errorf("%w %q: index.json lists no image manifest", ErrRef, dir)
	case len(picked) > 1:
		var names []string
		for _, d := range picked {
			names = append(names, dir+"@"+d.Digest.String())
		}
		return nil, "", fmt.Errorf("%w %q: %d images in the layout; name one: %s", ErrRef, dir, len(picked), strings.Join(names, ", "))
	}
	if err := checkBlob(dir, picked[0]); err != nil {
		return nil, "", fmt.Errorf("%w %q: manifest: %w", ErrInvalid, dir, err)
	}
	img, err := p.Image(picked[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: %w", ErrInvalid, dir, err)
	}
	// The manifest's bytes must hash to the digest the index names.
	raw, err := img.RawManifest()
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: manifest: %w", ErrInvalid, dir, err)
	}
	if got := "sha256:" + hexSum(raw); picked[0].Digest.Algorithm != "sha256" || got != picked[0].Digest.String() {
		return nil, "", fmt.Errorf("%w %q: manifest hashes to %s, index.json names %s", ErrInvalid, dir, got, picked[0].Digest)
	}
	return img, picked[0].Digest.String(), nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Limits bound what an image may unpack to.
type Limits struct {
	MaxBytes   int64 // total bytes of regular files; 0 means 16 GiB
	MaxEntries int64 // total tar entries over all layers; 0 means 2,000,000
}

func (l Limits) bytes() int64 {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return 16 << 30
}

func (l Limits) entries() int64 {
	if l.MaxEntries > 0 {
		return l.MaxEntries
	}
	return 2_000_000
}

// Rootfs is an unpacked image in the cache.
type Rootfs struct {
	Dir      string // the root file system; never written after unpacking
	Manifest string // manifest digest, "" for a docker save tarball
	Config   string // config digest: the cache key
	// Env, WorkingDir and User come from the image's configuration; a
	// run decides for itself whether to use them.
	Env        []string
	WorkingDir string
	User       string
	Reused     bool // found in the cache, not unpacked now
}

// record is what the cache keeps beside each rootfs, written last: its
// presence marks the rootfs complete.
type record struct {
	Type       string   `json:"type"`
	Config     string   `json:"config"`
	DiffIDs    []string `json:"diff_ids"`
	Env        []string `json:"env"`
	WorkingDir string   `json:"working_dir"`
	User       string   `json:"user"`
	Unpacked   string   `json:"unpacked"`
}

const recordType = "cordon.image-cache.v1"

// Cache is a directory of unpacked images keyed by config digest:
// DIR/sha256-HEX/rootfs and DIR/sha256-HEX/image.json. DIR and its parent
// must be directories (not links) owned by the user cordon runs as and
// writable by no one else, since whoever can write them can swap a rootfs
// after it was verified; every step inside DIR goes through an os.Root.
type Cache struct {
	Dir    string
	Limits Limits
}

// openDir checks the cache directory (making it, 0700, when missing) and
// its parent, and opens it as a root.
func (c *Cache) openDir() (*os.Root, error) {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, err
	}
	if err := checkOwned(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	if err := checkOwned(dir); err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

// checkOwned requires dir to be a directory, not a link, owned by this
// process's user and not writable by group or others.
func checkOwned(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("image cache: %s is not a directory (a link or file): refusing to use it", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("image cache: %s is writable by group or others (mode %04o); chmod go-w it", dir, st.Mode().Perm())
	}
	if uid, ok := ownerOf(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("image cache: %s is owned by uid %d, not by this user (%d): another user could change a verified rootfs", dir, uid, os.Geteuid())
	}
	return nil
}

// staleAfter is how old a temporary unpack directory must be before a
// later unpack removes it (one left by a killed cordon).
const staleAfter = 24 * time.Hour

// Unpack returns the image's rootfs, unpacking it into the cache unless a
// complete one is already there.
func (c *Cache) Unpack(ctx context.Context, im *Image) (*Rootfs, error) {
	algo, hexd, ok := strings.Cut(im.Config, ":")
	if !ok || algo != "sha256" || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%w %s: config digest %q is not sha256", ErrInvalid, im.Ref, im.Config)
	}
	croot, err := c.openDir()
	if err != nil {
		return nil, err
	}
	defer croot.Close()
	entry := "sha256-" + hexd
	if r, err := readRecord(croot, c.Dir, entry, im); err == nil {
		r.Reused = true
		return r, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	sweepStale(croot)
	tmp := fmt.Sprintf(".unpack-%x", rand.Uint64())
	if err := croot.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	rec, err := c.unpackInto(ctx, im, croot, tmp)
	if err == nil {
		err = croot.Chmod(tmp, 0o755)
	}
	if err == nil {
		err = croot.Rename(tmp, entry)
		if err != nil {
			// Another cordon unpacked the same image meanwhile: use theirs.
			if r, rerr := readRecord(croot, c.Dir, entry, im); rerr == nil {
				if cerr := croot.RemoveAll(tmp); cerr != nil {
					return nil, fmt.Errorf("image cache: removing %s: %w", tmp, cerr)
				}
				r.Reused = true
				return r, nil
			}
			err = fmt.Errorf("install %s in the image cache: %w", im.Ref, err)
		}
	}
	if err != nil {
		if cerr := croot.RemoveAll(tmp); cerr != nil {
			return nil, fmt.Errorf("%w (and the temporary directory %s could not be removed: %v)", err, filepath.Join(c.Dir, tmp), cerr)
		}
		return nil, err
	}
	return toRootfs(c.Dir, entry, im, rec), nil
}

// sweepStale removes temporary unpack directories older than staleAfter:
// what a cordon killed mid-unpack left. Errors are left for the next
// sweep; they never fail an unpack.
func sweepStale(croot *os.Root) {
	f, err := croot.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if !strings.HasPrefix(n, ".unpack-") {
			continue
		}
		if st, err := croot.Lstat(n); err == nil && st.IsDir() && time.Since(st.ModTime()) > staleAfter {
			croot.RemoveAll(n)
		}
	}
}

func toRootfs(dir, entry string, im *Image, rec *record) *Rootfs {
	return &Rootfs{Dir: filepath.Join(dir, entry, "rootfs"), Manifest: im.Manifest, Config: im.Config,
		Env: rec.Env, WorkingDir: rec.WorkingDir, User: rec.User}
}

func readRecord(croot *os.Root, dir, entry string, im *Image) (*Rootfs, error) {
	st, err := croot.Lstat(entry)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is in the image cache but is not a directory; remove it and run again", ErrInvalid, filepath.Join(dir, entry))
	}
	b, err := croot.ReadFile(entry + "/image.json")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is in the image cache without its image.json (an interrupted unpack?); remove the directory and run again", ErrInvalid, filepath.Join(dir, entry))
		}
		return nil, err
	}
	var rec record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || rec.Type != recordType || rec.Config != im.Config {
		return nil, fmt.Errorf("%w: %s/image.json does not describe config %s; remove the directory and run again", ErrInvalid, filepath.Join(dir, entry), im.Config)
	}
	return toRootfs(dir, entry, im, &rec), nil
}

// unpackInto verifies the config and writes every layer, bottom first,
// into TMP/rootfs, then writes TMP/image.json.
func (c *Cache) unpackInto(ctx context.Context, im *Image, croot *os.Root, tmp string) (*record, error) {
	rawCfg, err := im.img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%w %s: config: %w", ErrInvalid, im.Ref, err)
	}
	if got := "sha256:" + hexSum(rawCfg); got != im.Config {
		return nil, fmt.Errorf("%w %s: config hashes to %s, the manifest names %s", ErrInvalid, im.Ref, got, im.Config)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return nil, fmt.Errorf("%w %s: config: %w", ErrInvalid, im.Ref, err)
	}
	layers, err := im.img.Layers()
	if err != nil {
		return nil, fmt.Errorf("%w %s: layers: %w", ErrInvalid, im.Ref, err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%w %s: %d layers, the config names %d", ErrInvalid, im.Ref, len(layers), len(cfg.RootFS.DiffIDs))
	}
	troot, err := croot.OpenRoot(tmp)
	if err != nil {
		return nil, err
	}
	defer troot.Close()
	if err := troot.Mkdir("rootfs", 0o755); err != nil {
		return nil, err
	}
	root, err := troot.OpenRoot("rootfs")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	u := &unpacker{root: root, limits: c.Limits, ref: im.Ref}
	rec := &record{Type: recordType, Config: im.Config, Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User}
	for i, l := range layers {
		want := cfg.RootFS.DiffIDs[i]
		if want.Algorithm != "sha256" {
			return nil, fmt.Errorf("%w %s: layer %d: diff id %s is not sha256", ErrInvalid, im.Ref, i, want)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("%w %s: layer %d: %w", ErrInvalid, im.Ref, i, err)
		}
		h := sha256.New()
		err = u.layer(ctx, io.TeeReader(&ctxReader{ctx: ctx, r: rc}, h))
		rc.Close()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w %s: layer %d (%s): %w", ErrInvalid, im.Ref, i, want, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != want.String() {
			return nil, fmt.Errorf("%w %s: layer %d hashes to %s, the config names %s", ErrInvalid, im.Ref, i, got, want)
		}
		rec.DiffIDs = append(rec.DiffIDs, want.String())
	}
	rec.Unpacked = time.Now().UTC().Format(time.RFC3339)
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := troot.WriteFile("image.json", b, 0o444); err != nil {
		return nil, err
	}
	return rec, nil
}

// ctxReader stops reading once ctx ends, so a layer that decompresses to
// more than anyone would wait for can be interrupted.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// unpacker applies layers to a root.
type unpacker struct {
	root    *os.Root
	limits  Limits
	ref     string
	bytes   int64
	entries int64
}

// Name bounds: longer names or deeper paths are refused, so one entry can
// make only a bounded number of directories (each counts as an entry).
const (
	maxName  = 4096
	maxDepth = 128
)

// layer applies one layer's tar stream, reading r to its end so that a
// digest taken over r covers every byte. Whiteouts apply to lower layers
// only (OCI image spec): a whiteout of a path this layer wrote is ignored,
// and an opaque whiteout hides everything below its directory that this
// layer did not write, at any depth.
func (u *unpacker) layer(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	created := map[string]bool{} // paths this layer wrote, and their parents
	type whiteout struct{ victim, name string }
	var opaque []string
	var whiteouts []whiteout
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return err
		}
		depth := int64(strings.Count(name, "/") + 1)
		if u.entries += depth; u.entries > u.limits.entries() {
			return fmt.Errorf("more than %d entries (each directory of a path counts)", u.limits.entries())
		}
		// Every entry's data counts, also what tar skips for non-files.
		if hdr.Size < 0 {
			return fmt.Errorf("%q: negative size", hdr.Name)
		}
		if u.bytes += hdr.Size; u.bytes > u.limits.bytes() {
			return fmt.Errorf("the image unpacks to more than %d bytes", u.limits.bytes())
		}
		if name == "." {
			if hdr.Typeflag == tar.TypeDir {
				continue // the root itself
			}
			return fmt.Errorf("%q: the root must be a directory", hdr.Name)
		}
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if dir == "" {
			dir = "."
		}
		if strings.HasPrefix(base, ".wh.") {
			if base == ".wh..wh..opq" {
				opaque = append(opaque, dir)
				markParents(created, name)
				continue
			}
			victim := strings.TrimPrefix(base, ".wh.")
			if victim == "" || victim == "." || victim == ".." || strings.HasPrefix(victim, ".wh.") {
				return fmt.Errorf("%q: malformed whiteout", hdr.Name)
			}
			whiteouts = append(whiteouts, whiteout{path.Join(dir, victim), hdr.Name})
			markParents(created, name)
			continue
		}
		if err := u.entry(tr, hdr, name); err != nil {
			return fmt.Errorf("%q: %w", hdr.Name, err)
		}
		created[name] = true
		markParents(created, name)
	}
	// Drain what follows the archive's end, so the digest covers all
	// bytes; it counts against the byte limit.
	left := u.limits.bytes() - u.bytes
	n, err := io.Copy(io.Discard, io.LimitReader(r, left+1))
	if err != nil {
		return err
	}
	if u.bytes += n; n > left {
		return fmt.Errorf("more than %d bytes after the layer's archive, over the image's byte limit", left)
	}
	for _, w := range whiteouts {
		if created[w.victim] {
			// A whiteout hides lower layers only: of a path this layer
			// wrote, what stays hidden is what lower layers left beneath
			// it, if it is a directory.
			if st, err := u.root.Lstat(w.victim); err == nil && st.IsDir() {
				if err := u.clearLower(w.victim, created); err != nil {
					return fmt.Errorf("whiteout %q: %w", w.name, err)
				}
			}
			continue
		}
		if err := u.root.RemoveAll(w.victim); err != nil {
			return fmt.Errorf("whiteout %q: %w", w.name, err)
		}
	}
	for _, dir := range opaque {
		if err := u.clearLower(dir, created); err != nil {
			return fmt.Errorf("opaque whiteout in %q: %w", dir, err)
		}
	}
	return ctx.Err()
}

// markParents marks every directory above name as written by this layer.
func markParents(created map[string]bool, name string) {
	for d := path.Dir(name); d != "." && !created[d]; d = path.Dir(d) {
		created[d] = true
	}
}

// clearLower removes, below dir, everything this layer did not write: an
// opaque whiteout hides every lower-layer entry beneath its directory,
// also inside subdirectories this layer wrote into.
func (u *unpacker) clearLower(dir string, created map[string]bool) error {
	f, err := u.root.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !created[p] {
			if err := u.root.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		if st, err := u.root.Lstat(p); err == nil && st.IsDir() {
			if err := u.clearLower(p, created); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanName turns a tar name into a clean relative path, refusing any
// that climbs (no "..", NUL, or empty component once cleaned).
func cleanName(n string) (string, error) {
	if n == "" || strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("%q: empty name or NUL", n)
	}
	if len(n) > maxName {
		return "", fmt.Errorf("a name of %d bytes, over %d", len(n), maxName)
	}
	if strings.Count(n, "/") > maxDepth {
		return "", fmt.Errorf("a path deeper than %d directories", maxDepth)
	}
	rel := strings.TrimLeft(n, "/")
	for _, part := range strings.Split(strings.TrimSuffix(rel, "/"), "/") {
		if part == ".." {
			return "", fmt.Errorf("%q: climbs out of the root", n)
		}
	}
	c := path.Clean("./" + rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q: climbs out of the root", n)
	}
	return c, nil
}

// entry writes one tar entry at name (already clean), replacing what a
// lower layer left there unless both are directories.
func (u *unpacker) entry(tr *tar.Reader, hdr *tar.Header, name string) error {
	// Never setuid (04000) or setgid (02000), and never writable by group
	// or others on the host: the cache is cordon's, and a rootfs is only
	// ever mounted read-only.
	mode := fs.FileMode(hdr.Mode) & fs.ModePerm &^ 0o022
	if hdr.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	old, err := u.root.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if exists && !(old.IsDir() && hdr.Typeflag == tar.TypeDir) {
		if err := u.root.RemoveAll(name); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !exists || !old.IsDir() {
			if err := u.root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		}
		return u.root.Chmod(name, mode|0o700) // the owner keeps write access until the rootfs is mounted read-only
	case tar.TypeReg: // archive/tar reports the old TypeRegA as TypeReg
		if err := u.parent(name); err != nil {
			return err
		}
		f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.CopyN(f, tr, hdr.Size); err != nil {
			f.Close()
			return err
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return errors.New("empty or NUL symbolic link target")
		}
		if err := u.parent(name); err != nil {
			return err
		}
		// The target is stored as written and never followed here; in the
		// sandbox it resolves inside the image's root.
		return u.root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link: %w", err)
		}
		st, err := u.root.Lstat(target)
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("hard link to %q, which is not a regular file of the image", hdr.Linkname)
		}
		if err := u.parent(name); err != nil {
			return err
		}
		return u.root.Link(target, name)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return errors.New("a device node or FIFO; cordon does not unpack them (the sandbox provides its own /dev)")
	default:
		return fmt.Errorf("tar entry type %q is not supported", hdr.Typeflag)
	}
}

// parent makes the parent directories of name that are missing.
func (u *unpacker) parent(name string) error {
	if d := path.Dir(name); d != "." {
		return u.root.MkdirAll(d, 0o755)
	}
	return nil
}
