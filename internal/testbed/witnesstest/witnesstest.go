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
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
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
	secrets  [][]byte     // the private key's forms, for the leak scans
}

// Start starts a witness named name that knows the log origin under the verifier key logVKey.
// It is stopped when the test ends.
func Start(t testing.TB, name, origin, logVKey string) *Witness {
	t.Helper()
	w, err := Run(ToolBin(t), name, origin, logVKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("witnesstest: litewitness output:\n%s", w.logs.String())
		}
		w.Stop()
	})
	return w
}

// Run starts a witness as Start does, for a caller that holds no testing.TB (a testscript
// command): bin is ToolBin's directory, and the caller stops the witness with Stop, also when
// Run fails after starting something (Run cleans up what it started before it returns an
// error).
func Run(bin, name, origin, logVKey string) (w *Witness, err error) {
	// OpenSSH's ssh-agent when installed; else x/crypto's agent keyring serves the same protocol
	// on the socket, in this process.
	agentBin, _ := exec.LookPath("ssh-agent")
	// A unix socket path must fit in 108 bytes: t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "ql3-lw-")
	if err != nil {
		return nil, fmt.Errorf("witnesstest: %w", err)
	}
	w = &Witness{Name: name, bin: bin, dir: dir, DB: filepath.Join(dir, "litewitness.db"), logs: &syncBuffer{}}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, w.logs.String())
			w.Stop()
			w = nil
		}
	}()

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return w, err
	}
	w.secrets = keySecrets(priv)
	if w.Verifier, err = policy.NewCosignatureVerifierFromKey(name, pub); err != nil {
		return w, err
	}
	w.VKey = w.Verifier.String()
	sock := filepath.Join(dir, "agent.sock")
	if err := w.startAgent(agentBin, sock, priv); err != nil {
		return w, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return w, err
	}

	if err := w.addLog(origin, logVKey); err != nil {
		return w, err
	}

	// A free port can be taken between the probe and litewitness's bind: retry on a new one.
	var last error
	for range 3 {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return w, err
		}
		w.URL = "http://" + addr
		w.cmd = exec.Command(filepath.Join(bin, "litewitness"), "-name", name, "-db", w.DB,
			"-ssh-agent", sock, "-key", ssh.FingerprintSHA256(sshPub), "-listen", addr)
		w.cmd.Dir = dir
		w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
		if err := w.cmd.Start(); err != nil {
			return w, fmt.Errorf("witnesstest: start litewitness: %w", err)
		}
		if last = w.waitReady(); last == nil {
			// litewitness logs its verifier key: torchwood's own derivation of the key ID must
			// be ours.
			if !strings.Contains(w.logs.String(), "vkey="+w.VKey+"\n") {
				return w, fmt.Errorf("witnesstest: litewitness states another verifier key than %s", w.VKey)
			}
			return w, nil
		}
		w.stopWitness()
	}
	return w, fmt.Errorf("witnesstest: litewitness not ready: %w", last)
}

// Secrets are the forms of the witness's private key that no output, store or artifact may
// hold: the key lives only in the agent, so any of them appearing is a leak.
func (w *Witness) Secrets() [][]byte { return w.secrets }

// keySecrets lists an Ed25519 private key's seed and whole key, raw, base64 and hex.
func keySecrets(priv ed25519.PrivateKey) [][]byte {
	var out [][]byte
	for _, b := range [][]byte{priv.Seed(), priv} {
		out = append(out, bytes.Clone(b), []byte(base64.StdEncoding.EncodeToString(b)),
			[]byte(base64.RawURLEncoding.EncodeToString(b)), []byte(hex.EncodeToString(b)))
	}
	return out
}

// AddLog registers another log origin and its key while the witness runs.
func (w *Witness) AddLog(t testing.TB, origin, logVKey string) {
	t.Helper()
	if err := w.addLog(origin, logVKey); err != nil {
		t.Fatal(err)
	}
}

func (w *Witness) addLog(origin, logVKey string) error {
	if _, err := w.ctl("add-log", "-origin", origin); err != nil {
		return err
	}
	_, err := w.ctl("add-key", "-origin", origin, "-key", logVKey)
	return err
}

