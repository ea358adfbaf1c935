package attest_test

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// TestSigningKeyRefusals: each class of bad signing key file is refused with its code.
func TestSigningKeyRefusals(t *testing.T) {
	good, pub := keyPair(t, "p256")
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	xder, _ := x509.MarshalPKCS8PrivateKey(x)
	p384, _ := keyPair(t, "p384")
	rsaKey, _ := keyPair(t, "rsa")
	vectors := []struct {
		name string
		path func(t *testing.T) string // lays the key file out and returns its path
		code refuse.Code
	}{
		{"mode 0644", func(t *testing.T) string {
			p := writeKey(t, good)
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, stablefile.CodeNotPrivate},
		{"directory 0755", func(t *testing.T) string {
			p := writeKey(t, good)
			if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}, stablefile.CodeNotPrivate},
		{"symlink", func(t *testing.T) string {
			p := writeKey(t, good)
			l := filepath.Join(filepath.Dir(p), "link.pem")
			if err := os.Symlink(p, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, stablefile.CodeSymlink},
		{"second hard link", func(t *testing.T) string {
			p := writeKey(t, good)
			if err := os.Link(p, p+".2"); err != nil {
				t.Fatal(err)
			}
			return p
		}, stablefile.CodeLinkCount},
		{"rsa", func(t *testing.T) string { return writeKey(t, rsaKey) }, attest.CodeKeyType},
		{"ecdsa p-384", func(t *testing.T) string { return writeKey(t, p384) }, attest.CodeKeyType},
		{"x25519", func(t *testing.T) string {
			return writeKey(t, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: xder}))
		}, attest.CodeKeyType},
		{"public key given as signing key", func(t *testing.T) string { return writeKey(t, pub) }, attest.CodeKeyInvalid},
		{"encrypted pem", func(t *testing.T) string {
			return writeKey(t, bytes.Replace(good, []byte("PRIVATE KEY"), []byte("ENCRYPTED PRIVATE KEY"), 2))
		}, attest.CodeKeyInvalid},
		{"two blocks", func(t *testing.T) string { return writeKey(t, append(append([]byte{}, good...), good...)) }, attest.CodeKeyInvalid},
		{"not pem", func(t *testing.T) string { return writeKey(t, []byte("not a key\n")) }, attest.CodeKeyInvalid},
		{"garbage der", func(t *testing.T) string {
			return writeKey(t, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{0x30, 0x03, 1, 2, 3}}))
		}, attest.CodeKeyInvalid},
		{"too large", func(t *testing.T) string { return writeKey(t, bytes.Repeat([]byte{'\n'}, 17<<10)) }, stablefile.CodeTooLarge},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			_, err := attest.LoadSigningKey(v.path(t))
			if refuse.CodeOf(err) != v.code {
				t.Fatalf("got %v, want %s", err, v.code)
			}
			assertNoSecret(t, good, err.Error())
		})
	}
}

// TestPublicKeyRefusals: the verifier's key reader refuses what is not one supported PKIX key.
func TestPublicKeyRefusals(t *testing.T) {
	priv, _ := keyPair(t, "ed25519")
	_, rsaPub := keyPair(t, "rsa")
	_, p384Pub := keyPair(t, "p384")
	dir := t.TempDir()
	vectors := []struct {
		name    string
		content []byte
		code    refuse.Code
	}{
		{"rsa", rsaPub, attest.CodeKeyType},
		{"p-384", p384Pub, attest.CodeKeyType},
		{"private key", priv, attest.CodeKeyInvalid},
		{"empty", nil, attest.CodeKeyInvalid},
		{"too large", bytes.Repeat([]byte{'\n'}, 17<<10), stablefile.CodeTooLarge},
	}
	for _, v := range vectors {
		p := filepath.Join(dir, v.name+".pem")
		if err := os.WriteFile(p, v.content, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := attest.LoadPublicKey(p); refuse.CodeOf(err) != v.code {
			t.Errorf("%s: got %v, want %s", v.name, err, v.code)
		} else {
			assertNoSecret(t, priv, err.Error())
		}
	}
	if _, err := attest.LoadPublicKey(dir); refuse.CodeOf(err) != stablefile.CodeNotRegular {
		t.Errorf("directory: got %v", err)
	}
	if _, err := attest.LoadPublicKey(filepath.Join(dir, "missing.pem")); refuse.CodeOf(err) != stablefile.CodeNotFound {
		t.Errorf("missing: got %v", err)
	}
}

// TestNoKeyMaterialLeaks attests and verifies, then scans every file of the store, every error
// and every rendering of the key for the private key's PEM, its base64 body and its raw bytes.
func TestNoKeyMaterialLeaks(t *testing.T) {
	for _, kind := range []string{"p256", "ed25519"} {
		fx := newFixture(t)
		k, pub, privPEM := signer(t, kind)
		var outputs []string
		a, err := attest.Attest(fx.st, fx.receipts[0].Digest, k, opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := attest.Verify(fx.st, fx.receipts[0].Digest, []*attest.PublicKey{pub})
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, k.String(), fmtAll(k), fmtAll(a), fmtAll(res))
		other, _, _ := signer(t, "p256")
		if _, err := attest.Verify(fx.st, fx.receipts[0].Digest, []*attest.PublicKey{other.Public()}); err != nil {
			outputs = append(outputs, err.Error())
		}
		for _, o := range outputs {
			assertNoSecret(t, privPEM, o)
		}
		err = filepath.WalkDir(fx.root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			assertNoSecret(t, privPEM, string(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// assertNoSecret fails if s holds the PEM, its base64 body, the DER or the raw private scalar
// or seed of the private key privPEM.
func assertNoSecret(t *testing.T, privPEM []byte, s string) {
	t.Helper()
	block, _ := pem.Decode(privPEM)
	if block == nil {
		return
	}
	secrets := [][]byte{privPEM, block.Bytes, bytes.TrimSpace(privPEM[bytes.IndexByte(privPEM, '\n')+1 : bytes.LastIndex(bytes.TrimSpace(privPEM), []byte("\n"))])}
	if raw := rawPrivate(t, block.Bytes); raw != nil {
		secrets = append(secrets, raw)
	}
	for _, sec := range secrets {
		if len(sec) >= 16 && bytes.Contains([]byte(s), sec) {
			t.Fatalf("private key material found in %q", truncate(s))
		}
		// Each 64-character line of the base64 body, too.
		for _, line := range bytes.Split(sec, []byte("\n")) {
			if len(line) >= 32 && bytes.Contains([]byte(s), line) {
				t.Fatalf("a line of the private key pem found in %q", truncate(s))
			}
		}
	}
}

// TestPKIXMatchesX509: the hand-written asn1 parsing and marshalling agree with crypto/x509
// byte for byte, for both key types, so key digests and hints are what any other tool computes.
func TestPKIXMatchesX509(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, priv := range []crypto.Signer{ec, ed} {
		want, err := x509.MarshalPKIXPublicKey(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		pemPub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: want})
		pk, err := attest.ParsePublicKey(pemPub)
		if err != nil {
			t.Fatalf("%T: %v", priv, err)
		}
		if sum := sha256.Sum256(want); pk.Hint != hex.EncodeToString(sum[:]) {
			t.Fatalf("%T: hint %s is not the sha-256 of x509's encoding", priv, pk.Hint)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		sk, err := attest.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err != nil {
			t.Fatalf("%T: %v", priv, err)
		}
		if sk.Public().Hint != pk.Hint {
			t.Fatalf("%T: the signing key's public half differs", priv)
		}
	}
}
