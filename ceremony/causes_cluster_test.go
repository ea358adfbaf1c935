package ceremony_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// goldenEnv, when set, makes the cause tests write the stderr each refused step stored to
// verdict/kubeout/testdata/stderr, the real-kubectl texts kubeout's table test reads.
const goldenEnv = "QL3_UPDATE_GOLDEN"

// causeBed is a bed on cluster c (the package's or a test's own) whose end-of-test check scans
// for c's credentials and for extra ones the test made (ServiceAccount tokens).
func causeBed(t *testing.T, c *testcluster.Cluster, createNamespace bool, extra *[][]byte) *bed {
	t.Helper()
	mode := ceremonytest.NoNamespace
	if createNamespace {
		mode = ceremonytest.CreateNamespace
	}
	b := &bed{t: t, Release: ceremonytest.NewRelease(t, c, ceremonytest.ReleaseOptions{
		Namespace: fmt.Sprintf("ql3-causes-%d", namespaces.Add(1)), NamespaceMode: mode})}
	t.Cleanup(func() {
		secrets := c.Secrets()
		// The shared cluster starts at the first testcluster.Need: the fault grid runs on clusters
		// of its own and may never start it.
		if cluster != nil && cluster != c {
			secrets = append(secrets, cluster.Secrets()...)
		}
		if extra != nil {
			secrets = append(secrets, *extra...)
		}
		scan := func(where string, data []byte) {
			for _, s := range secrets {
				if len(s) > 0 && bytes.Contains(data, s) {
					t.Errorf("a credential appears in %s", where)
					return
				}
			}
		}
		scan("the ceremony's output and errors", b.out.Bytes())
		b.checkStore(b.Store, scan)
	})
	return b
}

var reStoreRef = regexp.MustCompile(`see: ql3 store cat (sha256:[0-9a-f]{64})`)

// pointedStderr is the stderr blob that text points at ("see: ql3 store cat <digest>"): ref is
// empty when text points at none.
func (b *bed) pointedStderr(text string) (ref string, stderr []byte, err error) {
	m := reStoreRef.FindStringSubmatch(text)
	if m == nil {
		return "", nil, nil
	}
	st, err := store.Open(b.Store)
	if err != nil {
		return m[1], nil, err
	}
	defer st.Close()
	stderr, err = st.Get(digest.Digest(m[1]))
	return m[1], stderr, err
}

// wantCause asserts the code, that the message names the step and points at a stored stderr
// whose own classification agrees, and returns that stderr (saved as golden name when asked).
func (b *bed) wantCause(err error, code refuse.Code, step, golden string, published int) []byte {
	t := b.t
	t.Helper()
	b.wantRefused(err, code, published)
	r, _ := refuse.As(err)
	msg := r.Message()
	if !strings.HasPrefix(msg, step+": ") || r.Hint == "" {
		t.Fatalf("message %q does not start with step %s, or no hint (%q)", msg, step, r.Hint)
	}
	ref, stderr, serr := b.pointedStderr(msg)
	if ref == "" {
		t.Fatalf("message %q does not point at the stored stderr", msg)
	}
	if serr != nil {
		t.Fatalf("the stderr the message points at: %v", serr)
	}
	want := code
	if code == ceremony.CodeDryRunNamespace {
		want = kubeout.CodeNotFound // the dry-run names the not-found cause with its own code
	}
	if got := kubeout.Classify(stderr).Code; len(stderr) > 0 && got != want {
		t.Fatalf("stored stderr classifies as %q, the refusal is %q:\n%s", got, code, stderr)
	}
	if golden != "" && os.Getenv(goldenEnv) != "" {
		if werr := os.WriteFile(filepath.Join("kubeout", "testdata", "stderr", golden+".txt"), stderr, 0o644); werr != nil {
			t.Fatal(werr)
		}
	}
	return stderr
}

// saKubeconfig returns cluster c's kubeconfig with the token context's user carrying token.
func saKubeconfig(t *testing.T, c *testcluster.Cluster, token string) []byte {
	t.Helper()
	kc := string(c.KubeconfigBytes())
	return []byte(replaceOnce(t, kc, "    token: "+c.Token+"\n", "    token: "+token+"\n"))
}

func kc(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(string(kubectl(t, nil, args...)))
}

