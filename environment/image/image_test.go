package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ent is one tar entry of a test layer.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
}

func file(name, body string) ent { return ent{name: name, body: body, typ: tar.TypeReg, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) ent {
	return ent{name: name, link: to, typ: tar.TypeSymlink, mode: 0o777}
}
func hardlink(name, to string) ent { return ent{name: name, link: to, typ: tar.TypeLink, mode: 0o644} }

func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	b := tarOf(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cf.Config.WorkingDir = "/work"
	cf.Config.User = "1000"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// writeLayout writes images into a new OCI layout directory.
func writeLayout(t testing.TB, imgs ...v1.Image) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(d, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if err := p.AppendImage(img); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func unpack(t testing.TB, ref string, c *Cache) (*Rootfs, error) {
	t.Helper()
	im, err := Open(ref)
	if err != nil {
		return nil, err
	}
	return c.Unpack(context.Background(), im)
}

// TestUnpackLayers: files, directories, links, whiteouts and opaque
// directories land as the layers say; setuid and setgid are dropped; the
// image's digests and configuration are reported; a second unpack reuses
// the cache.
func TestUnpackLayers(t *testing.T) {
	base := layerOf(t,
		dir("usr/"), dir("usr/bin/"),
		ent{name: "usr/bin/tool", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o4755},
		ent{name: "usr/bin/grp", body: "g", typ: tar.TypeReg, mode: 0o2711},
		hardlink("usr/bin/tool2", "usr/bin/tool"),
		symlink("bin", "usr/bin"),
		dir("etc/"), file("etc/a", "a"), file("etc/b", "b"),
		dir("opt/"), file("opt/old", "old"), dir("opt/sub/"), file("opt/sub/deep", "d"),
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		file("./relative/dot", "dot"),
		file("/absolute/name", "abs"),
	)
	top := layerOf(t,
		file("etc/.wh.a", ""),
		file("opt/new", "new"),
		file("opt/.wh..wh..opq", ""),
		file("usr/bin/tool", "#!/bin/sh\necho replaced\n"), // replaces; tool2 keeps the old bytes
		dir("etc/b/"),                                      // a directory replaces a file
	)
	img := imageOf(t, base, top)
	ref := writeLayout(t, img)
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, ref, c)
	if err != nil {
		t.Fatal(err)
	}
	wantManifest, _ := img.Digest()
	wantConfig, _ := img.ConfigName()
	if r.Manifest != wantManifest.String() || r.Config != wantConfig.String() || r.Reused {
		t.Fatalf("digests: %+v, want manifest %s config %s", r, wantManifest, wantConfig)
	}
	if r.WorkingDir != "/work" || r.User != "1000" || len(r.Env) != 2 {
		t.Fatalf("config not reported: %+v", r)
	}
	root := r.Dir
	mustBody := func(p, want string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	mustGone := func(p string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there (%v)", p, err)
		}
	}
	mustBody("usr/bin/tool", "#!/bin/sh\necho replaced\n")
	mustBody("usr/bin/tool2", "#!/bin/sh\n")
	mustBody("relative/dot", "dot")
	mustBody("absolute/name", "abs")
	mustBody("opt/new", "new")
	mustGone("etc/a")
	mustGone("opt/old")
	mustGone("opt/sub")
	if st, err := os.Lstat(filepath.Join(root, "etc/b")); err != nil || !st.IsDir() {
		t.Errorf("etc/b: %v, want a directory", err)
	}
	if l, err := os.Readlink(filepath.Join(root, "bin")); err != nil || l != "usr/bin" {
		t.Errorf("bin: %q %v", l, err)
	}
	for _, p := range []string{"usr/bin/tool2", "usr/bin/grp"} {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s kept setuid/setgid: %v", p, st.Mode())
		}
	}
	if st, _ := os.Stat(filepath.Join(root, "usr/bin/grp")); st.Mode().Perm() != 0o711 {
		t.Errorf("grp mode %v, want 0711", st.Mode().Perm())
	}
	if st, _ := os.Stat(filepath.Join(root, "tmp")); st.Mode()&os.ModeSticky == 0 {
		t.Errorf("tmp lost its sticky bit: %v", st.Mode())
	}
	again, err := unpack(t, ref, c)
	if err != nil || !again.Reused || again.Dir != r.Dir {
		t.Fatalf("second unpack: %+v, %v; want the cached rootfs", again, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(c.Dir, ".unpack-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary directories left: %v", leftovers)
	}
}

// TestRefusesEscapes: an image cannot write outside its root — not by
// name, not through a symbolic link it planted, not by a hard link — and
// cannot carry device nodes. A refused image leaves nothing in the cache.
func TestRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("intact"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]ent{
		"dotdot":             {file("../escaped", "x")},
		"dotdot-deep":        {file("a/../../escaped", "x")},
		"abs-dotdot":         {file("/../escaped", "x")},
		"symlink-abs-parent": {symlink("esc", outside), file("esc/victim", "pwned")},
		"symlink-rel-parent": {symlink("up", "../../../../../../../../.."+outside), file("up/victim", "pwned")},
		"symlink-two-step":   {dir("d/"), symlink("d/l", "../.."), file("d/l/escaped", "x")},
		"hardlink-outside":   {hardlink("h", victim)},
		"hardlink-dotdot":    {hardlink("h", "../../victim")},
		"hardlink-missing":   {hardlink("h", "etc/shadow")},
		"hardlink-symlink":   {symlink("s", victim), hardlink("h", "s")},
		"whiteout-dotdot":    {file("../.wh.victim", "")},
		"char-device":        {{name: "dev/null", typ: tar.TypeChar, mode: 0o666}},
		"block-device":       {{name: "sda", typ: tar.TypeBlock, mode: 0o660}},
		"fifo":               {{name: "fifo", typ: tar.TypeFifo, mode: 0o644}},
		"root-as-file":       {file(".", "x")},
	}
	for name, ents := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
			_, err := unpack(t, writeLayout(t, imageOf(t, layerOf(t, ents...))), c)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("unpack: %v, want ErrInvalid", err)
			}
			t.Log(err)
			if b, _ := os.ReadFile(victim); string(b) != "intact" {
				t.Fatalf("the file outside the root was changed: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(outside, "escaped")); err == nil {
				t.Fatal("a file was written outside the root")
			}
			entries, _ := os.ReadDir(c.Dir)
			if len(entries) != 0 {
				t.Fatalf("the cache kept %v after a refused image", entries)
			}
		})
	}
}

