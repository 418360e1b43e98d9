package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 12, 30, 45, 999, time.FixedZone("X", 3600))

func boxDir(ws string) string { return filepath.Join(ws, ".cordon", "mailbox") }
func logPath(ws, from string) string {
	return filepath.Join(boxDir(ws), from+".jsonl")
}

func mustPost(t *testing.T, ws, from, text string) Message {
	t.Helper()
	m, err := Post(ws, from, text, t0)
	if err != nil {
		t.Fatalf("Post(%s, %q): %v", from, text, err)
	}
	return m
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRoundTrip(t *testing.T) {
	ws := t.TempDir()
	a := mustPost(t, ws, FromAgent, "hello <operator> & \"you\"\n\tindented é")
	o := mustPost(t, ws, FromOperator, "hi")
	want := Message{Seq: 1, Time: "2026-05-01T11:30:45Z", From: FromAgent, Text: "hello <operator> & \"you\"\n\tindented é"}
	if a != want {
		t.Errorf("Post = %+v, want %+v", a, want)
	}
	got, err := List(ws, FromAgent)
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("List(agent) = %+v, %v; want [%+v]", got, err, want)
	}
	got, err = List(ws, FromOperator)
	if err != nil || len(got) != 1 || got[0] != o {
		t.Errorf("List(operator) = %+v, %v; want [%+v]", got, err, o)
	}
	line := `{"seq":1,"time":"2026-05-01T11:30:45Z","from":"agent","text":"hello <operator> & \"you\"\n\tindented é"}` + "\n"
	if s := readFile(t, logPath(ws, FromAgent)); s != line {
		t.Errorf("log = %q, want %q", s, line)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(ws, ".cordon"): 0o700 | os.ModeDir,
		boxDir(ws):                   0o700 | os.ModeDir,
		logPath(ws, FromAgent):       0o600,
		logPath(ws, FromOperator):    0o600,
	} {
		st, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&^0o022 != want&^0o022 { // umask may only narrow
			t.Errorf("%s: mode %v, want %v", path, st.Mode(), want)
		}
	}
}

func TestSeqNumbering(t *testing.T) {
	ws := t.TempDir()
	for i := 1; i <= 5; i++ {
		if m := mustPost(t, ws, FromAgent, fmt.Sprint("a", i)); m.Seq != int64(i) {
			t.Fatalf("agent post %d: seq %d", i, m.Seq)
		}
	}
	if m := mustPost(t, ws, FromOperator, "o1"); m.Seq != 1 {
		t.Fatalf("operator's first seq = %d, want 1 (one sequence per log)", m.Seq)
	}
	msgs, err := List(ws, FromAgent)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) || m.Text != fmt.Sprint("a", i+1) || m.From != FromAgent {
			t.Errorf("message %d = %+v", i, m)
		}
	}
}

func TestEmptyMailbox(t *testing.T) {
	ws := t.TempDir()
	if msgs, err := List(ws, FromAgent); err != nil || msgs != nil {
		t.Errorf("List = %v, %v; want nothing", msgs, err)
	}
	if msgs, err := Unread(ws); err != nil || msgs != nil {
		t.Errorf("Unread = %v, %v; want nothing", msgs, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".cordon")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading created .cordon: %v", err)
	}
	mustPost(t, ws, FromAgent, "x") // the operator log does not exist yet
	if msgs, err := Unread(ws); err != nil || msgs != nil {
		t.Errorf("Unread = %v, %v; want nothing", msgs, err)
	}
}

func TestBadArguments(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct{ ws, from string }{
		{"relative/ws", FromAgent},
		{"", FromAgent},
		{ws, "Agent"},
		{ws, "../agent"},
		{ws, ""},
	} {
		if _, err := Post(c.ws, c.from, "x", t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("Post(%q, %q) = %v, want ErrInvalid", c.ws, c.from, err)
		}
		if _, err := List(c.ws, c.from); !errors.Is(err, ErrInvalid) {
			t.Errorf("List(%q, %q) = %v, want ErrInvalid", c.ws, c.from, err)
		}
	}
	if _, err := Unread("rel"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Unread(rel) = %v, want ErrInvalid", err)
	}
	if _, err := Post(ws, FromAgent, "x", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Post in year 10000 = %v, want ErrInvalid", err)
	}
}

