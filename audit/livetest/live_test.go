package livetest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/audit/internal/audittest"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// live is what the real ceremonies produced into one store.
type live struct {
	root                             string
	captured                         audittest.Snapshot // the two apply ceremonies only (what -update commits)
	fx                               *audittest.Fixture // and a preflight of another target
	straight, recovered, otherTarget digest.Digest
	preStraight, preRecovered        digest.Digest
}

// produce runs, into one store: the 3.4.1 release into namespace qinglong, preflight and apply
// straight through; the same release into another namespace, its apply killed right after the
// server-side apply and rerun, which recovers from the intent; and a preflight of the first
// release through the kubeconfig's token context (another target).
func produce(t *testing.T) *live {
	l := &live{root: filepath.Join(audittest.PrivateDir(t), "store")}
	a := newBed(t, l.root, "qinglong", nil)
	preA, rcA := a.mustApply()
	l.straight, l.preStraight = rcA.Receipt, preA.Preflight

	b := newBed(t, l.root, "qinglong-recovered", nil)
	preB := b.preflight("preflight.json")
	af := b.WriteCommand("apply.json", evidence.CommandApply, string(preB.Preflight))
	b.killAfterApply(af)
	if b.Count(evidence.IndexIntents) != 2 || b.Count(evidence.IndexReceipts) != 1 {
		t.Fatalf("after the kill: %d intents, %d receipts; want 2 and 1", b.Count(evidence.IndexIntents), b.Count(evidence.IndexReceipts))
	}
	if n := b.liveObjects(); n != 6 {
		t.Fatalf("the killed apply left %d live objects, want 6", n)
	}
	rcB := b.apply(af)
	if !rcB.Recovered {
		t.Fatalf("the rerun did not recover: %+v", rcB)
	}
	l.recovered, l.preRecovered = rcB.Receipt, preB.Preflight
	l.captured = audittest.Capture(t, l.root)

	a.Set("kubeconfig", "context", cluster.TokenContext)
	l.otherTarget = a.preflight("preflight-token.json").Preflight

	st := audittest.Open(t, l.root)
	l.fx = &audittest.Fixture{Snap: audittest.Capture(t, l.root), Roots: audittest.FindRoots(t, st),
		OtherTarget: evidence.Descriptor{MediaType: evidence.MediaTypePreflight, Digest: l.otherTarget}}
	b2, err := st.Get(l.otherTarget)
	if err != nil {
		t.Fatal(err)
	}
	l.fx.OtherTarget.Size = int64(len(b2))
	if l.fx.Roots.Receipt.Digest != l.straight || l.fx.Roots.RecoveredReceipt.Digest != l.recovered {
		t.Fatalf("roots %+v", l.fx.Roots)
	}
	return l
}

