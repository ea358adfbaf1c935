package audit_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzAuditMutatedRecord from the committed store")

const seedDir = "testdata/fuzz/FuzzAuditMutatedRecord"

// closureOf returns the straight receipt's closure (the fuzz target's index space) and each
// object's bytes.
func closureOf(t testing.TB, fx *audittest.Fixture) ([]evidence.Descriptor, [][]byte) {
	st := audittest.Open(t, fx.Snap.Materialize(t))
	objs := audittest.Closure(t, st, fx.Roots.Receipt)
	bs := make([][]byte, len(objs))
	for i, d := range objs {
		bs[i] = fx.Snap["blobs/sha256/"+d.Digest.Encoded()]
	}
	return objs, bs
}

// FuzzAuditMutatedRecord stores mutated bytes in place of one object of the straight receipt's
// closure (index modulo its size), re-points every reference up the chain and the index to them,
// and audits. Properties: no panic; the report's invariants; the audit passes only if the
// mutation is a record equal to the original but for what docs/audit.md lists as not checked
// (times, input file identities, the kubeconfig summary's redacted facts, a run's descriptor
// number and directory name in their canonical form) or a stored kubectl output (judged by its
// verdicts, not authenticated); and a record that differs from the original in its own times alone
// passes or fails only the record times check (AUDIT_RECORD_TIME: they must lie within 10 minutes
// of its execs' times; an exec record's startedAt and finishedAt are not among them: they must
// keep the chain in order).
func FuzzAuditMutatedRecord(f *testing.F) {
	fx := committed(f)
	objs, originals := closureOf(f, fx)
	f.Fuzz(func(t *testing.T, index uint, mutated []byte) {
		i := int(index % uint(len(objs)))
		d := objs[i]
		root := fx.Snap.Materialize(t)
		fg := audittest.NewForger(t, root)
		fg.Replace(d.Digest, mutated)
		nr := fg.Rewrite(fx.Roots.Receipt)
		fg.TryPublish(nr)
		rep := audittest.Audit(t, root, nr.Digest)
		output := d.MediaType == evidence.MediaTypeStdout || d.MediaType == evidence.MediaTypeStderr
		if rep.OK && !output && !audittest.Equivalent(d.MediaType, originals[i], mutated, audittest.Unverifiable) {
			t.Fatalf("object %d (%s) mutated into %q: the audit passed\n", i, d.MediaType, mutated)
		}
		// Times alone may only fail the binding of a record's own times to its execs' (record times).
		if !rep.OK && rep.Code != audit.CodeRecordTime && audittest.Equivalent(d.MediaType, originals[i], mutated, audittest.TimesOnly) {
			t.Fatalf("object %d (%s) differs in its times alone: audit refused %s\n%s", i, d.MediaType, rep.Code, audittest.Failed(rep))
		}
	})
}

// TestFuzzSeeds: the committed seed corpus exists, covers every object of the closure, and holds
// the chain rewrites a single object can express, each exactly as audittest.ChainSeeds derives it
// and refused with its code when run the way the fuzz target runs it.
func TestFuzzSeeds(t *testing.T) {
	fx := committed(t)
	objs, originals := closureOf(t, fx)
	if *updateSeeds {
		writeSeeds(t, fx, objs, originals)
	}
	for _, s := range audittest.ChainSeeds(t, fx) {
		i := slices.Index(objs, s.Object)
		if i < 0 {
			t.Fatalf("seed %s replaces %s, which is not in the closure", s.Name, s.Object.Digest)
		}
		b, err := os.ReadFile(filepath.Join(seedDir, s.Name))
		if err != nil {
			t.Fatalf("chain seed: %v", err)
		}
		if string(b) != seedFile(i, s.Bytes) {
			t.Fatalf("seed %s differs from what audittest.ChainSeeds derives (run with -update-seeds)", s.Name)
		}
		root := fx.Snap.Materialize(t)
		fg := audittest.NewForger(t, root)
		fg.Replace(s.Object.Digest, s.Bytes)
		nr := fg.Rewrite(fx.Roots.Receipt)
		fg.TryPublish(nr)
		audittest.WantCode(t, audittest.Audit(t, root, nr.Digest), s.Code)
	}
	ents, err := os.ReadDir(seedDir)
	if err != nil {
		t.Fatalf("seed corpus: %v", err)
	}
	covered := map[uint]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(seedDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 3)
		if len(lines) < 3 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "uint(") || !strings.HasPrefix(lines[2], "[]byte(") {
			t.Fatalf("seed %s is not a (uint, []byte) corpus entry", e.Name())
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(lines[1], "uint("), ")"), 10, 64)
		if err != nil {
			t.Fatalf("seed %s: %v", e.Name(), err)
		}
		covered[uint(n)] = true
	}
	for i := range objs {
		if !covered[uint(i)] {
			t.Fatalf("no seed for closure object %d (%s)", i, objs[i].MediaType)
		}
	}
}

func seedFile(i int, b []byte) string {
	return fmt.Sprintf("go test fuzz v1\nuint(%d)\n[]byte(%q)\n", i, b)
}

// writeSeeds writes, for every closure object, its intact bytes (the audit must pass), and for
// every record, three mutations: a time changed (must pass, but in an exec record, whose times
// must keep the chain in order), a value changed in place and the record re-indented (each must be
// refused); then the chain seeds.
func writeSeeds(t *testing.T, fx *audittest.Fixture, objs []evidence.Descriptor, originals [][]byte) {
	if err := os.RemoveAll(seedDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(seedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, i int, b []byte) {
		if err := os.WriteFile(filepath.Join(seedDir, name), []byte(seedFile(i, b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range objs {
		b := originals[i]
		write(fmt.Sprintf("%02d-intact", i), i, b)
		if _, isRecord := evidence.RecordSchema(d.MediaType); !isRecord {
			continue
		}
		for _, field := range []string{`"startedAt":"`, `"createdAt":"`} {
			if j := bytes.Index(b, []byte(field)); j >= 0 {
				c := bytes.Clone(b)
				c[j+len(field)] = '1' // the year's first digit
				write(fmt.Sprintf("%02d-time", i), i, c)
			}
		}
		if j := bytes.IndexAny(b, "0123456789"); j >= 0 {
			c := bytes.Clone(b)
			c[j] = "1234567890"[c[j]-'0']
			write(fmt.Sprintf("%02d-digit", i), i, c)
		}
		write(fmt.Sprintf("%02d-indented", i), i, bytes.ReplaceAll(b, []byte(`,"`), []byte(",\n \"")))
	}
	for _, s := range audittest.ChainSeeds(t, fx) {
		write(s.Name, slices.Index(objs, s.Object), s.Bytes)
	}
}
