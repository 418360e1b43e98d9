// Package testreport reads the machine-readable test reports a verify
// command leaves (docs/SPEC.md §5.4) and counts the tests that passed,
// failed and were skipped. Three formats are read, with the standard
// library only:
//
//   - GoTestJSON: the test2json event stream of `go test -json`;
//   - JUnit: JUnit XML (a testsuites or testsuite document);
//   - TAP: the Test Anything Protocol, versions 12 to 14.
//
// Reading is strict, so that a report that is not what it claims to be
// fails verification instead of counting: a report over MaxBytes, invalid
// UTF-8, an unknown event or field, a DOCTYPE, a TAP plan that does not
// match its test lines are errors (wrapping ErrMalformed) that name the
// line or element. Counting is conservative: nothing is counted as passed
// unless the report says it passed, and a failure the report declares
// anywhere is counted.
//
// What a report cannot show is that the tests it lists are meaningful:
// the code under test runs in the process that writes the report and can
// forge it (CLAIMS.md, "Known limitations").
//
// The package is pure: no I/O.
package testreport

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Formats of a report, as a manifest names them.
const (
	GoTestJSON = "go-test-json"
	JUnit      = "junit"
	TAP        = "tap"
)

// Formats lists the formats Parse reads.
var Formats = []string{GoTestJSON, JUnit, TAP}

// Limits of a report.
const (
	MaxBytes     = 8 << 20 // a whole report
	MaxLineBytes = 1 << 20 // one line of a go-test-json or TAP report
	MaxDepth     = 64      // element nesting of a JUnit report
)

// ErrMalformed is wrapped by every error Parse returns.
var ErrMalformed = errors.New("malformed test report")

// Counts are what a report says about its tests. Failed includes tests
// that errored, and in go-test-json also packages or builds that failed
// and tests that started but never ended.
type Counts struct {
	Passed  int64 `json:"passed"`
	Failed  int64 `json:"failed"`
	Skipped int64 `json:"skipped"`
}

// Known reports whether format is one Parse reads.
func Known(format string) bool { return slices.Contains(Formats, format) }

// Parse reads a report of the given format and counts its tests.
func Parse(format string, data []byte) (Counts, error) {
	if len(data) > MaxBytes {
		return Counts{}, malformed("%d bytes, more than the limit of %d", len(data), MaxBytes)
	}
	if !utf8.Valid(data) {
		return Counts{}, malformed("not valid UTF-8")
	}
	switch format {
	case GoTestJSON:
		return parseGoTestJSON(data)
	case JUnit:
		return parseJUnit(data)
	case TAP:
		return parseTAP(data)
	}
	return Counts{}, malformed("unknown format %q (want one of %q)", format, Formats)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// lines splits data into lines without their "\n" (and a "\r" before
// it), refusing one longer than MaxLineBytes.
func lines(data []byte) ([]string, error) {
	var out []string
	for n := 1; len(data) > 0; n++ {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if i > MaxLineBytes {
			return nil, malformed("line %d: longer than %d bytes", n, MaxLineBytes)
		}
		line := data[:i]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		out = append(out, string(line))
		if i == len(data) {
			break
		}
		data = data[i+1:]
	}
	return out, nil
}
