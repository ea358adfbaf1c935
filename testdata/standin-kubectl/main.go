// Command standin-kubectl is a STAND-IN for kubectl, for fault-injection tests only. It injects
// only faults that a real kubectl cannot be made to produce on demand; everything a real kubectl
// can do is tested with the real one.
//
// The mode and the path of the real kubectl are fixed at build time, because the runner under test
// gives its child a fixed environment that could not select them:
//
//	go build -ldflags "-X main.mode=hang -X main.real=/abs/kubectl" -o kubectl ./testdata/standin-kubectl
//
// Modes:
//
//	hang           print "pid=<n>" lines for itself and one child in its process group, ignore
//	               SIGTERM/SIGINT/SIGHUP and sleep forever
//	flood          write 5 MiB of the line "flood\n" repeated to stdout, exit 0
//	chatty         write 3 MiB of "chatty-stderr\n" to stderr, then 3 MiB of "chatty-stdout\n" to
//	               stdout, exit 0 (deadlocks a runner that drains stdout before stderr)
//	partial        write the first half of a Namespace JSON object to stdout, exit 1
//	partial-kill   write the same half object, then SIGKILL itself (a crash mid-output)
//	lost-response  for a real mutation (apply without a --dry-run other than none), run the real
//	               kubectl with the same argv, environment and stdin, discard its output, then
//	               SIGKILL itself: the mutation happened, the response is lost. Every other
//	               invocation execs the real kubectl in place (stdout, stderr, exit code pass through).
//	version-client-only
//	               for `version`, exec the real kubectl with --client added: its own version alone,
//	               exit 0 (a real kubectl that reached no server exits 1). Every other invocation
//	               execs the real kubectl in place.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

var (
	mode string // set with -ldflags "-X main.mode=..."
	real string // absolute path of the real kubectl, for lost-response
)

// partialJSON is what partial and partial-kill write: the first half of a plausible object.
const partialJSON = `{"apiVersion":"v1","kind":"Namespace","metadata":{"creationTimestamp":"2025-01-01T00:00:00Z","name":"kube-system","resourceVersion":"1`

const childArg = "__standin-child"

func main() {
	switch mode {
	case "hang":
		hang()
	case "flood":
		write(os.Stdout, "flood\n", 5<<20)
		os.Exit(0)
	case "chatty":
		write(os.Stderr, "chatty-stderr\n", 3<<20)
		write(os.Stdout, "chatty-stdout\n", 3<<20)
		os.Exit(0)
	case "partial":
		_, _ = os.Stdout.WriteString(partialJSON)
		os.Exit(1)
	case "partial-kill":
		_, _ = os.Stdout.WriteString(partialJSON)
		die()
	case "lost-response":
		lostResponse()
	case "version-client-only":
		versionClientOnly()
	default:
		fmt.Fprintf(os.Stderr, "standin-kubectl: built without a known mode (%q)\n", mode)
		os.Exit(125)
	}
}

// write writes n bytes of line repeated (the last line cut at n) to f.
func write(f *os.File, line string, n int) {
	b := bytes.Repeat([]byte(line), n/len(line)+1)[:n]
	if _, err := f.Write(b); err != nil {
		os.Exit(2)
	}
}

func hang() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if len(os.Args) < 2 || os.Args[1] != childArg {
		// argv[0] is /proc/self/fd/N of the runner, closed at exec: re-exec through /proc/self/exe.
		c := exec.Command("/proc/self/exe", childArg)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "standin-kubectl: start child:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("pid=%d\n", os.Getpid())
	for {
		time.Sleep(time.Hour)
	}
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Hour) // SIGKILL is asynchronous; never get past this point
}

// isMutation reports whether args are an apply that writes: no --dry-run, or --dry-run=none.
func isMutation(args []string) bool {
	apply := false
	for _, a := range args {
		if a == "apply" {
			apply = true
		}
		if a == "--dry-run" || (strings.HasPrefix(a, "--dry-run=") && a != "--dry-run=none") {
			return false
		}
	}
	return apply
}

func lostResponse() {
	if !strings.HasPrefix(real, "/") {
		fmt.Fprintln(os.Stderr, "standin-kubectl: lost-response built without an absolute main.real")
		os.Exit(125)
	}
	argv := append([]string{real}, os.Args[1:]...)
	if !isMutation(os.Args[1:]) {
		err := syscall.Exec(real, argv, os.Environ())
		fmt.Fprintln(os.Stderr, "standin-kubectl: exec real kubectl:", err)
		os.Exit(126)
	}
	c := &exec.Cmd{Path: real, Args: argv, Env: os.Environ(), Stdin: os.Stdin}
	_ = c.Run() // whatever it answered is lost with us
	die()
}

func versionClientOnly() {
	if !strings.HasPrefix(real, "/") {
		fmt.Fprintln(os.Stderr, "standin-kubectl: version-client-only built without an absolute main.real")
		os.Exit(125)
	}
	argv := append([]string{real}, os.Args[1:]...)
	for _, a := range os.Args[1:] {
		if a == "version" {
			argv = append(argv, "--client")
		}
	}
	err := syscall.Exec(real, argv, os.Environ())
	fmt.Fprintln(os.Stderr, "standin-kubectl: exec real kubectl:", err)
	os.Exit(126)
}
