package attest

import (
	"crypto/elliptic"
	"encoding/asn1"
	"math/big"

	"github.com/opencontainers/go-digest"
)

// SignPAEForTest lets the tests forge bundles a holder of k could make.
func SignPAEForTest(k *SigningKey, payloadType string, payload []byte) []byte {
	sig, err := k.signPAE(payloadType, payload)
	if err != nil {
		panic(err)
	}
	return sig
}

// PrepareForTest is Attest without the store writes: the statement and bundle bytes it would store.
func PrepareForTest(src Source, subject digest.Digest, k *SigningKey, opts Options) (statement, bundle []byte) {
	sb, bb, err := prepare(src, subject, k, opts)
	if err != nil {
		panic(err)
	}
	return sb, bb
}

// NewBundleForTest is the signing step of Attest alone.
func NewBundleForTest(k *SigningKey, statement []byte) []byte {
	b, err := newBundle(k, statement)
	if err != nil {
		panic(err)
	}
	return b
}

// HighSTwinForTest returns the malleated twin (r, n-s) of a P-256 signature, as anyone holding
// the signature could make it without the key.
func HighSTwinForTest(sig []byte) []byte {
	var v ecdsaSig
	if _, err := asn1.Unmarshal(sig, &v); err != nil {
		panic(err)
	}
	v.S = new(big.Int).Sub(elliptic.P256().Params().N, v.S)
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// IsLowSForTest reports whether a P-256 signature is in low-S form.
func IsLowSForTest(sig []byte) bool {
	var v ecdsaSig
	if _, err := asn1.Unmarshal(sig, &v); err != nil {
		panic(err)
	}
	return v.S.Cmp(new(big.Int).Rsh(elliptic.P256().Params().N, 1)) <= 0
}
