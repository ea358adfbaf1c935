// Package testcluster starts a real etcd and kube-apiserver on loopback for tests and demos.
package testcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
)

// Tools are the pinned binaries built by scripts/build-k8s.sh. KubectlVersion differs from
// KubernetesVersion (the API server's) when $QL3_KUBECTL_TOOLS names another tools directory.
type Tools struct {
	Dir, Kubectl, KubeAPIServer, Etcd string
	KubectlDigest                     digest.Digest
	KubernetesVersion, EtcdVersion    string
	KubectlVersion                    string
}

// ErrNoTools means $QL3_K8S_TOOLS is unset or does not hold the built tools.
var ErrNoTools = errors.New("testcluster: kubernetes tools missing: run `make tools` and set QL3_K8S_TOOLS to the directory it prints")

// FindTools reads the tools directory from $QL3_K8S_TOOLS and verifies kubectl against the manifest
// of the directory it comes from ($QL3_KUBECTL_TOOLS when set).
func FindTools() (*Tools, error) {
	dir := os.Getenv("QL3_K8S_TOOLS")
	if dir == "" {
		return nil, ErrNoTools
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	t := &Tools{Dir: dir, KubeAPIServer: filepath.Join(dir, "bin", "kube-apiserver"),
		Etcd: filepath.Join(dir, "bin", "etcd"), KubernetesVersion: m.KubernetesVersion, EtcdVersion: m.EtcdVersion}
	if err := selectKubectl(t, m); err != nil {
		return nil, err
	}
	for _, p := range []string{t.KubeAPIServer, t.Etcd} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoTools, err)
		}
	}
	return t, nil
}

// Options tune Start.
type Options struct {
	// Dir is the root to use (created 0700); empty means a fresh temporary directory.
	Dir string
	// Detach starts the processes in their own session so they outlive the caller (cmd/ql3-cluster).
	Detach bool
	// RequestTimeout, if not zero, is kube-apiserver's --request-timeout (default 1m): how long
	// a request waits, for example on a stopped etcd, before the server answers 504. A fault test
	// sets it short so that the server error comes within seconds.
	RequestTimeout time.Duration
}

// Cluster is one running etcd + kube-apiserver pair.
type Cluster struct {
	Dir            string
	KubeconfigPath string
	Context        string
	TokenContext   string
	Server         string
	KubectlPath    string // the field cannot share the Kubectl method's name
	KubectlDigest  digest.Digest
	KubeSystemUID  string
	CAPEM          []byte
	ClientCertPEM  []byte
	ClientKeyPEM   []byte
	Token          string

	kubeconfig []byte
	// PIDs are the processes Start launched, etcd first; a restart (StartEtcd, StartAPIServer)
	// replaces its entry.
	PIDs   []int
	ownDir bool
	detach bool
	// starting is true while Start waits for readiness: a process that exits then fails the start.
	starting bool
	pki      *pki

	etcd, apiserver *proc
	etcdClient      string // etcd's client URL
}

// proc is one of the cluster's two processes and how to start it again exactly as before.
type proc struct {
	name, bin string
	args      []string
	cmd       *exec.Cmd
	done      chan struct{} // closed once Wait returned: the process is gone and reaped
	paused    bool          // SIGSTOP sent and not yet undone
}

func (p *proc) running() bool {
	if p == nil || p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// freePorts returns n distinct free loopback ports. Every listener stays open until all n are
// chosen: closing each at once let the kernel hand the same port out twice (etcd's peer port and
// the API server's port were once equal, and the API server could not bind).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testcluster: free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startAttempts bounds Start's retries after a port was taken between its choice and its bind
// (by a process of another test; ports are chosen free but released before etcd and the API
// server bind them).
const startAttempts = 3

// Start launches a fresh cluster and waits until kube-system can be read. A start that fails
// because a chosen port was taken meanwhile is retried on new ports, in a new directory when
// Start owns it.
func Start(ctx context.Context, t *Tools, opts Options) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, t, opts)
		if err == nil || attempt == startAttempts || !errors.Is(err, errPortTaken) || opts.Dir != "" {
			return c, err
		}
	}
}

// errPortTaken marks a start whose etcd or API server exited because its port was in use.
var errPortTaken = errors.New("testcluster: a chosen port was taken before it was bound")

