package main

import (
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
)

// mainExecUnit is execUnit as it was before --image (frozen here): a run
// without an image must keep producing exactly these bytes.
func mainExecUnit(argv []string, res *sandbox.Result) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"argv":[`)
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(a))
	}
	b.WriteString(`],"grants":` + jsonString(res.GrantsID.String()))
	b.WriteString(`,"inputs":{`)
	for i, f := range res.Inputs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(f.Path) + ":" + jsonString(f.ID.String()))
	}
	b.WriteString(`},"program":{"b3":` + jsonString(res.Program.B3.String()) + `,"path":` + jsonString(res.Program.Path) + `}`)
	b.WriteString(`,"tier":` + jsonString(res.Tier.String()) + `,"type":"cordon.exec.v1"}`)
	return canon.JCS([]byte(b.String()))
}

// TestExecUnitImage: without an image the unit document is byte for byte
// what it was before images; with one it adds "image" {config,
// manifest?} and nothing else.
func TestExecUnitImage(t *testing.T) {
	res := &sandbox.Result{Tier: tier.S2, GrantsID: canon.Sum([]byte("g")),
		Program: sandbox.Program{Path: "/usr/bin/true", B3: canon.Sum([]byte("p"))},
		Inputs:  []stage.File{{Path: "a \"b\".txt", ID: canon.Sum([]byte("a"))}, {Path: "c", ID: canon.Sum([]byte("c"))}}}
	for _, argv := range [][]string{{"true"}, {"sh", "-c", "echo \"<&>\" \u2028"}} {
		for _, inputs := range [][]stage.File{nil, res.Inputs} {
			r := *res
			r.Inputs = inputs
			want, err := mainExecUnit(argv, &r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := execUnit(argv, &r, nil, canon.ID{})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("without an image:\n got %s\nwant %s", got, want)
			}
			img := &sandbox.ImageRuntime{Root: "/x", Manifest: "sha256:" + strings.Repeat("a", 64), Config: "sha256:" + strings.Repeat("b", 64)}
			got, err = execUnit(argv, &r, img, canon.ID{})
			if err != nil {
				t.Fatal(err)
			}
			member := `"image":{"config":"` + img.Config + `","manifest":"` + img.Manifest + `"},`
			if string(got) != strings.Replace(string(want), `"inputs":`, member+`"inputs":`, 1) {
				t.Errorf("with an image: %s", got)
			}
			img.Manifest = "" // a docker save tarball
			got, _ = execUnit(argv, &r, img, canon.ID{})
			if !strings.Contains(string(got), `"image":{"config":"`+img.Config+`"},"inputs"`) {
				t.Errorf("with a tarball's image: %s", got)
			}
		}
	}
}
