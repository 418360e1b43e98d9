package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/internal/flock"
)

// cancelling is a model that cancels the run's context on its first call.
type cancelling struct {
	*script
	cancel context.CancelFunc
}

func (c cancelling) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	c.cancel()
	return c.script.Complete(ctx, req)
}

// TestRunErrors: each way a run cannot start, or cannot complete its
// record, is told apart with errors.Is; how a started run ended is the
// Outcome's Status, not an error.
func TestRunErrors(t *testing.T) {
	sentinels := []error{ErrLocked, ErrBrokenJournal, ErrCancelled, ErrRefused, ErrRecord}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (ws string, o runOpts)
		want  error
		also  error // an underlying error that stays reachable; nil: none checked
	}{
		{"locked", func(t *testing.T) (string, runOpts) {
			ws := newWorkspace(t, defaultFiles())
			os.Mkdir(filepath.Join(ws, StateDir), 0o700)
			f, err := os.OpenFile(filepath.Join(ws, StateDir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := flock.Lock(f); err != nil {
				t.Fatal(err)
			}
			return ws, runOpts{}
		}, ErrLocked, nil},
		{"entry edited", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, nil)
			editEntry(t, ws)
			return ws, runOpts{apply: true}
		}, ErrBrokenJournal, nil},
		{"entry edited, result deleted", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, nil)
			os.Remove(statePath(ws, ResultFile))
			editEntry(t, ws)
			return ws, runOpts{apply: true}
		}, ErrBrokenJournal, journal.ErrBroken},
		{"last line torn", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, nil)
			tearLast(t, ws)
			return ws, runOpts{apply: true}
		}, ErrBrokenJournal, journal.ErrTorn},
		{"journal deleted under a result", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, nil)
			os.Remove(statePath(ws, JournalFile))
			return ws, runOpts{apply: true}
		}, ErrBrokenJournal, os.ErrNotExist},
		{"cancelled before the start", func(t *testing.T) (string, runOpts) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return newWorkspace(t, defaultFiles()), runOpts{ctx: ctx}
		}, ErrCancelled, context.Canceled},
		{"relative workspace", func(t *testing.T) (string, runOpts) {
			return "ws", runOpts{}
		}, ErrRefused, nil},
		{"state directory is a file", func(t *testing.T) (string, runOpts) {
			ws := newWorkspace(t, map[string]string{StateDir: "x"})
			return ws, runOpts{}
		}, ErrRefused, nil},
		{"previous result signed by another key", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, newKey(t))
			k := newKey(t)
			return ws, runOpts{apply: true, cfg: func(c *Config) { c.Key = k }}
		}, ErrRefused, nil},
		{"signed run on a journal without its result", func(t *testing.T) (string, runOpts) {
			ws := recordRun(t, nil)
			os.Remove(statePath(ws, ResultFile))
			k := newKey(t)
			return ws, runOpts{apply: true, cfg: func(c *Config) { c.Key = k }}
		}, ErrRefused, nil},
		{"unsafe memory store", func(t *testing.T) (string, runOpts) {
			ws := newWorkspace(t, defaultFiles())
			os.MkdirAll(filepath.Join(ws, StateDir, "mem"), 0o700)
			os.WriteFile(filepath.Join(ws, StateDir, "mem", ".git"), []byte("gitdir: "+t.TempDir()+"\n"), 0o644)
			return ws, runOpts{cfg: func(c *Config) { c.Memory = memory.Options{} }}
		}, ErrRefused, memory.ErrUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, o := tc.setup(t)
			s := recordScript()
			_, err := runScript(t, ws, baseManifest(t, nil), s, o)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			for _, other := range sentinels {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("Run = %v: also %v", err, other)
				}
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Errorf("Run = %v: does not wrap %v", err, tc.also)
			}
			if n := len(s.requests()); n != 0 {
				t.Errorf("the model was called %d times", n)
			}
		})
	}

	t.Run("budget exhausted is an outcome", func(t *testing.T) {
		m := baseManifest(t, func(m map[string]any) { budgets(m)["max_turns"] = 1 })
		out, err := runScript(t, newWorkspace(t, defaultFiles()), m, &script{}, runOpts{})
		if err != nil || out.Status != StatusBudgetExhausted {
			t.Fatalf("Run = %+v, %v; want status %s and no error", out, err, StatusBudgetExhausted)
		}
	})
	t.Run("cancelled during the run is an outcome", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p := cancelling{&script{}, cancel}
		out, err := runScript(t, newWorkspace(t, defaultFiles()), baseManifest(t, nil), nil, runOpts{ctx: ctx, cfg: func(c *Config) { c.Provider = p }})
		if err != nil || out.Status != StatusCancelled {
			t.Fatalf("Run = %+v, %v; want status %s and no error", out, err, StatusCancelled)
		}
	})
}
