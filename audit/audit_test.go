package audit_test

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// TestCommittedStoresPass: every receipt and preflight report of the committed stores passes, in
// place and in copies made with cp -a and with tar, and each report says what it is.
func TestCommittedStoresPass(t *testing.T) {
	fx := committed(t)
	r := fx.Roots
	vectors := []struct {
		name      string              // which root
		d         evidence.Descriptor // the subject
		kind      string              // the report's kind
		recovered bool                // the report's recovered
	}{
		{"straight receipt", r.Receipt, audit.KindReceipt, false},
		{"recovered receipt", r.RecoveredReceipt, audit.KindReceipt, true},
		{"straight preflight", r.Preflight, audit.KindPreflight, false},
		{"recovered ceremony's preflight", r.RecoveredPreflight, audit.KindPreflight, false},
	}
	root := fx.Snap.Materialize(t)
	for _, copyName := range []string{"in place", "cp -a", "tar"} {
		at := map[string]func() string{"in place": func() string { return root },
			"cp -a": func() string { return audittest.CopyCP(t, root) }, "tar": func() string { return audittest.CopyTar(t, root) }}[copyName]()
		for _, v := range vectors {
			rep := audittest.Audit(t, at, v.d.Digest)
			audittest.WantPass(t, rep)
			if rep.Kind != v.kind || rep.Recovered != v.recovered || rep.Objects == 0 || rep.Bytes == 0 {
				t.Fatalf("%s, %s: kind %s recovered %v, %d objects %d bytes", copyName, v.name, rep.Kind, rep.Recovered, rep.Objects, rep.Bytes)
			}
		}
	}
	root1000, rc := receipt1000(t)
	audittest.WantPass(t, audittest.Audit(t, root1000, rc.Digest))
	audittest.WantPass(t, audittest.Audit(t, audittest.CopyTar(t, root1000), rc.Digest))
}

// TestCommittedStoreIsTheSyntheticRelease: the straight ceremony applied exactly the committed
// locked manifest of release 3.4.1, and both stores are clean: nothing unreferenced, no
// unfinished intent.
func TestCommittedStoreIsTheSyntheticRelease(t *testing.T) {
	fx := committed(t)
	locked, err := os.ReadFile("../testdata/release-3.4.1/locked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := audittest.Open(t, fx.Snap.Materialize(t))
	rc := audittest.Decode[evidence.Receipt](t, st, fx.Roots.Receipt)
	if rc.Manifest.Digest != evidence.FromBytes(locked) || len(rc.Objects) != 6 || rc.Lock.ReleaseVersion != "3.4.1" {
		t.Fatalf("the straight receipt applied %s (%d objects, release %s), not testdata/release-3.4.1/locked.yaml",
			rc.Manifest.Digest, len(rc.Objects), rc.Lock.ReleaseVersion)
	}
	root1000, _ := receipt1000(t)
	for _, root := range []string{st.Root(), root1000} {
		rep, err := audittest.Open(t, root).Verify()
		if err != nil || !rep.OK() || len(rep.Unfinished) != 0 {
			t.Fatalf("store verify of %s: %v %+v", root, err, rep)
		}
		// The one object no published record reaches is the killed attempt's apply exec record:
		// its intent holds only the identity read and the dry-run.
		want := 0
		if root == st.Root() {
			want = 1
		}
		if len(rep.Unreferenced) != want {
			t.Fatalf("%s: unreferenced %v", root, rep.Unreferenced)
		}
		for _, d := range rep.Unreferenced {
			e := audittest.Decode[evidence.Exec](t, st, evidence.Descriptor{MediaType: evidence.MediaTypeExec, Digest: d, Size: int64(len(fx.Snap["blobs/sha256/"+d.Encoded()]))})
			if e.Step != evidence.StepApply || e.ExitCode != 0 {
				t.Fatalf("unreferenced object %s: step %s exit %d", d, e.Step, e.ExitCode)
			}
		}
	}
}

// TestCommittedStoresHoldNoCredential: no key material or token in what is committed. (The live
// tests scan every store they produce for the cluster's actual secrets.)
func TestCommittedStoresHoldNoCredential(t *testing.T) {
	for _, dir := range []string{storeDir, store1000Dir} {
		if where, ok := audittest.Load(t, dir).Secretless(); !ok {
			t.Fatalf("%s: %s", dir, where)
		}
	}
	// The scan itself finds what it looks for.
	for _, bad := range []string{"-----BEGIN CERTIFICATE-----", "token: abc", "client-key-data"} {
		if _, ok := (audittest.Snapshot{"x": []byte(bad)}).Secretless(); ok {
			t.Fatalf("the scan misses %q", bad)
		}
	}
}

// TestAuditFor: the receipt.audit command's form binds the target the command names.
func TestAuditFor(t *testing.T) {
	fx := committed(t)
	root := fx.Snap.Materialize(t)
	st := audittest.Open(t, root)
	straight := audittest.Decode[evidence.Receipt](t, st, fx.Roots.Receipt)
	other := audittest.Decode[evidence.Receipt](t, st, fx.Roots.RecoveredReceipt)
	vectors := []struct {
		name    string
		subject evidence.Descriptor // audited digest
		target  evidence.Descriptor // whose target the command names
		code    refuse.Code         // "" to pass
	}{
		{"its own target", fx.Roots.Receipt, fx.Roots.Receipt, ""},
		{"another receipt's target", fx.Roots.Receipt, fx.Roots.RecoveredReceipt, audit.CodeTarget},
		{"a preflight report", fx.Roots.Preflight, fx.Roots.Receipt, audit.CodeSubject},
	}
	targets := map[evidence.Descriptor]digest.Digest{fx.Roots.Receipt: straight.Target, fx.Roots.RecoveredReceipt: other.Target}
	for _, v := range vectors {
		rep, err := audit.AuditFor(st, v.subject.Digest, targets[v.target])
		if err != nil {
			t.Fatal(err)
		}
		audittest.Invariants(t, rep)
		if v.code == "" {
			audittest.WantPass(t, rep)
			continue
		}
		audittest.WantCode(t, rep, v.code)
		if c, _ := audittest.CheckOf(rep, "audit command target"); c.OK || c.Code != v.code {
			t.Fatalf("%s: audit command target check %+v", v.name, c)
		}
	}
}

// TestReportShape pins the documented members of the --output json report.
func TestReportShape(t *testing.T) {
	fx := committed(t)
	rep := audittest.Audit(t, fx.Snap.Materialize(t), fx.Roots.Receipt.Digest)
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"bytes", "checks", "crossResourceAtomicity", "externalResultsReplayed", "kind", "notChecked", "objects", "ok", "recovered", "schema", "subject"}
	if !slices.Equal(keys, want) {
		t.Fatalf("report members %v, want %v (code is absent when ok)", keys, want)
	}
	doc, err := os.ReadFile("../docs/audit.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(want, "code") {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Fatalf("docs/audit.md does not document report member %s", k)
		}
	}
	for _, c := range rep.Checks {
		if !strings.Contains(string(doc), "`"+strings.TrimPrefix(strings.TrimPrefix(strings.Split(c.Name, "[")[0], "preflight."), "intent.")) {
			t.Fatalf("docs/audit.md does not document check %s", c.Name)
		}
	}
}

