package kubeconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// secrets are generated per test run so no credential is ever committed.
type secrets struct {
	caPEM, certPEM, keyPEM []byte
	token, password        string
}

func newSecrets(t testing.TB) secrets {
	t.Helper()
	mk := func(cn string, isCA bool) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	ca, _ := mk("test-ca", true)
	cert, key := mk("test-user", false)
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	return secrets{caPEM: ca, certPEM: cert, keyPEM: key, token: hex.EncodeToString(tok), password: "pw-" + hex.EncodeToString(tok[:8])}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// base builds a valid two-cluster, two-user kubeconfig tree; "main" is the selected context.
func base(s secrets) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "main",
		"clusters": []any{
			map[string]any{"name": "c1", "cluster": map[string]any{"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(s.caPEM)}},
			map[string]any{"name": "c2", "cluster": map[string]any{"server": "https://10.0.0.1:6443", "certificate-authority-data": b64(s.caPEM)}},
		},
		"users": []any{
			map[string]any{"name": "u1", "user": map[string]any{"client-certificate-data": b64(s.certPEM), "client-key-data": b64(s.keyPEM)}},
			map[string]any{"name": "u2", "user": map[string]any{"token": s.token}},
		},
		"contexts": []any{
			map[string]any{"name": "main", "context": map[string]any{"cluster": "c1", "user": "u1"}},
			map[string]any{"name": "other", "context": map[string]any{"cluster": "c2", "user": "u2"}},
		},
	}
}

func entry(tree map[string]any, list string, i int, inner string) map[string]any {
	return tree[list].([]any)[i].(map[string]any)[inner].(map[string]any)
}

func render(t testing.TB, tree map[string]any) []byte {
	t.Helper()
	b, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckAccepts(t *testing.T) {
	s := newSecrets(t)
	vectors := []struct {
		name    string               // what the vector exercises
		context string               // context to select
		mutate  func(map[string]any) // edit of the base tree
		want    string               // expected auth kind
		user    string               // expected user
	}{
		{"client certificate", "main", func(map[string]any) {}, evidence.AuthClientCertificate, "u1"},
		{"token", "other", func(map[string]any) {}, evidence.AuthToken, "u2"},
		{"basic", "main", func(m map[string]any) {
			u := entry(m, "users", 0, "user")
			delete(u, "client-certificate-data")
			delete(u, "client-key-data")
			u["username"], u["password"] = "admin", s.password
		}, evidence.AuthBasic, "u1"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			tree := base(s)
			v.mutate(tree)
			raw := render(t, tree)
			sum, err := Check(raw, v.context)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if sum.AuthKind != v.want || sum.User != v.user || sum.Context != v.context {
				t.Fatalf("summary %+v", sum)
			}
			if sum.Digest != digest.FromBytes(raw) || sum.CADigest != digest.FromBytes(s.caPEM) || sum.Schema != evidence.SchemaKubeconfig {
				t.Fatalf("digests %+v", sum)
			}
			if !strings.HasPrefix(sum.Server, "https://") || sum.Cluster == "" {
				t.Fatalf("server %+v", sum)
			}
		})
	}
}

type refusal struct {
	name    string               // what the vector exercises
	context string               // context to select
	mutate  func(map[string]any) // edit of the base tree (nil when raw is set)
	raw     func(secrets) string // literal file text, for shapes a tree cannot express
	code    refuse.Code          // the exact reason code expected
}

func refusals() []refusal {
	setUser := func(i int, k string, v any) func(map[string]any) {
		return func(m map[string]any) { entry(m, "users", i, "user")[k] = v }
	}
	setCluster := func(i int, k string, v any) func(map[string]any) {
		return func(m map[string]any) { entry(m, "clusters", i, "cluster")[k] = v }
	}
	exec := map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true", "interactiveMode": "Never"}
	dupUser := func(s secrets) string {
		return "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: " + b64(s.caPEM) +
			"\nusers:\n- name: u1\n  user:\n    token: " + s.token + "\n    token: " + s.token +
			"\ncontexts:\n- name: main\n  context:\n    cluster: c1\n    user: u1\n"
	}
	return []refusal{
		{"exec in selected user", "main", setUser(0, "exec", exec), nil, CodeExecForbidden},
		{"exec in other user", "main", setUser(1, "exec", exec), nil, CodeExecForbidden},
		{"exec case variant", "main", setUser(1, "Exec", exec), nil, CodeExecForbidden},
		{"auth-provider", "main", setUser(1, "auth-provider", map[string]any{"name": "oidc"}), nil, CodeAuthProviderForbidden},
		{"tokenFile", "main", setUser(1, "tokenFile", "/tmp/token"), nil, CodeFileReference},
		{"client-certificate", "main", setUser(0, "client-certificate", "/tmp/c.pem"), nil, CodeFileReference},
		{"client-key", "main", setUser(1, "client-key", "/tmp/k.pem"), nil, CodeFileReference},
		{"certificate-authority", "main", setCluster(1, "certificate-authority", "/tmp/ca.pem"), nil, CodeFileReference},
		{"insecure in other cluster", "main", setCluster(1, "insecure-skip-tls-verify", true), nil, CodeInsecure},
		{"insecure false still present", "main", setCluster(0, "insecure-skip-tls-verify", false), nil, CodeInsecure},
		{"proxy-url", "main", setCluster(1, "proxy-url", "http://proxy:3128"), nil, CodeProxy},
		{"as", "main", setUser(0, "as", "admin"), nil, CodeImpersonation},
		{"as-uid", "main", setUser(1, "as-uid", "1234"), nil, CodeImpersonation},
		{"as-groups", "main", setUser(0, "as-groups", []any{"system:masters"}), nil, CodeImpersonation},
		{"as-user-extra", "main", setUser(0, "as-user-extra", map[string]any{"k": []any{"v"}}), nil, CodeImpersonation},
		{"empty context argument", "", nil, nil, CodeContextMissing},
		{"context not in file", "absent", nil, nil, CodeContextMissing},
		{"dangling cluster", "main", func(m map[string]any) {
			m["contexts"].([]any)[0].(map[string]any)["context"].(map[string]any)["cluster"] = "nope"
		}, nil, CodeContextMissing},
		{"dangling user", "main", func(m map[string]any) {
			m["contexts"].([]any)[0].(map[string]any)["context"].(map[string]any)["user"] = "nope"
		}, nil, CodeContextMissing},
		{"duplicate context names", "main", func(m map[string]any) {
			m["contexts"] = append(m["contexts"].([]any), map[string]any{"name": "main", "context": map[string]any{"cluster": "c2", "user": "u2"}})
		}, nil, CodeContextAmbiguous},
		{"duplicate user names", "main", func(m map[string]any) {
			m["users"] = append(m["users"].([]any), map[string]any{"name": "u1", "user": map[string]any{"token": "x"}})
		}, nil, CodeContextAmbiguous},
		{"http server", "main", setCluster(0, "server", "http://127.0.0.1:8080"), nil, CodeServerInsecure},
		{"server without host", "main", setCluster(0, "server", "https:///x"), nil, CodeServerInsecure},
		{"no CA", "main", func(m map[string]any) { delete(entry(m, "clusters", 0, "cluster"), "certificate-authority-data") }, nil, CodeCAMissing},
		{"no auth", "main", func(m map[string]any) {
			m["users"].([]any)[0].(map[string]any)["user"] = map[string]any{}
		}, nil, CodeAuthMissing},
		{"half a client certificate", "main", func(m map[string]any) { delete(entry(m, "users", 0, "user"), "client-key-data") }, nil, CodeAuthMissing},
		{"cert and token", "main", func(m map[string]any) { entry(m, "users", 0, "user")["token"] = "t" }, nil, CodeAuthAmbiguous},
		{"token and basic", "other", func(m map[string]any) {
			u := entry(m, "users", 1, "user")
			u["username"], u["password"] = "a", "b"
		}, nil, CodeAuthAmbiguous},
		{"duplicate top-level key", "main", nil, func(s secrets) string {
			return "apiVersion: v1\nkind: Config\nkind: Config\n"
		}, CodeDuplicateKey},
		{"duplicate key in user", "main", nil, dupUser, CodeDuplicateKey},
		{"duplicate key in context", "main", nil, func(s secrets) string {
			return "apiVersion: v1\ncontexts:\n- name: main\n  context:\n    cluster: c1\n    cluster: c2\n"
		}, CodeDuplicateKey},
		{"not yaml", "main", nil, func(secrets) string { return "users: [\n" + "token: {" }, CodeInvalid},
		{"empty", "main", nil, func(secrets) string { return "  \n" }, CodeInvalid},
		{"scalar document", "main", nil, func(secrets) string { return "42\n" }, CodeInvalid},
		{"users not a list", "main", nil, func(secrets) string { return "users: 3\n" }, CodeInvalid},
		{"wrong field type", "main", nil, func(s secrets) string {
			return "apiVersion: v1\nkind: Config\nusers:\n- name: u1\n  user:\n    token: [" + s.token + "]\n"
		}, CodeInvalid},
		{"wrong kind", "main", nil, func(secrets) string { return "apiVersion: v1\nkind: Pod\n" }, CodeInvalid},
	}
}

func TestCheckRefuses(t *testing.T) {
	s := newSecrets(t)
	for _, v := range refusals() {
		t.Run(v.name, func(t *testing.T) {
			raw := buildRaw(t, s, v)
			_, err := Check(raw, v.context)
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q (err %v)", got, v.code, err)
			}
			assertNoSecrets(t, s, err)
		})
	}
}

