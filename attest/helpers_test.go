package attest_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/store"
)

// capturedStore is the store of real ceremonies the auditor's tests use (audit/fixture_test.go):
// the 3.4.1 release applied straight through, and applied again with a recovery.
const capturedStore = "../audit/testdata/store"

// fixture lays the captured store out afresh (git keeps neither modes nor empty directories) and
// returns it with its receipts (a straight one and a recovered one) and its preflights.
type fixture struct {
	root       string
	st         *store.Store
	receipts   []evidence.Descriptor
	preflights []evidence.Descriptor
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root := filepath.Join(t.TempDir(), "store")
	err := filepath.WalkDir(capturedStore, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(capturedStore, p)
		dst := filepath.Join(root, rel)
		if e.IsDir() {
			return os.Mkdir(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o400)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"tmp", "locks", "index/receipts", "index/intents", "index/preflights"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{root: root, st: st}
	for kind, out := range map[string]*[]evidence.Descriptor{evidence.IndexReceipts: &fx.receipts, evidence.IndexPreflights: &fx.preflights} {
		es, err := st.ListIndex(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			*out = append(*out, e.Descriptor)
		}
	}
	if len(fx.receipts) == 0 || len(fx.preflights) == 0 {
		t.Fatalf("captured store: %d receipts, %d preflights", len(fx.receipts), len(fx.preflights))
	}
	return fx
}

// keyPair makes a key of kind ("p256", "ed25519", "p384", "rsa") and returns its PKCS#8 PEM and
// PKIX PEM.
func keyPair(t testing.TB, kind string) (priv, pub []byte) {
	t.Helper()
	var k crypto.Signer
	var err error
	switch kind {
	case "p256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pder, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder})
}

// writeKey writes a private key file 0600 in a fresh 0700 directory and returns its path.
func writeKey(t testing.TB, b []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func signer(t testing.TB, kind string) (*attest.SigningKey, *attest.PublicKey, []byte) {
	t.Helper()
	priv, pub := keyPair(t, kind)
	k, err := attest.LoadSigningKey(writeKey(t, priv))
	if err != nil {
		t.Fatal(err)
	}
	p, err := attest.ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != k.Public().Digest {
		t.Fatalf("public key digest %s, signing key's %s", p.Digest, k.Public().Digest)
	}
	return k, p, priv
}

var opts = attest.Options{QL3Version: "v0.0.0-test"}

func removeFile(root, rel string) error { return os.Remove(filepath.Join(root, rel)) }

func rawPrivate(t testing.TB, der []byte) []byte {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		b, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	case ed25519.PrivateKey:
		return k.Seed()
	}
	return nil
}

func fmtAll(v any) string { return fmt.Sprintf("%v %+v %#v %s", v, v, v, mustJSON(v)) }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
