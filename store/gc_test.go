package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// gcSharedBlob is named by every intent of a gc fixture: a kept root reaches it, so no gc of
// the others may remove it.
var gcSharedBlob = []byte("shared by every intent")

// publishGCIntent publishes intent i: its own command blob, the shared blob as its "preflight",
// and its record; it returns the record and the key.
func publishGCIntent(t testing.TB, s *Store, i int) (evidence.Descriptor, digest.Digest) {
	t.Helper()
	own, err := s.PutBlob(evidence.MediaTypeOctets, fmt.Appendf(nil, "own blob of intent %d", i))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s.PutBlob(evidence.MediaTypeOctets, gcSharedBlob)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.PutRecord(evidence.MediaTypeIntent, evidence.Intent{Schema: evidence.SchemaIntent, Command: own, Preflight: shared,
		Target: own.Digest, ClusterUID: "u", Execs: []evidence.Descriptor{own}, CreatedAt: "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	key := evidence.FromBytes(fmt.Appendf(nil, "gc key %d", i))
	if err := s.PutIndex(evidence.IndexIntents, key, rec); err != nil {
		t.Fatal(err)
	}
	return rec, key
}

// attestFor attests subject with a statement naming it and a stand-in bundle.
func attestFor(t testing.TB, s *Store, subject digest.Digest, n int) {
	t.Helper()
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
		t.Fatal(err)
	}
	if _, _, err := s.PutAttested(subject, b, fmt.Appendf(nil, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","n":%d}`, n)); err != nil {
		t.Fatal(err)
	}
}

// gcFixture is a logged store of 6 intents, the first two attested (two bundles for intent 0).
func gcFixture(t testing.TB) (*Store, []evidence.Descriptor, []digest.Digest) {
	s := newLogStore(t)
	var recs []evidence.Descriptor
	var keys []digest.Digest
	for i := range 6 {
		r, k := publishGCIntent(t, s, i)
		recs, keys = append(recs, r), append(keys, k)
	}
	attestFor(t, s, recs[0].Digest, 0)
	attestFor(t, s, recs[0].Digest, 1)
	attestFor(t, s, recs[1].Digest, 2)
	return s, recs, keys
}

// dropIntents is a policy dropping the intents whose keys are given.
func dropIntents(keys ...digest.Digest) func(GCView) ([]GCRoot, error) {
	return func(v GCView) ([]GCRoot, error) {
		var out []GCRoot
		for _, e := range v.Entries[evidence.IndexIntents] {
			if slices.Contains(keys, e.Key) {
				out = append(out, GCRoot{Kind: deploylog.KindIntent, Key: e.Key, Record: e.Descriptor.Digest})
			}
		}
		return out, nil
	}
}

func wantStoreClean(t testing.TB, s *Store) *Report {
	t.Helper()
	r, err := s.Verify()
	if err != nil || !r.OK() {
		t.Fatalf("store verify: %+v %v", r.Corruption, err)
	}
	for _, h := range r.Hints {
		if h.Code == CodeUnreferenced {
			t.Fatalf("store verify hint %+v: gc left an object only a dropped root reached", h)
		}
	}
	return r
}

func holds(s *Store, d digest.Digest) bool {
	_, err := s.Get(d)
	return err == nil
}

// TestGCClosure: gc drops two intents and, with them, the attestations of their records: one
// tombstone leaf per dropped root, in publication order; their entries and the objects only
// they reached are gone; the blob a kept intent shares is kept. store verify and log verify are
// clean; a second gc drops nothing and writes nothing.
func TestGCClosure(t *testing.T) {
	s, recs, keys := gcFixture(t)
	before := verifyLog(t, s, LogVerifyOptions{}).Size
	dry, err := s.GC(dropIntents(keys[0], keys[1]), GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if snap := snapshot(t, s.Root()); len(dry.Dropped) != 5 || dry.LogSize != before+5 || snap != snapshot(t, s.Root()) {
		t.Fatalf("dry run: %+v", dry)
	}
	if !holds(s, recs[0].Digest) {
		t.Fatal("a dry run removed a record")
	}
	rep, err := s.GC(dropIntents(keys[0], keys[1]), GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// intent 0, its 2 attestations, intent 1, its attestation.
	if len(rep.Dropped) != 5 || rep.EntriesRemoved != 5 || rep.LogSize != before+5 {
		t.Fatalf("gc: %+v", rep)
	}
	// 2 records, 2 own blobs, 2 statements (intent 0's two bundles sign one), 3 bundles.
	if rep.ObjectsRemoved != 9 || rep.ObjectsRemoved != dry.ObjectsRemoved || rep.BytesRemoved != dry.BytesRemoved {
		t.Fatalf("removed %d objects (dry run said %d)", rep.ObjectsRemoved, dry.ObjectsRemoved)
	}
	for i, d := range rep.Dropped {
		if d.Tombstone != before+int64(i) || d.Resumed {
			t.Fatalf("drop %d: %+v, want tombstone leaf %d", i, d, before+int64(i))
		}
	}
	if rep.Dropped[0].Kind != deploylog.KindIntent || rep.Dropped[0].Key != keys[0] {
		t.Fatalf("first tombstone %+v, want intent 0 (published first)", rep.Dropped[0])
	}
	for _, d := range recs[:2] {
		if holds(s, d.Digest) {
			t.Fatalf("record %s of a dropped root is still there", d.Digest)
		}
	}
	for _, d := range recs[2:] {
		if !holds(s, d.Digest) {
			t.Fatalf("record %s of a kept root is gone", d.Digest)
		}
	}
	if !holds(s, evidence.FromBytes(gcSharedBlob)) {
		t.Fatal("gc removed the blob a kept root shares")
	}
	if es, _ := s.ListAttestations(recs[0].Digest); len(es) != 0 {
		t.Fatalf("attestations of a dropped record remain: %+v", es)
	}
	wantStoreClean(t, s)
	r := verifyLog(t, s, LogVerifyOptions{})
	wantLogOK(t, r)
	if c := codes(r.Hints); c[CodeLogGCPending] != 0 {
		t.Fatalf("hints %+v", r.Hints)
	}
	for i := before; i < r.Size; i++ {
		l, _, err := s.readLeafAt(i)
		if err != nil || l.Kind != deploylog.KindTombstone {
			t.Fatalf("leaf %d: %+v %v", i, l, err)
		}
	}
	snap := snapshot(t, s.Root())
	again, err := s.GC(dropIntents(), GCOptions{})
	if err != nil || len(again.Dropped) != 0 || again.ObjectsRemoved != 0 || snapshot(t, s.Root()) != snap {
		t.Fatalf("a second gc: %+v %v", again, err)
	}
	// A dropped root published again after its tombstone is a new publication, not a duplicate.
	if r2, k := publishGCIntent(t, s, 0); r2 != recs[0] || k != keys[0] {
		t.Fatal("republish: another record")
	}
	wantLogOK(t, verifyLog(t, s, LogVerifyOptions{}))
	wantStoreClean(t, s)
}

// readLeafAt reads leaf i of s's log (tests).
func (s *Store) readLeafAt(i int64) (deploylog.Leaf, []byte, error) {
	l, release, err := s.holdLog()
	if err != nil {
		return deploylog.Leaf{}, nil, err
	}
	defer release()
	return s.readLeaf(l, i)
}

// TestGCRefusals: a policy naming a root the index does not publish, an attestation, or
// another record; a store without a log; a kept record that is corrupt. Each refused with its
// code and nothing written.
func TestGCRefusals(t *testing.T) {
	s, recs, keys := gcFixture(t)
	snap := snapshot(t, s.Root())
	for name, c := range map[string]struct {
		policy func(GCView) ([]GCRoot, error)
		code   refuse.Code
	}{
		"unknown key": {func(GCView) ([]GCRoot, error) {
			return []GCRoot{{Kind: deploylog.KindIntent, Key: evidence.FromBytes([]byte("x")), Record: recs[0].Digest}}, nil
		}, CodeGCRoot},
		"another record": {func(GCView) ([]GCRoot, error) {
			return []GCRoot{{Kind: deploylog.KindIntent, Key: keys[0], Record: recs[1].Digest}}, nil
		}, CodeGCRoot},
		"attestation": {func(GCView) ([]GCRoot, error) {
			return []GCRoot{{Kind: deploylog.KindAttestation, Key: recs[0].Digest, Bundle: recs[0].Digest, Record: recs[0].Digest}}, nil
		}, CodeGCRoot},
		"policy error": {func(GCView) ([]GCRoot, error) { return nil, refuse.New("X_POLICY", "no") }, "X_POLICY"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.GC(c.policy, GCOptions{}); refuse.CodeOf(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			if snapshot(t, s.Root()) != snap {
				t.Fatal("a refused gc wrote")
			}
		})
	}
	t.Run("kept record corrupt", func(t *testing.T) {
		p := filepath.Join(s.Root(), "blobs/sha256", recs[4].Digest.Encoded())
		chmodW(t, p)
		if err := os.WriteFile(p, []byte("{}"), 0o400); err != nil {
			t.Fatal(err)
		}
		snap := snapshot(t, s.Root())
		if _, err := s.GC(dropIntents(keys[0]), GCOptions{}); refuse.CodeOf(err) != CodeGCClosure {
			t.Fatalf("got %v, want %s", err, CodeGCClosure)
		}
		if snapshot(t, s.Root()) != snap {
			t.Fatal("a refused gc wrote")
		}
	})
	t.Run("no log", func(t *testing.T) {
		plain := newStore(t)
		publishGCIntent(t, plain, 0)
		if _, err := plain.GC(dropIntents(), GCOptions{}); refuse.CodeOf(err) != CodeLogNotInitialized {
			t.Fatalf("got %v", err)
		}
	})
}

// TestGCWaitsForWriters: a handle that wrote an object holds the writers' lock until Close, so
// gc from another handle waits (here: refuses after its wait, STORE_LOCKED), and runs once the
// writer closed.
func TestGCWaitsForWriters(t *testing.T) {
	s, _, keys := gcFixture(t)
	w, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutBlob(evidence.MediaTypeOctets, gcSharedBlob); err != nil { // found present: still held
		t.Fatal(err)
	}
	if _, err := s.GC(dropIntents(keys[0]), GCOptions{Wait: 50 * 1e6}); refuse.CodeOf(err) != CodeStoreLocked {
		t.Fatalf("gc while a writer holds the store: %v", err)
	}
	w.Close()
	if rep, err := s.GC(dropIntents(keys[0]), GCOptions{}); err != nil || len(rep.Dropped) != 3 {
		t.Fatalf("gc after the writer closed: %+v %v", rep, err)
	}
	// The handle that ran gc writes again (its lock is shared again).
	publishGCIntent(t, s, 40)
}

// TestLogVerifyTombstones: a tombstone that drops nothing earlier (or drops a record again) is
// LOG_TOMBSTONE_ORPHAN; an entry still present under its tombstone is the LOG_GC_PENDING hint.
func TestLogVerifyTombstones(t *testing.T) {
	s, recs, keys := gcFixture(t)
	n := verifyLog(t, s, LogVerifyOptions{}).Size
	l, release, err := s.holdLog()
	if err != nil {
		t.Fatal(err)
	}
	// A tombstone of intent 2, appended as gc appends it, with the entry left in place: pending.
	err = s.appendLeaves(l, n, []deploylog.Leaf{{Kind: deploylog.KindTombstone, Dropped: deploylog.KindIntent, Key: keys[2], Record: recs[2].Digest}})
	release()
	if err != nil {
		t.Fatal(err)
	}
	r := verifyLog(t, s, LogVerifyOptions{})
	wantLogOK(t, r)
	if codes(r.Hints)[CodeLogGCPending] != 1 {
		t.Fatalf("hints %+v, want the pending gc", r.Hints)
	}
	for name, leaf := range map[string]deploylog.Leaf{
		"never published": {Kind: deploylog.KindTombstone, Dropped: deploylog.KindIntent, Key: evidence.FromBytes([]byte("x")), Record: recs[2].Digest},
		"another record":  {Kind: deploylog.KindTombstone, Dropped: deploylog.KindIntent, Key: keys[3], Record: recs[2].Digest},
		"dropped twice":   {Kind: deploylog.KindTombstone, Dropped: deploylog.KindIntent, Key: keys[2], Record: recs[2].Digest},
	} {
		t.Run(name, func(t *testing.T) {
			c := copyStore(t, s.Root())
			l, release, err := c.holdLog()
			if err != nil {
				t.Fatal(err)
			}
			err = c.appendLeaves(l, n+1, []deploylog.Leaf{leaf})
			release()
			if err != nil {
				t.Fatal(err)
			}
			wantFinding(t, verifyLog(t, c, LogVerifyOptions{}), CodeLogTombstoneOrphan)
		})
	}
	// The next gc finishes the pending one whatever its policy.
	rep, err := s.GC(dropIntents(), GCOptions{})
	if err != nil || len(rep.Dropped) != 1 || !rep.Dropped[0].Resumed || rep.Dropped[0].Tombstone != n {
		t.Fatalf("gc after a pending tombstone: %+v %v", rep, err)
	}
	r = verifyLog(t, s, LogVerifyOptions{})
	wantLogOK(t, r)
	if codes(r.Hints)[CodeLogGCPending] != 0 || holds(s, recs[2].Digest) {
		t.Fatalf("gc did not finish: %+v", r.Hints)
	}
	wantStoreClean(t, s)
}

// childCrashGC runs a gc of the crash fixture's first 300 intents and dies by SIGKILL at the
// named step: "tombstone:K" before the K+1-th tombstone's rename, "entry:K", "object:K", "done".
func childCrashGC(root, at string) int {
	s, err := Open(root)
	if err != nil {
		return 3
	}
	step, nth, _ := strings.Cut(at, ":")
	count, _ := strconv.Atoi(nth)
	calls := 0
	gcHook = func(name string) {
		if name != step {
			return
		}
		if calls++; calls > count {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	es, err := s.ListIndex(evidence.IndexIntents)
	if err != nil {
		return 5
	}
	keys := crashDropKeys(es)
	if _, err := s.GC(dropIntents(keys...), GCOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	return 4
}

// crashDropKeys are the keys of the crash test's dropped intents: those of gc keys 0..299.
func crashDropKeys([]IndexEntry) []digest.Digest {
	var out []digest.Digest
	for i := range 300 {
		out = append(out, evidence.FromBytes(fmt.Appendf(nil, "gc key %d", i)))
	}
	return out
}

// tree lists the files under the store's blobs, index and log (relative names and bytes'
// hash): two stores equal by it hold the same objects, entries and leaves.
func tree(t testing.TB, root string) string {
	t.Helper()
	var b strings.Builder
	for _, sub := range []string{"blobs", "index", "log"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(c))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestCrashMidGC kills a gc of 300 intents (and their 300 attestations) at every kind of step:
// before the first, a middle and the last tombstone leaf's rename (the chunks are 256), before
// the first and a middle entry's removal, before the first and a middle object's removal, and
// after the last. After each, store verify and log verify accept the store (a tombstoned entry
// still present is the LOG_GC_PENDING hint), and the next gc, with a policy that drops nothing
// more, finishes it: the store ends as the uninterrupted gc leaves it, file for file.
func TestCrashMidGC(t *testing.T) {
	base := newLogStore(t)
	for i := range 310 {
		rec, _ := publishGCIntent(t, base, i)
		if i < 300 {
			attestFor(t, base, rec.Digest, i)
		}
	}
	want := copyStore(t, base.Root())
	if _, err := want.GC(dropIntents(crashDropKeys(nil)...), GCOptions{}); err != nil {
		t.Fatal(err)
	}
	wantTree := tree(t, want.Root())
	for _, at := range []string{"tombstone:0", "tombstone:300", "tombstone:599", "entry:0", "entry:250", "object:0", "object:900", "done"} {
		t.Run(at, func(t *testing.T) {
			s := copyStore(t, base.Root())
			c := child(t, "crash-gc", s.Root())
			c.Env = append(c.Env, "QL3_GC_KILL_AT="+at)
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL at %s: %v", at, err)
			}
			wantStoreOK(t, s)
			wantLogOK(t, verifyLog(t, s, LogVerifyOptions{}))
			rep, err := s.GC(dropIntents(), GCOptions{}) // the rerun: no policy of its own
			if err != nil {
				t.Fatal(err)
			}
			if at == "tombstone:0" {
				// Nothing was tombstoned: nothing to finish, the store is as before.
				if len(rep.Dropped) != 0 || tree(t, s.Root()) != tree(t, base.Root()) {
					t.Fatalf("after a kill before the first tombstone: %+v", rep)
				}
				return
			}
			r := verifyLog(t, s, LogVerifyOptions{})
			wantLogOK(t, r)
			if codes(r.Hints)[CodeLogGCPending] != 0 {
				t.Fatalf("hints after the rerun: %+v", r.Hints)
			}
			wantStoreClean(t, s)
			got := tree(t, s.Root())
			if at == "tombstone:300" || at == "tombstone:599" {
				// Only the tombstones written were finished; a gc with the policy does the rest.
				if _, err := s.GC(dropIntents(crashDropKeys(nil)...), GCOptions{}); err != nil {
					t.Fatal(err)
				}
				got = tree(t, s.Root())
			}
			if got != wantTree {
				t.Fatalf("the store after the rerun differs from an uninterrupted gc's")
			}
		})
	}
}

func wantStoreOK(t testing.TB, s *Store) {
	t.Helper()
	r, err := s.Verify()
	if err != nil || !r.OK() {
		t.Fatalf("store verify: %+v %v", r.Corruption, err)
	}
}
