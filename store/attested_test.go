package store

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// attestedData is a subject digest, a canonical statement about it and a stand-in bundle: the
// store judges the statement as a record and the bundle as bytes.
func attestedData() (digest.Digest, []byte, []byte) {
	subject := evidence.FromBytes([]byte("the attested record"))
	st := evidence.Statement{
		Type:          evidence.SchemaStatement,
		Subject:       []evidence.StatementSubject{{Name: string(subject), Digest: evidence.SubjectDigest{SHA256: subject.Encoded()}}},
		PredicateType: evidence.PredicateTypeAttestation,
		Predicate: evidence.Predicate{Record: evidence.AttestedReceipt, MediaType: evidence.MediaTypeReceipt,
			Command: subject, Target: subject, ReleaseSet: subject, CatalogDigest: subject, ManifestDigest: subject,
			LockReportDigest: subject, QL3Version: "test"},
	}
	b, err := evidence.MarshalRecord(st)
	if err != nil {
		panic(err)
	}
	return subject, b, []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
}

func TestPutAttested(t *testing.T) {
	s := newStore(t)
	subject, statement, bundle := attestedData()
	// The writers' lock (gc.go) is one descriptor held from the first write to Close, by design.
	if err := s.holdWriters(); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	sd, bd, err := s.PutAttested(subject, statement, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if sd != (evidence.Descriptor{MediaType: evidence.MediaTypeStatement, Digest: evidence.FromBytes(statement), Size: int64(len(statement))}) ||
		bd != (evidence.Descriptor{MediaType: evidence.MediaTypeSigstoreBundle, Digest: evidence.FromBytes(bundle), Size: int64(len(bundle))}) {
		t.Fatalf("descriptors %+v %+v", sd, bd)
	}
	for d, want := range map[evidence.Descriptor][]byte{sd: statement, bd: bundle} {
		if b, err := s.GetDescriptor(d); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("get %s: %q %v", d.Digest, b, err)
		}
	}
	want := []AttestationEntry{{Subject: subject, Bundle: bd.Digest, Statement: sd}}
	es, err := s.ListAttestations(subject)
	if err != nil || len(es) != 1 || es[0] != want[0] {
		t.Fatalf("list %+v %v", es, err)
	}
	// Again: the objects and the entry are present and the same, so nothing changes.
	if sd2, bd2, err := s.PutAttested(subject, statement, bundle); err != nil || sd2 != sd || bd2 != bd {
		t.Fatalf("again: %+v %+v %v", sd2, bd2, err)
	}
	if es, err := s.ListAttestations(subject); err != nil || len(es) != 1 {
		t.Fatalf("list after again %+v %v", es, err)
	}
	if n := tmpNames(t, s); len(n) != 0 {
		t.Fatalf("staging files left: %v", n)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() || r.Objects != 2 || len(r.Hints) != 0 {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

// TestPutAttestedRefusals: a bad statement or subject is refused with its code before anything
// is written; a bundle already indexed under the subject with another statement is
// INDEX_CONFLICT, and the entry keeps its statement.
func TestPutAttestedRefusals(t *testing.T) {
	subject, statement, bundle := attestedData()
	vectors := []struct {
		name      string
		subject   digest.Digest
		statement []byte
		code      refuse.Code
	}{
		{"statement not canonical", subject, append([]byte(" "), statement...), evidence.CodeRecordNotCanonical},
		{"statement of another schema", subject, bytes.Replace(statement, []byte(evidence.SchemaStatement), []byte("https://in-toto.io/Statement/v0.1"), 1), evidence.CodeRecordSchemaMismatch},
		{"subject not a digest", "sha256:abc", statement, evidence.CodeDigestInvalid},
		{"too large", subject, nil, CodeObjectTooLarge},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t)
			b := bundle
			if v.statement == nil { // the bundle is the object over the limit
				v.statement, b = statement, make([]byte, MaxObjectSize+1)
			}
			_, _, err := s.PutAttested(v.subject, v.statement, b)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			r, err := s.Verify()
			if err != nil || !r.OK() || r.Objects != 0 || len(tmpNames(t, s)) != 0 {
				t.Fatalf("a refused attestation wrote something: %+v %v", r, err)
			}
			if _, err := os.Lstat(filepath.Join(s.Root(), attestationsRel)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused attestation made its index directory: %v", err)
			}
		})
	}
	t.Run("object present with other content", func(t *testing.T) {
		s := newStore(t)
		p := filepath.Join(s.Root(), "blobs", "sha256", evidence.FromBytes(bundle).Encoded())
		if err := os.WriteFile(p, []byte("other content"), 0o400); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutAttested(subject, statement, bundle); refuse.CodeOf(err) != CodeObjectCorrupt {
			t.Fatalf("got %v, want %s", err, CodeObjectCorrupt)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "other content" {
			t.Fatalf("the present object was replaced: %q %v", b, err)
		}
		if n := tmpNames(t, s); len(n) != 0 {
			t.Fatalf("staging files left: %v", n)
		}
		if es, err := s.ListAttestations(subject); err != nil || len(es) != 0 {
			t.Fatalf("an attestation was published: %+v %v", es, err)
		}
	})
	t.Run("entry with another statement", func(t *testing.T) {
		s := newStore(t)
		other, err := s.PutBlob(evidence.MediaTypeOctets, []byte("another statement"))
		if err != nil {
			t.Fatal(err)
		}
		other.MediaType = evidence.MediaTypeStatement
		if err := s.PutAttestation(subject, evidence.FromBytes(bundle), other); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutAttested(subject, statement, bundle); refuse.CodeOf(err) != CodeIndexConflict {
			t.Fatalf("got %v, want %s", err, CodeIndexConflict)
		}
		if es, err := s.ListAttestations(subject); err != nil || len(es) != 1 || es[0].Statement != other {
			t.Fatalf("the entry changed: %+v %v", es, err)
		}
		if n := tmpNames(t, s); len(n) != 0 {
			t.Fatalf("staging files left: %v", n)
		}
	})
}

// TestCrashMidAttested kills a process inside PutAttested: with everything staged and synced and
// nothing renamed, with the statement renamed, with both objects renamed before blobs/sha256 is
// synced, and with both objects in place before the entry is renamed. The store stays valid, the
// subject lists no attestation (no entry names a missing object), and the call then completes.
func TestCrashMidAttested(t *testing.T) {
	for _, v := range []struct {
		at      string
		placed  int // objects in blobs/sha256 after the crash
		staging int // staging files left in tmp/
	}{{"0", 0, 3}, {"1", 1, 2}, {"2", 2, 1}, {"entry", 2, 1}} {
		t.Run("at-"+v.at, func(t *testing.T) {
			s := newStore(t)
			c := child(t, "crash-attested", s.Root())
			c.Env = append(c.Env, "QL3_STORE_KILL_AT="+v.at)
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL: %v", err)
			}
			r, err := s.Verify()
			if err != nil || !r.OK() || r.Objects != v.placed {
				t.Fatalf("verify after crash: %+v %v", r, err)
			}
			counts := map[refuse.Code]int{}
			for _, h := range r.Hints {
				counts[h.Code]++
			}
			if counts[CodeStagingLeftover] != v.staging || counts[CodeUnreferenced] != v.placed || len(r.Hints) != v.staging+v.placed {
				t.Fatalf("hints %+v, want %d staging leftovers and %d unreferenced", r.Hints, v.staging, v.placed)
			}
			subject, statement, bundle := attestedData()
			if es, err := s.ListAttestations(subject); err != nil || len(es) != 0 {
				t.Fatalf("an entry survived the crash: %+v %v", es, err)
			}
			if _, _, err := s.PutAttested(subject, statement, bundle); err != nil {
				t.Fatalf("attest after crash: %v", err)
			}
			if es, err := s.ListAttestations(subject); err != nil || len(es) != 1 {
				t.Fatalf("list after rerun: %+v %v", es, err)
			}
		})
	}
}

