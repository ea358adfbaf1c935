package conformance

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/store"
)

// testKey is one signing key, held both as ql3 parses it and as the raw standard-library key the
// independent implementations use.
type testKey struct {
	name string
	raw  crypto.Signer
	ql3  *attest.SigningKey
}

// testKeys generates one key of each type ql3 signs with (ECDSA P-256 and Ed25519).
func testKeys(t testing.TB) []testKey {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var keys []testKey
	for _, k := range []struct {
		name string
		raw  crypto.Signer
	}{{"ecdsa-p256", ec}, {"ed25519", ed}} {
		der, err := x509.MarshalPKCS8PrivateKey(k.raw)
		if err != nil {
			t.Fatal(err)
		}
		sk, err := attest.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		keys = append(keys, testKey{k.name, k.raw, sk})
	}
	return keys
}

// subject is one record ql3 attests: the 1,000-resource receipt or its preflight report.
type subject struct {
	name string
	d    digest.Digest
}

// subjects lays out a fresh copy of the 1,000-resource store and returns its attestable records.
func subjects(t testing.TB) (*store.Store, []subject) {
	t.Helper()
	s, rc := ocitest.Receipt1000(t)
	pf, err := filepath.Glob(filepath.Join(s.Root(), "index", evidence.IndexPreflights, "*"))
	if err != nil || len(pf) != 1 {
		t.Fatalf("store-1000 preflight index: %v %v", pf, err)
	}
	return s, []subject{{"receipt", rc.Digest}, {"preflight", digest.NewDigestFromEncoded(digest.SHA256, filepath.Base(pf[0]))}}
}

// attested signs sub with key in s and returns the stored statement and bundle bytes.
func attested(t testing.TB, s *store.Store, sub digest.Digest, key *attest.SigningKey) (statement, bundle []byte) {
	t.Helper()
	a, err := attest.Attest(s, sub, key, attest.Options{QL3Version: "conformance"})
	if err != nil {
		t.Fatalf("attest %s: %v", sub, err)
	}
	if statement, err = s.GetDescriptor(a.Statement); err != nil {
		t.Fatal(err)
	}
	if bundle, err = s.GetDescriptor(a.Bundle); err != nil {
		t.Fatal(err)
	}
	return statement, bundle
}
