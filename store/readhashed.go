package store

import (
	"crypto/sha256"
	"encoding/hex"
)

// sumIs reports whether sum is the SHA-256 whose lowercase hex is encoded, without allocating.
func sumIs(sum [sha256.Size]byte, encoded string) bool {
	if len(encoded) != 2*sha256.Size {
		return false
	}
	var want [sha256.Size]byte
	if _, err := hex.Decode(want[:], []byte(encoded)); err != nil {
		return false
	}
	return want == sum
}
