package store

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHotConcurrentExact drives the hot reads' cache as the store does
// (a lookup, and on a miss the database read and, unless a write is in
// flight, a fill under the generations the lookup returned; a write is
// marked before it commits and tells the cache after, Store.writing),
// from many goroutines at once under the read lock, against a model
// database of versions: a hit never returns a row older than the last
// write that was told before the lookup began, no reader reads a row
// older than one it read before (from the cache or the database), a
// hit's snapshot is its own row's (never torn or another fill's), and
// with more runs than the cache holds, fills that empty it (clear) race
// with lookups. Afterwards the byte count is the snapshots' and the
// bounds hold.
func TestHotConcurrentExact(t *testing.T) {
	h := &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}}
	s := &Store{hot: h}
	const runs = hotMaxRuns + hotMaxRuns/2 // more than the cache holds
	const hot = 64                         // read and written the most
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = "run_" + strconv.Itoa(i)
	}
	var committed, told [runs]atomic.Uint64 // the database's version; the last version whose bump completed
	// snapshot is a row's snapshot at version v: its length varies, so
	// fills replace snapshots of other sizes and the count must follow.
	snapshot := func(i int, v uint64) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%d@%d;", i, v)), 1+int(v%5)*40)
	}
	read := func(i int, now time.Time) (*Run, bool) {
		r, gen, all, fill := h.run(ids[i], now)
		if r != nil {
			return r, true
		}
		v := committed[i].Load() // the query, after the generations
		if !fill {
			return &Run{ID: ids[i], Attempts: int(v), Config: snapshot(i, v)}, false
		}
		runtime.Gosched() // a slow fill, so that fills race with writes
		h.putRun(&Run{ID: ids[i], Attempts: int(v), Config: snapshot(i, v)}, gen, all, now)
		return &Run{ID: ids[i], Attempts: int(v), Config: snapshot(i, v)}, false
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hits, misses atomic.Int64
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Writers: each owns the runs i with i%writers == w, so a run's
	// versions are bumped in order. One in 1000 writes names no one run.
	const writers = 2
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := w + writers*(n%(hot/writers))
				if n%7 == 0 {
					i = w + writers*((n*131)%(runs/writers))
				}
				id := ids[i]
				if n%1000 == 0 {
					id = ""
				}
				done := s.writing(context.Background(), false, id)
				v := committed[i].Add(1) // committed
				runtime.Gosched()        // before the cache is told
				done()
				told[i].Store(v)
				runtime.Gosched() // the readers fill between writes
			}
		}()
	}
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]int, runs) // the latest version this reader read, per run
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (n/4*7 + g) % hot // four reads in a row of each
				if g%2 == 1 {
					i = (n*977 + g) % runs // sweeps past the bound: fills clear
				}
				floor := told[i].Load()
				r, hit := read(i, time.Now())
				if r.Attempts < seen[i] {
					fail(fmt.Errorf("%s: read version %d after this reader read version %d (hit %v)", ids[i], r.Attempts, seen[i], hit))
					return
				}
				seen[i] = r.Attempts
				if !hit {
					misses.Add(1)
					continue
				}
				hits.Add(1)
				if uint64(r.Attempts) < floor {
					fail(fmt.Errorf("%s: a hit returned version %d after version %d was committed and told", ids[i], r.Attempts, floor))
					return
				}
				if r.ID != ids[i] || !bytes.Equal(r.Config, snapshot(i, uint64(r.Attempts))) {
					fail(fmt.Errorf("%s: a hit at version %d returned run %s with another snapshot (%d bytes)", ids[i], r.Attempts, r.ID, len(r.Config)))
					return
				}
				r.Config[0] = 'X' // the caller's copy: no later read sees it
			}
		}()
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if hits.Load() < 1000 || misses.Load() < 1000 {
		t.Fatalf("%d hits, %d misses: the test exercised too little", hits.Load(), misses.Load())
	}
	total := 0
	for id, e := range h.runs {
		if e.r.ID != id || e.r.Config[0] == 'X' {
			t.Fatalf("entry %s holds run %s, snapshot %.10q", id, e.r.ID, e.r.Config)
		}
		total += cap(e.r.Config)
	}
	if total != h.runBytes || len(h.runs) > hotMaxRuns || h.runBytes > hotMaxRunBytes {
		t.Fatalf("%d runs held with %d bytes of snapshots, counted %d", len(h.runs), total, h.runBytes)
	}
}

// TestHotWriteInFlight: while a write is marked (Store.writing) and not
// yet told, a lookup of what it may change neither uses nor fills the
// cache. A read that saw the write committed in the database is then
// never answered from an entry that a slower read, which queried before
// the commit, fills meanwhile; once the write is told, that entry is
// never used either.
func TestHotWriteInFlight(t *testing.T) {
	h := &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}}
	s := &Store{hot: h}
	ctx := context.Background()
	now := time.Now()
	const id = "run_1"
	// The slow read looks up and queries before the write commits.
	_, gen, all, fill := h.run(id, now)
	_, kgen, kfill := h.key("hash", now)
	if !fill || !kfill {
		t.Fatal("no write in flight, and a read may not fill the cache")
	}
	runDone, keyDone := s.writing(ctx, false, id), s.writing(ctx, true, "")
	// Committed: another read looks up, misses and reads the new row.
	if r, _, _, fill := h.run(id, now); r != nil || fill {
		t.Fatalf("a run's lookup while a write to it is in flight: %+v, fill %v", r, fill)
	}
	if p, _, fill := h.key("hash", now); p != nil || fill {
		t.Fatalf("a key's lookup while a write to keys is in flight: %+v, fill %v", p, fill)
	}
	// The slow read fills the row it read before the commit.
	h.putRun(&Run{ID: id, State: StatePending}, gen, all, now)
	h.putKey("hash", &Principal{KeyID: "k"}, kgen, now)
	// The other read reads again, before the cache is told.
	if r, _, _, _ := h.run(id, now); r != nil {
		t.Fatalf("a read made after the commit was answered with the row from before it: %+v", r)
	}
	if p, _, _ := h.key("hash", now); p != nil {
		t.Fatalf("an authentication made after a revocation's commit was answered from before it: %+v", p)
	}
	runDone()
	keyDone()
	runDone() // once only: the mark is not lowered twice
	if r, _, _, _ := h.run(id, now); r != nil {
		t.Fatalf("after the write was told, the row from before it: %+v", r)
	}
	if p, _, _ := h.key("hash", now); p != nil {
		t.Fatalf("after the revocation was told, the principal from before it: %+v", p)
	}
	if n := h.runBusy[runShard(id)].Load(); n != 0 {
		t.Fatalf("the run's mark is %d after its write was told", n)
	}
	// A run in another shard, and all runs, are unaffected by a key's
	// write; a write to all runs holds every run's lookups.
	other := "run_2"
	for runShard(other) == runShard(id) {
		other += "x"
	}
	keyDone = s.writing(ctx, true, "")
	if _, _, _, fill := h.run(other, now); !fill {
		t.Fatal("a write to keys held a run's lookup")
	}
	keyDone()
	allDone := s.writing(ctx, false, "")
	if _, _, _, fill := h.run(other, now); fill {
		t.Fatal("a write to all runs did not hold a run's lookup")
	}
	allDone()
	if _, _, _, fill := h.run(other, now); !fill {
		t.Fatal("a told write to all runs still holds a run's lookup")
	}
}
