package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
)

// usage is what a task, and everything it spawned, has used.
type usage struct {
	turns, calls, inTokens, outTokens, loops int64
}

// task is the root task or a spawned sub-task.
type task struct {
	id       string
	m        *manifest.Manifest
	parent   *task
	run      *run
	deadline time.Time
	used     usage
	pending  []*pendingTask
	msgs     []provider.Message
	summary  string
	turnLeft int // bytes of tool results the current turn has left
	// verification is how the last verify run was judged; nil if none ran.
	verification *Verification
	resumed      bool // restored from a parked run's state: started already
}

type pendingTask struct {
	m    *manifest.Manifest
	task string // the tool call that spawned it
}

// exhausted names the first budget of this task or an ancestor that is
// used up, checked before every model call.
func (t *task) exhausted(now time.Time) (name string, used, limit int64, owner *task) {
	// The wall clock first, owned by the outermost task whose time is up
	// (a sub-task's deadline is never past its parent's).
	for a := t; a != nil; a = a.parent {
		if !now.Before(a.deadline) {
			owner = a
		}
	}
	if owner != nil {
		b := owner.m.Budgets
		return "wall_ms", now.Sub(owner.deadline.Add(-time.Duration(b.WallMS) * time.Millisecond)).Milliseconds(), b.WallMS, owner
	}
	root := t.root()
	if name, used, limit := t.run.amendedBudget(root, now); name != "" {
		return name, used, limit, root
	}
	for a := t; a != nil; a = a.parent {
		b := a.m.Budgets
		switch {
		case a.used.turns >= b.MaxTurns:
			return "max_turns", a.used.turns, b.MaxTurns, a
		case a.used.calls >= b.MaxModelCalls:
			return "max_model_calls", a.used.calls, b.MaxModelCalls, a
		case a.used.inTokens >= b.MaxInputTokens:
			return "max_input_tokens", a.used.inTokens, b.MaxInputTokens, a
		case a.used.outTokens >= b.MaxOutputTokens:
			return "max_output_tokens", a.used.outTokens, b.MaxOutputTokens, a
		}
	}
	return "", 0, 0, nil
}

// root is the run's root task.
func (t *task) root() *task {
	for t.parent != nil {
		t = t.parent
	}
	return t
}

// over names the first token budget a charge has gone over.
func (t *task) over() (name string, used, limit int64, owner *task) {
	root := t.root()
	for _, c := range []struct {
		name string
		used int64
	}{{"max_input_tokens", root.used.inTokens}, {"max_output_tokens", root.used.outTokens}} {
		if left := t.run.budgetLeft(c.name, c.used); left < 0 {
			return c.name, c.used, c.used - left, root
		}
	}
	for a := t; a != nil; a = a.parent {
		b := a.m.Budgets
		switch {
		case a.used.inTokens > b.MaxInputTokens:
			return "max_input_tokens", a.used.inTokens, b.MaxInputTokens, a
		case a.used.outTokens > b.MaxOutputTokens:
			return "max_output_tokens", a.used.outTokens, b.MaxOutputTokens, a
		}
	}
	return "", 0, 0, nil
}

// left is the least of what remains of a budget over the task and its
// ancestors.
func (t *task) left(get func(manifest.Budgets, usage) int64) int64 {
	n := int64(1) << 62
	for a := t; a != nil; a = a.parent {
		n = min(n, get(a.m.Budgets, a.used))
	}
	return n
}

func (t *task) charge(add func(*usage)) {
	for a := t; a != nil; a = a.parent {
		add(&a.used)
	}
}

