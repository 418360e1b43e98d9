package conformance

import "github.com/cordon-dev/cordon/evidence/canon"

// c1 is class C1, canonicality: ContentId, JCS and deterministic CBOR.
func c1() Class {
	return Class{
		Name:  "C1",
		Title: "canonicality",
		Ops: map[string]Op{
			// jcs: JSON text → its JCS bytes and their ContentId.
			"jcs": func(in []byte) ([]byte, canon.ID, error) {
				out, err := canon.JCS(in)
				return out, canon.Sum(out), err
			},
			// cbor: JSON text → its deterministic CBOR and their ContentId.
			"cbor": func(in []byte) ([]byte, canon.ID, error) {
				out, err := canon.CBOR(in)
				return out, canon.Sum(out), err
			},
			// cbor-check: bytes that must be canonical CBOR → their ContentId.
			"cbor-check": func(in []byte) ([]byte, canon.ID, error) {
				err := canon.CheckCBOR(in)
				return in, canon.Sum(in), err
			},
			// id-parse: a ContentId's text → its 32-byte digest.
			"id-parse": func(in []byte) ([]byte, canon.ID, error) {
				id, err := canon.ParseID(string(in))
				return id[:], id, err
			},
			// id-raw: bytes → their ContentId.
			"id-raw": func(in []byte) ([]byte, canon.ID, error) {
				id := canon.Sum(in)
				return in, id, nil
			},
		},
	}
}
