package main

import (
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// runSummaryJSON prints 'cordon run --json': the summary as one JSON
// object (README.md, "JSON output").
func runSummaryJSON(e *env, ws, res string, out *runner.Outcome, key *sign.PrivateKey) error {
	s := struct {
		Status         string `json:"status"`
		Turns          int64  `json:"turns"`
		ModelCalls     int64  `json:"model_calls"`
		Writes         int    `json:"writes"`
		Commands       int    `json:"commands"`
		Refused        int64  `json:"refused"`
		Workspace      string `json:"workspace"`
		Result         string `json:"result"`
		SignedBy       string `json:"signed_by"`
		JournalEntries int64  `json:"journal_entries"`
		JournalHead    string `json:"journal_head"`
	}{
		Status: out.Status, Turns: out.Body.Turns, ModelCalls: out.Body.ModelCalls,
		Writes: len(out.Body.Writes), Commands: len(out.Body.Runs), Refused: out.Body.Refused,
		Workspace: ws, Result: res, JournalEntries: out.Head.Count, JournalHead: out.Head.ID.String(),
	}
	if key != nil {
		s.SignedBy = key.Public().ID().String()
	}
	return writeJSON(e, s)
}
