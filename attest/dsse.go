package attest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"math/big"
	"strconv"
)

// pae is DSSE's pre-authentication encoding, the bytes a DSSE signature covers:
// "DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload, lengths in ASCII decimal.
func pae(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// signPAE signs the PAE of payload as cosign and sigstore-go verify it: ECDSA P-256 over the
// SHA-256 of the PAE with an ASN.1 DER signature, Ed25519 over the PAE itself.
func (k *SigningKey) signPAE(payloadType string, payload []byte) ([]byte, error) {
	msg := pae(payloadType, payload)
	switch s := k.signer.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(s, msg), nil
	case *ecdsa.PrivateKey:
		h := sha256.Sum256(msg)
		sig, err := ecdsa.SignASN1(rand.Reader, s, h[:])
		if err != nil {
			return nil, err
		}
		return lowS(s.Curve, sig)
	}
	panic("attest: signing key of an unsupported type") // ParseSigningKey admits no other
}

// verifyPAE reports whether sig is p's signature over the PAE of payload. An ECDSA signature
// must be in low-S form and strict DER: (r, n-s) verifies as well as (r, s), so anyone holding
// one signature could make its twin without the key, a second "attestation". highS reports a
// signature that verifies only as such a twin.
func (p *PublicKey) verifyPAE(payloadType string, payload, sig []byte) (ok, highS bool) {
	msg := pae(payloadType, payload)
	switch k := p.key.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, msg, sig), false
	case *ecdsa.PublicKey:
		h := sha256.Sum256(msg)
		if !ecdsa.VerifyASN1(k, h[:], sig) {
			return false, false
		}
		canon, err := lowS(k.Curve, sig)
		if err != nil || !bytes.Equal(canon, sig) {
			return false, true
		}
		return true, false
	}
	return false, false
}

// ecdsaSig is the ASN.1 form of an ECDSA signature.
type ecdsaSig struct{ R, S *big.Int }

// lowS returns sig in low-S form (s <= n/2), re-encoded as DER.
func lowS(c elliptic.Curve, sig []byte) ([]byte, error) {
	var v ecdsaSig
	rest, err := asn1.Unmarshal(sig, &v)
	if err != nil || len(rest) != 0 || v.R == nil || v.S == nil {
		return nil, errors.New("attest: not a DER ECDSA signature")
	}
	n := c.Params().N
	if v.S.Cmp(new(big.Int).Rsh(n, 1)) > 0 {
		v.S = new(big.Int).Sub(n, v.S)
	}
	return asn1.Marshal(v)
}
