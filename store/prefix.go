package store

import (
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
)

// WithPrefix lists the objects whose hex digest starts with hexPrefix (lower-case hex), sorted,
// reading the blobs directory through its held descriptor. A short digest, as history prints
// one, names an object when exactly one matches; the caller decides what a prefix must look like.
func (s *Store) WithPrefix(hexPrefix string) ([]digest.Digest, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	names, err := listDir(s.dirs[dSHA256].fd, "blobs/sha256")
	if err != nil {
		return nil, err
	}
	var out []digest.Digest
	for _, n := range names {
		if strings.HasPrefix(n, hexPrefix) && len(n) == 64 {
			out = append(out, digest.NewDigestFromEncoded(digest.SHA256, n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}
