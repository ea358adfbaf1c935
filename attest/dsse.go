package attest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
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
		return ecdsa.SignASN1(rand.Reader, s, h[:])
	}
	panic("attest: signing key of an unsupported type") // ParseSigningKey admits no other
}

// verifyPAE reports whether sig is p's signature over the PAE of payload.
func (p *PublicKey) verifyPAE(payloadType string, payload, sig []byte) bool {
	msg := pae(payloadType, payload)
	switch k := p.key.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		h := sha256.Sum256(msg)
		return ecdsa.VerifyASN1(k, h[:], sig)
	}
	return false
}
