package plan_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/internal/materialize"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/plan"
)

func read(t testing.TB, release, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", release, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// release materializes testdata/<release> (grown by extra objects when extra > 0), checks the
// committed lock when extra is 0, and verifies it.
func release(t testing.TB, name string, extra int) *lock.Result {
	t.Helper()
	l, _, _ := releaseBytes(t, name, extra)
	return l
}

func releaseBytes(t testing.TB, name string, extra int) (*lock.Result, []byte, []byte) {
	t.Helper()
	unlocked := string(read(t, name, "unlocked.yaml"))
	var s strings.Builder
	s.WriteString(unlocked)
	for i := 0; i < extra; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&s, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: qinglong\nspec:\n  selector:\n    app.kubernetes.io/name: qinglong\n  ports:\n    - name: http\n      port: 80\n      targetPort: 8080\n", i)
			continue
		}
		fmt.Fprintf(&s, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-%d\n  namespace: qinglong\ndata:\n  QL_LOG_LEVEL: info\n  QL_RELEASE: %q\n", i, name)
	}
	rel, err := materialize.Materialize(read(t, name, "catalog.json"), []byte(s.String()))
	if err != nil {
		t.Fatalf("materialize %s: %v", name, err)
	}
	if extra == 0 && (!bytes.Equal(rel.Manifest, read(t, name, "locked.yaml")) || !bytes.Equal(rel.Report, read(t, name, "lock-report.json"))) {
		t.Fatalf("testdata/%s/locked.yaml and lock-report.json are not what ql3 lock materialize writes", name)
	}
	l, err := lock.Verify(rel.Manifest, rel.Report)
	if err != nil {
		t.Fatalf("verify %s: %v", name, err)
	}
	return l, rel.Manifest, rel.Report
}

// mem is a Source over blobs held in memory; like the store it refuses an absent object.
type mem map[evidence.Descriptor][]byte

func (m mem) GetDescriptor(d evidence.Descriptor) ([]byte, error) {
	b, ok := m[d]
	if !ok {
		return nil, refuse.New(store.CodeObjectNotFound, "no object %s", d.Digest)
	}
	return b, nil
}

// stored is a previous release as a store holds it: its manifest and lock report blobs and a
// receipt binding them, listing its objects with uids.
func stored(t testing.TB, name string, extra int) (mem, evidence.Descriptor, *evidence.Receipt) {
	t.Helper()
	l, man, rep := releaseBytes(t, name, extra)
	md := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: evidence.FromBytes(man), Size: int64(len(man))}
	rd := evidence.Descriptor{MediaType: evidence.MediaTypeLockReport, Digest: evidence.FromBytes(rep), Size: int64(len(rep))}
	rc := &evidence.Receipt{Manifest: md, LockReport: rd, Objects: live(l), ClusterUID: "c", FinishedAt: "2026-01-02T03:04:05Z",
		Lock: evidence.LockBinding{ManifestDigest: md.Digest, ReportDigest: l.ReportDigest, ReleaseVersion: l.ReleaseVersion}}
	return mem{md: man, rd: rep}, evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: evidence.FromBytes([]byte(name)), Size: 1}, rc
}

// live is what a receipt of l lists: its objects with uids.
func live(l *lock.Result) []evidence.LiveObject {
	out := uids(len(l.Objects))
	for i, o := range l.Objects {
		out[i].APIVersion, out[i].Kind, out[i].Namespace, out[i].Name = o.APIVersion, o.Kind, o.Namespace, o.Name
	}
	return out
}

func uids(n int) []evidence.LiveObject {
	out := make([]evidence.LiveObject, n)
	for i := range out {
		out[i].UID = fmt.Sprintf("uid-%d", i)
	}
	return out
}