// TestDigestsChecked: a layer whose bytes do not match the config's diff
// id, a manifest that does not match the index, and a config that does
// not match the manifest are refused, and nothing is cached.
func TestDigestsChecked(t *testing.T) {
	// A config naming another diff id for the layer.
	img := imageOf(t, layerOf(t, file("a", "1")))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	other, _ := layerOf(t, file("a", "2")).DiffID()
	cf.RootFS.DiffIDs[0] = other
	lying, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	if _, err := unpack(t, writeLayout(t, lying), c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("lying diff id: %v", err)
	}
	if entries, _ := os.ReadDir(c.Dir); len(entries) != 0 {
		t.Fatalf("cache kept %v", entries)
	}

	// A manifest blob changed after the index named it.
	d := writeLayout(t, img)
	md, _ := img.Digest()
	blob := filepath.Join(d, "blobs", "sha256", md.Hex)
	raw, _ := os.ReadFile(blob)
	if err := os.WriteFile(blob, append(raw, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d); !errors.Is(err, ErrInvalid) {
		t.Fatalf("tampered manifest: %v", err)
	}

	// A config blob changed after the manifest named it.
	d = writeLayout(t, img)
	cd, _ := img.ConfigName()
	blob = filepath.Join(d, "blobs", "sha256", cd.Hex)
	raw, _ = os.ReadFile(blob)
	if err := os.WriteFile(blob, bytes.Replace(raw, []byte("/work"), []byte("/evil"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unpack(t, d, &Cache{Dir: filepath.Join(t.TempDir(), "c")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("tampered config: %v", err)
	}
}

// TestCacheRecordChecked: a cache entry without its record, or whose
// record names another config, is an error that says what to do, never a
// rootfs used as is.
func TestCacheRecordChecked(t *testing.T) {
	img := imageOf(t, layerOf(t, file("a", "1")))
	ref := writeLayout(t, img)
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, ref, c)
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(filepath.Dir(r.Dir), "image.json")
	b, _ := os.ReadFile(rec)
	os.Chmod(rec, 0o644)
	if err := os.WriteFile(rec, bytes.Replace(b, []byte(`"config":"sha256:`), []byte(`"config":"sha256:0`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unpack(t, ref, c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "remove the directory") {
		t.Fatalf("forged record: %v", err)
	}
	os.Remove(rec)
	if _, err := unpack(t, ref, c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "without its image.json") {
		t.Fatalf("missing record: %v", err)
	}
}

// TestConcurrentUnpack: two unpacks of one image at once both succeed
// with the same rootfs.
func TestConcurrentUnpack(t *testing.T) {
	ref := writeLayout(t, imageOf(t, layerOf(t, dir("x/"), file("x/y", "z"))))
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := unpack(t, ref, c)
			errs[i] = err
			if err == nil {
				dirs[i] = r.Dir
			}
		}()
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Fatalf("unpack %d: %v %q (first %q)", i, errs[i], dirs[i], dirs[0])
		}
	}
}

// TestLimits: an image that unpacks to more than the limit is refused.
func TestLimits(t *testing.T) {
	ref := writeLayout(t, imageOf(t, layerOf(t, file("big", strings.Repeat("x", 4096)))))
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache"), Limits: Limits{MaxBytes: 1000}}
	if _, err := unpack(t, ref, c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Fatalf("over the byte limit: %v", err)
	}
	c = &Cache{Dir: filepath.Join(t.TempDir(), "cache"), Limits: Limits{MaxEntries: 2}}
	ref = writeLayout(t, imageOf(t, layerOf(t, file("a", ""), file("b", ""), file("c", ""))))
	if _, err := unpack(t, ref, c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than 2 entries") {
		t.Fatalf("over the entry limit: %v", err)
	}
}

// TestOpen: how references select an image.
func TestOpen(t *testing.T) {
	a := imageOf(t, layerOf(t, file("a", "1")))
	b := imageOf(t, layerOf(t, file("b", "2")))
	two := writeLayout(t, a, b)
	if _, err := Open(two); !errors.Is(err, ErrRef) || !strings.Contains(err.Error(), "2 images in the layout") {
		t.Fatalf("two images, none named: %v", err)
	}
	bd, _ := b.Digest()
	im, err := Open(two + "@" + bd.String())
	if err != nil || im.Manifest != bd.String() {
		t.Fatalf("by digest: %+v %v", im, err)
	}
	if _, err := Open(two + "@sha256:" + strings.Repeat("0", 64)); !errors.Is(err, ErrRef) {
		t.Fatalf("unknown digest: %v", err)
	}
	if _, err := Open("registry.example/team/go:1.26"); !errors.Is(err, ErrRef) || !strings.Contains(err.Error(), "OCI layout") {
		t.Fatalf("registry reference: %v", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrRef) {
		t.Fatalf("empty directory: %v", err)
	}

	// A docker save tarball: no manifest digest, the config names it.
	tb := filepath.Join(t.TempDir(), "img.tar")
	if err := tarball.WriteToFile(tb, nil, a); err != nil {
		t.Fatal(err)
	}
	im, err = Open(tb)
	if err != nil {
		t.Fatal(err)
	}
	ac, _ := a.ConfigName()
	if im.Manifest != "" || im.Config != ac.String() {
		t.Fatalf("tarball digests: %+v", im)
	}
	r, err := (&Cache{Dir: filepath.Join(t.TempDir(), "c")}).Unpack(context.Background(), im)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir, "a")); string(b) != "1" {
		t.Fatalf("tarball rootfs: %q", b)
	}
	if _, err := Open(tb + "@" + bd.String()); !errors.Is(err, ErrRef) {
		t.Fatalf("digest on a tarball: %v", err)
	}
}

// TestCacheDirChecked (red-team finding 1): a cache directory, or its
// parent, that is a link, owned by another user or writable by others is
// refused before anything is read or written; an entry planted as a link
// is refused, never used.
func TestCacheDirChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chowns directories to another user")
	}
	ref := writeLayout(t, imageOf(t, layerOf(t, file("a", "1"))))
	base := t.TempDir()
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o755)
	os.Chown(other, 65534, 65534)
	link := filepath.Join(base, "link")
	os.Symlink(t.TempDir(), link)
	wide := filepath.Join(base, "wide")
	os.Mkdir(wide, 0o777)
	os.Chmod(wide, 0o777)
	byOther := filepath.Join(base, "owned")
	os.Mkdir(byOther, 0o700)
	os.Mkdir(filepath.Join(byOther, "images"), 0o700)
	os.Chown(byOther, 65534, 65534)
	for name, dir := range map[string]string{
		"cache owned by another user":  other,
		"cache is a link":              link,
		"cache writable by others":     wide,
		"parent owned by another user": filepath.Join(byOther, "images"),
	} {
		if _, err := unpack(t, ref, &Cache{Dir: dir}); err == nil || !strings.Contains(err.Error(), "image cache") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// An entry planted as a link to a directory with a forged record.
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	im, err := Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(c.Dir, 0o700)
	forged := t.TempDir()
	os.WriteFile(filepath.Join(forged, "image.json"), []byte(`{"type":"cordon.image-cache.v1","config":"`+im.Config+`","diff_ids":[],"env":null,"working_dir":"","user":"","unpacked":""}`), 0o644)
	os.Mkdir(filepath.Join(forged, "rootfs"), 0o755)
	os.WriteFile(filepath.Join(forged, "rootfs", "pwned"), nil, 0o644)
	os.Symlink(forged, filepath.Join(c.Dir, "sha256-"+strings.TrimPrefix(im.Config, "sha256:")))
	if r, err := c.Unpack(context.Background(), im); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("planted link entry: %+v, %v", r, err)
	}
}

