package order_test

import (
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/verdict/order"
)

func d(s string) digest.Digest { return digest.FromString(s) }

// The names a record holds order it after what it names, whatever time it claims; claimed times
// order only what the names leave open; a name of an absent record is ignored; a cycle (which
// digests cannot build) still yields every node once.
func TestPublication(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nodes := []order.Node{
		{Digest: d("receipt 3.4.2"), After: []digest.Digest{d("preflight 3.4.2")}, Claimed: t0.Add(3 * time.Minute)},
		{Digest: d("receipt 3.4.1"), After: []digest.Digest{d("preflight 3.4.1")}, Claimed: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Digest: d("preflight 3.4.2"), After: []digest.Digest{d("receipt 3.4.1"), d("absent")}, Claimed: t0.Add(2 * time.Minute)},
		{Digest: d("preflight 3.4.1"), Claimed: t0},
		{Digest: d("other team"), Claimed: t0.Add(time.Minute)},
	}
	got := order.Publication(nodes)
	want := []int{3, 4, 1, 2, 0} // 3.4.1's preflight, the other team, 3.4.1 (claims 2099), 3.4.2's preflight, 3.4.2
	if len(got) != len(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	cyc := order.Publication([]order.Node{{Digest: d("a"), After: []digest.Digest{d("b")}}, {Digest: d("b"), After: []digest.Digest{d("a")}}})
	if len(cyc) != 2 || cyc[0] == cyc[1] {
		t.Fatalf("cycle: %v", cyc)
	}
}