// TestAttestationRootMoved: once the store path no longer names the directory opened, an
// attestation entry is a publication like any other: PutAttestation and PutAttested are refused
// with STORE_ROOT_MOVED, and neither directory lists an attestation.
func TestAttestationRootMoved(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		for _, sw := range swaps {
			t.Run(sw.name, func(t *testing.T) {
				s := newStore(t)
				other := newStore(t)
				subject, statement, bundle := attestedData()
				sd, err := s.PutBlob(evidence.MediaTypeStatement, statement)
				must(t, err)
				_, otherRoot := sw.swap(t, s.Root(), other.Root())
				if err := s.PutAttestation(subject, evidence.FromBytes(bundle), sd); refuse.CodeOf(err) != CodeRootMoved {
					t.Fatalf("PutAttestation: %v, want %s", err, CodeRootMoved)
				}
				if _, _, err := s.PutAttested(subject, statement, bundle); refuse.CodeOf(err) != CodeRootMoved {
					t.Fatalf("PutAttested: %v, want %s", err, CodeRootMoved)
				}
				if es, err := s.ListAttestations(subject); err != nil || len(es) != 0 {
					t.Fatalf("an attestation was published: %+v %v", es, err)
				}
				if _, err := os.Lstat(filepath.Join(otherRoot, attestationsRel)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the other store got an attestation index: %v", err)
				}
			})
		}
	})
}

