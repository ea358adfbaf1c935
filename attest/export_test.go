package attest

import "github.com/opencontainers/go-digest"

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
