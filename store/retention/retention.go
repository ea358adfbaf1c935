// Package retention is the policy of `ql3 store gc` (docs/store.md, "Retention"): which of a
// store's roots are kept and which dropped. It reads only; the store drops what it names, with
// tombstones in the deployment log (store.GC).
//
// The unit is the receipt. A receipt is kept when it is current (the last receipt of its
// cluster for at least one of the objects it proved, plan.Lineage's supersession), or among the
// last KeepLast receipts of its cluster in publication order, or finished on or after
// KeepSince. Every other root follows the receipts: an apply intent follows its receipt (one
// without a receipt, an unfinished apply, is always kept); a live audit follows the receipt it
// audited; a preflight report is dropped only when receipts (or intents) name it and all of
// them are dropped, and a preflight no apply used is kept unless KeepSince is given and it
// finished before it. Attestations follow their subject (in store.GC).
package retention

import (
	"cmp"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

// CodePolicy: the retention policy is not one gc can apply (no rule given, a negative count).
const CodePolicy refuse.Code = "GC_POLICY"

// Policy is what gc keeps besides the current receipts.
type Policy struct {
	// KeepLast is the number of most recent receipts kept per cluster (0: the current ones only).
	KeepLast int
	// KeepSince keeps every receipt (and preflight) that finished at or after it; zero: none.
	KeepSince time.Time
	// LastSet and SinceSet say which rules were given: at least one must be.
	LastSet, SinceSet bool
}

// Check refuses a policy with no rule or a negative count.
func (p Policy) Check() error {
	if !p.LastSet && !p.SinceSet {
		return refuse.New(CodePolicy, "no retention rule: give --keep-last N, --keep-since DATE or both")
	}
	if p.KeepLast < 0 {
		return refuse.New(CodePolicy, "--keep-last %d: want 0 or more", p.KeepLast)
	}
	return nil
}

// Why a receipt is kept.
const (
	ReasonCurrent = "current"
	ReasonLast    = "last"
	ReasonSince   = "since"
)

// Decision is the policy applied to a store's entries.
type Decision struct {
	Drop []store.GCRoot
	// Kept is why each kept receipt is kept (by receipt record digest).
	Kept map[digest.Digest]string
}

// Decide applies p to the entries of v (store.GCView), reading the receipts' preflights and plans
// from src to order them (plan.LoadLineage).
func Decide(src plan.Source, v store.GCView, p Policy) (*Decision, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	rcs := v.Entries[evidence.IndexReceipts]
	descs := make([]evidence.Descriptor, len(rcs))
	keyOf := map[digest.Digest]digest.Digest{} // receipt record -> its index key
	for i, e := range rcs {
		descs[i] = e.Descriptor
		keyOf[e.Descriptor.Digest] = e.Key
	}
	lin, err := plan.LoadLineage(src, descs)
	if err != nil {
		return nil, err
	}
	dec := &Decision{Kept: map[digest.Digest]string{}}
	// Newest first per cluster: a receipt is current when one of its objects is not shared by a
	// later receipt of its cluster.
	type later struct {
		byName  map[[2]string]map[string]bool // kind, name -> namespaces seen later
		anyNS   map[[2]string]bool            // a later receipt holds the object with no namespace
		counted int
	}
	seen := map[string]*later{}
	dropped := map[digest.Digest]bool{} // receipt records dropped
	for i := len(lin.Receipts) - 1; i >= 0; i-- {
		r := lin.Receipts[i]
		c := r.Receipt.ClusterUID
		st := seen[c]
		if st == nil {
			st = &later{byName: map[[2]string]map[string]bool{}, anyNS: map[[2]string]bool{}}
			seen[c] = st
		}
		keys := plan.KeysOfReceipt(r.Receipt)
		current := false
		for _, k := range keys {
			kn := [2]string{k.Kind, k.Name}
			ns := st.byName[kn]
			shared := len(ns) > 0 && (k.Namespace == "" || st.anyNS[kn] || ns[k.Namespace])
			if !shared {
				current = true
			}
		}
		for _, k := range keys {
			kn := [2]string{k.Kind, k.Name}
			if st.byName[kn] == nil {
				st.byName[kn] = map[string]bool{}
			}
			st.byName[kn][k.Namespace] = true
			if k.Namespace == "" {
				st.anyNS[kn] = true
			}
		}
		st.counted++
		switch {
		case current:
			dec.Kept[r.Desc.Digest] = ReasonCurrent
		case p.LastSet && st.counted <= p.KeepLast:
			dec.Kept[r.Desc.Digest] = ReasonLast
		case p.SinceSet && finishedSince(r.Receipt.FinishedAt, p.KeepSince):
			dec.Kept[r.Desc.Digest] = ReasonSince
		default:
			dropped[r.Desc.Digest] = true
			dec.Drop = append(dec.Drop, store.GCRoot{Kind: deploylog.KindReceipt, Key: keyOf[r.Desc.Digest], Record: r.Desc.Digest})
		}
	}
	// Intents follow their receipt (same key); one without a receipt is an unfinished apply.
	droppedKey := map[digest.Digest]bool{}
	for _, r := range dec.Drop {
		droppedKey[r.Key] = true
	}
	// Preflights: named by which receipts and intents, and whether any of those is kept.
	namedBy := map[digest.Digest]int{}
	namedKept := map[digest.Digest]bool{}
	for _, r := range lin.Receipts {
		pd := r.Receipt.Preflight.Digest
		namedBy[pd]++
		if !dropped[r.Desc.Digest] {
			namedKept[pd] = true
		}
	}
	for _, e := range v.Entries[evidence.IndexIntents] {
		b, err := src.GetDescriptor(e.Descriptor)
		if err != nil {
			return nil, err
		}
		var in evidence.Intent
		if err := evidence.DecodeRecord(evidence.MediaTypeIntent, b, &in); err != nil {
			return nil, refuse.Wrap(plan.CodeLineageInvalid, err, "intent %s", e.Descriptor.Digest)
		}
		namedBy[in.Preflight.Digest]++
		if droppedKey[e.Key] {
			dec.Drop = append(dec.Drop, store.GCRoot{Kind: deploylog.KindIntent, Key: e.Key, Record: e.Descriptor.Digest})
		} else {
			namedKept[in.Preflight.Digest] = true
		}
	}
	for _, e := range v.Entries[evidence.IndexLiveAudits] {
		b, err := src.GetDescriptor(e.Descriptor)
		if err != nil {
			return nil, err
		}
		var la evidence.LiveAudit
		if err := evidence.DecodeRecord(evidence.MediaTypeLiveAudit, b, &la); err != nil {
			return nil, refuse.Wrap(plan.CodeLineageInvalid, err, "live audit %s", e.Descriptor.Digest)
		}
		if dropped[la.Receipt.Digest] {
			dec.Drop = append(dec.Drop, store.GCRoot{Kind: deploylog.KindLiveAudit, Key: e.Key, Record: e.Descriptor.Digest})
		}
	}
	for _, e := range v.Entries[evidence.IndexPreflights] {
		d := e.Descriptor.Digest
		drop := false
		switch {
		case namedBy[d] > 0:
			drop = !namedKept[d]
		case p.SinceSet:
			b, err := src.GetDescriptor(e.Descriptor)
			if err != nil {
				return nil, err
			}
			var pf evidence.Preflight
			if err := evidence.DecodeRecord(evidence.MediaTypePreflight, b, &pf); err != nil {
				return nil, refuse.Wrap(plan.CodeLineageInvalid, err, "preflight %s", d)
			}
			drop = !finishedSince(pf.FinishedAt, p.KeepSince)
		}
		if drop {
			dec.Drop = append(dec.Drop, store.GCRoot{Kind: deploylog.KindPreflight, Key: e.Key, Record: d})
		}
	}
	slices.SortFunc(dec.Drop, func(a, b store.GCRoot) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
	})
	return dec, nil
}

// finishedSince: a record time at or after t; an unreadable time is not (it sorts first, as
// plan.Lineage sorts it).
func finishedSince(at string, t time.Time) bool {
	x, err := time.Parse(time.RFC3339Nano, at)
	return err == nil && !x.Before(t)
}

// ParseDate reads --keep-since: an RFC 3339 time, or a date YYYY-MM-DD (its midnight, UTC).
func ParseDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, refuse.New(CodePolicy, "--keep-since %s: want an RFC 3339 time or a date YYYY-MM-DD", refuse.Ident(s))
}

// GC applies p to st: store.GC with this package's decision as the policy.
func GC(st *store.Store, p Policy, o store.GCOptions) (*store.GCReport, *Decision, error) {
	if err := p.Check(); err != nil {
		return nil, nil, err
	}
	var dec *Decision
	rep, err := st.GC(func(v store.GCView) ([]store.GCRoot, error) {
		var err error
		if dec, err = Decide(st, v, p); err != nil {
			return nil, err
		}
		return dec.Drop, nil
	}, o)
	return rep, dec, err
}
