package argv

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// FuzzCheckInvocation feeds arbitrary records to the auditor's check. argv and env arrive as
// NUL-joined strings. Whatever it accepts must be exactly the invocation Run would build for the
// directory and descriptor the record names; whatever it refuses carries one of its codes.
func FuzzCheckInvocation(f *testing.F) {
	for _, step := range Steps() {
		argv, env := validInvocation(f, step)
		f.Add(step, testCtx, strings.Join(argv, "\x00"), strings.Join(env, "\x00"))
	}
	argv, env := validInvocation(f, "apply")
	f.Add("apply", testCtx, strings.Join(append(argv, "--force-conflicts"), "\x00"), strings.Join(env, "\x00"))
	f.Add("apply", "other", strings.Join(argv, "\x00"), strings.Join(env, "\x00"))
	f.Add("dry-run", testCtx, strings.Join(argv, "\x00"), strings.Join(env, "\x00"))
	ns, _ := validInvocation(f, "namespaces")
	f.Add("namespaces", testCtx, strings.Join(append(ns[:6:6], "b", "a", "-o=json"), "\x00"), strings.Join(env, "\x00"))
	// The committed corpus must exist: an empty directory would make the fuzz run seedless.
	if m, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzCheckInvocation", "*")); len(m) == 0 {
		f.Fatal("committed seed corpus testdata/fuzz/FuzzCheckInvocation is missing")
	}
	f.Fuzz(func(t *testing.T, step, context, argvJoined, envJoined string) {
		argv := strings.Split(argvJoined, "\x00")
		env := strings.Split(envJoined, "\x00")
		err := CheckInvocation(step, context, argv, env)
		if err != nil {
			if c := refuse.CodeOf(err); c != CodeUnknownStep && c != CodeArgvShape && c != CodeEnvShape {
				t.Fatalf("refusal with code %q: %v", c, err)
			}
			return
		}
		dir := strings.TrimSuffix(strings.TrimPrefix(argv[1], "--kubeconfig="), "/kubeconfig")
		want, ok := buildArgv(argv[0], step, dir, context, Operands(step, argv)...)
		if !ok || !slices.Equal(argv, want) || !slices.Equal(env, environ(dir)) || !checkDir(dir) {
			t.Fatalf("accepted a record Run would not make: argv %q env %q", argv, env)
		}
		for _, a := range argv {
			if strings.Contains(a, "force") || (step == "namespaces" && strings.HasPrefix(a, "--all")) {
				t.Fatalf("accepted %q", a)
			}
		}
	})
}
