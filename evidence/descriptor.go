package evidence

import (
	"bytes"

	"github.com/opencontainers/go-digest"
)

// Descriptor refers to a stored object, OCI style.
type Descriptor struct {
	MediaType string        `json:"mediaType"`
	Digest    digest.Digest `json:"digest"`
	Size      int64         `json:"size"`
}

// DecodeCanonicalDescriptor decodes b, which must be exactly the canonical form of a Descriptor,
// as DecodeCanonical does. A store's index holds thousands of these, so the one spelling a
// canonical descriptor of printable ASCII can have, {"digest":"sha256:…","mediaType":"…","size":N},
// is matched byte by byte first; anything else, including every refusal, goes through
// DecodeCanonical, which gives the same value for every input the match accepts
// (TestDecodeCanonicalDescriptor holds the two to it).
func DecodeCanonicalDescriptor(b []byte) (Descriptor, error) {
	if d, ok := matchCanonicalDescriptor(b); ok {
		return d, nil
	}
	var d Descriptor
	if err := DecodeCanonical(b, &d); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

var (
	descDigestPrefix = []byte(`{"digest":"`)
	descMediaType    = []byte(`","mediaType":"`)
	descSize         = []byte(`","size":`)
)

func matchCanonicalDescriptor(b []byte) (Descriptor, bool) {
	rest, ok := bytes.CutPrefix(b, descDigestPrefix)
	if !ok || len(rest) < len(sha256Prefix)+64 {
		return Descriptor{}, false
	}
	dg, err := ParseDigest(string(rest[:len(sha256Prefix)+64]))
	if err != nil {
		return Descriptor{}, false
	}
	if rest, ok = bytes.CutPrefix(rest[len(sha256Prefix)+64:], descMediaType); !ok {
		return Descriptor{}, false
	}
	// A media type of printable ASCII other than '"' and '\\' is its own canonical string.
	i := 0
	for i < len(rest) && rest[i] != '"' {
		if c := rest[i]; c < 0x20 || c > 0x7e || c == '\\' {
			return Descriptor{}, false
		}
		i++
	}
	if i == 0 {
		return Descriptor{}, false // an empty media type is refused by the full decoder
	}
	mt := string(rest[:i])
	if rest, ok = bytes.CutPrefix(rest[i:], descSize); !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return Descriptor{}, false
	}
	digits := rest[:len(rest)-1]
	// The canonical spelling of a size: 0, or a digit 1-9 then digits, at most 16 of them (2^53
	// has 16 digits; the bound itself is checked below).
	if len(digits) > 16 || (digits[0] == '0' && len(digits) > 1) {
		return Descriptor{}, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return Descriptor{}, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > MaxSafeInteger {
		return Descriptor{}, false
	}
	return Descriptor{MediaType: mt, Digest: dg, Size: n}, true
}
