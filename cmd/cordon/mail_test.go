package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
)

// mailEnv runs runMail with stdin and returns stdout and the error.
func mailEnv(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr}
	err := runMail(e, args)
	if stderr.Len() != 0 {
		t.Errorf("stderr: %q", stderr.String())
	}
	return stdout.String(), err
}

func mailPost(t *testing.T, ws, from, text string, at time.Time) {
	t.Helper()
	if _, err := mailbox.Post(ws, from, text, at); err != nil {
		t.Fatal(err)
	}
}

func TestMailEmpty(t *testing.T) {
	out, err := mailEnv(t, "", t.TempDir())
	if err != nil || out != "no messages\n" {
		t.Errorf("mail = %q, %v; want \"no messages\"", out, err)
	}
}

func TestMailList(t *testing.T) {
	ws := t.TempDir()
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	mailPost(t, ws, mailbox.FromOperator, "ok,\n\tgo ahead", t2)
	mailPost(t, ws, mailbox.FromAgent, "may I\nrun the tests?", t1)
	mailPost(t, ws, mailbox.FromAgent, "running", t2)
	mailPost(t, ws, mailbox.FromOperator, "thanks", t2.Add(time.Second))
	want := `#1 2026-05-01T09:00:00Z
  may I
  run the tests?

#2 2026-05-01T09:01:00Z
  running

#1 2026-05-01T09:01:00Z operator
  ok,
  	go ahead

#2 2026-05-01T09:01:01Z operator
  thanks
`
	out, err := mailEnv(t, "", ws)
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Errorf("mail printed:\n%s\nwant:\n%s", out, want)
	}
}

func TestMailReply(t *testing.T) {
	ws := t.TempDir()
	for i, want := range []string{"replied #1\n", "replied #2\n"} {
		out, err := mailEnv(t, "", "--reply", "yes, go on", ws)
		if err != nil || out != want {
			t.Fatalf("reply %d = %q, %v; want %q", i, out, err, want)
		}
	}
	msgs, err := mailbox.Unread(ws)
	if err != nil || len(msgs) != 2 || msgs[1].Text != "yes, go on" || msgs[1].From != mailbox.FromOperator {
		t.Errorf("the agent reads %+v, %v", msgs, err)
	}
}

func TestMailReplyStdin(t *testing.T) {
	ws := t.TempDir()
	out, err := mailEnv(t, "first line\n\tsecond line\n", "--reply", "-", ws)
	if err != nil || out != "replied #1\n" {
		t.Fatalf("reply = %q, %v", out, err)
	}
	msgs, err := mailbox.List(ws, mailbox.FromOperator)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "first line\n\tsecond line" {
		t.Errorf("operator log = %+v, %v", msgs, err)
	}
}

func TestMailReplyRefused(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct{ name, stdin, text string }{
		{"empty", "", ""},
		{"empty stdin", "", "-"},
		{"newline only", "\n", "-"},
		{"escape", "", "\x1b[2J"},
		{"too long stdin", strings.Repeat("a", mailbox.MaxText+1) + "\n", "-"},
		{"much too long stdin", strings.Repeat("é", mailbox.MaxText), "-"},
	} {
		out, err := mailEnv(t, c.stdin, "--reply", c.text, ws)
		var ue *usageError
		if err == nil || errors.As(err, &ue) || out != "" {
			t.Errorf("%s: reply = %q, %v; want a refusal", c.name, out, err)
		}
	}
	if msgs, err := mailbox.List(ws, mailbox.FromOperator); err != nil || len(msgs) != 0 {
		t.Errorf("operator log = %+v, %v; want empty", msgs, err)
	}
	// MaxText bytes and a newline is the most stdin may hold.
	if _, err := mailEnv(t, strings.Repeat("a", mailbox.MaxText)+"\n", "--reply", "-", ws); err != nil {
		t.Errorf("reply of MaxText bytes: %v", err)
	}
}

func TestMailUsage(t *testing.T) {
	ws := t.TempDir()
	for _, args := range [][]string{
		{},
		{ws, ws},
		{"--reply", "x"},
		{"--reply"},
		{"--nope", ws},
	} {
		_, err := mailEnv(t, "", args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("mail %q = %v, want a usage error", args, err)
		}
		if got := report(&bytes.Buffer{}, err); got != 2 {
			t.Errorf("mail %q: exit status %d, want 2", args, got)
		}
	}
}

func TestMailRelativeWorkspace(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	if out, err := mailEnv(t, "", "--reply", "hi", "."); err != nil || out != "replied #1\n" {
		t.Fatalf("reply = %q, %v", out, err)
	}
	if msgs, err := mailbox.List(ws, mailbox.FromOperator); err != nil || len(msgs) != 1 {
		t.Errorf("operator log = %+v, %v", msgs, err)
	}
}

func TestMailSymlinkRefused(t *testing.T) {
	ws, target := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".cordon"), 0o700); err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(ws, ".cordon", "mailbox")
	if err := os.Symlink(target, box); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{ws}, {"--reply", "hi", ws}} {
		out, err := mailEnv(t, "", args...)
		if !errors.Is(err, mailbox.ErrUnsafe) || out != "" {
			t.Errorf("mail %q = %q, %v; want ErrUnsafe", args, out, err)
			continue
		}
		var stderr bytes.Buffer
		if got := report(&stderr, err); got != 1 {
			t.Errorf("mail %q: exit status %d, want 1", args, got)
		}
		if s := stderr.String(); !strings.HasPrefix(s, "cordon: error: ") || !strings.Contains(s, box) || strings.Count(s, "\n") != 1 {
			t.Errorf("mail %q printed %q: want one error line naming %s", args, s, box)
		}
	}
	if ents, err := os.ReadDir(target); err != nil || len(ents) != 0 {
		t.Errorf("target holds %v, %v; want nothing", ents, err)
	}
}
