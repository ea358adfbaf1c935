package deploylog

import (
	"bytes"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Kind is what a leaf records: the publication of one index entry, or a retention tombstone.
type Kind string

// The leaf kinds. Each publication kind is the index kind it was published under.
const (
	KindPreflight   Kind = "preflight"   // index/preflights/<key>
	KindIntent      Kind = "intent"      // index/intents/<key>
	KindReceipt     Kind = "receipt"     // index/receipts/<key>
	KindLiveAudit   Kind = "live-audit"  // index/live-audits/<key>
	KindAttestation Kind = "attestation" // index/attestations/<key>/<bundle>
	KindTombstone   Kind = "tombstone"   // a root dropped by retention; Dropped names its kind
)

// IndexKind maps a publication kind to the store's index kind, and back.
var indexKinds = map[Kind]string{
	KindPreflight:   evidence.IndexPreflights,
	KindIntent:      evidence.IndexIntents,
	KindReceipt:     evidence.IndexReceipts,
	KindLiveAudit:   evidence.IndexLiveAudits,
	KindAttestation: evidence.IndexAttestations,
}

// IndexKind is the store index kind a publication kind is published under ("" for a tombstone or
// an unknown kind).
func (k Kind) IndexKind() string { return indexKinds[k] }

// KindOfIndex is the leaf kind of the store index kind idx.
func KindOfIndex(idx string) (Kind, bool) {
	for k, v := range indexKinds {
		if v == idx {
			return k, true
		}
	}
	return "", false
}

// LeafSchema is the first line of every leaf.
const LeafSchema = "qinglong/ql3-log-leaf@v1"

// MaxLeafSize bounds a leaf's bytes; a leaf is under 400 bytes.
const MaxLeafSize = 1024

// Leaf is one publication: what kind of index entry, under which key, naming which record.
type Leaf struct {
	Kind Kind
	// Key is the index key: the apply command digest (intent, receipt), the preflight digest,
	// the live-audit key, or the attested subject.
	Key digest.Digest
	// Bundle is the second level of an attestation's index key (the signing bundle's digest);
	// empty for every other kind.
	Bundle digest.Digest
	// Record is the digest of the record the index entry names (an attestation's statement).
	Record digest.Digest
	// Dropped is, for a tombstone, the kind of the publication retention dropped; Key, Bundle
	// and Record are that publication's.
	Dropped Kind
}

// Marshal returns the leaf's canonical bytes (docs/log.md, "Leaf"):
//
//	qinglong/ql3-log-leaf@v1
//	kind <kind>
//	[dropped <kind>]         tombstones only
//	key <digest>
//	[bundle <digest>]        attestations (and their tombstones) only
//	record <digest>
func (l Leaf) Marshal() ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return l.appendTo(make([]byte, 0, 300)), nil
}

// appendTo appends the leaf's bytes, as Marshal writes them, to dst (which ParseLeaf gives a
// stack buffer: a verifier parses every leaf of the log).
func (l Leaf) appendTo(dst []byte) []byte {
	dst = append(dst, LeafSchema+"\nkind "...)
	dst = append(dst, l.Kind...)
	dst = append(dst, '\n')
	if l.Kind == KindTombstone {
		dst = append(dst, "dropped "...)
		dst = append(dst, l.Dropped...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "key "...)
	dst = append(dst, l.Key...)
	dst = append(dst, '\n')
	if l.Bundle != "" {
		dst = append(dst, "bundle "...)
		dst = append(dst, l.Bundle...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "record "...)
	dst = append(dst, l.Record...)
	return append(dst, '\n')
}

// Hash is the leaf's RFC 6962 leaf hash, SHA-256(0x00 || bytes).
func (l Leaf) Hash() (tlog.Hash, error) {
	b, err := l.Marshal()
	if err != nil {
		return tlog.Hash{}, err
	}
	return tlog.RecordHash(b), nil
}

// Published is the kind the leaf's key was published under: its own, or a tombstone's dropped one.
func (l Leaf) Published() Kind {
	if l.Kind == KindTombstone {
		return l.Dropped
	}
	return l.Kind
}

func (l Leaf) check() error {
	pub := l.Kind
	if l.Kind == KindTombstone {
		pub = l.Dropped
	} else if l.Dropped != "" {
		return refuse.New(CodeLeafCorrupt, "leaf of kind %q names a dropped kind", l.Kind)
	}
	if pub.IndexKind() == "" {
		return refuse.New(CodeLeafCorrupt, "leaf kind %q (dropped %q) is not a publication kind", l.Kind, l.Dropped)
	}
	if (pub == KindAttestation) != (l.Bundle != "") {
		return refuse.New(CodeLeafCorrupt, "leaf of kind %q: a bundle digest is required for attestations only", pub)
	}
	ds := []digest.Digest{l.Key, l.Record}
	if l.Bundle != "" {
		ds = append(ds, l.Bundle)
	}
	for _, d := range ds {
		if _, err := evidence.ParseDigest(string(d)); err != nil {
			return refuse.Wrap(CodeLeafCorrupt, err, "leaf digest")
		}
	}
	return nil
}

// ParseLeaf parses canonical leaf bytes; anything that Marshal would not write byte for byte is
// refused (LOG_LEAF_CORRUPT).
func ParseLeaf(b []byte) (Leaf, error) {
	if len(b) > MaxLeafSize {
		return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf of %d bytes exceeds %d", len(b), MaxLeafSize)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf does not end with a newline")
	}
	// One string holds the leaf; the digests are its substrings (one allocation a leaf).
	s := string(b)
	head, rest, _ := strings.Cut(s, "\n")
	if head != LeafSchema || strings.Count(rest, "\n") < 3 {
		return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf is not a %s record", LeafSchema)
	}
	var l Leaf
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf line without a value")
		}
		switch name {
		case "kind":
			l.Kind = Kind(value)
		case "dropped":
			l.Dropped = Kind(value)
		case "key":
			l.Key = digest.Digest(value)
		case "bundle":
			l.Bundle = digest.Digest(value)
		case "record":
			l.Record = digest.Digest(value)
		default:
			return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf has an unknown line %q", name)
		}
	}
	if err := l.check(); err != nil {
		return Leaf{}, err
	}
	// What Marshal would write, byte for byte, or nothing: a repeated, reordered or empty line
	// parses above and differs here.
	var buf [MaxLeafSize + 1]byte
	if !bytes.Equal(l.appendTo(buf[:0]), b) {
		return Leaf{}, refuse.New(CodeLeafCorrupt, "leaf bytes are not canonical")
	}
	return l, nil
}
