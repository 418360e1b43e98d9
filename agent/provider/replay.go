package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// maxReplayBytes caps a replay file.
const maxReplayBytes = 64 << 20

type replay struct {
	path string

	mu        sync.Mutex
	responses [][]byte // guarded by mu; each a canonical JSON Response
	next      int      // guarded by mu
}

// NewReplay reads the recorded responses at path (format in the package
// doc) and returns a provider that plays them in order.
func NewReplay(path string) (Provider, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReplayBytes+1))
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	if len(b) > maxReplayBytes {
		return nil, fmt.Errorf("replay: %s: %w", path, ErrTooLarge)
	}
	return NewReplayData(path, b)
}

// NewReplayData is NewReplay for recorded responses already read; name
// labels errors. The runner reads the file itself, without following
// symbolic links.
func NewReplayData(name string, b []byte) (Provider, error) {
	if len(b) > maxReplayBytes {
		return nil, fmt.Errorf("replay: %s: %w", name, ErrTooLarge)
	}
	rs, err := parseReplay(b)
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", name, err)
	}
	return &replay{path: name, responses: rs}, nil
}

// parseReplay returns each recorded response, validated and re-encoded.
func parseReplay(b []byte) ([][]byte, error) {
	var items [][]byte
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		if err := checkJSON(t); err != nil {
			return nil, malformed("%v", err)
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(t, &arr); err != nil {
			return nil, malformed("%v", err)
		}
		for _, a := range arr {
			items = append(items, a)
		}
	} else {
		for i, line := range bytes.Split(b, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			if line[0] != '{' {
				return nil, malformed("line %d: not a JSON object", i+1)
			}
			items = append(items, line)
		}
	}
	if len(items) == 0 {
		return nil, malformed("no recorded responses")
	}
	out := make([][]byte, len(items))
	for i, it := range items {
		if err := checkObject(it); err != nil {
			return nil, malformed("response %d: %v", i+1, err)
		}
		var r Response
		dec := json.NewDecoder(bytes.NewReader(it))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, malformed("response %d: %v", i+1, err)
		}
		if r.Content == nil {
			return nil, malformed("response %d: no content", i+1)
		}
		if err := validateResponse(&r); err != nil {
			return nil, fmt.Errorf("response %d: %w", i+1, err)
		}
		enc, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		out[i] = enc
	}
	return out, nil
}

func (r *replay) Name() string { return "replay" }

// Skip passes over the first n recorded responses, before any is
// played: a parked run that resumes (docs/SPEC.md §9.4) continues the
// recording where its last segment stopped.
func (r *replay) Skip(n int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next != 0 || n < 0 || n > len(r.responses) {
		return fmt.Errorf("replay: %s: cannot skip %d of %d responses after %d were played", r.path, n, len(r.responses), r.next)
	}
	r.next = n
	return nil
}

// Complete returns the next recorded response, a fresh copy, whatever req
// is, or ErrExhausted.
func (r *replay) Complete(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := validateRequest(&req); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.responses) {
		return nil, fmt.Errorf("replay: %s: all %d responses played: %w", r.path, len(r.responses), ErrExhausted)
	}
	var resp Response
	if err := json.Unmarshal(r.responses[r.next], &resp); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r.next++
	if resp.Attempts == 0 {
		resp.Attempts = 1
	}
	return &resp, nil
}
