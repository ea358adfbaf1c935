package kubeout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/refuse"
)

// TestClassifyRealKubectl: stderr texts the real kubectl 1.34.3 printed against the test cluster
// (testdata/stderr, captured by the cluster tests with QL3_UPDATE_GOLDEN=1), one per cause.
func TestClassifyRealKubectl(t *testing.T) {
	vectors := []struct {
		file   string // under testdata/stderr
		code   refuse.Code
		detail string // what Detail must name
	}{
		// The API server stopped: the ceremony's identity read, and a plain get.
		{"connection-refused", CodeConnectionRefused, "refused the connection"},
		{"connection-refused-get", CodeConnectionRefused, "refused the connection"},
		// The API server paused (SIGSTOP), kubectl --request-timeout=2s.
		{"timeout-request-timeout", CodeTimeout, "did not answer in time"},
		// The kubeconfig trusts another CA.
		{"tls-unknown-authority", CodeTLS, "not signed by the kubeconfig's certificate authority"},
		// A token of a deleted ServiceAccount.
		{"unauthorized", CodeUnauthorized, "401"},
		// A ServiceAccount without patch: the dry-run of the six objects.
		{"forbidden-patch", CodeForbidden, "to patch configmaps"},
		// The dry-run into a missing namespace (the ceremony's dry-run names it with its own code).
		{"notfound-namespace", CodeNotFound, "namespaces ql3-causes-1 does not exist"},
		// The convergence read of a deleted ConfigMap.
		{"notfound-object", CodeNotFound, "configmaps qinglong-config does not exist"},
		// etcd stopped behind a live API server (5 s server request timeout): the identity read
		// saw the stream reset, a plain get the 504, a write the 504 in another wording.
		{"server-error-etcd-down", CodeServerError, "5xx"},
		{"server-error-etcd-down-get", CodeServerError, "5xx"},
		{"server-error-etcd-down-create", CodeServerError, "5xx"},
	}
	seen := map[string]bool{}
	for _, v := range vectors {
		t.Run(v.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "stderr", v.file+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			c := Classify(raw)
			if c.Code != v.code || !strings.Contains(c.Detail, v.detail) || c.Hint == "" {
				t.Fatalf("cause %+v, want %s naming %q", c, v.code, v.detail)
			}
		})
		seen[v.file+".txt"] = true
	}
	// Every captured text has a vector.
	files, _ := filepath.Glob(filepath.Join("testdata", "stderr", "*.txt"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no vector", f)
		}
	}
}

// TestClassifyForms: the other forms kubectl and the API server print for each cause, and what
// must not be mistaken for one.
func TestClassifyForms(t *testing.T) {
	vectors := []struct {
		name, stderr string
		code         refuse.Code
		detail       string
	}{
		{"tls name mismatch", "Unable to connect to the server: tls: failed to verify certificate: x509: certificate is valid for 10.0.0.1, not 127.0.0.1\n", CodeTLS, "does not name"},
		{"tls expired", "Unable to connect to the server: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2030-01-01T00:00:00Z is after 2029-01-01T00:00:00Z\n", CodeTLS, "expired"},
		{"tls client certificate rejected", "Unable to connect to the server: remote error: tls: bad certificate\n", CodeTLS, "client certificate"},
		{"tls other", "Unable to connect to the server: tls: first record does not look like a TLS handshake\n", CodeTLS, "TLS handshake"},
		{"tls handshake timeout", "Unable to connect to the server: net/http: TLS handshake timeout\n", CodeTimeout, "in time"},
		{"dial i/o timeout", "Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout\n", CodeTimeout, "in time"},
		{"unauthorized short", "error: You must be logged in to the server (Unauthorized)\n", CodeUnauthorized, "401"},
		{"forbidden cluster scope", "Error from server (Forbidden): namespaces \"kube-system\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"kube-system\"\n", CodeForbidden, "to get namespaces"},
		{"forbidden subresource", "Error from server (Forbidden): User \"x\" cannot patch resource \"deployments/scale\" in API group \"apps\" at the cluster scope\n", CodeForbidden, "to patch deployments/scale.apps"},
		{"forbidden not rbac", "Error from server (Forbidden): error when creating \"STDIN\": configmaps \"c\" is forbidden: unable to create new content in namespace n because it is being terminated\n", CodeForbidden, "forbids the request"},
		{"no matches for kind", "error: resource mapping not found for name: \"x\" namespace: \"n\" from \"STDIN\": no matches for kind \"Widget\" in version \"example.com/v1\"\nensure CRDs are installed first\n", CodeNotFound, "kind Widget in version example.com/v1"},
		{"service unavailable", "Error from server (ServiceUnavailable): the server is currently unable to handle the request (get namespaces kube-system)\n", CodeServerError, "5xx"},
		{"internal error naming connection refused", "Error from server (InternalError): Internal error occurred: failed calling webhook \"w.example\": Post \"https://w.svc:443/\": dial tcp 10.0.0.9:443: connect: connection refused\n", CodeServerError, "5xx"},
		{"etcd", "Error from server: etcdserver: request timed out\n", CodeServerError, "5xx"},
		{"unknown", "error: something kubectl has never said\n", "", ""},
		{"empty", "", "", ""},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			c := Classify([]byte(v.stderr))
			if c.Code != v.code || !strings.Contains(c.Detail, v.detail) {
				t.Fatalf("cause %+v, want %q naming %q", c, v.code, v.detail)
			}
		})
	}
}

