package audittest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// RunIndexTampers damages the index or names a subject that is not a root, and requires the
// exact code of each.
func RunIndexTampers(t *testing.T, fx *Fixture) {
	r := fx.Roots
	entry := func(root, kind string, key digest.Digest) string {
		return filepath.Join(root, "index", kind, key.Encoded())
	}
	cmdOf := func(root string) digest.Digest {
		return Decode[evidence.Receipt](t, Open(t, root), r.Receipt).Command.Digest
	}
	vectors := []struct {
		name    string
		subject func() digest.Digest            // what to audit
		damage  func(t *testing.T, root string) // what to do to the store first; nil for nothing
		code    refuse.Code
	}{
		{"receipt index entry deleted", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			must(t, os.Remove(entry(root, evidence.IndexReceipts, cmdOf(root))))
		}, audit.CodeUnpublished},
		{"receipt index entry naming the other receipt", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			NewForger(t, root).SetIndex(evidence.IndexReceipts, cmdOf(root), r.RecoveredReceipt)
		}, audit.CodeUnpublished},
		{"receipt index entry re-indented", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			p := entry(root, evidence.IndexReceipts, cmdOf(root))
			b, err := os.ReadFile(p)
			must(t, err)
			must(t, WriteObject(p, indent(b)))
		}, store.CodeIndexCorrupt},
		{"receipt index entry with its first byte flipped", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			p := entry(root, evidence.IndexReceipts, cmdOf(root))
			b, err := os.ReadFile(p)
			must(t, err)
			b[0] ^= 0xff
			must(t, WriteObject(p, b))
		}, store.CodeIndexCorrupt},
		{"preflight index entry deleted", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			must(t, os.Remove(entry(root, evidence.IndexPreflights, r.Preflight.Digest)))
		}, audit.CodeUnpublished},
		{"intent index entry deleted", func() digest.Digest { return r.Receipt.Digest }, func(t *testing.T, root string) {
			must(t, os.Remove(entry(root, evidence.IndexIntents, cmdOf(root))))
		}, audit.CodeUnpublished},
		{"preflight report unpublished", func() digest.Digest { return r.Preflight.Digest }, func(t *testing.T, root string) {
			must(t, os.Remove(entry(root, evidence.IndexPreflights, r.Preflight.Digest)))
		}, audit.CodeUnpublished},
		{"subject: an intent", func() digest.Digest { return intentOf(t, fx).Digest }, nil, audit.CodeSubject},
		{"subject: an exec record", func() digest.Digest { return fx.Snap.receipt(t, r.Receipt).Execs[0].Digest }, nil, audit.CodeSubject},
		{"subject: the manifest blob", func() digest.Digest { return fx.Snap.receipt(t, r.Receipt).Manifest.Digest }, nil, audit.CodeSubject},
		{"subject: the empty stderr blob", func() digest.Digest { return digest.FromBytes(nil) }, nil, audit.CodeSubject},
		{"subject: not in the store", func() digest.Digest { return digest.FromString("absent") }, nil, store.CodeObjectNotFound},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			root := fx.Snap.Materialize(t)
			if v.damage != nil {
				v.damage(t, root)
			}
			rep := Audit(t, root, v.subject())
			WantCode(t, rep, v.code)
			if v.code == audit.CodeSubject || v.code == store.CodeObjectNotFound {
				if rep.Kind != "unknown" || len(rep.Checks) != 1 {
					t.Fatalf("a subject that is no root: kind %s, %d checks", rep.Kind, len(rep.Checks))
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func intentOf(t *testing.T, fx *Fixture) evidence.Descriptor {
	return fx.Snap.receipt(t, fx.Roots.Receipt).Intent
}

// receipt decodes a receipt straight from the snapshot.
func (s Snapshot) receipt(t *testing.T, d evidence.Descriptor) evidence.Receipt {
	t.Helper()
	var rc evidence.Receipt
	if err := evidence.DecodeRecord(d.MediaType, s["blobs/sha256/"+d.Digest.Encoded()], &rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

// Unlocked1000 turns the synthetic release's unlocked manifest (six resources) into one of 1,000:
// its four workloads and its ConfigMap, without the Service, plus 995 small ConfigMaps.
func Unlocked1000(u string) string {
	docs := strings.Split(u, "\n---\n")
	var keep []string
	for _, d := range docs {
		if !strings.Contains(d, "\nkind: Service\n") {
			keep = append(keep, d)
		}
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(strings.Join(keep, "\n---\n"), "\n") + "\n")
	for i := range 995 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: qinglong-bulk-%03d\n  namespace: qinglong\ndata:\n  index: \"%03d\"\n", i, i)
	}
	return b.String()
}
