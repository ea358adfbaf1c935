package ceremony_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
)

// change is a change made to one input between two ceremony steps. undo (may be nil) restores
// what later cases reuse.
type change struct {
	name string
	do   func(t *testing.T, b *bed, commandFile, exe string) (undo func())
	code refuse.Code
}

var changes = []change{
	// The manifest rewritten in place: same inode, one more line.
	{"manifest rewritten", func(t *testing.T, b *bed, _, _ string) func() {
		f, err := os.OpenFile(b.Field("manifest", "path"), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString("# changed\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Error(err)
		}
		return nil
	}, stablefile.CodeChanged},
	// The kubeconfig replaced by a rename of identical bytes: same digest, another inode.
	{"kubeconfig replaced", func(t *testing.T, b *bed, _, _ string) func() {
		p := b.Field("kubeconfig", "path")
		tmp := p + ".new"
		if err := os.WriteFile(tmp, cluster.KubeconfigBytes(), 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Error(err)
		}
		return nil
	}, stablefile.CodeChanged},
	// The command file touched: same bytes, same inode, another mtime.
	{"command file touched", func(t *testing.T, _ *bed, commandFile, _ string) func() {
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(commandFile, later, later); err != nil {
			t.Error(err)
		}
		return nil
	}, stablefile.CodeChanged},
	// kubectl replaced: another executable renamed over its path (the original kept aside).
	{"kubectl replaced", func(t *testing.T, _ *bed, _, exe string) func() {
		held, other := exe+".held", exe+".other"
		if err := os.WriteFile(other, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Error(err)
		}
		if err := os.Rename(exe, held); err != nil {
			t.Error(err)
		}
		if err := os.Rename(other, exe); err != nil {
			t.Error(err)
		}
		return func() {
			if err := os.Rename(held, exe); err != nil {
				t.Fatal(err)
			}
		}
	}, stablefile.CodeExecChanged},
}

// TestCeremonyRefusesInputChangedBetweenSteps: every input changed right after a kubectl step
// (SetAfterStep) is refused before the next network step or publication. In an apply the refusal
// comes before the intent: nothing was mutated.
func TestCeremonyRefusesInputChangedBetweenSteps(t *testing.T) {
	testcluster.Need(t)
	exe := privateKubectl(t)
	for _, run := range []string{evidence.CommandPreflight, evidence.CommandApply} {
		// identity: the next kubectl run (the dry-run) re-verifies first; dry-run: the preflight's
		// re-verification, or the apply's check before the intent.
		for _, step := range []string{evidence.StepIdentity, evidence.StepDryRun} {
			for _, c := range changes {
				t.Run(run[len("cluster.deployment."):]+"/after "+step+"/"+c.name, func(t *testing.T) {
					b := newBed(t, true, nil)
					b.Set("kubectl", "path", exe)
					file, published := b.WriteCommand("preflight.json", evidence.CommandPreflight, ""), 0
					if run == evidence.CommandApply {
						pre, err := b.preflightFile(file)
						if err != nil {
							t.Fatal(err)
						}
						file, published = b.applyFile(string(pre.Preflight)), 1
					}
					fired := false
					var undo func()
					defer ceremony.SetAfterStep(func(s string) {
						if s == step && !fired {
							fired = true
							undo = c.do(t, b, file, exe)
						}
					})()
					defer func() {
						if undo != nil {
							undo()
						}
					}()
					var err error
					if run == evidence.CommandApply {
						_, err = b.apply(file)
					} else {
						_, err = b.preflightFile(file)
					}
					if !fired {
						t.Fatalf("step %s never ran: %v", step, err)
					}
					b.wantRefused(err, c.code, published)
					b.wantNoIntent()
				})
			}
		}
	}
}

// TestCeremonyRefusesOnCluster: refusals only the real API server can give.
func TestCeremonyRefusesOnCluster(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name      string
		namespace bool                         // create the bed's namespace
		edit      func(unlocked string) string // edits the unlocked manifest before materializing
		uid       string                       // expectedClusterUid; "" keeps the live one
		code      refuse.Code
		names     string // what the message must name (%NS% is the bed's namespace)
	}{
		// The kubeconfig reaches a cluster other than the one a human reviewed.
		{"cluster uid mismatch", true, nil, "0b4e9c5a-3f1d-4c2b-9a7e-5d6f8e9a0b1c", ceremony.CodeClusterUID, "0b4e9c5a-3f1d-4c2b-9a7e-5d6f8e9a0b1c"},
		// An unknown field the materializer and the lock carry, but strict validation refuses.
		{"unknown field", true, func(u string) string {
			return strings.Replace(u, "spec:\n  type: ClusterIP\n", "spec:\n  type: ClusterIP\n  bogusField: extra\n", 1)
		}, "", ceremony.CodeDryRunValidation, "Service " + "%NS%/qinglong-web field .spec.bogusField"},
		// An unknown field deep in a pod template's container.
		{"unknown container field", true, func(u string) string {
			return strings.Replace(u, "          args: [\"api\"]\n", "          args: [\"api\"]\n          bogusField: extra\n", 1)
		}, "", ceremony.CodeDryRunValidation, `Deployment %NS%/qinglong-api field ".spec.template.spec.containers[name=\"api\"].bogusField"`},
		// A value of the wrong type for the schema.
		{"wrong type", true, func(u string) string {
			return strings.Replace(u, "  type: ClusterIP\n", "  type: ClusterIP\n  sessionAffinityConfig: yes-please\n", 1)
		}, "", ceremony.CodeDryRunValidation, "Service %NS%/qinglong-web field .spec.sessionAffinityConfig"},
		// A value the API server's validation refuses.
		{"invalid value", true, func(u string) string {
			return strings.Replace(u, "      port: 80\n", "      port: 70000\n", 1)
		}, "", ceremony.CodeDryRunValidation, "strict server-side validation"},
		// The target namespace does not exist: ql3 never creates it.
		{"missing namespace", false, nil, "", ceremony.CodeDryRunNamespace, `namespace "%NS%" does not exist`},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, v.namespace, v.edit)
			if v.uid != "" {
				b.Cmd["expectedClusterUid"] = v.uid
			}
			_, err := b.preflight()
			b.wantRefused(err, v.code, 0)
			if want := strings.ReplaceAll(v.names, "%NS%", b.Namespace); !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not name %q", err.Error(), want)
			}
		})
	}
}

