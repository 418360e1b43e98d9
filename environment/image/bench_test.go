package image

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// benchLayer writes a gzip-compressed layer of a real source tree (Go's
// own net packages: about 700 files, many small) and returns its path.
func benchLayer(b *testing.B) string {
	b.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src", "net")
	gz := filepath.Join(b.TempDir(), "layer.tar.gz")
	f, err := os.Create(gz)
	if err != nil {
		b.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(src), p)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			_, err = io.Copy(tw, in)
			return err
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []io.Closer{tw, zw, f} {
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return gz
}

// BenchmarkUnpack: the first unpack of an image (verify, decompress,
// extract safely) against tar -xzf of the same compressed layer. Target:
// at most 2x (issue 14).
func BenchmarkUnpack(b *testing.B) {
	gz := benchLayer(b)
	l, err := tarball.LayerFromFile(gz)
	if err != nil {
		b.Fatal(err)
	}
	ref := writeLayout(b, imageOf(b, l))
	b.Run("impl=cordon", func(b *testing.B) {
		for b.Loop() {
			c := &Cache{Dir: filepath.Join(b.TempDir(), "cache")}
			im, err := Open(ref)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Unpack(context.Background(), im); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=tar", func(b *testing.B) {
		for b.Loop() {
			d := b.TempDir()
			if out, err := exec.Command("tar", "-xzf", gz, "-C", d).CombinedOutput(); err != nil {
				b.Fatalf("tar: %v %s", err, out)
			}
		}
	})
}

// BenchmarkCacheHit: what a run on an already unpacked image pays to find
// it (open the layout, check the manifest, read the cache record). Target:
// at most 1 ms added to a cold start (issue 14).
func BenchmarkCacheHit(b *testing.B) {
	ref := writeLayout(b, imageOf(b, layerOf(b, file("a", "1"))))
	c := &Cache{Dir: filepath.Join(b.TempDir(), "cache")}
	im, err := Open(ref)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Unpack(context.Background(), im); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		im, err := Open(ref)
		if err != nil {
			b.Fatal(err)
		}
		r, err := c.Unpack(context.Background(), im)
		if err != nil || !r.Reused {
			b.Fatal(err)
		}
	}
}