// TestCancelStopsUnpack (red-team finding 5): a layer that decompresses to
// more than anyone would wait for stops when the context ends, also under
// the default limits, and leaves nothing in the cache.
func TestCancelStopsUnpack(t *testing.T) {
	// 1 GiB of zeros after the archive, inside a valid-looking layer whose
	// diff id cannot match anyway: only the context can stop it early.
	blob := zeroBomb(t, 1<<30)
	ref := rawLayout(t, "application/vnd.oci.image.layer.v1.tar+gzip", []string{"sha256:" + strings.Repeat("0", 64)}, blob)
	im, err := Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	start := time.Now()
	_, err = c.Unpack(ctx, im)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unpack: %v, want the context's error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Unpack ran %v past a 100ms context", took)
	}
	if entries, _ := os.ReadDir(c.Dir); len(entries) != 0 {
		t.Fatalf("the cache kept %v", entries)
	}
}

// TestModesOnHost (red-team finding 10): nothing in a cached rootfs is
// writable by group or others on the host, whatever the image says.
func TestModesOnHost(t *testing.T) {
	ref := writeLayout(t, imageOf(t, layerOf(t,
		ent{name: "usr/", typ: tar.TypeDir, mode: 0o777},
		ent{name: "usr/tool", body: "x", typ: tar.TypeReg, mode: 0o777},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777})))
	r, err := unpack(t, ref, &Cache{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr", "usr/tool", "tmp"} {
		st, _ := os.Stat(filepath.Join(r.Dir, p))
		if st.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: %v", p, st.Mode())
		}
	}
}