// blobFile reads the bed's input of command field name.
func (b *bed) blobFile(name string) []byte {
	raw, err := os.ReadFile(b.Field(name, "path"))
	if err != nil {
		b.t.Fatal(err)
	}
	return raw
}

// TestCeremonyRefusesConflict: a field the manifest sets, taken first with another value through
// the real API by another field manager, makes the dry-run conflict; the refusal names the
// resource, the field and the manager.
func TestCeremonyRefusesConflict(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name                     string
		take                     func(t *testing.T, b *bed) // takes the field through the API
		resource, field, manager string
	}{
		// A server-side apply of one ConfigMap key with another value by manager "other".
		{"server-side apply by another manager", func(t *testing.T, b *bed) {
			kubectl(t, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: qinglong-config\n  namespace: "+b.Namespace+"\ndata:\n  QL_LOG_LEVEL: debug\n"),
				"apply", "--server-side", "--field-manager=other", "-f=-")
		}, "configmap/qinglong-config", ".data.QL_LOG_LEVEL", "other"},
		// The ConfigMap created first with kubectl create.
		{"kubectl create first", func(t *testing.T, b *bed) {
			kubectl(t, nil, "create", "configmap", "qinglong-config", "-n", b.Namespace, "--from-literal=QL_LOG_LEVEL=debug")
		}, "configmap/qinglong-config", ".data.QL_LOG_LEVEL", "kubectl-create"},
		// An earlier bare (client-side) kubectl apply of the manifest with one annotation changed.
		{"bare client-side apply", func(t *testing.T, b *bed) {
			docs := strings.Split(string(b.blobFile("manifest")), "\n---\n")
			edited := 0
			for i, d := range docs {
				if strings.Contains(d, "kind: Deployment\n") && strings.Contains(d, "\n  name: qinglong-web\n") {
					docs[i] = replaceOnce(t, d, "qinglong.io/release-version: 3.4.1\n", "qinglong.io/release-version: 3.4.0\n")
					edited++
				}
			}
			if edited != 1 {
				t.Fatalf("%d qinglong-web deployments edited", edited)
			}
			m := strings.Join(docs, "\n---\n")
			kubectl(t, []byte(m), "apply", "-f=-")
		}, "deployment.apps/qinglong-web", ".metadata.annotations.qinglong.io/release-version", "kubectl-client-side-apply"},
	}
	for _, v := range vectors {
		// The field taken before the preflight (the preflight refuses), or between the preflight
		// and the apply (the apply's own dry-run refuses, before its intent).
		for _, between := range []bool{false, true} {
			name := v.name + "/before the preflight"
			if between {
				name = v.name + "/between preflight and apply"
			}
			t.Run(name, func(t *testing.T) {
				b := newBed(t, true, nil)
				var err error
				if between {
					pre, perr := b.preflight()
					if perr != nil {
						t.Fatal(perr)
					}
					v.take(t, b)
					_, err = b.apply(b.applyFile(string(pre.Preflight)))
					b.wantRefused(err, ceremony.CodeDryRunConflict, 1)
					b.wantNoIntent()
				} else {
					v.take(t, b)
					_, err = b.preflight()
					b.wantRefused(err, ceremony.CodeDryRunConflict, 0)
				}
				msg := err.Error()
				for _, want := range []string{v.resource, " field " + v.field + " ", `"` + v.manager + `"`} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not name %q", msg, want)
					}
				}
			})
		}
	}
}

