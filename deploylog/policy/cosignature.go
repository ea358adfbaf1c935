package policy

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/refuse"
)

// Signature types of C2SP signed-note verifier keys (the first byte of the key material).
const (
	algEd25519        = 0x01 // a note signature (tlog-checkpoint: the log's key)
	algCosignatureV1  = 0x04 // an Ed25519 tlog-cosignature/v1 (a witness's key)
	algCosignatureMLD = 0x06 // an ML-DSA-44 tlog-cosignature (not supported)
)

// cosignatureSize is the timestamped_signature of an Ed25519 cosignature: u64 time || signature.
const cosignatureSize = 8 + ed25519.SignatureSize

// CosignatureVerifier verifies Ed25519 tlog-cosignature/v1 signatures: a note.Verifier whose
// KeyHash is the spec's key ID, SHA-256(name || "\n" || 0x04 || key)[:4], so that note.Open
// and Evaluate match a signature line to it by name and key ID alone. x/mod's note knows only
// signature type 0x01, which is why this type exists.
type CosignatureVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

var _ note.Verifier = (*CosignatureVerifier)(nil)

// Name is the cosigner's name, as on its signature lines.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash is the cosignature key ID.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// Verify reports whether sig (a signature line's bytes after the key ID) is a valid
// timestamped cosignature of msg, the checkpoint's note text.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != cosignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	return ed25519.Verify(v.key, cosignedMessage(t, msg), sig[8:])
}

// String is the verifier key (vkey) text: name+keyid+base64(0x04 || key).
func (v *CosignatureVerifier) String() string {
	return fmt.Sprintf("%s+%08x+%s", v.name, v.hash,
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, v.key...)))
}

// cosignedMessage is the Ed25519 cosignature/v1 signed message: a header line, a timestamp
// line, then the checkpoint's whole note text.
func cosignedMessage(t uint64, text []byte) []byte {
	m := make([]byte, 0, 40+len(text))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, t, 10)
	m = append(m, '\n')
	return append(m, text...)
}

// CosignatureTimestamp is the time a cosignature line claims to be signed at (POSIX seconds),
// read from its timestamped_signature; it says nothing about whether the signature verifies.
func CosignatureTimestamp(sig note.Signature) (int64, bool) {
	b, err := base64.StdEncoding.DecodeString(sig.Base64)
	if err != nil || len(b) != 4+cosignatureSize {
		return 0, false
	}
	t := binary.BigEndian.Uint64(b[4:])
	if t > math.MaxInt64 {
		return 0, false
	}
	return int64(t), true
}

// NewCosignatureVerifier parses a witness's verifier key: a C2SP vkey of signature type 0x04
// (Ed25519 cosignature/v1) whose key ID is the one the spec derives from its name and key.
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, hash, alg, key, err := splitVKey(vkey)
	if err != nil {
		return nil, err
	}
	switch {
	case alg == algEd25519:
		return nil, refuse.New(CodeKey, "key %s is a note signing key (type 0x01), not a witness cosignature key (type 0x04)", refuse.Ident(name))
	case alg == algCosignatureMLD:
		return nil, refuse.New(CodeKey, "key %s is an ML-DSA-44 cosignature key (type 0x06): not supported", refuse.Ident(name))
	case alg != algCosignatureV1:
		return nil, refuse.New(CodeKey, "key %s has signature type 0x%02x, not a witness cosignature key (type 0x04)", refuse.Ident(name), alg)
	case len(key) != ed25519.PublicKeySize:
		return nil, refuse.New(CodeKey, "key %s has %d bytes of Ed25519 key, want %d", refuse.Ident(name), len(key), ed25519.PublicKeySize)
	}
	v := &CosignatureVerifier{name: name, key: ed25519.PublicKey(key), hash: keyID(name, algCosignatureV1, key)}
	if v.hash != hash {
		return nil, refuse.New(CodeKey, "key %s states key ID %08x, its name and key give %08x", refuse.Ident(name), hash, v.hash)
	}
	return v, nil
}

// NewCosignatureVerifierFromKey returns the cosignature verifier of an Ed25519 public key under
// name (a witness's identity; litewitness's -name).
func NewCosignatureVerifierFromKey(name string, pub ed25519.PublicKey) (*CosignatureVerifier, error) {
	if !validName(name) {
		return nil, refuse.New(CodeKey, "witness name %s is empty or holds a space or a plus", refuse.Ident(name))
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, refuse.New(CodeKey, "an Ed25519 public key has %d bytes, not %d", len(pub), ed25519.PublicKeySize)
	}
	key := append(ed25519.PublicKey(nil), pub...)
	return &CosignatureVerifier{name: name, key: key, hash: keyID(name, algCosignatureV1, key)}, nil
}

// newLogVerifier parses a log's verifier key: a note key of type 0x01 (Ed25519), which x/mod's
// note checks (key ID included).
func newLogVerifier(vkey string) (note.Verifier, []byte, error) {
	name, _, alg, key, err := splitVKey(vkey)
	if err != nil {
		return nil, nil, err
	}
	if alg != algEd25519 {
		return nil, nil, refuse.New(CodeKey, "log key %s has signature type 0x%02x, not a checkpoint signing key (type 0x01)", refuse.Ident(name), alg)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, nil, refuse.New(CodeKey, "log key %s does not parse as a note verifier key (its key ID or length is wrong)", refuse.Ident(name))
	}
	return v, key, nil
}

// splitVKey splits name+hex8+base64(alg || key) without judging the type.
func splitVKey(vkey string) (name string, hash uint32, alg byte, key []byte, err error) {
	bad := func(why string) (string, uint32, byte, []byte, error) {
		return "", 0, 0, nil, refuse.New(CodeKey, "verifier key %s", why)
	}
	name, rest, ok := strings.Cut(vkey, "+")
	if !ok || !validName(name) {
		return bad("has no valid name before its first +")
	}
	h, b64, ok := strings.Cut(rest, "+")
	if !ok || len(h) != 8 || strings.Trim(h, "0123456789abcdef") != "" {
		return bad("has no 8 lower-case hex digit key ID")
	}
	h64, _ := strconv.ParseUint(h, 16, 32)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < 2 || base64.StdEncoding.EncodeToString(raw) != b64 {
		return bad("key material is not canonical base64 of a type byte and a key")
	}
	return name, uint32(h64), raw[0], raw[1:], nil
}

// keyID is the signed-note key ID: SHA-256(name || "\n" || alg || key)[:4].
func keyID(name string, alg byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{alg})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// validName is the signed-note key name rule: non-empty UTF-8 without spaces or pluses.
func validName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}
