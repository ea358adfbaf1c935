package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// testObject is one object of a test batch: its media type and its exact bytes.
type testObject struct {
	MediaType string
	Bytes     []byte
}

// batchData is a batch of three objects, one of them a record.
func batchData() []testObject {
	rec, err := evidence.MarshalRecord(testIntent(evidence.Descriptor{MediaType: evidence.MediaTypeOctets,
		Digest: evidence.FromBytes([]byte("a")), Size: 1}))
	if err != nil {
		panic(err)
	}
	return []testObject{
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

// putBatch puts objs through one batch and syncs it.
func putBatch(s *Store, objs []testObject) ([]evidence.Descriptor, error) {
	b := s.NewBatch()
	ds := make([]evidence.Descriptor, len(objs))
	for i, o := range objs {
		d, err := b.PutBlob(o.MediaType, o.Bytes)
		if err != nil {
			b.Discard()
			return nil, err
		}
		ds[i] = d
	}
	return ds, b.Sync()
}

// TestCrashMidBatch kills a process inside a batch's Sync: with every object staged and synced and
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
			ds, err := putBatch(s, batchData())
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
	ds, err := putBatch(s, batchData())
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
