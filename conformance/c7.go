package conformance

import (
	"github.com/cordon-dev/cordon/environment"
	"github.com/cordon-dev/cordon/evidence/canon"
)

// c7 is class C7, environment manifests (docs/SPEC.md §7): a
// devcontainer.json becomes a canonical cordon.env.v1 manifest whose
// address ignores order, whitespace and comments, and every member that
// runs commands or widens the sandbox is refused.
func c7() Class {
	return Class{
		Name:  "C7",
		Title: "environment manifests",
		Ops: map[string]Op{
			// env-ingest: devcontainer.json text → the manifest's JCS and address.
			"env-ingest": func(in []byte) ([]byte, canon.ID, error) {
				m, err := environment.Ingest(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				return m.JCS(), m.ID(), nil
			},
			// env-parse: a manifest → its JCS and address, only if it is
			// exactly in canonical form.
			"env-parse": func(in []byte) ([]byte, canon.ID, error) {
				m, err := environment.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				return m.JCS(), m.ID(), nil
			},
		},
	}
}
