package plan_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/ceremony/plan"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/lock"
	"github.com/qinglong/ql3/internal/materialize"
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

// mem is a Source over blobs held in memory.
type mem map[evidence.Descriptor][]byte

func (m mem) GetDescriptor(d evidence.Descriptor) ([]byte, error) { return m[d], nil }

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
	p := plan.Diff(prev, uids(len(prev.Objects)), cur)
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
	if same := plan.Diff(cur, uids(6), cur); len(same.Added)+len(same.Changed)+len(same.Left)+len(same.Images)+len(same.Annotations) != 0 || same.Unchanged != 6 {
		t.Fatalf("self plan %+v", same)
	}
}

// BenchmarkPlan1000: the plan of a 1,000-resource release against its 1,000-resource predecessor
// (the goal is under 100 ms).
func BenchmarkPlan1000(b *testing.B) {
	_, man, rep := releaseBytes(b, "release-3.4.1", 994)
	cur := release(b, "release-3.4.2", 994)
	md := evidence.Descriptor{MediaType: evidence.MediaTypeManifest, Digest: evidence.FromBytes(man), Size: int64(len(man))}
	rd := evidence.Descriptor{MediaType: evidence.MediaTypeLockReport, Digest: evidence.FromBytes(rep), Size: int64(len(rep))}
	rc := &evidence.Receipt{Manifest: md, LockReport: rd, Objects: uids(1000), ClusterUID: "c"}
	src := mem{md: man, rd: rep}
	b.ReportAllocs()
	for b.Loop() {
		// What the preflight does: verify the previous receipt's stored lock again, then diff.
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
	for b.Loop() {
		if p := plan.Diff(prev, ids, cur); len(p.Changed) < 500 {
			b.Fatalf("%d changed", len(p.Changed))
		}
	}
}
