package store

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
)

// batchData is a batch of three objects, one of them a record, as an attestation writes them.
func batchData() []Object {
	rec, err := evidence.MarshalRecord(testIntent(evidence.Descriptor{MediaType: evidence.MediaTypeOctets,
		Digest: evidence.FromBytes([]byte("a")), Size: 1}))
	if err != nil {
		panic(err)
	}
	return []Object{
		{MediaType: evidence.MediaTypeOctets, Bytes: []byte("batch object one")},
		{MediaType: evidence.MediaTypeIntent, Bytes: rec},
		{MediaType: evidence.MediaTypeStdout, Bytes: []byte("batch object three")},
	}
}

func tmpNames(t *testing.T, s *Store) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(s.Root(), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestPutObjects(t *testing.T) {
	s := newStore(t)
	objs := append(batchData(), batchData()[0]) // the same bytes twice are one object
	ds, err := s.PutObjects(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(objs) || ds[0] != ds[3] {
		t.Fatalf("descriptors %+v", ds)
	}
	for i, d := range ds {
		if d.MediaType != objs[i].MediaType || d.Digest != evidence.FromBytes(objs[i].Bytes) || d.Size != int64(len(objs[i].Bytes)) {
			t.Fatalf("descriptor %d: %+v", i, d)
		}
		b, err := s.GetDescriptor(d)
		if err != nil || !bytes.Equal(b, objs[i].Bytes) {
			t.Fatalf("get %d: %q %v", i, b, err)
		}
	}
	// Again: every object is present, checked and kept.
	again, err := s.PutObjects(objs)
	if err != nil || len(again) != len(ds) || again[1] != ds[1] {
		t.Fatalf("second put: %+v %v", again, err)
	}
	if n := tmpNames(t, s); len(n) != 0 {
		t.Fatalf("staging files left: %v", n)
	}
	if ds, err := s.PutObjects(nil); err != nil || len(ds) != 0 {
		t.Fatalf("empty batch: %v %v", ds, err)
	}
	r, err := s.Verify()
	if err != nil || !r.OK() || r.Objects != 3 {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

// TestPutObjectsRefusals: a batch with one bad object is refused whole, with that object's code,
// before anything is staged.
func TestPutObjectsRefusals(t *testing.T) {
	good := batchData()
	vectors := []struct {
		name string
		bad  Object
		code refuse.Code
	}{
		{"record not canonical", Object{evidence.MediaTypeIntent, append([]byte(" "), good[1].Bytes...)}, evidence.CodeRecordNotCanonical},
		{"record of another schema", Object{evidence.MediaTypeReceipt, good[1].Bytes}, evidence.CodeRecordSchemaMismatch},
		{"too large", Object{evidence.MediaTypeOctets, make([]byte, MaxObjectSize+1)}, CodeObjectTooLarge},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.PutObjects([]Object{good[0], v.bad, good[2]})
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (%v)", got, v.code, err)
			}
			r, err := s.Verify()
			if err != nil || !r.OK() || r.Objects != 0 || len(tmpNames(t, s)) != 0 {
				t.Fatalf("a refused batch wrote something: %+v %v", r, err)
			}
		})
	}
}

// TestPutObjectsExistingCorrupt: an object present under the same name with other content is
// OBJECT_CORRUPT, never replaced.
func TestPutObjectsExistingCorrupt(t *testing.T) {
	s := newStore(t)
	objs := batchData()
	p := filepath.Join(s.Root(), "blobs", "sha256", evidence.FromBytes(objs[2].Bytes).Encoded())
	if err := os.WriteFile(p, []byte("other content"), 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObjects(objs); refuse.CodeOf(err) != CodeObjectCorrupt {
		t.Fatalf("got %v, want %s", err, CodeObjectCorrupt)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "other content" {
		t.Fatalf("the present object was replaced: %q %v", b, err)
	}
	if n := tmpNames(t, s); len(n) != 0 {
		t.Fatalf("staging files left: %v", n)
	}
}

// TestCrashMidBatch kills a process inside PutObjects: with every object staged and synced and
// none renamed, with one renamed, and with all renamed before the directory fsync. The store
// stays valid (the unrenamed staging files are hints), and the batch then completes.
func TestCrashMidBatch(t *testing.T) {
	for at := 0; at <= len(batchData()); at++ {
		t.Run("renamed-"+strconv.Itoa(at), func(t *testing.T) {
			s := newStore(t)
			c := child(t, "crash-batch", s.Root())
			c.Env = append(c.Env, "QL3_STORE_KILL_AT="+strconv.Itoa(at))
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL: %v", err)
			}
			r, err := s.Verify()
			if err != nil || !r.OK() || r.Objects != at {
				t.Fatalf("verify after crash: %+v %v", r, err)
			}
			// The renamed objects are unreferenced (no index entry was written); the others are
			// staging leftovers.
			counts := map[refuse.Code]int{}
			for _, h := range r.Hints {
				counts[h.Code]++
			}
			if counts[CodeStagingLeftover] != len(batchData())-at || counts[CodeUnreferenced] != at || len(r.Hints) != len(batchData()) {
				t.Fatalf("hints %+v, want %d staging leftovers and %d unreferenced", r.Hints, len(batchData())-at, at)
			}
			ds, err := s.PutObjects(batchData())
			if err != nil {
				t.Fatalf("put after crash: %v", err)
			}
			for _, d := range ds {
				if _, err := s.GetDescriptor(d); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestAttestationDirsReleased: the attestation index directories made, synced and listed by
// PutAttestation and ListAttestations are all released (the first entry makes both levels, a new
// subject the second, an existing one neither).
func TestAttestationDirsReleased(t *testing.T) {
	s := newStore(t)
	ds, err := s.PutObjects(batchData())
	if err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	for _, subject := range []int{0, 0, 2} {
		if err := s.PutAttestation(ds[subject].Digest, ds[1].Digest, ds[2]); err != nil {
			t.Fatal(err)
		}
		if es, err := s.ListAttestations(ds[subject].Digest); err != nil || len(es) != 1 {
			t.Fatalf("list: %+v %v", es, err)
		}
	}
	if es, err := s.ListAttestations(ds[1].Digest); err != nil || len(es) != 0 {
		t.Fatalf("list of a subject without attestations: %+v %v", es, err)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
	for _, sub := range []string{"index/attestations", "index/attestations/" + ds[0].Digest.Encoded()} {
		if fi, err := os.Lstat(filepath.Join(s.Root(), sub)); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Fatalf("%s: %v %v", sub, fi, err)
		}
	}
}
