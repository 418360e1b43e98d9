package redact

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// samples are one credential of each shape the pool knows. They are made
// up: none is a real credential.
var samples = map[string]string{
	"github":         "ghp_" + strings.Repeat("aB3", 12),
	"github-pat":     "github_pat_11ABCDEFG0123456789_" + strings.Repeat("x", 59),
	"gitlab":         "glpat-" + strings.Repeat("Zz9_", 5),
	"anthropic":      "sk-ant-api03-" + strings.Repeat("Q1w-", 10),
	"openai":         "sk-proj-" + strings.Repeat("Ab12", 10),
	"aws-access-key": "AKIA" + "IOSFODNN7EXAMPLE",
	"aws-secret-key": "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	"slack":          "xoxb-" + "1234567890-abcdefghij",
	"cordon-key":     "cdn_" + strings.Repeat("k3y", 10),
	"pem":            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----",
	"pem-rsa":        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123\n\nAAAA\n-----END RSA PRIVATE KEY-----",
}

const operatorSecret = "correct horse battery staple"

func pool(t testing.TB) *Pool {
	t.Helper()
	p, err := NewPool(Config{OperatorSecrets: []string{operatorSecret, "hunter2hunter2"}, Configured: 2})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leaks reports the secrets still in out, in whole or as their
// distinctive tail.
func leaks(out string) []string {
	var found []string
	for name, s := range samples {
		if strings.Contains(out, s) || strings.Contains(out, s[len(s)-12:]) {
			found = append(found, name)
		}
	}
	for _, s := range []string{operatorSecret, "hunter2hunter2"} {
		if strings.Contains(out, s) {
			found = append(found, "operator: "+s)
		}
	}
	return found
}

func TestShapes(t *testing.T) {
	p := pool(t)
	for name, s := range samples {
		for _, text := range []string{s, "before " + s + " after", "x=" + s + "\n", `{"note":"` + s + `"}`} {
			out, err := p.String(text)
			if err != nil {
				t.Fatal(err)
			}
			if l := leaks(out); len(l) > 0 || !strings.Contains(out, "[redacted:") {
				t.Errorf("%s in %q: %q leaks %v", name, text, out, l)
			}
		}
	}
	out, _ := p.String("the password is " + operatorSecret + ", again: hunter2hunter2.")
	if out != "the password is [redacted:secret], again: [redacted:secret]." {
		t.Fatalf("operator secrets: %q", out)
	}
	// Ordinary text is left alone.
	plain := "sk is not a key; ghp_short; AKIA lower; the build passed in 3.2s"
	if out, _ := p.String(plain); out != plain {
		t.Fatalf("ordinary text changed: %q", out)
	}
	// An unterminated PEM block is masked to the end: a key cut short is
	// still a key.
	cut := samples["pem"][:60]
	if out, _ := p.String("log: " + cut); strings.Contains(out, "MC4CAQ") {
		t.Fatalf("cut PEM block leaked: %q", out)
	}
}

// TestFailLoud: a pool whose operator configured secrets that resolved to
// nothing refuses every output; a pool configured with none works.
func TestFailLoud(t *testing.T) {
	for _, vals := range [][]string{nil, {""}, {"", ""}} {
		p, err := NewPool(Config{OperatorSecrets: vals, Configured: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.String("anything"); !errors.Is(err, ErrEmptyPool) {
			t.Errorf("String with %q: %v", vals, err)
		}
		if _, err := p.Value(map[string]any{"a": "b"}); !errors.Is(err, ErrEmptyPool) {
			t.Errorf("Value with %q: %v", vals, err)
		}
		var sink bytes.Buffer
		w := p.NewWriter(&sink)
		if _, err := w.Write([]byte("anything")); !errors.Is(err, ErrEmptyPool) || sink.Len() != 0 {
			t.Errorf("Writer with %q: %v, wrote %q", vals, err, sink.String())
		}
		if err := w.Close(); !errors.Is(err, ErrEmptyPool) || sink.Len() != 0 {
			t.Errorf("Close with %q: %v, wrote %q", vals, err, sink.String())
		}
	}
	p, err := NewPool(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := p.String("a " + samples["github"]); err != nil || leaks(out) != nil {
		t.Fatalf("secret-less pool: %q %v", out, err)
	}
	if _, err := NewPool(Config{OperatorSecrets: []string{"short"}, Configured: 1}); !errors.Is(err, ErrBadSecret) || strings.Contains(err.Error(), "short") {
		t.Fatalf("short secret: %v (the message must not hold the value)", err)
	}
}

// TestValue: secret-named members are masked whole, every string at any
// depth is masked, the top-level string too, and the input is unchanged.
func TestValue(t *testing.T) {
	p := pool(t)
	in := map[string]any{
		"api_key":       "not-shaped-like-anything",
		"Authorization": "Bearer abc",
		"clientSecret":  float64(12345),
		"note":          "deploy with " + samples["github"],
		"nested":        []any{map[string]any{"deep": []any{"x " + operatorSecret}}, samples["aws-access-key"]},
		"count":         float64(3),
		"token_count":   nil, // a null is not a secret
	}
	outV, err := p.Value(in)
	if err != nil {
		t.Fatal(err)
	}
	out := outV.(map[string]any)
	for _, k := range []string{"api_key", "Authorization", "clientSecret"} {
		if out[k] != Mask("field") {
			t.Errorf("%s: %v", k, out[k])
		}
	}
	if out["count"] != float64(3) || out["token_count"] != nil {
		t.Errorf("ordinary members changed: %v", out)
	}
	flat := strings.ReplaceAll(strings.ReplaceAll(toString(out), "\n", " "), "\t", " ")
	if l := leaks(flat); l != nil {
		t.Errorf("leaks %v in %s", l, flat)
	}
	if in["note"] != "deploy with "+samples["github"] {
		t.Fatal("Value changed its input")
	}
	top, _ := p.Value(samples["slack"])
	if top != Mask("slack") {
		t.Fatalf("top-level string: %v", top)
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		var b strings.Builder
		for k, e := range x {
			b.WriteString(k + "=" + toString(e) + " ")
		}
		return b.String()
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(toString(e) + " ")
		}
		return b.String()
	}
	return ""
}

// TestWriterSplits: a secret split at every byte across two writes, and a
// text cut into random chunks, come out exactly as String masks the whole.
func TestWriterSplits(t *testing.T) {
	p := pool(t)
	for name, s := range samples {
		text := "start " + s + " end"
		want, _ := p.String(text)
		for cut := 0; cut <= len(text); cut++ {
			var out bytes.Buffer
			w := p.NewWriter(&out)
			w.Write([]byte(text[:cut]))
			w.Write([]byte(text[cut:]))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Fatalf("%s split at %d: %q, want %q", name, cut, out.String(), want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{}
	for k := range samples {
		keys = append(keys, k)
	}
	for iter := 0; iter < 200; iter++ {
		var b strings.Builder
		for i := 0; i < 40; i++ {
			switch rng.IntN(4) {
			case 0:
				b.WriteString(samples[keys[rng.IntN(len(keys))]])
			case 1:
				b.WriteString(operatorSecret)
			default:
				b.WriteString(strings.Repeat("lorem ipsum ", rng.IntN(200)))
			}
			b.WriteByte(' ')
		}
		text := b.String()
		want, _ := p.String(text)
		var out bytes.Buffer
		w := p.NewWriter(&out)
		for rest := text; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(3000))
			w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		w.Close()
		if out.String() != want {
			t.Fatalf("iteration %d: chunked output differs from whole", iter)
		}
		if l := leaks(out.String()); l != nil {
			t.Fatalf("iteration %d: leaks %v", iter, l)
		}
	}
}

// TestWriterLongPEM: a PEM block longer than a writer holds is masked from
// its BEGIN line to its END line, however it is chunked, and the text
// after it flows again; an unterminated one never comes out.
func TestWriterLongPEM(t *testing.T) {
	p := pool(t)
	body := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n", (pemHold/37)+100)
	text := "before\n-----BEGIN EC PRIVATE KEY-----\n" + body + "-----END EC PRIVATE KEY-----\nafter " + samples["github"] + "\n"
	var out bytes.Buffer
	w := p.NewWriter(&out)
	for rest := text; len(rest) > 0; {
		n := min(len(rest), 4093)
		w.Write([]byte(rest[:n]))
		rest = rest[n:]
	}
	w.Close()
	got := out.String()
	if strings.Contains(got, "QUJDREVG") || !strings.HasPrefix(got, "before\n[redacted:pem-private-key]") || !strings.Contains(got, "\nafter [redacted:github]") {
		t.Fatalf("long PEM: %.200q … %.200q", got, got[max(0, len(got)-200):])
	}
	out.Reset()
	w = p.NewWriter(&out)
	w.Write([]byte("x -----BEGIN PRIVATE KEY-----\n" + body[:5000]))
	w.Close()
	if strings.Contains(out.String(), "QUJDREVG") {
		t.Fatalf("unterminated PEM came out: %.100q", out.String())
	}
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte("a "+samples["github"]+" b "+samples["pem"]), uint8(7))
	f.Add([]byte(operatorSecret), uint8(3))
	p := pool(f)
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		want, err := p.String(string(data))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := p.NewWriter(&out)
		step := int(chunk) + 1
		for i := 0; i < len(data); i += step {
			w.Write(data[i:min(len(data), i+step)])
		}
		w.Close()
		if out.String() != want {
			t.Fatalf("chunked by %d: %q, whole: %q", step, out.String(), want)
		}
	})
}
