// Package order puts a store's published root records (preflight reports, apply intents,
// receipts, live-audit reports) in the order they were published, from what the records
// themselves prove, never from a time they claim (docs/issues.md#issue-22). A record names the records it was
// made from: a receipt its preflight and intent, an intent its preflight, a live audit its
// receipt, a preflight the receipt its plan compared with. A record's digest covers those names,
// so the named record existed first. That is a partial order; Publication extends it to a total
// one and is the one place that does, so the deployment log (docs/rationale.md#13-the-deployment-log), whose leaves are in
// commit order, can replace its source without touching a caller.
package order

import (
	"container/heap"
	"time"

	"github.com/opencontainers/go-digest"
)

// Node is one published record as the order sees it.
type Node struct {
	Digest digest.Digest
	// After names the records this one was made from, which were therefore published before it.
	// A name that is not among the nodes is ignored (the record is absent from this store).
	After []digest.Digest
	// Claimed is the record's own time (finishedAt, createdAt). It only breaks ties between
	// records the evidence leaves unordered (two ceremonies of unrelated releases, or two
	// preflights run before either apply), so it never reorders records the evidence orders.
	Claimed time.Time
}

// Publication returns the indexes of nodes in publication order, oldest first: every record
// after each record it names; among records the names leave unordered, the earlier claimed time
// first, then the smaller digest, so the result depends on nothing but the nodes.
func Publication(nodes []Node) []int {
	idx := make(map[digest.Digest]int, len(nodes))
	for i, n := range nodes {
		if _, dup := idx[n.Digest]; !dup {
			idx[n.Digest] = i
		}
	}
	waiting := make([]int, len(nodes))
	next := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, a := range n.After {
			if j, ok := idx[a]; ok && j != i {
				waiting[i]++
				next[j] = append(next[j], i)
			}
		}
	}
	h := &ready{nodes: nodes}
	for i := range nodes {
		if waiting[i] == 0 {
			h.is = append(h.is, i)
		}
	}
	heap.Init(h)
	out := make([]int, 0, len(nodes))
	done := make([]bool, len(nodes))
	for len(out) < len(nodes) {
		if h.Len() == 0 {
			// A cycle cannot be built from digests (each name covers the named record's bytes);
			// if a damaged store presents one anyway, its members follow in tie-break order.
			for i := range nodes {
				if !done[i] && waiting[i] > 0 {
					waiting[i] = 0
					heap.Push(h, i)
				}
			}
		}
		i := heap.Pop(h).(int)
		if done[i] {
			continue
		}
		done[i] = true
		out = append(out, i)
		for _, j := range next[i] {
			if waiting[j]--; waiting[j] == 0 && !done[j] {
				heap.Push(h, j)
			}
		}
	}
	return out
}

type ready struct {
	nodes []Node
	is    []int
}

func (r *ready) Len() int { return len(r.is) }
func (r *ready) Less(a, b int) bool {
	x, y := &r.nodes[r.is[a]], &r.nodes[r.is[b]]
	if !x.Claimed.Equal(y.Claimed) {
		return x.Claimed.Before(y.Claimed)
	}
	return x.Digest < y.Digest
}
func (r *ready) Swap(a, b int) { r.is[a], r.is[b] = r.is[b], r.is[a] }
func (r *ready) Push(x any)    { r.is = append(r.is, x.(int)) }
func (r *ready) Pop() any {
	i := r.is[len(r.is)-1]
	r.is = r.is[:len(r.is)-1]
	return i
}