// runTask drives one task to its end and then runs the sub-tasks it
// queued. An error means the journal could not be written.
func (r *run) runTask(ctx context.Context, t *task) (string, error) {
	ctx, cancel := context.WithDeadline(ctx, t.deadline)
	defer cancel()
	if !t.resumed {
		if _, err := r.record(entry.TaskStart{Task: t.id, Manifest: t.m.ID().String(), TaskText: canon.Sum([]byte(t.m.Task)).String()}); err != nil {
			return "", err
		}
		t.msgs = []provider.Message{{Role: "user", Content: []provider.Block{{Type: "text", Text: r.prompt(t)}}}}
	}
	status, err := r.loop(ctx, t)
	if err != nil || status == StatusParked {
		return status, err // a parked task ends nothing: it continues when the run resumes
	}
	r.body.Tasks = append(r.body.Tasks, TaskResult{ID: t.id, Manifest: t.m.ID().String(), Status: status, Summary: clip(t.summary, 4000),
		Turns: t.used.turns, ModelCalls: t.used.calls, InputTokens: t.used.inTokens, OutputTokens: t.used.outTokens, Loops: t.used.loops,
		Verification: t.verification})
	if _, err := r.record(entry.TaskEnd{Task: t.id, Status: status, Turns: t.used.turns, ModelCalls: t.used.calls,
		InputTokens: t.used.inTokens, OutputTokens: t.used.outTokens, Loops: t.used.loops, Summary: canon.Sum([]byte(t.summary)).String()}); err != nil {
		return "", err
	}
	r.logf("task %s: %s", t.id, status)
	self := len(r.body.Tasks) - 1
	ran := false
	for i, p := range t.pending {
		child := &task{id: fmt.Sprintf("%s.%d", t.id, i+1), m: p.m, parent: t, run: r}
		child.deadline = time.Now().Add(time.Duration(p.m.Budgets.WallMS) * time.Millisecond)
		if t.deadline.Before(child.deadline) {
			child.deadline = t.deadline
		}
		if status != StatusFinished && status != StatusVerified {
			if _, err := r.record(entry.TaskCancelled{Task: child.id, Manifest: p.m.ID().String(), Reason: "its parent ended " + status}); err != nil {
				return "", err
			}
			r.body.Tasks = append(r.body.Tasks, TaskResult{ID: child.id, Manifest: p.m.ID().String(), Status: StatusCancelled})
			continue
		}
		if _, err := r.runTask(ctx, child); err != nil {
			return "", err
		}
		ran = true
	}
	if ran && status == StatusVerified {
		// The sub-tasks ran after this task was verified and may have
		// changed what it verified: verify again, once, and let that
		// decide the task's status.
		_, pass, _, err := r.verify(ctx, t, true)
		if err != nil {
			return "", err
		}
		r.body.Tasks[self].Verification = t.verification
		if !pass {
			status = StatusVerifyFailed
			r.body.Tasks[self].Status = status
			r.logf("task %s: %s after its sub-tasks ran", t.id, status)
		}
	}
	if t.parent == nil { // the run's totals: the root's usage includes its sub-tasks'
		r.body.Turns, r.body.ModelCalls, r.body.InputTokens, r.body.OutputTokens, r.body.Loops = t.used.turns, t.used.calls, t.used.inTokens, t.used.outTokens, t.used.loops
		r.body.Summary = clip(t.summary, 4000)
		r.body.Verification = t.verification
	}
	return status, nil
}

