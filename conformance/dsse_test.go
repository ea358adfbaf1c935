package conformance

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
)

// sslibKey adapts a standard-library key to go-securesystemslib's dsse.Signer and dsse.Verifier,
// with the algorithms cosign uses: ECDSA P-256 over SHA-256 (ASN.1 DER), Ed25519 over the message.
// The PAE, the envelope and the base64 are go-securesystemslib's.
type sslibKey struct{ k crypto.Signer }

func (s sslibKey) Sign(_ context.Context, data []byte) ([]byte, error) {
	switch k := s.k.(type) {
	case *ecdsa.PrivateKey:
		h := sha256.Sum256(data)
		sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
		if err != nil {
			return nil, err
		}
		return lowS(k.Curve, sig)
	case ed25519.PrivateKey:
		return ed25519.Sign(k, data), nil
	}
	return nil, errors.New("unsupported key")
}

func (s sslibKey) Verify(_ context.Context, data, sig []byte) error {
	ok := false
	switch k := s.k.Public().(type) {
	case *ecdsa.PublicKey:
		h := sha256.Sum256(data)
		ok = ecdsa.VerifyASN1(k, h[:], sig)
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, data, sig)
	}
	if !ok {
		return errors.New("signature does not verify")
	}
	return nil
}

// lowS returns the low-S form of an ASN.1 ECDSA signature. A random ECDSA signature is high-S half
// the time, and ql3 accepts only the low-S form (ATTEST_SIGNATURE_HIGH_S, docs/attestations.md):
// its malleated twin is what anyone can make without the key. Both forms verify under the same
// PAE, so normalising keeps the cross-check about the PAE and the envelope.
func lowS(c elliptic.Curve, sig []byte) ([]byte, error) {
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(sig, &rs); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("dsse_test.go: not an ASN.1 ECDSA signature: %v", err)
	}
	n := c.Params().N
	if rs.S.Cmp(new(big.Int).Rsh(n, 1)) > 0 {
		rs.S.Sub(n, rs.S)
	}
	return asn1.Marshal(rs)
}

// KeyID is empty: ql3 writes no keyid, so the verifier derives its own and matches any signature.
func (s sslibKey) KeyID() (string, error)   { return "", nil }
func (s sslibKey) Public() crypto.PublicKey { return s.k.Public() }

// TestDSSECrossCheck checks ql3's DSSE both ways against go-securesystemslib/dsse, for each key
// type and each kind of attested record:
//   - ql3 → sslib: the envelope of a bundle ql3 signed verifies with sslib's EnvelopeVerifier,
//     and the payload it returns is the stored statement;
//   - sslib → ql3: sslib's EnvelopeSigner signs the same statement; its envelope, placed in a
//     bundle of ql3's shape and stored, verifies with attest.Verify. For Ed25519, whose signatures
//     are deterministic, the two signatures are also byte-equal, so the two PAEs are the same bytes.
func TestDSSECrossCheck(t *testing.T) {
	ctx := context.Background()
	cases, passed := 0, 0
	for _, k := range testKeys(t) {
		for _, subName := range []string{"receipt", "preflight"} {
			cases += 2
			var ql3Sig string
			var stmt, bundle []byte
			var sub subject
			if t.Run(k.name+"/"+subName+"/ql3-to-sslib", func(t *testing.T) {
				s, subs := subjects(t)
				for _, x := range subs {
					if x.name == subName {
						sub = x
					}
				}
				stmt, bundle = attested(t, s, sub.d, k.ql3)
				var b attest.Bundle
				if err := json.Unmarshal(bundle, &b); err != nil {
					t.Fatal(err)
				}
				env := &dsse.Envelope{PayloadType: b.DSSEEnvelope.PayloadType, Payload: b.DSSEEnvelope.Payload}
				for _, sg := range b.DSSEEnvelope.Signatures {
					env.Signatures = append(env.Signatures, dsse.Signature{KeyID: sg.KeyID, Sig: sg.Sig})
				}
				ql3Sig = env.Signatures[0].Sig
				ev, err := dsse.NewEnvelopeVerifier(sslibKey{k.raw})
				if err != nil {
					t.Fatal(err)
				}
				accepted, body, err := ev.VerifyAndDecode(ctx, env)
				if err != nil || len(accepted) != 1 {
					t.Fatalf("dsse_test.go: go-securesystemslib refuses ql3's envelope: %v (%d accepted)", err, len(accepted))
				}
				if !bytes.Equal(body, stmt) {
					t.Fatalf("dsse_test.go: the verified payload is not the stored statement")
				}
				// A flipped payload byte must not verify: the check is not vacuous.
				bad := *env
				p := append([]byte(nil), stmt...)
				p[len(p)/2] ^= 1
				bad.Payload = base64.StdEncoding.EncodeToString(p)
				if _, _, err := ev.VerifyAndDecode(ctx, &bad); err == nil {
					t.Fatal("dsse_test.go: go-securesystemslib accepts a tampered payload")
				}
			}) {
				passed++
			}
			if t.Run(k.name+"/"+subName+"/sslib-to-ql3", func(t *testing.T) {
				if stmt == nil {
					t.Skip("ql3-to-sslib failed before signing")
				}
				es, err := dsse.NewEnvelopeSigner(sslibKey{k.raw})
				if err != nil {
					t.Fatal(err)
				}
				var b attest.Bundle
				if err := json.Unmarshal(bundle, &b); err != nil {
					t.Fatal(err)
				}
				env, err := es.SignPayload(ctx, b.DSSEEnvelope.PayloadType, stmt)
				if err != nil {
					t.Fatal(err)
				}
				if env.Payload != b.DSSEEnvelope.Payload {
					t.Fatalf("dsse_test.go: payload encodings differ")
				}
				if k.name == "ed25519" && env.Signatures[0].Sig != ql3Sig {
					t.Fatalf("dsse_test.go: Ed25519 signatures differ, so the PAEs differ:\n sslib %s\n ql3   %s", env.Signatures[0].Sig, ql3Sig)
				}
				b.DSSEEnvelope.Signatures = []attest.Signature{{Sig: env.Signatures[0].Sig}}
				raw, err := json.Marshal(b)
				if err != nil {
					t.Fatal(err)
				}
				canon, err := evidence.Canonicalize(raw)
				if err != nil {
					t.Fatal(err)
				}
				s, _ := subjects(t) // a fresh store holding only sslib's bundle
				if _, _, err := s.PutAttested(sub.d, stmt, canon); err != nil {
					t.Fatalf("dsse_test.go: store sslib's bundle: %v", err)
				}
				res, err := attest.Verify(s, sub.d, []*attest.PublicKey{k.ql3.Public()})
				if err != nil || res.Verified != 1 {
					t.Fatalf("dsse_test.go: attest.Verify refuses go-securesystemslib's envelope: %v %+v", err, res)
				}
			}) {
				passed++
			}
		}
	}
	t.Logf("dsse_test.go: %d of %d cross-checks pass", passed, cases)
}