// TestRootSwappedDuringAttestationCommit: the store path swapped after an attestation writer's
// check and just before its entry's rename (the entry then lands in the held directory) is caught
// by the check after the rename, as in PutIndex: the entry is removed again and the call refused
// with STORE_ROOT_MOVED, so neither directory lists it.
func TestRootSwappedDuringAttestationCommit(t *testing.T) {
	writers := []struct {
		name string
		// hookCall is the commitHook call that comes just before the entry's rename: PutAttested
		// first passes the hook before renaming its objects.
		hookCall int
		// prepare stores what the writer needs, before the hook is set, and returns the call.
		prepare func(t *testing.T, s *Store, subject digest.Digest, statement, bundle []byte) func() error
	}{
		{"PutAttestation", 1, func(t *testing.T, s *Store, subject digest.Digest, statement, bundle []byte) func() error {
			sd, err := s.PutBlob(evidence.MediaTypeStatement, statement)
			must(t, err)
			return func() error { return s.PutAttestation(subject, evidence.FromBytes(bundle), sd) }
		}},
		{"PutAttested", 2, func(t *testing.T, s *Store, subject digest.Digest, statement, bundle []byte) func() error {
			return func() error { _, _, err := s.PutAttested(subject, statement, bundle); return err }
		}},
	}
	for _, w := range writers {
		for _, sw := range swaps {
			t.Run(w.name+"/"+sw.name, func(t *testing.T) {
				s := newStore(t)
				other := newStore(t)
				subject, statement, bundle := attestedData()
				put := w.prepare(t, s, subject, statement, bundle)
				var held, otherNow string
				calls := 0
				commitHook = func() {
					if calls++; calls == w.hookCall {
						commitHook = nil
						held, otherNow = sw.swap(t, s.Root(), other.Root())
					}
				}
				t.Cleanup(func() { commitHook = nil })
				if err := put(); refuse.CodeOf(err) != CodeRootMoved {
					t.Fatalf("%s: %v, want %s", w.name, err, CodeRootMoved)
				}
				if held == "" {
					t.Fatal("the hook did not swap the store path")
				}
				for _, dir := range []string{held, otherNow} {
					if n := names(t, dir, attestationsRel+"/"+subject.Encoded()); len(n) != 0 {
						t.Fatalf("%s lists attestations %v", dir, n)
					}
				}
			})
		}
	}
}
