package audittest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// chainCases hold the chain's exec records to one kubectl process each (docs/issues.md#issue-13): every case
// passed the audit before the exec reuse, run directory, exec time and argv form checks existed.
func chainCases() []Rewrite {
	return []Rewrite{
		// Controls: what the chain checks must not refuse.
		{"control: identity-final exec in a fresh run directory, the largest name", "", execEdit(xIdentityFinal, func(e *evidence.Exec) {
			inDir(e, "/tmp/ql3-kubectl-18446744073709551615")
		})},
		{"control: apply exec through /proc/self/fd/3, the lowest descriptor", "", execEdit(xApply, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/3" })},
		{"control: convergence exec through the largest descriptor", "", execEdit(xConvergence, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/2147483647" })},
		{"control: apply exec started the instant the dry-run finished", "", func(f *Forger, fx *Fixture) evidence.Descriptor {
			dry := Rec[evidence.Exec](f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xDryRun])
			// The intent is written between the two, so at that instant too (record times).
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.CreatedAt = dry.FinishedAt })
			return execEdit(xApply, func(e *evidence.Exec) { e.StartedAt = dry.FinishedAt })(f, fx)
		}},

		// One exec record, one run.
		{"chain: the apply's identity read and dry-run are the preflight's exec records", audit.CodeExecReused, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := Rec[evidence.Preflight](f, fx.Roots.Preflight).Execs
			p = []evidence.Descriptor{p[xIdentity], p[len(p)-1]} // identity read and dry-run
			Edit(f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Intent, func(in *evidence.Intent) { in.Execs = slices.Clone(p) })
			r1 := f.Rewrite(fx.Roots.Receipt)
			Edit(f, r1, func(r *evidence.Receipt) { r.Execs[xIdentity], r.Execs[xDryRun] = p[0], p[1] })
			return f.Rewrite(r1)
		}},
		{"chain: a recovered receipt whose earlier attempt is its preflight's runs", audit.CodeExecReused, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt)
			p := Rec[evidence.Preflight](f, rc.Preflight).Execs
			p = []evidence.Descriptor{p[xIdentity], p[len(p)-1]} // identity read and dry-run
			Edit(f, rc.Intent, func(in *evidence.Intent) { in.Execs = slices.Clone(p) })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},

		// One run directory per run.
		{"chain: the final identity read is the first identity read's run, step renamed", audit.CodeExecRunDir, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.Receipt)
			id := Rec[evidence.Exec](f, rc.Execs[xIdentity])
			Edit(f, rc.Execs[xIdentityFinal], func(e *evidence.Exec) { *e = id; e.Step = evidence.StepIdentityFinal })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"chain: the convergence read in the apply's run directory", audit.CodeExecRunDir, func(f *Forger, fx *Fixture) evidence.Descriptor {
			apply := Rec[evidence.Exec](f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xApply])
			return execEdit(xConvergence, func(e *evidence.Exec) { inDir(e, dirOf(apply)) })(f, fx)
		}},
		{"chain: the apply's identity read in the preflight identity read's run directory", audit.CodeExecRunDir, func(f *Forger, fx *Fixture) evidence.Descriptor {
			pid := Rec[evidence.Exec](f, Rec[evidence.Preflight](f, fx.Roots.Preflight).Execs[xIdentity])
			return execEdit(xIdentity, func(e *evidence.Exec) { inDir(e, dirOf(pid)) })(f, fx)
		}},
		{"chain: a recovered receipt's apply in its earlier attempt's dry-run directory", audit.CodeExecRunDir, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt)
			dry := Rec[evidence.Exec](f, Rec[evidence.Intent](f, rc.Intent).Execs[xDryRun])
			Edit(f, rc.Execs[xApply], func(e *evidence.Exec) { inDir(e, dirOf(dry)) })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},

		// The execs of a chain in time order.
		{"chain: the final identity read started before the convergence read finished", audit.CodeExecTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			conv := Rec[evidence.Exec](f, Rec[evidence.Receipt](f, fx.Roots.Receipt).Execs[xConvergence])
			return execEdit(xIdentityFinal, func(e *evidence.Exec) { e.StartedAt = conv.StartedAt })(f, fx)
		}},
		{"chain: the apply's identity read started before the preflight's dry-run finished", audit.CodeExecTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			pdry := Rec[evidence.Exec](f, preflightDryRun(f, fx))
			return execEdit(xIdentity, func(e *evidence.Exec) { e.StartedAt = pdry.StartedAt })(f, fx)
		}},
		{"chain: a recovered receipt's identity read started before its earlier attempt's dry-run finished", audit.CodeExecTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt)
			dry := Rec[evidence.Exec](f, Rec[evidence.Intent](f, rc.Intent).Execs[xDryRun])
			Edit(f, rc.Execs[xIdentity], func(e *evidence.Exec) { e.StartedAt = dry.StartedAt })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},
		{"chain: a recovered receipt's earlier attempt after the receipt's apply", audit.CodeExecTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			rc := Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt)
			final := Rec[evidence.Exec](f, rc.Execs[xIdentityFinal])
			Edit(f, Rec[evidence.Intent](f, rc.Intent).Execs[xDryRun], func(e *evidence.Exec) { e.FinishedAt = final.FinishedAt })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},
		{"exec: apply finished before it started", audit.CodeExecTime, execEdit(xApply, func(e *evidence.Exec) { e.FinishedAt = "2001-02-03T04:05:06Z" })},
		{"exec: convergence startedAt with a +00:00 offset", audit.CodeExecTime, execEdit(xConvergence, func(e *evidence.Exec) {
			e.StartedAt = strings.TrimSuffix(e.StartedAt, "Z") + "+00:00"
		})},
		{"exec: apply startedAt in another zone, the same instant", audit.CodeExecTime, execEdit(xApply, func(e *evidence.Exec) {
			e.StartedAt = parseTime(e.StartedAt).In(time.FixedZone("", 3600)).Format(time.RFC3339Nano)
		})},
		{"exec: dry-run finishedAt with trailing zeros", audit.CodeExecTime, execEdit(xDryRun, func(e *evidence.Exec) {
			e.FinishedAt = parseTime(e.FinishedAt).Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000000000Z07:00")
		})},
		{"exec: identity-final startedAt not a time", audit.CodeExecTime, execEdit(xIdentityFinal, func(e *evidence.Exec) { e.StartedAt += "x" })},
		{"preflight: dry-run started before its identity read finished", audit.CodeExecTime, func(f *Forger, fx *Fixture) evidence.Descriptor {
			p := Rec[evidence.Preflight](f, fx.Roots.Preflight)
			id := Rec[evidence.Exec](f, p.Execs[xIdentity])
			Edit(f, preflightDryRun(f, fx), func(e *evidence.Exec) { e.StartedAt = id.StartedAt })
			return f.Rewrite(fx.Roots.Preflight)
		}},

		// Every argv number in the one form the ceremony writes.
		{"exec: argv[0] /proc/self/fd/012", audit.CodeArgvForm, execEdit(xApply, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/012" })},
		{"exec: argv[0] /proc/self/fd/2, a standard stream", audit.CodeArgvForm, execEdit(xIdentity, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/2" })},
		{"exec: argv[0] /proc/self/fd/0", audit.CodeArgvForm, execEdit(xConvergence, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/0" })},
		{"exec: argv[0] beyond any descriptor", audit.CodeArgvForm, execEdit(xDryRun, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/2147483648" })},
		{"exec: argv[0] with twenty-one digits", audit.CodeArgvForm, execEdit(xDryRun, func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/100000000000000000000" })},
		{"exec: run directory named with a leading zero", audit.CodeArgvForm, execEdit(xConvergence, func(e *evidence.Exec) {
			d := dirOf(*e)
			i := strings.LastIndex(d, "ql3-kubectl-") + len("ql3-kubectl-")
			inDir(e, d[:i]+"0"+d[i:])
		})},
		{"exec: run directory named beyond uint64", audit.CodeArgvForm, execEdit(xApply, func(e *evidence.Exec) { inDir(e, "/tmp/ql3-kubectl-18446744073709551616") })},
		{"preflight with its dry-run through /proc/self/fd/08, apply command re-pointed", audit.CodeArgvForm, func(f *Forger, fx *Fixture) evidence.Descriptor {
			Edit(f, preflightDryRun(f, fx), func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/08" })
			return f.Rewrite(fx.Roots.Receipt)
		}},
		{"intent: recovered receipt's earlier identity read through /proc/self/fd/0009", audit.CodeArgvForm, func(f *Forger, fx *Fixture) evidence.Descriptor {
			in := Rec[evidence.Intent](f, Rec[evidence.Receipt](f, fx.Roots.RecoveredReceipt).Intent)
			Edit(f, in.Execs[xIdentity], func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/0009" })
			return f.Rewrite(fx.Roots.RecoveredReceipt)
		}},
	}
}

// dirOf is the run directory an exec record's --kubeconfig names.
func dirOf(e evidence.Exec) string {
	return strings.TrimSuffix(strings.TrimPrefix(e.Argv[1], "--kubeconfig="), "/kubeconfig")
}

// inDir moves e into dir consistently: argv and environment name dir wherever they named its own.
func inDir(e *evidence.Exec, dir string) {
	old := dirOf(*e)
	for i := range e.Argv {
		e.Argv[i] = strings.Replace(e.Argv[i], old+"/", dir+"/", 1)
	}
	for i := range e.Env {
		if name, v, ok := strings.Cut(e.Env[i], "="); ok && (v == old || strings.HasPrefix(v, old+"/")) {
			e.Env[i] = name + "=" + dir + strings.TrimPrefix(v, old)
		}
	}
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Seed is one input of FuzzAuditMutatedRecord: Bytes in place of Object, an object of the straight
// receipt's closure, with the code the audit must then report.
type Seed struct {
	Name   string
	Object evidence.Descriptor
	Bytes  []byte
	Code   refuse.Code
}

// ChainSeeds are the chain cases a single replaced object of the straight receipt's closure can
// express. (A recovered receipt's reuse needs the recovered chain, outside the target's closure.)
func ChainSeeds(t testing.TB, fx *Fixture) []Seed {
	t.Helper()
	rc := snapRec[evidence.Receipt](t, fx.Snap, fx.Roots.Receipt)
	p := snapRec[evidence.Preflight](t, fx.Snap, fx.Roots.Preflight)
	exec := func(d evidence.Descriptor) evidence.Exec { return snapRec[evidence.Exec](t, fx.Snap, d) }
	edited := func(d evidence.Descriptor, edit func(*evidence.Exec)) []byte {
		e := exec(d)
		edit(&e)
		b, err := evidence.MarshalRecord(&e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	blob := func(d evidence.Descriptor) []byte { return fx.Snap["blobs/sha256/"+d.Digest.Encoded()] }
	return []Seed{
		{"chain-reuse-preflight-identity", rc.Execs[xIdentity], blob(p.Execs[xIdentity]), audit.CodeExecReused},
		{"chain-reuse-preflight-dry-run", rc.Execs[xDryRun], blob(p.Execs[len(p.Execs)-1]), audit.CodeExecReused},
		{"chain-identity-final-is-identity-renamed", rc.Execs[xIdentityFinal], edited(rc.Execs[xIdentity], func(e *evidence.Exec) {
			e.Step = evidence.StepIdentityFinal
		}), audit.CodeExecRunDir},
		{"chain-convergence-in-apply-dir", rc.Execs[xConvergence], edited(rc.Execs[xConvergence], func(e *evidence.Exec) {
			inDir(e, dirOf(exec(rc.Execs[xApply])))
		}), audit.CodeExecRunDir},
		{"chain-identity-final-before-convergence", rc.Execs[xIdentityFinal], edited(rc.Execs[xIdentityFinal], func(e *evidence.Exec) {
			e.StartedAt = exec(rc.Execs[xConvergence]).StartedAt
		}), audit.CodeExecTime},
		{"chain-apply-fd-leading-zero", rc.Execs[xApply], edited(rc.Execs[xApply], func(e *evidence.Exec) { e.Argv[0] = "/proc/self/fd/012" }), audit.CodeArgvForm},
	}
}

func snapRec[T any](t testing.TB, snap Snapshot, d evidence.Descriptor) T {
	t.Helper()
	var v T
	if err := evidence.DecodeRecord(d.MediaType, snap["blobs/sha256/"+d.Digest.Encoded()], &v); err != nil {
		t.Fatalf("audittest: decode %s: %v", d.Digest, err)
	}
	return v
}
