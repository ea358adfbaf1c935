// Command ql3-cluster keeps one local etcd + kube-apiserver running across commands for `make
// cluster-up`, `make cluster-down` and `make demo`.
//
//	ql3-cluster up    start the cluster, or report the one already running
//	ql3-cluster env   print QL3_*=value lines for the running cluster (exit 1 if none)
//	ql3-cluster down  stop the recorded processes and remove the state directory
//
// The state directory is $QL3_CLUSTER_DIR when set (an absolute path), otherwise one per checkout:
// $HOME/.cache/ql3/clusters/<first 16 hex of SHA-256 of the checkout's absolute path>. Two
// checkouts, or two test runs that set their own QL3_CLUSTER_DIR, never stop each other's cluster.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// state is what `up` records so later commands can find, verify and stop the same processes.
type state struct {
	Procs          []proc        `json:"procs"`
	Dir            string        `json:"dir"`
	KubeconfigPath string        `json:"kubeconfig"`
	Context        string        `json:"context"`
	TokenContext   string        `json:"tokenContext"`
	Server         string        `json:"server"`
	KubectlPath    string        `json:"kubectl"`
	KubectlDigest  digest.Digest `json:"kubectlDigest"`
	KubeSystemUID  string        `json:"kubeSystemUID"`
}

// proc pins a PID to its cmdline and start time so a reused PID is never mistaken for ours.
type proc struct {
	PID       int    `json:"pid"`
	Cmdline   string `json:"cmdline"`
	StartTime string `json:"startTime"`
}

var errNotRunning = errors.New("ql3-cluster: not running (run `make cluster-up`)")

func main() {
	if len(os.Args) != 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up()
	case "env":
		err = env()
	case "down":
		err = down()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ql3-cluster up|env|down")
	os.Exit(2)
}

// stateDir names this checkout's cluster state. The checkout is the directory holding go.mod,
// found upwards from the working directory (`go run` and make both run from the checkout).
func stateDir() (string, error) {
	if d := os.Getenv("QL3_CLUSTER_DIR"); d != "" {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return "", fmt.Errorf("ql3-cluster: QL3_CLUSTER_DIR %q is not an absolute clean path", d)
		}
		return d, nil
	}
	checkout, err := checkoutRoot()
	if err != nil {
		return "", err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("ql3-cluster: home: %w", err)
	}
	sum := sha256.Sum256([]byte(checkout))
	return filepath.Join(home, ".cache", "ql3", "clusters", hex.EncodeToString(sum[:8])), nil
}

func checkoutRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("ql3-cluster: working directory: %w", err)
	}
	if wd, err = filepath.EvalSymlinks(wd); err != nil {
		return "", fmt.Errorf("ql3-cluster: working directory: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("ql3-cluster: no go.mod above %s: run from the checkout or set QL3_CLUSTER_DIR", wd)
		}
	}
}

func up() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	if st, err := load(dir); err == nil {
		if alive(st) == nil {
			printHuman(st, "already running")
			return nil
		}
		stopProcs(st)
	} else if !errors.Is(err, errNotRunning) {
		fmt.Fprintln(os.Stderr, "ql3-cluster: discarding unreadable state:", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("ql3-cluster: clean stale state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("ql3-cluster: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("ql3-cluster: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("ql3-cluster: %w", err)
	}
	tools, err := testcluster.FindTools()
	if err != nil {
		return err
	}
	// Start's ctx only bounds the readiness wait; Detach puts the children in their own session
	// with no parent-death signal, so they outlive this command.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx, tools, testcluster.Options{Dir: filepath.Join(dir, "run"), Detach: true})
	if err != nil {
		return fmt.Errorf("ql3-cluster: start: %w", err)
	}
	st := &state{Dir: c.Dir, KubeconfigPath: c.KubeconfigPath, Context: c.Context, TokenContext: c.TokenContext,
		Server: c.Server, KubectlPath: c.KubectlPath, KubectlDigest: c.KubectlDigest, KubeSystemUID: c.KubeSystemUID}
	for _, pid := range c.PIDs {
		cl, start, err := identity(pid)
		if err != nil {
			_ = c.Stop()
			return fmt.Errorf("ql3-cluster: pid %d vanished after start: %w", pid, err)
		}
		st.Procs = append(st.Procs, proc{PID: pid, Cmdline: cl, StartTime: start})
	}
	if err := save(dir, st); err != nil {
		_ = c.Stop()
		return err
	}
	printHuman(st, "started")
	return nil
}

func env() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	st, err := load(dir)
	if err != nil {
		return err
	}
	if err := alive(st); err != nil {
		return err
	}
	fmt.Printf("QL3_KUBECONFIG=%s\nQL3_CONTEXT=%s\nQL3_TOKEN_CONTEXT=%s\nQL3_CLUSTER_UID=%s\nQL3_KUBECTL=%s\nQL3_KUBECTL_DIGEST=%s\nQL3_SERVER=%s\n",
		st.KubeconfigPath, st.Context, st.TokenContext, st.KubeSystemUID, st.KubectlPath, st.KubectlDigest, st.Server)
	return nil
}

func down() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	st, err := load(dir)
	switch {
	case errors.Is(err, errNotRunning):
		if _, serr := os.Stat(dir); serr != nil {
			fmt.Println("ql3-cluster: not running")
			return nil
		}
	case err != nil:
		fmt.Fprintln(os.Stderr, "ql3-cluster: unreadable state, removing it without signalling:", err)
	default:
		stopProcs(st)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("ql3-cluster: remove state: %w", err)
	}
	fmt.Println("ql3-cluster: stopped")
	return nil
}

