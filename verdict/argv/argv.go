// Package argv is the one definition of the ceremony's kubectl invocations: the argv and the
// environment of each step, and the check that a recorded one is exactly that. It runs nothing,
// so the offline auditor shares it with the runner.
package argv

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

const (
	// CodeUnknownStep: the step name is not one of the seven ceremony steps.
	CodeUnknownStep refuse.Code = "KUBECTL_UNKNOWN_STEP"
	// CodeArgvShape: a recorded argv is not exactly the fixed invocation of its step.
	CodeArgvShape refuse.Code = "KUBECTL_ARGV_SHAPE"
	// CodeEnvShape: a recorded environment is not exactly the rationale §6 (docs/rationale.md#6-kubectl-invocations) set for the run's directory.
	CodeEnvShape refuse.Code = "KUBECTL_ENV_SHAPE"
)

// The arguments after the global flags, one table so that nothing else re-types them. None of
// them may ever carry --force-conflicts: a conflict must refuse, not take ownership.
var stepArgs = map[string][]string{
	evidence.StepIdentity:      {"get", "namespace", "kube-system", "-o=json"},
	evidence.StepVersion:       {"version", "-o=json"},
	evidence.StepDryRun:        {"apply", "--server-side", "--field-manager=" + evidence.FieldManager, "--dry-run=server", "--validate=strict", "-f=-"},
	evidence.StepApply:         {"apply", "--server-side", "--field-manager=" + evidence.FieldManager, "--validate=strict", "-f=-"},
	evidence.StepConvergence:   {"get", "-f=-", "-o=json", "--show-managed-fields=true"},
	evidence.StepNamespaces:    {"get", "namespace", "-o=json"},
	evidence.StepIdentityFinal: {"get", "namespace", "kube-system", "-o=json"},
}

// operandAt says where a step's operands go among its fixed arguments: the namespace read names
// the namespaces it reads (get namespace A B -o=json). Every other step takes none.
var operandAt = map[string]int{evidence.StepNamespaces: 2}

// MaxOperands bounds the namespaces one read names: far more than a release spans, and a
// bounded argv (64 bytes a name at most).
const MaxOperands = 4096

// labelRE is an RFC 1123 DNS label, the form of every namespace name the API server accepts: it
// starts with a letter or digit, so no operand can ever be read as a flag.
var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidOperands reports whether names is a list the namespace read may carry: at least one, at
// most MaxOperands, each a DNS label, strictly ascending (so sorted and without repeats: one list
// per set of namespaces, the one the auditor re-derives).
func ValidOperands(names []string) bool {
	if len(names) == 0 || len(names) > MaxOperands {
		return false
	}
	for i, n := range names {
		if !labelRE.MatchString(n) || (i > 0 && names[i-1] >= n) {
			return false
		}
	}
	return true
}

// argsFor returns the arguments of step with its operands in place, and false when the operands
// do not fit the step (none for a step that takes none, a valid list for one that does).
func argsFor(step string, names []string) ([]string, bool) {
	args, ok := stepArgs[step]
	if !ok {
		return nil, false
	}
	at, takes := operandAt[step]
	if !takes {
		return slices.Clone(args), len(names) == 0
	}
	if !ValidOperands(names) {
		return nil, false
	}
	out := append(slices.Clone(args[:at]), names...)
	return append(out, args[at:]...), true
}

// TakesOperands reports whether step names operands (the namespace read).
func TakesOperands(step string) bool {
	_, ok := operandAt[step]
	return ok
}

// Steps lists the step names in the order a preflight and a full apply run them: the version read
// runs in a preflight only (between its identity read and dry-run); the namespace read runs only
// when the applied objects live in namespaces the manifest does not hold.
func Steps() []string {
	return []string{evidence.StepIdentity, evidence.StepVersion, evidence.StepDryRun, evidence.StepApply, evidence.StepConvergence, evidence.StepNamespaces, evidence.StepIdentityFinal}
}

// StepArgs returns a copy of the fixed arguments of step (after the global flags), without the
// operands of the namespace read.
func StepArgs(step string) ([]string, bool) {
	a, ok := stepArgs[step]
	return slices.Clone(a), ok
}

// ReadsStdin reports whether step reads the manifest on stdin (-f=-). The identity reads take no
// stdin; the other three require the verified manifest bytes.
func ReadsStdin(step string) bool {
	return slices.Contains(stepArgs[step], "-f=-")
}

// Names inside the private per-run directory.
const (
	kubeconfigName = "kubeconfig"
	cacheName      = "cache"
	configName     = "config"
	tmpName        = "tmp"
	dirPrefix      = "ql3-kubectl-"
)

// execPathRE is what Executable.ExecPath returns: the held descriptor, never a path that could be
// resolved to other bytes.
var execPathRE = regexp.MustCompile(`^/proc/self/fd/[0-9]+$`)

// dirBaseRE is the base name rundir.Create gives the per-run directory.
var dirBaseRE = regexp.MustCompile(`^` + dirPrefix + `[0-9]+$`)

func globalFlags(dir, context string) []string {
	return []string{
		"--kubeconfig=" + dir + "/" + kubeconfigName,
		"--context=" + context,
		"--cache-dir=" + dir + "/" + cacheName,
	}
}

// environ returns the complete environment of a run in dir, in its fixed order. PATH names a
// directory that does not exist, so kubectl can find no plugin or credential helper; KUBERC=off
// and KUBECTL_KUBERC=false stop kubectl 1.34 from reading a kuberc that could add default flags.
func environ(dir string) []string {
	return []string{
		"HOME=" + dir,
		"XDG_CACHE_HOME=" + dir + "/" + cacheName,
		"XDG_CONFIG_HOME=" + dir + "/" + configName,
		"TMPDIR=" + dir + "/" + tmpName,
		"KUBECACHEDIR=" + dir + "/" + cacheName,
		"PATH=/nonexistent",
		"LANG=C",
		"KUBERC=off",
		"KUBECTL_KUBERC=false",
	}
}