// TestCeremonyCauses: each cause a failed step can have, produced on the real API server of the
// package's cluster through a real preflight or apply, refused with its own code.
func TestCeremonyCauses(t *testing.T) {
	testcluster.Need(t)
	// TLS: the kubeconfig trusts another CA than the one that signed the API server.
	t.Run("tls unknown authority", func(t *testing.T) {
		b := causeBed(t, cluster, true, nil)
		other := newCAPEM(t)
		kc := replaceOnce(t, string(cluster.KubeconfigBytes()), base64.StdEncoding.EncodeToString(cluster.CAPEM), base64.StdEncoding.EncodeToString(other))
		b.repin("kubeconfig", []byte(kc))
		_, err := b.preflight()
		b.wantCause(err, kubeout.CodeTLS, evidence.StepIdentity, "tls-unknown-authority", 0)
		if !strings.Contains(err.Error(), "not signed by the kubeconfig's certificate authority") {
			t.Fatalf("message %q", err)
		}
	})

	// 401: a bound token of a ServiceAccount deleted after the token was made.
	t.Run("unauthorized deleted service account", func(t *testing.T) {
		var extra [][]byte
		b := causeBed(t, cluster, true, &extra)
		kc(t, "create", "serviceaccount", "gone", "-n", b.Namespace)
		token := kc(t, "create", "token", "gone", "-n", b.Namespace)
		extra = append(extra, []byte(token))
		kc(t, "delete", "serviceaccount", "gone", "-n", b.Namespace)
		b.repin("kubeconfig", saKubeconfig(t, cluster, token))
		b.Set("kubeconfig", "context", cluster.TokenContext)
		_, err := b.preflight()
		b.wantCause(err, kubeout.CodeUnauthorized, evidence.StepIdentity, "unauthorized", 0)
	})

	// 403: a ServiceAccount that may read kube-system and get, list and create in the namespace,
	// but not patch: the server-side apply dry-run is refused, naming the verb and resource.
	t.Run("forbidden without patch", func(t *testing.T) {
		var extra [][]byte
		b := causeBed(t, cluster, true, &extra)
		ns, sa := b.Namespace, "no-patch"
		kc(t, "create", "serviceaccount", sa, "-n", ns)
		kc(t, "create", "role", sa, "-n", ns, "--verb=get,list,create", "--resource=configmaps,services,deployments.apps")
		kc(t, "create", "rolebinding", sa, "-n", ns, "--role="+sa, "--serviceaccount="+ns+":"+sa)
		kc(t, "create", "clusterrole", ns+"-identity-read", "--verb=get", "--resource=namespaces", "--resource-name=kube-system")
		kc(t, "create", "clusterrolebinding", ns+"-"+sa, "--clusterrole="+ns+"-identity-read", "--serviceaccount="+ns+":"+sa)
		token := kc(t, "create", "token", sa, "-n", ns)
		extra = append(extra, []byte(token))
		b.repin("kubeconfig", saKubeconfig(t, cluster, token))
		b.Set("kubeconfig", "context", cluster.TokenContext)
		_, err := b.preflight()
		b.wantCause(err, kubeout.CodeForbidden, evidence.StepDryRun, "forbidden-patch", 0)
		if !strings.Contains(err.Error(), "forbids the kubeconfig's user to patch configmaps") || strings.Contains(err.Error(), sa) {
			t.Fatalf("message %q does not name verb and resource, or names the user", err)
		}
	})

	// Not found at the dry-run: the namespace is missing (the dry-run's own code, kept).
	t.Run("namespace missing", func(t *testing.T) {
		b := causeBed(t, cluster, false, nil)
		_, err := b.preflight()
		b.wantCause(err, ceremony.CodeDryRunNamespace, evidence.StepDryRun, "notfound-namespace", 0)
	})

	// Not found at the convergence read: an applied object deleted right after the apply.
	t.Run("object deleted before the convergence read", func(t *testing.T) {
		b := causeBed(t, cluster, true, nil)
		pre, err := b.preflight()
		if err != nil {
			t.Fatal(err)
		}
		defer ceremony.SetAfterStep(func(step string) {
			if step == evidence.StepApply {
				kc(t, "delete", "configmap", "qinglong-config", "-n", b.Namespace)
			}
		})()
		_, err = b.apply(b.applyFile(string(pre.Preflight)))
		b.wantCause(err, kubeout.CodeNotFound, evidence.StepConvergence, "notfound-object", 1)
		wantPartialHint(t, err)
		if !strings.Contains(err.Error(), "configmaps qinglong-config does not exist") {
			t.Fatalf("message %q", err)
		}
	})
}