// loop is the model loop of one task.
func (r *run) loop(ctx context.Context, t *task) (string, error) {
	for {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if _, err := r.record(entry.TaskInterrupted{Task: t.id, Error: ctx.Err().Error()}); err != nil {
				return "", err
			}
			return StatusCancelled, nil
		}
		if err := r.boundary(t); err != nil {
			return "", err
		}
		if why := r.parkReason(t); why != "" {
			r.parkWhy = why
			return StatusParked, nil
		}
		if name, used, limit, owner := t.exhausted(time.Now()); name != "" {
			if name == "wall_ms" && t.parent == nil && owner == t && r.mayPark() {
				// The segment's wall-clock allowance is spent: the run
				// parks, and a resumed segment has the allowance again.
				if err := r.budgetEvent(t, owner, name, used, limit, "spent for this segment; the run parks"); err != nil {
					return "", err
				}
				r.parkWhy = ParkBudget
				return StatusParked, nil
			}
			if err := r.budgetEvent(t, owner, name, used, limit, "exhausted before the next model call"); err != nil {
				return "", err
			}
			return StatusBudgetExhausted, nil
		}
		req := provider.Request{
			Model:       t.m.Model,
			System:      systemPrompt,
			Messages:    t.msgs,
			Tools:       tools(),
			MaxTokens:   int(min(provider.DefaultMaxTokens, t.left(func(b manifest.Budgets, u usage) int64 { return b.MaxOutputTokens - u.outTokens }))),
			MaxAttempts: int(min(1<<20, t.left(func(b manifest.Budgets, u usage) int64 { return b.MaxModelCalls - u.calls }))),
		}
		{
			root := t.root()
			req.MaxTokens = int(min(int64(req.MaxTokens), r.budgetLeft("max_output_tokens", root.used.outTokens)))
			req.MaxAttempts = int(min(int64(req.MaxAttempts), r.budgetLeft("max_model_calls", root.used.calls)))
		}
		t.charge(func(u *usage) { u.turns++ })
		turn := t.used.turns
		if _, err := r.record(entry.ModelRequest{Task: t.id, Turn: turn, Messages: len(t.msgs),
			MaxTokens: req.MaxTokens, MaxAttempts: req.MaxAttempts, Last: lastDigest(t.msgs)}); err != nil {
			return "", err
		}
		resp, err := r.cfg.Provider.Complete(ctx, req)
		if err != nil {
			// A failed call is charged the attempts it made; a provider
			// that does not say is charged every attempt it was allowed.
			n := int64(provider.Attempts(err))
			if n <= 0 || n > int64(req.MaxAttempts) {
				n = int64(req.MaxAttempts)
			}
			t.charge(func(u *usage) { u.calls += n })
			if _, jerr := r.record(entry.ModelError{Task: t.id, Turn: turn, ChargedCalls: &n, Error: oneLine(err.Error())}); jerr != nil {
				return "", jerr
			}
			r.logf("task %s turn %d: model error: %s", t.id, turn, oneLine(err.Error()))
			if ctx.Err() != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					continue // the next check records the wall-clock budget
				}
				return StatusCancelled, nil
			}
			return StatusModelError, nil
		}
		r.responses++
		attempts := int64(max(resp.Attempts, 1))
		t.charge(func(u *usage) {
			u.calls += attempts
			u.inTokens += max(resp.Usage.InputTokens, 0)
			u.outTokens += max(resp.Usage.OutputTokens, 0)
		})
		var calls []entry.ToolCallSummary
		var text strings.Builder
		ncalls := 0
		for _, b := range resp.Content {
			switch b.Type {
			case "tool_use":
				ncalls++
				if ncalls <= MaxToolCalls {
					calls = append(calls, entry.ToolCallSummary{ID: b.ID, Name: b.Name, Input: canon.Sum(b.Input).String()})
				}
			case "text":
				text.WriteString(b.Text)
			}
		}
		if ncalls > MaxToolCalls {
			calls = nil // too many to record one by one: the count and the content's digest stand for them
		}
		content, _ := json.Marshal(resp.Content)
		if _, err := r.record(entry.ModelResponse{Task: t.id, Turn: turn, StopReason: resp.StopReason,
			Attempts: attempts, RequestID: resp.RequestID, Model: clip(resp.Model, 256),
			Usage: entry.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Reported: resp.Usage.Reported},
			Text:  canon.Sum([]byte(text.String())).String(), Content: canon.Sum(content).String(), ToolCallCount: ncalls, ToolCalls: calls}); err != nil {
			return "", err
		}
		if !resp.Usage.Reported {
			if _, err := r.record(entry.ModelError{Task: t.id, Turn: turn,
				Error: "the provider did not report token usage, so the token budgets cannot be enforced"}); err != nil {
				return "", err
			}
			r.logf("task %s: the provider did not report token usage; stopping (token budgets cannot be enforced)", t.id)
			return StatusModelError, nil
		}
		if name, used, limit, owner := t.over(); name != "" {
			if err := r.budgetEvent(t, owner, name, used, limit, "exceeded by the last model call; its tool calls are not run"); err != nil {
				return "", err
			}
			return StatusBudgetExhausted, nil
		}
		t.msgs = append(t.msgs, provider.Message{Role: "assistant", Content: resp.Content})
		switch resp.StopReason {
		case "tool_use":
		case "end_turn":
			// A model that ends its turn without a tool call is finishing.
			t.summary = r.redact(text.String())
			done, status, feedback, err := r.finish(ctx, t)
			if err != nil || done {
				return status, err
			}
			t.msgs = append(t.msgs, provider.Message{Role: "user", Content: []provider.Block{{Type: "text", Text: feedback}}})
			continue
		default:
			if _, err := r.record(entry.TaskStopped{Task: t.id, StopReason: resp.StopReason}); err != nil {
				return "", err
			}
			return StatusModelStopped, nil
		}
		if ncalls > MaxToolCalls {
			if _, err := r.record(entry.ModelError{Task: t.id, Turn: turn,
				Error: fmt.Sprintf("%d tool calls in one response; at most %d are run, so none were", ncalls, MaxToolCalls)}); err != nil {
				return "", err
			}
			r.logf("task %s: the model made %d tool calls in one response (at most %d); stopping", t.id, ncalls, MaxToolCalls)
			return StatusModelError, nil
		}
		var results []provider.Block
		finished, status := false, ""
		resultBytes := 0
		for _, b := range resp.Content {
			if b.Type != "tool_use" {
				continue
			}
			why := ""
			switch {
			case finished:
				why = "the task already finished in this turn; calls after finish are not run"
			case !time.Now().Before(t.deadline):
				why = "the wall-clock budget is spent"
			case r.parkReason(t) != "":
				why = "the run is parking (" + r.parkReason(t) + "); call again after it resumes"
			case resultBytes >= MaxTurnResultBytes:
				why = fmt.Sprintf("this turn's tool results already hold %d bytes; call it again next turn", resultBytes)
			}
			if why != "" {
				res, err := r.refused(t, b, why)
				if err != nil {
					return "", err
				}
				resultBytes += len(res.Text)
				results = append(results, res)
				continue
			}
			t.turnLeft = MaxTurnResultBytes - resultBytes
			res, done, st, err := r.call(ctx, t, b)
			if err != nil {
				return "", err
			}
			if left := MaxTurnResultBytes - resultBytes - 128; len(res.Text) > left { // 128: room for the note
				res.Text = strings.ToValidUTF8(res.Text[:max(left, 0)], "") + fmt.Sprintf("\n[cut: this turn's tool results are limited to %d bytes]", MaxTurnResultBytes)
				resultBytes = MaxTurnResultBytes // the turn is full
			}
			resultBytes += len(res.Text)
			results = append(results, res)
			if done {
				finished, status = true, st
			}
		}
		if finished {
			return status, nil
		}
		t.msgs = append(t.msgs, provider.Message{Role: "user", Content: results})
	}
}

