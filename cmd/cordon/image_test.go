package main

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdOCILayout is the testscript command 'oci-layout DIR PATH=CONTENT…':
// write an OCI image layout at DIR holding one image of one layer with
// those regular files (PATH=@FILE: FILE's bytes; PATH ending in / is a
// directory, PATH->TARGET a symbolic link), and set $DIR_DIGEST to its manifest digest.
func cmdOCILayout(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: oci-layout DIR PATH=CONTENT…")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, a := range args[1:] {
		var h *tar.Header
		body := ""
		switch {
		case strings.HasSuffix(a, "/"):
			h = &tar.Header{Name: a, Typeflag: tar.TypeDir, Mode: 0o755}
		case strings.Contains(a, "->"):
			name, target, _ := strings.Cut(a, "->")
			h = &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}
		default:
			name, content, ok := strings.Cut(a, "=")
			if !ok {
				ts.Fatalf("oci-layout: %q is not PATH=CONTENT, PATH=@FILE, DIR/ or PATH->TARGET", a)
			}
			body = content
			if file, ok := strings.CutPrefix(content, "@"); ok {
				body = ts.ReadFile(file) // a binary, say
			}
			h = &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}
		}
		ts.Check(tw.WriteHeader(h))
		_, err := tw.Write([]byte(body))
		ts.Check(err)
	}
	ts.Check(tw.Close())
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	ts.Check(err)
	img, err := mutate.AppendLayers(empty.Image, l)
	ts.Check(err)
	p, err := layout.Write(ts.MkAbs(args[0]), empty.Index)
	ts.Check(err)
	ts.Check(p.AppendImage(img))
	d, err := img.Digest()
	ts.Check(err)
	ts.Setenv(strings.ToUpper(strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(args[0]))+"_DIGEST", d.String())
}
