package attest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// Reason codes of key loading.
const (
	// CodeKeyInvalid: the key file is not exactly one PEM block of the expected type (PKCS#8
	// "PRIVATE KEY" for the signing key, PKIX "PUBLIC KEY" for a verification key), or the block
	// does not parse.
	CodeKeyInvalid refuse.Code = "ATTEST_KEY_INVALID"
	// CodeKeyType: the key parses but is neither ECDSA P-256 nor Ed25519 (RSA, P-384, X25519...).
	CodeKeyType refuse.Code = "ATTEST_KEY_TYPE"
)

// RoleSigningKey names the signing key in stable-file refusals.
const RoleSigningKey = "signing key"

// maxKeyFile bounds a key file: a PEM Ed25519 or P-256 key is under 300 bytes.
const maxKeyFile = 16 << 10

// SigningKey is a loaded private key. It never prints, marshals or reports its private part.
type SigningKey struct {
	signer crypto.Signer
	pub    *PublicKey
}

// String keeps the private key out of any %v.
func (k *SigningKey) String() string { return "signing key " + k.pub.Hint }

// GoString keeps the private key out of any %#v.
func (k *SigningKey) GoString() string { return k.String() }

// Public returns the key's public half.
func (k *SigningKey) Public() *PublicKey { return k.pub }

// PublicKey is a verification key. Digest is the SHA-256 of its PKIX DER form; Hint is the same
// hex, the value the bundle's publicKey.hint and the DSSE keyid carry.
type PublicKey struct {
	key    crypto.PublicKey
	Digest digest.Digest
	Hint   string
}

// Algorithm names the key's algorithm: "ecdsa-p256" or "ed25519".
func (p *PublicKey) Algorithm() string {
	if _, ok := p.key.(ed25519.PublicKey); ok {
		return "ed25519"
	}
	return "ecdsa-p256"
}

// LoadSigningKey reads the signing key at path as a private stable input (mode 0600 in a 0700
// directory, owned by the current user, one link, no symlink component: the stablefile rules and
// their codes) and parses it with ParseSigningKey. The file's bytes are zeroed before it returns.
func LoadSigningKey(path string) (*SigningKey, error) {
	f, err := stablefile.Read(path, RoleSigningKey, maxKeyFile)
	if err != nil {
		return nil, err
	}
	defer clear(f.Bytes)
	return ParseSigningKey(f.Bytes)
}

// ParseSigningKey parses one PKCS#8 PEM block holding an ECDSA P-256 or Ed25519 private key. Its
// refusals never carry a byte of the input or the parser's own message.
func ParseSigningKey(pemBytes []byte) (*SigningKey, error) {
	der, err := onePEM(pemBytes, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	defer clear(der)
	signer, err := parsePKCS8PrivateKey(der)
	var kind errKeyType
	if errors.As(err, &kind) {
		return nil, refuse.New(CodeKeyType, "signing key is %s, want ecdsa p-256 or ed25519", kind.kind)
	}
	if err != nil {
		return nil, refuse.New(CodeKeyInvalid, "signing key is not a parsable pkcs#8 private key").
			WithHint("write the key as unencrypted pkcs#8 pem, e.g. openssl genpkey -algorithm ed25519 -out key.pem")
	}
	pub, err := newPublicKey(signer.Public())
	if err != nil {
		return nil, err
	}
	return &SigningKey{signer: signer, pub: pub}, nil
}

// LoadPublicKey reads a PKIX PEM public key through the bounded public-file reader and parses it
// with ParsePublicKey.
func LoadPublicKey(path string) (*PublicKey, error) {
	b, err := readPublicFile(path, maxKeyFile)
	if err != nil {
		return nil, err
	}
	p, err := ParsePublicKey(b)
	if err != nil {
		return nil, refuse.Wrap(refuse.CodeOf(err), err, "public key %s", path)
	}
	return p, nil
}

// ParsePublicKey parses one PKIX "PUBLIC KEY" PEM block holding an ECDSA P-256 or Ed25519 key.
func ParsePublicKey(pemBytes []byte) (*PublicKey, error) {
	der, err := onePEM(pemBytes, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := parsePKIXPublicKey(der)
	var kind errKeyType
	if errors.As(err, &kind) {
		return nil, refuse.New(CodeKeyType, "public key is %s, want ecdsa p-256 or ed25519", kind.kind)
	}
	if err != nil {
		return nil, refuse.New(CodeKeyInvalid, "public key is not a parsable pkix public key")
	}
	return newPublicKey(k)
}

func newPublicKey(k crypto.PublicKey) (*PublicKey, error) {
	der, err := marshalPKIXPublicKey(k)
	if err != nil {
		return nil, refuse.New(CodeKeyInvalid, "public key does not marshal as pkix")
	}
	sum := sha256.Sum256(der)
	return &PublicKey{key: k, Digest: digest.NewDigestFromBytes(digest.SHA256, sum[:]), Hint: hex.EncodeToString(sum[:])}, nil
}

// onePEM returns the DER of the single PEM block of type want; only whitespace may surround it.
func onePEM(b []byte, want string) ([]byte, error) {
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, refuse.New(CodeKeyInvalid, "key file holds no pem block")
	}
	if block.Type != want {
		r := refuse.New(CodeKeyInvalid, "key pem block is %s, want %s", refuse.Ident(block.Type), want)
		if strings.Contains(block.Type, "ENCRYPTED") {
			r.WithHint("ql3 reads unencrypted pkcs#8 keys only; keep the file private instead (0600 in a 0700 directory)")
		}
		return nil, r
	}
	if len(block.Headers) != 0 {
		return nil, refuse.New(CodeKeyInvalid, "key pem block has headers")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, refuse.New(CodeKeyInvalid, "key file holds more than one pem block")
	}
	return block.Bytes, nil
}