func TestUnreadOnce(t *testing.T) {
	ws := t.TempDir()
	mustPost(t, ws, FromAgent, "question")
	mustPost(t, ws, FromOperator, "o1")
	mustPost(t, ws, FromOperator, "o2")
	texts := func(ms []Message) string {
		var s []string
		for _, m := range ms {
			if m.From != FromOperator {
				t.Errorf("Unread returned %+v", m)
			}
			s = append(s, m.Text)
		}
		return strings.Join(s, ",")
	}
	step := func(want string) {
		t.Helper()
		got, err := Unread(ws)
		if err != nil {
			t.Fatal(err)
		}
		if texts(got) != want {
			t.Fatalf("Unread = %q, want %q", texts(got), want)
		}
	}
	step("o1,o2")
	step("")
	mustPost(t, ws, FromAgent, "another question")
	step("")
	mustPost(t, ws, FromOperator, "o3")
	step("o3")
	step("")
	if s := readFile(t, filepath.Join(boxDir(ws), "agent.cursor")); s != "3\n" {
		t.Errorf("cursor = %q, want \"3\\n\"", s)
	}
	if _, err := os.Lstat(filepath.Join(boxDir(ws), "agent.cursor.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary cursor left behind: %v", err)
	}
}

func TestUnreadConcurrent(t *testing.T) {
	ws := t.TempDir()
	for i := range 20 {
		mustPost(t, ws, FromOperator, fmt.Sprint("o", i))
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			msgs, err := Unread(ws)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				seen[m.Seq]++
			}
		})
	}
	wg.Wait()
	for seq := int64(1); seq <= 20; seq++ {
		if seen[seq] != 1 {
			t.Errorf("seq %d returned %d times, want once", seq, seen[seq])
		}
	}
}

