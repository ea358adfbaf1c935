package materialize

import (
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// edited returns the release's unlocked manifest with each old replaced by new exactly once,
// failing the test when old does not occur exactly once (so no vector silently tests nothing).
func edited(t *testing.T, pairs ...string) []byte {
	t.Helper()
	s := string(readRelease(t, "unlocked.yaml"))
	for i := 0; i < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			t.Fatalf("%q occurs %d times in unlocked.yaml", pairs[i], n)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

const (
	apiMeta    = "  name: qinglong-api\n  namespace: qinglong\n"
	apiRole    = "    qinglong.io/role: api\n"
	apiImage   = "image: ghcr.io/qinglong/qinglong-api:3.4.1"
	apiPorts   = "          ports:\n            - name: http\n              containerPort: 8080\n              protocol: TCP\n"
	cmData     = "data:\n  QL_API_URL:"
	svcMeta    = "  name: qinglong-web\n  namespace: qinglong\n  labels:\n    app.kubernetes.io/name: qinglong\n    app.kubernetes.io/component: web\n    app.kubernetes.io/part-of: qinglong\nspec:\n  type"
	apiTplSpec = "    spec:\n      automountServiceAccountToken: false\n      securityContext:\n        runAsNonRoot: true\n        runAsUser: 10001\n        seccompProfile:\n          type: RuntimeDefault\n      containers:\n        - name: api\n"
)

func TestMaterializeRefusals(t *testing.T) {
	cm := string(readRelease(t, "unlocked.yaml"))
	cm = cm[:strings.Index(cm, "---\n")]
	deployment := func(role, kindLine string) string {
		s := string(readRelease(t, "unlocked.yaml"))
		s = s[strings.Index(s, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: qinglong-"+role):]
		s = s[:strings.Index(s[4:], "---\n")+4]
		return strings.Replace(s, "apiVersion: apps/v1\nkind: Deployment\n", kindLine, 1)
	}
	vectors := []struct {
		name     string      // what is wrong
		manifest []byte      // the unlocked manifest
		code     refuse.Code // the expected reason code
	}{
		{"empty", nil, CodeManifestSize},
		{"over 8 MiB", []byte("a: " + strings.Repeat("x", MaxManifestBytes)), CodeManifestSize},
		{"json stream", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`), CodeManifestSyntax},
		{"bad separator", edited(t, "---\napiVersion: v1\nkind: Service", "--- x\napiVersion: v1\nkind: Service"), CodeManifestSyntax},
		{"not yaml", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: a: b"), CodeManifestSyntax},
		{"invalid utf-8", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: \xff"), CodeManifestSyntax},
		{"carriage return inside a line", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: in\rfo"), CodeManifestSyntax},
		{"line separator", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: in\u2028fo"), CodeManifestSyntax},
		{"tab indentation", edited(t, "  QL_LOG_LEVEL: info", "\tQL_LOG_LEVEL: info"), CodeManifestSyntax},
		{"directive", append([]byte("%YAML 1.1\n---\n"), readRelease(t, "unlocked.yaml")...), CodeManifestSyntax},
		{"document end marker", edited(t, "  QL_SCHEDULER_TICK: 30s\n", "  QL_SCHEDULER_TICK: 30s\n...\n"), CodeManifestSyntax},
		{"explicit key", edited(t, "  QL_LOG_LEVEL: info", "  ? QL_LOG_LEVEL\n  : info"), CodeManifestSyntax},
		{"multi-line flow", edited(t, `args: ["api"]`, "args: [\"api\",\n            \"x\"]"), CodeManifestSyntax},
		{"block scalar on its own line", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL:\n    |\n    info"), CodeManifestSyntax},
		{"anchor", edited(t, "  replicas: 0\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api", "  replicas: &r 0\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api"), CodeManifestAnchor},
		{"anchor on a key", edited(t, "  QL_LOG_LEVEL: info", "  &k QL_LOG_LEVEL: info"), CodeManifestAnchor},
		{"anchor on a mapping", edited(t, cmData, "data: &d\n  QL_API_URL:"), CodeManifestAnchor},
		{"anchor in a sequence", edited(t, `args: ["api"]`, "args:\n            - &a api"), CodeManifestAnchor},
		{"alias", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: *x"), CodeManifestAnchor},
		{"alias in flow", edited(t, `args: ["api"]`, `args: ["api", *a]`), CodeManifestAnchor},
		{"core tag", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: !!str info"), CodeManifestTag},
		{"custom tag", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: !vault info"), CodeManifestTag},
		{"tag in flow", edited(t, `args: ["api"]`, `args: [!!str api]`), CodeManifestTag},
		{"merge key", edited(t, "  QL_LOG_LEVEL: info", "  <<: {QL_LOG_LEVEL: info}"), CodeManifestMergeKey},
		{"quoted merge key", edited(t, "  QL_LOG_LEVEL: info", "  \"<<\": info"), CodeManifestMergeKey},
		{"merge key in flow", edited(t, `args: ["api"]`, `args: [{<<: {a: b}}]`), CodeManifestMergeKey},
		{"duplicate key", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: info\n  QL_LOG_LEVEL: debug"), CodeManifestDuplicateKey},
		{"scalar document", append([]byte("just text\n---\n"), readRelease(t, "unlocked.yaml")...), CodeManifestDocument},
		{"list document", append([]byte("- a\n---\n"), readRelease(t, "unlocked.yaml")...), CodeManifestDocument},
		{"no apiVersion", edited(t, "apiVersion: v1\nkind: ConfigMap", "kind: ConfigMap"), CodeManifestDocument},
		{"no kind", edited(t, "apiVersion: v1\nkind: ConfigMap", "apiVersion: v1"), CodeManifestDocument},
		{"kind a number", edited(t, "kind: ConfigMap", "kind: 7"), CodeManifestDocument},
		{"no metadata.name", edited(t, "metadata:\n  name: qinglong-config\n", "metadata:\n"), CodeManifestDocument},
		{"metadata not an object", edited(t, "metadata:\n  name: qinglong-config\n  namespace: qinglong\n  labels:\n    app.kubernetes.io/name: qinglong\n    app.kubernetes.io/part-of: qinglong\n", "metadata: qinglong-config\n"), CodeManifestDocument},
		{"namespace a number", edited(t, "metadata:\n  name: qinglong-config\n  namespace: qinglong\n", "metadata:\n  name: qinglong-config\n  namespace: 7\n"), CodeManifestDocument},
		{"kind List", edited(t, "kind: ConfigMap", "kind: List"), CodeManifestList},
		{"kind ConfigMapList", edited(t, "kind: ConfigMap", "kind: ConfigMapList"), CodeManifestList},
		{"items member", edited(t, cmData, "items: []\ndata:\n  QL_API_URL:"), CodeManifestList},
		{"Secret", edited(t, "kind: ConfigMap", "kind: Secret"), CodeManifestSecret},
		{"secret in other case", edited(t, "kind: ConfigMap", "kind: secret"), CodeManifestSecret},
		{"workload kind case", edited(t, "kind: Deployment\nmetadata:\n  name: qinglong-web", "kind: deployment\nmetadata:\n  name: qinglong-web"), CodeWorkloadKind},
		{"workload apiVersion", []byte(cm + deployment("api", "apiVersion: extensions/v1beta1\nkind: Deployment\n")), CodeWorkloadKind},
		{"no pod spec", edited(t, apiTplSpec, "    spec: {}\n  x:\n      containers:\n        - name: api\n"), CodeWorkloadNoContainers},
		{"no containers", []byte(cm + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: q\n  annotations:\n    qinglong.io/role: api\nspec:\n  containers: []\n"), CodeWorkloadNoContainers},
		{"containers not a list", []byte(cm + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: q\nspec:\n  containers: {}\n"), CodeWorkloadShape},
		{"container without image", edited(t, "          "+apiImage+"\n", ""), CodeWorkloadShape},
		{"container without name", edited(t, "        - name: api\n          "+apiImage, "        - "+apiImage), CodeWorkloadShape},
		{"pod spec not an object", []byte(cm + "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: q\nspec:\n  template: x\n"), CodeWorkloadShape},
		{"annotations not an object", edited(t, "  annotations:\n"+apiRole, "  annotations: api\n"), CodeWorkloadShape},
		{"workload without namespace", edited(t, apiMeta, "  name: qinglong-api\n"), CodeWorkloadNamespace},
		{"no role annotation", edited(t, apiRole, "    qinglong.io/team: api\n"), CodeRoleAnnotationMissing},
		{"role not a string", edited(t, apiRole, "    qinglong.io/role: 7\n"), CodeWorkloadShape},
		{"unknown role", edited(t, apiRole, "    qinglong.io/role: worker\n"), CodeRoleUnknown},
		{"duplicate role", edited(t, "    qinglong.io/role: runner\n", "    qinglong.io/role: api\n"), CodeRoleDuplicate},
		{"role order", edited(t, "    qinglong.io/role: scheduler\n", "    qinglong.io/role: runner\n"), CodeRoleOrder},
		{"missing role", []byte(cm + deployment("api", "apiVersion: apps/v1\nkind: Deployment\n") + deployment("scheduler", "apiVersion: apps/v1\nkind: Deployment\n")), CodeRoleMissing},
		{"no workloads", []byte(cm), CodeRoleMissing},
		{"fifth workload", append(readRelease(t, "unlocked.yaml"), []byte(deployment("web", "apiVersion: apps/v1\nkind: StatefulSet\n"))...), CodeRoleDuplicate},
		{"role on a service", edited(t, svcMeta, strings.Replace(svcMeta, "  labels:", "  annotations:\n    qinglong.io/role: web\n  labels:", 1)), CodeRoleMisplaced},
		{"preset release annotation", edited(t, apiRole, apiRole+"    qinglong.io/release-version: 3.4.0\n"), CodeAnnotationPreset},
		{"preset annotation off a workload", edited(t, "metadata:\n  name: qinglong-config\n", "metadata:\n  name: qinglong-config\n  annotations:\n    qinglong.io/catalog-digest: x\n"), CodeAnnotationPreset},
		{"pinned image", edited(t, apiImage, "image: ghcr.io/qinglong/qinglong-api@sha256:"+hex64), CodeImagePinned},
		{"tag and digest", edited(t, apiImage, apiImage+"@sha256:"+hex64), CodeImagePinned},
		{"foreign image", edited(t, apiImage, "image: docker.io/library/nginx:1.27"), CodeImageInvalid},
		{"upper-case image", edited(t, apiImage, "image: ghcr.io/qinglong/Qinglong-api:3.4.1"), CodeImageInvalid},
		{"empty tag", edited(t, apiImage, `image: "ghcr.io/qinglong/qinglong-api:"`), CodeImageInvalid},
		{"foreign init container", edited(t, apiTplSpec, apiTplSpec[:strings.Index(apiTplSpec, "      containers:")]+"      initContainers:\n        - name: init\n          image: busybox\n      containers:\n        - name: api\n"), CodeImageInvalid},
		{"other role's repository", edited(t, apiImage, "image: ghcr.io/qinglong/qinglong-web:3.4.1"), CodeImageRepository},
		{"image volume", edited(t, apiTplSpec, apiTplSpec[:strings.Index(apiTplSpec, "      containers:")]+"      volumes:\n        - name: v\n          image:\n            reference: busybox\n      containers:\n        - name: api\n"), CodeImageVolume},
		{"stray in a config map", edited(t, "  QL_LOG_LEVEL: info", "  QL_IMAGE: ghcr.io/qinglong/qinglong-api:3.4.1"), CodeStrayReference},
		{"stray in upper case", edited(t, "  QL_LOG_LEVEL: info", "  QL_IMAGE: GHCR.IO/QINGLONG/x"), CodeStrayReference},
		{"stray in a key", edited(t, "  QL_LOG_LEVEL: info", "  ghcr.io/qinglong/x: info"), CodeStrayReference},
		{"stray in a workload env", edited(t, "              value: api\n", "              value: ghcr.io/qinglong/qinglong-api\n"), CodeStrayReference},
		{"stray in a workload label", edited(t, apiRole, apiRole+"    note: pulled from ghcr.io/qinglong/qinglong-api\n"), CodeStrayReference},
		{"value the writer leaves plain: =", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: \"=\""), CodeAmbiguousString},
		{"value the writer leaves plain: <<", edited(t, "  QL_LOG_LEVEL: info", "  QL_LOG_LEVEL: '<<'"), CodeAmbiguousString},
		{"key the writer leaves plain: =", edited(t, "  QL_LOG_LEVEL: info", "  \"=\": info"), CodeAmbiguousString},
		{"pod template in a custom resource", []byte(cm + "---\napiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\n  namespace: q\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          image: busybox\n"), CodePodSpecElsewhere},
		{"container list in a config map", edited(t, "  QL_LOG_LEVEL: info", "  containers: [a]"), CodePodSpecElsewhere},
		{"containers away from the pod spec", edited(t, "  replicas: 0\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api", "  replicas: 0\n  initContainers: []\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api"), CodePodSpecElsewhere},
		{"pod template inside a pod spec", edited(t, apiTplSpec, apiTplSpec[:strings.Index(apiTplSpec, "      containers:")]+"      template:\n        spec: {}\n      containers:\n        - name: api\n"), CodePodSpecElsewhere},
		{"release annotation on a pod template", edited(t, "        app.kubernetes.io/component: scheduler\n        app.kubernetes.io/part-of: qinglong\n", "        app.kubernetes.io/component: scheduler\n        app.kubernetes.io/part-of: qinglong\n      annotations:\n        qinglong.io/release-set: x\n"), CodeAnnotationPreset},
		{"role on a pod template", edited(t, "        app.kubernetes.io/component: scheduler\n        app.kubernetes.io/part-of: qinglong\n", "        app.kubernetes.io/component: scheduler\n        app.kubernetes.io/part-of: qinglong\n      annotations:\n        qinglong.io/role: scheduler\n"), CodeAnnotationPreset},
		{"role as a label", edited(t, "    app.kubernetes.io/part-of: qinglong\ndata:", "    app.kubernetes.io/part-of: qinglong\n    qinglong.io/role: api\ndata:"), CodeAnnotationPreset},
		{"top-level members differing in case", edited(t, cmData, "Data: {}\ndata:\n  QL_API_URL:"), CodeManifestDuplicateKey},
		{"metadata members differing in case", edited(t, "metadata:\n  name: qinglong-config\n", "metadata:\n  Name: x\n  name: qinglong-config\n"), CodeManifestDuplicateKey},
		{"duplicate container name", edited(t, apiTplSpec, apiTplSpec[:strings.Index(apiTplSpec, "      containers:")]+"      initContainers:\n        - name: api\n          image: ghcr.io/qinglong/qinglong-api\n      containers:\n        - name: api\n"), CodeWorkloadShape},
		{"float in exponent form", edited(t, "  replicas: 0\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api", "  replicas: 1.5e300\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api"), CodeNumberForm},
		{"integer beyond int64", edited(t, "  replicas: 0\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api", "  replicas: 99999999999999999999\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: qinglong\n      app.kubernetes.io/component: api"), CodeNumberForm},
		{"nesting too deep", edited(t, cmData, "deep: "+strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1)+"\ndata:\n  QL_API_URL:"), CodeTooDeep},
		{"stray with a port", edited(t, "  QL_LOG_LEVEL: info", "  QL_IMAGE: ghcr.io:443/qinglong/x"), CodeStrayReference},
		{"stray with a trailing dot", edited(t, "  QL_LOG_LEVEL: info", "  QL_IMAGE: GHCR.IO./QingLong/x"), CodeStrayReference},
		{"stray organisation alone", edited(t, "  QL_LOG_LEVEL: info", "  QL_REGISTRY: ghcr.io/qinglong"), CodeStrayReference},
		{"long key the writer cannot round-trip", edited(t, "  QL_LOG_LEVEL: info", "  "+strings.Repeat("k", 200)+": info"), CodeOutputCheck},
	}
	catalog := readRelease(t, "catalog.json")
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			_, err := Materialize(catalog, v.manifest)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("got %s (%v), want %s", got, err, v.code)
			}
		})
	}
}