func start(ctx context.Context, t *Tools, opts Options) (_ *Cluster, err error) {
	dir := opts.Dir
	own := dir == ""
	if own {
		if dir, err = os.MkdirTemp("", "ql3-cluster-"); err != nil {
			return nil, fmt.Errorf("testcluster: %w", err)
		}
	} else if err = os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	if err = os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	c := &Cluster{Dir: dir, Context: "ql3-admin", TokenContext: "ql3-token", KubectlPath: t.Kubectl, KubectlDigest: t.KubectlDigest,
		ownDir: own, detach: opts.Detach}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, c.Logs())
			_ = c.Stop()
		}
	}()
	p, err := newPKI()
	if err != nil {
		return nil, err
	}
	c.pki = p
	c.CAPEM, c.ClientCertPEM, c.ClientKeyPEM = p.ca.certPEM, p.admin.certPEM, p.admin.keyPEM
	tok := make([]byte, 24)
	if _, err = rand.Read(tok); err != nil {
		return nil, fmt.Errorf("testcluster: token: %w", err)
	}
	c.Token = hex.EncodeToString(tok)
	pk := filepath.Join(dir, "pki")
	files := map[string][]byte{"ca.crt": p.ca.certPEM, "serving.crt": p.serving.certPEM, "serving.key": p.serving.keyPEM,
		"sa.key": p.sa.keyPEM, "sa.pub": p.saPubPEM, "tokens.csv": []byte(c.Token + ",ql3-token,ql3-token-uid,system:masters\n")}
	if err = os.MkdirAll(pk, 0o700); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	for n, b := range files {
		if err = os.WriteFile(filepath.Join(pk, n), b, 0o600); err != nil {
			return nil, fmt.Errorf("testcluster: %w", err)
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.Server = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.etcdClient = client
	c.etcd = &proc{name: "etcd", bin: t.Etcd, args: []string{"--name=ql3", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client, "--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer, "--initial-cluster=ql3=" + peer, "--unsafe-no-fsync"}}
	c.apiserver = &proc{name: "kube-apiserver", bin: t.KubeAPIServer, args: []string{"--etcd-servers=" + client, "--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + filepath.Join(pk, "serving.crt"), "--tls-private-key-file=" + filepath.Join(pk, "serving.key"),
		"--client-ca-file=" + filepath.Join(pk, "ca.crt"), "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(pk, "sa.pub"), "--service-account-signing-key-file=" + filepath.Join(pk, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24", "--authorization-mode=RBAC", "--endpoint-reconciler-type=none",
		"--token-auth-file=" + filepath.Join(pk, "tokens.csv"), "--cert-dir=" + filepath.Join(dir, "apiserver-certs")}}
	if opts.RequestTimeout > 0 {
		c.apiserver.args = append(c.apiserver.args, "--request-timeout="+opts.RequestTimeout.String())
	}
	if err = c.spawn(c.etcd); err != nil {
		return nil, err
	}
	if err = c.spawn(c.apiserver); err != nil {
		return nil, err
	}
	c.kubeconfig = c.renderKubeconfig()
	kdir := filepath.Join(dir, "kube")
	if err = os.MkdirAll(kdir, 0o700); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	c.KubeconfigPath = filepath.Join(kdir, "config")
	if err = os.WriteFile(c.KubeconfigPath, c.kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	c.starting = true
	err = c.waitReady(ctx)
	c.starting = false
	if err != nil {
		return nil, err
	}
	return c, nil
}

// spawn starts p with its recorded binary and arguments, appending to its log.
func (c *Cluster) spawn(p *proc) error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = c.Dir
	cmd.Env = []string{"HOME=" + c.Dir, "TMPDIR=" + c.Dir, "PATH=/nonexistent"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: c.detach, Pdeathsig: pdeath(c.detach)}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testcluster: start %s: %w", p.name, err)
	}
	p.cmd, p.paused, p.done = cmd, false, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(p.done)
	c.PIDs = c.PIDs[:0]
	for _, q := range []*proc{c.etcd, c.apiserver} {
		if q != nil && q.cmd != nil {
			c.PIDs = append(c.PIDs, q.cmd.Process.Pid)
		}
	}
	return nil
}

func pdeath(detach bool) syscall.Signal {
	if detach {
		return 0
	}
	return syscall.SIGKILL
}

// waitReady waits until /readyz answers 200 and kube-system can be read; the first time it
// records the kube-system UID, after a restart it requires the same one.
func (c *Cluster) waitReady(ctx context.Context) error {
	p := c.pki
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.cert)
	cert, err := tls.X509KeyPair(p.admin.certPEM, p.admin.keyPEM)
	if err != nil {
		return fmt.Errorf("testcluster: client cert: %w", err)
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for ready := false; ; {
		if !ready {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+"/readyz", nil)
			if resp, err := hc.Do(req); err == nil {
				ready = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
		}
		if ready {
			out, _, err := c.Kubectl(ctx, nil, "get", "namespace", "kube-system", "-o=jsonpath={.metadata.uid}")
			if err == nil && len(out) > 0 {
				if c.KubeSystemUID != "" && c.KubeSystemUID != string(out) {
					return fmt.Errorf("testcluster: kube-system uid %s after a restart, was %s", out, c.KubeSystemUID)
				}
				c.KubeSystemUID = string(out)
				return nil
			}
		}
		if c.starting {
			if err := c.exited(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testcluster: cluster not ready: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exited reports a cluster process that has ended while Start waits for it: waiting out the
// deadline would only hide why. (After a fault control, a process may be down on purpose.) A bind refused for a port in use is errPortTaken, which Start
// retries.
func (c *Cluster) exited() error {
	for _, p := range []*proc{c.etcd, c.apiserver} {
		if p == nil || p.done == nil || p.paused {
			continue
		}
		select {
		case <-p.done:
		default:
			continue
		}
		log, _ := os.ReadFile(filepath.Join(c.Dir, p.name+".log"))
		if bytes.Contains(log, []byte("address already in use")) {
			return fmt.Errorf("testcluster: %s exited: %w", p.name, errPortTaken)
		}
		return fmt.Errorf("testcluster: %s exited before the cluster was ready", p.name)
	}
	return nil
}

func (c *Cluster) renderKubeconfig() []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: ql3
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: ql3-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
- name: ql3-token
  user:
    token: %s
contexts:
- name: %s
  context: {cluster: ql3, user: ql3-admin}
- name: %s
  context: {cluster: ql3, user: ql3-token}
`, c.Server, b64(c.CAPEM), b64(c.ClientCertPEM), b64(c.ClientKeyPEM), c.Token, c.Context, c.TokenContext)
}

// KubeconfigBytes returns a copy of the kubeconfig.
func (c *Cluster) KubeconfigBytes() []byte { return bytes.Clone(c.kubeconfig) }

// Secrets lists every form of a credential an output must never contain.
func (c *Cluster) Secrets() [][]byte {
	out := [][]byte{[]byte(c.Token), c.ClientKeyPEM, c.ClientCertPEM}
	for _, p := range [][]byte{c.ClientKeyPEM, c.ClientCertPEM} {
		out = append(out, []byte(base64.StdEncoding.EncodeToString(p)))
		for _, l := range strings.Split(string(p), "\n") {
			if len(l) >= 32 && !strings.HasPrefix(l, "-----") {
				out = append(out, []byte(l))
			}
		}
	}
	out = append(out, []byte(base64.StdEncoding.EncodeToString([]byte(c.Token))))
	return out
}

// Kubectl runs the real kubectl as admin with the rationale §6 (docs/rationale.md#6-kubectl-invocations) environment.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, []byte, error) {
	home, err := os.MkdirTemp(c.Dir, "kubectl-")
	if err != nil {
		return nil, nil, fmt.Errorf("testcluster: %w", err)
	}
	defer os.RemoveAll(home)
	cache := filepath.Join(home, "cache")
	full := append([]string{"--kubeconfig=" + c.KubeconfigPath, "--context=" + c.Context, "--cache-dir=" + cache}, args...)
	cmd := exec.CommandContext(ctx, c.KubectlPath, full...)
	cmd.Env = []string{"HOME=" + home, "XDG_CACHE_HOME=" + cache, "XDG_CONFIG_HOME=" + home, "TMPDIR=" + home,
		"KUBECACHEDIR=" + cache, "PATH=/nonexistent", "LANG=C", "KUBERC=off", "KUBECTL_KUBERC=false"}
	cmd.Dir = home
	var so, se bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &so, &se
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("testcluster: kubectl %s: %w", strings.Join(args, " "), err)
	}
	return so.Bytes(), se.Bytes(), err
}

// CreateNamespace creates a namespace as admin.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	_, se, err := c.Kubectl(ctx, nil, "create", "namespace", name)
	if err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(se))
	}
	return nil
}

// Stop ends exactly the processes Start launched (a paused one too) and removes the cluster's
// directory.
func (c *Cluster) Stop() error {
	for _, p := range []*proc{c.apiserver, c.etcd} {
		c.end(p)
	}
	if c.ownDir {
		return os.RemoveAll(c.Dir)
	}
	return nil
}

// end stops p if it runs: SIGTERM, then SIGCONT so that a paused process can act on it, then
// SIGKILL after 5 s; it returns once the process is reaped.
func (c *Cluster) end(p *proc) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	p.paused = false
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// The fault controls below change one process of a running cluster and return once the cluster
// shows the expected state. They are not safe for concurrent use; a test that uses them should
// have a cluster of its own, since every other user of the cluster sees the fault.

// StopAPIServer ends kube-apiserver and returns once its port refuses connections.
func (c *Cluster) StopAPIServer(ctx context.Context) error {
	c.end(c.apiserver)
	return waitRefused(ctx, strings.TrimPrefix(c.Server, "https://"))
}

// StartAPIServer starts kube-apiserver again with the same flags, port and certificates (so
// every kubeconfig made for the cluster keeps working) and returns once it is ready and shows
// the same kube-system UID.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if c.apiserver.running() {
		return errors.New("testcluster: kube-apiserver is running")
	}
	if err := c.spawn(c.apiserver); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// PauseAPIServer stops kube-apiserver with SIGSTOP and returns once the kernel shows it stopped:
// its port still accepts connections, nothing answers on them.
func (c *Cluster) PauseAPIServer(ctx context.Context) error {
	if !c.apiserver.running() {
		return errors.New("testcluster: kube-apiserver is not running")
	}
	if err := c.apiserver.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("testcluster: SIGSTOP kube-apiserver: %w", err)
	}
	c.apiserver.paused = true
	pid := c.apiserver.cmd.Process.Pid
	return poll(ctx, "kube-apiserver stopped", pollLimit, func(context.Context) bool { return procState(pid) == 'T' })
}

// ResumeAPIServer continues a paused kube-apiserver with SIGCONT and returns once it is ready.
func (c *Cluster) ResumeAPIServer(ctx context.Context) error {
	if !c.apiserver.running() {
		return errors.New("testcluster: kube-apiserver is not running")
	}
	if err := c.apiserver.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("testcluster: SIGCONT kube-apiserver: %w", err)
	}
	c.apiserver.paused = false
	return c.waitReady(ctx)
}

// StopEtcd ends etcd behind the running kube-apiserver and returns once etcd's client port
// refuses connections.
func (c *Cluster) StopEtcd(ctx context.Context) error {
	c.end(c.etcd)
	return waitRefused(ctx, strings.TrimPrefix(c.etcdClient, "http://"))
}

// StartEtcd starts etcd again on the same ports and data directory and returns once the whole
// cluster is ready again (kube-apiserver reconnects on its own) with the same kube-system UID and
// every resource's storage answers.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	if c.etcd.running() {
		return errors.New("testcluster: etcd is running")
	}
	if err := c.spawn(c.etcd); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	return c.waitStorage(ctx)
}

// storageSettle bounds waitStorage: gRPC's reconnect backoff, which each of kube-apiserver's
// etcd clients runs on its own, grows to at most 120 s.
const storageSettle = 150 * time.Second

// waitStorage returns once a list of every listable resource succeeds. kube-apiserver holds one
// etcd client per resource, and each reconnects to a restarted etcd on its own backoff; /readyz
// and the kube-system read prove only their own clients, so a deployment's storage can still
// answer 5xx seconds later (a rerun's dry-run met exactly that in CI).
func (c *Cluster) waitStorage(ctx context.Context) error {
	out, se, err := c.Kubectl(ctx, nil, "api-resources", "--verbs=list", "-o=name", "--request-timeout=5s")
	if err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(se))
	}
	kinds := strings.Join(strings.Fields(string(out)), ",")
	if kinds == "" {
		return errors.New("testcluster: the API server lists no resources")
	}
	var last error
	err = poll(ctx, "every resource's storage after etcd's restart", storageSettle, func(ctx context.Context) bool {
		_, se, err := c.Kubectl(ctx, nil, "get", kinds, "--all-namespaces", "-o=name", "--request-timeout=5s")
		if err != nil {
			last = fmt.Errorf("%w: %s", err, bytes.TrimSpace(se))
		}
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

// waitRefused returns once a TCP connect to addr is refused (nothing listens there).
func waitRefused(ctx context.Context, addr string) error {
	return poll(ctx, addr+" refusing connections", pollLimit, func(context.Context) bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
}

// pollLimit is how long poll waits for a process or port to change state.
const pollLimit = 60 * time.Second

// poll checks cond every 50 ms for up to limit (or ctx's deadline); cond gets the bounded context.
func poll(ctx context.Context, what string, limit time.Duration, cond func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("testcluster: waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// procState is the state letter of /proc/PID/stat ('T' for stopped), 0 when unreadable.
func procState(pid int) byte {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name in parentheses may hold spaces; the state follows its closing one.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 || i+2 >= len(raw) {
		return 0
	}
	return raw[i+2]
}

// Logs returns the etcd and apiserver log text for a failing test to print.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, n := range []string{"etcd", "kube-apiserver"} {
		raw, _ := os.ReadFile(filepath.Join(c.Dir, n+".log"))
		if len(raw) > 64<<10 {
			raw = raw[len(raw)-64<<10:]
		}
		fmt.Fprintf(&b, "==== %s.log (tail)\n%s\n", n, raw)
	}
	return b.String()
}