// The committed release 3.4.2 against 3.4.1: every image moves, the ConfigMap value changes, the
// Service qinglong-web is left behind and the Service qinglong-api is added.
func TestDiff342Against341(t *testing.T) {
	prev, cur := release(t, "release-3.4.1", 0), release(t, "release-3.4.2", 0)
	if cur.ReleaseVersion != "3.4.2" || len(cur.Objects) != 6 {
		t.Fatalf("release %s, %d objects", cur.ReleaseVersion, len(cur.Objects))
	}
	p := plan.Diff(prev.Objects, uids(len(prev.Objects)), cur)
	if len(p.Added) != 1 || p.Added[0].Kind != "Service" || p.Added[0].Name != "qinglong-api" {
		t.Fatalf("added %+v", p.Added)
	}
	if len(p.Left) != 1 || p.Left[0].Kind != "Service" || p.Left[0].Name != "qinglong-web" {
		t.Fatalf("left %+v", p.Left)
	}
	if len(p.Images) != 4 || len(p.Annotations) != 16 {
		t.Fatalf("%d image moves, %d annotation moves, want 4 and 16", len(p.Images), len(p.Annotations))
	}
	if len(p.Changed) != 5 || p.Unchanged != 0 {
		t.Fatalf("%d changed, %d unchanged", len(p.Changed), p.Unchanged)
	}
	if c := p.Changed[0]; c.Object.Name != "qinglong-config" || c.UID != "uid-0" || strings.Join(c.Paths, ",") != "data.QL_RUNNER_CONCURRENCY" {
		t.Fatalf("configmap change %+v", c)
	}
	var out bytes.Buffer
	plan.WriteText(&out, p)
	for _, want := range []string{
		"plan: add Service qinglong/qinglong-api\n",
		"plan: change ConfigMap qinglong/qinglong-config (uid uid-0): data.QL_RUNNER_CONCURRENCY\n",
		"plan: image Deployment qinglong/qinglong-web spec.template.spec.containers[name=web].image: ghcr.io/qinglong/qinglong-web@sha256:98faf2ca",
		"plan: left behind Service qinglong/qinglong-web: release 3.4.2 lacks it; ql3 never deletes, so it stays in the cluster",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, out.String())
		}
	}
	// The plan is a record ql3 can store.
	d := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: prev.ManifestDigest, Size: 1}
	p.Previous, p.Manifest, p.PreviousMan, p.Target = d, d, d, prev.ManifestDigest
	if _, err := evidence.MarshalRecord(p); err != nil {
		t.Fatal(err)
	}
	// Against itself nothing changes.
	if same := plan.Diff(cur.Objects, uids(6), cur); len(same.Added)+len(same.Changed)+len(same.Left)+len(same.Images)+len(same.Annotations) != 0 || same.Unchanged != 6 {
		t.Fatalf("self plan %+v", same)
	}
}

// TestComputeRereadsAsVerified: the plan Compute makes from the stored previous manifest (read
// again with manifest.Reread) is the plan of the previous release's fully verified lock, for the
// committed releases and for the 1,000-resource ones, and against an unrelated current release.
func TestComputeRereadsAsVerified(t *testing.T) {
	for _, extra := range []int{0, 994} {
		src, pd, rc := stored(t, "release-3.4.1", extra)
		prev := release(t, "release-3.4.1", extra)
		for _, cur := range []*lock.Result{release(t, "release-3.4.2", extra), prev, release(t, "release-3.4.2", 0)} {
			md := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: cur.ManifestDigest, Size: cur.ManifestBytes}
			got, err := plan.Compute(src, pd, rc, cur, md, zero)
			if err != nil {
				t.Fatalf("extra %d: %v", extra, err)
			}
			want := plan.Diff(prev.Objects, rc.Objects, cur)
			want.Previous, want.PreviousRelease, want.PreviousAt, want.PreviousMan = pd, "3.4.1", rc.FinishedAt, rc.Manifest
			want.ClusterUID, want.Manifest, want.Target = "c", md, got.Target
			gb, err := evidence.MarshalRecord(got)
			if err != nil {
				t.Fatal(err)
			}
			wb, _ := evidence.MarshalRecord(want)
			if !bytes.Equal(gb, wb) {
				t.Fatalf("extra %d, release %s: the plan from the re-read manifest differs from the verified lock's", extra, cur.ReleaseVersion)
			}
		}
	}
}

