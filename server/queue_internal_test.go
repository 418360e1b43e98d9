package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/store"
	"github.com/riverqueue/river"
)

type blockExec struct{ started, release chan string }

func (b blockExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	b.started <- run.ID
	select {
	case <-ctx.Done():
	case <-b.release:
	}
	return store.Outcome{State: store.StateCancelled, Reason: "stopped"}
}

// TestDuplicateJobLeavesRunningRunAlone: a second job for a run that
// another job is executing (a restarted or second server's re-enqueue)
// neither executes it again nor fails it.
func TestDuplicateJobLeavesRunningRunAlone(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	ex := blockExec{started: make(chan string, 4), release: make(chan string)}
	s, err := New(Config{Store: st, AdminKey: "0123456789abcdef0123456789abcdef", StateDir: dir, Key: k, Version: "test", Execute: true, Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.WithoutCancel(ctx))
	defer close(ex.release) // before Stop, which waits for running jobs
	grants := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}}`
	snap := `{"manifest":{"type":"cordon.manifest.v1","task":"t","model":{"provider":"replay","name":"r","replay":"s.jsonl"},"inputs":[],"outputs":[],"commands":["true"],"grants":` + grants +
		`,"budgets":{"max_turns":1,"max_model_calls":1,"max_input_tokens":1,"max_output_tokens":1,"wall_ms":1000,"max_loops":0,"max_pending_tasks":0}},"files":{"s.jsonl":""}}`
	ten, _ := st.CreateTenant(ctx, "a", []byte(grants))
	m, _ := st.CreateUser(ctx, ten.ID, "m", store.RoleMember)
	a, _ := st.CreateUser(ctx, ten.ID, "a", store.RoleApprover)
	p, _ := st.PutProject(ctx, ten.ID, "p", "", []byte(`{}`), func([]byte) error { return nil })
	r, _ := st.CreateRun(ctx, ten.ID, p.ID, "t", []byte(snap), m.ID, "")
	if err := st.Approve(ctx, ten.ID, r.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.queue.enqueue(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ex.started:
	case <-time.After(10 * time.Second):
		got, _ := st.Run(ctx, ten.ID, r.ID)
		t.Fatalf("the run did not start: %+v", got)
	}
	if _, err := s.queue.client.Insert(ctx, runArgs{Run: r.ID, Boot: "another-process"}, &river.InsertOpts{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case id := <-ex.started:
		t.Fatalf("run %s executed a second time", id)
	default:
	}
	got, _ := st.Run(ctx, ten.ID, r.ID)
	if got.State != store.StateRunning || got.Attempts != 1 {
		t.Fatalf("the duplicate job changed the running run: %s %q attempts %d", got.State, got.Reason, got.Attempts)
	}
	// Cancel it, so that the queue can stop.
	if _, err := st.Cancel(ctx, ten.ID, r.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, _ := st.Run(ctx, ten.ID, r.ID)
		if got.State == store.StateCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled run is %s", got.State)
		}
	}
}
