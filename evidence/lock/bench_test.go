package lock

import (
	"fmt"
	"strings"
	"testing"
)

// bigRelease returns the valid release grown to n resources: its four Deployments, its Service
// and ConfigMap, and n-6 more Services and ConfigMaps of the shape a real release carries.
func bigRelease(b *testing.B, n int) (man, rep []byte) {
	b.Helper()
	man0, rep0 := readValid(b)
	var s strings.Builder
	s.Write(man0)
	for i := 6; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&s, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: qinglong\n  labels:\n    app.kubernetes.io/name: qinglong\n    app.kubernetes.io/instance: svc-%d\nspec:\n  selector:\n    app.kubernetes.io/name: qinglong\n  ports:\n    - name: http\n      port: 80\n      targetPort: 8080\n", i, i)
			continue
		}
		fmt.Fprintf(&s, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-%d\n  namespace: qinglong\ndata:\n  QL_LOG_LEVEL: \"info\"\n  QL_WORKERS: \"4\"\n  settings.json: |\n    {\"retries\": 3, \"timeout\": \"30s\", \"endpoint\": \"http://qinglong.qinglong.svc:80\"}\n", i)
	}
	man = []byte(s.String())
	rep = rederive([]byte(strings.Replace(string(rep0), `"resources": 6`, fmt.Sprintf(`"resources": %d`, n), 1)), man, "")
	if _, err := Verify(man, rep); err != nil {
		b.Fatal(err)
	}
	return man, rep
}

// BenchmarkVerify1000 verifies a lock against a 1,000-resource manifest (about 0.4 MiB).
func BenchmarkVerify1000(b *testing.B) {
	man, rep := bigRelease(b, 1000)
	b.SetBytes(int64(len(man)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(man, rep); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyValid verifies the six-resource valid release.
func BenchmarkVerifyValid(b *testing.B) {
	man, rep := readValid(b)
	b.SetBytes(int64(len(man)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(man, rep); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyReportOnly is the cost of refusing a manifest by its digest: the report is
// parsed and checked in full first.
func BenchmarkVerifyReportOnly(b *testing.B) {
	man, rep := readValid(b)
	man = append([]byte("#\n"), man...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(man, rep); err == nil {
			b.Fatal("accepted")
		}
	}
}