// TestComputeRefusals: a stored previous release the plan cannot stand on is refused with
// PLAN_PREVIOUS_INVALID (or the store's own code for a blob that is not there), for every way
// the receipt and its blobs can disagree.
func TestComputeRefusals(t *testing.T) {
	cur := release(t, "release-3.4.2", 0)
	md := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: cur.ManifestDigest, Size: cur.ManifestBytes}
	put := func(src mem, b []byte) evidence.Descriptor {
		d := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: evidence.FromBytes(b), Size: int64(len(b))}
		src[d] = b
		return d
	}
	// rebind points the receipt at another stored manifest, as a consistent forger would.
	rebind := func(src mem, rc *evidence.Receipt, b []byte) {
		rc.Manifest = put(src, b)
		rc.Lock.ManifestDigest = rc.Manifest.Digest
	}
	cases := []struct {
		name string
		edit func(src mem, rc *evidence.Receipt)
		code refuse.Code
	}{
		{"manifest not the lock binding's", func(_ mem, rc *evidence.Receipt) { rc.Lock.ManifestDigest = cur.ManifestDigest }, plan.CodePreviousInvalid},
		{"manifest under another media type", func(_ mem, rc *evidence.Receipt) { rc.Manifest.MediaType = evidence.MediaTypeLockReport }, plan.CodePreviousInvalid},
		{"lock report under another media type", func(_ mem, rc *evidence.Receipt) { rc.LockReport.MediaType = evidence.MediaTypeManifest }, plan.CodePreviousInvalid},
		{"manifest absent", func(src mem, rc *evidence.Receipt) { delete(src, rc.Manifest) }, store.CodeObjectNotFound},
		{"lock report absent", func(src mem, rc *evidence.Receipt) { delete(src, rc.LockReport) }, store.CodeObjectNotFound},
		{"manifest not yaml", func(src mem, rc *evidence.Receipt) {
			rebind(src, rc, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n"))
		}, plan.CodePreviousInvalid},
		{"manifest a json stream", func(src mem, rc *evidence.Receipt) {
			rebind(src, rc, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`))
		}, plan.CodePreviousInvalid},
		{"manifest a list", func(src mem, rc *evidence.Receipt) {
			rebind(src, rc, []byte("apiVersion: v1\nkind: List\nmetadata: {name: a}\nitems: []\n"))
		}, plan.CodePreviousInvalid},
		{"manifest with a scalar document", func(src mem, rc *evidence.Receipt) {
			rebind(src, rc, append(bytes.Clone(src[rc.Manifest]), "---\njust text\n"...))
		}, plan.CodePreviousInvalid},
		{"manifest empty", func(src mem, rc *evidence.Receipt) { rebind(src, rc, []byte("# nothing\n")) }, plan.CodePreviousInvalid},
		{"manifest with one more object", func(src mem, rc *evidence.Receipt) {
			rebind(src, rc, append(bytes.Clone(src[rc.Manifest]), "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: qinglong}\n"...))
		}, plan.CodePreviousInvalid},
		{"receipt lists one object fewer", func(_ mem, rc *evidence.Receipt) { rc.Objects = rc.Objects[1:] }, plan.CodePreviousInvalid},
		{"receipt lists two objects swapped", func(_ mem, rc *evidence.Receipt) { rc.Objects[0], rc.Objects[1] = rc.Objects[1], rc.Objects[0] }, plan.CodePreviousInvalid},
		{"receipt lists an object in another namespace", func(_ mem, rc *evidence.Receipt) { rc.Objects[2].Namespace = "other" }, plan.CodePreviousInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, pd, rc := stored(t, "release-3.4.1", 0)
			c.edit(src, rc)
			_, err := plan.Compute(src, pd, rc, cur, md, zero)
			if got := refuse.CodeOf(err); got != c.code {
				t.Fatalf("code %q, want %s: %v", got, c.code, err)
			}
		})
	}
	// LoadLineage refuses a receipt that does not decode, and one whose preflight is not one.
	src := mem{}
	bad := evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: evidence.FromBytes([]byte("x")), Size: 2}
	src[bad] = []byte("{}")
	if _, err := plan.LoadLineage(src, []evidence.Descriptor{bad}); refuse.CodeOf(err) != plan.CodeLineageInvalid {
		t.Fatalf("undecodable receipt: %v", err)
	}
	if _, err := plan.PreviousOf(src, bad); refuse.CodeOf(err) != plan.CodeLineageInvalid {
		t.Fatalf("a receipt named as a preflight: %v", err)
	}
}

// TestRereadShares: a document the current release carries byte for byte is not read again.
func TestRereadShares(t *testing.T) {
	_, man, _ := releaseBytes(t, "release-3.4.1", 10)
	cur := release(t, "release-3.4.2", 10)
	objs, err := manifest.Reread(man, cur.Objects)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, o := range objs {
		for _, c := range cur.Objects {
			if len(o.JSON) > 0 && &o.JSON[0] == &c.JSON[0] {
				shared++
			}
		}
	}
	if shared != 5 { // the five Services svc-0, svc-2, ...: the ConfigMaps name their release
		t.Fatalf("%d documents shared, want 5", shared)
	}
}

// BenchmarkPlan1000: the plan of a 1,000-resource release against its 1,000-resource predecessor
// (the goal is under 100 ms).
func BenchmarkPlan1000(b *testing.B) {
	_, man, rep := releaseBytes(b, "release-3.4.1", 994)
	cur := release(b, "release-3.4.2", 994)
	md := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: evidence.FromBytes(man), Size: int64(len(man))}
	rd := evidence.Descriptor{MediaType: evidence.MediaTypeLockReport, Digest: evidence.FromBytes(rep), Size: int64(len(rep))}
	prev := release(b, "release-3.4.1", 994)
	rc := &evidence.Receipt{Manifest: md, LockReport: rd, Objects: live(prev), ClusterUID: "c",
		Lock: evidence.LockBinding{ManifestDigest: md.Digest, ReleaseVersion: "3.4.1"}}
	src := mem{md: man, rd: rep}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		// What the preflight does: read the previous receipt's stored manifest again, then diff.
		p, err := plan.Compute(src, md, rc, cur, md, md.Digest)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Changed) < 500 {
			b.Fatalf("%d changed", len(p.Changed))
		}
	}
}

// BenchmarkPlanDiff1000 is the diff alone, without the previous lock's verification.
func BenchmarkPlanDiff1000(b *testing.B) {
	prev, cur := release(b, "release-3.4.1", 994), release(b, "release-3.4.2", 994)
	ids := uids(len(prev.Objects))
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if p := plan.Diff(prev.Objects, ids, cur); len(p.Changed) < 500 {
			b.Fatalf("%d changed", len(p.Changed))
		}
	}
}

var zero = digest.Digest("sha256:" + strings.Repeat("0", 64))

// cpuPerOp reports the process's CPU time per iteration (cpu-ns/op) beside the wall time: on a
// shared machine the wall time measures the other load as much as the plan.
func cpuPerOp(b *testing.B) func() {
	cpu := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}
