package runner

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/gitgate"
)

// FuzzParseResult: whatever ParseResult accepts is exactly the canonical
// form of what it decoded, so no two byte strings pass as one result.
func FuzzParseResult(f *testing.F) {
	body := Body{Type: BodyType, Status: StatusFinished, Writes: []WriteEffect{}, Runs: []RunEffect{}, Tasks: []TaskResult{}}
	id := body.id().String()
	good := jcs(Result{Type: ResultType, Commitments: Commitments{Manifest: id, Journal: JournalHead{Count: 3, Head: id}, Body: id}, Body: body})
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"count":3`), []byte(`"count":0`), 1))
	f.Add([]byte(`{"type":"cordon.run-result.v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseResult(b)
		if err != nil {
			return
		}
		if got := jcs(res); !bytes.Equal(got, b) {
			t.Fatalf("accepted %q, which re-encodes as %q", b, got)
		}
	})
}

// FuzzCheckArgv: an accepted argv runs a declared command's basename
// with no shell metacharacter or control character in any token, and
// git only through the gate.
func FuzzCheckArgv(f *testing.F) {
	m := baseManifest(f, nil)
	for _, s := range []string{"python3\x00-V", "/usr/bin/python3\x00x", "git\x00log", "git\x00-c\x00a=b\x00log", "sh\x00-c\x00id", "python3\x00$(id)", "..", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		out, err := checkArgv(m, argv)
		if err != nil {
			return
		}
		if out[0] != path.Base(argv[0]) || !slices.Contains(m.Commands, out[0]) {
			t.Fatalf("%q runs %q", argv, out[0])
		}
		for _, a := range argv {
			if strings.ContainsAny(a, ShellMetacharacters) || strings.ContainsFunc(a, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
				t.Fatalf("accepted token %q", a)
			}
		}
		if out[0] == "git" {
			if err := gitgate.Check(append([]string{"git"}, argv[1:]...)); err != nil {
				t.Fatalf("git argv %q passed the runner but not the gate: %v", argv, err)
			}
			if !slices.Equal(out[1:1+len(gitPrefix)], gitPrefix) {
				t.Fatalf("git ran without the pinned configuration: %q", out)
			}
		}
	})
}
