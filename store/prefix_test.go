package store

import (
	"testing"

	"github.com/qinglong/ql3/evidence"
)

// TestWithPrefix: a prefix lists exactly the objects whose digest starts with it, sorted.
func TestWithPrefix(t *testing.T) {
	s := newStore(t)
	a, err := s.PutBlob(evidence.MediaTypeOctets, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.PutBlob(evidence.MediaTypeOctets, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.WithPrefix(a.Digest.Encoded()[:12])
	if err != nil || len(got) != 1 || got[0] != a.Digest {
		t.Fatalf("prefix of a: %v %v", got, err)
	}
	all, err := s.WithPrefix("")
	if err != nil || len(all) < 2 || !(all[0] < all[len(all)-1]) {
		t.Fatalf("all: %v %v", all, err)
	}
	if got, err := s.WithPrefix(b.Digest.Encoded() + "0"); err != nil || len(got) != 0 {
		t.Fatalf("too long a prefix: %v %v", got, err)
	}
}
