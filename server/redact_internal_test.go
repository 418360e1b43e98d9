package server

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/store"
)

// TestMaskJSONTopLevelAndNames: a top-level string is masked; so is a
// secret in a member name, and every string under a secret-named member
// (numbers under one, such as a token budget, are kept).
func TestMaskJSONTopLevelAndNames(t *testing.T) {
	p, err := redact.NewPool(redact.Config{OperatorSecrets: []string{"op-secret-value-1"}, Configured: 1})
	if err != nil {
		t.Fatal(err)
	}
	gh := "ghp_" + strings.Repeat("Z9", 18)
	for in, want := range map[string]string{
		`"` + gh + `"`:                               `"[redacted:github]"`,
		`"x op-secret-value-1 y"`:                    `"x [redacted:secret] y"`,
		`{"` + gh + `":1}`:                           `{"[redacted:github]":1}`,
		`{"auth":{"password":"hunter22","n":["a"]}}`: `{"auth":{"n":["a"],"password":"[redacted:field]"}}`,
		`{"credentials":{"user":"u","list":["p"]}}`:  `{"credentials":{"list":["[redacted:field]"],"user":"[redacted:field]"}}`,
		`{"max_output_tokens":10000}`:                `{"max_output_tokens":10000}`,
	} {
		got, err := maskJSONBytes(p, []byte(in))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s: got %s, %v; want %s", in, got, err, want)
		}
	}
	empty, _ := redact.NewPool(redact.Config{Configured: 1})
	if _, err := maskJSONBytes(empty, []byte(`"x"`)); err == nil {
		t.Error("a failing pool masked a response")
	}
}

