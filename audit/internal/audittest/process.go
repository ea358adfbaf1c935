package audittest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// CopyCP copies the store at root to a new path with cp -a and returns the copy's root.
func CopyCP(t testing.TB, root string) string {
	t.Helper()
	dst := filepath.Join(PrivateDir(t), "store-cp")
	run(t, "", "cp", "-a", root, dst)
	return dst
}

// CopyTar copies the store at root to a new path through a tar archive (c, then x with -p) and
// returns the copy's root.
func CopyTar(t testing.TB, root string) string {
	t.Helper()
	dir := PrivateDir(t)
	archive := filepath.Join(dir, "store.tar")
	run(t, "", "tar", "-C", filepath.Dir(root), "-cf", archive, filepath.Base(root))
	dst := filepath.Join(dir, "x")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "", "tar", "-C", dst, "-xpf", archive)
	return filepath.Join(dst, filepath.Base(root))
}

func run(t testing.TB, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.Bytes())
	}
	return out.Bytes()
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// BuildQL3 builds cmd/ql3 once per test binary and returns its path.
func BuildQL3(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "ql3-audittest-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "ql3")
		cmd := exec.Command(goTool(), "build", "-o", built, "./cmd/ql3")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/ql3: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// RemoveBuilt removes what BuildQL3 built; call it from TestMain after the tests.
func RemoveBuilt() {
	if built != "" {
		_ = os.RemoveAll(filepath.Dir(built))
	}
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("audittest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// goTool is the go command that runs the tests ($GOROOT/bin/go), else go on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Trace is what an strace -f log shows of a process tree.
type Trace struct {
	Execs     []string // the paths of every execve/execveat call
	Processes int      // fork, vfork, and clone/clone3 calls without CLONE_THREAD
	Threads   int      // clone/clone3 calls with CLONE_THREAD
	Network   []string // socket, connect, and the other socket calls
}

// The syscall name opens a line after the pid (strace -f), unless the line resumes a call.
var (
	callRE = regexp.MustCompile(`^\d+\s+([a-z0-9_]+)\((.*)$`)
	execRE = regexp.MustCompile(`^"([^"]*)"`)
)

// ParseTrace reads an strace -f -o log.
func ParseTrace(log []byte) Trace {
	var tr Trace
	for _, line := range strings.Split(string(log), "\n") {
		m := callRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch name, args := m[1], m[2]; name {
		case "execve", "execveat":
			if name == "execveat" {
				_, args, _ = strings.Cut(args, ", ")
			}
			p := args
			if e := execRE.FindStringSubmatch(args); e != nil {
				p = e[1]
			}
			tr.Execs = append(tr.Execs, p)
		case "fork", "vfork":
			tr.Processes++
		case "clone", "clone3":
			if strings.Contains(args, "CLONE_THREAD") {
				tr.Threads++
			} else {
				tr.Processes++
			}
		case "socket", "connect", "socketpair", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "recvfrom", "recvmsg":
			tr.Network = append(tr.Network, name)
		}
	}
	return tr
}

// StraceArgs are the strace arguments of the no-network, no-program test.
var StraceArgs = []string{"-f", "-e", "trace=execve,execveat,socket,connect,fork,vfork,clone,clone3"}

// Strace runs argv under strace and returns the parsed trace, the command's output and its exit
// error.
func Strace(t testing.TB, strace string, argv ...string) (Trace, []byte, error) {
	t.Helper()
	log := filepath.Join(PrivateDir(t), "strace.log")
	cmd := exec.Command(strace, append(append(append([]string(nil), StraceArgs...), "-o", log), argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	b, rerr := os.ReadFile(log)
	if rerr != nil {
		t.Fatalf("strace log: %v (strace: %v)\n%s", rerr, err, out.Bytes())
	}
	return ParseTrace(b), out.Bytes(), err
}

// Need returns the path of tool, or ends the test: a failure under CI=true (.ci/run installs
// it), a skip otherwise.
func Need(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI: %v", tool, err)
		}
		t.Skipf("%s not installed: %v", tool, err)
	}
	return p
}

// NoNetworkNoProgram runs the built ql3 audit of subject in the store at root under strace and
// requires: the audit passed, exactly one execve (ql3 itself), no process created (threads are
// fine), no socket call; then again in a process without a network namespace of its own.
func NoNetworkNoProgram(t *testing.T, root, subject string) {
	strace := Need(t, "strace")
	ql3 := BuildQL3(t)
	argv := []string{ql3, "audit", "--store", root, subject}
	tr, out, err := Strace(t, strace, argv...)
	if err != nil || !bytes.Contains(out, []byte(" passed: ")) {
		t.Fatalf("ql3 audit under strace: %v\n%s", err, out)
	}
	if len(tr.Execs) != 1 || tr.Execs[0] != ql3 || tr.Processes != 0 || len(tr.Network) != 0 {
		t.Fatalf("ql3 audit: execs %q, %d processes created, network calls %q; want only the execve of %s", tr.Execs, tr.Processes, tr.Network, ql3)
	}
	if tr.Threads == 0 {
		t.Fatalf("the trace shows no thread at all: the clone filter is not seeing the Go runtime")
	}
	unshare := Need(t, "unshare")
	for _, flags := range [][]string{{"-n"}, {"-r", "-n"}} {
		cmd := exec.Command(unshare, append(flags, argv...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			if !bytes.Contains(out, []byte(" passed: ")) {
				t.Fatalf("unshare %v ql3 audit: %s", flags, out)
			}
			return
		}
		if !bytes.Contains(out, []byte("unshare failed")) && !bytes.Contains(out, []byte("Operation not permitted")) {
			t.Fatalf("unshare %v ql3 audit: %v\n%s", flags, err, out)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("unshare -n is not permitted here")
	}
	t.Skip("unshare -n is not permitted here")
}