// countingSource is the store, counting its reads: by digest, and by descriptor (a Get by its
// digest alone).
type countingSource struct {
	*store.Store
	reads  map[digest.Digest]int
	byDesc map[evidence.Descriptor]int
}

func (c *countingSource) Get(d digest.Digest) ([]byte, error) {
	c.reads[d]++
	c.byDesc[evidence.Descriptor{Digest: d}]++
	return c.Store.Get(d)
}

func (c *countingSource) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	c.reads[d.Digest]++
	c.byDesc[d]++
	return c.Store.GetDescriptor(d)
}

func (c *countingSource) GetRecord(d evidence.Descriptor) ([]byte, *evidence.Record, error) {
	c.reads[d.Digest]++
	c.byDesc[d]++
	return c.Store.GetRecord(d)
}

// TestAuditReadsEachObjectOnce: an audit reads (and so re-hashes and parses) each descriptor's
// object once, and the subject once in all (its schema is read from the parse that is then checked
// as the record), in each kind of audit and with the receipt.audit command's target check. The
// same bytes named by two descriptors (the command record is also the command-file blob) are read
// once for each, as each media type's checks differ.
func TestAuditReadsEachObjectOnce(t *testing.T) {
	fx := committed(t)
	st := audittest.Open(t, fx.Snap.Materialize(t))
	rc := audittest.Decode[evidence.Receipt](t, st, fx.Roots.Receipt)
	for _, c := range []struct {
		name    string
		subject evidence.Descriptor
		target  digest.Digest
	}{
		{"receipt", fx.Roots.Receipt, ""},
		{"receipt with its target", fx.Roots.Receipt, rc.Target},
		{"preflight", fx.Roots.Preflight, ""},
		{"recovered receipt", fx.Roots.RecoveredReceipt, ""},
	} {
		src := &countingSource{Store: st, reads: map[digest.Digest]int{}, byDesc: map[evidence.Descriptor]int{}}
		rep, err := audit.AuditWith(src, c.subject.Digest, audit.Options{Target: c.target})
		if err != nil {
			t.Fatal(err)
		}
		audittest.WantPass(t, rep)
		if n := src.reads[c.subject.Digest]; n != 1 {
			t.Errorf("%s: the subject was read %d times", c.name, n)
		}
		for d, n := range src.byDesc {
			if n != 1 {
				t.Errorf("%s: %s (%s) was read %d times", c.name, d.Digest, d.MediaType, n)
			}
		}
		if len(src.reads) != rep.Objects {
			t.Errorf("%s: %d objects read, the closure has %d", c.name, len(src.reads), rep.Objects)
		}
	}
}
