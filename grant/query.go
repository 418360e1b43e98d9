package grant

import (
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
)

// Kinds of request.
const (
	KindDevice  = "device"
	KindFS      = "fs"
	KindEgress  = "egress"
	KindKV      = "kv"
	KindService = "service"
	KindExec    = "exec"
	KindEnv     = "env"
)

// Query is one request to decide. Which fields matter depends on Kind:
//
//	device:  Class, Mode ("brokered" or "direct")
//	fs:      Op ("read", "write" or "exec"), Path
//	egress:  Host (a canonical host name or IP address), Proto, Port
//	kv:      Namespace, Key (segments), Op ("get", "put", "delete", "list")
//	service: Name, Method
//	exec:    Path (where the binary is), B3 (ContentId of its bytes,
//	         computed by the enforcement point, never taken from the
//	         requester), Argv
//	env:     Name
//
// Fields that do not belong to the kind must be empty.
type Query struct {
	Kind      string   `json:"kind"`
	Class     string   `json:"class,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Op        string   `json:"op,omitempty"`
	Path      string   `json:"path,omitempty"`
	Host      string   `json:"host,omitempty"`
	Proto     string   `json:"proto,omitempty"`
	Port      int      `json:"port,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Key       []string `json:"key,omitempty"`
	Name      string   `json:"name,omitempty"`
	Method    string   `json:"method,omitempty"`
	B3        string   `json:"b3,omitempty"`
	Argv      []string `json:"argv,omitempty"`
}

// invalidQuery wraps ErrInvalid and the reason, and says "query".
type invalidQuery struct{ err error }

func (e invalidQuery) Error() string   { return "invalid query: " + e.err.Error() }
func (e invalidQuery) Unwrap() []error { return []error{ErrInvalid, e.err} }

// fieldsOf lists the members each kind of query has.
var fieldsOf = map[string][]string{
	KindDevice:  {"class", "mode"},
	KindFS:      {"op", "path"},
	KindEgress:  {"host", "proto", "port"},
	KindKV:      {"namespace", "key", "op"},
	KindService: {"name", "method"},
	KindExec:    {"path", "b3", "argv"},
	KindEnv:     {"name"},
}

// ParseQuery parses a query document strictly: the members of its kind,
// all required (except an exec query's b3, which the enforcement point
// computes from the file), and nothing else. It checks types only; whether the values
// are canonical is for Decide to judge, so that a non-canonical request
// becomes a recorded denial rather than a parse error.
func ParseQuery(data []byte) (Query, error) {
	v, err := canon.Parse(data)
	if err != nil {
		return Query{}, invalidQuery{err}
	}
	return QueryFromValue(v)
}

// QueryFromValue is ParseQuery for an already parsed document.
func QueryFromValue(v canon.Value) (Query, error) {
	var q Query
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	q.Kind, _ = o.Str("kind", true)
	fields, ok := fieldsOf[q.Kind]
	if !ok && r.Err() == nil {
		r.Fail("kind", "unknown kind %q (want device, fs, egress, kv, service, exec or env)", q.Kind)
	}
	for _, f := range fields {
		switch f {
		case "class":
			q.Class, _ = o.Str(f, true)
		case "mode":
			q.Mode, _ = o.Str(f, true)
		case "op":
			q.Op, _ = o.Str(f, true)
		case "path":
			q.Path, _ = o.Str(f, true)
		case "host":
			q.Host, _ = o.Str(f, true)
		case "proto":
			q.Proto, _ = o.Str(f, true)
		case "port":
			n, _ := o.Int(f, true)
			if int64(int(n)) != n {
				n = -1 // does not fit this platform's int; Decide denies it either way
			}
			q.Port = int(n) // outside 1..65535, Decide denies it as a request
		case "namespace":
			q.Namespace, _ = o.Str(f, true)
		case "key":
			q.Key, _ = o.Strings(f, true)
		case "name":
			q.Name, _ = o.Str(f, true)
		case "method":
			q.Method, _ = o.Str(f, true)
		case "b3":
			q.B3, _ = o.Str(f, false) // the enforcement point fills it in

		case "argv":
			q.Argv, _ = o.Strings(f, true)
		}
	}
	o.End()
	if err := r.Err(); err != nil {
		return Query{}, invalidQuery{err}
	}
	return q, nil
}