// TestAuditExportMasksSecretNamesAndLaterSecrets: a secret-named member
// of a record, and a string holding a secret configured after the
// record was written, are masked in the export (to their commitments),
// and the export still verifies.
func TestAuditExportMasksSecretNamesAndLaterSecrets(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	admin := strings.Repeat("a", 40)
	s, err := New(Config{Store: st, AdminKey: admin, StateDir: dir, Key: k, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	later := "configured-later-secret"
	ev := s.event("", "test", map[string]any{"kind": "operator"}, map[string]any{"api_key": "shown-nowhere", "note": "x " + later, "plain": "visible"})
	if err := st.Audit(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSecretSource("broker", []string{later}, 1); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	req, _ := http.NewRequest("GET", hs.URL+"/v1/audit/export", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	recs, err := audit.Verify(body, k.Public())
	if err != nil || len(recs) != 1 {
		t.Fatalf("verify: %v\n%s", err, body)
	}
	r := recs[0]
	if _, ok := r.Revealed[`["subject","api_key"]`]; ok || strings.Contains(string(body), "shown-nowhere") {
		t.Error("a secret-named member was revealed")
	}
	if _, ok := r.Revealed[`["subject","note"]`]; ok || strings.Contains(string(body), later) {
		t.Error("a string holding a secret was revealed")
	}
	if v := r.Revealed[`["subject","plain"]`]; v.Str() != "visible" || r.Masked != 2 {
		t.Errorf("plain %q, %d masked", v.Str(), r.Masked)
	}
}

// BenchmarkMaskResponse measures what masking adds to encoding a
// response: a run view with its snapshot (escapes in it: the full pass),
// and a list of twenty runs (the fast path).
func BenchmarkMaskResponse(b *testing.B) {
	dir := b.TempDir()
	st, err := store.Open(b.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, _ := New(Config{Store: st, AdminKey: strings.Repeat("a", 40), StateDir: dir, Key: k, Version: "test", Secrets: []string{"op-secret-value-1"}, SecretsConfigured: 1})
	p := s.Pool()
	snap := `{"manifest":{"type":"cordon.manifest.v1","task":"Run the command.","model":{"provider":"replay","name":"recorded","replay":"session.jsonl"},"inputs":[],"outputs":[],"commands":["true"],"budgets":{"max_turns":4,"max_input_tokens":100000}},"files":{"session.jsonl":"` + strings.Repeat("x", 1200) + `\n"}}`
	run := func() map[string]any {
		return map[string]any{"id": "run_abcdefghijklmnopqrstuvwxyz", "project": "prj_abcdefghijklmnopqrstuvwxyz", "task": "t", "state": "finished",
			"submitted_by": "usr_abcdefghijklmnopqrstuvwxyz", "created_at": "2026-12-01T18:53:44.881815586Z", "execution": "sandbox", "attempts": 1}
	}
	view := run()
	view["snapshot"] = json.RawMessage(snap)
	var list []any
	for range 20 {
		list = append(list, run())
	}
	for name, doc := range map[string]any{"view": view, "list": list} {
		b.Run(name+"/encode", func(b *testing.B) {
			for b.Loop() {
				json.Marshal(doc)
			}
		})
		b.Run(name+"/encode+mask", func(b *testing.B) {
			for b.Loop() {
				out, _ := json.Marshal(doc)
				if !s.clean(p, out) {
					maskJSONBytes(p, out)
				}
			}
		})
	}
}

// TestCleanFastPathAgrees: whenever the fast path lets a document
// through unmasked, the full pass leaves it unchanged too.
func TestCleanFastPathAgrees(t *testing.T) {
	s := secretServer(t, []string{"op-secret-value-1"})
	p := s.Pool()
	gh := "ghp_" + strings.Repeat("Z9", 18)
	for _, v := range []any{
		map[string]any{"a": "plain", "n": 1},
		map[string]any{"a": "x\n" + gh},
		map[string]any{"a": "x op-secret-value-1"},
		map[string]any{"api_token": "abc"},
		map[string]any{"max_input_tokens": 10, "t": true},
		map[string]any{"a": "aws_secret_access_key\t= " + strings.Repeat("A", 40)},
		map[string]any{"a": "<" + gh + ">"},
		map[string]any{gh: 1},
		[]any{"-----BEGIN PRIVATE KEY-----\nabc"},
		gh,
	} {
		b, _ := json.Marshal(v)
		full, err := maskJSONBytes(p, b)
		if err != nil {
			t.Fatal(err)
		}
		if s.clean(p, b) && strings.TrimSpace(string(full)) != string(b) {
			t.Errorf("%s: the fast path lets it through, the full pass masks it to %s", b, full)
		}
	}
	if !s.clean(p, []byte(`{"a":"plain","max_output_tokens":5}`)) {
		t.Error("a plain document takes the full pass")
	}
	// A plain document with escapes (a run's view: its snapshot's files
	// are JSON in a string) takes the fast path too.
	if b, _ := json.Marshal(map[string]any{"files": map[string]any{"session.jsonl": "{\"a\":\"<b>\"}\n"}}); !s.clean(p, b) {
		t.Errorf("%s takes the full pass", b)
	}
}

// TestCleanFastPathAgreesEscaped: the fast path decodes escaped strings,
// so a secret that JSON writes escaped (a quote, <, a tab, a line
// separator in it), a secret or a credential spelled with \u escapes,
// and a secret-named member whose name is escaped, all reach the full
// pass; and, over a sweep of documents assembled from such pieces,
// whenever the fast path lets one through the full pass leaves it
// unchanged.
func TestCleanFastPathAgreesEscaped(t *testing.T) {
	secrets := []string{"op\"quote<secret>", "tab\there-secret", "ls\u2028sep-secret", "amp&ersand-secret", "plain-secret-1"}
	s := secretServer(t, secrets)
	p := s.Pool()
	gh := "ghp_" + strings.Repeat("Z9", 18)
	agree := func(b []byte) bool {
		t.Helper()
		full, err := maskJSONBytes(p, b)
		if err != nil {
			return !s.clean(p, b) // not JSON: never through the fast path
		}
		var in, out any
		json.Unmarshal(b, &in)
		json.Unmarshal(full, &out)
		inJ, _ := json.Marshal(in)
		outJ, _ := json.Marshal(out)
		if s.clean(p, b) && string(inJ) != string(outJ) {
			t.Errorf("%s: the fast path lets it through, the full pass masks it to %s", b, full)
			return false
		}
		return true
	}
	for _, b := range []string{
		`{"a":"x op\"quote\u003csecret\u003e y"}`,
		`{"a":"op\u0022quote<secret>"}`,
		`{"a":"tab\there-secret"}`,
		`{"a":"ls\u2028sep-secret"}`,
		`{"a":"amp\u0026ersand-secret"}`,
		`{"a":"plain\u002dsecret-1"}`,
		`{"a":"\u0067hp_` + strings.Repeat("Z9", 18) + `"}`,
		`{"a":"\n` + gh + `\n"}`,
		`{"api\u005fkey":"abc"}`,
		`{"api\u005fkey":{"x":1}}`,
		`{"a":"x","b":"y\"` + gh + `"}`,
		`["\"` + gh + `\""]`,
		`{"a":"unterminated`,
		`{"a":"bad \x escape"}`,
		"{\"a\":\"\xff" + gh + "\"}",
	} {
		if s.clean(p, []byte(b)) {
			t.Errorf("%s takes the fast path; it holds a secret, a secret-named string, or is not JSON", b)
		}
		agree([]byte(b))
	}
	pieces := []string{"a", "plain", "x y", gh, "op\"quote<secret>", "op\"quote", "<secret>", "tab\there-secret", "tab",
		"ls\u2028sep-secret", "amp&ersand-secret", "plain-secret-1", "plain-secret-", "1", "\"", "\\", "<", "\n", "\u2028",
		"sk-ant-" + strings.Repeat("a", 20), "aws_secret_access_key=", strings.Repeat("A", 40), "cdn_", strings.Repeat("b", 20), "é", "\t"}
	names := []string{"a", "token", "max_output_tokens", "api\"key", "session", "x<y", gh, "plain-secret-1", "tab\there-secret"}
	n, fast := 0, 0
	for i, a := range pieces {
		for j, c := range pieces {
			for _, name := range []string{names[(i+j)%len(names)], names[(i*j)%len(names)]} {
				for _, doc := range []any{
					map[string]any{name: a + c},
					map[string]any{name: []any{a, c}},
					map[string]any{"v": a, name: 3, "w": c},
					map[string]any{"o": map[string]any{name: map[string]any{"k": a + " " + c}}},
					[]any{a, c},
					a + c,
				} {
					b, err := json.Marshal(doc)
					if err != nil {
						t.Fatal(err)
					}
					n++
					if s.clean(p, b) {
						fast++
					}
					agree(b)
				}
			}
		}
	}
	if n < 5000 || fast*4 < n {
		t.Fatalf("%d documents, %d through the fast path: the sweep checks too little", n, fast)
	}
}

// TestCleanMemo: a document found clean is remembered only for the pool
// that checked it and only for the same bytes: once the operator adds a
// secret the document holds, the next check of the same bytes searches
// again and finds it; a document that needs masking is never
// remembered; and the memo is bounded.
func TestCleanMemo(t *testing.T) {
	s := secretServer(t, []string{"op-secret-value-1"})
	doc := []byte(`{"id":"run_1","reason":"exit token later-secret-value-2 here"}`)
	p1 := s.Pool()
	for range 2 { // searched, then remembered
		if !s.clean(p1, doc) {
			t.Fatal("a clean document is not clean")
		}
	}
	if n := len(s.cleanMemo.m); n != 1 {
		t.Fatalf("memo holds %d documents, want 1", n)
	}
	if err := s.SetSecretSource("broker", []string{"later-secret-value-2"}, 1); err != nil {
		t.Fatal(err)
	}
	p2 := s.Pool()
	if p2 == p1 {
		t.Fatal("a new secret kept the pool")
	}
	if s.clean(p2, doc) {
		t.Fatal("the memo let through a document holding a secret added since")
	}
	masked, err := maskJSONBytes(p2, doc)
	if err != nil || strings.Contains(string(masked), "later-secret-value-2") {
		t.Fatalf("masked: %s %v", masked, err)
	}
	// A document the pool masks is searched every time, never remembered.
	bad := []byte(`{"a":"x op-secret-value-1"}`)
	for range 3 {
		if s.clean(p2, bad) {
			t.Fatal("a document holding a secret is clean")
		}
	}
	if _, ok := s.cleanMemo.m[sha256.Sum256(bad)]; ok {
		t.Fatal("a document holding a secret was remembered")
	}
	// Only the same bytes: one changed byte is searched again.
	near := []byte(`{"a":"x op-secret-value-2"}`)
	if !s.clean(p2, near) {
		t.Fatal("a clean near-miss is not clean")
	}
	if s.clean(p2, bad) {
		t.Fatal("the memo answered for other bytes")
	}
	for i := range cleanMemoMax + 10 {
		s.clean(p2, []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if len(s.cleanMemo.m) > cleanMemoMax {
			t.Fatalf("memo holds %d documents", len(s.cleanMemo.m))
		}
	}
}

// secretServer is a server whose operator configured secrets (the
// masking tests').
func secretServer(t *testing.T, secrets []string) *Server {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, _ := sign.Generate()
	s, err := New(Config{Store: st, AdminKey: strings.Repeat("a", 40), StateDir: dir, Key: k, Version: "test", Secrets: secrets, SecretsConfigured: len(secrets)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCleanMemoConcurrentPools: seen, read-locked, races remember's
// swap of the table (to a new pool, or when full) from many goroutines,
// and never answers "clean" for a document under a pool that did not
// check it: a document holding a secret only the second pool has is
// clean under the first and never under the second, however the two
// pools' checks and a stream of other documents (which fill the memo
// past its bound, emptying it) interleave.
func TestCleanMemoConcurrentPools(t *testing.T) {
	s := secretServer(t, []string{"op-secret-value-1"})
	p1 := s.Pool()
	if err := s.SetSecretSource("broker", []string{"later-secret-value-2"}, 1); err != nil {
		t.Fatal(err)
	}
	p2 := s.Pool()
	doc := []byte(`{"id":"run_1","reason":"exit token later-secret-value-2 here"}`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4000 {
				switch {
				case g < 2: // fill the memo with other documents, under both pools
					p := p1
					if i%3 == 0 {
						p = p2
					}
					if !s.clean(p, []byte(fmt.Sprintf(`{"g":%d,"n":%d}`, g, i))) {
						errs <- fmt.Errorf("a clean filler document is not clean")
						return
					}
				case g%2 == 0:
					if !s.clean(p1, doc) {
						errs <- fmt.Errorf("the document is not clean under the pool without its secret")
						return
					}
				default:
					if s.clean(p2, doc) {
						errs <- fmt.Errorf("the document holding the second pool's secret is clean under it (iteration %d)", i)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
