package runrecord

import (
	"bytes"
	"testing"
)

// FuzzParseResult: whatever ParseResult accepts is exactly the canonical
// form of what it decoded, so no two byte strings pass as one result.
func FuzzParseResult(f *testing.F) {
	body := Body{Type: BodyType, Status: StatusFinished, Writes: []WriteEffect{}, Runs: []RunEffect{}, Tasks: []TaskResult{}}
	id := body.ID().String()
	good := JCS(Result{Type: ResultType, Commitments: Commitments{Manifest: id, Journal: JournalHead{Count: 3, Head: id}, Body: id}, Body: body})
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"count":3`), []byte(`"count":0`), 1))
	f.Add([]byte(`{"type":"cordon.run-result.v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseResult(b)
		if err != nil {
			return
		}
		if got := JCS(res); !bytes.Equal(got, b) {
			t.Fatalf("accepted %q, which re-encodes as %q", b, got)
		}
	})
}
