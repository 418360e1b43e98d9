// Package canon is the only place where cordon turns values into the bytes it
// signs and addresses. It implements, as specified in docs/SPEC.md §2:
//
//   - ContentId: "b3:" followed by the unpadded base64url encoding of the
//     BLAKE3-256 digest of some bytes ([ID], [Sum], [ParseID]);
//   - a strict JSON parser ([Parse]) that refuses everything a canonical form
//     could disagree about: duplicate member names, invalid UTF-8, lone
//     surrogates, Unicode noncharacters, a byte order mark, numbers with a
//     fraction or exponent, negative zero and integers outside ±(2^53−1);
//   - the JSON Canonicalization Scheme of RFC 8785 over that model
//     ([Value.AppendJCS], [JCS]);
//   - the deterministic CBOR encoding of RFC 8949 §4.2.1 over the same model
//     ([Value.CBOR], [CBOR]) and a strict verifier that decodes, re-encodes
//     and compares bytes ([CheckCBOR], [DecodeCBOR]).
//
// Nothing in this package rounds, widens or drops input: what it cannot
// represent exactly it refuses with an [*Error] that names the byte offset
// and wraps one of the exported sentinel errors, so callers can test the
// reason with errors.Is.
//
// The package is pure: no I/O, no network, no global state beyond immutable
// encoder settings.
package canon
