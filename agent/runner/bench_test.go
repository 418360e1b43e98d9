package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
)

// replayOf is a replay provider playing turns-1 read calls, then finish.
func replayOf(b testing.TB, turns int) provider.Provider {
	var s strings.Builder
	for i := 0; i < turns-1; i++ {
		fmt.Fprintf(&s, `{"content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"r%d","name":"read","input":{"path":"src/a.py"}}],"stop_reason":"tool_use","usage":{"input_tokens":100,"output_tokens":20,"reported":true}}`+"\n", i)
	}
	s.WriteString(`{"content":[{"type":"tool_use","id":"f","name":"finish","input":{"summary":"done"}}],"stop_reason":"tool_use","usage":{"input_tokens":100,"output_tokens":20,"reported":true}}` + "\n")
	p, err := provider.NewReplayData("bench", []byte(s.String()))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// runTurns runs one whole run of the given turns in a fresh workspace
// and returns its wall time.
func runTurns(b *testing.B, turns int, git bool) time.Duration {
	b.StopTimer()
	ws := newWorkspace(b, defaultFiles())
	m := baseManifest(b, func(m map[string]any) { budgets(m)["max_turns"] = 1000; budgets(m)["max_model_calls"] = 1000 })
	p := replayOf(b, turns)
	cfg := Config{Workspace: ws, Manifest: m, Provider: p, Sandbox: okSandbox(), Memory: memory.Options{NoGit: !git}}
	b.StartTimer()
	start := time.Now()
	out, err := Run(context.Background(), cfg)
	d := time.Since(start)
	if err != nil || out.Status != StatusFinished || out.Body.Turns != int64(turns) {
		b.Fatalf("run: %v %+v", err, out)
	}
	return d
}

// BenchmarkTurnOverhead measures the runner's own cost per turn: a
// replayed model answer (no network, no model), the budget checks, a
// read tool call, and three journal entries each written and synced.
// Runs of 1 and 21 turns alternate in one loop; the per-turn figure is
// the difference over 20 turns, so per-run costs (the memory commit,
// sealing the result) cancel out.
func BenchmarkTurnOverhead(b *testing.B) {
	for _, git := range []bool{false, true} {
		name := "file-memory"
		if git {
			name = "git-memory"
		}
		b.Run(name, func(b *testing.B) {
			var short, long time.Duration
			for i := 0; i < b.N; i++ {
				short += runTurns(b, 1, git)
				long += runTurns(b, 21, git)
			}
			perTurn := (long - short) / time.Duration(20*b.N)
			b.ReportMetric(float64(perTurn.Microseconds())/1000, "ms/turn")
			b.ReportMetric(float64(short.Microseconds())/1000/float64(b.N), "ms/run-fixed")
		})
	}
}
