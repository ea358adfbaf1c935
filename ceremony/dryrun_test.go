package ceremony

import (
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/kubeout"
)

func TestClassifyDryRun(t *testing.T) {
	objects := []Resource{
		{APIVersion: "v1", Kind: "ServiceAccount", Name: "ql"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "ql-config"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}
	vectors := []struct {
		name     string
		stdout   string
		stderr   string
		code     refuse.Code
		contains []string // facts the message must name
	}{
		// one conflict, manager with api version, second object conflicts
		{name: "one conflict", stdout: "serviceaccount/ql serverside-applied (server dry run)\n",
			stderr: "error: Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.key\nPlease review the fields above--they currently have other managers.",
			code:   CodeDryRunConflict, contains: []string{"configmap/ql-config", ".data.key", "kubectl-client-side-apply"}},
		// one conflict, bare manager form
		{name: "bare manager", stderr: "error: Apply failed with 1 conflict: conflict with \"other\": .data.key\n",
			code: CodeDryRunConflict, contains: []string{"serviceaccount/ql", ".data.key", `"other"`}},
		// subresource form
		{name: "subresource", stdout: "serviceaccount/ql serverside-applied\nconfigmap/ql-config serverside-applied\n",
			stderr: "error: Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas\n",
			code:   CodeDryRunConflict, contains: []string{"deployment.apps/web", ".spec.replicas", `"kubectl"`}},
		// several conflicts
		{name: "several", stderr: "error: Apply failed with 2 conflicts: conflicts with \"hotfix\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"app\"].image\n",
			code: CodeDryRunConflict, contains: []string{".spec.replicas", `"hotfix"`}},
		// namespace missing
		{name: "namespace", stderr: "Error from server (NotFound): error when creating \"STDIN\": namespaces \"qinglong\" not found\n",
			code: CodeDryRunNamespace, contains: []string{`"qinglong"`}},
		// strict decoding
		{name: "strict", stderr: "Error from server (BadRequest): error when creating \"STDIN\": Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bogus\"\n",
			code: CodeDryRunValidation},
		// server-side apply: an unknown field (stderr captured from kube-apiserver 1.34)
		{name: "typed patch unknown field", stderr: "Error from server: failed to create typed patch object (ns-1/qinglong-api; apps/v1, Kind=Deployment): .spec.template.spec.containers[name=\"api\"].bogusField: field not declared in schema\n",
			code: CodeDryRunValidation, contains: []string{"Deployment", "ns-1/qinglong-api", `bogusField"`}},
		// server-side apply: a value of the wrong type, core group (captured)
		{name: "typed patch wrong type", stderr: "Error from server: failed to create typed patch object (ns-1/qinglong-web; /v1, Kind=Service): .spec.sessionAffinityConfig: expected map, got &{yes-please}\n",
			code: CodeDryRunValidation, contains: []string{"Service", "ns-1/qinglong-web", ".spec.sessionAffinityConfig"}},
		// invalid object
		{name: "invalid", stderr: "The ConfigMap \"ql-config\" is invalid: metadata.name: Invalid value\n", code: CodeDryRunValidation},
		// a cause any step can have: classified by kubeout.Classify after the dry-run's own
		{name: "connection refused", stderr: "Unable to connect to the server: dial tcp 127.0.0.1:1: connect: connection refused\n", code: kubeout.CodeConnectionRefused},
		// kubectl could not download the OpenAPI schema --validate=strict needs (API server
		// stopped; captured from kubectl 1.37.2 by TestCeremonyRealFaults): not a validation verdict
		{name: "openapi download refused", stderr: "error: error validating \"STDIN\": error validating data: failed to download openapi: Get \"https://127.0.0.1:9/openapi/v2?timeout=32s\": dial tcp 127.0.0.1:9: connect: connection refused; if you choose to ignore these errors, turn validation off with --validate=false\n",
			code: kubeout.CodeConnectionRefused},
		{name: "openapi download unknown cause", stderr: "error: error validating \"STDIN\": error validating data: failed to download openapi: something new; if you choose to ignore these errors, turn validation off with --validate=false\n",
			code: CodeDryRunFailed},
		{name: "forbidden", stderr: "Error from server (Forbidden): error when creating \"STDIN\": configmaps \"c\" is forbidden: User \"u\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"n\"\n",
			code: kubeout.CodeForbidden, contains: []string{"to patch configmaps"}},
		// anything else
		{name: "other", stderr: "error: something kubectl has never said\n", code: CodeDryRunFailed},
		// empty stderr
		{name: "empty", code: CodeDryRunFailed},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			errDigest := digest.FromBytes([]byte(v.stderr))
			err := classifyDryRun("dry-run", 1, []byte(v.stdout), []byte(v.stderr), errDigest, objects)
			if refuse.CodeOf(err) != v.code {
				t.Fatalf("code %q, want %q: %v", refuse.CodeOf(err), v.code, err)
			}
			for _, s := range append(v.contains, "dry-run: ", "see: ql3 store cat "+string(errDigest)) {
				if !strings.Contains(err.Msg, s) {
					t.Fatalf("message %q lacks %q", err.Msg, s)
				}
			}
			if v.code == CodeDryRunConflict && err.Hint == "" {
				t.Fatal("conflict without hint")
			}
		})
	}
}

func FuzzParseConflict(f *testing.F) {
	f.Add([]byte("error: Apply failed with 1 conflict: conflict with \"o\" using v1: .data.key\n"))
	f.Add([]byte("Apply failed with 2 conflicts: conflicts with \"h\":\n- .a\n- .b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := parseConflict(b)
		if !ok && (c.Manager != "" || c.Field != "") {
			t.Fatal("fields without a match")
		}
	})
}
