package sign

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
)

// ErrEnvelope is wrapped by errors about malformed envelopes.
var ErrEnvelope = errors.New("malformed envelope")

// Seal signs payload in the context payloadType and returns a DSSE
// envelope (docs/SPEC.md §4.2) in its JCS form:
//
//	{"payload":"<base64>","payloadType":"…","signatures":[{"keyid":"b3:…","sig":"<base64>"}]}
func Seal(k *PrivateKey, payloadType string, payload []byte) []byte {
	env := map[string]any{
		"payloadType": payloadType,
		"payload":     base64.StdEncoding.EncodeToString(payload),
		"signatures": []any{map[string]any{
			"keyid": k.Public().ID().String(),
			"sig":   base64.StdEncoding.EncodeToString(k.Sign(payloadType, payload)),
		}},
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return c
}

// Open verifies a DSSE envelope made by Seal and returns its payload. The
// envelope must be in JCS form, of the expected payload type, and carry a
// signature by pub (its keyid must be pub's id) that verifies; every
// signature must be well formed. Nothing is returned unless all hold.
func Open(envelope []byte, pub PublicKey, payloadType string) ([]byte, error) {
	v, err := canon.Parse(envelope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	if c := v.AppendJCS(nil); string(c) != string(envelope) {
		return nil, fmt.Errorf("%w: not in JCS form", ErrEnvelope)
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	pt, _ := o.Str("payloadType", true)
	p64, _ := o.Str("payload", true)
	sigs, _ := o.Array("signatures", true)
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	if pt != payloadType {
		return nil, fmt.Errorf("%w: payload type %q, want %q", ErrBadSignature, pt, payloadType)
	}
	payload, err := strictBase64(p64)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrEnvelope, err)
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: no signatures", ErrEnvelope)
	}
	want := pub.ID().String()
	verified := false
	seen := map[string]bool{}
	for i, s := range sigs {
		so := r.Object(s, fmt.Sprintf("signatures[%d]", i))
		kid, _ := so.Str("keyid", true)
		s64, _ := so.Str("sig", true)
		so.End()
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrEnvelope, err)
		}
		if _, err := canon.ParseID(kid); err != nil {
			return nil, fmt.Errorf("%w: signatures[%d].keyid: %w", ErrEnvelope, i, err)
		}
		if seen[kid] {
			return nil, fmt.Errorf("%w: signatures[%d]: a second signature by %s", ErrEnvelope, i, kid)
		}
		seen[kid] = true
		sig, err := strictBase64(s64)
		if err != nil {
			return nil, fmt.Errorf("%w: signatures[%d].sig: %v", ErrEnvelope, i, err)
		}
		if kid == want && pub.Verify(payloadType, payload, sig) == nil {
			verified = true
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: no signature by key %s verifies", ErrBadSignature, want)
	}
	return payload, nil
}

// strictBase64 decodes standard padded base64 and refuses any other
// spelling of the same bytes.
func strictBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("not canonical base64")
	}
	return b, nil
}
