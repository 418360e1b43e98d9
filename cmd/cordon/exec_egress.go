package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/grant"
)

// egressRecord is the journal body of one egress decision.
type egressRecord struct {
	Type       string `json:"type"`
	Method     string `json:"method"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Addr       string `json:"addr,omitempty"`
	Allow      bool   `json:"allow"`
	Rule       string `json:"rule"`
	Reason     string `json:"reason"`
	Status     int    `json:"status"`
	Error      string `json:"error,omitempty"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	StartUS    int64  `json:"start_us"` // µs since the epoch: ns would pass 2^53
	DurationUS int64  `json:"duration_us"`
}

// execEgress builds the run's egress proxy: every decision goes to the
// journal (when one is named) and every denial to stderr, in one line
// with the grant entry that would allow it.
func execEgress(gs *grant.Set, stderr io.Writer, journalFile string) (*egress.Proxy, func() error, error) {
	var (
		mu      sync.Mutex
		failure error // the first journal write that failed; guarded by mu
	)
	record := func(r egress.Record) {
		mu.Lock()
		defer mu.Unlock()
		if !r.Allow {
			fmt.Fprintln(stderr, "cordon: "+oneLine(r.String()))
		}
		if journalFile == "" || failure != nil {
			return
		}
		rec := egressRecord{Type: "cordon.egress.v1", Method: r.Method, Host: r.Host, Port: r.Port, Allow: r.Allow,
			Rule: r.Rule, Reason: r.Reason, Status: r.Status, Error: r.Error, BytesUp: r.BytesUp, BytesDown: r.BytesDown,
			StartUS: r.Start.UnixMicro(), DurationUS: r.Duration.Microseconds()}
		if r.Addr.IsValid() {
			rec.Addr = r.Addr.String()
		}
		b, err := json.Marshal(rec)
		if err == nil {
			var v canon.Value
			if v, err = canon.Parse(b); err == nil {
				_, err = journal.Append(journalFile, "egress", v)
			}
		}
		if err != nil {
			failure = fmt.Errorf("journal %s: %w", journalFile, err)
		}
	}
	cfg := egress.DefaultConfig(grant.New(gs))
	cfg.Record = record
	p, err := egress.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	journalErr := func() error {
		mu.Lock()
		defer mu.Unlock()
		return failure
	}
	return p, journalErr, nil
}
