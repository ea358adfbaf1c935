package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/store"
)

// TestScripts pins the exact stdout, stderr and exit status of every command, in text and in json,
// in the txtar scripts under testdata/script (the CLI contract of docs/cli.md).
func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("QL3_UPDATE_SCRIPTS") == "1",
		Setup: func(e *testscript.Env) error {
			e.Setenv("REPO", repo)
			e.Setenv("QL3_STORE", "")
			// The script's own secrets (secret-file, witness-env), scanned as the shared ones.
			e.Values[scriptSecretsKey{}] = &secretList{}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "cluster":
				_, err := testcluster.FindTools()
				return err == nil || os.Getenv("CI") == "true", nil
			case "witness":
				// Without QL3_TOOL_LITEWITNESS the witness scripts are skipped, except under
				// CI=true, where witness-env builds the tool or fails.
				_, err := witnesstest.FindTool()
				return !errors.Is(err, witnesstest.ErrNoTool), nil
			case "registry":
				// Without QL3_TOOL_REGISTRY the registry scripts are skipped, except under CI=true,
				// where registry-env then builds the tool or fails.
				return os.Getenv("QL3_TOOL_REGISTRY") != "" || os.Getenv("CI") == "true", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"layout-store": cmdLayoutStore,
			"private":      cmdPrivate,
			"status":       cmdStatus,
			"cluster-env":  cmdClusterEnv,
			"registry-env": cmdRegistryEnv,
			"stdout-env":   cmdStdoutEnv,
			"digest-env":   cmdDigestEnv,
			"gen-key":      cmdGenKey,
			"replace":      cmdReplace,
			"run-printed":  cmdRunPrinted,
			"witness-env":  cmdWitnessEnv,
			"secret-file":  cmdSecretFile,
			"no-secrets":   cmdNoSecrets,
			"rm-closure":   cmdRmClosure,
		},
	})
}

// cmdLayoutStore lays out a committed store (git keeps neither modes nor empty directories) at a
// new path: directories 0700, objects and index entries 0400.
//
//	layout-store SRC DST
func cmdLayoutStore(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: layout-store SRC DST")
	}
	src, dst := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	ts.Check(os.Mkdir(dst, 0o700))
	for _, d := range []string{"blobs", "blobs/sha256", "index", "index/receipts", "index/intents", "index/preflights", "tmp", "locks"} {
		ts.Check(os.Mkdir(filepath.Join(dst, d), 0o700))
	}
	ts.Check(filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o400)
	}))
}

// cmdPrivate makes private directories (0700) and files (0600), as ql3 requires of its inputs.
//
//	private PATH...
func cmdPrivate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: private PATH...")
	}
	for _, a := range args {
		p := ts.MkAbs(a)
		fi, err := os.Lstat(p)
		ts.Check(err)
		mode := os.FileMode(0o600)
		if fi.IsDir() {
			mode = 0o700
		}
		ts.Check(os.Chmod(p, mode))
	}
}

// cmdStdoutEnv sets NAME to the last command's stdout without its final newline (a digest a later
// command takes).
//
//	stdout-env NAME
func cmdStdoutEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stdout-env NAME")
	}
	ts.Setenv(args[0], strings.TrimSuffix(ts.ReadFile("stdout"), "\n"))
}

// cmdDigestEnv sets NAME to the sha256 digest of FILE's bytes.
//
//	digest-env NAME FILE
func cmdDigestEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: digest-env NAME FILE")
	}
	b, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	ts.Setenv(args[0], string(evidence.FromBytes(b)))
}

// cmdGenKey writes a fresh signing key DIR/NAME.pem (PKCS#8, 0600) and its public key
// DIR/NAME.pub (PKIX); ALG is p256 or ed25519. Keys are made at test time, never committed.
//
//	gen-key ALG DIR NAME
func cmdGenKey(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: gen-key p256|ed25519 DIR NAME")
	}
	var priv crypto.Signer
	var err error
	switch args[0] {
	case "p256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		ts.Fatalf("unknown key algorithm %s", args[0])
	}
	ts.Check(err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	ts.Check(err)
	pub, err := x509.MarshalPKIXPublicKey(priv.Public())
	ts.Check(err)
	dir := ts.MkAbs(args[1])
	ts.Check(os.WriteFile(filepath.Join(dir, args[2]+".pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	ts.Check(os.WriteFile(filepath.Join(dir, args[2]+".pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644))
}

// cmdReplace replaces every OLD with NEW in FILE (a release moved into a namespace of its own).
//
//	replace FILE OLD NEW
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace FILE OLD NEW")
	}
	p := ts.MkAbs(args[0])
	b, err := os.ReadFile(p)
	ts.Check(err)
	ts.Check(os.WriteFile(p, []byte(strings.ReplaceAll(string(b), args[1], args[2])), 0o600))
}

