package jsonv

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

func parse(t *testing.T, s string) canon.Value {
	t.Helper()
	v, err := canon.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{`{"name":"x","n":3,"on":true,"list":["a"],"sub":{"k":"v"}}`, ""},
		{`{"Name":"x","n":3,"on":true,"list":["a"],"sub":{"k":"v"}}`, "name: required member is missing"},
		{`{"name":"x","Name":"y","n":3,"on":true,"list":["a"],"sub":{"k":"v"}}`, "Name: unknown member; did you mean \"name\"?"},
		{`{"name":"x","n":3,"on":true,"lst":["a"],"sub":{"k":"v"}}`, "list: required member is missing (is \"lst\" a misspelling of it?)"},
		{`{"name":"x","n":3,"on":true,"list":["a"],"sub":{"k":"v"},"optinal":""}`, "optinal: unknown member; did you mean \"optional\"?"},
		{`{"name":"x","n":3,"on":true,"list":["a"],"sub":{"k":"v"},"zzz":""}`, "zzz: unknown member (known: [list n name on optional sub])"},
		{`{"name":1,"n":3,"on":true,"list":["a"],"sub":{"k":"v"}}`, "name: want string, got integer"},
		{`{"name":"x","n":"3","on":true,"list":["a"],"sub":{"k":"v"}}`, "n: want integer, got string"},
		{`{"name":"x","n":3,"on":1,"list":["a"],"sub":{"k":"v"}}`, "on: want bool, got integer"},
		{`{"name":"x","n":3,"on":true,"list":["a",2],"sub":{"k":"v"}}`, "list[1]: want string, got integer"},
		{`{"name":"x","n":3,"on":true,"list":["a"],"sub":{"k":"v","extra":0}}`, "sub.extra: unknown member"},
		{`{"name":"x","n":3,"on":true,"list":["a"],"sub":[]}`, "sub: want object, got array"},
		{`[1]`, "want an object, got array"},
	} {
		r := &Reader{}
		o := r.Object(parse(t, tc.doc), "")
		o.Str("name", true)
		o.Int("n", true)
		o.Bool("on", true)
		o.Strings("list", true)
		if sub, ok := o.Object("sub", true); ok {
			sub.Str("k", true)
			sub.End()
		}
		o.Str("optional", false)
		o.End()
		err := r.Err()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want %q", tc.doc, err, tc.want)
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: %v does not wrap ErrInvalid", tc.doc, err)
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"code", "egress", "exec", "fs", "limits", "tenancy"}
	for _, tc := range []struct{ name, want string }{
		{"egres", "egress"},
		{"egrses", "egress"},
		{"Code", "code"},
		{"tenacy", "tenancy"},
		{"limts", "limits"},
		{"fss", "fs"},
		{"f", "fs"},
		{"xy", ""},  // two edits from "fs" is too many for two characters
		{"egg", ""}, // three edits from "exec"
		{"budgets", ""},
		{"", ""},
	} {
		if got := Nearest(tc.name, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
