package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Record returns a provider that passes every call to p and writes each
// response p returns to w, one JSON object per line, in the replay
// format (docs/SPEC.md §6.7), so that NewReplay plays the session back.
// A call that fails is not written: the replay format has no form for an
// error, so a replay of a session with failed calls makes fewer calls.
// A response that cannot be written fails the call: a session is never
// recorded with a hole in it. The responses are what p returns, already
// scrubbed of p's API key.
func Record(p Provider, w io.Writer) Provider {
	return &recorder{p: p, w: w}
}

type recorder struct {
	p Provider

	mu  sync.Mutex
	w   io.Writer // guarded by mu
	err error     // guarded by mu: the first failed write
}

func (r *recorder) Name() string { return r.p.Name() }

// String names the provider recorded, as fmt prints it.
func (r *recorder) String() string { return fmt.Sprint(r.p) }

// Redact passes through the recorded provider's redaction, if it has one.
func (r *recorder) Redact(s string) string {
	if rd, ok := r.p.(interface{ Redact(string) string }); ok {
		return rd.Redact(s)
	}
	return s
}

// Skip passes a skip on to the provider recorded when it plays a
// recording (a replay a resumed run continues); a live model has nothing
// to skip.
func (r *recorder) Skip(n int) error {
	if sk, ok := r.p.(interface{ Skip(int) error }); ok {
		return sk.Skip(n)
	}
	return nil
}

func (r *recorder) Complete(ctx context.Context, req Request) (*Response, error) {
	resp, err := r.p.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	line, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.w.Write(append(line, '\n'))
	}
	if r.err != nil {
		return nil, fmt.Errorf("record: %w", r.err)
	}
	return resp, nil
}

// GoString keeps %#v from printing the recorded provider's fields.
func (r *recorder) GoString() string { return r.String() }