func (r *run) budgetEvent(t, owner *task, name string, used, limit int64, what string) error {
	_, err := r.record(entry.Budget{Task: t.id, Owner: owner.id, Budget: name, Used: used, Limit: limit, Event: what})
	r.logf("task %s: budget %s of task %s %s (%d of %d)", t.id, name, owner.id, what, used, limit)
	return err
}

// lastDigest is the ContentId of the conversation's last message, so the
// journal binds what each request added without holding file contents.
func lastDigest(msgs []provider.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, c := range msgs[len(msgs)-1].Content {
		b.WriteString(c.Type + "\x00" + c.Text + "\x00" + c.ToolUseID + "\x00" + string(c.Input) + "\x00")
	}
	return canon.Sum([]byte(b.String())).String()
}

const systemPrompt = `You are an agent working under cordon, a governed runtime. You act only through the tools given. ` +
	`read returns a file (or lists a directory) that the task declares as an input; write replaces exactly a declared output; ` +
	`run executes a declared command as an argv array in a sandbox, with no shell (no pipes, globs, quotes or variables) and network only to hosts the grants allow, if any; ` +
	`mailbox posts a message to the operator or reads their replies; spawn queues a narrower sub-task; finish ends the task with a summary. ` +
	`Every call is checked and recorded; a refused call returns the reason. Budgets on turns, model calls, tokens and time are fixed.`

// prompt is the task's first message.
func (r *run) prompt(t *task) string {
	m := t.m
	var b strings.Builder
	b.WriteString("Task:\n" + m.Task + "\n\n")
	list := func(name string, xs []string) {
		if len(xs) == 0 {
			fmt.Fprintf(&b, "%s: none\n", name)
			return
		}
		fmt.Fprintf(&b, "%s: %s\n", name, strings.Join(xs, ", "))
	}
	list("Inputs you may read", m.Inputs)
	list("Outputs you may write (exact paths)", m.Outputs)
	list("Commands you may run", m.Commands)
	if m.Verify != nil {
		fmt.Fprintf(&b, "After finish, cordon runs the verify command %q; if it fails you get its output and may try again (%d more attempts).\n", strings.Join(m.Verify, " "), m.Budgets.MaxLoops)
		if v := m.VerifyReport; v != nil {
			fmt.Fprintf(&b, "It passes only if it exits 0 and its %s test report (from %s) counts at least %d passed tests and no failures.\n", v.Format, v.From(), v.MinPassed)
		}
	}
	if r.cfg.Apply {
		b.WriteString("Mode: apply: writes and commands take effect.\n")
	} else {
		b.WriteString("Mode: dry run: writes and commands are recorded as planned and not applied; reads see your planned writes.\n")
	}
	fmt.Fprintf(&b, "Budgets: %d turns, %d model calls, %d input and %d output tokens, %d ms; you may queue %d sub-tasks.\n",
		m.Budgets.MaxTurns, m.Budgets.MaxModelCalls, m.Budgets.MaxInputTokens, m.Budgets.MaxOutputTokens, m.Budgets.WallMS, m.Budgets.MaxPendingTasks)
	if t.parent == nil {
		if s := r.previousSummary(); s != "" {
			b.WriteString("Memory: " + s + "\n")
		}
	}
	return b.String()
}