// TestCeremonyCausesFaults: the causes that take the cluster down, on a cluster of the test's own
// (kube-apiserver answers 504 after 5 s rather than 60 s), each restored before the next; the
// last preflight passes on the restored cluster.
func TestCeremonyCausesFaults(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	c := ownCluster(t, 5*time.Second)
	uid := c.KubeSystemUID
	preflight := func(b *bed, timeout time.Duration) error {
		_, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: b.WriteCommand("preflight.json", evidence.CommandPreflight, ""),
			StepTimeout: timeout, Progress: &b.out})
		b.note(err)
		return err
	}
	vectors := []struct {
		name, golden  string
		fault, repair func(context.Context) error
		timeout       time.Duration
		code          refuse.Code
	}{
		// Nothing listens on the server's port.
		{"connection refused", "connection-refused", c.StopAPIServer, c.StartAPIServer, time.Minute, kubeout.CodeConnectionRefused},
		// The API server accepts the connection (the kernel does) and never answers: ql3 kills
		// kubectl at the step timeout.
		{"timeout", "", c.PauseAPIServer, c.ResumeAPIServer, 3 * time.Second, kubeout.CodeTimeout},
		// etcd is gone behind a live API server: it answers with a server error.
		{"server error", "server-error-etcd-down", c.StopEtcd, c.StartEtcd, time.Minute, kubeout.CodeServerError},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := causeBed(t, c, true, nil)
			if err := v.fault(ctx); err != nil {
				t.Fatal(err)
			}
			err := preflight(b, v.timeout)
			if rerr := v.repair(ctx); rerr != nil {
				t.Fatal(rerr)
			}
			b.wantCause(err, v.code, evidence.StepIdentity, v.golden, 0)
			if c.KubeSystemUID != uid {
				t.Fatalf("kube-system uid %s after the repair, was %s", c.KubeSystemUID, uid)
			}
			if err := preflight(b, time.Minute); err != nil {
				t.Fatalf("preflight on the restored cluster: %v", err)
			}
		})
	}
}

// newCAPEM makes a self-signed CA certificate that signed nothing the cluster uses.
func newCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "another-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestCeremonyRecipeKubeconfig: the kubeconfig of the recipe in docs/kubeconfig.md (a dedicated
// ServiceAccount with get, create and patch in the namespace and get on the namespaces kube-system and
// the release's own, for the identity and namespace reads, a token from
// kubectl create token, server and CA from kubectl config view --minify --flatten, everything
// inline) passes the policy, and a preflight and an apply with it succeed.
func TestCeremonyRecipeKubeconfig(t *testing.T) {
	testcluster.Need(t)
	var extra [][]byte
	b := causeBed(t, cluster, true, &extra)
	ns, sa := b.Namespace, "ql3-deployer"
	kc(t, "create", "serviceaccount", sa, "-n", ns)
	kc(t, "create", "role", sa, "-n", ns, "--verb=get,create,patch", "--resource=configmaps,secrets,serviceaccounts,services,deployments.apps")
	kc(t, "create", "rolebinding", sa, "-n", ns, "--role="+sa, "--serviceaccount="+ns+":"+sa)
	kc(t, "create", "clusterrole", "ql3-namespace-read-"+ns, "--verb=get", "--resource=namespaces", "--resource-name=kube-system", "--resource-name="+ns)
	kc(t, "create", "clusterrolebinding", "ql3-namespace-read-"+ns+"-"+sa, "--clusterrole=ql3-namespace-read-"+ns, "--serviceaccount="+ns+":"+sa)
	token := kc(t, "create", "token", sa, "-n", ns, "--duration=1h")
	extra = append(extra, []byte(token))
	server := kc(t, "config", "view", "--minify", "--flatten", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := kc(t, "config", "view", "--minify", "--flatten", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: target\n  cluster:\n    server: " + server +
		"\n    certificate-authority-data: " + ca + "\nusers:\n- name: " + sa + "\n  user:\n    token: " + token +
		"\ncontexts:\n- name: ql3\n  context:\n    cluster: target\n    user: " + sa + "\n"
	b.repin("kubeconfig", []byte(kubeconfig))
	b.Set("kubeconfig", "context", "ql3")
	b.mustApply()
}
