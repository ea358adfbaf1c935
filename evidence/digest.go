package evidence

import (
	"github.com/opencontainers/go-digest"
	"github.com/qinglong/ql3/internal/refuse"
)

// CodeDigestInvalid is raised for any digest that is not "sha256:" followed by 64 lower-case hex
// digits.
const CodeDigestInvalid refuse.Code = "DIGEST_INVALID"

const sha256Prefix = "sha256:"

// ParseDigest validates s as a sha256 digest in the one spelling ql3 accepts. It checks the bytes
// itself before handing s to go-digest, whose accessors panic on malformed input and which would
// also accept other algorithms.
func ParseDigest(s string) (digest.Digest, error) {
	if len(s) != len(sha256Prefix)+64 || s[:len(sha256Prefix)] != sha256Prefix {
		return "", refuse.New(CodeDigestInvalid, "digest is not sha256: followed by 64 hex digits (length %d)", len(s))
	}
	for i := len(sha256Prefix); i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", refuse.New(CodeDigestInvalid, "digest has a character that is not lower-case hex at offset %d", i)
		}
	}
	d := digest.Digest(s)
	if err := d.Validate(); err != nil {
		return "", refuse.Wrap(CodeDigestInvalid, err, "digest refused by go-digest")
	}
	return d, nil
}

// FromBytes is the sha256 digest of b.
func FromBytes(b []byte) digest.Digest { return digest.SHA256.FromBytes(b) }