// cmdStatus runs a program and requires its exact exit status; its stdout and stderr are then
// checked by the stdout and stderr commands as after exec.
//
//	status N PROGRAM ARGS...
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N PROGRAM ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
	// Every output of every command, refusals included, is scanned for the cluster's and the
	// registry's credentials, and the script's own secrets (its log key, its witness's key).
	for _, stream := range []string{"stdout", "stderr"} {
		if what := holdsSecret(ts, []byte(ts.ReadFile(stream))); what != "" {
			ts.Fatalf("%s of %s holds %s", stream, strings.Join(args[1:], " "), what)
		}
	}
}

// holdsSecret names the kind of secret b holds ("" when none): a credential of the cluster or
// the registry, or one of the script's own secrets.
func holdsSecret(ts *testscript.TestScript, b []byte) string {
	for what, l := range map[string]*secretList{
		"a credential of the cluster or the registry":       &scriptSecrets,
		"a secret of the script (secret-file, witness-env)": ts.Value(scriptSecretsKey{}).(*secretList),
	} {
		for _, secret := range l.list() {
			if len(secret) > 0 && bytes.Contains(b, secret) {
				return what
			}
		}
	}
	return ""
}

// scriptSecretsKey keys the script's own secretList in its testscript values.
type scriptSecretsKey struct{}

// cmdSecretFile adds the forms of the private key in FILE to the script's secrets: the file's
// text, and for a note key (PRIVATE+KEY+name+hash+base64) its base64 and the raw key bytes.
//
//	secret-file FILE
func cmdSecretFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: secret-file FILE")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	text := strings.TrimSpace(string(b))
	if len(text) < 32 {
		ts.Fatalf("secret-file: %s holds %d bytes, too few to be a key", args[0], len(text))
	}
	secrets := [][]byte{[]byte(text)}
	// The name holds no '+' and the hash is hex: the key is the fifth field (its base64 may
	// hold '+').
	if f := strings.SplitN(text, "+", 5); len(f) == 5 && f[0] == "PRIVATE" && f[1] == "KEY" {
		enc := f[4]
		raw, err := base64.StdEncoding.DecodeString(enc)
		ts.Check(err)
		// The first byte is the algorithm; the rest is the seed.
		secrets = append(secrets, []byte(enc), raw, raw[1:], []byte(base64.StdEncoding.EncodeToString(raw[1:])), []byte(hex.EncodeToString(raw[1:])))
	}
	ts.Value(scriptSecretsKey{}).(*secretList).add(secrets)
}

// cmdNoSecrets fails when a regular file below any DIR holds a credential of the cluster or the
// registry or one of the script's secrets; a DIR with no file to scan fails too.
//
//	no-secrets DIR...
func cmdNoSecrets(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: no-secrets DIR...")
	}
	for _, a := range args {
		files := 0
		ts.Check(filepath.WalkDir(ts.MkAbs(a), func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			if what := holdsSecret(ts, b); what != "" {
				ts.Fatalf("%s holds %s", p, what)
			}
			return nil
		}))
		if files == 0 {
			ts.Fatalf("no-secrets: no file below %s", a)
		}
	}
}