// Ctl runs witnessctl on the witness's database.
func (w *Witness) Ctl(t testing.TB, command string, args ...string) string {
	t.Helper()
	out, err := w.ctl(command, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (w *Witness) ctl(command string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(w.bin, "witnessctl"), append([]string{command, "-db", w.DB}, args...)...)
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("witnesstest: witnessctl %s: %v\n%s", command, err, out)
	}
	return string(out), nil
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

// Stop ends litewitness (SIGINT: it shuts its server down) and the agent, and removes the
// witness's directory; Start's cleanup calls it.
func (w *Witness) Stop() {
	w.stopWitness()
	if w.agent != nil && w.agent.Process != nil {
		w.agent.Process.Kill()
		w.agent.Wait()
	}
	if w.keyring != nil {
		w.keyring.Close()
	}
	os.RemoveAll(w.dir)
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
	bin, err := FindTool()
	if errors.Is(err, ErrNoTool) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// ErrNoTool: QL3_TOOL_LITEWITNESS is not set and this is not CI (a test skips on it).
var ErrNoTool = errors.New("witnesstest: QL3_TOOL_LITEWITNESS is not set (QL3_TOOL_LITEWITNESS=$(scripts/build-tool.sh litewitness))")

// FindTool returns the bin/ directory of the litewitness tool: $QL3_TOOL_LITEWITNESS/bin, or
// under CI=true the tool built by scripts/build-tool.sh; ErrNoTool otherwise.
func FindTool() (string, error) {
	if dir := os.Getenv("QL3_TOOL_LITEWITNESS"); dir != "" {
		bin := filepath.Join(dir, "bin")
		for _, b := range []string{"litewitness", "witnessctl"} {
			if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
				return "", fmt.Errorf("witnesstest: QL3_TOOL_LITEWITNESS=%s holds no %s: %w", dir, b, err)
			}
		}
		return bin, nil
	}
	if os.Getenv("CI") != "true" {
		return "", ErrNoTool
	}
	cmd := exec.Command("nice", "-n", "10", "flock", "/tmp/ql3-heavy-build.lock",
		filepath.Join(repoRoot(), "scripts/build-tool.sh"), "litewitness")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("witnesstest: build litewitness: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin"), nil
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

// Cosigner cosigns checkpoints in-process with an Ed25519 witness key made at test time (the
// c2sp.org/tlog-cosignature cosignature/v1 construction), for tests that judge stored
// cosignatures without a running witness. Its fields mirror Witness's, so a policy can name
// either. (deploylog/policy's own tests keep an independent construction: they judge the
// verifier this one is checked by.)
type Cosigner struct {
	Name     string
	Verifier *policy.CosignatureVerifier
	priv     ed25519.PrivateKey
}

// NewCosigner makes a witness key named name.
func NewCosigner(t testing.TB, name string) *Cosigner {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := policy.NewCosignatureVerifierFromKey(name, pub)
	if err != nil {
		t.Fatal(err)
	}
	return &Cosigner{Name: name, Verifier: v, priv: priv}
}

// Cosign returns the cosignature line over signed note signed (its text, up to the blank line)
// at time ts.
func (c *Cosigner) Cosign(t testing.TB, signed []byte, ts uint64) []byte {
	t.Helper()
	text, _, ok := strings.Cut(string(signed), "\n\n")
	if !ok {
		t.Fatal("witnesstest: cosign: not a note")
	}
	sig := ed25519.Sign(c.priv, fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s\n", ts, text))
	h := sha256.Sum256(append([]byte(c.Name+"\n\x04"), c.priv.Public().(ed25519.PublicKey)...))
	b := append(binary.BigEndian.AppendUint64(h[:4:4], ts), sig...)
	return []byte("— " + c.Name + " " + base64.StdEncoding.EncodeToString(b) + "\n")
}

// Policy is a tlog-policy of the log key logVKey and the witnesses ws (named W1, W2, … in
// order) with the quorum lines quorum; origin, when not empty, is the origin it requires.
func Policy(t testing.TB, origin, logVKey, quorum string, ws ...*policy.CosignatureVerifier) policy.Verifier {
	t.Helper()
	text := "log " + logVKey + "\n"
	for i, w := range ws {
		text += fmt.Sprintf("witness W%d %s\n", i+1, w)
	}
	p, err := policy.Parse([]byte(text + quorum + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return policy.Verifier{Policy: p, Origin: origin}
}
