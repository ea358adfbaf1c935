// Package ocitest holds what the OCI tests share: a captured ql3 store laid out again with its
// modes, the tools cache lookup, and a real distribution registry started on 127.0.0.1 with TLS
// (a CA generated for the test) and htpasswd basic auth (a bcrypt file generated for the test).
package ocitest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/store"
)

// RepoRoot is the module root.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "../../.."))
}

// Store1000 is the captured store of a 1,000-resource receipt.
func Store1000() string { return filepath.Join(RepoRoot(), "audit/testdata/store-1000") }

// StoreDirs are a store's directories (docs/rationale.md#7-the-evidence-store): git keeps neither empty directories nor modes.
var StoreDirs = []string{"blobs", "blobs/sha256", "index", "index/" + evidence.IndexReceipts,
	"index/" + evidence.IndexIntents, "index/" + evidence.IndexPreflights, "tmp", "locks"}

// Materialize lays the captured store under src out in a new directory, files 0400 and
// directories 0700, and returns its root.
func Materialize(t testing.TB, src string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range StoreDirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o400)
	})
	if err != nil {
		t.Fatalf("ocitest: materialize %s: %v", src, err)
	}
	return root
}

// OpenStore opens the store at root.
func OpenStore(t testing.TB, root string) *store.Store {
	t.Helper()
	s, err := store.Open(root)
	if err != nil {
		t.Fatalf("ocitest: open store: %v", err)
	}
	return s
}

// Receipt1000 lays out the 1,000-resource store and returns it with its one receipt.
func Receipt1000(t testing.TB) (*store.Store, evidence.Descriptor) {
	t.Helper()
	s := OpenStore(t, Materialize(t, Store1000()))
	rep, err := s.Verify()
	if err != nil || !rep.OK() || len(rep.Receipts) != 1 {
		t.Fatalf("ocitest: store-1000: %v %+v", err, rep)
	}
	return s, rep.Receipts[0].Descriptor
}

// Tool returns the bin/ directory of a tool built by scripts/build-tool.sh from
// testdata/tools/<name>: $QL3_TOOL_<NAME> (the cache entry) when set, else the builder's answer
// (instant when cached; a cold build takes minutes, so CI builds the tools before the tests).
func Tool(t testing.TB, name string) string {
	t.Helper()
	dir, err := ToolDir(name)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// ToolDir is Tool for callers without a testing.TB (a testscript command).
func ToolDir(name string) (string, error) {
	if dir := os.Getenv("QL3_TOOL_" + strings.ToUpper(name)); dir != "" {
		return filepath.Join(dir, "bin"), nil
	}
	// A cold build is heavy: take the shared build lock, as every tool build on this machine does.
	cmd := exec.Command("nice", "-n", "10", "flock", "/tmp/ql3-heavy-build.lock",
		filepath.Join(RepoRoot(), "scripts/build-tool.sh"), name)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ocitest: build tool %s: %w", name, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin"), nil
}

// Registry is a running distribution registry.
type Registry struct {
	Host     string // 127.0.0.1:port
	CAFile   string // PEM of the CA that signed its certificate
	User     string
	Password string
	Storage  string // the filesystem driver's root directory
	dir      string
	cmd      *exec.Cmd
}

// StartRegistry starts the distribution registry on 127.0.0.1 with TLS and htpasswd auth.
// The caller stops it with Stop.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Start is StartRegistry for callers without a testing.TB (a testscript command).
func Start() (_ *Registry, err error) {
	bindir, err := ToolDir("registry")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(bindir, "registry")
	dir, err := os.MkdirTemp("", "ql3-registry-")
	if err != nil {
		return nil, err
	}
	r := &Registry{dir: dir, Storage: filepath.Join(dir, "storage"), User: "ql3-test"}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	if r.Password, err = randomHex(24); err != nil {
		return nil, err
	}
	r.CAFile = filepath.Join(dir, "ca.pem")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writePKI(r.CAFile, certFile, keyFile); err != nil {
		return nil, err
	}
	// MinCost: the registry runs bcrypt on every request, and the benchmarks compare clients.
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.User+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if r.Host, err = freeLoopbackAddr(); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: ql3-test
    path: %s
`, r.Storage, r.Host, certFile, keyFile, htpasswd)
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	r.cmd = exec.Command(bin, "serve", cfgFile)
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	var logs bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &logs, &logs
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ocitest: start registry: %w", err)
	}
	if err := r.waitReady(); err != nil {
		return nil, fmt.Errorf("ocitest: registry not ready: %w\n%s", err, logs.String())
	}
	return r, nil
}

// waitReady polls /v2/ until the registry answers 401 (auth on), at most 400 times.
func (r *Registry) waitReady() error {
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(r.CAFile)
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: nil}, Timeout: 2 * time.Second}
	var last error
	for range 400 {
		resp, err := c.Get("https://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			last = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			last = err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return last
}

// Stop kills the registry and removes its directory.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	os.RemoveAll(r.dir)
}

// DockerConfig writes a Docker config.json with user:password for the registry into a new
// directory and returns the directory (for DOCKER_CONFIG).
func (r *Registry) DockerConfig(t testing.TB, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	if err := r.WriteDockerConfig(dir, user, password); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteDockerConfig writes dir/config.json (0600) with user:password for the registry.
func (r *Registry) WriteDockerConfig(dir, user, password string) error {
	cfg := map[string]any{"auths": map[string]any{r.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// Secrets are the byte strings of the registry's credentials that must appear in no output,
// store or artifact: the password and the config's base64 of user:password.
func (r *Registry) Secrets() [][]byte {
	return [][]byte{[]byte(r.Password), []byte(base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password)))}
}

// BlobPath is where the filesystem driver keeps blob d's bytes.
func (r *Registry) BlobPath(hexDigest string) string {
	return filepath.Join(r.Storage, "docker/registry/v2/blobs/sha256", hexDigest[:2], hexDigest, "data")
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writePKI generates a CA and a certificate for 127.0.0.1 it signs.
func writePKI(caFile, certFile, keyFile string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ql3 test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		b    *pem.Block
	}{{caFile, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}}, {certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der}},
		{keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.b), 0o600); err != nil {
			return err
		}
	}
	return nil
}
