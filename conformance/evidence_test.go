package conformance

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/gowebpki/jcs"
)

// pae is the DSSE pre-authentication encoding, written again here from
// the DSSE specification rather than taken from package sign.
func pae(typ string, payload []byte) []byte {
	return append([]byte(fmt.Sprintf("DSSEv1 %d %s %d ", len(typ), typ, len(payload))), payload...)
}

// TestEvidenceIndependent checks the fixed signatures of the C3 and C4
// vectors with crypto/ed25519 directly, over an independently built PAE,
// and that the signed bytes are the vector's own core.
func TestEvidenceIndependent(t *testing.T) {
	files, err := Load(V1())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		for _, v := range f.Vectors {
			if v.Op != "receipt-seal" && v.Op != "attest-sign" {
				continue
			}
			var in struct {
				Seed string          `json:"seed"`
				Core json.RawMessage `json:"core"`
			}
			if err := json.Unmarshal([]byte(*v.Input), &in); err != nil {
				t.Fatal(err)
			}
			seed, _ := hex.DecodeString(in.Seed)
			pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
			switch v.Op {
			case "receipt-seal":
				var coreHex string
				json.Unmarshal(in.Core, &coreHex)
				core, _ := hex.DecodeString(coreHex)
				env, _ := hex.DecodeString(*v.Expect.OutputHex)
				var e struct {
					Type string          `cbor:"type"`
					Core cbor.RawMessage `cbor:"core"`
					Sigs []struct {
						Kid string `cbor:"kid"`
						Sig string `cbor:"sig"`
					} `cbor:"sigs"`
				}
				if err := cbor.Unmarshal(env, &e); err != nil {
					t.Fatalf("%s: %v", v.ID, err)
				}
				sig, _ := base64.RawURLEncoding.DecodeString(e.Sigs[0].Sig)
				if !bytes.Equal(e.Core, core) || e.Type != "cordon.jcr.v1" || !ed25519.Verify(pub, pae("application/vnd.cordon.receipt.v1+cbor", core), sig) {
					t.Errorf("%s: the sealed receipt does not verify independently", v.ID)
				}
			case "attest-sign":
				want, err := jcs.Transform(in.Core)
				if err != nil {
					t.Fatal(err)
				}
				var e struct {
					PayloadType string `json:"payloadType"`
					Payload     string `json:"payload"`
					Signatures  []struct {
						Sig string `json:"sig"`
					} `json:"signatures"`
				}
				json.Unmarshal([]byte(*v.Expect.Output), &e)
				payload, _ := base64.StdEncoding.DecodeString(e.Payload)
				sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
				if !bytes.Equal(payload, want) || !ed25519.Verify(pub, pae(e.PayloadType, payload), sig) || e.PayloadType != "application/vnd.cordon.attestation.v1+json" {
					t.Errorf("%s: the signed attestation does not verify independently", v.ID)
				}
			}
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("only %d signing vectors checked", checked)
	}
}
