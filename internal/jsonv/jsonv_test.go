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
		{`{"name":"x","Name":"y","n":3,"on":true,"list":["a"],"sub":{"k":"v"}}`, "Name: unknown member"},
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
