package sandbox

import (
	"os"
	"testing"
)

// receiveFiles takes exactly the files the parent sent, and refuses a
// message with fewer or more, or none at all, closing what it got:
// init never joins part of the run's cgroup.
func TestReceiveFilesExactCount(t *testing.T) {
	files := func(n int) []*os.File {
		var fs []*os.File
		for i := 0; i < n; i++ {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			fs = append(fs, f)
		}
		return fs
	}
	for _, c := range []struct {
		sent, want int
		ok         bool
	}{{3, 3, true}, {2, 3, false}, {4, 3, false}, {0, 1, false}} {
		p, q, err := joinPair()
		if err != nil {
			t.Fatal(err)
		}
		if err := sendFiles(p, files(c.sent)); err != nil {
			t.Fatal(err)
		}
		p.Close() // nothing sent (c.sent == 0): the receiver sees EOF
		got, err := receiveFiles(q, c.want)
		q.Close()
		if c.ok != (err == nil) || c.ok && len(got) != c.want {
			t.Errorf("sent %d, want %d: got %d files, err %v", c.sent, c.want, len(got), err)
		}
		for _, f := range got {
			if _, err := f.Stat(); err != nil {
				t.Errorf("a received file: %v", err)
			}
			f.Close()
		}
	}
	if _, err := receiveFiles(nil, maxJoinFiles+1); err == nil {
		t.Error("receiveFiles accepted a count above maxJoinFiles")
	}
}