// cmdRmClosure removes from the store at STORE every object of ROOT's closure and every index
// entry naming one of them, as a copy that left them out would (cp -a of part of a store); the
// rest of the store, its log included, stays. It prints the removed entries' paths, one a line.
//
//	rm-closure STORE ROOT
func cmdRmClosure(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: rm-closure STORE ROOT")
	}
	root := ts.MkAbs(args[0])
	st, err := store.Open(root)
	ts.Check(err)
	c, err := ociartifact.Collect(st, digest.Digest(args[1]), nil)
	if err != nil {
		st.Close()
		ts.Fatalf("rm-closure: closure of %s: %v", args[1], err)
	}
	in := map[digest.Digest]bool{}
	var rm []string
	for _, d := range c.Closure {
		in[d.Digest] = true
		rm = append(rm, "blobs/sha256/"+d.Digest.Encoded())
	}
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts, evidence.IndexLiveAudits} {
		es, err := st.ListIndex(kind)
		ts.Check(err)
		for _, e := range es {
			if in[e.Descriptor.Digest] {
				rm = append(rm, "index/"+kind+"/"+e.Key.Encoded())
			}
		}
	}
	ts.Check(st.Close())
	var out strings.Builder
	for _, r := range rm {
		ts.Check(os.Remove(filepath.Join(root, r)))
		if strings.HasPrefix(r, "index/") {
			fmt.Fprintln(&out, r)
		}
	}
	ts.Stdout().Write([]byte(out.String()))
}

// cmdWitnessEnv starts a real litewitness (witnesstest) for this script, knowing the log ORIGIN
// under the note verifier key in VKEY, its own key only in an ssh-agent, and sets WITNESS_URL,
// WITNESS_NAME and WITNESS_VKEY (the path of a file holding its cosignature verifier key). It
// is stopped when the script ends; its private key is among the script's secrets. A script
// guards it with [witness].
//
//	witness-env NAME ORIGIN VKEY
func cmdWitnessEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: witness-env NAME ORIGIN VKEY")
	}
	bin, err := witnesstest.FindTool()
	ts.Check(err)
	vkey, err := os.ReadFile(ts.MkAbs(args[2]))
	ts.Check(err)
	w, err := witnesstest.Run(bin, args[0], args[1], strings.TrimSpace(string(vkey)))
	ts.Check(err)
	ts.Defer(w.Stop)
	ts.Value(scriptSecretsKey{}).(*secretList).add(w.Secrets())
	file := ts.MkAbs("witness.vkey")
	ts.Check(os.WriteFile(file, []byte(w.VKey+"\n"), 0o644))
	ts.Setenv("WITNESS_URL", w.URL)
	ts.Setenv("WITNESS_NAME", w.Name)
	ts.Setenv("WITNESS_VKEY", file)
}

// scriptSecrets holds the credentials of the cluster and the registry once either is started:
// scripts run in parallel, so the scan reads them under a lock rather than from the start-once
// structs another script may be filling.
var scriptSecrets secretList

type secretList struct {
	mu      sync.Mutex
	secrets [][]byte
}

func (l *secretList) add(s [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.secrets = append(l.secrets, s...)
}

func (l *secretList) list() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.secrets[:len(l.secrets):len(l.secrets)]
}

// The real registry of the scripts that need one, started by the first registry-env and stopped
// by TestMain.
var scriptRegistry struct {
	once sync.Once
	r    *ocitest.Registry
	err  error
}

// cmdRegistryEnv starts (once per test run) the distribution registry on 127.0.0.1 with TLS (a CA
// made for the run) and htpasswd basic auth, and sets, for the script: REGISTRY (host:port),
// REGISTRY_CA (the CA's PEM file), DOCKER_CONFIG (a directory whose config.json holds the right
// credentials), BAD_DOCKER_CONFIG (the right user, a wrong password) and NO_DOCKER_CONFIG (no
// credentials). A script guards it with [registry]: without QL3_TOOL_REGISTRY it is skipped,
// except under CI=true, where the tool is built or the start fails.
//
//	registry-env
func cmdRegistryEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry-env")
	}
	scriptRegistry.once.Do(func() {
		scriptRegistry.r, scriptRegistry.err = ocitest.Start()
		if scriptRegistry.r != nil {
			scriptSecrets.add(scriptRegistry.r.Secrets())
		}
	})
	ts.Check(scriptRegistry.err)
	r := scriptRegistry.r
	dirs := map[string]string{}
	for _, name := range []string{"DOCKER_CONFIG", "BAD_DOCKER_CONFIG", "NO_DOCKER_CONFIG"} {
		dirs[name] = ts.MkAbs(strings.ToLower(name))
		ts.Check(os.Mkdir(dirs[name], 0o700))
		ts.Setenv(name, dirs[name])
	}
	ts.Check(r.WriteDockerConfig(dirs["DOCKER_CONFIG"], r.User, r.Password))
	ts.Check(r.WriteDockerConfig(dirs["BAD_DOCKER_CONFIG"], r.User, "a-wrong-password"))
	ts.Check(os.WriteFile(filepath.Join(dirs["NO_DOCKER_CONFIG"], "config.json"), []byte(`{"auths":{}}`), 0o600))
	ts.Setenv("REGISTRY", r.Host)
	ts.Setenv("REGISTRY_CA", r.CAFile)
}