// TestCeremonyApplyRefusesPreflight: an apply command whose preflight does not license it.
func TestCeremonyApplyRefusesPreflight(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		name string
		// file returns the command file to apply, given the published preflight digest.
		file func(t *testing.T, b *bed, pre string) string
		code refuse.Code
	}{
		// The same manifest bytes under another path: another target than the preflight's.
		{"preflight of another target", func(t *testing.T, b *bed, pre string) string {
			p := filepath.Join(b.Dir, "locked-copy.yaml")
			ceremonytest.WritePrivate(t, p, b.blobFile("manifest"))
			b.Set("manifest", "path", p)
			return b.applyFile(pre)
		}, ceremony.CodePreflightTarget},
		// A digest nothing in the store has.
		{"preflight digest absent", func(_ *testing.T, b *bed, _ string) string {
			return b.applyFile(string(evidence.FromBytes([]byte("no such preflight"))))
		}, ceremony.CodePreflightNotFound},
		// A stored object that is not a preflight report (the manifest blob).
		{"digest of a stored non-preflight", func(_ *testing.T, b *bed, _ string) string {
			return b.applyFile(b.Field("manifest", "digest"))
		}, ceremony.CodePreflightNotFound},
		// The preflight command file given to the apply subcommand.
		{"preflight command to apply", func(_ *testing.T, b *bed, _ string) string {
			return b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
		}, command.CodeCommandMismatch},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			b := newBed(t, true, nil)
			pre, err := b.preflight()
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			defer ceremony.SetRunHook(func(string) { runs++ })()
			_, err = ceremony.Apply(context.Background(), ceremony.Options{CommandFile: v.file(t, b, string(pre.Preflight)), Progress: &b.out})
			b.note(err)
			b.wantRefused(err, v.code, 1)
			b.wantNoIntent()
			if runs != 0 {
				t.Fatalf("%d kubectl runs before the refusal", runs)
			}
		})
	}
}