// TestClassifyEchoesNoSecret: a secret where kubectl prints the user name, the server address, a
// namespace or free text never reaches Detail or Hint; a name that is not an identifier is
// quoted, not trusted.
func TestClassifyEchoesNoSecret(t *testing.T) {
	const secret = "eyJhbGciOiJSUzI1NiIsImtpZCI6InNlY3JldCJ9"
	for _, stderr := range []string{
		"Error from server (Forbidden): configmaps \"c\" is forbidden: User \"" + secret + "\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"" + secret + "\"\n",
		"The connection to the server " + secret + ":6443 was refused - did you specify the right host or port?\n",
		"error: You must be logged in to the server (Unauthorized) " + secret + "\n",
		"Error from server (InternalError): " + secret + "\n",
		"Unable to connect to the server: " + secret + ": x509: certificate signed by unknown authority\n",
		"Error from server (NotFound): secrets \"" + secret + "\" not found\n", // a name: shown, it is no credential, but only in identifier form
	} {
		c := Classify([]byte(stderr))
		if c.Code == "" {
			t.Fatalf("not classified: %q", stderr)
		}
		if strings.Contains(c.Hint, secret) || (c.Code != CodeNotFound && strings.Contains(c.Detail, secret)) {
			t.Fatalf("cause %+v echoes stderr", c)
		}
	}
	c := Classify([]byte("Error from server (NotFound): configmaps \"a\nql3: refused: FORGED\" not found\n"))
	if strings.Contains(c.Detail, "\n") || strings.Contains(c.Detail, "FORGED") {
		t.Fatalf("a forged name reached the message: %+v", c)
	}
	r := Cause{Code: CodeTLS, Detail: "d", Hint: "h"}.Refusal("identity", 1, digest.FromString("x"))
	if r.Code != CodeTLS || r.Msg != "identity: d (kubectl exited 1; see: ql3 store cat "+string(digest.FromString("x"))+")" || r.Hint != "h" {
		t.Fatalf("refusal %+v", r)
	}
}

var causeCodes = map[refuse.Code]bool{"": true, CodeConnectionRefused: true, CodeTimeout: true, CodeTLS: true,
	CodeUnauthorized: true, CodeForbidden: true, CodeNotFound: true, CodeServerError: true}

func FuzzClassify(f *testing.F) {
	// The committed corpus (testdata/fuzz/FuzzClassify) holds the captured real-kubectl texts.
	if m, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzClassify", "*")); len(m) == 0 {
		f.Fatal("committed seed corpus testdata/fuzz/FuzzClassify is missing")
	}
	f.Add([]byte("Error from server (Forbidden): User \"u\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"n\"\n"))
	f.Add([]byte("Error from server (NotFound): configmaps \"c\" not found\n"))
	f.Fuzz(func(t *testing.T, stderr []byte) {
		c := Classify(stderr)
		if !causeCodes[c.Code] {
			t.Fatalf("unknown code %q", c.Code)
		}
		if (c.Code == "") != (c.Detail == "") || (c.Code == "") != (c.Hint == "") {
			t.Fatalf("inconsistent cause %+v", c)
		}
		if strings.ContainsAny(c.Detail, "\n\r\x00") || len(c.Detail) > 400 {
			t.Fatalf("detail not one short line: %q", c.Detail)
		}
		if c != Classify(stderr) {
			t.Fatal("not a function of its input")
		}
	})
}