func TestBadCursor(t *testing.T) {
	for _, c := range []string{"", "3", "03\n", "-1\n", "x\n", "1 \n", "4\n", "99999999999999999999\n"} {
		ws := t.TempDir()
		for range 3 {
			mustPost(t, ws, FromOperator, "o")
		}
		cur := filepath.Join(boxDir(ws), "agent.cursor")
		if err := os.WriteFile(cur, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		if msgs, err := Unread(ws); !errors.Is(err, ErrMalformed) || msgs != nil {
			t.Errorf("cursor %q: Unread = %v, %v; want ErrMalformed", c, msgs, err)
		}
		if s := readFile(t, cur); s != c {
			t.Errorf("cursor %q rewritten to %q", c, s)
		}
	}
}

func TestCursorLinkRefused(t *testing.T) {
	ws := t.TempDir()
	mustPost(t, ws, FromOperator, "o")
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cur := filepath.Join(boxDir(ws), "agent.cursor")
	if err := os.Symlink(target, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := Unread(ws); !errors.Is(err, ErrUnsafe) {
		t.Errorf("symlinked cursor: Unread = %v, want ErrUnsafe", err)
	}
	os.Remove(cur)
	if err := os.Link(target, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := Unread(ws); !errors.Is(err, ErrUnsafe) {
		t.Errorf("hard-linked cursor: Unread = %v, want ErrUnsafe", err)
	}
	if s := readFile(t, target); s != "0\n" {
		t.Errorf("target rewritten: %q", s)
	}
}

// refuses checks that every entry point refuses the workspace with
// ErrUnsafe.
func refuses(t *testing.T, ws string) {
	t.Helper()
	for _, from := range []string{FromAgent, FromOperator} {
		if _, err := Post(ws, from, "x", t0); !errors.Is(err, ErrUnsafe) {
			t.Errorf("Post(%s) = %v, want ErrUnsafe", from, err)
		}
		if _, err := List(ws, from); !errors.Is(err, ErrUnsafe) {
			t.Errorf("List(%s) = %v, want ErrUnsafe", from, err)
		}
	}
	if _, err := Unread(ws); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Unread = %v, want ErrUnsafe", err)
	}
}

// snapshot lists a directory tree's paths and file contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v\n", path, d.Type())
		if d.Type().IsRegular() {
			fmt.Fprintf(&b, "%q\n", readFile(t, path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSymlinkRefused(t *testing.T) {
	cases := map[string]func(t *testing.T, ws, target string){
		".cordon": func(t *testing.T, ws, target string) {
			must(t, os.Symlink(target, filepath.Join(ws, ".cordon")))
		},
		".cordon relative": func(t *testing.T, ws, target string) {
			must(t, os.Mkdir(filepath.Join(ws, "elsewhere"), 0o700))
			must(t, os.Symlink("elsewhere", filepath.Join(ws, ".cordon")))
		},
		"mailbox": func(t *testing.T, ws, target string) {
			must(t, os.Mkdir(filepath.Join(ws, ".cordon"), 0o700))
			must(t, os.Symlink(target, boxDir(ws)))
		},
		"logs": func(t *testing.T, ws, target string) {
			must(t, os.MkdirAll(boxDir(ws), 0o700))
			for _, from := range []string{FromAgent, FromOperator} {
				f := filepath.Join(target, from+".jsonl")
				must(t, os.WriteFile(f, nil, 0o600))
				must(t, os.Symlink(f, logPath(ws, from)))
			}
		},
		"dangling logs": func(t *testing.T, ws, target string) {
			must(t, os.MkdirAll(boxDir(ws), 0o700))
			for _, from := range []string{FromAgent, FromOperator} {
				must(t, os.Symlink(filepath.Join(target, "new-"+from), logPath(ws, from)))
			}
		},
		"logs are directories": func(t *testing.T, ws, target string) {
			for _, from := range []string{FromAgent, FromOperator} {
				must(t, os.MkdirAll(logPath(ws, from), 0o700))
			}
		},
		".cordon is a file": func(t *testing.T, ws, target string) {
			must(t, os.WriteFile(filepath.Join(ws, ".cordon"), nil, 0o600))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			ws, target := t.TempDir(), t.TempDir()
			must(t, os.WriteFile(filepath.Join(target, "keep"), []byte("secret"), 0o600))
			setup(t, ws, target)
			before := snapshot(t, target)
			refuses(t, ws)
			if after := snapshot(t, target); after != before {
				t.Errorf("target changed:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}

func TestHardLinkRefused(t *testing.T) {
	ws := t.TempDir()
	must(t, os.MkdirAll(boxDir(ws), 0o700))
	outside := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(outside, nil, 0o600))
	for _, from := range []string{FromAgent, FromOperator} {
		must(t, os.Link(outside, logPath(ws, from)))
	}
	refuses(t, ws)
	if s := readFile(t, outside); s != "" {
		t.Errorf("victim written: %q", s)
	}
}

func TestBadTextRefused(t *testing.T) {
	ws := t.TempDir()
	mustPost(t, ws, FromAgent, "first")
	before := readFile(t, logPath(ws, FromAgent))
	for name, text := range map[string]string{
		"empty":          "",
		"too long":       strings.Repeat("a", MaxText+1),
		"NUL":            "a\x00b",
		"ESC":            "\x1b[31mred",
		"CR":             "a\rb",
		"DEL":            "a\x7f",
		"C1":             "a\u0085b",
		"bad UTF-8":      "a\xffb",
		"surrogate":      "\xed\xa0\x80",
		"truncated rune": "é"[:1],
		"RLO":            "invoice\u202egnp.exe",
		"isolate":        "a\u2067b\u2069",
		"zero width":     "a\u200bb",
		"BOM":            "\ufeffhello",
		"tag characters": "hi\U000E0041\U000E0042",
	} {
		if _, err := Post(ws, FromAgent, text, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Post = %v, want ErrInvalid", name, err)
		}
	}
	if after := readFile(t, logPath(ws, FromAgent)); after != before {
		t.Errorf("log changed to %q", after)
	}
	// The limits themselves are fine.
	mustPost(t, ws, FromAgent, strings.Repeat("é", MaxText/2))
	mustPost(t, ws, FromAgent, "\uFFFD is a real character")
}

const (
	l1 = `{"seq":1,"time":"2026-05-01T11:30:45Z","from":"agent","text":"one"}` + "\n"
	l2 = `{"seq":2,"time":"2026-05-01T11:30:45Z","from":"agent","text":"two"}` + "\n"
)

func TestMalformedLog(t *testing.T) {
	for name, c := range map[string]struct {
		data string
		line int
	}{
		"not JSON":        {l1 + "hello\n", 2},
		"empty line":      {l1 + "\n", 2},
		"blank line":      {"\n" + l1, 1},
		"array":           {`[1]` + "\n", 1},
		"two objects":     {l1[:len(l1)-1] + l1, 1},
		"duplicate seq":   {l1 + l1, 2},
		"out of order":    {l2 + l1, 1},
		"gap":             {l1 + strings.Replace(l2, `"seq":2`, `"seq":3`, 1), 2},
		"starts at 0":     {strings.Replace(l1, `"seq":1`, `"seq":0`, 1), 1},
		"negative seq":    {strings.Replace(l1, `"seq":1`, `"seq":-1`, 1), 1},
		"seq as string":   {strings.Replace(l1, `"seq":1`, `"seq":"1"`, 1), 1},
		"seq as float":    {strings.Replace(l1, `"seq":1`, `"seq":1.0`, 1), 1},
		"wrong from":      {l1 + strings.Replace(l2, `"agent"`, `"operator"`, 1), 2},
		"torn last line":  {l1 + l2[:len(l2)-1], 2},
		"torn mid-object": {l1 + l2[:20], 2},
		"extra member":    {strings.Replace(l1, `}`, `,"x":1}`, 1), 1},
		"missing text":    {`{"seq":1,"time":"2026-05-01T11:30:45Z","from":"agent"}` + "\n", 1},
		"duplicate key":   {strings.Replace(l1, `"text":"one"`, `"text":"one","text":"two"`, 1), 1},
		"reordered":       {`{"time":"2026-05-01T11:30:45Z","seq":1,"from":"agent","text":"one"}` + "\n", 1},
		"other case":      {strings.Replace(l1, `"text"`, `"Text"`, 1), 1},
		"whitespace":      {strings.Replace(l1, `,`, `, `, 1), 1},
		"CRLF":            {l1[:len(l1)-1] + "\r\n", 1},
		"escaped HTML":    {strings.Replace(l1, `one`, `\u003c`, 1), 1},
		"local time":      {strings.Replace(l1, `11:30:45Z`, `12:30:45+01:00`, 1), 1},
		"fractional time": {strings.Replace(l1, `45Z`, `45.5Z`, 1), 1},
		"bad time":        {strings.Replace(l1, `2026-05-01T11:30:45Z`, `yesterday`, 1), 1},
		"empty text":      {strings.Replace(l1, `"one"`, `""`, 1), 1},
		"escape in text":  {strings.Replace(l1, `one`, `\u001b[2J`, 1), 1},
		"NUL in text":     {strings.Replace(l1, `one`, `\u0000`, 1), 1},
		"bad UTF-8":       {strings.Replace(l1, `one`, "\xff", 1), 1},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			must(t, os.MkdirAll(boxDir(ws), 0o700))
			path := logPath(ws, FromAgent)
			must(t, os.WriteFile(path, []byte(c.data), 0o600))
			_, err := List(ws, FromAgent)
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("List = %v, want a *LineError", err)
			}
			if le.File != path || le.Line != c.line {
				t.Errorf("error names %s line %d, want %s line %d", le.File, le.Line, path, c.line)
			}
			if !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line naming the file", err)
			}
			if _, err := Post(ws, FromAgent, "more", t0); !errors.As(err, &le) {
				t.Errorf("Post = %v, want a *LineError", err)
			}
			if got := readFile(t, path); got != c.data {
				t.Errorf("Post changed the log to %q", got)
			}
		})
	}
}

func TestMalformedOperatorLogStopsUnread(t *testing.T) {
	ws := t.TempDir()
	mustPost(t, ws, FromOperator, "o1")
	f, err := os.OpenFile(logPath(ws, FromOperator), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(`{"seq":2`)
	must(t, err)
	must(t, f.Close())
	if msgs, err := Unread(ws); !errors.Is(err, ErrMalformed) || msgs != nil {
		t.Errorf("Unread = %v, %v; want ErrMalformed", msgs, err)
	}
	if _, err := os.Lstat(filepath.Join(boxDir(ws), "agent.cursor")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cursor written despite the error: %v", err)
	}
}

func TestConcurrentPosts(t *testing.T) {
	ws := t.TempDir()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := Post(ws, FromAgent, fmt.Sprintf("w%d-%d", w, i), t0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	msgs, err := List(ws, FromAgent)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != workers*each {
		t.Fatalf("%d messages, want %d", len(msgs), workers*each)
	}
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Errorf("message %d has seq %d", i, m.Seq)
		}
		if seen[m.Text] {
			t.Errorf("text %q twice", m.Text)
		}
		seen[m.Text] = true
	}
}

func TestCapReached(t *testing.T) {
	ws := t.TempDir()
	must(t, os.MkdirAll(boxDir(ws), 0o700))
	path := logPath(ws, FromOperator)
	text := strings.Repeat("x", MaxText)
	var log []byte
	var seq int64
	for seq = 1; ; seq++ {
		line, err := encode(Message{Seq: seq, Time: "2026-05-01T11:30:45Z", From: FromOperator, Text: text})
		must(t, err)
		if len(log)+len(line) > MaxLog {
			break
		}
		log = append(log, line...)
	}
	must(t, os.WriteFile(path, log, 0o600))
	if _, err := Post(ws, FromOperator, text, t0); !errors.Is(err, ErrFull) {
		t.Fatalf("Post past the cap = %v, want ErrFull", err)
	}
	if got := readFile(t, path); got != string(log) {
		t.Errorf("log changed (%d bytes, want %d)", len(got), len(log))
	}
	// A message that still fits is accepted, up to the byte.
	empty, err := encode(Message{Seq: seq, Time: "2026-05-01T11:30:45Z", From: FromOperator})
	must(t, err)
	room := MaxLog - len(log) - len(empty)
	if room < 1 {
		t.Fatalf("test setup: room %d", room)
	}
	mustPost(t, ws, FromOperator, strings.Repeat("y", room))
	if st, err := os.Stat(path); err != nil || st.Size() != MaxLog {
		t.Fatalf("log size %v, %v; want exactly %d", st.Size(), err, MaxLog)
	}
	if _, err := Post(ws, FromOperator, "z", t0); !errors.Is(err, ErrFull) {
		t.Errorf("Post on a full log = %v, want ErrFull", err)
	}
	if msgs, err := List(ws, FromOperator); err != nil || int64(len(msgs)) != seq {
		t.Errorf("List = %d messages, %v", len(msgs), err)
	}
}

func TestOversizeLogRefused(t *testing.T) {
	ws := t.TempDir()
	must(t, os.MkdirAll(boxDir(ws), 0o700))
	must(t, os.WriteFile(logPath(ws, FromAgent), bytes.Repeat([]byte(l1), MaxLog/len(l1)+1), 0o600))
	if _, err := List(ws, FromAgent); !errors.Is(err, ErrMalformed) {
		t.Errorf("List = %v, want ErrMalformed", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(l1 + l2))
	f.Add([]byte(l1 + "\n"))
	f.Add([]byte(`{"seq":1,"time":"2026-05-01T11:30:45Z","from":"agent","text":"a\u2028\n\t"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := parse(data, "log", FromAgent)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LineError", err)
			}
			return
		}
		var again []byte
		for _, m := range msgs {
			if checkText(m.Text) != nil {
				t.Fatalf("accepted text %q", m.Text)
			}
			line, err := encode(m)
			if err != nil {
				t.Fatal(err)
			}
			again = append(again, line...)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted %q, which re-encodes as %q", data, again)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnreadUpTo: a byte limit (text plus HeaderBytes a message)
// delivers the oldest messages that fit and leaves the rest unread; a
// message that does not fit is not returned, and not marked read.
func TestUnreadUpTo(t *testing.T) {
	ws := t.TempDir()
	for _, text := range []string{"aaaa", "bbbb", "cccccccc", "d"} {
		mustPost(t, ws, FromOperator, text)
	}
	limit := 2*HeaderBytes + 8
	var got []string
	for range 5 {
		msgs, _, err := UnreadUpTo(ws, limit)
		if err != nil {
			t.Fatal(err)
		}
		var batch []string
		for _, m := range msgs {
			batch = append(batch, m.Text)
		}
		got = append(got, strings.Join(batch, "+"))
	}
	if want := "aaaa+bbbb,cccccccc,d,,"; strings.Join(got, ",") != want {
		t.Fatalf("batches %q, want %q", strings.Join(got, ","), want)
	}
	mustPost(t, ws, FromOperator, strings.Repeat("e", 100))
	if msgs, more, err := UnreadUpTo(ws, limit); err != nil || len(msgs) != 0 || more != 1 {
		t.Fatalf("a message longer than the limit was returned: %v %d %v", msgs, more, err)
	}
	if msgs, more, err := UnreadUpTo(ws, 0); err != nil || len(msgs) != 1 || len(msgs[0].Text) != 100 || more != 0 {
		t.Fatalf("the long message was lost: %v %v", msgs, err)
	}
}