// TestLiveAudit: every receipt and preflight report of real ceremonies passes the audit, in place
// and in copies made with cp -a and tar; ql3 audit opens no socket and runs no program; and every
// tamper class on them is refused with its exact code.
func TestLiveAudit(t *testing.T) {
	testcluster.Need(t)
	l := produce(t)
	subjects := []struct {
		name      string
		d         digest.Digest
		kind      string
		recovered bool
	}{
		{"straight receipt", l.straight, audit.KindReceipt, false},
		{"recovered receipt", l.recovered, audit.KindReceipt, true},
		{"straight preflight", l.preStraight, audit.KindPreflight, false},
		{"recovered ceremony's preflight", l.preRecovered, audit.KindPreflight, false},
		{"preflight of the token context", l.otherTarget, audit.KindPreflight, false},
	}
	t.Run("pass", func(t *testing.T) {
		for _, root := range []string{l.root, audittest.CopyCP(t, l.root), audittest.CopyTar(t, l.root)} {
			for _, s := range subjects {
				rep := audittest.Audit(t, root, s.d)
				audittest.WantPass(t, rep)
				if rep.Kind != s.kind || rep.Recovered != s.recovered {
					t.Fatalf("%s in %s: kind %s recovered %v", s.name, root, rep.Kind, rep.Recovered)
				}
			}
		}
	})
	t.Run("preflights hold the version read", func(t *testing.T) {
		for _, d := range []digest.Digest{l.preStraight, l.preRecovered, l.otherTarget} {
			rep := audittest.Audit(t, l.root, d)
			if c, ok := audittest.CheckOf(rep, "versions"); !ok || !c.OK {
				t.Fatalf("preflight %s: versions check %+v %v", d, c, ok)
			}
		}
	})
	t.Run("recovered receipt audits the earlier attempt", func(t *testing.T) {
		rep := audittest.Audit(t, l.root, l.recovered)
		for _, name := range []string{"intent.execs", "intent.identity[0]", "intent.dry-run output"} {
			if c, ok := audittest.CheckOf(rep, name); !ok || !c.OK {
				t.Fatalf("check %s: %+v %v", name, c, ok)
			}
		}
	})
	t.Run("no credential", func(t *testing.T) {
		secrets := cluster.Secrets()
		for _, p := range l.fx.Snap.Paths() {
			for _, s := range secrets {
				if len(s) > 0 && bytes.Contains(l.fx.Snap[p], s) {
					t.Fatalf("a credential appears in %s", p)
				}
			}
		}
		if where, ok := l.captured.Secretless(); !ok {
			t.Fatalf("the captured store: %s", where)
		}
		for _, s := range subjects {
			js, _ := json.Marshal(audittest.Audit(t, l.root, s.d))
			for _, sec := range secrets {
				if len(sec) > 0 && bytes.Contains(js, sec) {
					t.Fatalf("a credential appears in the audit report of %s", s.name)
				}
			}
		}
	})
	t.Run("no network, no program", func(t *testing.T) {
		for _, s := range subjects[:3] {
			audittest.NoNetworkNoProgram(t, l.root, string(s.d))
		}
	})
	// The exhaustive flip sweep runs offline on the committed capture of such a store (package
	// audit); here every object of the fresh straight receipt is flipped at 66 spread positions
	// (at its first and last byte under -race, which makes each audit ten times slower), and
	// every object of the recovered one is damaged in every other class.
	t.Run("tamper every object", func(t *testing.T) {
		flips := audittest.Sampled
		if raceEnabled || testing.Short() {
			flips = audittest.Ends
		}
		n := audittest.TamperEveryObject(t, l.fx.Snap, l.fx.Roots.Receipt, flips)
		n += audittest.TamperEveryObject(t, l.fx.Snap, l.fx.Roots.RecoveredReceipt, nil)
		t.Logf("%d tampered audits", n)
	})
	t.Run("rewrites", func(t *testing.T) { audittest.RunRewrites(t, l.fx, audittest.Cases()) })
	t.Run("version rewrites", func(t *testing.T) { audittest.RunRewrites(t, l.fx, audittest.VersionCases()) })
	t.Run("index", func(t *testing.T) { audittest.RunIndexTampers(t, l.fx) })
	if *update {
		dir := "../testdata/store"
		l.captured.WriteTo(t, dir)
		t.Logf("wrote %s: %d files", dir, len(l.captured))
	}
}

// TestLive1000 produces the receipt of a 1,000-resource release (the four workloads and 996
// ConfigMaps) for BenchmarkAudit1000. It runs with -update, which commits the store, or with
// QL3_AUDIT_1000=1.
func TestLive1000(t *testing.T) {
	if !*update && os.Getenv("QL3_AUDIT_1000") == "" {
		t.Skip("run with -update or QL3_AUDIT_1000=1")
	}
	testcluster.Need(t)
	root := filepath.Join(audittest.PrivateDir(t), "store")
	b := newBed(t, root, "qinglong-1000", audittest.Unlocked1000)
	_, rc := b.mustApply()
	rep := audittest.Audit(t, root, rc.Receipt)
	audittest.WantPass(t, rep)
	if n := len(audittest.Decode[evidence.Receipt](t, audittest.Open(t, root), evidence.Descriptor{
		MediaType: evidence.MediaTypeReceipt, Digest: rc.Receipt, Size: sizeOf(t, root, rc.Receipt)}).Objects); n != 1000 {
		t.Fatalf("the receipt lists %d objects, want 1000", n)
	}
	snap := audittest.Capture(t, root)
	if where, ok := snap.Secretless(); !ok {
		t.Fatal(where)
	}
	t.Logf("1000-resource receipt %s: %d objects, %d bytes in its closure", rc.Receipt, rep.Objects, rep.Bytes)
	if *update {
		snap.WriteTo(t, "../testdata/store-1000")
	}
}

func sizeOf(t *testing.T, root string, d digest.Digest) int64 {
	fi, err := os.Stat(audittest.BlobPath(root, d))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