func stopScriptRegistry() {
	if scriptRegistry.r != nil {
		scriptRegistry.r.Stop()
	}
}

// The real cluster of the scripts that need one, started by the first cluster-env and stopped by
// TestMain.
var scriptCluster struct {
	once sync.Once
	c    *testcluster.Cluster
	err  error
}

// cmdClusterEnv starts (once per test run) a real etcd and kube-apiserver and sets, for the script:
// KUBECONFIG_SRC (a kubeconfig with inline credentials), CONTEXT, KUBECTL, KUBECTL_DIGEST,
// CLUSTER_UID, SERVER and CA_DIGEST. The namespace qinglong exists. A script guards it with [cluster]: without
// the Kubernetes tools the script is skipped, except under CI=true, where the condition holds and
// the start fails.
//
//	cluster-env
func cmdClusterEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: cluster-env")
	}
	scriptCluster.once.Do(func() {
		tools, err := testcluster.FindTools()
		if err != nil {
			scriptCluster.err = err
			return
		}
		c, err := testcluster.Start(context.Background(), tools, testcluster.Options{})
		if err != nil {
			scriptCluster.err = err
			return
		}
		scriptCluster.c = c
		scriptSecrets.add(c.Secrets())
		scriptCluster.err = c.CreateNamespace(context.Background(), "qinglong")
	})
	ts.Check(scriptCluster.err)
	c := scriptCluster.c
	ts.Setenv("KUBECONFIG_SRC", c.KubeconfigPath)
	ts.Setenv("CONTEXT", c.Context)
	ts.Setenv("KUBECTL", c.KubectlPath)
	ts.Setenv("KUBECTL_DIGEST", string(c.KubectlDigest))
	ts.Setenv("CLUSTER_UID", c.KubeSystemUID)
	ts.Setenv("SERVER", c.Server)
	ts.Setenv("CA_DIGEST", string(evidence.FromBytes(c.CAPEM)))
}

func stopScriptCluster() {
	if scriptCluster.c != nil {
		_ = scriptCluster.c.Stop()
	}
}

// cmdRunPrinted runs, verbatim and in order, the command lines printed under the line starting
// with HEADER: the lines indented by two spaces that follow it, in the last command's stdout, or
// in FILE when given (a copy of an earlier stdout). Each runs as one `sh -c LINE` with the
// script's environment (ql3 is on its PATH) and must exit 0; it stops at the first that fails.
// FIRST and LAST (1-based, inclusive) run only those lines.
//
//	run-printed [-f FILE] HEADER [FIRST LAST]
func cmdRunPrinted(ts *testscript.TestScript, neg bool, args []string) {
	text := ""
	if len(args) >= 2 && args[0] == "-f" {
		b, err := os.ReadFile(ts.MkAbs(args[1]))
		ts.Check(err)
		text, args = string(b), args[2:]
	} else {
		text = ts.ReadFile("stdout")
	}
	if neg || (len(args) != 1 && len(args) != 3) {
		ts.Fatalf("usage: run-printed [-f FILE] HEADER [FIRST LAST]")
	}
	var lines []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, args[0]):
			in = true
		case in && strings.HasPrefix(l, "  "):
			lines = append(lines, strings.TrimPrefix(l, "  "))
		default:
			in = false
		}
	}
	if len(lines) == 0 {
		ts.Fatalf("no command lines under %q", args[0])
	}
	if len(args) == 3 {
		first, err := strconv.Atoi(args[1])
		ts.Check(err)
		last, err := strconv.Atoi(args[2])
		ts.Check(err)
		if first < 1 || last > len(lines) || first > last {
			ts.Fatalf("lines %d to %d of %d", first, last, len(lines))
		}
		lines = lines[first-1 : last]
	}
	for _, l := range lines {
		ts.Logf("run-printed: %s", l)
		if err := ts.Exec("sh", "-c", l); err != nil {
			ts.Fatalf("%s: %v", l, err)
		}
	}
}
