// Command ql3-cluster runs the test bed's real etcd and kube-apiserver for people: `make cluster-up`
// leaves it running for the demo and for trying ql3 by hand, `make cluster-down` stops exactly the
// processes `up` started. State lives under $HOME/.cache/ql3/cluster/.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/qinglong/ql3/internal/testcluster"
)

// state is what `up` records so that `down` signals only the processes it started: a PID alone
// could have been reused by an unrelated process, so its command line is kept beside it.
type state struct {
	PIDs          []int    `json:"pids"`
	Cmdlines      []string `json:"cmdlines"`
	Kubeconfig    string   `json:"kubeconfig"`
	Context       string   `json:"context"`
	TokenContext  string   `json:"tokenContext"`
	Server        string   `json:"server"`
	Kubectl       string   `json:"kubectl"`
	KubectlDigest string   `json:"kubectlDigest"`
	KubeSystemUID string   `json:"kubeSystemUid"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ql3-cluster up|down|env")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up()
	case "down":
		err = down()
	case "env":
		err = env()
	default:
		fmt.Fprintln(os.Stderr, "usage: ql3-cluster up|down|env")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ql3-cluster: %v\n", err)
		os.Exit(1)
	}
}

func stateDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "ql3", "cluster"), nil
}

func readState() (*state, string, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, dir, nil
	}
	if err != nil {
		return nil, dir, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, dir, fmt.Errorf("state %s: %w", filepath.Join(dir, "state.json"), err)
	}
	return &s, dir, nil
}

func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

// alive reports whether every recorded process still runs with its recorded command line.
func (s *state) alive() bool {
	if len(s.PIDs) == 0 || len(s.PIDs) != len(s.Cmdlines) {
		return false
	}
	for i, pid := range s.PIDs {
		if cmdline(pid) != s.Cmdlines[i] {
			return false
		}
	}
	return true
}

func up() error {
	s, dir, err := readState()
	if err != nil {
		return err
	}
	if s != nil && s.alive() {
		fmt.Println("ql3-cluster: already running")
		printFacts(s)
		return nil
	}
	if s != nil {
		if err := stop(s); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tools, err := testcluster.FindTools()
	if err != nil {
		return err
	}
	start := time.Now()
	// The processes are detached and must outlive this command, so their context is never cancelled.
	c, err := testcluster.Start(context.Background(), tools, testcluster.Options{Dir: filepath.Join(dir, "run"), Detach: true})
	if err != nil {
		return err
	}
	s = &state{
		PIDs: c.PIDs, Kubeconfig: c.KubeconfigPath, Context: c.Context, TokenContext: c.TokenContext,
		Server: c.Server, Kubectl: c.KubectlPath, KubectlDigest: c.KubectlDigest.String(), KubeSystemUID: c.KubeSystemUID,
	}
	for _, pid := range c.PIDs {
		s.Cmdlines = append(s.Cmdlines, cmdline(pid))
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), append(b, '\n'), 0o600); err != nil {
		_ = stop(s)
		return err
	}
	fmt.Printf("ql3-cluster: ready in %.1f s\n", time.Since(start).Seconds())
	printFacts(s)
	return nil
}

func printFacts(s *state) {
	fmt.Printf("kubeconfig:     %s\ncontext:        %s\ntoken context:  %s\nserver:         %s\nkube-system uid: %s\nkubectl:        %s\nkubectl digest: %s\n",
		s.Kubeconfig, s.Context, s.TokenContext, s.Server, s.KubeSystemUID, s.Kubectl, s.KubectlDigest)
}

func env() error {
	s, _, err := readState()
	if err != nil {
		return err
	}
	if s == nil || !s.alive() {
		return errors.New("not running: run make cluster-up")
	}
	fmt.Printf("QL3_KUBECONFIG=%s\nQL3_CONTEXT=%s\nQL3_TOKEN_CONTEXT=%s\nQL3_CLUSTER_UID=%s\nQL3_KUBECTL=%s\nQL3_KUBECTL_DIGEST=%s\nQL3_SERVER=%s\n",
		s.Kubeconfig, s.Context, s.TokenContext, s.KubeSystemUID, s.Kubectl, s.KubectlDigest, s.Server)
	return nil
}

func down() error {
	s, dir, err := readState()
	if err != nil {
		return err
	}
	if s == nil {
		fmt.Println("ql3-cluster: not running")
		return nil
	}
	if err := stop(s); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Println("ql3-cluster: stopped")
	return nil
}

// stop sends SIGTERM to each recorded process that is still the one recorded, then SIGKILL to any
// left after 5 s. A PID whose command line changed belongs to someone else and is never signalled.
func stop(s *state) error {
	var mine []int
	for i, pid := range s.PIDs {
		if i < len(s.Cmdlines) && s.Cmdlines[i] != "" && cmdline(pid) == s.Cmdlines[i] {
			mine = append(mine, pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range mine {
		for cmdline(pid) != "" && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if cmdline(pid) != "" {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d: %w", pid, err)
			}
		}
	}
	return nil
}
