package plan

import (
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/order"
)

// CodeLineageInvalid: a published receipt, the preflight report it names or that preflight's
// plan does not decode, so which receipt came first cannot be derived.
const CodeLineageInvalid refuse.Code = "LINEAGE_RECORD_INVALID"

// Key names an object for supersession: kind, namespace and name. The API group is left out on
// purpose: an object the two releases name by the same kind and name in another group version
// is still shared, and over-sharing can only call a receipt superseded, never hide it.
type Key struct{ Kind, Namespace, Name string }

// shares reports whether a and b can be the same object. An empty namespace on one side (an
// object whose manifest names none, so it lands in the context's namespace, which a preflight
// does not read) matches any namespace.
func (a Key) shares(b Key) bool {
	return a.Kind == b.Kind && a.Name == b.Name && (a.Namespace == b.Namespace || a.Namespace == "" || b.Namespace == "")
}

// KeysOfManifest are the keys of a release's manifest objects (namespace as written).
func KeysOfManifest(objs []manifest.Object) []Key {
	out := make([]Key, len(objs))
	for i, o := range objs {
		out[i] = Key{o.Kind, o.Namespace, o.Name}
	}
	return out
}

// KeysOfReceipt are the keys of the objects a receipt proved (namespace as the cluster read it).
func KeysOfReceipt(rc *evidence.Receipt) []Key {
	out := make([]Key, len(rc.Objects))
	for i, o := range rc.Objects {
		out[i] = Key{o.Kind, o.Namespace, o.Name}
	}
	return out
}

// keySet indexes keys by kind and name, to the namespaces they carry.
type keySet map[[2]string][]string

func setOf(keys []Key) keySet {
	s := make(keySet, len(keys))
	for _, k := range keys {
		s[[2]string{k.Kind, k.Name}] = append(s[[2]string{k.Kind, k.Name}], k.Namespace)
	}
	return s
}

// sharesAny reports whether some key of keys can be an object of s.
func (s keySet) sharesAny(keys []Key) bool {
	for _, k := range keys {
		for _, ns := range s[[2]string{k.Kind, k.Name}] {
			if (Key{k.Kind, ns, k.Name}).shares(k) {
				return true
			}
		}
	}
	return false
}

// Published is one published receipt of a lineage.
type Published struct {
	Desc    evidence.Descriptor
	Receipt *evidence.Receipt
	// Previous is the receipt its preflight's plan compared with ("" when it stored no plan): it
	// was published before this one.
	Previous digest.Digest
	keys     []Key
	set      keySet
}

// Lineage is a store's published receipts in publication order (order.Publication over what the
// receipts prove: a receipt comes after the receipt its preflight's plan names). It answers which
// receipts are current for a set of objects, and which superseded which: a receipt supersedes an
// earlier one of the same cluster only when they share an object (Key). Two releases of disjoint
// objects on one cluster never supersede each other.
type Lineage struct {
	Receipts []Published // oldest first
	at       map[digest.Digest]int
}

// LoadLineage reads the receipts rcs (the receipts index's descriptors), the preflight each names
// and that preflight's plan, from src (which re-hashes every object), and orders them.
func LoadLineage(src Source, rcs []evidence.Descriptor) (*Lineage, error) {
	all := make([]Published, 0, len(rcs))
	nodes := make([]order.Node, 0, len(rcs))
	for _, d := range rcs {
		b, err := src.GetDescriptor(d)
		if err != nil {
			return nil, err
		}
		rc := new(evidence.Receipt)
		if err := evidence.DecodeRecord(evidence.MediaTypeReceipt, b, rc); err != nil {
			return nil, refuse.Wrap(CodeLineageInvalid, err, "receipt %s", d.Digest)
		}
		prev, err := PreviousOf(src, rc.Preflight)
		if err != nil {
			return nil, refuse.Wrap(CodeLineageInvalid, err, "receipt %s", d.Digest)
		}
		// The claimed time only breaks ties the evidence leaves open; an unreadable one sorts first.
		at, _ := time.Parse(time.RFC3339Nano, rc.FinishedAt)
		all = append(all, Published{Desc: d, Receipt: rc, Previous: prev, keys: KeysOfReceipt(rc)})
		all[len(all)-1].set = setOf(all[len(all)-1].keys)
		n := order.Node{Digest: d.Digest, Claimed: at}
		if prev != "" {
			n.After = []digest.Digest{prev}
		}
		nodes = append(nodes, n)
	}
	l := &Lineage{Receipts: make([]Published, 0, len(all)), at: make(map[digest.Digest]int, len(all))}
	for _, i := range order.Publication(nodes) {
		l.at[all[i].Desc.Digest] = len(l.Receipts)
		l.Receipts = append(l.Receipts, all[i])
	}
	return l, nil
}