// buildArgv returns the complete argv of step run through execPath in dir with context, and the
// namespace read's operands.
func buildArgv(execPath, step, dir, context string, names ...string) ([]string, bool) {
	args, ok := argsFor(step, names)
	if !ok {
		return nil, false
	}
	argv := append([]string{execPath}, globalFlags(dir, context)...)
	return append(argv, args...), true
}

// checkDir accepts the per-run directory: absolute, clean, and named as rundir.Create names it, so a
// recorded run cannot have pointed kubectl at the operator's home or another shared directory.
func checkDir(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir && dirBaseRE.MatchString(filepath.Base(dir)) &&
		!strings.ContainsAny(dir, "\x00\n\r")
}

// CheckInvocation re-derives the shape of a recorded run for the offline auditor: argv[0] is
// /proc/self/fd/<n>, the three global flags name one private per-run directory and the given
// context, the step arguments are exactly the fixed ones (so never --force-conflicts and never an
// extra flag), and env is exactly the environment of that same directory, in order. The namespace
// read's operands must be ValidOperands; which namespaces they must be is the caller's to check
// (Operands), against the convergence read.
func CheckInvocation(step, context string, argv, env []string) error {
	fixed, ok := stepArgs[step]
	if !ok {
		return refuse.New(CodeUnknownStep, "unknown kubectl step %s", quoteShort(step))
	}
	var names []string
	if at, takes := operandAt[step]; takes && len(argv) > 4+len(fixed) {
		names = argv[4+at : len(argv)-(len(fixed)-at)]
	}
	args, ok := argsFor(step, names)
	if !ok {
		return refuse.New(CodeArgvShape, "step %s: the operands are not 1 to %d namespace names, each a DNS label, in ascending order", step, MaxOperands)
	}
	if context == "" || strings.ContainsRune(context, 0) {
		return refuse.New(CodeArgvShape, "step %s: the expected context is empty or contains NUL", step)
	}
	if want := 1 + 3 + len(args); len(argv) != want {
		return refuse.New(CodeArgvShape, "step %s: argv has %d elements, want %d", step, len(argv), want)
	}
	if !execPathRE.MatchString(argv[0]) {
		return refuse.New(CodeArgvShape, "step %s: argv[0] is not /proc/self/fd/<n>", step)
	}
	kc, ok1 := strings.CutPrefix(argv[1], "--kubeconfig=")
	dir, ok2 := strings.CutSuffix(kc, "/"+kubeconfigName)
	if !ok1 || !ok2 || !checkDir(dir) {
		return refuse.New(CodeArgvShape, "step %s: argv[1] is not --kubeconfig=<private run directory>/%s", step, kubeconfigName)
	}
	if argv[2] != "--context="+context {
		return refuse.New(CodeArgvShape, "step %s: argv[2] does not name the expected context", step)
	}
	if argv[3] != "--cache-dir="+dir+"/"+cacheName {
		return refuse.New(CodeArgvShape, "step %s: argv[3] is not --cache-dir= in the run directory of --kubeconfig", step)
	}
	for i, a := range args {
		if argv[4+i] != a {
			return refuse.New(CodeArgvShape, "step %s: argv[%d] differs from the fixed step argument %q", step, 4+i, a)
		}
	}
	want := environ(dir)
	if len(env) != len(want) {
		return refuse.New(CodeEnvShape, "step %s: env has %d entries, want %d", step, len(env), len(want))
	}
	for i := range want {
		if env[i] != want[i] {
			name, _, _ := strings.Cut(want[i], "=")
			return refuse.New(CodeEnvShape, "step %s: env[%d] is not %s of the run directory", step, i, name)
		}
	}
	return nil
}

// quoteShort quotes a caller-supplied name for a message, bounded so that a hostile record cannot
// make the message arbitrarily long.
func quoteShort(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("of %d bytes", len(s))
	}
	return strconv.Quote(s)
}

// Build returns the argv of step for the held kubectl execPath, the run directory dir and the
// context (and the namespace read's names), and whether step is a ceremony step with operands
// that fit it.
func Build(execPath, step, dir, context string, names ...string) ([]string, bool) {
	return buildArgv(execPath, step, dir, context, names...)
}

// Operands returns the namespace names of a recorded namespace read whose argv CheckInvocation
// accepted (nil for any other step).
func Operands(step string, argv []string) []string {
	at, takes := operandAt[step]
	fixed := stepArgs[step]
	if !takes || len(argv) <= 4+len(fixed) {
		return nil
	}
	return slices.Clone(argv[4+at : len(argv)-(len(fixed)-at)])
}

// Environ is the whole environment of a run in dir (docs/rationale.md#6-kubectl-invocations).
func Environ(dir string) []string { return environ(dir) }

// Known reports whether step is one of the ceremony's kubectl steps.
func Known(step string) bool {
	_, ok := stepArgs[step]
	return ok
}

// QuoteShort renders an untrusted step name for a message.
func QuoteShort(s string) string { return quoteShort(s) }

// Names inside the private per-run directory, and the run directory's name prefix.
const (
	KubeconfigName = kubeconfigName
	CacheName      = cacheName
	ConfigName     = configName
	TmpName        = tmpName
	DirPrefix      = dirPrefix
)

// ValidDir reports whether dir is a run directory's path in the one form the ceremony writes.
func ValidDir(dir string) bool { return checkDir(dir) }