// stopProcs stops the apiserver before etcd, and only processes whose identity still matches.
func stopProcs(st *state) {
	for i := len(st.Procs) - 1; i >= 0; i-- {
		p := st.Procs[i]
		if !same(p) {
			continue
		}
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
		deadline := time.Now().Add(5 * time.Second)
		for same(p) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if same(p) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			for end := time.Now().Add(2 * time.Second); same(p) && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// alive checks every recorded process is ours and the apiserver still serves the recorded cluster.
func alive(st *state) error {
	if len(st.Procs) == 0 {
		return errNotRunning
	}
	for _, p := range st.Procs {
		if !same(p) {
			return fmt.Errorf("%w: pid %d is gone or is another process", errNotRunning, p.PID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := &testcluster.Cluster{Dir: st.Dir, KubeconfigPath: st.KubeconfigPath, Context: st.Context, KubectlPath: st.KubectlPath}
	out, _, err := c.Kubectl(ctx, nil, "get", "namespace", "kube-system", "-o=jsonpath={.metadata.uid}")
	if err != nil {
		return fmt.Errorf("%w: apiserver does not answer: %w", errNotRunning, err)
	}
	if string(out) != st.KubeSystemUID {
		return fmt.Errorf("%w: kube-system uid changed", errNotRunning)
	}
	return nil
}

// same reports whether pid is still the live (non-zombie) process that was recorded.
func same(p proc) bool {
	cl, start, err := identity(p.PID)
	return err == nil && cl == p.Cmdline && start == p.StartTime
}

// identity returns a live process's cmdline and start time (in clock ticks since boot).
func identity(pid int) (string, string, error) {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(base, "stat"))
	if err != nil {
		return "", "", err
	}
	// comm (field 2) may hold spaces and parentheses, so split after its closing ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", "", fmt.Errorf("pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return "", "", fmt.Errorf("pid %d: short stat", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", "", fmt.Errorf("pid %d: exited", pid)
	}
	cl, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil || len(cl) == 0 {
		return "", "", fmt.Errorf("pid %d: no cmdline: %v", pid, err)
	}
	return string(cl), f[19], nil
}

func load(dir string) (*state, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("ql3-cluster: read state: %w", err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("ql3-cluster: parse state: %w", err)
	}
	return &st, nil
}

// save writes state.json atomically so a crash never leaves a half file that hides live PIDs.
func save(dir string, st *state) error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("ql3-cluster: encode state: %w", err)
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("ql3-cluster: write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "state.json")); err != nil {
		return fmt.Errorf("ql3-cluster: write state: %w", err)
	}
	return nil
}

func printHuman(st *state, how string) {
	pids := make([]string, len(st.Procs))
	for i, p := range st.Procs {
		pids[i] = strconv.Itoa(p.PID)
	}
	fmt.Printf("ql3-cluster: %s (pids %s)\nkubeconfig: %s\ncontext: %s\ntoken context: %s\nserver: %s\nkube-system uid: %s\nkubectl: %s\nkubectl digest: %s\n",
		how, strings.Join(pids, " "), st.KubeconfigPath, st.Context, st.TokenContext, st.Server, st.KubeSystemUID, st.KubectlPath, st.KubectlDigest)
}