// PreviousOf returns the receipt the plan of preflight pd names ("" when it stored none).
func PreviousOf(src Source, pd evidence.Descriptor) (digest.Digest, error) {
	if pd.MediaType != evidence.MediaTypePreflight {
		return "", refuse.New(CodeLineageInvalid, "names preflight %s with media type %q", pd.Digest, pd.MediaType)
	}
	b, err := src.GetDescriptor(pd)
	if err != nil {
		return "", err
	}
	var p evidence.Preflight
	if err := evidence.DecodeRecord(evidence.MediaTypePreflight, b, &p); err != nil {
		return "", refuse.Wrap(CodeLineageInvalid, err, "preflight %s", pd.Digest)
	}
	if p.Plan == nil {
		return "", nil
	}
	if p.Plan.MediaType != evidence.MediaTypePlan {
		return "", refuse.New(CodeLineageInvalid, "preflight %s names plan %s with media type %q", pd.Digest, p.Plan.Digest, p.Plan.MediaType)
	}
	b, err = src.GetDescriptor(*p.Plan)
	if err != nil {
		return "", err
	}
	var pl evidence.Plan
	if err := evidence.DecodeRecord(evidence.MediaTypePlan, b, &pl); err != nil {
		return "", refuse.Wrap(CodeLineageInvalid, err, "plan %s", p.Plan.Digest)
	}
	return pl.Previous.Digest, nil
}

// Latest is the receipt a plan compares with: the last published receipt of cluster that shares
// an object with keys.
func (l *Lineage) Latest(cluster string, keys []Key) (Published, bool) {
	for i := len(l.Receipts) - 1; i >= 0; i-- {
		r := l.Receipts[i]
		if r.Receipt.ClusterUID == cluster && r.set.sharesAny(keys) {
			return r, true
		}
	}
	return Published{}, false
}

// Current returns the receipts of cluster that are current for keys: for each key, the last
// published receipt holding it; each receipt once, oldest first. A receipt an object of keys has
// moved away from is not current for that object.
func (l *Lineage) Current(cluster string, keys []Key) []Published {
	pick := map[int]bool{}
	for _, k := range keys {
		for i := len(l.Receipts) - 1; i >= 0; i-- {
			r := l.Receipts[i]
			if r.Receipt.ClusterUID == cluster && r.set.sharesAny([]Key{k}) {
				pick[i] = true
				break
			}
		}
	}
	var out []Published
	for i, r := range l.Receipts {
		if pick[i] {
			out = append(out, r)
		}
	}
	return out
}

// SupersededBy returns the receipts published after d, of its cluster, that share an object
// with it, oldest first; none when d is current for all its objects (or not in the lineage).
func (l *Lineage) SupersededBy(d digest.Digest) []Published {
	i, ok := l.at[d]
	if !ok {
		return nil
	}
	me := l.Receipts[i]
	var out []Published
	for _, r := range l.Receipts[i+1:] {
		if r.Receipt.ClusterUID == me.Receipt.ClusterUID && r.set.sharesAny(me.keys) {
			out = append(out, r)
		}
	}
	return out
}

// Supersedes returns the receipts published before d, of its cluster, that share an object with
// it, oldest first.
func (l *Lineage) Supersedes(d digest.Digest) []Published {
	i, ok := l.at[d]
	if !ok {
		return nil
	}
	me := l.Receipts[i]
	var out []Published
	for _, r := range l.Receipts[:i] {
		if r.Receipt.ClusterUID == me.Receipt.ClusterUID && r.set.sharesAny(me.keys) {
			out = append(out, r)
		}
	}
	return out
}