func buildRaw(t testing.TB, s secrets, v refusal) []byte {
	if v.raw != nil {
		return []byte(v.raw(s))
	}
	tree := base(s)
	if v.mutate != nil {
		v.mutate(tree)
	}
	return render(t, tree)
}

// assertNoSecrets checks every form in which a credential appears in the file.
func assertNoSecrets(t *testing.T, s secrets, err error) {
	t.Helper()
	msg := err.Error()
	var r *refuse.Error
	if e, ok := err.(*refuse.Error); ok {
		r = e
		msg += r.Hint
	}
	forms := []string{s.token, s.password, b64(s.caPEM), b64(s.certPEM), b64(s.keyPEM)}
	for _, p := range [][]byte{s.caPEM, s.certPEM, s.keyPEM} {
		blk, _ := pem.Decode(p)
		forms = append(forms, string(p), b64(blk.Bytes), string(p[30:60]))
	}
	for _, f := range forms {
		if strings.Contains(msg, f) {
			t.Fatalf("error message carries secret bytes: %q", msg)
		}
	}
	if strings.Contains(msg, "BEGIN") {
		t.Fatalf("error message carries pem armour: %q", msg)
	}
}

func TestCheckOversize(t *testing.T) {
	raw := []byte("a: " + strings.Repeat("x", MaxSize) + "\n")
	if _, err := Check(raw, "main"); refuse.CodeOf(err) != CodeInvalid {
		t.Fatalf("got %v", err)
	}
}
