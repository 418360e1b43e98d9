package runner

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/sandbox"
)

// chunkSandbox writes a command's standard output in the given chunks,
// one write each, so that a secret can be split across writes.
type chunkSandbox struct {
	*fakeSandbox
	chunks []string
}

func (c *chunkSandbox) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	for _, ch := range c.chunks {
		if _, err := s.Stdout.Write([]byte(ch)); err != nil {
			return nil, err
		}
	}
	return c.fakeSandbox.Run(ctx, s)
}

// The secrets a runner pool must mask, one of each shape and the
// operator's value.
var (
	opSecret   = "operator-value-0123456789"
	ghToken    = "ghp_" + strings.Repeat("A1b2", 9)
	awsKey     = "AKIA" + strings.Repeat("Z", 16)
	anthropic  = "sk-ant-" + strings.Repeat("q", 24)
	pemBlock   = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
	allSecrets = []string{opSecret, ghToken, awsKey, anthropic, "MIIEowIBAAKCAQEA"}
)

func testPool(t *testing.T) *redact.Pool {
	t.Helper()
	p, err := redact.NewPool(redact.Config{OperatorSecrets: []string{opSecret}, Configured: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRedactCapturedOutputAndJournal: a command's output with a secret
// of each shape, each split across two writes, reaches neither the
// journal, nor the model, nor the operator's log; the model's own text
// (a command argument) holding a secret is masked in the journal; the
// record still verifies.
func TestRedactCapturedOutputAndJournal(t *testing.T) {
	var chunks []string
	for _, s := range []string{opSecret, ghToken, awsKey, anthropic, pemBlock} {
		h := len(s) / 2
		chunks = append(chunks, "before "+s[:h], s[h:]+" after\n")
	}
	sb := &chunkSandbox{fakeSandbox: okSandbox(), chunks: chunks}
	ws := newWorkspace(t, defaultFiles())
	s := &script{resps: []*provider.Response{
		{Content: []provider.Block{{Type: "text", Text: "the key is " + ghToken + " and " + opSecret},
			call("run", `{"argv":["printenv","`+ghToken+`"]}`)},
			StopReason: "tool_use", Usage: provider.Usage{InputTokens: 10, OutputTokens: 5, Reported: true}, Attempts: 1},
		finish("done: " + opSecret),
	}}
	k := newKey(t)
	var log bytes.Buffer
	if _, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb, cfg: func(c *Config) {
		c.Key, c.Redact, c.Log = k, testPool(t), &log
	}}); err != nil {
		t.Fatal(err)
	}
	pub := k.Public()
	checkReport(t, runrecord.Verify(ws, &pub), trustedChecks, nil)
	results := toolResults(s)
	if len(results) == 0 {
		t.Fatal("no tool results")
	}
	var fed strings.Builder
	for _, r := range results {
		fed.WriteString(r.Text)
	}
	for _, want := range []string{"[redacted:secret]", "[redacted:github]", "[redacted:aws-access-key]", "[redacted:anthropic]", "[redacted:pem-private-key]", "before", "after"} {
		if !strings.Contains(fed.String(), want) {
			t.Errorf("the model's tool result lacks %q:\n%s", want, fed.String())
		}
	}
	check := func(name string, b []byte) {
		for _, sec := range allSecrets {
			if bytes.Contains(b, []byte(sec)) {
				t.Errorf("%s holds %.12s…", name, sec)
			}
		}
	}
	check("the model's tool results", []byte(fed.String()))
	check("the runner's log", log.Bytes())
	err := filepath.WalkDir(filepath.Join(ws, StateDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		check(p, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if j := readState(t, ws, JournalFile); !bytes.Contains(j, []byte("[redacted:github]")) {
		t.Errorf("the journal does not show the command's masked argument:\n%s", j)
	}
}

// TestRedactFailLoudRefusesCommands: a pool whose configured secrets
// resolved to nothing refuses commands (their output could not be
// masked) and withholds the run's record rather than write it unmasked.
func TestRedactFailLoudRefusesCommands(t *testing.T) {
	empty, err := redact.NewPool(redact.Config{Configured: 1})
	if err != nil {
		t.Fatal(err)
	}
	sb := &chunkSandbox{fakeSandbox: okSandbox(), chunks: []string{ghToken}}
	ws := newWorkspace(t, defaultFiles())
	s := &script{resps: []*provider.Response{calls(call("run", `{"argv":["printenv"]}`)), finish("done")}}
	_, err = runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb, cfg: func(c *Config) { c.Redact = empty }})
	if !errors.Is(err, redact.ErrEmptyPool) && !errors.Is(err, ErrRecord) {
		t.Fatalf("a run under a failing pool: %v", err)
	}
	if len(sb.specs) != 0 {
		t.Fatalf("a command ran under a failing pool: %d", len(sb.specs))
	}
	b, _ := os.ReadFile(filepath.Join(ws, StateDir, JournalFile))
	if bytes.Contains(b, []byte(ghToken)) {
		t.Fatal("the journal holds the output")
	}
}
