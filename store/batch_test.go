package store

import (
	"os"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// A batch's objects are not in the store until Sync, and are then like any committed object.
func TestBatchSync(t *testing.T) {
	s := newStore(t)
	old, err := s.PutBlob(evidence.MediaTypeOctets, []byte("already"))
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	a, err := b.PutBlob(evidence.MediaTypeStdout, []byte("out"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.PutBlob(evidence.MediaTypeStdout, []byte("out")); err != nil || again != a {
		t.Fatalf("second put of one object: %+v %v", again, err)
	}
	if got, err := b.PutBlob(evidence.MediaTypeOctets, []byte("already")); err != nil || got != old {
		t.Fatalf("put of a stored object: %+v %v", got, err)
	}
	exec := evidence.Exec{Schema: evidence.SchemaExec, Step: evidence.StepIdentity, Argv: []string{"k"}, Env: []string{},
		KubectlDigest: a.Digest, Stdout: a, Stderr: a, StdoutBytes: 3, StderrBytes: 3, StartedAt: "t", FinishedAt: "t"}
	rd, raw, err := b.PutRecord(evidence.MediaTypeExec, exec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.PutRecord("application/x-not-a-record", exec); refuse.CodeOf(err) != CodeMediaType {
		t.Fatalf("non-record media type: %v", err)
	}
	if n := len(tmpNames(t, s)); n != 2 {
		t.Fatalf("%d staging files before Sync, want 2 (one per new object)", n)
	}
	for _, d := range []evidence.Descriptor{a, rd} {
		if _, err := s.Get(d.Digest); refuse.CodeOf(err) != CodeObjectNotFound {
			t.Fatalf("object %s readable before Sync: %v", d.Digest, err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetDescriptor(rd); err != nil || string(got) != string(raw) {
		t.Fatalf("record after Sync: %q %v", got, err)
	}
	if got, err := s.GetDescriptor(a); err != nil || string(got) != "out" {
		t.Fatalf("blob after Sync: %q %v", got, err)
	}
	if names := tmpNames(t, s); len(names) != 0 {
		t.Fatalf("staging files left: %v", names)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("empty Sync: %v", err)
	}
	if r, err := s.Verify(); err != nil || !r.OK() || r.Objects != 3 || len(r.Hints) != 3 {
		t.Fatalf("verify: %+v %v", r, err) // three unreferenced objects, no staging leftover
	}
}

// Discard leaves nothing: no object, no staging file.
func TestBatchDiscard(t *testing.T) {
	s := newStore(t)
	b := s.NewBatch()
	d, err := b.PutBlob(evidence.MediaTypeOctets, []byte("dropped"))
	if err != nil {
		t.Fatal(err)
	}
	b.Discard()
	if _, err := s.Get(d.Digest); refuse.CodeOf(err) != CodeObjectNotFound {
		t.Fatalf("discarded object: %v", err)
	}
	if names := tmpNames(t, s); len(names) != 0 {
		t.Fatalf("staging files left: %v", names)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("Sync after Discard: %v", err)
	}
}

// An object another writer committed between the batch's put and its Sync is checked, not
// replaced; damaged, it refuses the Sync.
func TestBatchRace(t *testing.T) {
	for _, damage := range []bool{false, true} {
		s := newStore(t)
		b := s.NewBatch()
		d, err := b.PutBlob(evidence.MediaTypeOctets, []byte("raced"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutBlob(evidence.MediaTypeOctets, []byte("raced")); err != nil {
			t.Fatal(err)
		}
		if damage {
			p := blobPath(s, d.Digest)
			os.Chmod(p, 0o600)
			os.WriteFile(p, []byte("racex"), 0o400)
			os.Chmod(p, 0o400)
		}
		err = b.Sync()
		if want := map[bool]refuse.Code{false: "", true: CodeObjectCorrupt}[damage]; refuse.CodeOf(err) != want {
			t.Fatalf("damaged %v: Sync %v, want %q", damage, err, want)
		}
		if names := tmpNames(t, s); len(names) != 0 {
			t.Fatalf("staging files left: %v", names)
		}
	}
}

// A closed store refuses a batch's puts and Sync; the Sync drops what was staged.
func TestBatchClosed(t *testing.T) {
	s := newStore(t)
	b := s.NewBatch()
	if _, err := b.PutBlob(evidence.MediaTypeOctets, []byte("x")); err != nil {
		t.Fatal(err)
	}
	b.Discard()
	if _, err := b.PutBlob(evidence.MediaTypeOctets, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); refuse.CodeOf(err) != CodeStoreIO {
		t.Fatalf("Sync on a closed store: %v", err)
	}
	if _, err := b.PutBlob(evidence.MediaTypeOctets, []byte("z")); refuse.CodeOf(err) != CodeStoreIO {
		t.Fatalf("put on a closed store: %v", err)
	}
}
