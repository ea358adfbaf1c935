package evidence

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/opencontainers/go-digest"
	"github.com/qinglong/ql3/refuse"
)

// CodeDigestInvalid is raised for any digest that is not "sha256:" followed by 64 lower-case hex
// digits.
const CodeDigestInvalid refuse.Code = "DIGEST_INVALID"

const sha256Prefix = "sha256:"

// ParseDigest validates s as a sha256 digest in the one spelling ql3 accepts. It checks the bytes
// itself: go-digest's accessors panic on malformed input and it would also accept other
// algorithms. Its own Validate (a regular expression, a third of the cost of reading a store's
// index) is not run: every string accepted here is one it accepts, which TestParseDigestGoDigest
// holds it to.
func ParseDigest(s string) (digest.Digest, error) {
	if len(s) != len(sha256Prefix)+64 || s[:len(sha256Prefix)] != sha256Prefix {
		return "", refuse.New(CodeDigestInvalid, "digest is not sha256: followed by 64 hex digits (length %d)", len(s))
	}
	for i := len(sha256Prefix); i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", refuse.New(CodeDigestInvalid, "digest has a character that is not lower-case hex at offset %d", i)
		}
	}
	return digest.Digest(s), nil
}

// FromBytes is the sha256 digest of b. It spells the digest itself: go-digest formats it through
// fmt, which costs a store listing more than the hash of a small record.
func FromBytes(b []byte) digest.Digest {
	sum := sha256.Sum256(b)
	return digest.Digest(sha256Prefix + hex.EncodeToString(sum[:]))
}
