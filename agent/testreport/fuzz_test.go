package testreport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzParse checks that Parse never panics, fails only with ErrMalformed,
// and never returns negative counts.
func fuzzParse(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	ents, _ := os.ReadDir("testdata")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(format, data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if c != (Counts{}) {
				t.Fatalf("an error with counts %+v", c)
			}
			return
		}
		if c.Passed < 0 || c.Failed < 0 || c.Skipped < 0 {
			t.Fatalf("negative counts %+v", c)
		}
	})
}

func FuzzParseGoTestJSON(f *testing.F) {
	fuzzParse(f, GoTestJSON, `{"Action":"run","Package":"p","Test":"A"}`+"\n"+`{"Action":"pass","Package":"p","Test":"A"}`+"\n")
}

func FuzzParseJUnit(f *testing.F) {
	fuzzParse(f, JUnit, `<testsuites failures="1"><testsuite><testcase name="a"><failure/></testcase></testsuite></testsuites>`)
}

func FuzzParseTAP(f *testing.F) {
	fuzzParse(f, TAP, "TAP version 14\n1..2\nok 1 - a # SKIP\nnot ok 2\n", "ok\n1..1\nBail out!\n")
}
