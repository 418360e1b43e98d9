package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

const highPolicy = `{"approvals":{"low":1,"medium":1,"high":3},"rules":[{"tier":"high","paths":[".github/workflows/**"]},{"tier":"high","added_lines":["curl[^|]*\\|\\s*sh"]}]}`

type reviewResp struct {
	store.Review
	Statement string `json:"statement"`
}

// approverKeys creates n more approvers in tenant A and returns their keys.
func (e *env) approverKeys(t *testing.T, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		var u struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"reviewer`+string(rune('a'+i))+`","role":"approver"}`).json(t, &u)
		var k struct{ Secret string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)
		keys = append(keys, k.Secret)
	}
	return keys
}

// TestHighRiskChangeNeedsItsApprovers: a change the operator's policy
// tiers high is not accepted by its submitter (an approver), nor by one
// approver twice, nor with fewer distinct approvers than the tier needs;
// a decline needs a reason and closes the review; the policy is set only
// by the explicit admin and is strictly checked.
func TestHighRiskChangeNeedsItsApprovers(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		fake := newFake()
		fake.change = []risk.File{{Path: ".github/workflows/ci.yml", Old: []byte("on: push\n"), New: []byte("on: push\nrun: curl x | sh\n")}}
		e := newEnv(t, envOpts{exec: fake, postgres: pg})
		e.setup(projectFor("true"))
		// The policy: never from a tenant, never from a bare admin key.
		e.must(403, "PUT", "/v1/risk-policy", e.keys["approver"], highPolicy)
		e.must(403, "PUT", "/v1/risk-policy", adminKey, highPolicy)
		if got := e.do("PUT", "/v1/risk-policy", adminKey, `{"approvals":{"low":1,"medium":1,"high":0},"rules":[]}`, server.ExplicitHeader, "1"); got.code != 400 {
			t.Fatalf("a policy with no approver for high: %d %s", got.code, got.body)
		}
		if got := e.do("PUT", "/v1/risk-policy", adminKey, highPolicy, server.ExplicitHeader, "1"); got.code != 200 {
			t.Fatalf("policy: %d %s", got.code, got.body)
		}
		if got := e.must(200, "GET", "/v1/risk-policy", adminKey, ""); !strings.Contains(string(got.body), `"high":3`) {
			t.Fatalf("policy read back: %s", got.body)
		}
		more := e.approverKeys(t, 3)
		// An approver submits; another approves its execution.
		var r struct{ ID string }
		e.must(201, "POST", "/v1/projects/p/runs", e.keys["approver"], `{"task":"t"}`).json(t, &r)
		e.must(200, "POST", "/v1/runs/"+r.ID+"/approve", more[0], "")
		if got := e.wait(r.ID, e.keys["member"], 30*time.Second); got.State != store.StateFinished {
			t.Fatalf("run %+v", got)
		}
		var rv reviewResp
		e.must(200, "GET", "/v1/runs/"+r.ID+"/review", e.keys["member"], "").json(t, &rv)
		var c risk.Classification
		if err := json.Unmarshal(rv.Classification, &c); err != nil {
			t.Fatal(err)
		}
		if rv.State != store.ReviewOpen || rv.Tier != risk.High || rv.Needed != 3 || c.MatchesTotal != 2 || c.Files[0] != ".github/workflows/ci.yml" {
			t.Fatalf("review %+v classification %+v", rv, c)
		}
		// The submitter cannot accept, even holding the approver role.
		e.must(403, "POST", "/v1/runs/"+r.ID+"/review/accept", e.keys["approver"], "")
		// A member cannot; the other tenant's approver sees no such run.
		e.must(403, "POST", "/v1/runs/"+r.ID+"/review/accept", e.keys["member"], "")
		e.must(404, "POST", "/v1/runs/"+r.ID+"/review/accept", e.keys["other-approver"], "")
		// Two of three, one of them twice: still open.
		e.must(200, "POST", "/v1/runs/"+r.ID+"/review/accept", more[0], `{"reason":"read it"}`)
		e.must(409, "POST", "/v1/runs/"+r.ID+"/review/accept", more[0], "")
		e.must(200, "POST", "/v1/runs/"+r.ID+"/review/accept", more[1], "").json(t, &rv)
		if rv.State != store.ReviewOpen || len(rv.Decisions) != 2 {
			t.Fatalf("after two of three: %+v", rv)
		}
		// Hostile bodies.
		e.must(400, "POST", "/v1/runs/"+r.ID+"/review/accept", more[2], `{"reason":"x","accepted":true}`)
		e.must(400, "POST", "/v1/runs/"+r.ID+"/review/accept", more[2], `{"reason":"\u001b[2J"}`)
		e.must(200, "POST", "/v1/runs/"+r.ID+"/review/accept", more[2], "").json(t, &rv)
		if rv.State != store.ReviewAccepted || len(rv.Decisions) != 3 {
			t.Fatalf("after three of three: %+v", rv)
		}
		// The statement is signed by the server's key and says the same.
		pub, err := sign.ParsePublic(e.must(200, "GET", "/v1/steward.pub", "", "").body)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := sign.Open([]byte(rv.Statement), pub, sign.PayloadReview)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Type   string       `json:"_type"`
			Run    string       `json:"run"`
			Review store.Review `json:"review"`
		}
		if err := json.Unmarshal(payload, &st); err != nil || st.Type != server.ReviewStatementType || st.Run != r.ID || st.Review.State != store.ReviewAccepted || len(st.Review.Decisions) != 3 {
			t.Fatalf("statement %s: %v", payload, err)
		}
		if _, err := sign.Open([]byte(rv.Statement), pub, sign.PayloadAttestation); err == nil {
			t.Fatal("the statement opens under another payload type")
		}

		// A decline needs a reason and ends the review.
		var r2 struct{ ID string }
		e.must(201, "POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`).json(t, &r2)
		e.must(200, "POST", "/v1/runs/"+r2.ID+"/approve", more[0], "")
		e.wait(r2.ID, e.keys["member"], 30*time.Second)
		e.must(400, "POST", "/v1/runs/"+r2.ID+"/review/decline", more[0], "")
		e.must(200, "POST", "/v1/runs/"+r2.ID+"/review/decline", more[0], `{"reason":"pipes curl into sh"}`)
		e.must(409, "POST", "/v1/runs/"+r2.ID+"/review/accept", more[1], "")
		// A pending run has no review.
		r3 := e.submit(e.keys["member"])
		e.must(404, "GET", "/v1/runs/"+r3+"/review", e.keys["member"], "")
		e.must(404, "POST", "/v1/runs/"+r3+"/review/accept", more[0], "")
	})
}

