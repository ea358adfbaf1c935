package ceremony_test

import (
	"strings"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// partialApplied is what every refusal after the mutation must tell the operator.
const partialApplied = "the cluster may be partially applied"

// TestCeremonyApplyRefusedAfterMutation: live state is changed for real between the server-side
// apply and the convergence read (SetAfterStep on the apply step). The apply is refused with the
// partial-apply hint, publishes no receipt and leaves its intent; rerunning the same apply command
// (after the operator resolved what the refusal names, where needed) recovers from the intent.
func TestCeremonyApplyRefusedAfterMutation(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name   string
		tamper func(t *testing.T, b *bed) // runs right after the server-side apply returned
		code   refuse.Code
		// rerunCode is the first rerun's refusal ("" when the first rerun recovers), and resolve
		// what the operator does about it before the next rerun.
		rerunCode refuse.Code
		resolve   func(t *testing.T, b *bed)
	}{
		// An object deleted before the convergence read: kubectl get -f exits non-zero, and its
		// stderr names the not-found cause.
		{"object deleted", func(t *testing.T, b *bed) {
			kubectl(t, nil, "delete", "configmap", "qinglong-config", "-n", b.Namespace, "--wait=true")
		}, kubeout.CodeNotFound, "", nil},
		// A release annotation overwritten by another manager: the convergence verifier refuses,
		// and the rerun refuses too (the dry-run conflicts, ql3 never forces) until the other
		// manager gives the field up.
		{"annotation taken by another manager", func(t *testing.T, b *bed) {
			kubectl(t, nil, "annotate", "--overwrite", "--field-manager=intruder", "-n", b.Namespace,
				"deployment/qinglong-api", "qinglong.io/release-version=3.4.0")
		}, convergence.CodeAnnotationMismatch, ceremony.CodeDryRunConflict, func(t *testing.T, b *bed) {
			kubectl(t, nil, "annotate", "--field-manager=intruder", "-n", b.Namespace,
				"deployment/qinglong-api", "qinglong.io/release-version-")
		}},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, true, nil)
			pre, err := b.preflight()
			if err != nil {
				t.Fatal(err)
			}
			af := b.applyFile(string(pre.Preflight))
			fired := false
			restore := ceremony.SetAfterStep(func(step string) {
				if step == evidence.StepApply && !fired {
					fired = true
					v.tamper(t, b)
				}
			})
			_, err = b.apply(af)
			restore()
			if !fired {
				t.Fatalf("the apply step never ran: %v", err)
			}
			b.wantRefused(err, v.code, 1)
			wantPartialHint(t, err)
			st, err := store.Open(b.Store)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rep, err := st.Verify()
			if err != nil || !rep.OK() || len(rep.Unfinished) != 1 {
				t.Fatalf("verify after the refusal: %v %+v", err, rep)
			}
			intent := rep.Unfinished[0].Descriptor

			if v.rerunCode != "" {
				_, err := b.apply(af)
				b.wantRefused(err, v.rerunCode, 1)
				if !strings.Contains(err.Error(), `"intruder"`) {
					t.Fatalf("the rerun's refusal does not name the manager: %v", err)
				}
				v.resolve(t, b)
			}
			rc, err := b.apply(af)
			if err != nil {
				t.Fatal(err)
			}
			if !rc.Recovered || rc.Intent != intent.Digest || rc.Receipt == "" {
				t.Fatalf("the rerun did not recover from intent %s: %+v", intent.Digest, rc)
			}
			if r := readReceipt(t, st, evidence.Descriptor{MediaType: evidence.MediaTypeReceipt, Digest: rc.Receipt}); !r.Recovered || len(r.Objects) != 6 {
				t.Fatalf("receipt: recovered %v, %d objects", r.Recovered, len(r.Objects))
			}
			for obj, ms := range liveManagers(t, b.Namespace) {
				if len(ms) != 1 || ms[0] != evidence.FieldManager+"/Apply" {
					t.Fatalf("%s managed by %v after the recovery", obj, ms)
				}
			}
		})
	}
}

// wantPartialHint asserts that a refusal after the mutation says the cluster may be partially
// applied.
func wantPartialHint(t *testing.T, err error) {
	t.Helper()
	r, ok := refuse.As(err)
	if !ok || !strings.Contains(r.Message()+" "+r.Hint, partialApplied) {
		t.Fatalf("refusal after the mutation does not say %q: %v (hint %q)", partialApplied, err, r.Hint)
	}
}
