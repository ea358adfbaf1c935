package audittest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/refuse"
)

// Fixture is a store of two real apply ceremonies (Roots) and what the rewrite cases splice in.
type Fixture struct {
	Snap  Snapshot
	Roots Roots
	// OtherTarget is a real preflight of the straight ceremony's release through another context
	// of the same kubeconfig (another target, another kubeconfig summary). Only the live tests
	// have one; offline, the recovered ceremony's preflight (another namespace, so another
	// manifest and target) stands in.
	OtherTarget evidence.Descriptor
}

// Rewrite is one forged record set: records rewritten canonically under their new digests, every
// reference re-pointed, so that everything hashes fine and only a semantic check can tell.
type Rewrite struct {
	Name string
	// Code is the first finding the audit must report, published or not; "" for a control
	// whose forgery changes only what the audit does not check: it must pass once published.
	Code refuse.Code
	// Forge forges in f and returns the new root to audit.
	Forge func(f *Forger, fx *Fixture) evidence.Descriptor
}

// Rec decodes the record d names in f's store.
func Rec[T any](f *Forger, d evidence.Descriptor) T {
	f.t.Helper()
	var v T
	if err := evidence.DecodeRecord(d.MediaType, f.Read(d.Digest), &v); err != nil {
		f.t.Fatalf("forger: decode %s: %v", d.Digest, err)
	}
	return v
}

// EditJSON is Edit on the generic form of the record (numbers kept exact), for edits no Go type
// can express: an unknown member, a missing one.
func EditJSON(f *Forger, d evidence.Descriptor, edit func(map[string]any)) evidence.Descriptor {
	f.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(f.Read(d.Digest)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		f.t.Fatal(err)
	}
	edit(m)
	b, err := evidence.MarshalRecord(m)
	if err != nil {
		f.t.Fatal(err)
	}
	nd := f.Replace(d.Digest, b)
	nd.MediaType = d.MediaType
	return nd
}

// receiptEdit forges the straight receipt with edit applied.
func receiptEdit(edit func(*evidence.Receipt)) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		Edit(f, fx.Roots.Receipt, edit)
		return f.Rewrite(fx.Roots.Receipt)
	}
}

// execEdit forges exec i of the straight receipt and re-points the chain to it.
func execEdit(i int, edit func(*evidence.Exec)) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		rc := Rec[evidence.Receipt](f, fx.Roots.Receipt)
		Edit(f, rc.Execs[i], edit)
		return f.Rewrite(fx.Roots.Receipt)
	}
}

// stdoutEdit stores edited stdout of exec i of root (receipt or preflight) and re-points the exec
// (descriptor and byte count) and the chain to it.
func stdoutEdit(preflight bool, i int, edit func(f *Forger, fx *Fixture, out []byte) []byte) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		root := fx.Roots.Receipt
		execs := Rec[evidence.Receipt](f, root).Execs
		if preflight {
			root = fx.Roots.Preflight
			execs = Rec[evidence.Preflight](f, root).Execs
		}
		e := Rec[evidence.Exec](f, execs[i])
		out := edit(f, fx, f.Read(e.Stdout.Digest))
		f.put(out)
		Edit(f, execs[i], func(e *evidence.Exec) {
			e.Stdout.Digest, e.Stdout.Size, e.StdoutBytes = evidence.FromBytes(out), int64(len(out)), int64(len(out))
		})
		return f.Rewrite(root)
	}
}

// inputEdit forges the straight receipt's input record of role with edit applied.
func inputEdit(role string, edit func(f *Forger, fx *Fixture, in *evidence.Input)) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		in := Rec[evidence.Receipt](f, fx.Roots.Receipt).Inputs
		d := map[string]evidence.Descriptor{evidence.RoleCommandFile: in.CommandFile, evidence.RoleManifest: in.Manifest,
			evidence.RoleLockReport: in.LockReport, evidence.RoleKubeconfig: in.Kubeconfig, evidence.RoleKubectl: in.Kubectl}[role]
		Edit(f, d, func(in *evidence.Input) { edit(f, fx, in) })
		return f.Rewrite(fx.Roots.Receipt)
	}
}

// preflightEdit forges the straight ceremony's preflight report (the subject) with edit applied.
func preflightEdit(edit func(*evidence.Preflight)) func(*Forger, *Fixture) evidence.Descriptor {
	return func(f *Forger, fx *Fixture) evidence.Descriptor {
		Edit(f, fx.Roots.Preflight, edit)
		return f.Rewrite(fx.Roots.Preflight)
	}
}

// otherUID returns a UID of the same form that differs in its last character.
func otherUID(u string) string {
	if strings.HasSuffix(u, "a") {
		return u[:len(u)-1] + "b"
	}
	return u[:len(u)-1] + "a"
}

// otherTarget is the fixture's preflight of another target.
func otherTarget(fx *Fixture) evidence.Descriptor {
	if fx.OtherTarget.Digest != "" {
		return fx.OtherTarget
	}
	return fx.Roots.RecoveredPreflight
}

// RunRewrites forges every case in its own copy of the fixture's store and audits the forged
// root twice: as forged (the index still names the genuine record, so the published check fails
// too, but after the case's own finding: the index check runs last), and published (the index
// re-pointed, so only the case's semantic check can catch it).
func RunRewrites(t *testing.T, fx *Fixture, cases []Rewrite) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			root := fx.Snap.Materialize(t)
			f := NewForger(t, root)
			nr := c.Forge(f, fx)
			if nr.Digest == fx.Roots.Receipt.Digest || nr.Digest == fx.Roots.Preflight.Digest || nr.Digest == fx.Roots.RecoveredReceipt.Digest {
				t.Fatalf("the forgery changed nothing")
			}
			want := c.Code
			if want == "" {
				want = audit.CodeUnpublished
			}
			rep := Audit(t, root, nr.Digest)
			WantCode(t, rep, want)
			if pc, ran := CheckOf(rep, "published"); ran && (pc.OK || pc.Code != audit.CodeUnpublished) {
				t.Fatalf("unpublished forgery: published check %+v", pc)
			}
			f.Publish(nr)
			rep = Audit(t, root, nr.Digest)
			if c.Code == "" {
				WantPass(t, rep)
				return
			}
			WantCode(t, rep, c.Code)
			for _, ch := range rep.Checks {
				if strings.HasSuffix(ch.Name, "published") && !ch.OK {
					t.Fatalf("published forgery: %s check failed: %s", ch.Name, ch.Detail)
				}
			}
		})
	}
}
