package canon

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseRefuses attacks the strict parser with every input the model
// forbids and checks the reason and the byte offset it reports.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
		off  int64
	}{
		{"empty", ``, ErrSyntax, 0},
		{"only space", " \n", ErrSyntax, 2},
		{"bom", "\xef\xbb\xbf{}", ErrBOM, 0},
		{"utf16 bom", "\xfe\xff{}", ErrSyntax, 0},
		{"fraction", `[1.5]`, ErrFloat, 1},
		{"fraction zero", `{"a":2.0}`, ErrFloat, 5},
		{"exponent", `1e3`, ErrFloat, 0},
		{"exponent upper signed", `[10E+2]`, ErrFloat, 1},
		{"negative zero", `-0`, ErrNegativeZero, 0},
		{"negative zero in object", `{"x": -0}`, ErrNegativeZero, 6},
		{"negative zero fraction", `-0.0`, ErrFloat, 0},
		{"just over max", `9007199254740992`, ErrIntegerRange, 0},
		{"just under min", `-9007199254740992`, ErrIntegerRange, 0},
		{"uint64 max", `18446744073709551615`, ErrIntegerRange, 0},
		{"huge", `[` + strings.Repeat("9", 400) + `]`, ErrIntegerRange, 1},
		{"leading zero", `01`, ErrSyntax, 0},
		{"plus sign", `+1`, ErrSyntax, 0},
		{"bare minus", `-`, ErrSyntax, 0},
		{"dot without digits", `1.`, ErrSyntax, 0},
		{"exponent without digits", `1e`, ErrSyntax, 0},
		{"hex", `0x10`, ErrSyntax, 1},
		{"nan", `NaN`, ErrSyntax, 0},
		{"infinity", `-Infinity`, ErrSyntax, 0},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey, 7},
		{"duplicate after unescape", `{"a":1,"\u0061":2}`, ErrDuplicateKey, 7},
		{"duplicate escaped first", `{"\u0061":1,"a":2}`, ErrDuplicateKey, 12},
		{"duplicate nested", `{"x":{"k":1,"j":2,"k":3}}`, ErrDuplicateKey, 18},
		{"duplicate reports first in input", `{"b":1,"a":1,"b":2,"a":2}`, ErrDuplicateKey, 13},
		{"invalid utf8", "\"\xff\"", ErrInvalidUTF8, 1},
		{"overlong utf8", "\"\xc0\xaf\"", ErrInvalidUTF8, 1},
		{"utf8 encoded surrogate", "\"\xed\xa0\x80\"", ErrInvalidUTF8, 1},
		{"truncated utf8", "\"\xe2\x82\"", ErrInvalidUTF8, 1},
		{"invalid utf8 in key", "{\"a\xff\":1}", ErrInvalidUTF8, 3},
		{"lone high surrogate", `"\ud800"`, ErrLoneSurrogate, 1},
		{"lone high then text", `"\ud800abcdef"`, ErrLoneSurrogate, 1},
		{"high then high", `"\ud800\ud800"`, ErrLoneSurrogate, 1},
		{"lone low surrogate", `"x\udc00"`, ErrLoneSurrogate, 2},
		{"swapped pair", `"\ude02\ud83d"`, ErrLoneSurrogate, 1},
		{"noncharacter escaped", `"\uffff"`, ErrNoncharacter, 1},
		{"noncharacter fdd0", `"\ufdd0"`, ErrNoncharacter, 1},
		{"noncharacter raw", "\"\xef\xbf\xbe\"", ErrNoncharacter, 1},
		{"noncharacter supplementary", `"\ud83f\udfff"`, ErrNoncharacter, 1},
		{"raw control", "\"a\tb\"", ErrSyntax, 2},
		{"raw newline", "\"a\nb\"", ErrSyntax, 2},
		{"bad escape", `"\x41"`, ErrSyntax, 1},
		{"short unicode escape", `"\u41"`, ErrSyntax, 1},
		{"unterminated string", `"abc`, ErrSyntax, 0},
		{"unterminated after escape", `"abc\`, ErrSyntax, 4},
		{"trailing comma array", `[1,]`, ErrSyntax, 3},
		{"trailing comma object", `{"a":1,}`, ErrSyntax, 7},
		{"missing colon", `{"a" 1}`, ErrSyntax, 5},
		{"single quotes", `{'a':1}`, ErrSyntax, 1},
		{"unquoted key", `{a:1}`, ErrSyntax, 1},
		{"comment", `[1 /* x */]`, ErrSyntax, 3},
		{"trailing data", `{} {}`, ErrSyntax, 3},
		{"trailing nul", "1\x00", ErrSyntax, 1},
		{"two values", `1 2`, ErrSyntax, 2},
		{"nbsp is not whitespace", "\xc2\xa01", ErrSyntax, 0},
		{"unclosed array", `[1,2`, ErrSyntax, 4},
		{"unclosed object", `{"a":1`, ErrSyntax, 6},
		{"literal typo", `tru`, ErrSyntax, 0},
		{"capital literal", `True`, ErrSyntax, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse([]byte(tc.in))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tc.in, v.Kind(), err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) error %T is not *Error", tc.in, err)
			}
			if e.Offset != tc.off {
				t.Errorf("Parse(%q) offset = %d, want %d (%v)", tc.in, e.Offset, tc.off, err)
			}
			if v.Kind() != KindNull || v.Len() != 0 {
				t.Errorf("Parse(%q) returned a value with its error", tc.in)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth)
	if _, err := Parse([]byte(deep)); err != nil {
		t.Errorf("Parse at exactly the depth limit: %v", err)
	}
	tooDeep := "[" + deep + "]"
	if _, err := Parse([]byte(tooDeep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Parse one level past the limit: err = %v, want ErrTooDeep", err)
	}
	objDeep := strings.Repeat(`{"a":`, 5) + "1" + strings.Repeat("}", 5)
	if _, err := (Options{MaxDepth: 4}).Parse([]byte(objDeep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Parse of 5 objects with MaxDepth 4: err = %v, want ErrTooDeep", err)
	}
	// A million open brackets must fail fast on depth, not exhaust the stack.
	if _, err := Parse(bytes.Repeat([]byte("["), 1<<20)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Parse of 1M '[': err = %v, want ErrTooDeep", err)
	}
	if _, err := (Options{MaxSize: 8}).Parse([]byte(`"123456"`)); err != nil {
		t.Errorf("Parse at exactly MaxSize: %v", err)
	}
	if _, err := (Options{MaxSize: 8}).Parse([]byte(`"1234567"`)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Parse past MaxSize: err = %v, want ErrTooLarge", err)
	}
	if _, err := Parse(make([]byte, DefaultMaxSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Parse past DefaultMaxSize: err = %v, want ErrTooLarge", err)
	}
}

// TestJCS checks canonical output for inputs the model accepts.
func TestJCS(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`  {"b" : 1 , "a" : [ true , false , null ] }  `, `{"a":[true,false,null],"b":1}`},
		{`9007199254740991`, `9007199254740991`},
		{`-9007199254740991`, `-9007199254740991`},
		{`0`, `0`},
		{`"\u0041\/\b\f\n\r\t\"\\"`, `"A/\b\f\n\r\t\"\\"`},
		{`"\u0000\u001f\u007f\u0080"`, "\"\\u0000\\u001f\x7f\u0080\""},
		{`"\u2028\u2029<>&'"`, "\"\u2028\u2029<>&'\""},
		{`"\uDBFF\uDFFD"`, "\"\U0010FFFD\""},
		{`"\uFEFF in a string is fine"`, "\"\uFEFF in a string is fine\""},
		// UTF-16 order: U+E000..U+FFFF sort after the supplementary planes;
		// in UTF-8 byte order they would sort before.
		{`{"\ufb33":1,"\ud83d\ude02":2,"\u00f6":3,"Z":4,"a":5}`, "{\"Z\":4,\"a\":5,\"\u00f6\":3,\"\U0001F602\":2,\"\uFB33\":1}"},
		{`{"aa":1,"b":2,"a":3,"":4}`, `{"":4,"a":3,"aa":1,"b":2}`},
		{`{"a":{"d":1,"c":2},"A":[{"z":1,"y":2}]}`, `{"A":[{"y":2,"z":1}],"a":{"c":2,"d":1}}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{"\t[\r\n]", `[]`},
	} {
		got, err := JCS([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("JCS(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	// Sorted in UTF-16 code unit order.
	order := []string{"", "\x00", "A", "a", "aa", "b", "\u00f6", "\u0800", "\ud7ff", "\U00010000", "\U0001F602", "\U0010FFFD", "\ue000", "\ufb33", "\ufffd"}
	for i := range order {
		for j := range order {
			got := compareUTF16(order[i], order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestValueAccessors(t *testing.T) {
	v, err := Parse([]byte(`{"n":-7,"s":"x","b":true,"a":[1,null],"o":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind() != KindObject || v.Len() != 5 {
		t.Fatalf("kind %v len %d", v.Kind(), v.Len())
	}
	if n, _ := v.Get("n"); n.Kind() != KindInt || n.Int() != -7 {
		t.Errorf("n = %v %d", n.Kind(), n.Int())
	}
	if s, _ := v.Get("s"); s.Str() != "x" {
		t.Errorf("s = %q", s.Str())
	}
	if b, _ := v.Get("b"); !b.Bool() {
		t.Errorf("b = false")
	}
	if _, ok := v.Get("missing"); ok {
		t.Errorf("Get(missing) found something")
	}
	var names []string
	for name := range v.Members() {
		names = append(names, name)
	}
	if got := strings.Join(names, ","); got != "a,b,n,o,s" {
		t.Errorf("Members order = %s", got)
	}
	a, _ := v.Get("a")
	var kinds []string
	for _, e := range a.Elems() {
		kinds = append(kinds, e.Kind().String())
	}
	if got := strings.Join(kinds, ","); got != "integer,null" {
		t.Errorf("Elems kinds = %s", got)
	}
}

// TestErrorLineColumn: a JSON refusal names the line and column (in
// characters) as well as the byte offset.
func TestErrorLineColumn(t *testing.T) {
	for _, tc := range []struct {
		in        string
		line, col int
		off       int64
	}{
		{"[1.5]", 1, 2, 1},
		{"{\n  \"a\": 1,\n}", 3, 1, 12},
		{"[\"é\",\n \"é\", -0]", 2, 7, 14},
		{"[\"\xff\"]", 1, 3, 2},
		{"\n\n", 3, 1, 2},
	} {
		_, err := Parse([]byte(tc.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: %v, want an *Error", tc.in, err)
		}
		if e.Line != tc.line || e.Column != tc.col || e.Offset != tc.off {
			t.Errorf("%q: line %d column %d offset %d, want %d %d %d (%v)", tc.in, e.Line, e.Column, e.Offset, tc.line, tc.col, tc.off, err)
		}
		want := fmt.Sprintf("line %d, column %d (offset %d): ", tc.line, tc.col, tc.off)
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %q, want the prefix %q", tc.in, err, want)
		}
	}
	// Input that is not JSON text has no lines: the offset alone.
	if _, err := ParseID("x"); err == nil || !strings.HasPrefix(err.Error(), "offset 0: ") {
		t.Errorf("ParseID: %v", err)
	}
}
