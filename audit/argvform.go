package audit

import (
	"math"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/refuse"
)

// This file holds the canonical form of the two numbers a recorded argv carries, the held
// kubectl descriptor and the run directory's MkdirTemp suffix. argv.CheckInvocation fixes
// everything else byte for byte but accepts any digit string there, so without this a record could
// name /proc/self/fd/012: a name no Go process ever formats and so none ever executed. The logic is
// pure (strings and strconv) and depends on nothing else of the audit, so that it can move into a
// leaf package with the rest of argv shape checking.

// CodeArgvForm: a recorded argv names the kubectl descriptor or the run directory with a number
// that is not in the one form the ceremony writes.
const CodeArgvForm refuse.Code = "AUDIT_EXEC_ARGV_FORM"

const (
	execPathPrefix   = "/proc/self/fd/"
	kubeconfigPrefix = "--kubeconfig="
	kubeconfigSuffix = "/kubeconfig"
	runDirPrefix     = "ql3-kubectl-"
	// firstExecFD: descriptors 0-2 are kubectl's own stdin, stdout and stderr by the time it is
	// executed, and the runner refuses a kubectl held there.
	firstExecFD = 3
)

// checkArgvForm requires argv[0] to be /proc/self/fd/N, N as strconv.Itoa writes a descriptor
// (decimal, no sign, no leading zero, at least 3, at most a C int), and the run directory of
// --kubeconfig to end in ql3-kubectl-M, M a random number in canonical decimal: a uint64 as the
// run directory package draws it (internal/kubectl/rundir), or the uint32 of os.MkdirTemp that
// stores written before it hold.
func checkArgvForm(argv []string) error {
	if len(argv) < 2 {
		return refuse.New(CodeArgvForm, "argv has %d elements: no executable and run directory", len(argv))
	}
	fd, ok := strings.CutPrefix(argv[0], execPathPrefix)
	if n, canon := canonicalDecimal(fd, math.MaxInt32); !ok || !canon || n < firstExecFD {
		return refuse.New(CodeArgvForm, "argv[0] is not %sN with N a descriptor number from %d written in canonical decimal", execPathPrefix, firstExecFD)
	}
	dir, ok := runDir(argv)
	if !ok {
		return refuse.New(CodeArgvForm, "argv[1] is not %s<run directory>%s", kubeconfigPrefix, kubeconfigSuffix)
	}
	suffix, ok := strings.CutPrefix(dir[strings.LastIndexByte(dir, '/')+1:], runDirPrefix)
	if _, canon := canonicalDecimal(suffix, math.MaxUint64); !ok || !canon {
		return refuse.New(CodeArgvForm, "the run directory's name is not %sM with M a uint64 in canonical decimal", runDirPrefix)
	}
	return nil
}

// runDir returns the private run directory a recorded argv names in --kubeconfig. Once
// argv.CheckInvocation has passed, the environment and --cache-dir name the same directory.
func runDir(argv []string) (string, bool) {
	if len(argv) < 2 {
		return "", false
	}
	kc, ok := strings.CutPrefix(argv[1], kubeconfigPrefix)
	if !ok {
		return "", false
	}
	dir, ok := strings.CutSuffix(kc, kubeconfigSuffix)
	return dir, ok && dir != ""
}

// canonicalDecimal parses s as strconv.FormatUint writes a value up to limit: ASCII digits only,
// no sign, no leading zero (except "0" itself); canon is false for anything else.
func canonicalDecimal(s string, limit uint64) (n uint64, canon bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > limit {
		return 0, false
	}
	return n, true
}
