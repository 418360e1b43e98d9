package mintdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant/standing"
)

const grants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"make"}]},"limits":{"wall_ms":60000}}`

func policy(t *testing.T, holder *sign.PrivateKey, max, rate int) *standing.Policy {
	t.Helper()
	issuer, _ := sign.Generate()
	now := time.Now().UnixMilli()
	b, _ := json.Marshal(map[string]any{
		"type": standing.PolicyType, "issuer": issuer.Public().ID().String(), "holder": holder.Public().ID().String(),
		"parent": json.RawMessage(grants), "bounds": json.RawMessage(grants),
		"max_children": max, "rate": map[string]any{"count": rate, "window_ms": 3_600_000},
		"triggers":      []any{map[string]any{"type": "tick", "match": map[string]any{}}},
		"not_before_ms": now - 60_000, "not_after_ms": now + 3_600_000,
	})
	c, _ := canon.JCS(b)
	p, err := standing.ParsePolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ev(t *testing.T, id string) *standing.Event {
	b, _ := json.Marshal(map[string]any{"type": standing.EventType, "kind": "tick", "id": id, "at_ms": 1, "fields": map[string]any{}})
	c, _ := canon.JCS(b)
	e, err := standing.ParseEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestParallelMintsExact: 24 goroutines with distinct events against a
// rate of 3 mint exactly 3; the rest are refused for the rate, and the
// sequence numbers are 0, 1, 2.
func TestParallelMintsExact(t *testing.T) {
	holder, _ := sign.Generate()
	p := policy(t, holder, 10, 3)
	path := filepath.Join(t.TempDir(), "mints.db")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seqs []int64
	rated := 0
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(path) // each its own connection pool, as separate processes would be
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			_, m, err := db.Mint(context.Background(), p, ev(t, fmt.Sprint("e", i)), nil, time.Now(), func(m *standing.Minted) ([]byte, error) { return standing.Seal(p, m, holder) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				seqs = append(seqs, m.Seq)
			case errors.Is(err, standing.ErrRate):
				rated++
			default:
				t.Errorf("mint %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if len(seqs) != 3 || rated != 21 {
		t.Fatalf("%d minted (%v), %d refused for the rate; want 3 and 21", len(seqs), seqs, rated)
	}
	seen := map[int64]bool{}
	for _, s := range seqs {
		seen[s] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		t.Fatalf("sequence numbers %v, want 0, 1, 2", seqs)
	}
}

// TestDurableAndReplay: counts survive reopening; an event mints once; a
// policy's total is a hard limit; a refused seal records nothing.
func TestDurableAndReplay(t *testing.T) {
	holder, _ := sign.Generate()
	p := policy(t, holder, 2, 2)
	path := filepath.Join(t.TempDir(), "mints.db")
	seal := func(m *standing.Minted) ([]byte, error) { return standing.Seal(p, m, holder) }
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Mint(context.Background(), p, ev(t, "a"), nil, time.Now(), func(*standing.Minted) ([]byte, error) { return nil, errors.New("no key") }); err == nil {
		t.Fatal("a failed seal minted")
	}
	if _, _, err := db.Mint(context.Background(), p, ev(t, "a"), nil, time.Now(), seal); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := db.Mint(context.Background(), p, ev(t, "a"), nil, time.Now(), seal); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replayed event: %v", err)
	}
	if _, m, err := db.Mint(context.Background(), p, ev(t, "b"), nil, time.Now(), seal); err != nil || m.Seq != 1 {
		t.Fatalf("second mint after reopening: %v", err)
	}
	if _, _, err := db.Mint(context.Background(), p, ev(t, "c"), nil, time.Now(), seal); !errors.Is(err, standing.ErrExhausted) {
		t.Fatalf("third mint of two: %v", err)
	}
	c, err := db.Counts(context.Background(), p, time.Now())
	if err != nil || c.Total != 2 {
		t.Fatalf("counts %+v %v", c, err)
	}
}
