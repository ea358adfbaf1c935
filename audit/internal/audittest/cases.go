package audittest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/verdict/argv"
	"github.com/qinglong/ql3/verdict/convergence"
	"github.com/qinglong/ql3/verdict/kubeout"
)

// Exec positions in a receipt.
const (
	xIdentity = iota
	xDryRun
	xApply
	xConvergence
	xNamespaces // the fixture's objects live in namespace qinglong, which its manifest does not hold
	xIdentityFinal
)

var otherDigest = digest.FromString("another")

// Cases are the rewrite cases of the straight receipt, its preflight report and the recovered
// receipt, with the exact first finding of each.
func Cases() []Rewrite {
	cs := []Rewrite{
		// Controls: the forger alone yields a passing audit once published, so every case below
		// fails for its own change, not for the forging.
		{"control: receipt finishedAt a second later", "", receiptEdit(func(r *evidence.Receipt) { r.FinishedAt = shift(r.FinishedAt, time.Second) })},
		{"control: identity exec started later within its run, shared with the intent", "", execEdit(xIdentity, func(e *evidence.Exec) { e.StartedAt = e.FinishedAt; e.DurationMs++ })},
		{"control: intent createdAt a microsecond later", "", func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.CreatedAt = shift(in.CreatedAt, time.Microsecond) })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"control: preflight startedAt a second earlier, apply command re-pointed", "", func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Preflight, func(p *evidence.Preflight) { p.StartedAt = shift(p.StartedAt, -time.Second) })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"control: recovered receipt, earlier attempt's exec finished earlier", "", func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Intent](f, Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Intent).Execs[0], func(e *evidence.Exec) { e.FinishedAt = e.StartedAt })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},
		{"control: preflight report finishedAt a second later", "", preflightEdit(func(p *evidence.Preflight) { p.FinishedAt = shift(p.FinishedAt, time.Second) })},

		// Finding 6 of issue 22: a record's own times are bound to its exec records' times.
		{"record time: receipt finishedAt in 2099", audit.CodeRecordTime, receiptEdit(func(r *evidence.Receipt) { r.FinishedAt = "2099-01-01T00:00:00Z" })},
		{"record time: receipt finishedAt before its last exec finished", audit.CodeRecordTime, receiptEdit(func(r *evidence.Receipt) { r.FinishedAt = "2001-02-03T04:05:06.000000007Z" })},
		{"record time: receipt finishedAt eleven minutes after its last exec", audit.CodeRecordTime, receiptEdit(func(r *evidence.Receipt) { r.FinishedAt = shift(r.FinishedAt, 11*time.Minute) })},
		{"record time: receipt startedAt after its first exec started", audit.CodeRecordTime, receiptEdit(func(r *evidence.Receipt) { r.StartedAt = shift(r.FinishedAt, 0) })},
		{"record time: receipt startedAt with a +00:00 offset", audit.CodeRecordTime, receiptEdit(func(r *evidence.Receipt) { r.StartedAt = strings.TrimSuffix(r.StartedAt, "Z") + "+00:00" })},
		{"record time: intent createdAt in 2001", audit.CodeRecordTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.CreatedAt = "2001-02-03T04:05:06Z" })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"record time: preflight startedAt in 2001, apply command re-pointed", audit.CodeRecordTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Preflight, func(p *evidence.Preflight) { p.StartedAt = "2001-02-03T04:05:06Z" })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"record time: preflight report finishedAt in 2001", audit.CodeRecordTime, preflightEdit(func(p *evidence.Preflight) { p.FinishedAt = "2001-02-03T04:05:06Z" })},

		// The receipt's own claims and bindings.
		{"receipt: another clusterUid", audit.CodeClusterUID, receiptEdit(func(r *evidence.Receipt) { r.ClusterUID = otherUID(r.ClusterUID) })},
		{"receipt: crossResourceAtomicity true", audit.CodeClaim, receiptEdit(func(r *evidence.Receipt) { r.CrossResourceAtomicity = true })},
		{"receipt: kubernetesMutation false", audit.CodeClaim, receiptEdit(func(r *evidence.Receipt) { r.KubernetesMutation = false })},
		{"receipt: networkAccess false", audit.CodeClaim, receiptEdit(func(r *evidence.Receipt) { r.NetworkAccess = false })},
		{"receipt: another fieldManager", audit.CodeClaim, receiptEdit(func(r *evidence.Receipt) { r.FieldManager = "kubectl" })},
		{"receipt: another target", audit.CodeTarget, receiptEdit(func(r *evidence.Receipt) { r.Target = otherDigest })},
		{"receipt: the preflight command as its command", audit.CodeCommand, func(f *Forger, fx *Fixture) evidence.Descriptor {
			pc := Rec[evidence.Preflight](f, fx.Roots.Preflight).Command
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Command = pc })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"receipt: another kubectlDigest", audit.CodeKubectl, receiptEdit(func(r *evidence.Receipt) { r.KubectlDigest = otherDigest })},
		{"receipt: another kubeconfigDigest", audit.CodeKubeconfig, receiptEdit(func(r *evidence.Receipt) { r.KubeconfigDigest = otherDigest })},
		{"receipt: lock catalogCommit", audit.CodeLock, receiptEdit(func(r *evidence.Receipt) { r.Lock.CatalogCommit = strings.Repeat("0", 40) })},
		{"receipt: lock releaseVersion", audit.CodeLock, receiptEdit(func(r *evidence.Receipt) { r.Lock.ReleaseVersion = "3.4.2" })},
		{"receipt: one object uid", audit.CodeObjects, receiptEdit(func(r *evidence.Receipt) { r.Objects[1].UID = otherUID(r.Objects[1].UID) })},
		{"receipt: one object resourceVersion", audit.CodeObjects, receiptEdit(func(r *evidence.Receipt) { r.Objects[0].ResourceVersion += "0" })},
		{"receipt: one object dropped", audit.CodeObjects, receiptEdit(func(r *evidence.Receipt) { r.Objects = r.Objects[1:] })},
		{"receipt: two objects swapped", audit.CodeObjects, receiptEdit(func(r *evidence.Receipt) { r.Objects[0], r.Objects[1] = r.Objects[1], r.Objects[0] })},
		{"receipt: convergence and identity-final swapped", audit.CodeExecSequence, receiptEdit(func(r *evidence.Receipt) {
			r.Execs[xConvergence], r.Execs[xIdentityFinal] = r.Execs[xIdentityFinal], r.Execs[xConvergence]
		})},
		{"receipt: identity and dry-run swapped", audit.CodeExecSequence, receiptEdit(func(r *evidence.Receipt) {
			r.Execs[xIdentity], r.Execs[xDryRun] = r.Execs[xDryRun], r.Execs[xIdentity]
		})},
		{"receipt: apply dropped", audit.CodeExecSequence, receiptEdit(func(r *evidence.Receipt) { r.Execs = slices.Delete(r.Execs, xApply, xApply+1) })},
		{"receipt: dry-run in place of the apply", audit.CodeExecSequence, receiptEdit(func(r *evidence.Receipt) { r.Execs[xApply] = r.Execs[xDryRun] })},
		{"receipt: recovered claimed by a straight run", audit.CodeIntent, receiptEdit(func(r *evidence.Receipt) { r.Recovered = true })},
		{"receipt: recovered denied by a recovered run", audit.CodeIntent, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.RecoveredReceipt, func(r *evidence.Receipt) { r.Recovered = false })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},
		{"receipt: manifest of the other release", audit.CodeInput, func(f *Forger, fx *Fixture) evidence.Descriptor {
			m := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Manifest
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Manifest = m })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"receipt: kubeconfig summary of another context", audit.CodeKubeconfig, func(f *Forger, fx *Fixture) evidence.Descriptor {
			if fx.OtherTarget.Digest != "" { // a real summary of the token context
				k := Rec[evidence.Preflight](f, fx.OtherTarget).Kubeconfig
				Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Kubeconfig = k })
			} else {
				Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Kubeconfig, func(k *evidence.KubeconfigSummary) { k.Context = "ql3-token" })
			}
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"kubeconfig summary: another digest", audit.CodeKubeconfig, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Kubeconfig, func(k *evidence.KubeconfigSummary) { k.Digest = otherDigest })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"kubeconfig summary: unknown auth kind", audit.CodeKubeconfig, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Kubeconfig, func(k *evidence.KubeconfigSummary) { k.AuthKind = "exec" })
			return f.Rewrite(fx.Roots.Receipt)
		}},

		// Exec records, re-pointed from the receipt (and the intent, which shares the first two).
		{"exec: apply with --force-conflicts", argv.CodeArgvShape, execEdit(xApply, func(e *evidence.Exec) { e.Argv = append(e.Argv, "--force-conflicts") })},
		{"exec: apply with --force-conflicts in place of --validate=strict", argv.CodeArgvShape, execEdit(xApply, func(e *evidence.Exec) {
			e.Argv[slices.Index(e.Argv, "--validate=strict")] = "--force-conflicts"
		})},
		{"exec: dry-run without --dry-run=server", argv.CodeArgvShape, execEdit(xDryRun, func(e *evidence.Exec) {
			e.Argv = slices.DeleteFunc(e.Argv, func(a string) bool { return a == "--dry-run=server" })
		})},
		{"exec: apply with another field manager", argv.CodeArgvShape, execEdit(xApply, func(e *evidence.Exec) {
			e.Argv[slices.Index(e.Argv, "--field-manager="+evidence.FieldManager)] = "--field-manager=kubectl"
		})},
		{"exec: identity through another context", argv.CodeArgvShape, execEdit(xIdentity, func(e *evidence.Exec) { e.Argv[2] = "--context=ql3-token" })},
		{"exec: argv[0] a path", argv.CodeArgvShape, execEdit(xApply, func(e *evidence.Exec) { e.Argv[0] = "/usr/local/bin/kubectl" })},
		{"exec: KUBERC removed from env", argv.CodeEnvShape, execEdit(xApply, func(e *evidence.Exec) {
			e.Env = slices.DeleteFunc(e.Env, func(v string) bool { return v == "KUBERC=off" })
		})},
		{"exec: KUBERC=on", argv.CodeEnvShape, execEdit(xConvergence, func(e *evidence.Exec) { e.Env[slices.Index(e.Env, "KUBERC=off")] = "KUBERC=on" })},
		{"exec: KUBECONFIG added to env", argv.CodeEnvShape, execEdit(xIdentityFinal, func(e *evidence.Exec) { e.Env = append(e.Env, "KUBECONFIG=/root/.kube/config") })},
		{"exec: stdoutBytes changed", audit.CodeExecBytes, execEdit(xConvergence, func(e *evidence.Exec) { e.StdoutBytes++ })},
		{"exec: stderrBytes changed", audit.CodeExecBytes, execEdit(xApply, func(e *evidence.Exec) { e.StderrBytes++ })},
		{"exec: apply exitCode 1", audit.CodeExecExit, execEdit(xApply, func(e *evidence.Exec) { e.ExitCode = 1 })},
		{"exec: identity exitCode -1", audit.CodeExecExit, execEdit(xIdentity, func(e *evidence.Exec) { e.ExitCode = -1 })},
		{"exec: another kubectl digest", audit.CodeKubectl, execEdit(xConvergence, func(e *evidence.Exec) { e.KubectlDigest = otherDigest })},
		{"exec: dry-run without stdin", audit.CodeExecStdin, execEdit(xDryRun, func(e *evidence.Exec) { e.Stdin = nil })},
		{"exec: identity with the manifest on stdin", audit.CodeExecStdin, func(f *Forger, fx *Fixture) evidence.Descriptor {
			m := Rec[evidence.Receipt](f, fx.Roots.Receipt).Manifest
			return execEdit(xIdentity, func(e *evidence.Exec) { e.Stdin = &m })(f, fx)
		}},
		{"exec: apply of the other release's manifest", audit.CodeExecStdin, func(f *Forger, fx *Fixture) evidence.Descriptor {
			m := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Manifest
			return execEdit(xApply, func(e *evidence.Exec) { e.Stdin = &m })(f, fx)
		}},
		{"exec: stdout under the stderr media type", audit.CodeMediaType, execEdit(xIdentity, func(e *evidence.Exec) { e.Stdout.MediaType = evidence.MediaTypeStderr })},
		{"exec: apply renamed dry-run", audit.CodeExecSequence, execEdit(xApply, func(e *evidence.Exec) { e.Step = evidence.StepDryRun })},

		// Stored outputs, exec byte counts and the chain re-pointed.
		{"output: identity read of another cluster", audit.CodeClusterUID, stdoutEdit(false, xIdentity, func(f *Forger, fx *Fixture, out []byte) []byte {
			u := Rec[evidence.Receipt](f, fx.Roots.Receipt).ClusterUID
			return bytes.ReplaceAll(out, []byte(u), []byte(otherUID(u)))
		})},
		{"output: final identity read of another cluster", audit.CodeClusterUID, stdoutEdit(false, xIdentityFinal, func(f *Forger, fx *Fixture, out []byte) []byte {
			u := Rec[evidence.Receipt](f, fx.Roots.Receipt).ClusterUID
			return bytes.ReplaceAll(out, []byte(u), []byte(otherUID(u)))
		})},
		{"output: namespace read shows the namespace Terminating", convergence.CodeNamespaceTerminating, stdoutEdit(false, xNamespaces, func(_ *Forger, _ *Fixture, out []byte) []byte {
			return bytes.ReplaceAll(out, []byte(`"phase": "Active"`), []byte(`"phase": "Terminating"`))
		})},
		{"output: namespace read of another namespace", convergence.CodeNamespaceRead, stdoutEdit(false, xNamespaces, func(_ *Forger, _ *Fixture, out []byte) []byte {
			return bytes.ReplaceAll(out, []byte(`"name": "qinglong"`), []byte(`"name": "default"`))
		})},
		{"receipt: namespace read dropped", audit.CodeExecSequence, receiptEdit(func(r *evidence.Receipt) { r.Execs = slices.Delete(r.Execs, xNamespaces, xNamespaces+1) })},
		{"exec: namespace read names another namespace", audit.CodeExecSequence, execEdit(xNamespaces, func(e *evidence.Exec) { e.Argv[6] = "default" })},
		{"exec: namespace read names a second namespace", audit.CodeExecSequence, execEdit(xNamespaces, func(e *evidence.Exec) { e.Argv = slices.Insert(e.Argv, 7, "zz-other") })},
		{"exec: namespace read names a flag", argv.CodeArgvShape, execEdit(xNamespaces, func(e *evidence.Exec) { e.Argv[6] = "--all-namespaces" })},
		{"output: identity read empty", kubeout.CodeIdentityOutput, stdoutEdit(false, xIdentity, func(*Forger, *Fixture, []byte) []byte { return []byte{} })},
		{"output: apply output without its last line", kubeout.CodeApplyOutput, stdoutEdit(false, xApply, func(_ *Forger, _ *Fixture, out []byte) []byte {
			lines := bytes.SplitAfter(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
			return bytes.Join(lines[:len(lines)-1], nil)
		})},
		{"output: the apply's output as the dry-run's", kubeout.CodeApplyOutput, stdoutEdit(false, xDryRun, func(f *Forger, fx *Fixture, _ []byte) []byte {
			e := Rec[evidence.Exec](f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xApply])
			return f.Read(e.Stdout.Digest)
		})},
		{"output: convergence read of the other release", convergence.CodeObjectMismatch, stdoutEdit(false, xConvergence, func(f *Forger, fx *Fixture, _ []byte) []byte {
			e := Rec[evidence.Exec](f, Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Execs[xConvergence])
			return f.Read(e.Stdout.Digest)
		})},
		{"output: convergence read with another image", convergence.CodeImageMismatch, stdoutEdit(false, xConvergence, func(_ *Forger, _ *Fixture, out []byte) []byte {
			i := bytes.Index(out, []byte(`"image": "ghcr.io/qinglong/`))
			j := i + bytes.Index(out[i:], []byte("@sha256:")) + len("@sha256:")
			c := bytes.Clone(out)
			if c[j] == '0' {
				c[j] = '1'
			} else {
				c[j] = '0'
			}
			return c
		})},

		// Input records.
		{"input: manifest pointing at the other release's manifest", audit.CodeInput, inputEdit(evidence.RoleManifest, func(f *Forger, fx *Fixture, in *evidence.Input) {
			m := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Manifest
			in.Content = &m
		})},
		{"input: manifest of the other release, digest and content", audit.CodeInput, inputEdit(evidence.RoleManifest, func(f *Forger, fx *Fixture, in *evidence.Input) {
			m := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Manifest
			in.Content, in.Digest, in.Size = &m, m.Digest, m.Size
		})},
		{"input: command file of the other ceremony", audit.CodeInput, func(f *Forger, fx *Fixture) evidence.Descriptor {
			other := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Inputs.CommandFile
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Inputs.CommandFile = other })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"input: manifest mode 0644", audit.CodeInput, inputEdit(evidence.RoleManifest, func(_ *Forger, _ *Fixture, in *evidence.Input) { in.Mode = "0644" })},
		{"input: kubeconfig owned by another uid", audit.CodeInput, inputEdit(evidence.RoleKubeconfig, func(_ *Forger, _ *Fixture, in *evidence.Input) { in.UID += 1000 })},
		{"input: kubectl writable by others", audit.CodeInput, inputEdit(evidence.RoleKubectl, func(_ *Forger, _ *Fixture, in *evidence.Input) { in.Mode = "0757" })},
		{"input: lock report at another path", audit.CodeInput, inputEdit(evidence.RoleLockReport, func(_ *Forger, _ *Fixture, in *evidence.Input) { in.Path += ".old" })},
		{"input: kubectl of another digest", audit.CodeInput, inputEdit(evidence.RoleKubectl, func(_ *Forger, _ *Fixture, in *evidence.Input) { in.Digest = otherDigest })},
		{"input: a member the schema lacks", evidence.CodeRecordUnknownField, func(f *Forger, fx *Fixture) evidence.Descriptor {
			EditJSON(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Inputs.Kubeconfig, func(m map[string]any) { m["bytes"] = "redacted" })
			return f.Rewrite(fx.Roots.Receipt)
		}},

		// Preflight and intent links.
		{"splice: a preflight of another target", audit.CodePreflight, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := otherTarget(fx)
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Preflight = p })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"splice: a preflight of another target, consumed by a forged apply command", audit.CodeTarget, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := otherTarget(fx)
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Command, func(c *evidence.Command) { c.Preflight = &p.Digest })
			r1 := f.Rewrite(fx.Roots.Receipt)
			Edit(f, r1, func(r *evidence.Receipt) { r.Preflight = p })
			return f.Rewrite(r1)
		}},
		{"splice: the preflight of another command", audit.CodePreflight, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Preflight = fx.Roots.RecoveredPreflight })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"splice: the intent of another command", audit.CodeIntent, func(f *Forger, fx *Fixture) evidence.Descriptor {
			in := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Intent
			Edit(f, fx.Roots.Receipt, func(r *evidence.Receipt) { r.Intent = in })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"preflight claiming a mutation, apply command re-pointed", audit.CodeClaim, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, fx.Roots.Preflight, func(p *evidence.Preflight) { p.KubernetesMutation = true })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"preflight with --force-conflicts on its dry-run, apply command re-pointed", argv.CodeArgvShape, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, preflightDryRun(f, fx), func(e *evidence.Exec) { e.Argv = append(e.Argv, "--force-conflicts") })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: another clusterUid", audit.CodeClusterUID, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.ClusterUID = otherUID(in.ClusterUID) })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: another target", audit.CodeIntent, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.Target = otherDigest })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: the other ceremony's preflight", audit.CodeIntent, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.Preflight = fx.Roots.RecoveredPreflight })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: without the dry-run", audit.CodeIntent, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.Execs = in.Execs[:1] })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: recovered receipt's earlier apply with --force-conflicts", argv.CodeArgvShape, func(f *Forger, fx *Fixture) evidence.Descriptor {
			in := Rec[evidence.Intent](f, Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Intent)
			Edit(f, in.Execs[1], func(e *evidence.Exec) { e.Argv = append(e.Argv, "--force-conflicts") })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},

		// The preflight report as the subject.
		{"preflight: kubernetesMutation true", audit.CodeClaim, preflightEdit(func(p *evidence.Preflight) { p.KubernetesMutation = true })},
		{"preflight: another clusterUid", audit.CodeClusterUID, preflightEdit(func(p *evidence.Preflight) { p.ClusterUID = otherUID(p.ClusterUID) })},
		{"preflight: the apply command as its command", audit.CodeCommand, func(f *Forger, fx *Fixture) evidence.Descriptor {
			c := Rec[evidence.Receipt](f, fx.Roots.Receipt).Command
			Edit(f, fx.Roots.Preflight, func(p *evidence.Preflight) { p.Command = c })
			return f.Rewrite(fx.Roots.Preflight)
		}},
		{"preflight: an apply among its execs", audit.CodeExecSequence, func(f *Forger, fx *Fixture) evidence.Descriptor {
			a := Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xApply]
			Edit(f, fx.Roots.Preflight, func(p *evidence.Preflight) { p.Execs = append(p.Execs, a) })
			return f.Rewrite(fx.Roots.Preflight)
		}},
		{"preflight: identity read of another cluster", audit.CodeClusterUID, stdoutEdit(true, xIdentity, func(f *Forger, fx *Fixture, out []byte) []byte {
			u := Rec[evidence.Preflight](f, fx.Roots.Preflight).ClusterUID
			return bytes.ReplaceAll(out, []byte(u), []byte(otherUID(u)))
		})},

		// Records that are not canonical, under their own digest.
		{"record: receipt re-indented", evidence.CodeRecordNotCanonical, func(f *Forger, fx *Fixture) evidence.Descriptor {
			f.Replace(fx.Roots.Receipt.Digest, indent(f.Read(fx.Roots.Receipt.Digest)))
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"record: exec re-indented, re-pointed", evidence.CodeRecordNotCanonical, func(f *Forger, fx *Fixture) evidence.Descriptor {
			d := Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xApply]
			f.Replace(d.Digest, indent(f.Read(d.Digest)))
			return f.Rewrite(fx.Roots.Receipt)
		}},
	}
	return append(append(cs, chainCases()...), planCases()...)
}

// indent re-indents a record: the same JSON value, not in canonical form.
func indent(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// shift moves an RFC 3339 time by d, in the form the ceremony writes.
func shift(s string, d time.Duration) string {
	return parseTime(s).Add(d).UTC().Format(time.RFC3339Nano)
}
