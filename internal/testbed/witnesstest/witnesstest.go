// Package witnesstest runs a real C2SP tlog-witness for tests: litewitness from
// filippo.io/torchwood (testdata/tools/litewitness, built by scripts/build-tool.sh into the
// tools cache), with an Ed25519 witness key generated at test time and held only by a dedicated
// ssh-agent (litewitness signs through the agent socket), its SQLite database initialised and the
// log registered with witnessctl add-log and add-key, listening on 127.0.0.1 on a free port.
//
// Without $QL3_TOOL_LITEWITNESS (the cache entry: QL3_TOOL_LITEWITNESS=$(scripts/build-tool.sh
// litewitness)) a test is skipped, except under CI=true, where the tool is built (or the test
// fails). Without OpenSSH's ssh-agent on $PATH, x/crypto's agent keyring serves the key instead.
package witnesstest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/qinglong/ql3/deploylog/policy"
)

// Witness is a running litewitness.
type Witness struct {
	URL      string                      // the submission prefix, http://127.0.0.1:port
	Name     string                      // the witness's name on its cosignature lines
	VKey     string                      // its cosignature verifier key (type 0x04)
	Verifier *policy.CosignatureVerifier // the same, parsed
	DB       string                      // the SQLite database
	bin      string
	dir      string
	logs     *syncBuffer
	cmd      *exec.Cmd
	agent    *exec.Cmd
	waited   chan error   // litewitness's exit, once it is ready
	keyring  net.Listener // the in-process agent, when ssh-agent is not installed
}

// Start starts a witness named name that knows the log origin under the verifier key logVKey.
// It is stopped when the test ends.
func Start(t testing.TB, name, origin, logVKey string) *Witness {
	t.Helper()
	bin := ToolBin(t)
	// OpenSSH's ssh-agent when installed; else x/crypto's agent keyring serves the same protocol
	// on the socket, in this process.
	agentBin, _ := exec.LookPath("ssh-agent")
	// A unix socket path must fit in 108 bytes: t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "ql3-lw-")
	if err != nil {
		t.Fatal(err)
	}
	w := &Witness{Name: name, bin: bin, dir: dir, DB: filepath.Join(dir, "litewitness.db"), logs: &syncBuffer{}}
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			t.Logf("witnesstest: litewitness output:\n%s", w.logs.String())
		}
		os.RemoveAll(dir)
	})

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if w.Verifier, err = policy.NewCosignatureVerifierFromKey(name, pub); err != nil {
		t.Fatal(err)
	}
	w.VKey = w.Verifier.String()
	sock := filepath.Join(dir, "agent.sock")
	if err := w.startAgent(agentBin, sock, priv); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}

	w.Ctl(t, "add-log", "-origin", origin)
	w.Ctl(t, "add-key", "-origin", origin, "-key", logVKey)

	// A free port can be taken between the probe and litewitness's bind: retry on a new one.
	var last error
	for range 3 {
		addr, err := freeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		w.URL = "http://" + addr
		w.cmd = exec.Command(filepath.Join(bin, "litewitness"), "-name", name, "-db", w.DB,
			"-ssh-agent", sock, "-key", ssh.FingerprintSHA256(sshPub), "-listen", addr)
		w.cmd.Dir = dir
		w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
		if err := w.cmd.Start(); err != nil {
			t.Fatalf("witnesstest: start litewitness: %v", err)
		}
		if last = w.waitReady(); last == nil {
			// litewitness logs its verifier key: torchwood's own derivation of the key ID must
			// be ours.
			if !strings.Contains(w.logs.String(), "vkey="+w.VKey+"\n") {
				t.Fatalf("witnesstest: litewitness states another verifier key than %s:\n%s", w.VKey, w.logs.String())
			}
			return w
		}
		w.stopWitness()
	}
	t.Fatalf("witnesstest: litewitness not ready: %v\n%s", last, w.logs.String())
	return nil
}

// AddLog registers another log origin and its key while the witness runs.
func (w *Witness) AddLog(t testing.TB, origin, logVKey string) {
	t.Helper()
	w.Ctl(t, "add-log", "-origin", origin)
	w.Ctl(t, "add-key", "-origin", origin, "-key", logVKey)
}