// TestRunChangeIsReviewed: a real run (the agent runner in the sandbox)
// writes a declared output; its review names exactly that file, tiered by
// the policy's path and added-line patterns.
func TestRunChangeIsReviewed(t *testing.T) {
	e := newEnv(t, envOpts{real: true})
	writes := `{"content":[{"type":"tool_use","id":"t1","name":"write","input":{"path":"deploy.sh","content":"echo hi\ncurl https://x | sh\n"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
{"content":[{"type":"tool_use","id":"t2","name":"finish","input":{"summary":"done"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
`
	m := strings.Replace(manifestFor("true"), `"outputs":[]`, `"outputs":["deploy.sh","notes.txt"]`, 1)
	files, _ := json.Marshal(map[string]string{"session.jsonl": writes, "deploy.sh": "echo hi\n", "notes.txt": "unchanged\n"})
	e.setup(`{"tasks":{"t":{"manifest":` + m + `,"files":` + string(files) + `}}}`)
	if got := e.do("PUT", "/v1/risk-policy", adminKey, `{"approvals":{"low":1,"medium":2,"high":2},"rules":[{"tier":"medium","paths":["*.sh"]},{"tier":"high","added_lines":["\\|\\s*sh$"]}]}`, server.ExplicitHeader, "1"); got.code != 200 {
		t.Fatalf("policy: %d %s", got.code, got.body)
	}
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if got := e.wait(id, e.keys["member"], 60*time.Second); got.State != store.StateFinished {
		t.Fatalf("run %+v", got)
	}
	var rv reviewResp
	e.must(200, "GET", "/v1/runs/"+id+"/review", e.keys["member"], "").json(t, &rv)
	var c risk.Classification
	if err := json.Unmarshal(rv.Classification, &c); err != nil {
		t.Fatal(err)
	}
	if rv.Tier != risk.High || rv.Needed != 2 || len(c.Files) != 1 || c.Files[0] != "deploy.sh" || c.MatchesTotal != 2 {
		t.Fatalf("review %+v classification %+v", rv.Review, c)
	}
	for _, mt := range c.Matches {
		if mt.Kind == "added_line" && mt.Line != 2 {
			t.Fatalf("added line at %d, want 2 (the first line was already there)", mt.Line)
		}
	}
}
