package canon

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// isJCS is CheckJCS's definition: the input parses and is its own JCS form.
func isJCS(b []byte) bool {
	v, err := Parse(b)
	return err == nil && bytes.Equal(v.AppendJCS(nil), b)
}

func TestCheckJCS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":[true,false,null],"c":{"":"x"}}`, true},
		{`{"b":1,"a":2}`, false},
		{`{"a":1,"a":2}`, false},
		{`{"a":1, "b":2}`, false},
		{` {}`, false},
		{`{}`, true},
		{`[]`, true},
		{`"\u0041"`, false},
		{`"\/"`, false},
		{`"\u000a"`, false},
		{`"\n"`, true},
		{`"\u001f"`, true},
		{`"\u001F"`, false},
		{`"\u007f"`, false},
		{"\"\x7f\"", true},
		{`-0`, false},
		{`01`, false},
		{`1.0`, false},
		{`9007199254740991`, true},
		{`9007199254740992`, false},
		{`-9007199254740991`, true},
		{"\"\xff\"", false},
		{`"\ud83d\ude02"`, false},
		{"\"\U0001F602\"", true},
		{"\"\uffff\"", false},
		{`{"\ufb33":1,"\ud83d\ude02":2}`, false},
		{"{\"\U0001F602\":2,\"\uFB33\":1}", true},
		{"{\"\uFB33\":1,\"\U0001F602\":2}", false},
		{`{"\n":1,"\r":2}`, true},
		{`{"\r":1,"\n":2}`, false},
		{`{"aa":1,"b":2}`, true},
		{`1 `, false},
		{``, false},
		{`tru`, false},
		{strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth), true},
		{strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), false},
	} {
		if got := CheckJCS([]byte(tc.in)) == nil; got != tc.want || isJCS([]byte(tc.in)) != tc.want {
			t.Errorf("CheckJCS(%q) = %v, definition %v, want %v", tc.in, got, isJCS([]byte(tc.in)), tc.want)
		}
	}
}

// TestCheckJCSDifferential: on random documents and their canonical forms,
// CheckJCS agrees with its definition.
func TestCheckJCSDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 3000 {
		var b strings.Builder
		genJSON(r, &b, 0)
		in := []byte(b.String())
		for _, x := range [][]byte{in, mustJCS(t, in)} {
			if (CheckJCS(x) == nil) != isJCS(x) {
				t.Fatalf("CheckJCS(%q) = %v, definition %v", x, CheckJCS(x), isJCS(x))
			}
		}
	}
}

func mustJCS(t *testing.T, in []byte) []byte {
	out, err := JCS(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckJCSObjectSpans(t *testing.T) {
	b := []byte(`{"body":{"x":[1,2]},"index":3,"prev":"b3:x","type":"decision"}`)
	spans, err := CheckJCSObject(b, nil)
	if err != nil || len(spans) != 4 {
		t.Fatalf("CheckJCSObject = %v, %v", spans, err)
	}
	var got []string
	for _, s := range spans {
		got = append(got, string(b[s.NameStart:s.NameEnd])+"="+string(b[s.ValueStart:s.ValueEnd]))
	}
	if want := `body={"x":[1,2]} index=3 prev="b3:x" type="decision"`; strings.Join(got, " ") != want {
		t.Fatalf("spans %q, want %q", got, want)
	}
	if _, err := CheckJCSObject([]byte(`[1]`), nil); err == nil {
		t.Fatal("CheckJCSObject accepted an array")
	}
}

// FuzzCheckJCS: CheckJCS never panics and agrees with its definition.
func FuzzCheckJCS(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"a":1,"b":[true,false,null]}`))
	f.Add([]byte(`"\u001f\n"`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := CheckJCS(in) == nil, isJCS(in); got != want {
			t.Fatalf("CheckJCS(%q) = %v, definition %v", in, CheckJCS(in), want)
		}
		if v, err := Parse(in); err == nil {
			c := v.AppendJCS(nil)
			if err := CheckJCS(c); err != nil {
				t.Fatalf("CheckJCS(JCS(%q)) = %v", in, err)
			}
		}
	})
}
