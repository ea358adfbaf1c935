package kubeconfig

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// TestCheckAllEveryClass: for every refusal vector, CheckAll lists at least one violation, its
// first is Check's refusal (same code, same message), each carries a code and the recipe hint,
// and none carries a credential. Two runs list the same violations in the same order.
func TestCheckAllEveryClass(t *testing.T) {
	s := newSecrets(t)
	for _, v := range refusals() {
		t.Run(v.name, func(t *testing.T) {
			raw := buildRaw(t, s, v)
			sum, vs := CheckAll(raw, v.context)
			if sum != nil || len(vs) == 0 {
				t.Fatalf("summary %v, %d violations", sum, len(vs))
			}
			if vs[0].Code != v.code {
				t.Fatalf("first violation %v, want %s", vs[0], v.code)
			}
			_, err := Check(raw, v.context)
			if r, ok := refuse.As(err); !ok || r.Code != vs[0].Code || r.Msg != vs[0].Msg {
				t.Fatalf("Check refused %v, CheckAll's first is %v", err, vs[0])
			}
			for _, e := range vs {
				if e.Code == "" || !strings.Contains(e.Hint, RecipeRef) {
					t.Fatalf("violation %v without code or recipe hint (%q)", e, e.Hint)
				}
				assertNoSecrets(t, s, e)
			}
			if again := listing(CheckAll(raw, v.context)); again != listing(nil, vs) {
				t.Fatalf("unstable order:\n%s\n---\n%s", listing(nil, vs), again)
			}
		})
	}
}

func listing(_ any, vs []*refuse.Error) string {
	var b strings.Builder
	for _, e := range vs {
		fmt.Fprintf(&b, "%s: %s\n", e.Code, e.Msg)
	}
	return b.String()
}

// TestCheckAllListsEveryViolation: one file with fourteen violations of eleven classes across
// every list and the selected context; CheckAll names each, in the documented order.
func TestCheckAllListsEveryViolation(t *testing.T) {
	s := newSecrets(t)
	tree := base(s)
	c1, c2 := entry(tree, "clusters", 0, "cluster"), entry(tree, "clusters", 1, "cluster")
	u1, u2 := entry(tree, "users", 0, "user"), entry(tree, "users", 1, "user")
	c1["server"] = "http://127.0.0.1:8080"
	delete(c1, "certificate-authority-data")
	c2["certificate-authority"] = "/tmp/ca.pem"
	c2["insecure-skip-tls-verify"] = false
	c2["proxy-url"] = "http://proxy:3128"
	u1["auth-provider"] = map[string]any{"name": "oidc"}
	u1["token"] = s.token
	u2["exec"] = map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "aws", "interactiveMode": "Never"}
	u2["tokenFile"] = "/tmp/token"
	u2["as"] = "admin"
	raw := render(t, tree)
	lines := strings.Count(string(raw), "\n")
	raw = append(raw, "kind: Config\n"...) // a repeated top-level key on the last line
	want := []struct {
		code refuse.Code
		msg  string
	}{
		{CodeDuplicateKey, fmt.Sprintf("kubeconfig repeats a mapping key at line %d", lines+1)},
		{CodeFileReference, `kubeconfig cluster "c2" sets certificate-authority, which ql3 forbids (context main does not use it)`},
		{CodeInsecure, `kubeconfig cluster "c2" sets insecure-skip-tls-verify, which ql3 forbids (context main does not use it)`},
		{CodeProxy, `kubeconfig cluster "c2" sets proxy-url, which ql3 forbids (context main does not use it)`},
		{CodeAuthProviderForbidden, `kubeconfig user "u1" sets auth-provider, which ql3 forbids (context main uses it)`},
		{CodeImpersonation, `kubeconfig user "u2" sets as, which ql3 forbids (context main does not use it)`},
		{CodeExecForbidden, `kubeconfig user "u2" sets exec, which ql3 forbids (context main does not use it)`},
		{CodeFileReference, `kubeconfig user "u2" sets tokenFile, which ql3 forbids (context main does not use it)`},
		{CodeServerInsecure, `cluster "c1" server is not an https url with a host`},
		{CodeCAMissing, `cluster "c1" has no certificate-authority-data`},
		{CodeAuthAmbiguous, `user "u1" carries 2 credential kinds (clientCertificate and token), exactly one is allowed`},
	}
	sum, vs := CheckAll(raw, "main")
	if sum != nil {
		t.Fatal("a summary beside violations")
	}
	var got, exp strings.Builder
	for _, e := range vs {
		fmt.Fprintf(&got, "%s: %s\n", e.Code, e.Msg)
		assertNoSecrets(t, s, e)
	}
	for _, w := range want {
		fmt.Fprintf(&exp, "%s: %s\n", w.code, w.msg)
	}
	if got.String() != exp.String() {
		t.Fatalf("violations:\n%s\nwant:\n%s", got.String(), exp.String())
	}

	// A context that names neither an existing cluster nor an existing user: both are listed.
	tree = base(s)
	tree["contexts"].([]any)[0].(map[string]any)["context"] = map[string]any{"cluster": "nope", "user": "nobody"}
	_, vs = CheckAll(render(t, tree), "main")
	if len(vs) != 2 || vs[0].Code != CodeContextMissing || vs[1].Code != CodeContextMissing ||
		!strings.Contains(vs[0].Msg, `cluster "nope"`) || !strings.Contains(vs[1].Msg, `user "nobody"`) {
		t.Fatalf("dangling context: %v", vs)
	}

	// Repeated names in two lists, and two repeated keys: each is listed; the decoder's own
	// refusal of the repeated name adds nothing.
	tree = base(s)
	tree["contexts"] = append(tree["contexts"].([]any), map[string]any{"name": "other", "context": map[string]any{"cluster": "c2", "user": "u2"}})
	tree["clusters"] = append(tree["clusters"].([]any), map[string]any{"name": "c1", "cluster": map[string]any{"server": "https://10.0.0.9"}})
	raw = append(render(t, tree), "kind: Config\napiVersion: v1\n"...)
	_, vs = CheckAll(raw, "main")
	var codes []refuse.Code
	for _, e := range vs {
		codes = append(codes, e.Code)
	}
	if fmt.Sprint(codes) != fmt.Sprint([]refuse.Code{CodeDuplicateKey, CodeDuplicateKey, CodeContextAmbiguous, CodeContextAmbiguous}) ||
		!strings.Contains(vs[2].Msg, `clusters names "c1"`) || !strings.Contains(vs[3].Msg, `contexts names "other"`) {
		t.Fatalf("repeated names and keys: %v", vs)
	}

	// A file the policy accepts lists nothing and returns the summary.
	if sum, vs := CheckAll(render(t, base(s)), "main"); sum == nil || len(vs) != 0 {
		t.Fatalf("accepted file: %v %v", sum, vs)
	}
}

// TestRecipeAnchorExists: the hint every kubeconfig refusal carries points to a heading of
// docs/kubeconfig.md (GitHub's anchor of it).
func TestRecipeAnchorExists(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kubeconfig.md")
	if err != nil {
		t.Fatal(err)
	}
	file, anchor, _ := strings.Cut(RecipeRef, "#")
	if file != "docs/kubeconfig.md" {
		t.Fatalf("recipe in %s", file)
	}
	punct := regexp.MustCompile(`[^a-z0-9 -]`)
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			if strings.ReplaceAll(punct.ReplaceAllString(strings.ToLower(h), ""), " ", "-") == anchor {
				return
			}
		}
	}
	t.Fatalf("docs/kubeconfig.md has no heading with anchor %q", anchor)
}