// Ctl runs witnessctl on the witness's database.
func (w *Witness) Ctl(t testing.TB, command string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(w.bin, "witnessctl"), append([]string{command, "-db", w.DB}, args...)...)
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("witnesstest: witnessctl %s: %v\n%s", command, err, out)
	}
	return string(out)
}

// Logs is litewitness's output so far.
func (w *Witness) Logs() string { return w.logs.String() }

// startAgent runs a dedicated ssh-agent in the foreground on sock and hands it the key over the
// agent protocol (no key file is ever written).
func (w *Witness) startAgent(bin, sock string, priv ed25519.PrivateKey) error {
	if bin == "" {
		return w.serveKeyring(sock, priv)
	}
	w.agent = exec.Command(bin, "-D", "-a", sock)
	w.agent.Env = []string{"PATH=" + os.Getenv("PATH")}
	w.agent.Stdout, w.agent.Stderr = w.logs, w.logs
	if err := w.agent.Start(); err != nil {
		return fmt.Errorf("witnesstest: start ssh-agent: %w", err)
	}
	var conn net.Conn
	var err error
	for range 200 {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("witnesstest: ssh-agent socket: %w", err)
	}
	defer conn.Close()
	if err := agent.NewClient(conn).Add(agent.AddedKey{PrivateKey: priv, Comment: "ql3 test witness"}); err != nil {
		return fmt.Errorf("witnesstest: add the witness key to ssh-agent: %w", err)
	}
	return nil
}

// serveKeyring serves an in-memory agent keyring holding the key on sock until the test ends.
func (w *Witness) serveKeyring(sock string, priv ed25519.PrivateKey) error {
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv, Comment: "ql3 test witness"}); err != nil {
		return fmt.Errorf("witnesstest: agent keyring: %w", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("witnesstest: agent socket: %w", err)
	}
	w.keyring = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	return nil
}

// waitReady polls the index page until litewitness answers, or it exits.
func (w *Witness) waitReady() error {
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	var last error
	for range 400 {
		select {
		case err := <-exited:
			w.cmd.Process = nil
			return fmt.Errorf("litewitness exited: %v", err)
		default:
		}
		resp, err := c.Get(w.URL + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				w.waited = exited
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

// stop ends litewitness (SIGINT: it shuts its server down) and the agent.
func (w *Witness) stop() {
	w.stopWitness()
	if w.agent != nil && w.agent.Process != nil {
		w.agent.Process.Kill()
		w.agent.Wait()
	}
	if w.keyring != nil {
		w.keyring.Close()
	}
}

func (w *Witness) stopWitness() {
	if w.cmd == nil || w.cmd.Process == nil {
		return
	}
	w.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-w.waited:
	case <-time.After(5 * time.Second):
		w.cmd.Process.Kill()
		<-w.waited
	}
	w.cmd.Process = nil
}

// ToolBin returns the bin/ directory of the litewitness tool, skipping the test (failing under
// CI=true, after trying to build it) when it is not there.
func ToolBin(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("QL3_TOOL_LITEWITNESS"); dir != "" {
		bin := filepath.Join(dir, "bin")
		for _, b := range []string{"litewitness", "witnessctl"} {
			if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
				t.Fatalf("witnesstest: QL3_TOOL_LITEWITNESS=%s holds no %s: %v", dir, b, err)
			}
		}
		return bin
	}
	if os.Getenv("CI") != "true" {
		t.Skip("QL3_TOOL_LITEWITNESS is not set (QL3_TOOL_LITEWITNESS=$(scripts/build-tool.sh litewitness))")
	}
	cmd := exec.Command("nice", "-n", "10", "flock", "/tmp/ql3-heavy-build.lock",
		filepath.Join(repoRoot(), "scripts/build-tool.sh"), "litewitness")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("witnesstest: build litewitness: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin")
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "../../.."))
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// syncBuffer collects two processes' output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Hostile serves handler on 127.0.0.1 as a witness that answers what no real witness does (a
// malformed, oversized, slow or redirected answer); tests that use it say Hostile in their name.
func Hostile(t testing.TB, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// ClosedURL is an http URL on 127.0.0.1 where nothing listens.
func ClosedURL(t testing.TB) string {
	t.Helper()
	addr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}
